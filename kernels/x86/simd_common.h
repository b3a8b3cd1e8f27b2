/* simd_common.h - AVX2 helpers shared by kernels/x86/avx2_*.c (private).
 * Every helper is static inline with the AVX2 target attribute. */
#ifndef QK_SIMD_COMMON_H
#define QK_SIMD_COMMON_H

#include "kernels/x86/x86.h"

#ifdef QK_X86
#include <immintrin.h>

#include "kernels/quant_common.h"

/* 8 x 8 int32 partial sums -> one vector of the 8 totals (p[k] -> lane k).
 * Integer addition: exact in any order. */
QK_TARGET_AVX2 static inline __m256i qk_hsum8_epi32(__m256i p0, __m256i p1, __m256i p2, __m256i p3,
                                                    __m256i p4, __m256i p5, __m256i p6, __m256i p7)
{
    const __m256i a = _mm256_hadd_epi32(p0, p1), b = _mm256_hadd_epi32(p2, p3);
    const __m256i c = _mm256_hadd_epi32(p4, p5), d = _mm256_hadd_epi32(p6, p7);
    const __m256i ab = _mm256_hadd_epi32(a, b), cd = _mm256_hadd_epi32(c, d);
    return _mm256_add_epi32(_mm256_permute2x128_si256(ab, cd, 0x20),
                            _mm256_permute2x128_si256(ab, cd, 0x31));
}

/* Sum of the 8 int32 lanes. */
QK_TARGET_AVX2 static inline int qk_hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* The 8 float lanes of v summed as ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)):
 * tinyBLAS's and ggml's hsum of a __m256, the tree of the float-dot order
 * (kernels/float.c) and of the attention scores (kernels/attn.h). */
QK_TARGET_AVX2 static inline float qk_hsum8_ps(__m256 v)
{
    const __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a));
    return _mm_cvtss_f32(_mm_add_ss(b, _mm_movehdup_ps(b)));
}

/* qk_hsum8_ps of eight vectors at once, the same additions in the same
 * order: lane k of the result is the sum of a[p[k]], p = {0, 2, 4, 6, 1, 3,
 * 5, 7} (halves added first, then elements 0+2 and 1+3, then those two). */
QK_TARGET_AVX2 static inline __m256 qk_hsum8x8_ps(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4,
                                                  __m256 a5, __m256 a6, __m256 a7)
{
    const __m256 s0 = _mm256_add_ps(_mm256_permute2f128_ps(a0, a1, 0x20), _mm256_permute2f128_ps(a0, a1, 0x31));
    const __m256 s1 = _mm256_add_ps(_mm256_permute2f128_ps(a2, a3, 0x20), _mm256_permute2f128_ps(a2, a3, 0x31));
    const __m256 s2 = _mm256_add_ps(_mm256_permute2f128_ps(a4, a5, 0x20), _mm256_permute2f128_ps(a4, a5, 0x31));
    const __m256 s3 = _mm256_add_ps(_mm256_permute2f128_ps(a6, a7, 0x20), _mm256_permute2f128_ps(a6, a7, 0x31));
    const __m256 t0 = _mm256_add_ps(_mm256_shuffle_ps(s0, s1, 0x44), _mm256_shuffle_ps(s0, s1, 0xEE));
    const __m256 t1 = _mm256_add_ps(_mm256_shuffle_ps(s2, s3, 0x44), _mm256_shuffle_ps(s2, s3, 0xEE));
    return _mm256_add_ps(_mm256_shuffle_ps(t0, t1, 0x88), _mm256_shuffle_ps(t0, t1, 0xDD));
}

/* Exact int32 dot of 32 signed bytes x and 32 signed bytes y, as 8 int32
 * partials.  Exact when y has no -128 (activation quants are in
 * [-127, 127]); x may hold any value. */
QK_TARGET_AVX2 static inline __m256i qk_dot_i8(__m256i x, __m256i y)
{
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* Prefetch the len bytes at p into L2 (prefetcht1).  One-token products are
 * where the weights stream from DRAM, and the hardware prefetchers alone
 * leave them well short of the read bandwidth (12 GB/s per thread here):
 * - kernels that stream eight rows at once (Q8_0 and the other 32-element
 *   formats, F16, BF16) prefetch the next group's rows linearly in step:
 *   Q8_0 went from 6 to 10 GB/s;
 * - kernels that walk one row at a time (the K-quants) prefetch
 *   QK_PREFETCH_AHEAD bytes ahead: Q4_K from 5 to 9 GB/s, Q6_K from 6 to 9.
 * Into L2, not L1: the prefetches then do not hold L1's fill buffers, which
 * the demand loads need (bench250m tg32, 2 threads, Intel SPR-class: BF16 47
 * -> 54 t/s, Q6_K 82 -> 97, Q8_0 99 -> 104, Q4_K_M unchanged; prefetchnta
 * halved BF16).  A prefetch never faults, so the bytes after a matrix's last
 * row, or of another thread's rows, are safe to name. */
#define QK_PREFETCH_AHEAD 4096
QK_TARGET_AVX2 static inline void qk_prefetch_span(const uint8_t *p, size_t len)
{
    /* __builtin_prefetch, not _mm_prefetch: GCC 12 dropped the latter's prefetcht0 from every
     * packed kernel that inlines this (objdump: none in avx2_packed*.o, avx512_packed_k.o) */
    for (size_t l = 0; l < len; l += 64)
        __builtin_prefetch(p + l, 0, 2);
}

/* The sixteen 6-bit scales of a Q3_K block's scales[12], less 32. */
static inline void qk_q3_K_scales8(const uint8_t *s12, int8_t sc[16])
{
    for (int j = 0; j < 16; j++) {
        const int lo = j < 8 ? s12[j] & 0xF : s12[j - 8] >> 4;
        sc[j] = (int8_t)((lo | ((s12[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32);
    }
}

/* QK_BY_NT4(nt, call): run `call` with the constant N = nt for nt = 1, 2, 3
 * and N = 4 otherwise, so that an always_inline kernel taking N as its
 * token count gets one instance per count: its token loops unroll and the
 * running sums stay in registers. */
#define QK_BY_NT4(nt, call)                   \
    switch (nt) {                             \
    case 1: { enum { N = 1 }; call; } break;  \
    case 2: { enum { N = 2 }; call; } break;  \
    case 3: { enum { N = 3 }; call; } break;  \
    default: { enum { N = 4 }; call; } break; \
    }

/* Float from the little-endian fp16 at p (F16C: exact, as qk_f16_to_f32). */
QK_TARGET_AVX2 static inline float qk_ldh(const uint8_t *p) { return _cvtsh_ss(qk_ld_u16(p)); }

/* Eight fp16 fields, one per pointer at byte offset o, as floats. */
QK_TARGET_AVX2 static inline __m256 qk_ld8_f16(const uint8_t *const p[8], size_t o)
{
    const __m128i h = _mm_setr_epi16((short)qk_ld_u16(p[0] + o), (short)qk_ld_u16(p[1] + o),
                                     (short)qk_ld_u16(p[2] + o), (short)qk_ld_u16(p[3] + o),
                                     (short)qk_ld_u16(p[4] + o), (short)qk_ld_u16(p[5] + o),
                                     (short)qk_ld_u16(p[6] + o), (short)qk_ld_u16(p[7] + o));
    return _mm256_cvtph_ps(h);
}

/* 32 int32 (four vectors, values in int8 range) -> 32 bytes in order. */
QK_TARGET_AVX2 static inline void qk_store_i8x32(int8_t *dst, __m256i a, __m256i b, __m256i c, __m256i d)
{
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    const __m256i v = _mm256_packs_epi16(ab, cd);
    _mm256_storeu_si256((__m256i *)dst,
                        _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

/* True when all n floats at x are finite (n a multiple of 8). */
QK_TARGET_AVX2 static inline int qk_all_finite(const float *x, int n)
{
    const __m256 inf = _mm256_set1_ps(__builtin_inff());
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 bad = _mm256_setzero_ps();
    for (int j = 0; j < n; j += 8) {
        const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + j), absmask);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, inf, _CMP_NLT_UQ)); /* >= inf or NaN */
    }
    return _mm256_movemask_ps(bad) == 0;
}

/* Largest |x| of n floats (n a multiple of 8, all finite). */
QK_TARGET_AVX2 static inline float qk_absmax(const float *x, int n)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < n; j += 8)
        m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + j), absmask));
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#endif
#endif
