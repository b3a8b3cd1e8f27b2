/* avx512_packed.c - AVX-512 VNNI kernels of repacked Q4_0, Q5_0 and Q8_0
 * weights (cpu.h's pack and packed_tile; packed512.h), two groups of eight
 * rows per 512-bit vector.
 *
 * The packed groups are avx2_packed.c's: block b of a group holds d[8]
 * (the rows' f16 scales) and chunk vectors whose bytes 4r .. 4r+3 are row
 * r's.  Q5_0 (this level's own packing) is Q4_0's layout of its low four
 * bits, then per chunk j two 32-bit masks of the fifth bits, bit 4r + k of
 * the first that of the low nibble of row r's byte 4j + k (qh bit 4j + k),
 * of the second that of its high nibble (qh bit 16 + 4j + k): one masked
 * byte add of 16 makes the level u = q + 16 of ggml's q - 16, 0 .. 31.
 * One vpdpbusd (unsigned bytes times signed bytes, four products per
 * int32 lane, added to it) takes a chunk of sixteen rows against the
 * activation's four matching bytes, broadcast: each lane gathers its row's
 * exact block sum, and each lane then runs the reference's float step:
 *   Q4_0  sumf += ((float)sumi * dx) * dy   (levels u = q + 8: sumi = sum u y - 8 sum y)
 *   Q5_0  sumf += (float)sumi * (dx * dy)   (levels u = q + 16: sumi = sum u y - 16 sum y)
 *   Q8_0  sumf += (float)sumi * (dx * dy)   (bytes stored as q + 128 (q ^ 0x80):
 *                                            sumi = sum (q + 128) y - 128 sum y)
 * block by block (legacy.c, ggml_vec_dot_q4_0_q8_0_generic, _q5_0_q8_0_ and
 * _q8_0_q8_0_).  The correction -8, -16 or -128 sum y depends on the
 * activation block alone: it starts each block's sum.  All integer steps are exact (at most
 * 32 * 255 * 127 in a lane). */
#include "kernels/x86/packed512.h"

#ifdef QK_X86

enum { Q4_0_SIZE = 18, Q5_0_SIZE = 22, Q8_0_SIZE = 34, QK = 32, GROUP = 8, KC32 = 256,
       PB4 = GROUP * Q4_0_SIZE, PB5 = GROUP * Q5_0_SIZE, PB8 = GROUP * Q8_0_SIZE };
enum { Q4 = 0, Q5 = 1, Q8 = 2 }; /* span32_nt's kinds */

/* The activation side of a span: each token's quants at the span's first
 * block, and per block the correction -c sum(y) and the scale dy. */
typedef struct {
    const uint8_t *yq[PT8];
    int32_t corr[PT8][KC32];
    float dy[PT8][KC32];
} act32;

/* sum of the 32 signed bytes at p */
QK_TARGET_V512 static inline int sum_i8x32(const uint8_t *p)
{
    const __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)p), _mm256_set1_epi8(-128));
    const __m256i s = _mm256_sad_epu8(v, _mm256_setzero_si256()); /* (y + 128) summed per 8 bytes */
    const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    return (int)(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1)) - 32 * 128;
}

QK_TARGET_V512 __attribute__((always_inline)) static inline void
prep32(const uint8_t *const y[PT8], int nt, int64_t b0, int nb, act32 *a, int c)
{
    for (int t = 0; t < nt; t++) {
        const uint8_t *yb = y[t] + (size_t)b0 * Q8_0_SIZE;
        a->yq[t] = yb + 2;
        for (int b = 0; b < nb; b++, yb += Q8_0_SIZE) {
            a->dy[t][b] = qk_ldh(yb);
            a->corr[t][b] = -c * sum_i8x32(yb + 2);
        }
    }
}

QK_TARGET_V512 static void prep_q4_0(const uint8_t *const y[PT8], int nt, int64_t b0, int nb, void *a)
{
    prep32(y, nt, b0, nb, a, 8);
}

QK_TARGET_V512 static void prep_q5_0(const uint8_t *const y[PT8], int nt, int64_t b0, int nb, void *a)
{
    prep32(y, nt, b0, nb, a, 16);
}

QK_TARGET_V512 static void prep_q8_0(const uint8_t *const y[PT8], int nt, int64_t b0, int nb, void *a)
{
    prep32(y, nt, b0, nb, a, 128);
}

/* Blocks [0, nb) of the pair ga, gb against N tokens (kind Q4, Q5 or Q8). */
QK_TARGET_V512 __attribute__((always_inline)) static inline void
span32_nt(const uint8_t *ga, const uint8_t *gb, const int nt, int nb, const act32 *a, pair_state *st,
          const int kind)
{
    const size_t bsize = kind == Q8 ? PB8 : kind == Q5 ? PB5 : PB4;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 f[PT8];
    _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++)
        f[t] = st->f[t];
    for (int b = 0; b < nb; b++, ga += bsize, gb += bsize) {
        qk_prefetch_span(ga + QK_PREFETCH_AHEAD, bsize);
        qk_prefetch_span(gb + QK_PREFETCH_AHEAD, bsize);
        const __m512 dx = ld2_f16(ga, gb);
        __m512i s[PT8];
        _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++)
            s[t] = _mm512_set1_epi32(a->corr[t][b]);
        if (kind == Q8) {
            _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
                const __m512i w = ld2(ga + 16 + 32 * j, gb + 16 + 32 * j);
                _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++)
                    s[t] = _mm512_dpbusd_epi32(s[t], w, bc4(a->yq[t] + (size_t)b * Q8_0_SIZE + 4 * j));
            }
            _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++)
                f[t] = _mm512_add_ps(f[t], _mm512_mul_ps(_mm512_cvtepi32_ps(s[t]),
                                                         _mm512_mul_ps(dx, _mm512_set1_ps(a->dy[t][b]))));
        } else {
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
                const __m512i v = ld2(ga + 16 + 32 * j, gb + 16 + 32 * j);
                __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                if (kind == Q5) {
                    lo = _mm512_mask_add_epi8(lo, q5_mask(ga, gb, j, 0), lo, _mm512_set1_epi8(16));
                    hi = _mm512_mask_add_epi8(hi, q5_mask(ga, gb, j, 1), hi, _mm512_set1_epi8(16));
                }
                _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++) {
                    const uint8_t *yq = a->yq[t] + (size_t)b * Q8_0_SIZE;
                    s[t] = _mm512_dpbusd_epi32(s[t], lo, bc4(yq + 4 * j));
                    s[t] = _mm512_dpbusd_epi32(s[t], hi, bc4(yq + 16 + 4 * j));
                }
            }
            if (kind == Q5)
                _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++)
                    f[t] = _mm512_add_ps(f[t], _mm512_mul_ps(_mm512_cvtepi32_ps(s[t]),
                                                             _mm512_mul_ps(dx, _mm512_set1_ps(a->dy[t][b]))));
            else
                _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++)
                    f[t] = _mm512_add_ps(f[t], _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(s[t]), dx),
                                                             _mm512_set1_ps(a->dy[t][b])));
        }
    }
    _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++)
        st->f[t] = f[t];
}

QK_TARGET_V512 static void q4_0_span(const uint8_t *ga, const uint8_t *gb, int nt, int nb, const void *a,
                                     pair_state *st)
{
    QK_BY_NT8(nt, span32_nt(ga, gb, N, nb, a, st, Q4))
}

QK_TARGET_V512 static void q5_0_span(const uint8_t *ga, const uint8_t *gb, int nt, int nb, const void *a,
                                     pair_state *st)
{
    QK_BY_NT8(nt, span32_nt(ga, gb, N, nb, a, st, Q5))
}

QK_TARGET_V512 static void q8_0_span(const uint8_t *ga, const uint8_t *gb, int nt, int nb, const void *a,
                                     pair_state *st)
{
    QK_BY_NT8(nt, span32_nt(ga, gb, N, nb, a, st, Q8))
}

/* The tile of the blocks-of-32 types: their spans over a packed512 of bsize-byte blocks. */
QK_TARGET_V512 static inline void tile32(int amx, size_t bsize, prep512_fn prep, span512_fn span, int64_t n, const void *xp,
                                         int ng, const void *y, size_t ys, int nt, float *out, size_t ldo)
{
    act32 a;
    const packed512 k = {.cols = n, .blk = QK, .amx = amx, .bsize = bsize, .kc = KC32, .pt = PT8, .prep = prep, .span = span, .act = &a};
    packed512_tile(&k, xp, ng, y, ys, nt, out, ldo);
}

QK_TARGET_V512 static void q4_0_packed_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys,
                                            int nt, float *out, size_t ldo)
{
    if (nt == 1) { /* the AVX2 kernel of the same packing streams one group at a time: faster from memory */
        packed_tile_in(qk_x86_avx2_packed, QK_Q4_0)(n, xp, ng, y, ys, nt, out, ldo);
        return;
    }
    tile32(QK_AMX_Q4_0, PB4, prep_q4_0, q4_0_span, n, xp, ng, y, ys, nt, out, ldo);
}

QK_TARGET_V512 static void q5_0_packed_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys,
                                            int nt, float *out, size_t ldo)
{
    tile32(QK_AMX_Q5_0, PB5, prep_q5_0, q5_0_span, n, xp, ng, y, ys, nt, out, ldo);
}

QK_TARGET_V512 static void q8_0_packed_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys,
                                            int nt, float *out, size_t ldo)
{
    tile32(QK_AMX_Q8_0, PB8, prep_q8_0, q8_0_span, n, xp, ng, y, ys, nt, out, ldo);
}

static size_t q8_0_pack_size(int64_t n) { return (size_t)(n / QK) * PB8; }
static size_t q5_0_pack_size(int64_t n) { return (size_t)(n / QK) * PB5; }

/* Rows [0, 8) at x (row stride xs, n columns) into the packed group at dst (the layout above). */
static void q5_0_pack(int64_t n, const void *x, size_t xs, void *dst)
{
    uint8_t *d = dst;
    for (int64_t b = 0; b < n / QK; b++, d += PB5) {
        uint32_t m[4][2] = {{0}};
        for (int r = 0; r < GROUP; r++) {
            const uint8_t *blk = (const uint8_t *)x + (size_t)r * xs + (size_t)b * Q5_0_SIZE;
            const uint32_t qh = qk_ld_u32(blk + 2);
            d[2 * r] = blk[0], d[2 * r + 1] = blk[1];
            for (int j = 0; j < 4; j++)
                for (int k = 0; k < 4; k++) {
                    d[16 + 32 * j + 4 * r + k] = blk[6 + 4 * j + k];
                    m[j][0] |= ((qh >> (4 * j + k)) & 1u) << (4 * r + k);
                    m[j][1] |= ((qh >> (16 + 4 * j + k)) & 1u) << (4 * r + k);
                }
        }
        for (int j = 0; j < 4; j++)
            for (int h = 0; h < 2; h++)
                memcpy(d + 16 + 4 * 32 + 8 * j + 4 * h, &m[j][h], 4);
    }
}

static void q8_0_pack_u8(int64_t n, const void *x, size_t xs, void *dst)
{
    qk_x86_q8_0_pack_xor(n, x, xs, dst, 0x80);
}

/* Q4_0 keeps the AVX2 level's packing (pack NULL: cpu.c keeps the level
 * below's pack and pack_size). */
const qk_pack_ops qk_x86_avx512_packed[] = {
    {.id = QK_Q4_0, .packed_tile = q4_0_packed_tile, .tile_rows = 128, .decode = 1},
    {.id = QK_Q8_0, .pack_size = q8_0_pack_size, .pack = q8_0_pack_u8, .packed_tile = q8_0_packed_tile,
     .tile_rows = 128, .decode = 1},
    /* decode too (the stored rows' pages released): with its lines prefetched, 230 t/s on
     * smol135m Q4_K_M against 153 for the AVX2 level's kernel on the stored rows */
    {.id = QK_Q5_0, .pack_size = q5_0_pack_size, .pack = q5_0_pack, .packed_tile = q5_0_packed_tile,
     .tile_rows = 128, .decode = 1},
    {.id = -1},
};

#endif
