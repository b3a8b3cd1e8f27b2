/* avx512.c - the AVX-512 level's row kernels: the activation encoders of
 * the quantized dot products, Q8_0, Q8_1 (32-element blocks) and Q8_K
 * (256), in sixteen lanes.
 *
 * Each equals the scalar encoder's bytes (legacy.c q8_act_block, kquants.c
 * quantize_row_q8_K_ref; test_simd): the block maximum of |x| is the same
 * whatever the order for finite values; quants are x * (127 / amax) rounded
 * half to even (Q8_0, Q8_1: llama.cpp's x86 quantize_row_q8_0 /
 * _q8_1) or nearest_int(iscale * x), iscale = -127 / (the first element of
 * largest magnitude), capped at 127 (Q8_K); block sums are exact integer
 * sums.  Blocks with an infinity or NaN, whose sequential maximum the
 * vector one does not reproduce, go through the format table's encoder.
 *
 * The packed dot products of this level are in avx512_packed*.c and
 * avx512_float.c, the attention loops in avx512_attn.c; everything else
 * at this level is the AVX2 kernels (cpu.c copies each level's set from
 * the one below). */
#include "kernels/x86/simd_common.h"

#ifdef QK_X86
#include <string.h>

#define T512 QK_TARGET_AVX512

enum { QK = 32, QKK = 256, Q8_0_SIZE = 34, Q8_1_SIZE = 36, Q8_K_SIZE = 292 };

/* True when the n floats at x (a multiple of 16) are all finite. */
T512 static inline int finite16(const float *x, int n)
{
    __mmask16 bad = 0;
    for (int j = 0; j < n; j += 16)
        bad |= _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + j)), _mm512_set1_ps(__builtin_inff()),
                                  _CMP_NLT_UQ); /* >= inf or NaN */
    return bad == 0;
}

/* Largest |x| of the n floats at x (a multiple of 16, all finite). */
T512 static inline float absmax16(const float *x, int n)
{
    __m512 m = _mm512_setzero_ps();
    for (int j = 0; j < n; j += 16)
        m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + j)));
    return _mm512_reduce_max_ps(m);
}

/* ---- Q8_0, Q8_1 ---------------------------------------------------------------- */

T512 __attribute__((always_inline)) static inline void q8_from_float(const float *src, uint8_t *b, int64_t n,
                                                                     const int q8_1)
{
    const qk_from_float_fn scalar = qk_type_get(q8_1 ? QK_Q8_1 : QK_Q8_0)->from_float;
    const size_t size = q8_1 ? Q8_1_SIZE : Q8_0_SIZE, qs = q8_1 ? 4 : 2;
    for (int64_t i = 0; i < n / QK; i++, src += QK, b += size) {
        if (!finite16(src, QK)) {
            scalar(src, b, QK);
            continue;
        }
        const float amax = absmax16(src, QK);
        const __m512 vid = _mm512_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
        __m512i q[2];
        for (int k = 0; k < 2; k++)
            q[k] = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(src + 16 * k), vid),
                                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        _mm_storeu_si128((__m128i *)(b + qs), _mm512_cvtsepi32_epi8(q[0]));
        _mm_storeu_si128((__m128i *)(b + qs + 16), _mm512_cvtsepi32_epi8(q[1]));
        const float d = amax / 127.f;
        qk_st_f16(b, d);
        if (q8_1)
            qk_st_f16(b + 2, (float)_mm512_reduce_add_epi32(_mm512_add_epi32(q[0], q[1])) * d);
    }
}

T512 static void q8_0_from_float(const float *src, void *dst, int64_t n) { q8_from_float(src, dst, n, 0); }
T512 static void q8_1_from_float(const float *src, void *dst, int64_t n) { q8_from_float(src, dst, n, 1); }

/* ---- Q8_K ------------------------------------------------------------------------ */

T512 static void q8_K_from_float(const float *src, void *dst, int64_t n)
{
    const qk_from_float_fn scalar = qk_type_get(QK_Q8_K)->from_float;
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / QKK; i++, src += QKK, b += Q8_K_SIZE) {
        if (!finite16(src, QKK)) {
            scalar(src, b, QKK);
            continue;
        }
        const float amax = absmax16(src, QKK);
        if (!amax) {
            memset(b, 0, Q8_K_SIZE);
            continue;
        }
        /* the first element of largest magnitude, as the reference's scan */
        float max = 0;
        for (int j = 0; j < QKK; j += 16) {
            const __mmask16 m = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(src + j)), _mm512_set1_ps(amax),
                                                   _CMP_EQ_OQ);
            if (m) {
                max = src[j + __builtin_ctz((unsigned)m)];
                break;
            }
        }
        const float iscale = -127.f / max;
        const __m512 vs = _mm512_set1_ps(iscale);
        /* nearest_int is round-half-even for |v| <= 2^22: cvtps2dq */
        for (int j = 0; j < QKK; j += 16) {
            const __m512i q = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(vs, _mm512_loadu_ps(src + j))),
                                               _mm512_set1_epi32(127));
            _mm_storeu_si128((__m128i *)(b + 4 + j), _mm512_cvtepi32_epi8(q));
            qk_st_u16(b + 4 + QKK + j / 8, (uint16_t)(int16_t)_mm512_reduce_add_epi32(q));
        }
        qk_st_f32(b, 1 / iscale);
    }
}

const qk_simd_ops qk_x86_avx512[] = {
    {QK_Q8_0, NULL, NULL, q8_0_from_float, NULL, NULL},
    {QK_Q8_1, NULL, NULL, q8_1_from_float, NULL, NULL},
    {QK_Q8_K, NULL, NULL, q8_K_from_float, NULL, NULL},
    {.id = -1},
};

#endif
