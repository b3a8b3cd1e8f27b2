/* avx2_packed_sum.c - AVX2 kernels of repacked Q2_K and IQ4_XS weights
 * (cpu.h's pack and packed_tile; packed_k.h), eight rows per group: the
 * super-block formats whose reference keeps one float sum per output (in
 * group_state's f; its eight lane sums stay 0). */
#include "kernels/x86/packed_k.h"

#ifdef QK_X86

/* ---- Q2_K: scales[16] qs[64] d dmin -------------------------------------------
 * The reference (kquants.c, ggml_vec_dot_q2_K_q8_K_generic) takes each
 * block's whole integer sums, exact in any order,
 *   isum  = sum over sub-blocks j of (scales[j] & 15) * (levels . y of j)
 *   summs = sum over j of (scales[j] >> 4) * bsums[j]
 * and then  sumf += (yd * d) * isum - (yd * dmin) * summs  in float.  Its
 * levels (0..3) sit as Q3_K's low bits, so the packed super-block of a
 * group is the eight blocks' own bytes (672):
 *   d[8], dmin[8]    f16, row order                                  (32)
 *   S[m][r][2]       scales[2m], scales[2m + 1] of row r              (128)
 *   Q[l][h][r][k]    qs[32h + 8k + l] of row r                     (8 x 64)
 * Here lane r is row r and sumf is group_state's f, as for IQ4_XS. */
enum { Q2_K_SIZE = 84, PACKED2 = 160 + 8 * 64 };

static size_t q2_K_pack_size(int64_t n) { return (size_t)(n / QKK) * PACKED2; }

QK_TARGET_AVX2 static void q2_K_pack(int64_t n, const void *x, size_t xs, void *dst)
{
    uint8_t *d = dst;
    for (int64_t b = 0; b < n / QKK; b++, d += PACKED2)
        for (int r = 0; r < GROUP; r++) {
            const uint8_t *blk = (const uint8_t *)x + (size_t)r * xs + (size_t)b * Q2_K_SIZE;
            memcpy(d + 2 * r, blk + 80, 2);
            memcpy(d + 16 + 2 * r, blk + 82, 2);
            for (int m = 0; m < 8; m++)
                memcpy(d + 32 + 16 * m + 2 * r, blk + 2 * m, 2);
            for (int half = 0; half < 2; half++) /* k = 2 half, 2 half + 1 */
                for (int h = 0; h < 2; h++)
                    store_lk2(_mm_loadu_si128((const __m128i *)(blk + 16 + 32 * h + 16 * half)),
                              d + 160 + 32 * h + 4 * r + 2 * half, 64);
        }
}

QK_TARGET_AVX2 __attribute__((always_inline)) static inline void
q2_K_span_nt(const uint8_t *g, const int nt, int nb, const act_span *a, group_state *st)
{
    const __m256i m3 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi8(0x0F);
    for (int b = 0; b < nb; b++, g += PACKED2) {
        const __m256 xd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g));
        const __m256 xmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + 16)));
        __m256i acc[PT], mins[PT];
        _Pragma("GCC unroll 4") for (int t = 0; t < PT; t++)
            acc[t] = mins[t] = _mm256_setzero_si256();
        __m256i sc[8];
        for (int m = 0; m < 8; m++) {
            const __m128i sm = _mm_loadu_si128((const __m128i *)(g + 32 + 16 * m));
            sc[m] = _mm256_cvtepu8_epi16(_mm_and_si128(sm, _mm256_castsi256_si128(m4)));
            const __m256i mn =
                _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), _mm256_castsi256_si128(m4)));
            _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++)
                mins[t] = _mm256_add_epi32(mins[t], _mm256_madd_epi16(mn, _mm256_set1_epi32(a->bs[t][b][m])));
        }
        _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++) {
            qk_prefetch_span(g + QK_PREFETCH_AHEAD + 160 + 64 * l, 64);
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                const __m256i q = _mm256_loadu_si256((const __m256i *)(g + 160 + 64 * l + 32 * h));
                _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
                    const int m = 4 * h + i;
                    const __m256i lv = _mm256_and_si256(_mm256_srli_epi16(q, 2 * i), m3);
                    _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++) {
                        const __m256i yv = _mm256_set1_epi32((int)qk_ld_u32(a->ys[t][b] + 32 * m + 4 * l));
                        acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(_mm256_maddubs_epi16(lv, yv), sc[m]));
                    }
                }
            }
        }
        _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++) {
            const __m256 yd = _mm256_set1_ps(a->yd[t][b]);
            const __m256 dall = _mm256_mul_ps(yd, xd), dmin = _mm256_mul_ps(yd, xmin);
            st->f[t] = _mm256_add_ps(st->f[t], _mm256_sub_ps(_mm256_mul_ps(dall, _mm256_cvtepi32_ps(acc[t])),
                                                             _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(mins[t]))));
        }
    }
}

PACKED_K_KERNEL(q2_K, PACKED2, ACT_K2, q2_K_span_nt(g, N, nb, a, st))

/* ---- IQ4_XS -----------------------------------------------------------------
 * The reference (iq4.c, ggml_vec_dot_iq4_xs_q8_K_generic) keeps one float
 * sum per output, sub-block s by sub-block:
 *   sumf += ((xd * yd) * (float)ls[s]) * (float)isum[s]
 * with ls[s] the 6-bit scale minus 32 and isum[s] the exact dot of the
 * sub-block: qs byte j < 16 through the codebook, its low nibble against
 * y[32s + j], its high one against y[32s + 16 + j].  Here lane r is row r,
 * and sumf is group_state's f (its eight lane sums stay 0, and adding +0
 * to a sum that started at +0 changes nothing).
 * Packed super-block of a group (1104 bytes; the eight blocks take 1088):
 *   d[8]        f16, row order                                       (16)
 *   ls[s][r]    int8                                                 (64)
 *   V[s][c]     bytes 4r .. 4r + 3: row r's qs[16s + 4c .. 16s + 4c + 3] (8 x 128)
 * maddubs takes the codebook values' magnitudes against the activation
 * bytes with their signs (exact: Q8_K quants are in [-127, 127], so pairs
 * stay within 2 * 127 * 127), one madd per half to 32 bits. */
enum { IQ4_XS_SIZE = 136 };

static size_t iq4_xs_pack_size(int64_t n) { return (size_t)(n / QKK) * PACKED4X; }

static void iq4_xs_pack(int64_t n, const void *x, size_t xs, void *dst)
{
    uint8_t *d = dst;
    for (int64_t b = 0; b < n / QKK; b++, d += PACKED4X)
        for (int r = 0; r < GROUP; r++) {
            const uint8_t *blk = (const uint8_t *)x + (size_t)r * xs + (size_t)b * IQ4_XS_SIZE;
            memcpy(d + 2 * r, blk, 2);
            const unsigned sh = qk_ld_u16(blk + 2);
            for (int s = 0; s < 8; s++) {
                const int ls = ((blk[4 + s / 2] >> 4 * (s % 2)) & 15) | ((sh >> 2 * s) & 3) << 4;
                d[16 + 8 * s + r] = (uint8_t)(int8_t)(ls - 32);
                for (int c = 0; c < 4; c++)
                    memcpy(d + 80 + 128 * s + 32 * c + 4 * r, blk + 8 + 16 * s + 4 * c, 4);
            }
        }
}

QK_TARGET_AVX2 __attribute__((always_inline)) static inline void
iq4_xs_span_nt(const uint8_t *g, const int nt, int nb, const act_span *a, group_state *st)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    const __m256i cb = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qk_x86_iq4nl_values));
    for (int b = 0; b < nb; b++, g += PACKED4X) {
        const __m256 xd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g));
        __m256 dt[PT];
        _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++)
            dt[t] = _mm256_mul_ps(xd, _mm256_set1_ps(a->yd[t][b]));
        for (int s = 0; s < 8; s++) {
            qk_prefetch_span(g + QK_PREFETCH_AHEAD + 80 + 128 * s, 128);
            const __m128i ls8 = _mm_loadl_epi64((const __m128i *)(g + 16 + 8 * s));
            const __m256 ls = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(ls8));
            __m256i acc[PT];
            _Pragma("GCC unroll 4") for (int t = 0; t < PT; t++)
                acc[t] = _mm256_setzero_si256();
            _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(g + 80 + 128 * s + 32 * c));
                const __m256i vl = _mm256_shuffle_epi8(cb, _mm256_and_si256(v, m4));
                const __m256i vh = _mm256_shuffle_epi8(cb, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
                const __m256i ml = _mm256_abs_epi8(vl), mh = _mm256_abs_epi8(vh);
                _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++) {
                    const uint8_t *ys = a->ys[t][b] + 32 * s + 4 * c;
                    const __m256i yl = _mm256_set1_epi32((int)qk_ld_u32(ys));
                    const __m256i yh = _mm256_set1_epi32((int)qk_ld_u32(ys + 16));
                    const __m256i pl = _mm256_madd_epi16(_mm256_maddubs_epi16(ml, _mm256_sign_epi8(yl, vl)), ones);
                    const __m256i ph = _mm256_madd_epi16(_mm256_maddubs_epi16(mh, _mm256_sign_epi8(yh, vh)), ones);
                    acc[t] = _mm256_add_epi32(acc[t], _mm256_add_epi32(pl, ph));
                }
            }
            _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++)
                st->f[t] = _mm256_add_ps(st->f[t],
                                         _mm256_mul_ps(_mm256_mul_ps(dt[t], ls), _mm256_cvtepi32_ps(acc[t])));
        }
    }
}

PACKED_K_KERNEL(iq4_xs, PACKED4X, ACT_RAW, iq4_xs_span_nt(g, N, nb, a, st))

/* Tiles of 64 rows as Q4_K's.  Against their row kernels: IQ4_XS on
 * bench250m IQ4_XS pp256 2.3-3.1x, tg32 1.8-2.2x; Q2_K on bench250m Q2_K
 * pp256 1.30-1.73x, tg32 1.19-1.50x. */
const qk_pack_ops qk_x86_avx2_packed_sum[] = {
    {.id = QK_Q2_K, .pack_size = q2_K_pack_size, .pack = q2_K_pack, .packed_tile = q2_K_packed_tile, .tile_rows = 64, .decode = 1},
    {.id = QK_IQ4_XS, .pack_size = iq4_xs_pack_size, .pack = iq4_xs_pack, .packed_tile = iq4_xs_packed_tile, .tile_rows = 64, .decode = 1},
    {.id = -1},
};

#endif
