/* attn.c - the scalar reference of the attention inner loops (attn.h). */
#include "attn.h"

#include <math.h>

#include "cpu.h"
#include "half.h"
#include "x86/x86.h"

/* ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)) */
static float lanes_sum(const float *l)
{
    const float a0 = l[0] + l[4], a1 = l[1] + l[5], a2 = l[2] + l[6], a3 = l[3] + l[7];
    return (a0 + a2) + (a1 + a3);
}

static float score_f32(const float *q, const float *k, int n)
{
    float l[8] = {0};
    const int n8 = n - n % 8;
    for (int i = 0; i < n8; i++)
        l[i % 8] = fmaf(q[i], k[i], l[i % 8]);
    float s = lanes_sum(l);
    for (int i = n8; i < n; i++)
        s = fmaf(q[i], k[i], s);
    return s;
}

static void axpy_f32(float *acc, float w, const float *v, int n)
{
    for (int i = 0; i < n; i++)
        acc[i] = fmaf(w, v[i], acc[i]);
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

static void score_f32_n(const float *const *q, int nq, const float *k, int n, float *out)
{
    for (int j = 0; j < nq; j++)
        out[j] = score_f32(q[j], k, n);
}

static const qk_attn_kernels scalar = {score_f32, axpy_f32, scale, f16_row, score_f32_n};

const qk_attn_kernels *qk_attn_kernels_at(int level)
{
    if (level < 0 || level > (int)qk_cpu_supported())
        return NULL;
#ifdef QK_X86
    if (level >= QK_CPU_AVX2)
        return &qk_x86_avx2_attn;
#endif
    return &scalar;
}

const qk_attn_kernels *qk_attn_kernels_active(void) { return qk_attn_kernels_at(qk_cpu_level_active()); }
