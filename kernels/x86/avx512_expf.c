/* avx512_expf.c - glibc's expf (kernels/expf.h) eight lanes of doubles at
 * a time, sixteen floats a step: the reference's operations in the same
 * order, fused where it fuses, the 32-entry table in four registers
 * (vpermt2q on the low four bits of the index, bit 4 choosing the pair);
 * a step with a lane of |x| >= 88 or NaN goes through the reference. */
#include "kernels/x86/simd_common.h"

#include "kernels/expf.h"
#include "kernels/expf_impl.h"

#ifdef QK_X86

typedef struct {
    __m512i t0, t1, t2, t3;
} tab4;

QK_TARGET_AVX512 static inline __m256 expf8(__m256 v, const tab4 *T)
{
    const __m512d xd = _mm512_cvtps_pd(v), inv = _mm512_set1_pd(QK_EXPF_INVLN2N);
    const __m512d kds = _mm512_fmadd_pd(inv, xd, _mm512_set1_pd(QK_EXPF_SHIFT));
    const __m512i ki = _mm512_castpd_si512(kds);
    const __m512d kd = _mm512_sub_pd(kds, _mm512_set1_pd(QK_EXPF_SHIFT));
    const __m512d r = _mm512_fmsub_pd(inv, xd, kd);
    const __m512i lo = _mm512_permutex2var_epi64(T->t0, ki, T->t1), hi = _mm512_permutex2var_epi64(T->t2, ki, T->t3);
    const __m512i t = _mm512_mask_blend_epi64(_mm512_test_epi64_mask(ki, _mm512_set1_epi64(16)), lo, hi);
    const __m512d s = _mm512_castsi512_pd(_mm512_add_epi64(t, _mm512_slli_epi64(ki, 47)));
    const __m512d z = _mm512_fmadd_pd(_mm512_set1_pd(QK_EXPF_C0), r, _mm512_set1_pd(QK_EXPF_C1));
    const __m512d r2 = _mm512_mul_pd(r, r);
    const __m512d y = _mm512_fmadd_pd(z, r2, _mm512_fmadd_pd(r, _mm512_set1_pd(QK_EXPF_C2), _mm512_set1_pd(1.0)));
    return _mm512_cvtpd_ps(_mm512_mul_pd(y, s));
}

QK_TARGET_AVX512 static inline tab4 tab_load(void)
{
    return (tab4){_mm512_loadu_si512(qk_expf_tab), _mm512_loadu_si512(qk_expf_tab + 8),
                  _mm512_loadu_si512(qk_expf_tab + 16), _mm512_loadu_si512(qk_expf_tab + 24)};
}

/* expf of the 16 floats v. */
QK_TARGET_AVX512 static inline __m512 expf16(__m512 v, const tab4 *T)
{
    return _mm512_insertf32x8(_mm512_castps256_ps512(expf8(_mm512_castps512_ps256(v), T)),
                              expf8(_mm512_extractf32x8_ps(v, 1), T), 1);
}

/* The lanes of m whose exponent field (bits 20..30 of the float) is above
 * 0x42a: |v| >= 88, infinities, NaN. */
QK_TARGET_AVX512 static inline __mmask16 special16(__m512 v, __mmask16 m)
{
    const __m512i top = _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(v), 20), _mm512_set1_epi32(0x7ff));
    return _mm512_mask_cmpgt_epi32_mask(m, top, _mm512_set1_epi32(0x42a));
}

QK_TARGET_AVX512 static void expf_n(const float *x, float sub, float *out, size_t n)
{
    const tab4 T = tab_load();
    const __m512 vs = _mm512_set1_ps(sub);
    for (size_t i = 0; i < n; i += 16) {
        const size_t k = n - i < 16 ? n - i : 16;
        const __mmask16 m = (__mmask16)((1u << k) - 1);
        const __m512 v = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vs);
        if (special16(v, m))
            qk_expf_ref(x + i, sub, out + i, k);
        else
            _mm512_mask_storeu_ps(out + i, m, expf16(v, &T));
    }
}

QK_TARGET_AVX512 static void swiglu(float *g, const float *u, size_t n)
{
    const tab4 T = tab_load();
    const __m512 one = _mm512_set1_ps(1.0f);
    for (size_t i = 0; i < n; i += 16) {
        const size_t k = n - i < 16 ? n - i : 16;
        const __mmask16 m = (__mmask16)((1u << k) - 1);
        const __m512 x = _mm512_maskz_loadu_ps(m, g + i), v = _mm512_xor_ps(x, _mm512_set1_ps(-0.0f));
        if (special16(v, m))
            qk_swiglu_ref(g + i, u + i, k);
        else
            _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(_mm512_div_ps(x, _mm512_add_ps(one, expf16(v, &T))),
                                                          _mm512_maskz_loadu_ps(m, u + i)));
    }
}

const qk_expf_ops qk_x86_avx512_expf_ops = {.expf = expf_n, .swiglu = swiglu};

#endif
