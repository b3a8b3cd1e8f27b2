/* avx2_packed.c - AVX2 kernels of repacked weights (cpu.h's pack and
 * packed_tile): Q4_0 and Q8_0 in groups of eight rows.
 *
 * The row-major blocks make a kernel that serves eight rows gather their
 * eight scales field by field and reduce each row's 8 int32 partials
 * horizontally (avx2_legacy.c's GROUP).  Packed, block b of a group holds
 *   d[8]        the eight rows' f16 scales, row order (16 bytes)
 *   qs[4][32]   chunk j: bytes 4r .. 4r+3 are row r's qs[4j .. 4j+3]
 * (144 bytes, the eight blocks' own size), so one vector holds four bytes
 * of every row: maddubs against the activation's matching four bytes,
 * broadcast, leaves row r's pair sums in lane r, and after the eight
 * chunk products (low and high nibbles) one madd gives each row's exact
 * block sum in its own lane.  No horizontal step, and the scales are one
 * load.  Each lane then runs the reference's float step for its row,
 *   sumf += ((float)sumi * dx) * dy      (legacy.c, ggml_vec_dot_q4_0_q8_0_generic)
 * block by block, so the results are vec_dot's bits (test_matmul).
 *
 * The sums run on the unsigned nibbles u (level + 8) and lose 8 sum(y):
 * a 16-bit lane adds eight products pairs of at most 2 * 15 * 127 = 3810,
 * 30480 in all, inside int16. */
#include "kernels/x86/simd_common.h"

#ifdef QK_X86

#include <string.h>

/* PT tokens share each unpacked weight block; KC blocks of activation
 * side are prepared at a time (act_span); GMAX groups share it.  Tiles of
 * 16 rows keep Q4_0's groups in L1 while the tokens pass (64 measured
 * 15 % slower); Q8_0 prefers 64 (about 4 % faster). */
enum { Q4_0_SIZE = 18, Q8_0_SIZE = 34, QK = 32, GROUP = 8, PT = 4, KC = 512, GMAX = 8 };
_Static_assert(PT == 4, "the spans are instanced for 1..4 tokens (QK_BY_NT4)");

static size_t q4_0_pack_size(int64_t n) { return (size_t)(n / QK) * GROUP * Q4_0_SIZE; }

/* Rows [0, 8) at x (row stride xs, n columns) into the packed group at dst. */
static void q4_0_pack(int64_t n, const void *x, size_t xs, void *dst)
{
    const uint8_t *src = x;
    uint8_t *d = dst;
    for (int64_t b = 0; b < n / QK; b++, d += GROUP * Q4_0_SIZE) {
        for (int r = 0; r < GROUP; r++) {
            const uint8_t *blk = src + (size_t)r * xs + (size_t)b * Q4_0_SIZE;
            d[2 * r] = blk[0], d[2 * r + 1] = blk[1];
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
                for (int k = 0; k < 4; k++)
                    d[16 + 32 * j + 4 * r + k] = blk[2 + 4 * j + k];
        }
    }
}

/* The activation side of a span of blocks, once for all the groups: per
 * token t and block b, 8 sum(y) (the nibble offset's share, exact) and the
 * scale dy as a float. */
typedef struct {
    int32_t corr[PT][KC];
    float dy[PT][KC];
} act_span;

QK_TARGET_AVX2 static void act_prepare(const uint8_t *const y[PT], int nt, int64_t b0, int nb, int corr,
                                       act_span *a)
{
    const __m256i ones16 = _mm256_set1_epi16(1), ones8 = _mm256_set1_epi8(1);
    _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++)
        for (int b = 0; b < nb; b++) {
            const uint8_t *yb = y[t] + (size_t)(b0 + b) * Q8_0_SIZE;
            if (corr) {
                const __m256i yv = _mm256_loadu_si256((const __m256i *)(yb + 2));
                a->corr[t][b] = 8 * qk_hsum_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(ones8, yv), ones16));
            }
            a->dy[t][b] = qk_ldh(yb);
        }
}

/* Blocks [b0, b0 + nb) of one packed group g against up to PT activation
 * rows, continuing the rows' running sums acc[t] (lane r: row r). */
QK_TARGET_AVX2 __attribute__((always_inline)) static inline void
q4_0_packed_span_nt(const uint8_t *g, const uint8_t *const y[PT], const int nt, int64_t b0, int nb,
                    const act_span *a, __m256 acc[PT])
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones16 = _mm256_set1_epi16(1);
    __m256 s[PT];
    _Pragma("GCC unroll 4") for (int t = 0; t < PT; t++)
        s[t] = acc[t];
    g += (size_t)b0 * GROUP * Q4_0_SIZE;
    for (int b = 0; b < nb; b++, g += GROUP * Q4_0_SIZE) {
        qk_prefetch_span(g + QK_PREFETCH_AHEAD, GROUP * Q4_0_SIZE);
        const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g));
        __m256i lo[4], hi[4];
        _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(g + 16 + 32 * j));
            lo[j] = _mm256_and_si256(v, m4);
            hi[j] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        }
        _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++) {
            const uint8_t *yq = y[t] + (size_t)(b0 + b) * Q8_0_SIZE + 2;
            __m256i p = _mm256_setzero_si256();
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
                p = _mm256_add_epi16(p, _mm256_maddubs_epi16(lo[j], _mm256_set1_epi32((int)qk_ld_u32(yq + 4 * j))));
                p = _mm256_add_epi16(p, _mm256_maddubs_epi16(hi[j], _mm256_set1_epi32((int)qk_ld_u32(yq + 16 + 4 * j))));
            }
            const __m256i si = _mm256_sub_epi32(_mm256_madd_epi16(p, ones16), _mm256_set1_epi32(a->corr[t][b]));
            s[t] = _mm256_add_ps(s[t], _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(si), dx),
                                                     _mm256_set1_ps(a->dy[t][b])));
        }
    }
    _Pragma("GCC unroll 4") for (int t = 0; t < PT; t++)
        acc[t] = s[t];
}

/* One instance per token count: the token loops unroll. */
QK_TARGET_AVX2 static void q4_0_packed_span(const uint8_t *g, const uint8_t *const y[PT], int nt,
                                            int64_t b0, int nb, const act_span *a, __m256 acc[PT])
{
    QK_BY_NT4(nt, q4_0_packed_span_nt(g, y, N, b0, nb, a, acc))
}

typedef void (*span_fn)(const uint8_t *g, const uint8_t *const y[PT], int nt, int64_t b0, int nb,
                        const act_span *a, __m256 acc[PT]);

/* ng packed groups at xp (8 rows of blocks of bsize bytes each) against nt
 * activation rows: tokens PT at a time, blocks KC at a time, every group
 * through each span; corr: the spans read act_span's corr. */
QK_TARGET_AVX2 static void packed_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys, int nt,
                                       float *out, size_t ldo, size_t bsize, span_fn span, int corr)
{
    const int64_t nb = n / QK;
    const size_t gsize = (size_t)nb * GROUP * bsize;
    act_span a;
    for (int g0 = 0; g0 < ng; g0 += GMAX) {
        const int gn = ng - g0 < GMAX ? ng - g0 : GMAX;
        for (int t0 = 0; t0 < nt; t0 += PT) {
            const int q = nt - t0 < PT ? nt - t0 : PT;
            const uint8_t *yr[PT];
            _Pragma("GCC unroll 4") for (int t = 0; t < PT; t++)
                yr[t] = (const uint8_t *)y + (size_t)(t0 + (t < q ? t : 0)) * ys;
            __m256 acc[GMAX][PT];
            memset(acc, 0, (size_t)gn * sizeof *acc);
            for (int64_t b0 = 0; b0 < nb; b0 += KC) {
                const int kb = (int)(nb - b0 < KC ? nb - b0 : KC);
                act_prepare(yr, q, b0, kb, corr, &a);
                for (int gi = 0; gi < gn; gi++)
                    span((const uint8_t *)xp + (size_t)(g0 + gi) * gsize, yr, q, b0, kb, &a, acc[gi]);
            }
            /* a group's eight outputs of one token are adjacent in out */
            for (int gi = 0; gi < gn; gi++)
                for (int t = 0; t < q; t++)
                    _mm256_storeu_ps(out + (size_t)(t0 + t) * ldo + (size_t)(GROUP * (g0 + gi)), acc[gi][t]);
        }
    }
}

static void q4_0_packed_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys, int nt,
                             float *out, size_t ldo)
{
    packed_tile(n, xp, ng, y, ys, nt, out, ldo, Q4_0_SIZE, q4_0_packed_span, 1);
}

/* ---- Q8_0 ---------------------------------------------------------------------
 * Packed block of a group: d[8] (f16, row order), then qs[8][32]: vector j,
 * bytes 4r .. 4r+3 are row r's qs[4j .. 4j+3] (272 bytes, the eight blocks'
 * size).  Levels are signed, so each product takes |w| against y with w's
 * signs (exact: activation quants are in [-127, 127]), pairs summed by madd
 * into row r's lane, and the reference's float step per lane:
 *   sumf += (float)sumi * (dx * dy)      (legacy.c, ggml_vec_dot_q8_0_q8_0_generic)
 * One token shares nothing, so each vector goes straight through (about 8 %
 * faster than avx2_legacy.c's GROUP on bench250m Q8_0 tg32, in 64-row tiles). */
static size_t q8_0_pack_size(int64_t n) { return (size_t)(n / QK) * GROUP * Q8_0_SIZE; }

/* The layout above with every quant byte XORed with flip (x86.h: the
 * AVX-512 level stores them offset to unsigned, flip 0x80). */
void qk_x86_q8_0_pack_xor(int64_t n, const void *x, size_t xs, void *dst, uint8_t flip)
{
    uint8_t *d = dst;
    for (int64_t b = 0; b < n / QK; b++, d += GROUP * Q8_0_SIZE)
        for (int r = 0; r < GROUP; r++) {
            const uint8_t *blk = (const uint8_t *)x + (size_t)r * xs + (size_t)b * Q8_0_SIZE;
            d[2 * r] = blk[0], d[2 * r + 1] = blk[1];
            _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++)
                for (int k = 0; k < 4; k++)
                    d[16 + 32 * j + 4 * r + k] = blk[2 + 4 * j + k] ^ flip;
        }
}

static void q8_0_pack(int64_t n, const void *x, size_t xs, void *dst) { qk_x86_q8_0_pack_xor(n, x, xs, dst, 0); }

QK_TARGET_AVX2 __attribute__((always_inline)) static inline void
q8_0_packed_span_nt(const uint8_t *g, const uint8_t *const y[PT], const int nt, int64_t b0, int nb,
                    const act_span *a, __m256 acc[PT])
{
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256 s[PT];
    _Pragma("GCC unroll 4") for (int t = 0; t < PT; t++)
        s[t] = acc[t];
    g += (size_t)b0 * GROUP * Q8_0_SIZE;
    for (int b = 0; b < nb; b++, g += GROUP * Q8_0_SIZE) {
        qk_prefetch_span(g + QK_PREFETCH_AHEAD, GROUP * Q8_0_SIZE);
        const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g));
        if (nt == 1) { /* nothing to share: each vector straight through */
            const uint8_t *yq = y[0] + (size_t)(b0 + b) * Q8_0_SIZE + 2;
            __m256i si = _mm256_setzero_si256();
            _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
                const __m256i w = _mm256_loadu_si256((const __m256i *)(g + 16 + 32 * j));
                const __m256i yv = _mm256_set1_epi32((int)qk_ld_u32(yq + 4 * j));
                si = _mm256_add_epi32(si, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w),
                                                                                 _mm256_sign_epi8(yv, w)),
                                                            ones16));
            }
            s[0] = _mm256_add_ps(s[0], _mm256_mul_ps(_mm256_cvtepi32_ps(si),
                                                     _mm256_mul_ps(dx, _mm256_set1_ps(a->dy[0][b]))));
            continue;
        }
        __m256i w[8], mag[8];
        _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
            w[j] = _mm256_loadu_si256((const __m256i *)(g + 16 + 32 * j));
            mag[j] = _mm256_sign_epi8(w[j], w[j]);
        }
        _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++) {
            const uint8_t *yq = y[t] + (size_t)(b0 + b) * Q8_0_SIZE + 2;
            __m256i si = _mm256_setzero_si256();
            _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
                const __m256i yv = _mm256_set1_epi32((int)qk_ld_u32(yq + 4 * j));
                si = _mm256_add_epi32(si, _mm256_madd_epi16(_mm256_maddubs_epi16(mag[j], _mm256_sign_epi8(yv, w[j])),
                                                            ones16));
            }
            s[t] = _mm256_add_ps(s[t], _mm256_mul_ps(_mm256_cvtepi32_ps(si),
                                                     _mm256_mul_ps(dx, _mm256_set1_ps(a->dy[t][b]))));
        }
    }
    _Pragma("GCC unroll 4") for (int t = 0; t < PT; t++)
        acc[t] = s[t];
}

QK_TARGET_AVX2 static void q8_0_packed_span(const uint8_t *g, const uint8_t *const y[PT], int nt,
                                            int64_t b0, int nb, const act_span *a, __m256 acc[PT])
{
    QK_BY_NT4(nt, q8_0_packed_span_nt(g, y, N, b0, nb, a, acc))
}

static void q8_0_packed_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys, int nt,
                             float *out, size_t ldo)
{
    packed_tile(n, xp, ng, y, ys, nt, out, ldo, Q8_0_SIZE, q8_0_packed_span, 0);
}

const qk_pack_ops qk_x86_avx2_packed[] = {
    {.id = QK_Q4_0, .pack_size = q4_0_pack_size, .pack = q4_0_pack, .packed_tile = q4_0_packed_tile, .decode = 1,
     .tile_rows = 16},
    {.id = QK_Q8_0, .pack_size = q8_0_pack_size, .pack = q8_0_pack, .packed_tile = q8_0_packed_tile, .tile_rows = 64, .decode = 1},
    {.id = -1},
};

#endif
