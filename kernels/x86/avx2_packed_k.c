/* avx2_packed_k.c - AVX2 kernels of repacked K-quant (Q2_K .. Q6_K) and
 * IQ4_XS weights (cpu.h's pack and packed_tile), eight rows per group: the
 * super-blocks of 256 that meet Q8_K activations.
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
#include "simd_common.h"

#ifdef QK_X86
#include <string.h>

enum { Q4_K_SIZE = 144, Q5_K_SIZE = 176, Q8_K_SIZE = 292, QKK = 256, GROUP = 8, PT = 4, KC = 16,
       GMAX = 8, PACKED = 1184, PACKED5 = PACKED + 256 };
_Static_assert(PT == 4, "the spans are instanced for 1..4 tokens (QK_BY_NT4)");

static size_t q4_K_pack_size(int64_t n) { return (size_t)(n / QKK) * PACKED; }
static size_t q5_K_pack_size(int64_t n) { return (size_t)(n / QKK) * PACKED5; }

/* Offset of V[l] in a packed super-block; Q5_K's H[l] follows its V[l], so
 * the kernel reads each block front to back (with H after all of V it ran
 * at two thirds of the speed from memory). */
static inline size_t v_at(int l, int five) { return 160 + (size_t)(five ? 160 : 128) * (size_t)l; }

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
QK_TARGET_AVX2 static void act_prepare(const uint8_t *const y[PT], int nt, int64_t b0, int nb, int mode,
                                       act_span *a)
{
    const int k4 = mode == ACT_K4;
    _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++)
        for (int b = 0; b < nb; b++) {
            const uint8_t *yb = y[t] + (size_t)(b0 + b) * Q8_K_SIZE;
            uint8_t *ys = a->ys[t][b];
            a->yd[t][b] = qk_ld_f32(yb);
            if (mode == ACT_RAW) {
                memcpy(ys, yb + 4, QKK);
                continue;
            }
            for (int q = 0; q < 4; q++) {
                const __m256i o0 = lane_major(yb + 4, 2 * q), o1 = lane_major(yb + 4, 2 * q + 1);
                const __m256i u = _mm256_set1_epi8(mode == ACT_K6 ? -128 : 0);
                _mm256_storeu_si256((__m256i *)(ys + 64 * q),
                                    k4 ? _mm256_blend_epi16(o0, _mm256_slli_epi32(o1, 16), 0xAA)
                                       : _mm256_xor_si256(o0, u));
                _mm256_storeu_si256((__m256i *)(ys + 64 * q + 32),
                                    k4 ? _mm256_blend_epi16(_mm256_srli_epi32(o0, 16), o1, 0xAA)
                                       : _mm256_xor_si256(o1, u));
            }
            if (mode == ACT_K2)
                memcpy(a->bs[t][b], yb + 4 + QKK, 32);
            for (int p = 0; k4 && p < 4; p++) {
                const int s0 = (int16_t)qk_ld_u16(yb + 260 + 8 * p) + (int16_t)qk_ld_u16(yb + 262 + 8 * p);
                const int s1 = (int16_t)qk_ld_u16(yb + 264 + 8 * p) + (int16_t)qk_ld_u16(yb + 266 + 8 * p);
                a->bs[t][b][p] = (int32_t)((uint32_t)(uint16_t)s0 | (uint32_t)(uint16_t)s1 << 16);
            }
        }
}

/* The running sums of one group and up to PT tokens: sumf and sums[8] per
 * token, eight rows each. */
typedef struct {
    __m256 f[PT], s[PT][8];
} group_state;

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

QK_TARGET_AVX2 static void q4_K_span(const uint8_t *g, int nt, int nb, const act_span *a, group_state *st)
{
    QK_BY_NT4(nt, k4_span_nt(g, N, nb, a, st, 0))
}

QK_TARGET_AVX2 static void q5_K_span(const uint8_t *g, int nt, int nb, const act_span *a, group_state *st)
{
    QK_BY_NT4(nt, k4_span_nt(g, N, nb, a, st, 1))
}

typedef void (*span_fn)(const uint8_t *g, int nt, int nb, const act_span *a, group_state *st);

/* ng packed groups of gsize bytes at xp (blocks of bsize bytes) against nt
 * activation rows: tokens PT at a time, blocks KC at a time (act_span),
 * every group through each span; then sumf + sums[0] + ... + sums[7].
 * k4: the activation side in Q4_K's layout (act_prepare). */
QK_TARGET_AVX2 static void packed_k_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys,
                                         int nt, float *out, size_t ldo, size_t gsize, size_t bsize,
                                         span_fn span, int mode)
{
    const int64_t nb = n / QKK;
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

QK_TARGET_AVX2 static void q4_K_packed_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys,
                                            int nt, float *out, size_t ldo)
{
    packed_k_tile(n, xp, ng, y, ys, nt, out, ldo, q4_K_pack_size(n), PACKED, q4_K_span, ACT_K4);
}

QK_TARGET_AVX2 static void q5_K_packed_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys,
                                            int nt, float *out, size_t ldo)
{
    packed_k_tile(n, xp, ng, y, ys, nt, out, ldo, q5_K_pack_size(n), PACKED5, q5_K_span, ACT_K4);
}

/* ---- Q6_K -------------------------------------------------------------------
 * The reference (ggml_vec_dot_q6_K_q8_K_generic) is Q4_K's without the mins:
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
enum { Q6_K_SIZE = 210, PACKED6 = 144 + 8 * 224 };

/* Offset of quad (l, h) in a packed Q6_K super-block; corr[l] at quad (l, 2). */
static inline size_t quad_at(int l, int h) { return 144 + 224 * (size_t)l + 96 * (size_t)h; }

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

QK_TARGET_AVX2 static void q6_K_span(const uint8_t *g, int nt, int nb, const act_span *a, group_state *st)
{
    QK_BY_NT4(nt, k6_span_nt(g, N, nb, a, st, 0))
}

QK_TARGET_AVX2 static void q3_K_span(const uint8_t *g, int nt, int nb, const act_span *a, group_state *st)
{
    QK_BY_NT4(nt, k6_span_nt(g, N, nb, a, st, 1))
}

QK_TARGET_AVX2 static void q3_K_packed_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys,
                                            int nt, float *out, size_t ldo)
{
    packed_k_tile(n, xp, ng, y, ys, nt, out, ldo, q3_K_pack_size(n), PACKED3, q3_K_span, ACT_K6);
}

QK_TARGET_AVX2 static void q6_K_packed_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys,
                                            int nt, float *out, size_t ldo)
{
    packed_k_tile(n, xp, ng, y, ys, nt, out, ldo, q6_K_pack_size(n), PACKED6, q6_K_span, ACT_K6);
}

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

QK_TARGET_AVX2 static void q2_K_span(const uint8_t *g, int nt, int nb, const act_span *a, group_state *st)
{
    QK_BY_NT4(nt, q2_K_span_nt(g, N, nb, a, st))
}

QK_TARGET_AVX2 static void q2_K_packed_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys,
                                            int nt, float *out, size_t ldo)
{
    packed_k_tile(n, xp, ng, y, ys, nt, out, ldo, q2_K_pack_size(n), PACKED2, q2_K_span, ACT_K2);
}

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
enum { IQ4_XS_SIZE = 136, PACKED4X = 80 + 8 * 128 };

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

QK_TARGET_AVX2 static void iq4_xs_span(const uint8_t *g, int nt, int nb, const act_span *a, group_state *st)
{
    QK_BY_NT4(nt, iq4_xs_span_nt(g, N, nb, a, st))
}

QK_TARGET_AVX2 static void iq4_xs_packed_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys,
                                              int nt, float *out, size_t ldo)
{
    packed_k_tile(n, xp, ng, y, ys, nt, out, ldo, iq4_xs_pack_size(n), PACKED4X, iq4_xs_span, ACT_RAW);
}

/* Tiles of 64 rows: the activation side (act_prepare) is made once for 8
 * groups (pp256 on bench250m Q4_K_M about 10 % faster than with 16 for
 * Q4_K; Q6_K's 1024x2816 tile product about 9 %, and bench250m Q6_K pp256
 * 1.06-1.26x, three interleaved runs).  One-token products (always
 * 64-row tiles, lib/matmul.c): Q4_K's packed kernel is about 15 % faster
 * than the row kernel on bench250m Q4_K_M tg32, Q5_K's about as fast
 * (0.89-1.10x on bench250m Q5_K_M tg32, seven interleaved runs; its pp256
 * is 1.3-1.8x the row kernel's); Q6_K's is about 10 % slower (its level
 * unpacking), so Q6_K's stay on the rows as they are (avx2_kquants.c).
 * IQ4_XS's packed kernel against its row kernel on bench250m IQ4_XS:
 * pp256 2.3-3.1x, tg32 1.8-2.2x; Q3_K's on bench250m Q3_K_M: pp256
 * 1.71-1.80x, tg32 1.54-1.75x; Q2_K's on bench250m Q2_K: pp256
 * 1.30-1.73x, tg32 1.19-1.50x. */
const qk_pack_ops qk_x86_avx2_packed_k[] = {
    {.id = QK_Q4_K, .pack_size = q4_K_pack_size, .pack = q4_K_pack, .packed_tile = q4_K_packed_tile, .tile_rows = 64, .decode = 1},
    {.id = QK_Q5_K, .pack_size = q5_K_pack_size, .pack = q5_K_pack, .packed_tile = q5_K_packed_tile, .tile_rows = 64, .decode = 1},
    {.id = QK_Q2_K, .pack_size = q2_K_pack_size, .pack = q2_K_pack, .packed_tile = q2_K_packed_tile, .tile_rows = 64, .decode = 1},
    {.id = QK_Q3_K, .pack_size = q3_K_pack_size, .pack = q3_K_pack, .packed_tile = q3_K_packed_tile, .tile_rows = 64, .decode = 1},
    {.id = QK_Q6_K, .pack_size = q6_K_pack_size, .pack = q6_K_pack, .packed_tile = q6_K_packed_tile, .tile_rows = 64},
    {.id = QK_IQ4_XS, .pack_size = iq4_xs_pack_size, .pack = iq4_xs_pack, .packed_tile = iq4_xs_packed_tile, .tile_rows = 64, .decode = 1},
    {.id = -1},
};

#endif
