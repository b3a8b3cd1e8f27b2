/* avx2_kquants.c - AVX2 kernels of the K-quants against Q8_K (Q2_K..Q6_K)
 * and the Q8_K activation encoder.
 *
 * Bitwise equal to the scalar reference (kquants.c).  The reference sums
 * integer products in eight int32 lanes, element e of a block into lane
 * e % 8, and then per block  sums[l] += (xd * yd) * (float)lane[l]  in
 * eight float lanes, adding sums[0..7] in order at the end.  Here lane l is
 * vector lane l: bytes are shuffled within each 16-byte half so that
 * maddubs pairs element e with e + 8 (same lane), and two such vectors of
 * different scales are interleaved so that madd pairs equal lanes again
 * (see lanes_pair).  The lanes' integer sums are then exact and the float
 * steps are the reference's, one lane per lane, without FMA. */
#include "kernels/x86/simd_common.h"

#ifdef QK_X86
#include <math.h>

#define QKK 256

enum { Q4_K_SIZE = 144, Q5_K_SIZE = 176, Q6_K_SIZE = 210, Q8_K_SIZE = 292 };

/* Within each 16-byte half: element e and e + 8 become neighbours. */
QK_TARGET_AVX2 static inline __m256i lane_shuffle(__m256i v)
{
    const __m256i p = _mm256_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15, 0, 8,
                                       1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    return _mm256_shuffle_epi8(v, p);
}

/* acc_lo (lanes 0..3 of both halves) and acc_hi (lanes 4..7) += the scaled
 * lane partials of v1 and v2; scale holds, per half, the int16 pair
 * (scale of v1's half, scale of v2's half) in every 32-bit element. */
QK_TARGET_AVX2 static inline void lanes_pair(__m256i *acc_lo, __m256i *acc_hi, __m256i v1, __m256i v2,
                                             __m256i scale)
{
    *acc_lo = _mm256_add_epi32(*acc_lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(v1, v2), scale));
    *acc_hi = _mm256_add_epi32(*acc_hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(v1, v2), scale));
}

/* Lanes 0..7 in order from the two accumulators of lanes_pair. */
QK_TARGET_AVX2 static inline __m256i lanes_total(__m256i lo, __m256i hi)
{
    return _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20),
                            _mm256_permute2x128_si256(lo, hi, 0x31));
}

static inline int pair16(int a, int b) { return (int)((uint32_t)(uint16_t)a | (uint32_t)(uint16_t)b << 16); }

/* The reference's final  sumf += sums[l]  for l = 0..7, in order. */
QK_TARGET_AVX2 static inline float add_lanes(float sumf, __m256 sums)
{
    float s[8];
    _mm256_storeu_ps(s, sums);
    for (int l = 0; l < 8; l++)
        sumf += s[l];
    return sumf;
}

/* ---- Q4_K: d dmin scales[12] qs[128] ----------------------------------------- */

/* The 6-bit scales (bytes 0..7) and mins (bytes 8..15) of a Q4_K/Q5_K
 * block's scales[12], as qk_get_scale_min_k4 gives them, four at a time. */
static inline void k4_scales_mins(const uint8_t *q, uint8_t sm[16])
{
    const uint32_t u0 = qk_ld_u32(q), u1 = qk_ld_u32(q + 4), u2 = qk_ld_u32(q + 8);
    qk_st_u32(sm, u0 & 0x3f3f3f3fu);
    qk_st_u32(sm + 4, (u2 & 0x0f0f0f0fu) | ((u0 >> 2) & 0x30303030u));
    qk_st_u32(sm + 8, u1 & 0x3f3f3f3fu);
    qk_st_u32(sm + 12, ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 2) & 0x30303030u));
}

/* The eight mins as sixteen int16 (each twice), and with them
 * sum over j < 16 of bsums[j] * mins[j / 2] (exact int32). */
QK_TARGET_AVX2 static inline __m256i k4_mins16(const uint8_t *mins)
{
    const __m128i m = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)mins));
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi16(m, m)),
                                   _mm_unpackhi_epi16(m, m), 1);
}

QK_TARGET_AVX2 static inline int k4_summ(const uint8_t *bsums, __m256i mins16)
{
    return qk_hsum_epi32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)bsums), mins16));
}

/* The levels of 64-element chunk c of a Q4_K block (qs bytes q, lane-
 * shuffled) or of a Q5_K block (also hb: its 32 qh bytes, lane-shuffled;
 * bit 2c of qh[i] is bit 4 of element 64c + i, bit 2c + 1 that of element
 * 64c + 32 + i).  Bytewise masks and shifts commute with the shuffle. */
QK_TARGET_AVX2 static inline void k4_chunk(__m256i q, const __m256i *hb, int c, __m256i *a1,
                                           __m256i *a2)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    *a1 = _mm256_and_si256(q, m4);
    *a2 = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    if (hb) {
        const __m256i h = _mm256_srli_epi16(*hb, 2 * c);
        *a1 = _mm256_or_si256(*a1, _mm256_slli_epi16(_mm256_and_si256(h, one), 4));
        *a2 = _mm256_or_si256(*a2, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 1), one), 4));
    }
}

/* Q4_K (K5 0: qs at 16, 144-byte blocks) and Q5_K (K5 1: qh at 16, qs at
 * 48, 176 bytes) against one activation row whose quants are already in
 * lane order (ysh: the q8 bytes of every block through lane_shuffle, 256
 * per block): the reference's k4_block_dot, lane for lane. */
#define K4_DOT1S(name, SIZE, K5)                                                                 \
    QK_TARGET_AVX2 static float name(int64_t n, const uint8_t *x, const uint8_t *ysh,            \
                                     const uint8_t *y)                                           \
    {                                                                                            \
        __m256 sums = _mm256_setzero_ps();                                                       \
        float sumf = 0;                                                                          \
        for (int64_t i = 0; i < n / QKK; i++, x += SIZE, y += Q8_K_SIZE, ysh += QKK) {           \
            qk_prefetch_span(x + QK_PREFETCH_AHEAD, SIZE);                                                     \
            uint8_t sm[16];                                                                      \
            k4_scales_mins(x + 4, sm);                                                           \
            const int summ = k4_summ(y + 4 + QKK, k4_mins16(sm + 8));                            \
            const __m256i hb = K5 ? lane_shuffle(_mm256_loadu_si256((const __m256i *)(x + 16)))  \
                                  : _mm256_setzero_si256();                                      \
            __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();                    \
            _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {                                \
                const __m256i q =                                                                \
                    lane_shuffle(_mm256_loadu_si256((const __m256i *)(x + 16 + 32 * K5 + 32 * c))); \
                __m256i a1, a2;                                                                  \
                k4_chunk(q, K5 ? &hb : NULL, c, &a1, &a2);                                       \
                const __m256i v1 = _mm256_maddubs_epi16(a1, _mm256_loadu_si256((const __m256i *)(ysh + 64 * c))); \
                const __m256i v2 =                                                               \
                    _mm256_maddubs_epi16(a2, _mm256_loadu_si256((const __m256i *)(ysh + 64 * c + 32))); \
                lanes_pair(&lo, &hi, v1, v2, _mm256_set1_epi32(pair16(sm[2 * c], sm[2 * c + 1]))); \
            }                                                                                    \
            const float xd = qk_ldh(x), xdmin = qk_ldh(x + 2), yd = qk_ld_f32(y);                \
            const __m256 lane = _mm256_cvtepi32_ps(lanes_total(lo, hi));                         \
            sums = _mm256_add_ps(sums, _mm256_mul_ps(_mm256_set1_ps(xd * yd), lane));            \
            sumf -= xdmin * yd * (float)summ;                                                    \
        }                                                                                        \
        return add_lanes(sumf, sums);                                                            \
    }

K4_DOT1S(q4_K_dot1s, Q4_K_SIZE, 0)
K4_DOT1S(q5_K_dot1s, Q5_K_SIZE, 1)

/* The q8 bytes of the n / 256 Q8_K blocks at y, lane-shuffled, into ysh. */
QK_TARGET_AVX2 static void q8_K_shuffled(int64_t n, const uint8_t *y, uint8_t *ysh)
{
    for (int64_t i = 0; i < n / QKK; i++, y += Q8_K_SIZE, ysh += QKK)
        for (int c = 0; c < QKK; c += 32)
            _mm256_storeu_si256((__m256i *)(ysh + c),
                                lane_shuffle(_mm256_loadu_si256((const __m256i *)(y + 4 + c))));
}

/* ---- Q6_K: ql[128] qh[64] scales[16] d ------------------------------------------ */

/* The levels 0..63 of half h (elements 128h .. 128h+127) of the Q6_K block
 * at x, as four vectors of 32 (a[s]: elements 128h + 32s .. +31) in lane
 * order: built from the lane-shuffled ql/qh bytes, since the bytewise masks
 * and shifts commute with the shuffle. */
QK_TARGET_AVX2 static inline void q6_K_half(const uint8_t *x, int h, __m256i a[4])
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
    const __m256i A = lane_shuffle(_mm256_loadu_si256((const __m256i *)(x + 64 * h)));
    const __m256i B = lane_shuffle(_mm256_loadu_si256((const __m256i *)(x + 64 * h + 32)));
    const __m256i Q = lane_shuffle(_mm256_loadu_si256((const __m256i *)(x + 128 + 32 * h)));
    a[0] = _mm256_or_si256(_mm256_and_si256(A, m4), _mm256_slli_epi16(_mm256_and_si256(Q, m3), 4));
    a[1] = _mm256_or_si256(_mm256_and_si256(B, m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(Q, 2), m3), 4));
    a[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A, 4), m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(Q, 4), m3), 4));
    a[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(B, 4), m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(Q, 6), m3), 4));
}

/* lanes_pair's scale vector for groups g, g+2 (low half) and g+1, g+3 (high
 * half): a pair of level vectors holds groups g, g+1 and g+2, g+3. */
QK_TARGET_AVX2 static inline __m256i q6_K_scale_pair(const int8_t *sc, int g)
{
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi32(pair16(sc[g], sc[g + 2]))),
                                   _mm_set1_epi32(pair16(sc[g + 1], sc[g + 3])), 1);
}

/* Q6_K against one activation row whose quants are lane-shuffled (see
 * q4_K_dot1s). */
QK_TARGET_AVX2 static float q6_K_dot1s(int64_t n, const uint8_t *x, const uint8_t *ysh,
                                       const uint8_t *y)
{
    __m256 sums = _mm256_setzero_ps();
    const __m256i off = _mm256_set1_epi8(32);
    for (int64_t i = 0; i < n / QKK; i++, x += Q6_K_SIZE, y += Q8_K_SIZE, ysh += QKK) {
        qk_prefetch_span(x + QK_PREFETCH_AHEAD, Q6_K_SIZE);
        const int8_t *sc = (const int8_t *)(x + 192);
        __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
            __m256i a[4];
            q6_K_half(x, h, a);
            __m256i v[4];
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
                const __m256i sa = _mm256_sub_epi8(a[k], off);
                const __m256i sy = _mm256_loadu_si256((const __m256i *)(ysh + 128 * h + 32 * k));
                v[k] = _mm256_maddubs_epi16(_mm256_sign_epi8(sa, sa), _mm256_sign_epi8(sy, sa));
            }
            _Pragma("GCC unroll 2") for (int k = 0; k < 4; k += 2)
                lanes_pair(&lo, &hi, v[k], v[k + 1], q6_K_scale_pair(sc, 8 * h + 2 * k));
        }
        const float d = qk_ldh(x + 208) * qk_ld_f32(y);
        sums = _mm256_add_ps(sums, _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes_total(lo, hi))));
    }
    return add_lanes(0, sums);
}

/* ---- several activation rows per weight block (prompt batches) --------------
 * The weight block is unpacked once (levels shuffled into lane order, scale
 * vectors, block scales) and used for up to KT activation rows; for each
 * pair the integer and float steps are dot1's, so the results are too.
 * dot1 stays for decode: dotT with one row is about 15 % slower there. */
#define KT 4

/* The same for up to KT activation rows sharing each unpacked weight block. */
#define K4_DOTTS(name, SIZE, K5)                                                                 \
    QK_TARGET_AVX2 __attribute__((always_inline)) static inline void name##_nt(                  \
        int64_t n, const uint8_t *x, const uint8_t *const ysh[KT], const uint8_t *const y[KT],   \
        const int nt, float out[KT])                                                             \
    {                                                                                            \
        __m256 sums[KT];                                                                         \
        float sumf[KT];                                                                          \
        _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++)                                     \
            sums[t] = _mm256_setzero_ps(), sumf[t] = 0;                                          \
        for (int64_t i = 0; i < n / QKK; i++, x += SIZE) {                                       \
            uint8_t sm[16];                                                                      \
            k4_scales_mins(x + 4, sm);                                                           \
            const __m256i hb = K5 ? lane_shuffle(_mm256_loadu_si256((const __m256i *)(x + 16)))  \
                                  : _mm256_setzero_si256();                                      \
            __m256i a1[4], a2[4], scale[4];                                                      \
            _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {                                \
                const __m256i q =                                                                \
                    lane_shuffle(_mm256_loadu_si256((const __m256i *)(x + 16 + 32 * K5 + 32 * c))); \
                k4_chunk(q, K5 ? &hb : NULL, c, &a1[c], &a2[c]);                                 \
                scale[c] = _mm256_set1_epi32(pair16(sm[2 * c], sm[2 * c + 1]));                  \
            }                                                                                    \
            const float xd = qk_ldh(x), xdmin = qk_ldh(x + 2);                                   \
            const __m256i mins16 = k4_mins16(sm + 8);                                            \
            _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++) {                               \
                const uint8_t *yb = y[t] + (size_t)i * Q8_K_SIZE, *q8 = ysh[t] + (size_t)i * QKK; \
                const int summ = k4_summ(yb + 4 + QKK, mins16);                                  \
                __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();                \
                _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {                            \
                    const __m256i v1 =                                                           \
                        _mm256_maddubs_epi16(a1[c], _mm256_loadu_si256((const __m256i *)(q8 + 64 * c))); \
                    const __m256i v2 = _mm256_maddubs_epi16(                                     \
                        a2[c], _mm256_loadu_si256((const __m256i *)(q8 + 64 * c + 32)));         \
                    lanes_pair(&lo, &hi, v1, v2, scale[c]);                                      \
                }                                                                                \
                const float yd = qk_ld_f32(yb);                                                  \
                const __m256 lane = _mm256_cvtepi32_ps(lanes_total(lo, hi));                     \
                sums[t] = _mm256_add_ps(sums[t], _mm256_mul_ps(_mm256_set1_ps(xd * yd), lane));  \
                sumf[t] -= xdmin * yd * (float)summ;                                             \
            }                                                                                    \
        }                                                                                        \
        _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++)                                     \
            out[t] = add_lanes(sumf[t], sums[t]);                                                \
    }                                                                                            \
    /* one instance per token count: the token loops unroll */                                  \
    QK_TARGET_AVX2 static void name(int64_t n, const uint8_t *x, const uint8_t *const ysh[KT],   \
                                    const uint8_t *const y[KT], int nt, float out[KT])           \
    {                                                                                            \
        _Static_assert(KT == 4, "one instance per token count");                                \
        QK_BY_NT4(nt, name##_nt(n, x, ysh, y, N, out))                                           \
    }

K4_DOTTS(q4_K_dotTs, Q4_K_SIZE, 0)
K4_DOTTS(q5_K_dotTs, Q5_K_SIZE, 1)

QK_TARGET_AVX2 __attribute__((always_inline)) static inline void
q6_K_dotTs_nt(int64_t n, const uint8_t *x, const uint8_t *const ysh[KT], const uint8_t *const y[KT], const int nt,
              float out[KT])
{
    __m256 sums[KT];
    for (int t = 0; t < nt; t++)
        sums[t] = _mm256_setzero_ps();
    const __m256i off = _mm256_set1_epi8(32);
    for (int64_t i = 0; i < n / QKK; i++, x += Q6_K_SIZE) {
        const int8_t *sc = (const int8_t *)(x + 192);
        __m256i sa[2][4], aa[2][4], scale[2][2];
        for (int h = 0; h < 2; h++) {
            __m256i a[4];
            q6_K_half(x, h, a);
            for (int s4 = 0; s4 < 4; s4++) {
                sa[h][s4] = _mm256_sub_epi8(a[s4], off);
                aa[h][s4] = _mm256_sign_epi8(sa[h][s4], sa[h][s4]);
            }
            for (int s4 = 0; s4 < 4; s4 += 2)
                scale[h][s4 / 2] = q6_K_scale_pair(sc, 8 * h + 2 * s4);
        }
        const float xd = qk_ldh(x + 208);
        for (int t = 0; t < nt; t++) {
            const uint8_t *q8 = ysh[t] + (size_t)i * QKK;
            __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
            for (int h = 0; h < 2; h++) {
                __m256i v[4];
                for (int s4 = 0; s4 < 4; s4++) {
                    const __m256i sy = _mm256_loadu_si256((const __m256i *)(q8 + 128 * h + 32 * s4));
                    v[s4] = _mm256_maddubs_epi16(aa[h][s4], _mm256_sign_epi8(sy, sa[h][s4]));
                }
                lanes_pair(&lo, &hi, v[0], v[1], scale[h][0]);
                lanes_pair(&lo, &hi, v[2], v[3], scale[h][1]);
            }
            const float d = xd * qk_ld_f32(y[t] + (size_t)i * Q8_K_SIZE);
            sums[t] = _mm256_add_ps(sums[t], _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes_total(lo, hi))));
        }
    }
    for (int t = 0; t < nt; t++)
        out[t] = add_lanes(0, sums[t]);
}

QK_TARGET_AVX2 static void q6_K_dotTs(int64_t n, const uint8_t *x, const uint8_t *const ysh[KT],
                                      const uint8_t *const y[KT], int nt, float out[KT])
{
    QK_BY_NT4(nt, q6_K_dotTs_nt(n, x, ysh, y, N, out))
}

/* ---- Q2_K: scales[16] qs[64] d dmin ---------------------------------------------
 * The reference (q2_K_vec_dot) takes each block's whole integer sum
 * isum = sum_j (scales[j] & 15) * sum of group j's 16 products, exact in any
 * order, and then  sumf += dall * isum - dmin * summs  in float.  Element
 * 128h + 32s + l is bits 2s..2s+1 of qs[32h + l]; a 32-element chunk (h, s)
 * holds groups 8h + 2s (low 16 bytes) and 8h + 2s + 1 (high 16). */
enum { Q2_K_SIZE = 84 };

QK_TARGET_AVX2 __attribute__((always_inline)) static inline void
q2_K_dotT_nt(int64_t n, const uint8_t *x, const uint8_t *const y[KT], const int nt, float out[KT])
{
    float sumf[KT] = {0};
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < n / QKK; i++, x += Q2_K_SIZE) {
        qk_prefetch_span(x + QK_PREFETCH_AHEAD, Q2_K_SIZE);
        __m256i a[8], sc[8];
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x + 16 + 32 * h));
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
                const int j = 8 * h + 2 * k;
                a[4 * h + k] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m3);
                sc[4 * h + k] = _mm256_inserti128_si256(_mm256_set1_epi16((short)(x[j] & 0xF)),
                                                        _mm_set1_epi16((short)(x[j + 1] & 0xF)), 1);
            }
        }
        const __m128i mn8 = _mm_srli_epi16(_mm_loadu_si128((const __m128i *)x), 4);
        const __m128i mn = _mm_and_si128(mn8, _mm_set1_epi8(0x0F));
        const __m256i mins = _mm256_cvtepu8_epi16(mn);
        const float xd = qk_ldh(x + 80), xdmin = qk_ldh(x + 82);
        for (int t = 0; t < nt; t++) {
            const uint8_t *yb = y[t] + (size_t)i * Q8_K_SIZE, *q8 = yb + 4;
            __m256i acc = _mm256_setzero_si256();
            _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) {
                const __m256i p = _mm256_maddubs_epi16(a[c], _mm256_loadu_si256((const __m256i *)(q8 + 32 * c)));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, sc[c]));
            }
            const int isum = qk_hsum_epi32(acc);
            const int summs = qk_hsum_epi32(
                _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(yb + 4 + QKK)), mins));
            const float yd = qk_ld_f32(yb);
            const float dall = yd * xd, dmin = yd * xdmin;
            sumf[t] += dall * (float)isum - dmin * (float)summs;
        }
    }
    for (int t = 0; t < nt; t++)
        out[t] = sumf[t];
}

/* one instance per token count: the token loops unroll */
QK_TARGET_AVX2 static void q2_K_dotT(int64_t n, const uint8_t *x, const uint8_t *const y[KT], int nt,
                                     float out[KT])
{
    QK_BY_NT4(nt, q2_K_dotT_nt(n, x, y, N, out))
}

QK_TILE_OF_DOTT(q2_K_tile, q2_K_dotT, KT)

QK_VEC_DOT_OF_TILE(q2_K_tile_dot, q2_K_tile)

/* ---- Q3_K: hmask[32] qs[64] scales[12] d --------------------------------------------
 * Q6_K's lane scheme with other levels: element 128h + 32s + l is bits
 * 2s..2s+1 of qs[32h + l], less 4 unless bit 4h + s of hmask[l] is set
 * (-4..3); sixteen 6-bit scales less 32, one per 16 elements, as Q6_K's. */
enum { Q3_K_SIZE = 110 };


QK_TARGET_AVX2 __attribute__((always_inline)) static inline void
q3_K_dotTs_nt(int64_t n, const uint8_t *x, const uint8_t *const ysh[KT], const uint8_t *const y[KT], const int nt,
              float out[KT])
{
    __m256 sums[KT];
    for (int t = 0; t < nt; t++)
        sums[t] = _mm256_setzero_ps();
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1), four = _mm256_set1_epi8(4);
    for (int64_t i = 0; i < n / QKK; i++, x += Q3_K_SIZE) {
        qk_prefetch_span(x + QK_PREFETCH_AHEAD, Q3_K_SIZE);
        int8_t sc[16];
        qk_q3_K_scales8(x + 96, sc);
        const __m256i hm = lane_shuffle(_mm256_loadu_si256((const __m256i *)x));
        __m256i sa[8], aa[8], scale[4];
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
            const __m256i Q = lane_shuffle(_mm256_loadu_si256((const __m256i *)(x + 32 + 32 * h)));
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
                const __m256i q2 = _mm256_and_si256(_mm256_srli_epi16(Q, 2 * k), m3);
                const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + k), one);
                const __m256i a = _mm256_sub_epi8(_mm256_or_si256(q2, _mm256_slli_epi16(hb, 2)), four);
                sa[4 * h + k] = a;
                aa[4 * h + k] = _mm256_sign_epi8(a, a);
            }
            scale[2 * h] = q6_K_scale_pair(sc, 8 * h);
            scale[2 * h + 1] = q6_K_scale_pair(sc, 8 * h + 4);
        }
        const float xd = qk_ldh(x + 108);
        for (int t = 0; t < nt; t++) {
            const uint8_t *q8 = ysh[t] + (size_t)i * QKK;
            __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
            __m256i v[8];
            _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) {
                const __m256i sy = _mm256_loadu_si256((const __m256i *)(q8 + 32 * c));
                v[c] = _mm256_maddubs_epi16(aa[c], _mm256_sign_epi8(sy, sa[c]));
            }
            _Pragma("GCC unroll 4") for (int c = 0; c < 8; c += 2)
                lanes_pair(&lo, &hi, v[c], v[c + 1], scale[c / 2]);
            const float d = xd * qk_ld_f32(y[t] + (size_t)i * Q8_K_SIZE);
            sums[t] = _mm256_add_ps(sums[t], _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes_total(lo, hi))));
        }
    }
    for (int t = 0; t < nt; t++)
        out[t] = add_lanes(0, sums[t]);
}

/* one instance per token count: the token loops unroll (decode's dot1s is
 * the one-token instance) */
QK_TARGET_AVX2 static void q3_K_dotTs(int64_t n, const uint8_t *x, const uint8_t *const ysh[KT],
                                      const uint8_t *const y[KT], int nt, float out[KT])
{
    QK_BY_NT4(nt, q3_K_dotTs_nt(n, x, ysh, y, N, out))
}

QK_TARGET_AVX2 static float q3_K_dot1s(int64_t n, const uint8_t *x, const uint8_t *ysh, const uint8_t *y)
{
    const uint8_t *s1[KT] = {ysh}, *y1[KT] = {y};
    float o[KT];
    q3_K_dotTs_nt(n, x, s1, y1, 1, o);
    return o[0];
}

/* The activation quants of the tile's tokens are lane-shuffled once for all
 * its rows (up to SHUF_MAX elements per row, on the stack; longer rows, which
 * no model has, go through the table's reference vec_dot: the same bits).
 * One token: dot1s per row; several: KT tokens share each weight block. */
#define SHUF_MAX 32768
#define TILE1(name, id, dot1s, dotTs)                                                           \
    QK_TARGET_AVX2 static void name(int64_t n, const void *x, size_t xs, int nr, const void *y, \
                                    size_t ys, int nt, float *out, size_t ldo)                  \
    {                                                                                           \
        const uint8_t *X = x, *Y = y;                                                           \
        if (n > SHUF_MAX) {                                                                     \
            const qk_vec_dot_fn ref = qk_type_get(id)->vec_dot;                                 \
            for (int t = 0; t < nt; t++)                                                        \
                for (int r = 0; r < nr; r++)                                                    \
                    out[(size_t)t * ldo + (size_t)r] = ref(n, X + (size_t)r * xs, Y + (size_t)t * ys); \
            return;                                                                             \
        }                                                                                       \
        if (nt == 1) {                                                                          \
            uint8_t ysh[SHUF_MAX];                                                              \
            q8_K_shuffled(n, Y, ysh);                                                           \
            for (int r = 0; r < nr; r++)                                                        \
                out[r] = dot1s(n, X + (size_t)r * xs, ysh, Y);                                  \
            return;                                                                             \
        }                                                                                       \
        _Static_assert(KT * SHUF_MAX <= 131072, "stack");                                      \
        uint8_t ysh[KT][SHUF_MAX];                                                              \
        for (int t0 = 0; t0 < nt; t0 += KT) {                                                   \
            const int q = nt - t0 < KT ? nt - t0 : KT;                                          \
            const uint8_t *yr[KT], *sr[KT];                                                     \
            for (int k = 0; k < q; k++) {                                                       \
                yr[k] = Y + (size_t)(t0 + k) * ys;                                              \
                q8_K_shuffled(n, yr[k], ysh[k]);                                                \
                sr[k] = ysh[k];                                                                 \
            }                                                                                   \
            for (int r = 0; r < nr; r++) {                                                      \
                float o[KT];                                                                    \
                dotTs(n, X + (size_t)r * xs, sr, yr, q, o);                                     \
                for (int k = 0; k < q; k++)                                                     \
                    out[(size_t)(t0 + k) * ldo + (size_t)r] = o[k];                             \
            }                                                                                   \
        }                                                                                       \
    }                                                                                           \
    static float name##_dot(int64_t n, const void *x, const void *y)                            \
    {                                                                                           \
        float o;                                                                                \
        name(n, x, 0, 1, y, 0, 1, &o, 1);                                                       \
        return o;                                                                               \
    }

TILE1(q3_K_tile, QK_Q3_K, q3_K_dot1s, q3_K_dotTs)
TILE1(q4_K_tile, QK_Q4_K, q4_K_dot1s, q4_K_dotTs)
TILE1(q5_K_tile, QK_Q5_K, q5_K_dot1s, q5_K_dotTs)
TILE1(q6_K_tile, QK_Q6_K, q6_K_dot1s, q6_K_dotTs)

/* ---- Q8_K activation encoder ------------------------------------------------------ */

/* quantize_row_q8_K_ref for one block, as kquants.c: the fallback for
 * blocks with an infinity or NaN. */
static void q8_K_block_scalar(const float *x, uint8_t *b)
{
    float max = 0, amax = 0;
    for (int j = 0; j < QKK; j++) {
        float ax = fabsf(x[j]);
        if (ax > amax) {
            amax = ax;
            max = x[j];
        }
    }
    if (!amax) {
        memset(b, 0, Q8_K_SIZE);
        return;
    }
    const float iscale = -127.f / max;
    int8_t *qs = (int8_t *)(b + 4);
    for (int j = 0; j < QKK; j++) {
        int v = qk_nearest_int(iscale * x[j]);
        qs[j] = (int8_t)(v < 127 ? v : 127);
    }
    for (int j = 0; j < QKK / 16; j++) {
        int sum = 0;
        for (int l = 0; l < 16; l++)
            sum += qs[16 * j + l];
        qk_st_u16(b + 4 + QKK + 2 * j, (uint16_t)(int16_t)sum);
    }
    qk_st_f32(b, 1 / iscale);
}

QK_TARGET_AVX2 static void q8_K_from_float(const float *src, void *dst, int64_t n)
{
    uint8_t *b = dst;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < n / QKK; i++, src += QKK, b += Q8_K_SIZE) {
        if (!qk_all_finite(src, QKK)) {
            q8_K_block_scalar(src, b);
            continue;
        }
        const float amax = qk_absmax(src, QKK);
        if (!amax) {
            memset(b, 0, Q8_K_SIZE);
            continue;
        }
        /* the first element of largest magnitude, as the reference's scan */
        float max = 0;
        const __m256 va = _mm256_set1_ps(amax);
        for (int j = 0; j < QKK; j += 8) {
            const __m256 ax = _mm256_and_ps(_mm256_loadu_ps(src + j), absmask);
            const int m = _mm256_movemask_ps(_mm256_cmp_ps(ax, va, _CMP_EQ_OQ));
            if (m) {
                max = src[j + __builtin_ctz((unsigned)m)];
                break;
            }
        }
        const float iscale = -127.f / max;
        const __m256 vs = _mm256_set1_ps(iscale);
        const __m256i top = _mm256_set1_epi32(127);
        int8_t *qs = (int8_t *)(b + 4);
        /* nearest_int is round-half-even for |v| <= 2^22: cvtps2dq */
        for (int j = 0; j < QKK; j += 32) {
            __m256i q[4];
            for (int k = 0; k < 4; k++)
                q[k] = _mm256_min_epi32(
                    _mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(src + j + 8 * k))), top);
            qk_store_i8x32(qs + j, q[0], q[1], q[2], q[3]);
        }
        for (int j = 0; j < QKK; j += 32) { /* bsums of two groups of 16 */
            const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + j));
            const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q),
                                                _mm256_set1_epi16(1));
            const __m256i s = _mm256_hadd_epi32(p, p);
            const __m256i t = _mm256_hadd_epi32(s, s);
            qk_st_u16(b + 4 + QKK + j / 8, (uint16_t)(int16_t)_mm256_extract_epi32(t, 0));
            qk_st_u16(b + 4 + QKK + j / 8 + 2, (uint16_t)(int16_t)_mm256_extract_epi32(t, 4));
        }
        qk_st_f32(b, 1 / iscale);
    }
}

const qk_simd_ops qk_x86_avx2_kquants[] = {
    {QK_Q2_K, q2_K_tile, q2_K_tile_dot, NULL, NULL, NULL},
    {QK_Q3_K, q3_K_tile, q3_K_tile_dot, NULL, NULL, NULL},
    {QK_Q4_K, q4_K_tile, q4_K_tile_dot, NULL, NULL, NULL},
    {QK_Q5_K, q5_K_tile, q5_K_tile_dot, NULL, NULL, NULL},
    {QK_Q6_K, q6_K_tile, q6_K_tile_dot, NULL, NULL, NULL},
    {QK_Q8_K, NULL, NULL, q8_K_from_float, NULL, NULL},
    {.id = -1},
};

#endif
