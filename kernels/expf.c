/* expf.c - the scalar reference of glibc's expf (see expf.h), its table,
 * and the choice of kernel by CPU level. */
#include "kernels/expf.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu.h"
#include "kernels/expf_impl.h"
#include "kernels/half.h"
#include "kernels/x86/x86.h"

/* 2^(i/32) rounded to the nearest double, as bits, minus i << 47 (the
 * values of glibc's __exp2f_data.tab; each entry checked against 2^(i/32)
 * computed to 60 digits), so that adding k << 47 for k = i + 32m gives
 * 2^(k/32). */
const uint64_t qk_expf_tab[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
    0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
    0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
    0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};

static inline double f64_of(uint64_t u)
{
    double d;
    memcpy(&d, &u, 8);
    return d;
}

static inline uint64_t f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

/* |x| >= 88, infinities and NaN: glibc's branch before the main path
 * (which a finite x in [-0x1.9d1d9ep6, 0x1.62e42ep6] still takes). */
static int expf_special(float x, float *y)
{
    const uint32_t u = qk_f32_bits(x);
    if (u == 0xff800000u) {
        *y = 0.0f;
        return 1;
    }
    if (((u >> 20) & 0x7ff) >= 0x7f8) { /* +inf or NaN */
        *y = x + x;
        return 1;
    }
    if (x > 0x1.62e42ep6f) { /* __math_oflowf: 0x1p97f * 0x1p97f */
        *y = INFINITY;
        return 1;
    }
    if (x < -0x1.9fe368p6f) { /* __math_uflowf: 0x1p-95f * 0x1p-95f */
        *y = 0.0f;
        return 1;
    }
    if (x < -0x1.9d1d9ep6f) { /* __math_may_uflowf: 0x1.4p-75f squared, the least subnormal */
        *y = 0x1p-149f;
        return 1;
    }
    return 0;
}

float qk_expf(float x)
{
    if (((qk_f32_bits(x) >> 20) & 0x7ff) > 0x42a) {
        float y;
        if (expf_special(x, &y))
            return y;
    }
    const double xd = x;
    const double kds = fma(QK_EXPF_INVLN2N, xd, QK_EXPF_SHIFT);
    const uint64_t ki = f64_bits(kds);
    const double kd = kds - QK_EXPF_SHIFT;
    const double r = fma(QK_EXPF_INVLN2N, xd, -kd);
    const double s = f64_of(qk_expf_tab[ki % 32] + (ki << 47));
    const double z = fma(QK_EXPF_C0, r, QK_EXPF_C1);
    const double r2 = r * r;
    const double y = fma(z, r2, fma(r, QK_EXPF_C2, 1.0));
    return (float)(y * s);
}

void qk_expf_ref(const float *x, float sub, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = qk_expf(x[i] - sub);
}

void qk_swiglu_ref(float *g, const float *u, size_t n)
{
    for (size_t i = 0; i < n; i++)
        g[i] = g[i] / (1.0f + qk_expf(-g[i])) * u[i];
}

static const qk_expf_ops ref_ops = {.expf = qk_expf_ref, .swiglu = qk_swiglu_ref};

const qk_expf_ops *qk_expf_ops_at(int level)
{
    if (level < 0 || level > (int)qk_cpu_supported())
        return NULL;
#ifdef QK_X86
    if (level >= QK_CPU_AVX512)
        return &qk_x86_avx512_expf_ops;
    if (level >= QK_CPU_AVX2)
        return &qk_x86_avx2_expf_ops;
#endif
    return &ref_ops;
}

const qk_expf_ops *qk_expf_ops_active(void) { return qk_expf_ops_at(qk_cpu_level_active()); }

double qk_expf_sum(const float *x, float sub, size_t n)
{
    const qk_expf_fn k = qk_expf_ops_active()->expf;
    float e[512];
    double s = 0.0;
    for (size_t i0 = 0; i0 < n; i0 += 512) {
        const size_t m = n - i0 < 512 ? n - i0 : 512;
        k(x + i0, sub, e, m);
        for (size_t j = 0; j < m; j++)
            s += e[j];
    }
    return s;
}

/* The scalar definition of qk_row_max. */
static float row_max_loop(const float *x, size_t n)
{
    float m = x[0];
    for (size_t i = 1; i < n; i++)
        m = x[i] > m ? x[i] : m;
    return m;
}

float qk_row_max(const float *x, size_t n)
{
    typedef float v4 __attribute__((vector_size(16)));
    typedef int32_t i4 __attribute__((vector_size(16)));
    if (n < 32)
        return row_max_loop(x, n);
    /* four lanes a vector, four vectors: lane k keeps the maximum of its
     * elements as the loop does (a NaN element never replaces it; a NaN
     * x[0] is never replaced), then the loop over the 16 lanes from x[0] */
    v4 a[4];
    for (int k = 0; k < 4; k++)
        a[k] = (v4){x[0], x[0], x[0], x[0]};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 4; k++) {
            v4 v;
            memcpy(&v, x + i + 4 * k, sizeof v);
            const i4 gt = v > a[k];
            a[k] = (v4)((gt & (i4)v) | (~gt & (i4)a[k]));
        }
    float m = x[0];
    for (int k = 0; k < 4; k++)
        for (int l = 0; l < 4; l++)
            m = a[k][l] > m ? a[k][l] : m;
    for (; i < n; i++)
        m = x[i] > m ? x[i] : m;
    /* which zero the loop keeps depends on the order (+0 and -0 compare
     * equal): a zero maximum is the loop's own */
    return m == 0.0f ? row_max_loop(x, n) : m;
}
