/* avx512_packed_k.c - AVX-512 VNNI kernels of repacked super-block weights:
 * Q4_K, Q5_K, Q6_K and IQ4_XS (cpu.h's pack and packed_tile; packed512.h).
 *
 * The packed groups are the AVX2 level's, byte for byte (avx2_packed_k4.c,
 * avx2_packed_k6.c, avx2_packed_sum.c describe them and the reference sums
 * they reproduce); here one 512-bit vector holds two groups, sixteen rows,
 * and each lane runs its row's reference steps:
 * - Q4_K, Q5_K, Q6_K: the eight lane sums of the reference, exact integers
 *   built as in AVX2 (maddubs pairs), the scale step and the sum in one
 *   vpdpwssd (int16 pairs times the sub-block scales, added to int32);
 *   then per block and lane  sums[l] += (xd * yd) * (float)lane[l];
 * - IQ4_XS: the codebook through vpshufb as unsigned bytes (value + 128)
 *   against the signed activation bytes in vpdpbusd, each sub-block's sum
 *   started at -128 sum(y) over the sub-block (from the Q8_K block sums),
 *   so it is the exact isum; then sumf += ((xd * yd) * ls) * (float)isum. */
#include "kernels/x86/packed_k.h"
#include "kernels/x86/packed512.h"

#ifdef QK_X86

/* ---- the activation side ------------------------------------------------------
 * Q4_K, Q5_K, Q6_K: each Q8_K block of a token as an act row block of
 * Q8_K_SIZE bytes (packed_k.h's act_block: the quants permuted for the
 * kernel, the scale at 256, the sums at 260), made once per product
 * (pack_act: whole rows) or, for packed_tile, per span of a tile into buf;
 * the spans read them through row[t], each token's first block of the span. */
typedef struct {
    const uint8_t *row[PT8];
    uint8_t buf[PT8][KC][Q8_K_SIZE];
} act_k;

static inline const uint8_t *act_at(const act_k *a, int t, int b) { return a->row[t] + (size_t)b * Q8_K_SIZE; }
#define YS(a, t, b) act_at(a, t, b)
#define YD(a, t, b) qk_ld_f32(act_at(a, t, b) + QKK)
#define BS(a, t, b, p) ((int32_t)qk_ld_u32(act_at(a, t, b) + QKK + 4 + 4 * (p)))

/* The Q8_K block at yb as an act row block at dst. */
QK_TARGET_V512 static inline void act_row_block(const uint8_t *yb, int mode, uint8_t *dst)
{
    float yd;
    int32_t bs[8] = {0};
    act_block(yb, mode, dst, &yd, bs);
    memcpy(dst + QKK, &yd, 4);
    memcpy(dst + QKK + 4, bs, 32);
}

/* nb Q8_K blocks at y as act row blocks at dst. */
QK_TARGET_V512 static inline void act_rows(const uint8_t *y, int64_t nb, int mode, uint8_t *dst)
{
    for (int64_t b = 0; b < nb; b++)
        act_row_block(y + (size_t)b * Q8_K_SIZE, mode, dst + (size_t)b * Q8_K_SIZE);
}

QK_TARGET_V512 __attribute__((always_inline)) static inline void prep_k(const uint8_t *const y[PT8], int nt,
                                                                        int64_t b0, int nb, act_k *a, int mode)
{
    for (int t = 0; t < nt; t++) {
        act_rows(y[t] + (size_t)b0 * Q8_K_SIZE, nb, mode, a->buf[t][0]);
        a->row[t] = a->buf[t][0];
    }
}

QK_TARGET_V512 static void prep_k4(const uint8_t *const y[PT8], int nt, int64_t b0, int nb, void *a)
{
    prep_k(y, nt, b0, nb, a, ACT_K4);
}

QK_TARGET_V512 static void prep_k6(const uint8_t *const y[PT8], int nt, int64_t b0, int nb, void *a)
{
    prep_k(y, nt, b0, nb, a, ACT_K6);
}

/* packed_tile_act's: the rows were made by pack_act; the span starts at block b0. */
static void prep_rows(const uint8_t *const y[PT8], int nt, int64_t b0, int nb, void *va)
{
    act_k *a = va;
    (void)nb;
    for (int t = 0; t < nt; t++)
        a->row[t] = y[t] + (size_t)b0 * Q8_K_SIZE;
}

/* pack_act: a Q8_K row of n columns as act row blocks. */
static size_t k_act_size(int64_t n) { return (size_t)(n / QKK) * Q8_K_SIZE; }

QK_TARGET_V512 static void k4_pack_act(int64_t n, const void *y, void *dst) { act_rows(y, n / QKK, ACT_K4, dst); }

QK_TARGET_V512 static void k6_pack_act(int64_t n, const void *y, void *dst) { act_rows(y, n / QKK, ACT_K6, dst); }

/* ---- Q4_K, Q5_K -------------------------------------------------------------- */

/* Q5_K's bit 4 of V[l][q]'s low (half 0) or high (half 1) nibbles: bit
 * 2q + half of each byte of hb, moved to bit 4 (avx2_packed_k4.c's k5_high). */
QK_TARGET_V512 static inline __m512i k5_high512(__m512i hb, int q, int half)
{
    const int sh = 4 - (2 * q + half);
    const __m512i v = sh > 0 ? _mm512_slli_epi16(hb, (unsigned)sh) : sh < 0 ? _mm512_srli_epi16(hb, (unsigned)-sh) : hb;
    return _mm512_and_si512(v, _mm512_set1_epi8(0x10));
}

QK_TARGET_V512 __attribute__((always_inline)) static inline void
k4_span512(const uint8_t *ga, const uint8_t *gb, const int nt, int nb, const act_k *a, pair_state *st, const int five)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const size_t bsize = five ? PACKED5 : PACKED;
    for (int b = 0; b < nb; b++, ga += bsize, gb += bsize) {
        const __m512 xd = ld2_f16(ga, gb), xdmin = ld2_f16(ga + 16, gb + 16);
        __m512i sc[4];
        _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++)
            sc[q] = _mm512_cvtepu8_epi16(ld2h(ga + 32 + 16 * q, gb + 32 + 16 * q));
        __m512 dt[PT8];
        _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++)
            dt[t] = _mm512_mul_ps(xd, _mm512_set1_ps(YD(a, t, b)));
        _Pragma("GCC unroll 1") for (int l = 0; l < 8; l++) {
            qk_prefetch_span(ga + QK_PREFETCH_AHEAD + l * (bsize / 8), bsize / 8);
            qk_prefetch_span(gb + QK_PREFETCH_AHEAD + l * (bsize / 8), bsize / 8);
            const __m512i hb = five ? ld2(ga + v_at(l, 1) + 128, gb + v_at(l, 1) + 128) : m4;
            __m512i acc[PT8];
            _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++)
                acc[t] = _mm512_setzero_si512();
            _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) {
                const __m512i v = ld2(ga + v_at(l, five) + 32 * q, gb + v_at(l, five) + 32 * q);
                __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                if (five) {
                    lo = _mm512_or_si512(lo, k5_high512(hb, q, 0));
                    hi = _mm512_or_si512(hi, k5_high512(hb, q, 1));
                }
                _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++) {
                    const uint8_t *ys = YS(a, t, b) + 64 * q + 4 * l;
                    const __m512i p = _mm512_add_epi16(_mm512_maddubs_epi16(lo, bc4(ys)),
                                                       _mm512_maddubs_epi16(hi, bc4(ys + 32)));
                    acc[t] = _mm512_dpwssd_epi32(acc[t], p, sc[q]);
                }
            }
            _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++)
                st->s[t][l] = _mm512_add_ps(st->s[t][l], _mm512_mul_ps(dt[t], _mm512_cvtepi32_ps(acc[t])));
        }
        __m512i mn[4];
        _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++)
            mn[p] = _mm512_cvtepu8_epi16(ld2h(ga + 96 + 16 * p, gb + 96 + 16 * p));
        _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++) {
            __m512i sumi = _mm512_setzero_si512();
            _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++)
                sumi = _mm512_dpwssd_epi32(sumi, mn[p], _mm512_set1_epi32(BS(a, t, b, p)));
            const __m512 dm = _mm512_mul_ps(xdmin, _mm512_set1_ps(YD(a, t, b)));
            st->f[t] = _mm512_sub_ps(st->f[t], _mm512_mul_ps(dm, _mm512_cvtepi32_ps(sumi)));
        }
    }
}

QK_TARGET_V512 static void q4_K_span(const uint8_t *ga, const uint8_t *gb, int nt, int nb, const void *a,
                                     pair_state *st)
{
    QK_BY_NT8(nt, k4_span512(ga, gb, N, nb, a, st, 0))
}

QK_TARGET_V512 static void q5_K_span(const uint8_t *ga, const uint8_t *gb, int nt, int nb, const void *a,
                                     pair_state *st)
{
    QK_BY_NT8(nt, k4_span512(ga, gb, N, nb, a, st, 1))
}

/* ---- Q6_K -------------------------------------------------------------------- */

/* Level i (0..3) of a quad as signed bytes q - 32 (avx2_packed_k6.c's q6_level). */
QK_TARGET_V512 static inline __m512i q6_level512(__m512i n0, __m512i n1, __m512i h, int i)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x30);
    const __m512i n = i / 2 ? n1 : n0;
    const __m512i nib = _mm512_and_si512(i % 2 ? _mm512_srli_epi16(n, 4) : n, m4);
    const __m512i top = _mm512_and_si512(i < 2 ? _mm512_slli_epi16(h, (unsigned)(4 - 2 * i))
                                         : i == 2 ? h : _mm512_srli_epi16(h, 2), m2);
    return _mm512_sub_epi8(_mm512_or_si512(nib, top), _mm512_set1_epi8(32));
}

QK_TARGET_V512 __attribute__((always_inline)) static inline void
k6_span512(const uint8_t *ga, const uint8_t *gb, const int nt, int nb, const act_k *a, pair_state *st)
{
    for (int b = 0; b < nb; b++, ga += PACKED6, gb += PACKED6) {
        const __m512 xd = ld2_f16(ga, gb);
        __m512i sc[8];
        _Pragma("GCC unroll 8") for (int m = 0; m < 8; m++)
            sc[m] = _mm512_cvtepi8_epi16(ld2h(ga + 16 + 16 * m, gb + 16 + 16 * m));
        __m512 dt[PT8];
        _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++)
            dt[t] = _mm512_mul_ps(xd, _mm512_set1_ps(YD(a, t, b)));
        _Pragma("GCC unroll 1") for (int l = 0; l < 8; l++) {
            qk_prefetch_span(ga + QK_PREFETCH_AHEAD + quad_at(l, 0), 224);
            qk_prefetch_span(gb + QK_PREFETCH_AHEAD + quad_at(l, 0), 224);
            /* the sums start at -corr[l]: the unsigned activations' offset */
            const __m512i ncorr = _mm512_sub_epi32(_mm512_setzero_si512(), ld2(ga + quad_at(l, 2), gb + quad_at(l, 2)));
            __m512i acc[PT8];
            _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++)
                acc[t] = ncorr;
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                const size_t o = quad_at(l, h);
                const __m512i n0 = ld2(ga + o, gb + o), n1 = ld2(ga + o + 32, gb + o + 32);
                const __m512i hb = ld2(ga + o + 64, gb + o + 64);
                _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
                    const int m = 4 * h + i;
                    const __m512i lv = q6_level512(n0, n1, hb, i);
                    _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++)
                        acc[t] = _mm512_dpwssd_epi32(acc[t], _mm512_maddubs_epi16(bc4(YS(a, t, b) + 32 * m + 4 * l), lv),
                                                     sc[m]);
                }
            }
            _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++)
                st->s[t][l] = _mm512_add_ps(st->s[t][l], _mm512_mul_ps(dt[t], _mm512_cvtepi32_ps(acc[t])));
        }
    }
}

QK_TARGET_V512 static void q6_K_span(const uint8_t *ga, const uint8_t *gb, int nt, int nb, const void *a,
                                     pair_state *st)
{
    QK_BY_NT8(nt, k6_span512(ga, gb, N, nb, a, st))
}

/* ---- IQ4_XS --------------------------------------------------------------------- */

/* Each token's quants at the span's first block, the scales, and per
 * sub-block -128 times the sum of its activation quants. */
typedef struct {
    const uint8_t *yq[PT8];
    float yd[PT8][KC];
    int32_t corr[PT8][KC][8];
} act_x4;

QK_TARGET_V512 static void prep_x4(const uint8_t *const y[PT8], int nt, int64_t b0, int nb, void *va)
{
    act_x4 *a = va;
    for (int t = 0; t < nt; t++) {
        const uint8_t *yb = y[t] + (size_t)b0 * Q8_K_SIZE;
        a->yq[t] = yb + 4;
        for (int b = 0; b < nb; b++, yb += Q8_K_SIZE) {
            a->yd[t][b] = qk_ld_f32(yb);
            for (int s = 0; s < 8; s++)
                a->corr[t][b][s] = -128 * ((int16_t)qk_ld_u16(yb + 260 + 4 * s) + (int16_t)qk_ld_u16(yb + 262 + 4 * s));
        }
    }
}

QK_TARGET_V512 __attribute__((always_inline)) static inline void
x4_span512(const uint8_t *ga, const uint8_t *gb, const int nt, int nb, const act_x4 *a, pair_state *st)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    /* the codebook + 128 as unsigned bytes (x ^ 0x80) */
    const __m512i cb = _mm512_broadcast_i32x4(
        _mm_xor_si128(_mm_loadu_si128((const __m128i *)qk_x86_iq4nl_values), _mm_set1_epi8(-128)));
    __m512 f[PT8];
    _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++)
        f[t] = st->f[t];
    for (int b = 0; b < nb; b++, ga += PACKED4X, gb += PACKED4X) {
        const __m512 xd = ld2_f16(ga, gb);
        __m512 dt[PT8];
        _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++)
            dt[t] = _mm512_mul_ps(xd, _mm512_set1_ps(a->yd[t][b]));
        for (int s = 0; s < 8; s++) {
            qk_prefetch_span(ga + QK_PREFETCH_AHEAD + 80 + 128 * s, 128);
            qk_prefetch_span(gb + QK_PREFETCH_AHEAD + 80 + 128 * s, 128);
            const __m128i ls8 = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)(ga + 16 + 8 * s)),
                                                   _mm_loadl_epi64((const __m128i *)(gb + 16 + 8 * s)));
            const __m512 ls = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(ls8));
            __m512i acc[PT8];
            _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++)
                acc[t] = _mm512_set1_epi32(a->corr[t][b][s]);
            _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
                const size_t o = 80 + 128 * (size_t)s + 32 * (size_t)c;
                const __m512i v = ld2(ga + o, gb + o);
                const __m512i vl = _mm512_shuffle_epi8(cb, _mm512_and_si512(v, m4));
                const __m512i vh = _mm512_shuffle_epi8(cb, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
                _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++) {
                    const uint8_t *yq = a->yq[t] + (size_t)b * Q8_K_SIZE + 32 * s + 4 * c;
                    acc[t] = _mm512_dpbusd_epi32(acc[t], vl, bc4(yq));
                    acc[t] = _mm512_dpbusd_epi32(acc[t], vh, bc4(yq + 16));
                }
            }
            _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++)
                f[t] = _mm512_add_ps(f[t], _mm512_mul_ps(_mm512_mul_ps(dt[t], ls), _mm512_cvtepi32_ps(acc[t])));
        }
    }
    _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++)
        st->f[t] = f[t];
}

QK_TARGET_V512 static void iq4_xs_span(const uint8_t *ga, const uint8_t *gb, int nt, int nb, const void *a,
                                       pair_state *st)
{
    QK_BY_NT8(nt, x4_span512(ga, gb, N, nb, a, st))
}

/* ---- tiles ----------------------------------------------------------------------- */

/* TILE512(name, ...): name##_packed_tile over name##_span; one-token products
 * go to the AVX2 kernel of the same packing in table below (NULL: none),
 * which streams one group at a time and so reads memory faster than two
 * side by side (a 16384x4096 matrix from memory, one token, the AVX2
 * kernel against these spans, thread CPU time, best and median of 7:
 * Q4_K 1.4x and 1.25x, Q5_K 1.1x and 1.0x, IQ4_XS 0.95x and 1.15x). */
#define TILE512(name, id, bsz, prepfn, actt, lanes_, pt_, below, amx_)                                  \
    QK_TARGET_V512 static void name##_packed_tile(int64_t n, const void *xp, int ng, const void *y,     \
                                                  size_t ys, int nt, float *out, size_t ldo)            \
    {                                                                                                   \
        const qk_packed_tile_fn one = nt == 1 ? packed_tile_in(below, id) : NULL;                       \
        if (one) {                                                                                      \
            one(n, xp, ng, y, ys, nt, out, ldo);                                                        \
            return;                                                                                     \
        }                                                                                               \
        actt a;                                                                                         \
        const packed512 k = {.cols = n, .blk = QKK, .amx = amx_, .bsize = bsz, .kc = KC, .pt = pt_,      \
                             .lanes = lanes_, .prep = prepfn, .span = name##_span, .act = &a};          \
        packed512_tile(&k, xp, ng, y, ys, nt, out, ldo);                                                \
    }

/* (amx: amx_packed.c's kind; none for the K-quants, whose eight lane sums
 * split each sub-block's products by index mod 8, which one tile product
 * cannot) */
TILE512(q4_K, QK_Q4_K, PACKED, prep_k4, act_k, 1, PT8, qk_x86_avx2_packed_k4, QK_AMX_NONE)
TILE512(q5_K, QK_Q5_K, PACKED5, prep_k4, act_k, 1, PT8, qk_x86_avx2_packed_k4, QK_AMX_NONE)
TILE512(q6_K, QK_Q6_K, PACKED6, prep_k6, act_k, 1, PT8, qk_x86_avx2_packed_k6, QK_AMX_NONE)
TILE512(iq4_xs, QK_IQ4_XS, PACKED4X, prep_x4, act_x4, 0, PT8, qk_x86_avx2_packed_sum, QK_AMX_IQ4_XS)

/* TILE512_ACT(name, bsz): name##_packed_tile_act, the spans on pack_act's rows. */
#define TILE512_ACT(name, bsz)                                                                           \
    QK_TARGET_V512 static void name##_packed_tile_act(int64_t n, const void *xp, int ng, const void *y, \
                                                      size_t ys, int nt, float *out, size_t ldo)        \
    {                                                                                                   \
        act_k a;                                                                                        \
        const packed512 k = {.cols = n, .blk = QKK, .amx = QK_AMX_NONE, .bsize = bsz, .kc = KC,          \
                             .pt = PT8, .lanes = 1, .prep = prep_rows, .span = name##_span, .act = &a};  \
        packed512_tile(&k, xp, ng, y, ys, nt, out, ldo);                                                \
    }

TILE512_ACT(q4_K, PACKED)
TILE512_ACT(q5_K, PACKED5)
TILE512_ACT(q6_K, PACKED6)

/* The AVX2 level's packing (pack NULL). */
const qk_pack_ops qk_x86_avx512_packed_k[] = {
    {.id = QK_Q4_K, .packed_tile = q4_K_packed_tile, .tile_rows = 128, .decode = 1, .pack_act_size = k_act_size,
     .pack_act = k4_pack_act, .packed_tile_act = q4_K_packed_tile_act},
    {.id = QK_Q5_K, .packed_tile = q5_K_packed_tile, .tile_rows = 128, .decode = 1, .pack_act_size = k_act_size,
     .pack_act = k4_pack_act, .packed_tile_act = q5_K_packed_tile_act},
    {.id = QK_Q6_K, .packed_tile = q6_K_packed_tile, .tile_rows = 128, .pack_act_size = k_act_size,
     .pack_act = k6_pack_act, .packed_tile_act = q6_K_packed_tile_act},
    {.id = QK_IQ4_XS, .packed_tile = iq4_xs_packed_tile, .tile_rows = 128, .decode = 1},
    {.id = -1},
};

#endif
