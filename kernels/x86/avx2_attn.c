/* avx2_attn.c - the attention inner loops of attn.h in AVX2 vectors: the
 * eight lanes of the score are the eight float lanes of one register, so
 * the arithmetic is the scalar reference's, operation for operation. */
#include "simd_common.h"

#ifdef QK_X86
#include <immintrin.h>
#include <math.h>

#include "attn.h"
#include "half.h"

QK_TARGET_AVX2 static float score_f32(const float *q, const float *k, int n)
{
    __m256 acc = _mm256_setzero_ps();
    const int n8 = n - n % 8;
    for (int i = 0; i < n8; i += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(k + i), acc);
    float s = qk_hsum8_ps(acc);
    for (int i = n8; i < n; i++)
        s = fmaf(q[i], k[i], s);
    return s;
}

QK_TARGET_AVX2 static void axpy_f32(float *acc, float w, const float *v, int n)
{
    const __m256 wv = _mm256_set1_ps(w);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(wv, _mm256_loadu_ps(v + i), _mm256_loadu_ps(acc + i)));
    for (; i < n; i++)
        acc[i] = fmaf(w, v[i], acc[i]);
}

QK_TARGET_AVX2 static void scale(float *acc, float s, int n)
{
    const __m256 sv = _mm256_set1_ps(s);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_mul_ps(_mm256_loadu_ps(acc + i), sv));
    for (; i < n; i++)
        acc[i] *= s;
}

QK_TARGET_AVX2 static void f16_row(const uint16_t *h, float *f, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++)
        f[i] = qk_f16_to_f32(h[i]);
}

/* Four queries at a time: four independent fused chains against one key. */
QK_TARGET_AVX2 static void score_f32_n(const float *const *q, int nq, const float *k, int n,
                                       float *out)
{
    const int n8 = n - n % 8;
    int j = 0;
    for (; j + 4 <= nq; j += 4) {
        const float *q0 = q[j], *q1 = q[j + 1], *q2 = q[j + 2], *q3 = q[j + 3];
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int i = 0; i < n8; i += 8) {
            const __m256 kv = _mm256_loadu_ps(k + i);
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q0 + i), kv, a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q1 + i), kv, a1);
            a2 = _mm256_fmadd_ps(_mm256_loadu_ps(q2 + i), kv, a2);
            a3 = _mm256_fmadd_ps(_mm256_loadu_ps(q3 + i), kv, a3);
        }
        float s[4] = {qk_hsum8_ps(a0), qk_hsum8_ps(a1), qk_hsum8_ps(a2), qk_hsum8_ps(a3)};
        for (int t = 0; t < 4; t++) {
            for (int i = n8; i < n; i++)
                s[t] = fmaf(q[j + t][i], k[i], s[t]);
            out[j + t] = s[t];
        }
    }
    for (; j < nq; j++)
        out[j] = score_f32(q[j], k, n);
}

const qk_attn_kernels qk_x86_avx2_attn = {score_f32, axpy_f32, scale, f16_row, score_f32_n};

#endif
