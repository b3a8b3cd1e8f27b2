/* attn.c - the scalar reference of the attention inner loops (attn.h). */
#include "kernels/attn.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/cpu.h"
#include "kernels/half.h"
#include "kernels/x86/x86.h"

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* n = round(x / ln 2) by the 1.5 * 2^23 shifter; b = x - n ln 2 in two
 * fused steps; exp(b) - 1 ~ j, a polynomial in b and b^2; the result is
 * k (j + 1) with k = 2^n from z's low bits, or, when |n| > 126 and 2^n
 * alone would leave the float range, (2^n / s1)(j + 1) s1 with the scale
 * split in two, or s1^2 (0 or inf) when |n| > 192. */
float qk_attn_expf(float x)
{
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const uint32_t e = bits(z) << 23;
    const float k = from_bits(e + 0x3f800000u);
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                              fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                         u, 0x1.ffffecp-1f * b);
    if (!(fabsf(n) > 126.0f))
        return fmaf(j, k, k);
    const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
    const float s1 = from_bits(g + 0x7f000000u), s2 = from_bits(e - g);
    if (fabsf(n) > 192.0f)
        return s1 * s1;
    return fmaf(s2, j, s2) * s1;
}

static void scores(const float *qt, int nqp, const float *kf, int nk, int hd, float scale,
                   float *st)
{
    for (int k = 0; k < nk; k++)
        for (int i = 0; i < nqp; i++) {
            float s = 0.0f;
            for (int d = 0; d < hd; d++)
                s = fmaf(kf[(size_t)k * hd + d], qt[(size_t)d * nqp + i], s);
            st[(size_t)k * nqp + i] = s * scale;
        }
}

static void softmax(float *st, int nqp, int nk, int p0, const int *pos, float *M, float *S,
                    float *ms)
{
    for (int i = 0; i < nqp; i++) {
        const int nv = pos[i] + 1 - p0 < nk ? pos[i] + 1 - p0 : nk;
        float m = -INFINITY;
        for (int k = 0; k < nv; k++)
            m = st[(size_t)k * nqp + i] > m ? st[(size_t)k * nqp + i] : m;
        ms[i] = 1.0f;
        const bool skip = m == -INFINITY;
        if (!skip) {
            const float mn = fmaxf(M[i], m);
            if (mn > M[i]) {
                ms[i] = expf(M[i] - mn);
                S[i] *= ms[i];
            }
            M[i] = mn;
        }
        double sum = 0.0;
        for (int k0 = 0; k0 < nk; k0 += 8) {
            float w[8] = {0};
            for (int l = 0; l < 8 && k0 + l < nk; l++) {
                float *x = &st[(size_t)(k0 + l) * nqp + i];
                w[l] = !skip && k0 + l < nv ? qk_attn_expf(*x - M[i]) : 0.0f;
                *x = w[l];
            }
            sum += (double)(((w[0] + w[4]) + (w[2] + w[6])) + ((w[1] + w[5]) + (w[3] + w[7])));
        }
        if (!skip)
            S[i] = (float)((double)S[i] + sum);
    }
}

void qk_attn_pv_cols(float *acc, int nq, int hdv, int d0, const float *st, int nqp, const float *vf, int nk)
{
    for (int i = 0; i < nq; i++)
        for (int d = d0; d < hdv; d++) {
            float a = acc[(size_t)i * hdv + d];
            for (int k = 0; k < nk; k++)
                a = fmaf(st[(size_t)k * nqp + i], vf[(size_t)k * hdv + d], a);
            acc[(size_t)i * hdv + d] = a;
        }
}

static void pv(float *acc, int nq, int hdv, const float *st, int nqp, const float *vf, int nk)
{
    qk_attn_pv_cols(acc, nq, hdv, 0, st, nqp, vf, nk);
}

static void scale(float *acc, float s, int n)
{
    for (int i = 0; i < n; i++)
        acc[i] *= s;
}

static void f16_row(const uint16_t *h, float *f, int n)
{
    for (int i = 0; i < n; i++)
        f[i] = qk_f16_to_f32(h[i]);
}

/* Key k's dimension d of rows (F16 or float, stride elements apart); 0 for
 * the keys k >= nk that pad the last group of four. */
static float key_elem(const void *rows, int f16, size_t stride, int nk, int k, int d)
{
    const size_t o = (size_t)k * stride + (size_t)d;
    return k >= nk ? 0.0f : f16 ? qk_f16_to_f32(((const uint16_t *)rows)[o]) : ((const float *)rows)[o];
}

static void k4_rows(const void *rows, int f16, size_t stride, int nk, int hd, float *k4)
{
    for (int k = 0; k < (nk + 3) / 4 * 4; k++)
        for (int d = 0; d < hd; d++)
            k4[((size_t)(k / 4) * hd + (size_t)qk_attn_k4_pos(d, hd)) * 4 + (size_t)(k % 4)] =
                key_elem(rows, f16, stride, nk, k, d);
}

void qk_attn_k4_cols(const void *rows, int f16, size_t stride, int nr, int d0, int hd, float *dst)
{
    for (int d = d0; d < hd; d++)
        for (int j = 0; j < 4; j++)
            dst[(size_t)d * 4 + (size_t)j] = key_elem(rows, f16, stride, nr, j, d);
}

static void scores4(const float *qt, int nqp, int nq, const float *k4, int nk, int hd, float scale, float *st)
{
    for (int k = 0; k < nk; k++)
        for (int i = 0; i < nq; i++) {
            float s = 0.0f;
            for (int d = 0; d < hd; d++)
                s = fmaf(k4[((size_t)(k / 4) * hd + (size_t)qk_attn_k4_pos(d, hd)) * 4 + (size_t)(k % 4)],
                         qt[(size_t)d * nqp + i], s);
            st[(size_t)k * nqp + i] = s * scale;
        }
}

static const qk_attn_kernels scalar = {scores, softmax, pv, scale, f16_row, k4_rows, scores4};

const qk_attn_kernels *qk_attn_kernels_at(int level)
{
    if (level < 0 || level > (int)qk_cpu_supported())
        return NULL;
#ifdef QK_X86
    if (level >= QK_CPU_AVX512)
        return &qk_x86_avx512_attn;
    if (level >= QK_CPU_AVX2)
        return &qk_x86_avx2_attn;
#endif
    return &scalar;
}

const qk_attn_kernels *qk_attn_kernels_active(void) { return qk_attn_kernels_at(qk_cpu_level_active()); }
