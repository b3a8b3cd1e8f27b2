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
 * converted to float once per product (pack_act; packed_tile itself, for
 * other callers, once per tile and span of columns; exact), so the inner
 * loop is loads, conversions of the weights and FMAs only: eight rows x six
 * tokens, 24 accumulators.  F16 batches of more than 12 tokens convert a
 * group's span of weights once for 16 passes or all of them
 * (f16_tile_w32), so their inner loop is loads and FMAs.  BF16 weights
 * need no widening (even and odd columns, below).  One-token products
 * (decode) run the same pairs, the token's 8 elements broadcast to both
 * halves, four accumulators for the group's eight rows, the next group
 * prefetched in step: half the instructions of the AVX2 kernel, whose bits
 * they give. */
#include "kernels/x86/packed512.h"

#ifdef QK_X86

enum { FT = 6, FSPAN = 1024 }; /* tokens per pass (QK_BY_NT6); columns per span */

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

/* n elements (a multiple of 8) of F16 at src to floats (BF16: to_f32_eo). */
QK_TARGET_AVX512 static void to_f32(const uint8_t *src, float *dst, int n)
{
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, w16_f16(src + 2 * i));
    if (i < n)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + 2 * i))));
}

/* 8 elements of the token at y (F16 or BF16) as floats in both halves. */
QK_TARGET_AVX512 static inline __m512 y8x2(const uint8_t *y, const int bf)
{
    const __m256i h = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)y));
    return bf ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) : _mm512_cvtph_ps(h);
}

/* ---- BF16 prompt batches: even and odd columns --------------------------------
 * A BF16 is the high half of its float, so the 64 bytes of rows 4h .. 4h+3
 * (8 columns each) are two float vectors without widening: each dword's low
 * half (an even column) shifted up, its high half (the odd column) masked.
 * Lane 4i + k of the even vector is row 4h + i, column 2k; of the odd one,
 * column 2k + 1: each lane still holds one (row, lane of the order) and sees
 * its columns in increasing order, one conversion a 16 weights instead of
 * two.  The tokens' floats are kept even columns first ([x0 x2 x4 x6 x1 x3
 * x5 x7] per 8), each half broadcast to the four rows. */

/* n elements (a multiple of 8) of BF16 at src to floats, each 8 as
 * [x0 x2 x4 x6 x1 x3 x5 x7]: a dword's low half is an even column, its
 * high half the odd one after it. */
QK_TARGET_AVX512 static void to_f32_eo(const uint8_t *src, float *dst, int n)
{
    const __m512i hi = _mm512_set1_epi32((int)0xFFFF0000u);
    /* 128-bit lanes of the even (0..3) and odd (16..19) vectors, interleaved */
    const __m512i lo2 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    const __m512i hi2 = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512i d = _mm512_loadu_si512((const void *)(src + 2 * i));
        const __m512 e = _mm512_castsi512_ps(_mm512_slli_epi32(d, 16)), o = _mm512_castsi512_ps(_mm512_and_si512(d, hi));
        _mm512_storeu_ps(dst + i, _mm512_permutex2var_ps(e, lo2, o));
        _mm512_storeu_ps(dst + i + 16, _mm512_permutex2var_ps(e, hi2, o));
    }
    for (; i < n; i += 8) {
        const __m128i d = _mm_loadu_si128((const __m128i *)(src + 2 * i));
        _mm_storeu_ps(dst + i, _mm_castsi128_ps(_mm_slli_epi32(d, 16)));
        _mm_storeu_ps(dst + i + 4, _mm_castsi128_ps(_mm_and_si128(d, _mm512_castsi512_si128(hi))));
    }
}

/* One group (8 rows, packed: chunk j at g + 128 j) against N tokens over
 * columns [0, nc) of the span (af: the tokens' floats, even columns first,
 * FSPAN apart), continuing c[v][t]: v = 0, 1 the even and odd columns of
 * rows 0..3, v = 2, 3 those of rows 4..7. */
QK_TARGET_AVX512 __attribute__((always_inline)) static inline void
group_span_eo(const uint8_t *g, const float *af, size_t as, int nc, const int nt, __m512 c[4][FT], bool first)
{
    const __m512i hi = _mm512_set1_epi32((int)0xFFFF0000u);
    __m512 acc[4][FT];
    _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++)
        _Pragma("GCC unroll 6") for (int t = 0; t < nt; t++)
            acc[v][t] = first ? _mm512_setzero_ps() : c[v][t];
    for (int j = 0; j < nc / 8; j++, g += 128) {
        __m512 w[4];
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
            const __m512i d = _mm512_loadu_si512((const void *)(g + 64 * h));
            w[2 * h] = _mm512_castsi512_ps(_mm512_slli_epi32(d, 16));
            w[2 * h + 1] = _mm512_castsi512_ps(_mm512_and_si512(d, hi));
        }
        _Pragma("GCC unroll 6") for (int t = 0; t < nt; t++) {
            const float *a = af + (size_t)t * as + 8 * j;
            const __m512 ae = _mm512_broadcast_f32x4(_mm_loadu_ps(a)), ao = _mm512_broadcast_f32x4(_mm_loadu_ps(a + 4));
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                acc[2 * h][t] = _mm512_fmadd_ps(w[2 * h], ae, acc[2 * h][t]);
                acc[2 * h + 1][t] = _mm512_fmadd_ps(w[2 * h + 1], ao, acc[2 * h + 1][t]);
            }
        }
    }
    _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++)
        _Pragma("GCC unroll 6") for (int t = 0; t < nt; t++)
            c[v][t] = acc[v][t];
}

QK_TARGET_AVX512 static void group_span_bf16(const uint8_t *g, const float *af, size_t as, int nc, int nt, __m512 c[4][FT],
                                             bool first)
{
    QK_BY_NT6(nt, group_span_eo(g, af, as, nc, N, c, first))
}

/* Per 128-bit lane i, ((l0+l4) + (l2+l6)) of its four lanes [l0 l2 l4 l6]
 * (or of the odd columns [l1 l3 l5 l7]), in every position. */
QK_TARGET_AVX512 static inline __m512 tree4(__m512 v)
{
    const __m512 s = _mm512_add_ps(v, _mm512_shuffle_ps(v, v, 0x4E)); /* [l0+l4, l2+l6, ...] */
    return _mm512_add_ps(s, _mm512_shuffle_ps(s, s, 0xB1));
}

/* The eight rows' sums of one token from group_span_eo's c[0..3]: tinyBLAS's
 * tree, the even columns' half plus the odd columns' half. */
QK_TARGET_AVX512 static inline void store_rows8_eo(float *out, const __m512 c[4])
{
    const __m512 r03 = _mm512_add_ps(tree4(c[0]), tree4(c[1])), r47 = _mm512_add_ps(tree4(c[2]), tree4(c[3]));
    const __m512i first = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0);
    _mm256_storeu_ps(out, _mm512_castps512_ps256(_mm512_permutex2var_ps(r03, first, r47)));
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

/* One group of F16 rows (8 rows, packed: chunk j at g + 128 j; with W32
 * the chunks as floats, at g + 256 j) against N tokens over columns
 * [0, nc) of the span (af: the tokens' floats, FSPAN apart), continuing
 * c[p][t] (from zero on the first span). */
QK_TARGET_AVX512 __attribute__((always_inline)) static inline void
group_span(const uint8_t *g, const float *af, size_t as, int nc, const int nt, __m512 c[4][FT], bool first, const bool w32)
{
    __m512 acc[4][FT];
    _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++)
        _Pragma("GCC unroll 6") for (int t = 0; t < nt; t++)
            acc[p][t] = first ? _mm512_setzero_ps() : c[p][t];
    for (int j = 0; j < nc / 8; j++, g += w32 ? 256 : 128) {
        __m512 w[4];
        _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++)
            w[p] = w32 ? _mm512_loadu_ps((const float *)(const void *)g + 16 * p) : w16_f16(g + 32 * p);
        _Pragma("GCC unroll 6") for (int t = 0; t < nt; t++) {
            const __m512 a = _mm512_broadcast_f32x8(_mm256_loadu_ps(af + (size_t)t * as + 8 * j));
            _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++)
                acc[p][t] = _mm512_fmadd_ps(w[p], a, acc[p][t]);
        }
    }
    _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++)
        _Pragma("GCC unroll 6") for (int t = 0; t < nt; t++)
            c[p][t] = acc[p][t];
}

QK_TARGET_AVX512 static void group_span_f16(const uint8_t *g, const float *af, size_t as, int nc, int nt, __m512 c[4][FT],
                                            bool first)
{
    QK_BY_NT6(nt, group_span(g, af, as, nc, N, c, first, false))
}

QK_TARGET_AVX512 static void group_span_w32(const float *g, const float *af, size_t as, int nc, int nt, __m512 c[4][FT],
                                            bool first)
{
    QK_BY_NT6(nt, group_span((const uint8_t *)(const void *)g, af, as, nc, N, c, first, true))
}

/* store_rows8 of two tokens at once (c: token t, d: token u), the same
 * additions: per row, lanes l + (l + 4) (128-bit lanes 0 + 1 of its half),
 * then the sums' elements 0 + 2 and 1 + 3, then those two.  After the
 * three steps lane 4k of 128-bit lane k holds row k of t, then row k + 4
 * of t, row k of u, row k + 4 of u; one permutation puts t's rows 0..7
 * in the low half, u's in the high one.  15 shuffles for 16 sums where
 * two store_rows8 take 36. */
QK_TARGET_AVX512 static inline void store_rows8x2(float *ot, float *ou, const __m512 c[4], const __m512 d[4])
{
    __m512 h[4]; /* 128-bit lane k of h[2v + w]: row 4v + k's four halves' sums, token w */
    _Pragma("GCC unroll 2") for (int v = 0; v < 2; v++) {
        h[2 * v] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * v], c[2 * v + 1], 0x88),
                                 _mm512_shuffle_f32x4(c[2 * v], c[2 * v + 1], 0xDD));
        h[2 * v + 1] = _mm512_add_ps(_mm512_shuffle_f32x4(d[2 * v], d[2 * v + 1], 0x88),
                                     _mm512_shuffle_f32x4(d[2 * v], d[2 * v + 1], 0xDD));
    }
    /* [u0 u1] of row k and of row k + 4, per token */
    const __m512 vt = _mm512_add_ps(_mm512_shuffle_ps(h[0], h[2], 0x44), _mm512_shuffle_ps(h[0], h[2], 0xEE));
    const __m512 vu = _mm512_add_ps(_mm512_shuffle_ps(h[1], h[3], 0x44), _mm512_shuffle_ps(h[1], h[3], 0xEE));
    const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(vt, vu, 0x88), _mm512_shuffle_ps(vt, vu, 0xDD));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512 o = _mm512_permutexvar_ps(order, r);
    _mm256_storeu_ps(ot, _mm512_castps512_ps256(o));
    _mm256_storeu_ps(ou, _mm512_extractf32x8_ps(o, 1));
}

/* A group's sums c (after its last span) for q tokens: out[t * ldo + r] for
 * its eight rows r, through tinyBLAS's tree (BF16: the even/odd lanes). */
QK_TARGET_AVX512 static inline void store_group(__m512 c[4][FT], int q, float *out, size_t ldo, const int bf)
{
    int t = 0;
    for (; !bf && t + 2 <= q; t += 2) {
        const __m512 cp[4] = {c[0][t], c[1][t], c[2][t], c[3][t]};
        const __m512 dp[4] = {c[0][t + 1], c[1][t + 1], c[2][t + 1], c[3][t + 1]};
        store_rows8x2(out + (size_t)t * ldo, out + (size_t)(t + 1) * ldo, cp, dp);
    }
    for (; t < q; t++) {
        const __m512 cp[4] = {c[0][t], c[1][t], c[2][t], c[3][t]};
        if (bf)
            store_rows8_eo(out + (size_t)t * ldo, cp);
        else
            store_rows8(out + (size_t)t * ldo, cp);
    }
}

/* ng packed groups at xp against nt activation rows: tokens FT at a time,
 * columns FSPAN at a time, then each pair's lanes through tinyBLAS's tree.
 * The rows at y are the weight type's (F16 or BF16; each span's token
 * floats made once in af for all the groups), or with `prep` the floats
 * pack_act made of them once for the whole product (ys bytes apart). */
QK_TARGET_AVX512 __attribute__((always_inline)) static inline void
float_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys, int nt, float *out, size_t ldo, const int bf,
           const bool prep)
{
    enum { GM = 8 };
    float af[FT * FSPAN];
    __m512 c[GM][4][FT];
    const size_t gsize = (size_t)n * 16;
    for (int g0 = 0; g0 < ng; g0 += GM) {
        const int gn = ng - g0 < GM ? ng - g0 : GM;
        for (int t0 = 0; t0 < nt; t0 += FT) {
            const int q = nt - t0 < FT ? nt - t0 : FT;
            for (int64_t k0 = 0; k0 < n; k0 += FSPAN) {
                const int nc = (int)(n - k0 < FSPAN ? n - k0 : FSPAN);
                const float *a = af;
                size_t as = FSPAN;
                if (prep) {
                    a = (const float *)(const void *)((const uint8_t *)y + (size_t)t0 * ys) + k0;
                    as = ys / sizeof(float);
                } else {
                    for (int t = 0; t < q; t++) {
                        const uint8_t *yt = (const uint8_t *)y + (size_t)(t0 + t) * ys + 2 * (size_t)k0;
                        if (bf)
                            to_f32_eo(yt, af + (size_t)t * FSPAN, nc);
                        else
                            to_f32(yt, af + (size_t)t * FSPAN, nc);
                    }
                }
                for (int gi = 0; gi < gn; gi++) {
                    const uint8_t *g = (const uint8_t *)xp + (size_t)(g0 + gi) * gsize + 16 * (size_t)k0;
                    if (bf)
                        group_span_bf16(g, a, as, nc, q, c[gi], k0 == 0);
                    else
                        group_span_f16(g, a, as, nc, q, c[gi], k0 == 0);
                }
            }
            for (int gi = 0; gi < gn; gi++)
                store_group(c[gi], q, out + (size_t)t0 * ldo + 8 * (size_t)(g0 + gi), ldo, bf);
        }
    }
}

/* F16 prompt batches on pack_act's floats, the weights as floats: per span
 * and group the group's columns converted once (exact) into wf and read by
 * WTB passes of FT tokens (c: 192 KB), instead of converted again by every
 * pass.  The same fused multiply-adds in the same order as float_tile's:
 * the same bits.  The passes' sums wait in c between spans.  The spans
 * split the row evenly, at most WSPAN columns each, so that a group's
 * floats (8 x 4 bytes a column) and a pass's six tokens stay in L1
 * together; with spans of 1024 columns they did not, and 1024-column rows
 * ran 5 % slower than float_tile instead of 12 % faster.  A row of one
 * span is converted once for all the passes (no sums to carry).  Single
 * thread, 512 tokens: 1536 x 576 154 -> 180 GFLOP/s, 2816 x 1024 157 ->
 * 174, 1024 x 2816 157 -> 183, 49152 x 576 (an output matrix) 153 -> 171.
 * The passes over a group prefetch the next group's span, a share each, so
 * that its conversion does not wait on memory (to_f32 was 9 % of a
 * qk-imatrix profile, 5 % after). */
enum { WTB = 16, WSPAN = 640 }; /* passes per converted span; its most columns */
QK_TARGET_AVX512 void qk_x86_avx512_wf_tile(int64_t n, int ng, const qk_x86_wf_src *src, const void *y, size_t ys,
                                            int nt, float *out, size_t ldo)
{
    enum { GM = 8 };
    float wf[8 * WSPAN];
    __m512 c[WTB][GM][4][FT];
    const size_t as = ys / sizeof(float);
    const int64_t al = src->align;
    /* spans of even widths (multiples of al) of at most WSPAN columns: a group's
     * floats and a pass's tokens stay in L1 together */
    const int64_t nspan = (n + WSPAN - 1) / WSPAN, sw = ((n + nspan - 1) / nspan + al - 1) / al * al;
    if (nspan == 1) { /* one span: each group converted once for every pass, its results stored at once */
        __m512 one[4][FT];
        const int np = (nt + FT - 1) / FT;
        for (int g = 0; g < ng; g++) {
            size_t nb = 0;
            const uint8_t *next = g + 1 < ng ? src->bytes(src, g + 1, 0, (int)n, &nb) : NULL;
            const size_t step = (nb / (size_t)np + 63) / 64 * 64;
            src->decode(src, g, 0, (int)n, wf);
            for (int t0 = 0; t0 < nt; t0 += FT) {
                const int q = nt - t0 < FT ? nt - t0 : FT;
                const size_t off = (size_t)(t0 / FT) * step;
                if (next && off < nb)
                    qk_prefetch_span(next + off, off + step < nb ? step : nb - off);
                group_span_w32(wf, (const float *)(const void *)((const uint8_t *)y + (size_t)t0 * ys), as, (int)n, q,
                               one, true);
                store_group(one, q, out + (size_t)t0 * ldo + 8 * (size_t)g, ldo, 0);
            }
        }
        return;
    }
    for (int g0 = 0; g0 < ng; g0 += GM) {
        const int gn = ng - g0 < GM ? ng - g0 : GM;
        for (int T0 = 0; T0 < nt; T0 += WTB * FT) {
            const int np = (nt - T0 + FT - 1) / FT < WTB ? (nt - T0 + FT - 1) / FT : WTB;
            for (int64_t k0 = 0; k0 < n; k0 += sw) {
                const int nc = (int)(n - k0 < sw ? n - k0 : sw);
                for (int gi = 0; gi < gn; gi++) {
                    src->decode(src, g0 + gi, k0, nc, wf);
                    size_t nb = 0;
                    const uint8_t *next = g0 + gi + 1 < ng ? src->bytes(src, g0 + gi + 1, k0, nc, &nb) : NULL;
                    const size_t step = (nb / (size_t)np + 63) / 64 * 64;
                    for (int pi = 0; pi < np; pi++) {
                        const int t0 = T0 + pi * FT, q = nt - t0 < FT ? nt - t0 : FT;
                        const size_t off = (size_t)pi * step;
                        if (next && off < nb)
                            qk_prefetch_span(next + off, off + step < nb ? step : nb - off);
                        const float *a = (const float *)(const void *)((const uint8_t *)y + (size_t)t0 * ys) + k0;
                        group_span_w32(wf, a, as, nc, q, c[pi][gi], k0 == 0);
                    }
                }
            }
            for (int pi = 0; pi < np; pi++)
                for (int gi = 0; gi < gn; gi++) {
                    const int t0 = T0 + pi * FT, q = nt - t0 < FT ? nt - t0 : FT;
                    store_group(c[pi][gi], q, out + (size_t)t0 * ldo + 8 * (size_t)(g0 + gi), ldo, 0);
                }
        }
    }
}

/* F16 groups as a wf_tile source: a span of the packing is its floats. */
typedef struct {
    qk_x86_wf_src s;
    const uint8_t *xp;
    size_t gsize;
} f16_src;

QK_TARGET_AVX512 static void f16_src_decode(const qk_x86_wf_src *s, int g, int64_t k0, int nc, float *wf)
{
    const f16_src *f = (const f16_src *)(const void *)s;
    to_f32(f->xp + (size_t)g * f->gsize + 16 * (size_t)k0, wf, 8 * nc);
}

static const uint8_t *f16_src_bytes(const qk_x86_wf_src *s, int g, int64_t k0, int nc, size_t *len)
{
    const f16_src *f = (const f16_src *)(const void *)s;
    *len = 16 * (size_t)nc;
    return f->xp + (size_t)g * f->gsize + 16 * (size_t)k0;
}

QK_TARGET_AVX512 static void f16_tile_w32(int64_t n, const void *xp, int ng, const void *y, size_t ys, int nt,
                                          float *out, size_t ldo)
{
    const f16_src src = {{f16_src_decode, f16_src_bytes, 8}, xp, (size_t)n * 16};
    qk_x86_avx512_wf_tile(n, ng, &src.s, y, ys, nt, out, ldo);
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
    float_tile(n, xp, ng, y, ys, nt, out, ldo, 0, false);
}

QK_TARGET_AVX512 static void bf16_packed_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys, int nt,
                                            float *out, size_t ldo)
{
    if (nt == 1) {
        float_decode(n, xp, ng, y, out, 1);
        return;
    }
    float_tile(n, xp, ng, y, ys, nt, out, ldo, 1, false);
}

/* Prompt batches made once per product (cpu.h pack_act): an F16 row as
 * floats, a BF16 row as floats with each 8 even columns first. */
QK_TARGET_AVX512 static void f16_pack_act(int64_t n, const void *y, void *dst) { to_f32(y, dst, (int)n); }

QK_TARGET_AVX512 static void bf16_pack_act(int64_t n, const void *y, void *dst) { to_f32_eo(y, dst, (int)n); }

QK_TARGET_AVX512 static void f16_packed_tile_act(int64_t n, const void *xp, int ng, const void *y, size_t ys, int nt,
                                               float *out, size_t ldo)
{
    if (nt > 2 * FT) /* enough passes to share a conversion */
        f16_tile_w32(n, xp, ng, y, ys, nt, out, ldo);
    else
        float_tile(n, xp, ng, y, ys, nt, out, ldo, 0, true);
}

QK_TARGET_AVX512 static void bf16_packed_tile_act(int64_t n, const void *xp, int ng, const void *y, size_t ys, int nt,
                                                float *out, size_t ldo)
{
    float_tile(n, xp, ng, y, ys, nt, out, ldo, 1, true);
}

/* Tokens per f16_packed_tile_act call: a group of one span is converted
 * once a call, so the engine's 64-token tiles converted it four times for
 * a 256-token batch. */
enum { F16_ACT_TOKENS = 512 };

/* The AVX2 level's packing (pack NULL). */
const qk_pack_ops qk_x86_avx512_packed_f[] = {
    {.id = QK_F16, .packed_tile = f16_packed_tile, .tile_rows = 64, .decode = 1, .pack_act_size = qk_x86_float_act_size, .pack_act = f16_pack_act,
     .packed_tile_act = f16_packed_tile_act, .act_tokens = F16_ACT_TOKENS},
    {.id = QK_BF16, .packed_tile = bf16_packed_tile, .tile_rows = 64, .decode = 1, .pack_act_size = qk_x86_float_act_size, .pack_act = bf16_pack_act,
     .packed_tile_act = bf16_packed_tile_act},
    {.id = -1},
};

#endif
