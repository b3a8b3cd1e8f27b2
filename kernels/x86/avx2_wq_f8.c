/* avx2_wq_f8.c - AVX2 FP8 W8A8 and FP8_BLOCK (W_FP8 E4M3 weights x QK_A_F8B /
 * QK_A_F8G activations), bitwise equal to the scalar reference
 * qk_wq_tile_f8b (kernels/wq_f8.c, THE FP8 ORDER).
 *
 * Per 16 columns the odd and the even codes are shuffled into the high bytes
 * of words and made F16 bits (the value * 2^-8 once vcvtph2ps widens it,
 * subnormals too; dec16); the activations' BF16 pairs split into odd
 * (a dword's high half) and even (its low half) floats.  Lanes (k mod 32) / 2
 * .. + 7 then take the odd element's product, then the even one's, by fused
 * multiply-adds.  Each product is the reference's times 2^-8 exactly, so is
 * each sum (none nears the float's least normal), and the lane sums times
 * 256 are the reference's bits; FP8_BLOCK's running lanes take each group's
 * lanes with as_g * ws_g * 256.  One token: four rows a pass, the token's
 * split shared by them and each row's stream prefetched (the rows are not
 * repacked at this level): at parity with the float products' decode;
 * several: four tokens split SPLIT columns at a time, once for up to 16 rows,
 * each row's codes made floats once for the four (bench250m FP8_DYNAMIC at
 * QK_CPU=avx2, 2 threads: pp64 156-159 t/s with the split redone a row,
 * 180 with it shared, against the float products' 183-187). */
#include "kernels/x86/simd_common.h"

#include <string.h>

#include "kernels/wq_impl.h"
#include "kernels/x86/avx2_wq.h"

#ifdef QK_X86

enum { SPLIT = 512, PRE_ROWS = 16 }; /* several tokens: columns split at a time; rows a pass */

/* The 16 codes at q: the odd elements' values * 2^-8 in *wo, the even ones' in *we.  A
 * shuffle puts each code in the high byte of a word (the low byte zero), an
 * arithmetic shift by one and bit 14 cleared make it the F16 bits of the value
 * * 2^-8 (sign, then exponent and mantissa aligned, subnormals too), and
 * vcvtph2ps widens them exactly. */
QK_TARGET_AVX2 static inline void dec16(const uint8_t *q, __m256 *wo, __m256 *we)
{
    const __m128i odd = _mm_setr_epi8(-1, 1, -1, 3, -1, 5, -1, 7, -1, 9, -1, 11, -1, 13, -1, 15);
    const __m128i even = _mm_setr_epi8(-1, 0, -1, 2, -1, 4, -1, 6, -1, 8, -1, 10, -1, 12, -1, 14);
    const __m128i m = _mm_set1_epi16((short)0xBFFF), b = _mm_loadu_si128((const __m128i *)q);
    *wo = _mm256_cvtph_ps(_mm_and_si128(_mm_srai_epi16(_mm_shuffle_epi8(b, odd), 1), m));
    *we = _mm256_cvtph_ps(_mm_and_si128(_mm_srai_epi16(_mm_shuffle_epi8(b, even), 1), m));
}

/* The 16 BF16 words at a: the odd elements as floats in *xo, the even ones in *xe. */
QK_TARGET_AVX2 static inline void act16(const uint8_t *a, __m256 *xo, __m256 *xe)
{
    const __m256i d = _mm256_loadu_si256((const __m256i *)a);
    *xo = _mm256_castsi256_ps(_mm256_and_si256(d, _mm256_set1_epi32((int)0xFFFF0000u)));
    *xe = _mm256_castsi256_ps(_mm256_slli_epi32(d, 16));
}

/* R rows (codes q[r]) against one token's words a over columns [k0, k1): acc[r][0..2]. */
QK_TARGET_AVX2 __attribute__((always_inline)) static inline void
span(const uint8_t *const q[4], const uint8_t *a, int64_t k0, int64_t k1, const int R, int64_t rstep,
     __m256 acc[4][2])
{
    for (int64_t k = k0; k < k1; k += 32) { /* k0 and k1 multiples of 32: lanes 0-7, then 8-15 */
        if (k % 64 == 0) /* the rows as stored (no packing here), rstep bytes apart */
            qk_wq_prefetch_next_rows(q[0], rstep, R, k);
        _Pragma("GCC unroll 2") for (int l = 0; l < 2; l++) {
            __m256 xo, xe;
            act16(a + 2 * (k + 16 * l), &xo, &xe);
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
                __m256 wo, we;
                dec16(q[r] + k + 16 * l, &wo, &we);
                acc[r][l] = _mm256_fmadd_ps(wo, xo, acc[r][l]);
                acc[r][l] = _mm256_fmadd_ps(we, xe, acc[r][l]);
            }
        }
    }
}

/* FP8_BLOCK: one group's lanes (acc, the sums times 2^-8) into the running
 * lanes at p with the group's scales: as_g (from the token's words a of n
 * columns) * ws * 256, as wq_f8.c rounds it. */
QK_TARGET_AVX2 static inline void run_add(float p[16], const __m256 acc[2], const uint8_t *a, int64_t n, int64_t g0,
                                          float ws)
{
    float ag;
    memcpy(&ag, a + 2 * n + 4 * (g0 / QK_A_F8G_GROUP), 4);
    const __m256 f = _mm256_set1_ps(ag * ws * 256.0f);
    _mm256_storeu_ps(p, _mm256_fmadd_ps(acc[0], f, _mm256_loadu_ps(p)));
    _mm256_storeu_ps(p + 8, _mm256_fmadd_ps(acc[1], f, _mm256_loadu_ps(p + 8)));
}

/* Row r's output for the token row at row from its 16 lanes (lo, hi): their
 * sum (FP8_BLOCK's running lanes), or as * (ws * (256 * sum)). */
QK_TARGET_AVX2 static inline float finish(const qk_wq *w, const uint8_t *row, int64_t r, __m256 lo, __m256 hi)
{
    const float sum = qk_hsum8_ps(_mm256_add_ps(lo, hi));
    if (w->act == QK_A_F8G)
        return sum;
    qk_a_i8_head h;
    memcpy(&h, row, sizeof h);
    return h.scale * (qk_wq_scale(w, r, 0) * (256.0f * sum));
}

/* One row (codes q) against NT tokens whose words are already split (xs[t]:
 * per 16 columns from k0 the odd elements' 8 floats, then the even ones'). */
QK_TARGET_AVX2 __attribute__((always_inline)) static inline void
span_split(const uint8_t *q, const float *const xs[4], int64_t k0, int64_t k1, const int NT, __m256 acc[4][2])
{
    for (int64_t k = k0; k < k1; k += 32)
        _Pragma("GCC unroll 2") for (int l = 0; l < 2; l++) {
            __m256 wo, we;
            dec16(q + k + 16 * l, &wo, &we);
            const size_t o = (size_t)(k - k0 + 16 * l);
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                acc[t][l] = _mm256_fmadd_ps(wo, _mm256_loadu_ps(xs[t] + o), acc[t][l]);
                acc[t][l] = _mm256_fmadd_ps(we, _mm256_loadu_ps(xs[t] + o + 8), acc[t][l]);
            }
        }
}

/* Rows [r, r + nr) (nr <= PRE_ROWS) x 4 tokens from t0: the tokens' words split
 * SPLIT columns at a time, once for all the rows; each (row, token)'s lanes
 * (and FP8_BLOCK's running lanes) kept in memory between the spans. */
QK_TARGET_AVX2 static void tokens4(const qk_wq *w, int64_t r0, int r, int nr, int t0, const uint8_t *y, size_t ys,
                                   float *out, size_t ldo)
{
    enum { NT = 4 };
    const int64_t n = w->cols;
    const bool grp = w->act == QK_A_F8G;
    const uint8_t *a[NT];
    for (int t = 0; t < NT; t++)
        a[t] = y + (size_t)(t0 + t) * ys + QK_A_I8_HEAD;
    float xs[NT][2 * SPLIT], lanes[PRE_ROWS][NT][16], run[PRE_ROWS][NT][16];
    memset(lanes, 0, sizeof lanes);
    memset(run, 0, sizeof run);
    for (int64_t s0 = 0; s0 < n; s0 += SPLIT) {
        const int64_t s1 = s0 + SPLIT < n ? s0 + SPLIT : n;
        for (int t = 0; t < NT; t++)
            for (int64_t k = s0; k < s1; k += 16) {
                __m256 xo, xe;
                act16(a[t] + 2 * k, &xo, &xe);
                _mm256_storeu_ps(xs[t] + (k - s0), xo);
                _mm256_storeu_ps(xs[t] + (k - s0) + 8, xe);
            }
        for (int i = 0; i < nr; i++) {
            const uint8_t *q = w->q + (r0 + r + i) * w->q_rs;
            const int64_t G = grp ? QK_A_F8G_GROUP : s1 - s0;
            for (int64_t g0 = s0; g0 < s1; g0 += G) {
                const float *xp[NT];
                __m256 acc[NT][2];
                for (int t = 0; t < NT; t++) {
                    xp[t] = xs[t] + (g0 - s0);
                    acc[t][0] = grp ? _mm256_setzero_ps() : _mm256_loadu_ps(lanes[i][t]);
                    acc[t][1] = grp ? _mm256_setzero_ps() : _mm256_loadu_ps(lanes[i][t] + 8);
                }
                span_split(q, xp, g0, g0 + G, NT, acc);
                const float ws = grp ? qk_wq_scale(w, r0 + r + i, g0) : 0.0f;
                for (int t = 0; t < NT; t++) {
                    if (grp) {
                        run_add(run[i][t], acc[t], a[t], n, g0, ws);
                        continue;
                    }
                    _mm256_storeu_ps(lanes[i][t], acc[t][0]);
                    _mm256_storeu_ps(lanes[i][t] + 8, acc[t][1]);
                }
            }
        }
    }
    for (int i = 0; i < nr; i++)
        for (int t = 0; t < NT; t++) {
            const float *l = grp ? run[i][t] : lanes[i][t];
            out[(size_t)(t0 + t) * ldo + (size_t)(r + i)] =
                finish(w, y + (size_t)(t0 + t) * ys, r0 + r + i, _mm256_loadu_ps(l), _mm256_loadu_ps(l + 8));
        }
}

/* R rows from r (of the tile starting at r0) against the token row at row: out[r .. r + R). */
QK_TARGET_AVX2 __attribute__((always_inline)) static inline void
block(const qk_wq *w, int64_t r0, int r, const uint8_t *row, const int R, float *out)
{
    const int64_t n = w->cols;
    const bool grp = w->act == QK_A_F8G;
    const int64_t G = grp ? QK_A_F8G_GROUP : n;
    const uint8_t *q[4], *a = row + QK_A_I8_HEAD;
    for (int i = 0; i < R; i++)
        q[i] = w->q + (r0 + r + i) * w->q_rs;
    __m256 acc[4][2] = {{_mm256_setzero_ps(), _mm256_setzero_ps()}};
    float run[4][16] = {{0}}; /* FP8_BLOCK's running lanes, a row each */
    for (int64_t g0 = 0; g0 < n; g0 += G) {
        for (int i = 0; i < R; i++)
            acc[i][0] = acc[i][1] = _mm256_setzero_ps();
        span(q, a, g0, g0 + G, R, w->q_rs, acc);
        if (grp)
            for (int i = 0; i < R; i++)
                run_add(run[i], acc[i], a, n, g0, qk_wq_scale(w, r0 + r + i, g0));
    }
    for (int i = 0; i < R; i++)
        out[r + i] = grp ? finish(w, row, r0 + r + i, _mm256_loadu_ps(run[i]), _mm256_loadu_ps(run[i] + 8))
                         : finish(w, row, r0 + r + i, acc[i][0], acc[i][1]);
}

QK_TARGET_AVX2 bool qk_x86_avx2_f8_tile(const qk_wq *w, int64_t r0, int nr, const void *yv, size_t ys, int nt, float *out,
                                        size_t ldo)
{
    if (!((w->act == QK_A_F8B && qk_wq_f8b_takes(w)) || (w->act == QK_A_F8G && qk_wq_f8g_takes(w))))
        return false;
    const uint8_t *y = yv;
    if (nt == 1) {
        int r = 0;
        for (; r + 4 <= nr; r += 4)
            block(w, r0, r, y, 4, out);
        for (; r < nr; r++)
            block(w, r0, r, y, 1, out);
        return true;
    }
    int t = 0;
    for (; t + 4 <= nt; t += 4)
        for (int r = 0; r < nr; r += PRE_ROWS)
            tokens4(w, r0, r, nr - r < PRE_ROWS ? nr - r : PRE_ROWS, t, y, ys, out, ldo);
    for (int r = 0; r < nr; r++)
        for (int u = t; u < nt; u++)
            block(w, r0, r, y + (size_t)u * ys, 1, out + (size_t)u * ldo);
    return true;
}

#endif
