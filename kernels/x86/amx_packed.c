/* amx_packed.c - prompt products of the AVX-512 level's packed Q4_0, Q5_0,
 * Q8_0 and IQ4_XS rows (their packings: avx512_packed.c, avx2_packed_sum.c)
 * with AMX-INT8, where the CPU and the OS give it (qk_cpu_has_amx).
 *
 * The reference's steps are integer sums of 32 elements, exact in any
 * order, then one float step each and (row, token), in order (legacy.c,
 * ggml's vec_dot_q*_0_q8_0_generic; iq4.c, ggml_vec_dot_iq4_xs_q8_K_generic):
 *   Q4_0    sumf += ((float)sumi * dx) * dy          sumi = sum (u - 8) y
 *   Q5_0    sumf += (float)sumi * (dx * dy)          sumi = sum (u - 16) y
 *   Q8_0    sumf += (float)sumi * (dx * dy)          sumi = sum q y
 *   IQ4_XS  sumf += ((xd * yd) * ls) * (float)isum   per sub-block, isum its
 *                                                    codebook values . y
 * One tdpbssd makes the sums of 16 tokens x 16 rows (a pair of groups) at
 * once, from A (the tokens' 32 quant bytes, copied into tiles once a call
 * and span of blocks for all the pairs) and B (the block's weights as signed
 * bytes, eight rows of 4-byte chunks x 16 rows, made once a pair and span of
 * blocks for all the tokens).  The 16 x 16 sums then take the float step in
 * vector lanes, lane r row r, as the VNNI kernels do: the same bits
 * (test_matmul runs both paths).  The K-quants keep eight lane sums that
 * split a sub-block's products by index mod 8: not one tile product.
 *
 * Tokens 16 at a time (the remaining nt % 16 are the caller's); up to three
 * blocks' products in flight while a stored block takes its float steps. */
#include "kernels/x86/packed512.h"

#ifdef QK_X86
#include <stdalign.h>

/* bytes of a token's Q8_0 block; of a packed block of a group (Q4_0, Q5_0,
 * Q8_0); blocks per span; tokens per tile */
enum { QB = 34, GB4 = 8 * 18, GB5 = 8 * 22, GB8 = 8 * 34, KB = 32, TT = 16 };
/* IQ4_XS: a token's Q8_K block (d f32, qs[256], bsums); a packed super-block
 * of a group (avx2_packed_sum.c: xd[8] f16, ls[8 sub-blocks][8 rows] int8,
 * then per sub-block s and chunk c 32 bytes: elements 32 s + 4 c + k in the
 * low nibbles, 32 s + 16 + 4 c + k in the high ones) */
enum { QKB = 292, GBX = 80 + 8 * 128 };

/* The tile palette: tmm0..3 block sums, tmm4..5 tokens' bytes, tmm6..7
 * weights. */
static const alignas(64) qk_amx_cfg cfg = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 32, 32, 64, 64}, /* sums 16 x 16 int32; tokens 16 x 32 bytes; weights 8 x 64 */
    .rows = {16, 16, 16, 16, 16, 16, 8, 8},
};

QK_TARGET_AMX static void config(void) { _tile_loadconfig(&cfg); }

/* Blocks [0, kb) of the pair ga, gb (IQ4_XS: sub-blocks, kb a multiple of
 * 8): their weights as B tiles (signed bytes, 512 a block: row j the
 * elements 4j .. 4j + 3 of the 16 rows) and their row scales as floats
 * (IQ4_XS: xd of the super-block, and ls the sub-block's scale).  Q4_0 and
 * Q5_0 chunk j holds elements 4j + k in its low nibbles, 16 + 4j + k in its
 * high ones. */
QK_TARGET_AMX __attribute__((always_inline)) static inline void
pair_span(const int kind, const uint8_t *ga, const uint8_t *gb, int kb, int8_t *bt, float *dx, float *ls)
{
    if (kind == QK_AMX_IQ4_XS) {
        const __m512i m4 = _mm512_set1_epi8(0x0F);
        const __m512i cb = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)qk_x86_iq4nl_values));
        for (int b = 0; b < kb; b += 8, ga += GBX, gb += GBX) {
            const __m512 xd = ld2_f16(ga, gb);
            for (int s = 0; s < 8; s++) {
                int8_t *d = bt + 512 * (b + s);
                const __m128i l8 = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)(ga + 16 + 8 * s)),
                                                      _mm_loadl_epi64((const __m128i *)(gb + 16 + 8 * s)));
                _mm512_store_ps(dx + 16 * (b + s), xd);
                _mm512_store_ps(ls + 16 * (b + s), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(l8)));
                for (int c = 0; c < 4; c++) {
                    const size_t o = 80 + 128 * (size_t)s + 32 * (size_t)c;
                    const __m512i v = ld2(ga + o, gb + o);
                    _mm512_store_si512(d + 64 * c, _mm512_shuffle_epi8(cb, _mm512_and_si512(v, m4)));
                    _mm512_store_si512(d + 64 * (4 + c),
                                       _mm512_shuffle_epi8(cb, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4)));
                }
            }
        }
        return;
    }
    const size_t gbytes = kind == QK_AMX_Q8_0 ? GB8 : kind == QK_AMX_Q5_0 ? GB5 : GB4;
    const __m512i m4 = _mm512_set1_epi8(0x0F), flip = _mm512_set1_epi8(-128);
    const __m512i off = _mm512_set1_epi8(kind == QK_AMX_Q5_0 ? 16 : 8);
    for (int b = 0; b < kb; b++, ga += gbytes, gb += gbytes) {
        int8_t *d = bt + 512 * b;
        _mm512_store_ps(dx + 16 * b, ld2_f16(ga, gb));
        if (kind == QK_AMX_Q8_0) { /* bytes q + 128 */
            for (int j = 0; j < 8; j++)
                _mm512_store_si512(d + 64 * j, _mm512_xor_si512(ld2(ga + 16 + 32 * j, gb + 16 + 32 * j), flip));
            continue;
        }
        for (int j = 0; j < 4; j++) {
            const __m512i v = ld2(ga + 16 + 32 * j, gb + 16 + 32 * j);
            __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            if (kind == QK_AMX_Q5_0) {
                lo = _mm512_mask_add_epi8(lo, q5_mask(ga, gb, j, 0), lo, off);
                hi = _mm512_mask_add_epi8(hi, q5_mask(ga, gb, j, 1), hi, off);
            }
            _mm512_store_si512(d + 64 * j, _mm512_sub_epi8(lo, off));
            _mm512_store_si512(d + 64 * (4 + j), _mm512_sub_epi8(hi, off));
        }
    }
}

/* The float steps of block b: 16 tokens' sums (cs, token t at 16 t) with
 * the pair's row scales dx (IQ4_XS: and sub-block scales ls) and the
 * tokens' scales dy[t][b]; IQ4_XS: ((xd * yd) * ls) * (float)isum. */
QK_TARGET_AMX __attribute__((always_inline)) static inline void
steps(const int kind, __m512 f[TT], const int32_t *cs, const float *dx, const float *ls, const float (*dy)[KB], int b)
{
    const __m512 dxv = _mm512_load_ps(dx + 16 * b), lsv = kind == QK_AMX_IQ4_XS ? _mm512_load_ps(ls + 16 * b) : dxv;
    _Pragma("GCC unroll 16") for (int t = 0; t < TT; t++) {
        const __m512 s = _mm512_cvtepi32_ps(_mm512_load_si512(cs + 16 * t)), d = _mm512_set1_ps(dy[t][b]);
        f[t] = _mm512_add_ps(f[t], kind == QK_AMX_Q4_0     ? _mm512_mul_ps(_mm512_mul_ps(s, dxv), d)
                                   : kind == QK_AMX_IQ4_XS ? _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(dxv, d), lsv), s)
                                                           : _mm512_mul_ps(s, _mm512_mul_ps(dxv, d)));
    }
}

/* Block b's sums of the 16 tokens' A tiles at (512 bytes a block) and the
 * pair's B tiles bt, into tile c = b % 4 (the A and B tiles 4 + b % 2 and
 * 6 + b % 2): up to three blocks in flight; store: tile b % 4 into cs. */
#define DP(c, a, bb)                          \
    do {                                      \
        _tile_zero(c);                        \
        _tile_loadd(a, at + 512 * b, 32);     \
        _tile_loadd(bb, bt + 512 * b, 64);    \
        _tile_dpbssd(c, a, bb);               \
    } while (0)

QK_TARGET_AMX static inline void dp(const int8_t *at, const int8_t *bt, int b)
{
    switch (b & 3) {
    case 0: DP(0, 4, 6); break;
    case 1: DP(1, 5, 7); break;
    case 2: DP(2, 4, 6); break;
    default: DP(3, 5, 7); break;
    }
}
#undef DP

QK_TARGET_AMX static inline void store(int b, int32_t *cs)
{
    switch (b & 3) {
    case 0: _tile_stored(0, cs, 64); break;
    case 1: _tile_stored(1, cs, 64); break;
    case 2: _tile_stored(2, cs, 64); break;
    default: _tile_stored(3, cs, 64); break;
    }
}

QK_TARGET_AMX __attribute__((always_inline)) static inline int
tile(const int kind, int64_t n, const void *xp, int ng, const void *y, size_t ys, int nt, float *out, size_t ldo)
{
    enum { TC = 64 }; /* tokens whose scales are read once for all the pairs */
    const bool x4 = kind == QK_AMX_IQ4_XS;
    const int64_t nb = n / 32; /* blocks, or IQ4_XS's sub-blocks */
    const int mt = nt / TT * TT, npairs = (ng + 1) / 2;
    if (mt == 0)
        return 0;
    /* the bytes of a packed group, a token's row, a span's first block in each */
    const size_t gbytes = kind == QK_AMX_Q8_0 ? GB8 : kind == QK_AMX_Q5_0 ? GB5 : GB4;
    const size_t gsize = x4 ? (size_t)(n / 256) * GBX : (size_t)nb * gbytes;
    alignas(64) int8_t bt[KB * 512];
    alignas(64) float dx[KB * 16], ls[KB * 16];
    alignas(64) int32_t cs[2][16 * 16];
    alignas(64) int8_t at[TC / TT][KB * 512];
    float dy[TC][KB];
    config();
    for (int tc0 = 0; tc0 < mt; tc0 += TC) {
        const int tcn = mt - tc0 < TC ? mt - tc0 : TC;
        for (int64_t b0 = 0; b0 < nb; b0 += KB) {
            const int kb = (int)(nb - b0 < KB ? nb - b0 : KB);
            for (int t = 0; t < tcn; t++) {
                const uint8_t *yr = (const uint8_t *)y + (size_t)(tc0 + t) * ys;
                for (int b = 0; b < kb; b++) {
                    const int64_t i = b0 + b;
                    const uint8_t *yb = x4 ? yr + (size_t)(i / 8) * QKB : yr + (size_t)i * QB;
                    dy[t][b] = x4 ? qk_ld_f32(yb) : qk_ldh(yb);
                    memcpy(at[t / TT] + 512 * b + 32 * (t % TT), x4 ? yb + 4 + 32 * (i % 8) : yb + 2, 32);
                }
            }
            for (int p = 0; p < npairs; p++) {
                const int g = 2 * p;
                const bool full = g + 1 < ng;
                const uint8_t *ga = (const uint8_t *)xp + (size_t)g * gsize +
                                    (x4 ? (size_t)(b0 / 8) * GBX : (size_t)b0 * gbytes);
                pair_span(kind, ga, full ? ga + gsize : ga, kb, bt, dx, ls);
                for (int t0 = 0; t0 < tcn; t0 += TT) {
                    float *o = out + (size_t)(tc0 + t0) * ldo + (size_t)(8 * g);
                    const int8_t *a = at[t0 / TT];
                    __m512 f[TT];
                    _Pragma("GCC unroll 16") for (int t = 0; t < TT; t++)
                        f[t] = b0 == 0 ? _mm512_setzero_ps()
                               : full  ? _mm512_loadu_ps(o + (size_t)t * ldo)
                                       : _mm512_castps256_ps512(_mm256_loadu_ps(o + (size_t)t * ldo));
                    /* blocks b + 1 and b + 2's products are issued, and block b's sums
                     * stored, before block b - 1's float steps */
                    const float(*dyt)[KB] = (const float(*)[KB])(dy + t0);
                    dp(a, bt, 0);
                    if (kb > 1)
                        dp(a, bt, 1);
                    for (int b = 0; b < kb; b++) {
                        if (b + 2 < kb)
                            dp(a, bt, b + 2);
                        store(b, cs[b & 1]);
                        if (b > 0)
                            steps(kind, f, cs[(b - 1) & 1], dx, ls, dyt, b - 1);
                    }
                    steps(kind, f, cs[(kb - 1) & 1], dx, ls, dyt, kb - 1);
                    _Pragma("GCC unroll 16") for (int t = 0; t < TT; t++)
                        if (full)
                            _mm512_storeu_ps(o + (size_t)t * ldo, f[t]);
                        else
                            _mm256_storeu_ps(o + (size_t)t * ldo, _mm512_castps512_ps256(f[t]));
                }
            }
        }
    }
    _tile_release();
    return mt;
}

/* tile's instances, the kind a constant in each */
#define AMX_TILE(name, kind)                                                                              \
    QK_TARGET_AMX static int name(int64_t n, const void *xp, int ng, const void *y, size_t ys, int nt,     \
                                  float *out, size_t ldo)                                                 \
    {                                                                                                     \
        return tile(kind, n, xp, ng, y, ys, nt, out, ldo);                                                \
    }
AMX_TILE(tile_q4_0, QK_AMX_Q4_0)
AMX_TILE(tile_q5_0, QK_AMX_Q5_0)
AMX_TILE(tile_q8_0, QK_AMX_Q8_0)
AMX_TILE(tile_iq4_xs, QK_AMX_IQ4_XS)
#undef AMX_TILE

int qk_x86_amx_tile32(int kind, int64_t n, const void *xp, int ng, const void *y, size_t ys, int nt, float *out,
                      size_t ldo)
{
    if (nt < TT || kind == QK_AMX_NONE || !qk_cpu_has_amx())
        return 0;
    switch (kind) {
    case QK_AMX_Q4_0: return tile_q4_0(n, xp, ng, y, ys, nt, out, ldo);
    case QK_AMX_Q5_0: return tile_q5_0(n, xp, ng, y, ys, nt, out, ldo);
    case QK_AMX_IQ4_XS: return tile_iq4_xs(n, xp, ng, y, ys, nt, out, ldo);
    default: return tile_q8_0(n, xp, ng, y, ys, nt, out, ldo);
    }
}
#endif
