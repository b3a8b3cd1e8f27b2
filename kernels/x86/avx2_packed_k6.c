/* avx2_packed_k6.c - AVX2 kernels of repacked Q6_K and Q3_K weights
 * (cpu.h's pack and packed_tile; packed_k.h), eight rows per group: the
 * K-quants with sixteen signed scales and eight lane sums per output. */
#include "kernels/x86/packed_k.h"

#ifdef QK_X86

/* ---- Q6_K -------------------------------------------------------------------
 * The reference (ggml_vec_dot_q6_K_q8_K_generic) is Q4_K's (avx2_packed_k4.c)
 * without the mins:
 *   lane[l] = sum over e = l (mod 8) of sc[e / 16] * (q[e] - 32) * y[e]
 *   sums[l] += (xd * yd) * (float)lane[l];   result 0 + sums[0] + ... + sums[7]
 * Packed super-block of a group (1936 bytes; the eight blocks take 1680):
 *   d[8]            f16, row order                                   (16 bytes)
 *   sc[m][r][2]     row r's scales 2m and 2m + 1 (int8)                 (128)
 *   for each l, 224 bytes:
 *     quads (l, h), h = 0, 1, of 96 bytes: N0, N1, H, each 8 rows x 4 bytes;
 *     level i (i = 0..3, m = 4h + i) of row r, byte k is q[32m + 8k + l],
 *     its low four bits in nibble i % 2 of N[i / 2], its top two at bits
 *     2i of H;
 *     corr[l][r]    int32: 128 * sum over e = l (mod 8) of
 *                   sc[e / 16] * (q[e] - 32)                          (32)
 * The levels go signed (a = q - 32) and meet the activation offset to
 * unsigned, y + 128 (act_prepare): maddubs pairs of at most 255 * 32 * 2 =
 * 16320, inside int16, each 16-bit pair two elements of one sub-block, so
 * madd against (sc[2m], sc[2m+1]) scales them, and subtracting corr[l]
 * leaves the reference's exact lane[l]. */
enum { Q6_K_SIZE = 210 };

static size_t q6_K_pack_size(int64_t n) { return (size_t)(n / QKK) * PACKED6; }

/* Q6_K: ql[128], qh[64], scales[16], d.  Level i of quad (l, h), byte k is
 * element 128h + 32i + 8k + l: its low four bits are nibble i / 2 of
 * ql[64h + 32 (i % 2) + 8k + l], its top two bits 2i of qh[32h + 8k + l].
 * So N0 takes the low nibbles of the two ql bytes, N1 their high ones,
 * and H is the qh byte as it is. */
QK_TARGET_AVX2 static void q6_K_pack(int64_t n, const void *x, size_t xs, void *dst)
{
    uint8_t *d = dst;
    for (int64_t b = 0; b < n / QKK; b++, d += PACKED6)
        for (int r = 0; r < GROUP; r++) {
            const uint8_t *blk = (const uint8_t *)x + (size_t)r * xs + (size_t)b * Q6_K_SIZE;
            memcpy(d + 2 * r, blk + 208, 2);
            for (int j = 0; j < 16; j++)
                d[16 + 16 * (j / 2) + 2 * r + j % 2] = blk[192 + j];
            const __m128i m4 = _mm_set1_epi8(0x0F);
            for (int h = 0; h < 2; h++)
                for (int half = 0; half < 2; half++) { /* k = 2 half, 2 half + 1 */
                    const uint8_t *ql = blk + 64 * h + 16 * half;
                    const __m128i a = _mm_loadu_si128((const __m128i *)ql);
                    const __m128i c = _mm_loadu_si128((const __m128i *)(ql + 32));
                    const __m128i hq = _mm_loadu_si128((const __m128i *)(blk + 128 + 32 * h + 16 * half));
                    const __m128i n0 =
                        _mm_or_si128(_mm_and_si128(a, m4), _mm_slli_epi16(_mm_and_si128(c, m4), 4));
                    const __m128i n1 =
                        _mm_or_si128(_mm_and_si128(_mm_srli_epi16(a, 4), m4), _mm_andnot_si128(m4, c));
                    uint8_t *quad = d + quad_at(0, h) + 4 * r + 2 * half;
                    store_lk2(n0, quad, 224);
                    store_lk2(n1, quad + 32, 224);
                    store_lk2(hq, quad + 64, 224);
                }
            int32_t corr[8] = {0};
            for (int h = 0; h < 2; h++)
                for (int j = 0; j < 64; j++) { /* elements 128h + j and 128h + 64 + j */
                    const int e0 = 128 * h + (j % 32) + 32 * (j / 32), e1 = e0 + 64;
                    const uint8_t ql = blk[64 * h + j], qh = blk[128 + 32 * h + j % 32];
                    const int sh = 2 * (j / 32);
                    const int q0 = (ql & 0xF) | ((qh >> sh) & 3) << 4, q1 = (ql >> 4) | ((qh >> (sh + 4)) & 3) << 4;
                    corr[e0 % 8] += (int8_t)blk[192 + e0 / 16] * (q0 - 32);
                    corr[e1 % 8] += (int8_t)blk[192 + e1 / 16] * (q1 - 32);
                }
            for (int l = 0; l < 8; l++) {
                const int32_t c = 128 * corr[l];
                memcpy(d + quad_at(l, 2) + 4 * r, &c, 4);
            }
        }
}

/* Level i (0..3) of a quad as signed bytes a = q - 32. */
QK_TARGET_AVX2 static inline __m256i q6_level(__m256i n0, __m256i n1, __m256i h, int i)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
    const __m256i nib = i % 2 ? _mm256_and_si256(_mm256_srli_epi16(i / 2 ? n1 : n0, 4), m4)
                              : _mm256_and_si256(i / 2 ? n1 : n0, m4);
    const __m256i top = i == 2 ? _mm256_and_si256(h, m2)
                               : i < 2 ? _mm256_and_si256(_mm256_slli_epi16(h, 4 - 2 * i), m2)
                                       : _mm256_and_si256(_mm256_srli_epi16(h, 2), m2);
    return _mm256_sub_epi8(_mm256_or_si256(nib, top), _mm256_set1_epi8(32));
}

/* ---- Q3_K: hmask[32] qs[64] scales[12] d ------------------------------------
 * The reference (ggml_vec_dot_q3_K_q8_K_generic) is Q6_K's with levels
 * a = (2 bits of qs) - (hmask bit ? 0 : 4) in [-4, 3] and 6-bit scales less
 * 32.  Element 128h + 32i + 8k + l has its two low bits at bits 2i of
 * qs[32h + 8k + l] and its hmask bit at bit 4h + i of hmask[8k + l], so
 * the packed bytes are the block's own, transposed.  Packed super-block of a
 * group (1040 bytes; the eight blocks take 880):
 *   d[8], sc[m][r][2]   as Q6_K's (the scales less 32)              (144)
 *   for each l, 112 bytes:
 *     Q[l][h][r][k]  qs[32h + 8k + l] of row r, h = 0, 1       (2 x 32)
 *     M[l][r][k]     hmask[8k + l]                                  (32)
 *     corr[l][r]     int16: sum over e = l (mod 8) of sc[e / 16] * a[e]
 *                    (at most 32 * 32 * 4 in size); the kernel takes
 *                    128 * corr[l] as Q6_K's (its maddubs pairs: at most
 *                    255 * 4 * 2)                                   (16) */
enum { Q3_K_SIZE = 110, PACKED3 = 144 + 8 * 112 };

static size_t q3_K_pack_size(int64_t n) { return (size_t)(n / QKK) * PACKED3; }
static inline size_t q3_at(int l) { return 144 + 112 * (size_t)l; }

QK_TARGET_AVX2 static void q3_K_pack(int64_t n, const void *x, size_t xs, void *dst)
{
    uint8_t *d = dst;
    for (int64_t b = 0; b < n / QKK; b++, d += PACKED3)
        for (int r = 0; r < GROUP; r++) {
            const uint8_t *blk = (const uint8_t *)x + (size_t)r * xs + (size_t)b * Q3_K_SIZE;
            int8_t sc[16];
            qk_q3_K_scales8(blk + 96, sc);
            memcpy(d + 2 * r, blk + 108, 2);
            for (int j = 0; j < 16; j++)
                d[16 + 16 * (j / 2) + 2 * r + j % 2] = (uint8_t)sc[j];
            for (int half = 0; half < 2; half++) { /* k = 2 half, 2 half + 1 */
                for (int h = 0; h < 2; h++)
                    store_lk2(_mm_loadu_si128((const __m128i *)(blk + 32 + 32 * h + 16 * half)),
                              d + q3_at(0) + 32 * h + 4 * r + 2 * half, 112);
                store_lk2(_mm_loadu_si128((const __m128i *)(blk + 16 * half)), d + q3_at(0) + 64 + 4 * r + 2 * half,
                          112);
            }
            int corr[8] = {0};
            for (int e = 0; e < QKK; e++) {
                const int h = e / 128, i = e / 32 % 4, j = e % 32;
                const int a = ((blk[32 + 32 * h + j] >> 2 * i) & 3) - ((blk[j] >> (4 * h + i)) & 1 ? 0 : 4);
                corr[e % 8] += sc[e / 16] * a;
            }
            for (int l = 0; l < 8; l++) {
                const int16_t c = (int16_t)corr[l];
                memcpy(d + q3_at(l) + 96 + 2 * r, &c, 2);
            }
        }
}

/* Level i of quad h of Q3_K (lq: Q[l][h], mk: M[l]) as signed bytes. */
QK_TARGET_AVX2 static inline __m256i q3_level(__m256i lq, __m256i mk, int h, int i)
{
    const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(lq, 2 * i), _mm256_set1_epi8(3));
    const int sh = 4 * h + i - 2; /* the hmask bit to bit 2 */
    const __m256i hb = _mm256_and_si256(sh >= 0 ? _mm256_srli_epi16(mk, sh) : _mm256_slli_epi16(mk, -sh),
                                        _mm256_set1_epi8(4));
    return _mm256_sub_epi8(_mm256_or_si256(lo, hb), _mm256_set1_epi8(4));
}

/* Q6_K (three = 0) or Q3_K (three = 1): the same sums over their levels. */
QK_TARGET_AVX2 __attribute__((always_inline)) static inline void
k6_span_nt(const uint8_t *g, const int nt, int nb, const act_span *a, group_state *st, const int three)
{
    const size_t bsize = three ? PACKED3 : PACKED6, lsize = three ? 112 : 224;
    for (int b = 0; b < nb; b++, g += bsize) {
        const __m256 xd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g));
        __m256i sc[8];
        for (int m = 0; m < 8; m++)
            sc[m] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(g + 16 + 16 * m)));
        __m256 dt[PT];
        _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++)
            dt[t] = _mm256_mul_ps(xd, _mm256_set1_ps(a->yd[t][b]));
        _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++) {
            qk_prefetch_span(g + QK_PREFETCH_AHEAD + 144 + lsize * (size_t)l, lsize);
            __m256i acc[PT];
            _Pragma("GCC unroll 4") for (int t = 0; t < PT; t++)
                acc[t] = _mm256_setzero_si256();
            const __m256i mk = three ? _mm256_loadu_si256((const __m256i *)(g + q3_at(l) + 64)) : acc[0];
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                const uint8_t *quad = three ? g + q3_at(l) + 32 * h : g + quad_at(l, h);
                const __m256i n0 = _mm256_loadu_si256((const __m256i *)quad);
                const __m256i n1 = three ? n0 : _mm256_loadu_si256((const __m256i *)(quad + 32));
                const __m256i hb = three ? n0 : _mm256_loadu_si256((const __m256i *)(quad + 64));
                _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
                    const int m = 4 * h + i;
                    const __m256i lv = three ? q3_level(n0, mk, h, i) : q6_level(n0, n1, hb, i);
                    _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++) {
                        const __m256i yu = _mm256_set1_epi32((int)qk_ld_u32(a->ys[t][b] + 32 * m + 4 * l));
                        const __m256i p = _mm256_maddubs_epi16(yu, lv);
                        acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(p, sc[m]));
                    }
                }
            }
            const __m256i corr =
                three ? _mm256_slli_epi32(_mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)(g + q3_at(l) + 96))),
                                          7)
                      : _mm256_loadu_si256((const __m256i *)(g + quad_at(l, 2)));
            _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++)
                acc[t] = _mm256_sub_epi32(acc[t], corr);
            _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++)
                st->s[t][l] = _mm256_add_ps(st->s[t][l], _mm256_mul_ps(dt[t], _mm256_cvtepi32_ps(acc[t])));
        }
    }
}

PACKED_K_KERNEL(q3_K, PACKED3, ACT_K6, k6_span_nt(g, N, nb, a, st, 1))

PACKED_K_KERNEL(q6_K, PACKED6, ACT_K6, k6_span_nt(g, N, nb, a, st, 0))

/* Tiles of 64 rows as Q4_K's (Q6_K's 1024x2816 tile product about 9 %
 * faster than with 16, and bench250m Q6_K pp256 1.06-1.26x, three
 * interleaved runs).  One-token products: Q6_K's packed kernel is about
 * 10-15 % slower than the row kernel from memory on bench250m Q6_K tg32
 * (faster in cache), so Q6_K's stay on the rows as they are
 * (avx2_kquants.c); Q3_K's packed kernel against its row kernel on
 * bench250m Q3_K_M: pp256 1.71-1.80x, tg32 1.54-1.75x. */
const qk_pack_ops qk_x86_avx2_packed_k6[] = {
    {.id = QK_Q3_K, .pack_size = q3_K_pack_size, .pack = q3_K_pack, .packed_tile = q3_K_packed_tile, .tile_rows = 64, .decode = 1},
    {.id = QK_Q6_K, .pack_size = q6_K_pack_size, .pack = q6_K_pack, .packed_tile = q6_K_packed_tile, .tile_rows = 64},
    {.id = -1},
};

#endif
