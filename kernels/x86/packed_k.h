/* packed_k.h - what the AVX2 kernels of repacked super-block weights
 * (avx2_packed_k4.c: Q4_K, Q5_K; avx2_packed_k6.c: Q3_K, Q6_K;
 * avx2_packed_sum.c: Q2_K, IQ4_XS) share: eight rows per group, each
 * 256-element super-block against a Q8_K activation block; the activation
 * side prepared once per span of blocks for all the groups of a tile
 * (act_prepare), the running sums of a group (group_state), the tile
 * driver (packed_k_tile), and the byte transpositions of the packers. */
#ifndef QK_X86_PACKED_K_H
#define QK_X86_PACKED_K_H

#include "kernels/x86/simd_common.h"

#ifdef QK_X86
#include <string.h>

enum { Q8_K_SIZE = 292, QKK = 256, GROUP = 8, PT = 4, KC = 16, GMAX = 8 };
_Static_assert(PT == 4, "the spans are instanced for 1..4 tokens (QK_BY_NT4)");

/* Bytes of a packed super-block of a group (the layouts are described in
 * avx2_packed_k4.c, avx2_packed_k6.c and avx2_packed_sum.c; the AVX-512
 * level, avx512_packed_k.c, reads the same). */
enum { PACKED = 1184, PACKED5 = PACKED + 256, PACKED6 = 144 + 8 * 224, PACKED4X = 80 + 8 * 128 };

/* Offset of V[l] in a packed Q4_K (five 0) or Q5_K (five 1) super-block;
 * Q5_K's H[l] follows its V[l], so the kernel reads each block front to
 * back (with H after all of V it ran at two thirds of the speed from
 * memory). */
static inline size_t v_at(int l, int five) { return 160 + (size_t)(five ? 160 : 128) * (size_t)l; }

/* Offset of quad (l, h) in a packed Q6_K super-block; corr[l] at quad (l, 2). */
static inline size_t quad_at(int l, int h) { return 144 + 224 * (size_t)l + 96 * (size_t)h; }

/* Bytes 8j + l of A (j = 0, 1) and of B (j = 2, 3) to d + l * stride + j,
 * for l = 0..7: a [4][8] to [8][4] byte transposition. */
QK_TARGET_AVX2 static inline void store_lk(__m128i A, __m128i B, uint8_t *d, size_t stride)
{
    const __m128i P = _mm_unpacklo_epi8(A, _mm_srli_si128(A, 8));
    const __m128i Q = _mm_unpacklo_epi8(B, _mm_srli_si128(B, 8));
    uint32_t w[8];
    _mm_storeu_si128((__m128i *)w, _mm_unpacklo_epi16(P, Q));
    _mm_storeu_si128((__m128i *)(w + 4), _mm_unpackhi_epi16(P, Q));
    for (int l = 0; l < 8; l++)
        memcpy(d + (size_t)l * stride, &w[l], 4);
}

/* Bytes 8j + l of A (j = 0, 1) to d + l * stride + j, l = 0..7. */
QK_TARGET_AVX2 static inline void store_lk2(__m128i A, uint8_t *d, size_t stride)
{
    uint16_t w[8];
    _mm_storeu_si128((__m128i *)w, _mm_unpacklo_epi8(A, _mm_srli_si128(A, 8)));
    for (int l = 0; l < 8; l++)
        memcpy(d + (size_t)l * stride, &w[l], 2);
}

/* The activation side of KC blocks of up to PT rows: the quants permuted
 * (ys), the scale, and for Q4_K the pairs (bsum[4t] + bsum[4t+1],
 * bsum[4t+2] + bsum[4t+3]) of 16-bit sub-block sums as one int32. */
typedef struct {
    uint8_t ys[PT][KC][QKK];
    float yd[PT][KC];
    int32_t bs[PT][KC][8];
} act_span;

/* Sub-block s of the Q8_K quants at yq permuted to ys[s][l][k] = y[32s + 8k + l]. */
QK_TARGET_AVX2 static inline __m256i lane_major(const uint8_t *yq, int s)
{
    const __m256i dw = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    const __m256i tr = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12,
                                        1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m256i v = _mm256_loadu_si256((const __m256i *)(yq + 32 * s));
    return _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(v, dw), tr);
}

/* The activation layouts:
 * ACT_K4 (Q4_K, Q5_K): sub-blocks 2q and 2q+1 (o0, o1 in lane_major order)
 *   become, for each l, the halves A = (o0 k01, o1 k01) at 64q + 4l and
 *   B = (o0 k23, o1 k23) at 64q + 32 + 4l, and the mins' sums are made;
 * ACT_K6 (Q6_K): the sub-blocks as lane_major leaves them, offset to
 *   unsigned (y + 128);
 * ACT_RAW (IQ4_XS): the quants as they are;
 * ACT_K2 (Q2_K): as ACT_K6 without the offset, and bs the sixteen 16-bit
 *   block sums as they are, two per int32. */
enum { ACT_K4, ACT_K6, ACT_RAW, ACT_K2 };

/* One Q8_K block at yb in a layout: its quants to ys (256 bytes), its
 * scale to yd, and (ACT_K4, ACT_K2) its block sums to bs. */
QK_TARGET_AVX2 static inline void act_block(const uint8_t *yb, int mode, uint8_t *ys, float *yd, int32_t *bs)
{
    const int k4 = mode == ACT_K4;
    *yd = qk_ld_f32(yb);
    if (mode == ACT_RAW) {
        memcpy(ys, yb + 4, QKK);
        return;
    }
    for (int q = 0; q < 4; q++) {
        const __m256i o0 = lane_major(yb + 4, 2 * q), o1 = lane_major(yb + 4, 2 * q + 1);
        const __m256i u = _mm256_set1_epi8(mode == ACT_K6 ? -128 : 0);
        _mm256_storeu_si256((__m256i *)(ys + 64 * q),
                            k4 ? _mm256_blend_epi16(o0, _mm256_slli_epi32(o1, 16), 0xAA) : _mm256_xor_si256(o0, u));
        _mm256_storeu_si256((__m256i *)(ys + 64 * q + 32),
                            k4 ? _mm256_blend_epi16(_mm256_srli_epi32(o0, 16), o1, 0xAA) : _mm256_xor_si256(o1, u));
    }
    if (mode == ACT_K2)
        memcpy(bs, yb + 4 + QKK, 32);
    for (int p = 0; k4 && p < 4; p++) {
        const int s0 = (int16_t)qk_ld_u16(yb + 260 + 8 * p) + (int16_t)qk_ld_u16(yb + 262 + 8 * p);
        const int s1 = (int16_t)qk_ld_u16(yb + 264 + 8 * p) + (int16_t)qk_ld_u16(yb + 266 + 8 * p);
        bs[p] = (int32_t)((uint32_t)(uint16_t)s0 | (uint32_t)(uint16_t)s1 << 16);
    }
}

QK_TARGET_AVX2 static inline void act_prepare(const uint8_t *const y[PT], int nt, int64_t b0, int nb, int mode,
                                       act_span *a)
{
    _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++)
        for (int b = 0; b < nb; b++)
            act_block(y[t] + (size_t)(b0 + b) * Q8_K_SIZE, mode, a->ys[t][b], &a->yd[t][b], a->bs[t][b]);
}

/* The running sums of one group and up to PT tokens: sumf and sums[8] per
 * token, eight rows each. */
typedef struct {
    __m256 f[PT], s[PT][8];
} group_state;

typedef void (*span_fn)(const uint8_t *g, int nt, int nb, const act_span *a, group_state *st);

/* ng packed groups at xp (n / QKK blocks of bsize bytes each) against nt
 * activation rows: tokens PT at a time, blocks KC at a time (act_span),
 * every group through each span; then sumf + sums[0] + ... + sums[7].
 * mode: the activation side's layout (act_prepare). */
QK_TARGET_AVX2 static inline void packed_k_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys,
                                                int nt, float *out, size_t ldo, size_t bsize, span_fn span,
                                                int mode)
{
    const int64_t nb = n / QKK;
    const size_t gsize = (size_t)nb * bsize;
    act_span a;
    group_state st[GMAX];
    for (int g0 = 0; g0 < ng; g0 += GMAX) {
        const int gn = ng - g0 < GMAX ? ng - g0 : GMAX;
        for (int t0 = 0; t0 < nt; t0 += PT) {
            const int q = nt - t0 < PT ? nt - t0 : PT;
            const uint8_t *yr[PT];
            _Pragma("GCC unroll 4") for (int t = 0; t < PT; t++)
                yr[t] = (const uint8_t *)y + (size_t)(t0 + (t < q ? t : 0)) * ys;
            for (int gi = 0; gi < gn; gi++) /* the q tokens' sums only (decode: 1 of PT) */
                for (int t = 0; t < q; t++) {
                    st[gi].f[t] = _mm256_setzero_ps();
                    _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++)
                        st[gi].s[t][l] = _mm256_setzero_ps();
                }
            for (int64_t b0 = 0; b0 < nb; b0 += KC) {
                const int kb = (int)(nb - b0 < KC ? nb - b0 : KC);
                act_prepare(yr, q, b0, kb, mode, &a);
                for (int gi = 0; gi < gn; gi++)
                    span((const uint8_t *)xp + (size_t)(g0 + gi) * gsize + (size_t)b0 * bsize, q, kb, &a,
                         &st[gi]);
            }
            for (int gi = 0; gi < gn; gi++)
                for (int t = 0; t < q; t++) {
                    __m256 sum = st[gi].f[t];
                    _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++)
                        sum = _mm256_add_ps(sum, st[gi].s[t][l]);
                    /* a group's eight outputs of one token are adjacent in out */
                    _mm256_storeu_ps(out + (size_t)(t0 + t) * ldo + (size_t)(GROUP * (g0 + gi)), sum);
                }
        }
    }
}

/* PACKED_K_KERNEL(name, bsize, mode, span_call): name##_span, running
 * span_call (an always_inline span of N tokens over g, nb, a, st) with one
 * instance per token count, and name##_packed_tile, packed_k_tile over it
 * with blocks of bsize bytes and mode's activation side. */
#define PACKED_K_KERNEL(name, bsize, mode, span_call)                                                 \
    QK_TARGET_AVX2 static void name##_span(const uint8_t *g, int nt, int nb, const act_span *a,       \
                                           group_state *st)                                           \
    {                                                                                                 \
        QK_BY_NT4(nt, span_call)                                                                      \
    }                                                                                                 \
    QK_TARGET_AVX2 static void name##_packed_tile(int64_t n, const void *xp, int ng, const void *y,   \
                                                  size_t ys, int nt, float *out, size_t ldo)          \
    {                                                                                                 \
        packed_k_tile(n, xp, ng, y, ys, nt, out, ldo, bsize, name##_span, mode);                      \
    }

#endif
#endif
