/* avx2_packed_k.c - AVX2 kernel of repacked Q4_K weights (cpu.h's pack and
 * packed_tile), eight rows per group.
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
 *   sc[s][r]          sub-block scales, s = e / 32            (64)
 *   mn[t][r][2]       mins of sub-blocks 2t and 2t + 1        (64)
 *   V[q][l][r][k]     4 bytes of row r: low nibbles a[32q + 8k + l], high
 *                     nibbles a[32(q + 4) + 8k + l], k = 0..3 (1024)
 * and the activation block is permuted to match (ys[s][l][k] = y[32s + 8k +
 * l]), so maddubs of V's nibbles against the four broadcast bytes leaves
 * row r's pairs in lane r, and one madd against the scales (sc, sc) per
 * lane adds them scaled. */
#include "simd_common.h"

#ifdef QK_X86
#include <string.h>

#ifndef PF_K
#define PF_K QK_PREFETCH_AHEAD
#endif
enum { Q4_K_SIZE = 144, Q8_K_SIZE = 292, QKK = 256, GROUP = 8, PT = 4, KC = 16, GMAX = 8,
       PACKED = 1184 };

static size_t q4_K_pack_size(int64_t n) { return (size_t)(n / QKK) * PACKED; }

static void q4_K_pack(int64_t n, const void *x, size_t xs, void *dst)
{
    uint8_t *d = dst;
    for (int64_t b = 0; b < n / QKK; b++, d += PACKED) {
        for (int r = 0; r < GROUP; r++) {
            const uint8_t *blk = (const uint8_t *)x + (size_t)r * xs + (size_t)b * Q4_K_SIZE;
            memcpy(d + 2 * r, blk, 2);
            memcpy(d + 16 + 2 * r, blk + 2, 2);
            uint8_t sc[8], mn[8], a[QKK];
            for (int s = 0; s < 8; s++)
                qk_get_scale_min_k4(s, blk + 4, &sc[s], &mn[s]);
            for (int s = 0; s < 8; s++) {
                d[32 + 8 * s + r] = sc[s];
                d[96 + 16 * (s / 2) + 2 * r + s % 2] = mn[s];
            }
            /* element e: chunk e / 64 of qs, low nibble for the first 32 */
            for (int e = 0; e < QKK; e++) {
                const uint8_t q = blk[16 + 32 * (e / 64) + e % 32];
                a[e] = (uint8_t)(e % 64 < 32 ? q & 0xF : q >> 4);
            }
            for (int q = 0; q < 4; q++)
                for (int l = 0; l < 8; l++)
                    for (int k = 0; k < 4; k++)
                        d[160 + 256 * q + 32 * l + 4 * r + k] =
                            (uint8_t)(a[32 * q + 8 * k + l] | a[32 * (q + 4) + 8 * k + l] << 4);
        }
    }
}

/* The activation side of KC blocks of up to PT rows: the quants permuted
 * (ys), the scale, and the pairs (bsum[4t] + bsum[4t+1], bsum[4t+2] +
 * bsum[4t+3]) of 16-bit sub-block sums as one int32. */
typedef struct {
    uint8_t ys[PT][KC][QKK];
    float yd[PT][KC];
    int32_t bs[PT][KC][4];
} act_span;

QK_TARGET_AVX2 static void act_prepare(const uint8_t *const y[PT], int nt, int64_t b0, int nb, act_span *a)
{
    const __m256i dw = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    const __m256i tr = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12,
                                        1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    for (int t = 0; t < nt; t++)
        for (int b = 0; b < nb; b++) {
            const uint8_t *yb = y[t] + (size_t)(b0 + b) * Q8_K_SIZE;
            for (int s = 0; s < 8; s++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(yb + 4 + 32 * s));
                _mm256_storeu_si256((__m256i *)(a->ys[t][b] + 32 * s),
                                    _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(v, dw), tr));
            }
            a->yd[t][b] = qk_ld_f32(yb);
            for (int p = 0; p < 4; p++) {
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

/* Sub-block scales s of the group's eight rows as (sc, sc) 16-bit pairs. */
QK_TARGET_AVX2 static inline __m256i scale_pairs(const uint8_t *g, int s)
{
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(g + 32 + 8 * s)));
    return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}

/* nt is a constant in each instance (q4_K_span), so the token loops unroll
 * and the integer sums stay in registers. */
QK_TARGET_AVX2 __attribute__((always_inline)) static inline void
q4_K_span_nt(const uint8_t *g, const int nt, int nb, const act_span *a, group_state *st)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int b = 0; b < nb; b++, g += PACKED) {
        qk_prefetch_span(g + PF_K, PACKED);
        const __m256 xd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g));
        const __m256 xdmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + 16)));
        __m256i sc[8];
        for (int s = 0; s < 8; s++)
            sc[s] = scale_pairs(g, s);
        __m256 dt[PT];
        for (int t = 0; t < nt; t++)
            dt[t] = _mm256_mul_ps(xd, _mm256_set1_ps(a->yd[t][b]));
        for (int l = 0; l < 8; l++) {
            __m256i acc[PT];
            for (int t = 0; t < PT; t++)
                acc[t] = _mm256_setzero_si256();
            for (int q = 0; q < 4; q++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(g + 160 + 256 * q + 32 * l));
                const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                for (int t = 0; t < nt; t++) {
                    const uint8_t *ys = a->ys[t][b];
                    const __m256i plo = _mm256_maddubs_epi16(lo, _mm256_set1_epi32((int)qk_ld_u32(ys + 32 * q + 4 * l)));
                    const __m256i phi =
                        _mm256_maddubs_epi16(hi, _mm256_set1_epi32((int)qk_ld_u32(ys + 32 * (q + 4) + 4 * l)));
                    acc[t] = _mm256_add_epi32(acc[t], _mm256_add_epi32(_mm256_madd_epi16(plo, sc[q]),
                                                                       _mm256_madd_epi16(phi, sc[q + 4])));
                }
            }
            for (int t = 0; t < nt; t++)
                st->s[t][l] = _mm256_add_ps(st->s[t][l], _mm256_mul_ps(dt[t], _mm256_cvtepi32_ps(acc[t])));
        }
        for (int t = 0; t < nt; t++) {
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
    _Static_assert(PT == 4, "one instance per token count");
    switch (nt) {
    case 1: q4_K_span_nt(g, 1, nb, a, st); break;
    case 2: q4_K_span_nt(g, 2, nb, a, st); break;
    case 3: q4_K_span_nt(g, 3, nb, a, st); break;
    default: q4_K_span_nt(g, 4, nb, a, st); break;
    }
}

QK_TARGET_AVX2 static void q4_K_packed_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys,
                                            int nt, float *out, size_t ldo)
{
    const int64_t nb = n / QKK;
    const size_t gsize = q4_K_pack_size(n);
    act_span a;
    group_state st[GMAX];
    for (int g0 = 0; g0 < ng; g0 += GMAX) {
        const int gn = ng - g0 < GMAX ? ng - g0 : GMAX;
        for (int t0 = 0; t0 < nt; t0 += PT) {
            const int q = nt - t0 < PT ? nt - t0 : PT;
            const uint8_t *yr[PT];
            for (int t = 0; t < PT; t++)
                yr[t] = (const uint8_t *)y + (size_t)(t0 + (t < q ? t : 0)) * ys;
            memset(st, 0, (size_t)gn * sizeof *st);
            for (int64_t b0 = 0; b0 < nb; b0 += KC) {
                const int kb = (int)(nb - b0 < KC ? nb - b0 : KC);
                act_prepare(yr, q, b0, kb, &a);
                for (int gi = 0; gi < gn; gi++)
                    q4_K_span((const uint8_t *)xp + (size_t)(g0 + gi) * gsize + (size_t)b0 * PACKED, q, kb,
                              &a, &st[gi]);
            }
            for (int gi = 0; gi < gn; gi++)
                for (int t = 0; t < q; t++) {
                    __m256 sum = st[gi].f[t];
                    for (int l = 0; l < 8; l++)
                        sum = _mm256_add_ps(sum, st[gi].s[t][l]);
                    float o[GROUP];
                    _mm256_storeu_ps(o, sum);
                    for (int r = 0; r < GROUP; r++)
                        out[(size_t)(t0 + t) * ldo + (size_t)(GROUP * (g0 + gi) + r)] = o[r];
                }
        }
    }
}

const qk_pack_ops qk_x86_avx2_packed_k[] = {
    {.id = QK_Q4_K, .pack_size = q4_K_pack_size, .pack = q4_K_pack, .packed_tile = q4_K_packed_tile},
    {.id = -1},
};

#endif
