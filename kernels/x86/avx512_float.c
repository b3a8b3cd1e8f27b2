/* avx512_float.c - AVX-512 kernels of the repacked F16 and BF16 weights
 * (prompt batches; cpu.h's packed_tile on avx2_float.c's packing).
 *
 * The float-dot order of kernels/float.c for n % 8 == 0 is kept: each
 * (row, token) pair has its own 8 float lanes, one fused multiply-add per
 * 8 elements in increasing order, then tinyBLAS's tree (qk_hsum8x8_ps).  A
 * 512-bit accumulator holds two pairs, rows 2p and 2p + 1 of a group
 * against one token, so the weights are one load and one conversion for
 * two rows (the packing puts their 8-element chunks side by side) and the
 * token's chunk is broadcast to both halves.  The tokens' elements are
 * converted to float once per tile and span of columns (exact), so the
 * inner loop is loads, conversions of the weights and FMAs only: eight rows
 * x six tokens, 24 accumulators.  One-token products (decode) run the same
 * pairs, the token's 8 elements broadcast to both halves, four accumulators
 * for the group's eight rows, the next group prefetched in step: half the
 * instructions of the AVX2 kernel, whose bits they give. */
#include "kernels/x86/packed512.h"

#ifdef QK_X86

enum { FT = 6, FSPAN = 1024 }; /* tokens per pass; columns per span */

/* 16 weights of two rows (32 bytes at p) as floats. */
QK_TARGET_AVX512 static inline __m512 w16_f16(const uint8_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

QK_TARGET_AVX512 static inline __m512 w16_bf16(const uint8_t *p)
{
    const __m512i a = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(a, 16));
}

/* n elements (a multiple of 8) at src (F16 or BF16) to floats. */
QK_TARGET_AVX512 static void to_f32(const uint8_t *src, float *dst, int n, int bf)
{
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, bf ? w16_bf16(src + 2 * i) : w16_f16(src + 2 * i));
    if (i < n) {
        const __m128i h = _mm_loadu_si128((const __m128i *)(src + 2 * i));
        _mm256_storeu_ps(dst + i, bf ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
                                     : _mm256_cvtph_ps(h));
    }
}

/* 8 elements of the token at y (F16 or BF16) as floats in both halves. */
QK_TARGET_AVX512 static inline __m512 y8x2(const uint8_t *y, const int bf)
{
    const __m256i h = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)y));
    return bf ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) : _mm512_cvtph_ps(h);
}

/* Row 2p is the low half of c[p], row 2p + 1 the high one; lane k of
 * qk_hsum8x8_ps is its input {0, 2, 4, 6, 1, 3, 5, 7}[k]: rows 0..7 in order. */
QK_TARGET_AVX512 static inline void store_rows8(float *out, const __m512 c[4])
{
#define LO(p) _mm512_castps512_ps256(c[p])
#define HI(p) _mm512_extractf32x8_ps(c[p], 1)
    _mm256_storeu_ps(out, qk_hsum8x8_ps(LO(0), LO(2), HI(0), HI(2), LO(1), LO(3), HI(1), HI(3)));
#undef LO
#undef HI
}

/* One group (8 rows, packed: chunk j at g + 128 j) against N tokens over
 * columns [0, nc) of the span (af: the tokens' floats, FSPAN apart),
 * continuing c[p][t]. */
QK_TARGET_AVX512 __attribute__((always_inline)) static inline void
group_span(const uint8_t *g, const float *af, int nc, const int nt, __m512 c[4][FT], const int bf)
{
    __m512 acc[4][FT];
    _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++)
        _Pragma("GCC unroll 6") for (int t = 0; t < nt; t++)
            acc[p][t] = c[p][t];
    for (int j = 0; j < nc / 8; j++, g += 128) {
        __m512 w[4];
        _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++)
            w[p] = bf ? w16_bf16(g + 32 * p) : w16_f16(g + 32 * p);
        _Pragma("GCC unroll 6") for (int t = 0; t < nt; t++) {
            const __m512 a = _mm512_broadcast_f32x8(_mm256_loadu_ps(af + (size_t)t * FSPAN + 8 * j));
            _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++)
                acc[p][t] = _mm512_fmadd_ps(w[p], a, acc[p][t]);
        }
    }
    _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++)
        _Pragma("GCC unroll 6") for (int t = 0; t < nt; t++)
            c[p][t] = acc[p][t];
}

QK_TARGET_AVX512 static void group_span_f16(const uint8_t *g, const float *af, int nc, int nt, __m512 c[4][FT])
{
    switch (nt) {
    case 1: group_span(g, af, nc, 1, c, 0); break;
    case 2: group_span(g, af, nc, 2, c, 0); break;
    case 3: group_span(g, af, nc, 3, c, 0); break;
    case 4: group_span(g, af, nc, 4, c, 0); break;
    case 5: group_span(g, af, nc, 5, c, 0); break;
    default: group_span(g, af, nc, 6, c, 0); break;
    }
}

QK_TARGET_AVX512 static void group_span_bf16(const uint8_t *g, const float *af, int nc, int nt, __m512 c[4][FT])
{
    switch (nt) {
    case 1: group_span(g, af, nc, 1, c, 1); break;
    case 2: group_span(g, af, nc, 2, c, 1); break;
    case 3: group_span(g, af, nc, 3, c, 1); break;
    case 4: group_span(g, af, nc, 4, c, 1); break;
    case 5: group_span(g, af, nc, 5, c, 1); break;
    default: group_span(g, af, nc, 6, c, 1); break;
    }
}

/* ng packed groups at xp against nt activation rows: tokens FT at a time,
 * columns FSPAN at a time (each span's token floats made once for all the
 * groups), then each pair's lanes through tinyBLAS's tree. */
QK_TARGET_AVX512 __attribute__((always_inline)) static inline void
float_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys, int nt, float *out, size_t ldo, const int bf)
{
    enum { GM = 8 };
    float af[FT * FSPAN];
    __m512 c[GM][4][FT];
    const size_t gsize = (size_t)n * 16;
    for (int g0 = 0; g0 < ng; g0 += GM) {
        const int gn = ng - g0 < GM ? ng - g0 : GM;
        for (int t0 = 0; t0 < nt; t0 += FT) {
            const int q = nt - t0 < FT ? nt - t0 : FT;
            for (int gi = 0; gi < gn; gi++)
                for (int p = 0; p < 4; p++)
                    for (int t = 0; t < q; t++)
                        c[gi][p][t] = _mm512_setzero_ps();
            for (int64_t k0 = 0; k0 < n; k0 += FSPAN) {
                const int nc = (int)(n - k0 < FSPAN ? n - k0 : FSPAN);
                for (int t = 0; t < q; t++)
                    to_f32((const uint8_t *)y + (size_t)(t0 + t) * ys + 2 * (size_t)k0, af + (size_t)t * FSPAN, nc, bf);
                for (int gi = 0; gi < gn; gi++) {
                    const uint8_t *g = (const uint8_t *)xp + (size_t)(g0 + gi) * gsize + 16 * (size_t)k0;
                    if (bf)
                        group_span_bf16(g, af, nc, q, c[gi]);
                    else
                        group_span_f16(g, af, nc, q, c[gi]);
                }
            }
            for (int gi = 0; gi < gn; gi++)
                for (int t = 0; t < q; t++) {
                    const __m512 cp[4] = {c[gi][0][t], c[gi][1][t], c[gi][2][t], c[gi][3][t]};
                    store_rows8(out + (size_t)(t0 + t) * ldo + 8 * (size_t)(g0 + gi), cp);
                }
        }
    }
}

/* ng packed groups against one token (n % 8 == 0). */
QK_TARGET_AVX512 __attribute__((always_inline)) static inline void
float_decode(int64_t n, const void *xp, int ng, const void *y, float *out, const int bf)
{
    const size_t gsize = (size_t)n * 16;
    for (int g = 0; g < ng; g++) {
        const uint8_t *G = (const uint8_t *)xp + (size_t)g * gsize, *next = G + gsize;
        __m512 c[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
        for (int64_t j = 0; j < n / 8; j++) {
            qk_prefetch_span(next + 128 * j, 128);
            const __m512 a = y8x2((const uint8_t *)y + 16 * j, bf);
            _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++)
                c[p] = _mm512_fmadd_ps(bf ? w16_bf16(G + 128 * j + 32 * p) : w16_f16(G + 128 * j + 32 * p), a, c[p]);
        }
        store_rows8(out + 8 * (size_t)g, c);
    }
}

QK_TARGET_AVX512 static void f16_packed_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys, int nt,
                                           float *out, size_t ldo)
{
    if (nt == 1) {
        float_decode(n, xp, ng, y, out, 0);
        return;
    }
    float_tile(n, xp, ng, y, ys, nt, out, ldo, 0);
}

QK_TARGET_AVX512 static void bf16_packed_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys, int nt,
                                            float *out, size_t ldo)
{
    if (nt == 1) {
        float_decode(n, xp, ng, y, out, 1);
        return;
    }
    float_tile(n, xp, ng, y, ys, nt, out, ldo, 1);
}

/* The AVX2 level's packing (pack NULL). */
const qk_pack_ops qk_x86_avx512_packed_f[] = {
    {.id = QK_F16, .packed_tile = f16_packed_tile, .tile_rows = 64, .decode = 1},
    {.id = QK_BF16, .packed_tile = bf16_packed_tile, .tile_rows = 64, .decode = 1},
    {.id = -1},
};

#endif
