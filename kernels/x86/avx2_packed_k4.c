/* avx2_packed_k4.c - AVX2 kernels of repacked Q4_K and Q5_K weights
 * (cpu.h's pack and packed_tile; packed_k.h), eight rows per group.
 *
 * The reference (kquants.c, ggml_vec_dot_q4_K_q8_K_generic) keeps, per
 * output, eight float sums: lane l collects the elements e = l (mod 8),
 *   lane[l] = sum over e = l (mod 8) of sc[e / 32] * a[e] * y[e]    (exact int)
 *   sums[l] += (xd * yd) * (float)lane[l]
 *   sumf    -= xdmin * yd * (float)sum_j bsum[j] * mn[j / 2]
 * block by block, and returns sumf + sums[0] + ... + sums[7].  Here vector
 * lane r is row r of the group, so lane[l] of eight rows is one vector and
 * each float step is the reference's, lane by lane: the same bits.
 *
 * Packed super-block of a group (1184 bytes; the eight blocks take 1152):
 *   d[8], dmin[8]     f16, row order                        (32 bytes)
 *   sc[q][r][2]       scales of sub-blocks 2q and 2q + 1      (64)
 *   mn[q][r][2]       their mins                              (64)
 *   V[l][q][r][k]     4 bytes of row r: elements 64q + 8m + l with
 *                     m = 0, 1, 4, 5 in the low nibbles and m = 2, 3, 6, 7
 *                     in the high ones                        (1024)
 * and the activation block is permuted to match (act_prepare, k4), so
 * maddubs of each nibble half against its four broadcast bytes leaves row
 * r's pairs in lane r: the first 16-bit pair from sub-block 2q, the second
 * from 2q + 1.  The two halves add in 16 bits (at most 4 * 15 * 127), and
 * one madd against (sc[2q], sc[2q + 1]) per lane adds them scaled.
 *
 * Q5_K's reference is the same with 5-bit levels (ggml_vec_dot_q5_K_q8_K_
 * generic).  Its packed super-block is Q4_K's with the levels' low four
 * bits, and after each V[l] (v_at)
 *   H[l][r][k]        bit 2q: bit 4 of V[l][q][r][k]'s low-nibble element,
 *                     bit 2q + 1: of its high-nibble one       (8 x 32)
 * (1440 bytes; the eight blocks take 1408), and the span ORs each nibble
 * half's bit 4 back before the products: pairs of at most 2 * 31 * 127,
 * two halves 15748, still inside int16. */
#include "kernels/x86/packed_k.h"

#ifdef QK_X86

enum { Q4_K_SIZE = 144, Q5_K_SIZE = 176 };

static size_t q4_K_pack_size(int64_t n) { return (size_t)(n / QKK) * PACKED; }
static size_t q5_K_pack_size(int64_t n) { return (size_t)(n / QKK) * PACKED5; }

/* Row r of a packed super-block at d from its Q4_K/Q5_K block: d and dmin
 * at dm, 12 scale bytes at sc12, the 128 nibble bytes qs (element e: byte
 * 32 (e / 64) + e % 32, low nibble for e % 64 < 32), and for Q5_K qh
 * (bit 4 of element e: qh[e % 32] bit e / 32), else NULL.  V[l][q] byte k
 * takes elements 64q + 8m + l with m = 0, 1, 4, 5 (k = 0..3) low and
 * m + 2 high: bytes a = qs[32q + l + 8 (k & 1)] and b = a's + 16, the low
 * nibbles for k < 2, the high ones for k >= 2; the same elements' bit 4
 * sits in qh[l + 8 (k & 1)] and qh[16 + l + 8 (k & 1)] at bit 2q + k / 2. */
QK_TARGET_AVX2 static void k4_pack_row(const uint8_t *dm, const uint8_t *sc12, const uint8_t *qs,
                                       const uint8_t *qh, int r, uint8_t *d)
{
    const int five = qh != NULL;
    const size_t stride = v_at(1, five) - v_at(0, five);
    memcpy(d + 2 * r, dm, 2);
    memcpy(d + 16 + 2 * r, dm + 2, 2);
    for (int s = 0; s < 8; s++) {
        const int o = 16 * (s / 2) + 2 * r + s % 2;
        qk_get_scale_min_k4(s, sc12, &d[32 + o], &d[96 + o]);
    }
    const __m128i m4 = _mm_set1_epi8(0x0F), m5 = _mm_set1_epi8(0x55);
    for (int q = 0; q < 4; q++) {
        const __m128i x0 = _mm_loadu_si128((const __m128i *)(qs + 32 * q));
        const __m128i x1 = _mm_loadu_si128((const __m128i *)(qs + 32 * q + 16));
        /* bytes 8 (k & 1) + l: k = 0, 1 in A, k = 2, 3 in B */
        const __m128i A = _mm_or_si128(_mm_and_si128(x0, m4), _mm_slli_epi16(_mm_and_si128(x1, m4), 4));
        const __m128i B = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(x0, 4), m4), _mm_andnot_si128(m4, x1));
        store_lk(A, B, d + v_at(0, five) + 32 * q + 4 * r, stride);
    }
    if (five) {
        const __m128i h0 = _mm_loadu_si128((const __m128i *)qh);
        const __m128i h1 = _mm_loadu_si128((const __m128i *)(qh + 16));
        const __m128i A = _mm_or_si128(_mm_and_si128(h0, m5), _mm_slli_epi16(_mm_and_si128(h1, m5), 1));
        const __m128i B = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(h0, 1), m5), _mm_andnot_si128(m5, h1));
        store_lk(A, B, d + v_at(0, 1) + 128 + 4 * r, stride);
    }
}

static void q4_K_pack(int64_t n, const void *x, size_t xs, void *dst)
{
    uint8_t *d = dst;
    for (int64_t b = 0; b < n / QKK; b++, d += PACKED)
        for (int r = 0; r < GROUP; r++) {
            const uint8_t *blk = (const uint8_t *)x + (size_t)r * xs + (size_t)b * Q4_K_SIZE;
            k4_pack_row(blk, blk + 4, blk + 16, NULL, r, d);
        }
}

/* Q5_K: d, dmin, scales[12], qh[32], qs[128] */
static void q5_K_pack(int64_t n, const void *x, size_t xs, void *dst)
{
    uint8_t *d = dst;
    for (int64_t b = 0; b < n / QKK; b++, d += PACKED5)
        for (int r = 0; r < GROUP; r++) {
            const uint8_t *blk = (const uint8_t *)x + (size_t)r * xs + (size_t)b * Q5_K_SIZE;
            k4_pack_row(blk, blk + 4, blk + 48, blk + 16, r, d);
        }
}

/* Sub-block scales 2q and 2q + 1 of the group's eight rows as 16-bit pairs. */
QK_TARGET_AVX2 static inline __m256i scale_pairs(const uint8_t *g, int q)
{
    return _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(g + 32 + 16 * q)));
}

/* Bit 2q + half of each byte of hb, moved to bit 4 (Q5_K's high bits of
 * V[l][q]'s low (half 0) or high (half 1) nibbles).  A 16-bit shift only
 * carries bits across bytes below bit 4 or above it, which the mask drops. */
QK_TARGET_AVX2 static inline __m256i k5_high(__m256i hb, int q, int half)
{
    const __m256i m = _mm256_set1_epi8(0x10);
    switch (2 * q + half) {
    case 0: return _mm256_and_si256(_mm256_slli_epi16(hb, 4), m);
    case 1: return _mm256_and_si256(_mm256_slli_epi16(hb, 3), m);
    case 2: return _mm256_and_si256(_mm256_slli_epi16(hb, 2), m);
    case 3: return _mm256_and_si256(_mm256_slli_epi16(hb, 1), m);
    case 4: return _mm256_and_si256(hb, m);
    case 5: return _mm256_and_si256(_mm256_srli_epi16(hb, 1), m);
    case 6: return _mm256_and_si256(_mm256_srli_epi16(hb, 2), m);
    default: return _mm256_and_si256(_mm256_srli_epi16(hb, 3), m);
    }
}

/* Q4_K (five = 0) or Q5_K (five = 1; blocks of PACKED5 bytes). */
QK_TARGET_AVX2 __attribute__((always_inline)) static inline void
k4_span_nt(const uint8_t *g, const int nt, int nb, const act_span *a, group_state *st, const int five)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const size_t bsize = five ? PACKED5 : PACKED;
    for (int b = 0; b < nb; b++, g += bsize) {
        const __m256 xd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g));
        const __m256 xdmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + 16)));
        __m256i sc[4];
        for (int q = 0; q < 4; q++)
            sc[q] = scale_pairs(g, q);
        __m256 dt[PT];
        _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++)
            dt[t] = _mm256_mul_ps(xd, _mm256_set1_ps(a->yd[t][b]));
        _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++) {
            qk_prefetch_span(g + QK_PREFETCH_AHEAD + l * (bsize / 8), bsize / 8);
            const __m256i hb = five ? _mm256_loadu_si256((const __m256i *)(g + v_at(l, 1) + 128)) : m4;
            __m256i acc[PT];
            _Pragma("GCC unroll 4") for (int t = 0; t < PT; t++)
                acc[t] = _mm256_setzero_si256();
            _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(g + v_at(l, five) + 32 * q));
                __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                if (five) {
                    lo = _mm256_or_si256(lo, k5_high(hb, q, 0));
                    hi = _mm256_or_si256(hi, k5_high(hb, q, 1));
                }
                _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++) {
                    const uint8_t *ys = a->ys[t][b];
                    const __m256i p = _mm256_add_epi16(
                        _mm256_maddubs_epi16(lo, _mm256_set1_epi32((int)qk_ld_u32(ys + 64 * q + 4 * l))),
                        _mm256_maddubs_epi16(hi, _mm256_set1_epi32((int)qk_ld_u32(ys + 64 * q + 32 + 4 * l))));
                    acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(p, sc[q]));
                }
            }
            _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++)
                st->s[t][l] = _mm256_add_ps(st->s[t][l], _mm256_mul_ps(dt[t], _mm256_cvtepi32_ps(acc[t])));
        }
        _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++) {
            __m256i sumi = _mm256_setzero_si256();
            for (int p = 0; p < 4; p++)
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(g + 96 + 16 * p))),
                                                                _mm256_set1_epi32(a->bs[t][b][p])));
            const __m256 dm = _mm256_mul_ps(xdmin, _mm256_set1_ps(a->yd[t][b]));
            st->f[t] = _mm256_sub_ps(st->f[t], _mm256_mul_ps(dm, _mm256_cvtepi32_ps(sumi)));
        }
    }
}

PACKED_K_KERNEL(q4_K, PACKED, ACT_K4, k4_span_nt(g, N, nb, a, st, 0))

PACKED_K_KERNEL(q5_K, PACKED5, ACT_K4, k4_span_nt(g, N, nb, a, st, 1))

/* Tiles of 64 rows: the activation side (act_prepare) is made once for 8
 * groups (pp256 on bench250m Q4_K_M about 10 % faster than with 16).
 * One-token products (always 64-row tiles, lib/engine/matmul.c): Q4_K's packed
 * kernel is about 15 % faster than the row kernel on bench250m Q4_K_M
 * tg32, Q5_K's about as fast (0.89-1.10x on bench250m Q5_K_M tg32, seven
 * interleaved runs; its pp256 is 1.3-1.8x the row kernel's). */
const qk_pack_ops qk_x86_avx2_packed_k4[] = {
    {.id = QK_Q4_K, .pack_size = q4_K_pack_size, .pack = q4_K_pack, .packed_tile = q4_K_packed_tile, .tile_rows = 64, .decode = 1},
    {.id = QK_Q5_K, .pack_size = q5_K_pack_size, .pack = q5_K_pack, .packed_tile = q5_K_packed_tile, .tile_rows = 64, .decode = 1},
    {.id = -1},
};

#endif
