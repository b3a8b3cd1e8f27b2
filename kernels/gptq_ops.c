/* gptq_ops.c - the scalar reference of GPTQ's loops (see gptq_ops.h) and the
 * choice of kernels by CPU level. */
#include "kernels/gptq_ops.h"

#include <string.h>

#include "kernels/cpu.h"
#include "kernels/x86/x86.h"

double qk_gptq_dot4(const double *a, const double *b, int64_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t m = 0;
    for (; m + 4 <= n; m += 4) {
        s0 += a[m] * b[m];
        s1 += a[m + 1] * b[m + 1];
        s2 += a[m + 2] * b[m + 2];
        s3 += a[m + 3] * b[m + 3];
    }
    for (; m < n; m++)
        s0 += a[m] * b[m];
    return (s0 + s1) + (s2 + s3);
}

/* dot4 with b read every bs doubles */
static double dot4_strided(const double *a, const double *b, int64_t bs, int64_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t m = 0;
    for (; m + 4 <= n; m += 4) {
        s0 += a[m] * b[m * bs];
        s1 += a[m + 1] * b[(m + 1) * bs];
        s2 += a[m + 2] * b[(m + 2) * bs];
        s3 += a[m + 3] * b[(m + 3) * bs];
    }
    for (; m < n; m++)
        s0 += a[m] * b[m * bs];
    return (s0 + s1) + (s2 + s3);
}

static void chol_rows_ref(double *a, int64_t n, int64_t r0, int64_t r1, int64_t jlo, int64_t jhi)
{
    for (int64_t r = r0; r < r1; r++) {
        double *vr = a + r * n;
        for (int64_t j = jhi - 1; j >= jlo; j--) {
            const double *vj = a + j * n;
            vr[j] = (vr[j] - qk_gptq_dot4(vr + j + 1, vj + j + 1, n - j - 1)) / vj[j];
        }
    }
}

static void inv_cols_ref(const double *v, int64_t n, double *p, int64_t j0, int64_t w)
{
    memset(p, 0, (size_t)(n * w) * sizeof *p);
    for (int64_t c = 0; c < w; c++) {
        const int64_t j = j0 + c;
        p[j * w + c] = 1.0 / v[j * n + j];
        for (int64_t i = j - 1; i >= 0; i--) {
            const double *vi = v + i * n;
            p[i * w + c] = -dot4_strided(vi + i + 1, p + (i + 1) * w + c, w, j - i) / vi[i];
        }
    }
}

static void sub16_ref(float *w, const float *u, int64_t ldu, const float *e, int64_t nk, int64_t np)
{
    for (int64_t p = 0; p < np; p++)
        for (int64_t k = 0; k < nk; k++) {
            const float uu = u[k * ldu + p];
            for (int r = 0; r < 16; r++)
                w[p * 16 + r] -= uu * e[k * 16 + r];
        }
}

static const qk_gptq_ops ref_ops = {chol_rows_ref, inv_cols_ref, sub16_ref};

const qk_gptq_ops *qk_gptq_ops_at(int level)
{
    if (level < 0 || level > (int)qk_cpu_supported())
        return NULL;
#ifdef QK_X86
    if (level >= QK_CPU_AVX512)
        return &qk_x86_avx512_gptq;
    if (level >= QK_CPU_AVX2)
        return &qk_x86_avx2_gptq;
#endif
    return &ref_ops;
}

const qk_gptq_ops *qk_gptq_ops_active(void) { return qk_gptq_ops_at(qk_cpu_level_active()); }
