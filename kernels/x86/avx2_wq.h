/* avx2_wq.h - the AVX2 steps that the parted layouts' products share
 * (avx2_wq.c's float products, avx2_wq_nv4.c's NVFP4 W4A4, avx2_wq_f8.c's
 * FP8 W8A8, avx2_wq_i8.c's INT8 W8A8; internal to kernels/x86). */
#ifndef QK_X86_AVX2_WQ_H
#define QK_X86_AVX2_WQ_H

#include "kernels/x86/simd_common.h"

#include "kernels/fp4.h"
#include "kernels/wq_impl.h"

#ifdef QK_X86

/* E4M3 bytes -> floats / 2^8, exactly: each byte's value bits placed as an
 * F16's exponent and mantissa with the sign on top (b << 8, arithmetic
 * shift right by one, the copy of the sign in bit 14 cleared). */
QK_TARGET_AVX2 static inline __m256 e4m3x8_div256(__m128i b8)
{
    const __m128i h = _mm_srai_epi16(_mm_unpacklo_epi8(_mm_setzero_si128(), b8), 1);
    return _mm256_cvtph_ps(_mm_and_si128(h, _mm_set1_epi16((short)0xBFFF)));
}

/* E4M3 bytes -> floats, exactly. */
QK_TARGET_AVX2 static inline __m256 e4m3x8(__m128i b8);

/* The multipliers of an FP4 row's groups [j0, j0 + m) (m <= 8) into mv, as
 * qk_wq_fp4_mult gives them: 8 at a time (E4M3 scale / g or * g, E8M0
 * 2^(e - 127) with 0 -> 2^-127 and 255 -> NaN), the rest one by one. */
QK_TARGET_AVX2 static inline void fp4_mults(const qk_wq *w, const uint8_t *sb, int m, float *mv)
{
    if (m < 8) {
        for (int j = 0; j < m; j++)
            mv[j] = qk_wq_fp4_mult(w, sb[j]);
        return;
    }
    const __m128i b8 = _mm_loadl_epi64((const __m128i *)sb);
    __m256 v;
    if (w->s.type == QK_E8M0) {
        const __m256i e = _mm256_cvtepu8_epi32(b8);
        __m256i bits = _mm256_slli_epi32(e, 23);
        bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x00400000), _mm256_cmpeq_epi32(e, _mm256_setzero_si256()));
        bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x7fc00000), _mm256_cmpeq_epi32(e, _mm256_set1_epi32(255)));
        v = _mm256_castsi256_ps(bits);
    } else {
        v = e4m3x8(b8);
        v = w->g_div ? _mm256_div_ps(v, _mm256_set1_ps(w->g)) : _mm256_mul_ps(v, _mm256_set1_ps(w->g));
    }
    _mm256_storeu_ps(mv, v);
}

QK_TARGET_AVX2 static inline __m256 e4m3x8(__m128i b8)
{
    return _mm256_mul_ps(e4m3x8_div256(b8), _mm256_set1_ps(256.0f));
}

/* Doubled E2M1 values of the 16 codes (fp4.h's qk_e2m1_x2), a byte table. */
QK_TARGET_AVX2 static inline __m128i e2m1x2_lut(void) { return _mm_loadu_si128((const __m128i *)qk_e2m1_x2); }

/* The 32 4-bit codes of 16 bytes (the low nibble first) as bytes in column
 * order: the low and high nibbles split and interleaved back; c[0] holds
 * columns 0..15, c[1] 16..31. */
QK_TARGET_AVX2 static inline void nib32(const uint8_t *p, __m128i c[2])
{
    const __m128i b = _mm_loadu_si128((const __m128i *)p), m = _mm_set1_epi8(15);
    const __m128i lo = _mm_and_si128(b, m), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
    c[0] = _mm_unpacklo_epi8(lo, hi);
    c[1] = _mm_unpackhi_epi8(lo, hi);
}

/* The one-token passes over rows as stored: the line at byte off of each of
 * the R rows one pass on (rows R.. 2R-1 from q0, rstep bytes apart).  The
 * rows are R short streams, which the hardware prefetchers restart at every
 * page (bench250m tg on Zen 1: FP8 1.19x, W4A16 1.07x, NVFP4A16 1.12x). */
static inline void qk_wq_prefetch_next_rows(const uint8_t *q0, int64_t rstep, int R, int64_t off)
{
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
        __builtin_prefetch(q0 + (r + R) * rstep + off, 0, 2);
}

#endif
#endif
