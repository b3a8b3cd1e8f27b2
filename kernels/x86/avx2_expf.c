/* avx2_expf.c - glibc's expf (kernels/expf.h) four lanes at a time: the
 * reference's double operations in the same order, fused where it fuses,
 * the table through a gather; a step with a lane of |x| >= 88 or NaN, and
 * the tail, go through the reference, so every value is its bits. */
#include "kernels/x86/simd_common.h"

#include "kernels/expf.h"
#include "kernels/expf_impl.h"

#ifdef QK_X86

/* expf of the 4 floats v (as the reference computes the main path). */
QK_TARGET_AVX2 static inline __m128 expf4(__m128 v)
{
    const __m256d xd = _mm256_cvtps_pd(v), inv = _mm256_set1_pd(QK_EXPF_INVLN2N);
    const __m256d kds = _mm256_fmadd_pd(inv, xd, _mm256_set1_pd(QK_EXPF_SHIFT));
    const __m256i ki = _mm256_castpd_si256(kds);
    const __m256d kd = _mm256_sub_pd(kds, _mm256_set1_pd(QK_EXPF_SHIFT));
    const __m256d r = _mm256_fmsub_pd(inv, xd, kd);
    const __m256i t = _mm256_i64gather_epi64((const long long *)qk_expf_tab,
                                             _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8);
    const __m256d s = _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64(ki, 47)));
    const __m256d z = _mm256_fmadd_pd(_mm256_set1_pd(QK_EXPF_C0), r, _mm256_set1_pd(QK_EXPF_C1));
    const __m256d r2 = _mm256_mul_pd(r, r);
    const __m256d y = _mm256_fmadd_pd(z, r2, _mm256_fmadd_pd(r, _mm256_set1_pd(QK_EXPF_C2), _mm256_set1_pd(1.0)));
    return _mm256_cvtpd_ps(_mm256_mul_pd(y, s));
}

/* expf of the 8 floats v. */
QK_TARGET_AVX2 static inline __m256 expf8(__m256 v)
{
    return _mm256_set_m128(expf4(_mm256_extractf128_ps(v, 1)), expf4(_mm256_castps256_ps128(v)));
}

/* The lanes of v whose exponent field (bits 20..30 of the float) is above
 * 0x42a: |v| >= 88, infinities, NaN. */
QK_TARGET_AVX2 static inline int special8(__m256 v)
{
    const __m256i top = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(v), 20), _mm256_set1_epi32(0x7ff));
    return _mm256_movemask_epi8(_mm256_cmpgt_epi32(top, _mm256_set1_epi32(0x42a)));
}

QK_TARGET_AVX2 static void expf_n(const float *x, float sub, float *out, size_t n)
{
    const __m256 vs = _mm256_set1_ps(sub);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_sub_ps(_mm256_loadu_ps(x + i), vs);
        if (special8(v))
            qk_expf_ref(x + i, sub, out + i, 8);
        else
            _mm256_storeu_ps(out + i, expf8(v));
    }
    qk_expf_ref(x + i, sub, out + i, n - i); /* the tail */
}

QK_TARGET_AVX2 static void swiglu(float *g, const float *u, size_t n)
{
    const __m256 one = _mm256_set1_ps(1.0f), neg = _mm256_set1_ps(-0.0f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i), v = _mm256_xor_ps(x, neg);
        if (special8(v))
            qk_swiglu_ref(g + i, u + i, 8);
        else
            _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, expf8(v))), _mm256_loadu_ps(u + i)));
    }
    qk_swiglu_ref(g + i, u + i, n - i);
}

const qk_expf_ops qk_x86_avx2_expf_ops = {.expf = expf_n, .swiglu = swiglu};

#endif
