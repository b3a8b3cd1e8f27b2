/* avx2_wq_i8.c - AVX2 integer products of compressed-tensors INT8 W8A8
 * (kernels/wq.h: W_INT8 weights x QK_A_I8 activations), bitwise equal to
 * the scalar reference qk_wq_tile_i8 (kernels/wq_int.c): the exact int32
 * sums (vpmaddubsw on the weight's magnitude and the activation's codes
 * with the weight's sign, vpmaddwd), then the reference's float steps on
 * the same integers.
 *
 * THE PACKING (wq_pack at load; lib/engine/model.c then releases the stored
 * rows): where the activations are symmetric and dynamic (|a| <= 127) and a
 * row has one scale, groups of 8 rows, per 4 columns one 32-byte vector
 * whose bytes 4l .. 4l+3 are row l's four codes as stored; a 64-byte header
 * first.  A product then reads one stream, as the packed Q8_0 kernels do,
 * and each broadcast of a token's four codes serves the 8 rows in the
 * lanes, with no horizontal sum.  The rows as stored are 4 to 12 streams
 * of 1-3 KB a thread (4 rows a pass), which the hardware prefetchers
 * restart at every page: bench250m W8A8 tg32 on Zen 1 (2 threads) ran at
 * 63 % of the bandwidth roofline on them, Q8_0's packed rows at 97 %.
 * Other shapes (groups along a row, static or asymmetric activations, zero
 * points) take the rows as stored. */
#include "kernels/x86/simd_common.h"

#include <string.h>

#include "kernels/quant_common.h"
#include "kernels/wq_impl.h"
#include "kernels/x86/avx2_wq.h"

#ifdef QK_X86

/* Exact sums over [k0, k0 + m) (m a multiple of 32) of one int8 weight row
 * against one token's int8 codes: dot and, when wsum, the weights' sum. */
QK_TARGET_AVX2 static inline void i8_sums(const int8_t *wr, const int8_t *a, int64_t k0, int64_t m, bool wide,
                                          int64_t *dot, int64_t *wsum)
{
    __m256i acc = _mm256_setzero_si256(), ws = _mm256_setzero_si256();
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t k = k0; k < k0 + m; k += 32) {
        const __m256i wv = _mm256_loadu_si256((const __m256i *)(wr + k));
        const __m256i av = _mm256_loadu_si256((const __m256i *)(a + k));
        if (!wide) { /* |a| <= 127: |w| (up to 128, unsigned) times a with w's sign */
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv),
                                                                                 _mm256_sign_epi8(av, wv)), ones));
            continue;
        }
        /* codes that reach -128 on both sides: 16-bit products */
        const __m256i w0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(wv));
        const __m256i w1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(wv, 1));
        const __m256i a0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(av));
        const __m256i a1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(av, 1));
        acc = _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(w0, a0), _mm256_madd_epi16(w1, a1)));
        ws = _mm256_add_epi32(ws, _mm256_add_epi32(_mm256_madd_epi16(w0, ones), _mm256_madd_epi16(w1, ones)));
    }
    *dot = qk_hsum_epi32(acc);
    *wsum = wide ? qk_hsum_epi32(ws) : 0;
}

/* NR rows x NT tokens (NR * NT <= 8) of one-group (per-channel or
 * per-tensor) int8 rows against symmetric dynamic codes (|a| <= 127): |w|
 * unsigned times a with w's sign, pair sums in int16 (at most 2 * 128 *
 * 127), then int32 lanes; named accumulators (an array of them is stored
 * back every step). */
#define I8_ACC(r, t, A)                                                                                    \
    if (r < NR && t < NT)                                                                                  \
        A = _mm256_add_epi32(A, _mm256_madd_epi16(_mm256_maddubs_epi16(mag[r], _mm256_sign_epi8(av[t], wv[r])), ones))
QK_TARGET_AVX2 __attribute__((always_inline)) static inline void
i8_rows(const int8_t *const wr[4], const int8_t *const a[4], int64_t n, const int NR, const int NT, int64_t rstep,
        int64_t out[4][4])
{
    const __m256i ones = _mm256_set1_epi16(1), zero = _mm256_setzero_si256();
    __m256i c0 = zero, c1 = zero, c2 = zero, c3 = zero, c4 = zero, c5 = zero, c6 = zero, c7 = zero;
    for (int64_t k = 0; k < n; k += 32) {
        if (rstep && k % 64 == 0) /* the rows as stored, rstep bytes apart (0: no prefetch) */
            qk_wq_prefetch_next_rows((const uint8_t *)wr[0], rstep, NR, k);
        __m256i av[4], wv[4], mag[4];
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)
            av[t] = _mm256_loadu_si256((const __m256i *)(a[t] + k));
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            wv[r] = _mm256_loadu_si256((const __m256i *)(wr[r] + k));
            mag[r] = _mm256_sign_epi8(wv[r], wv[r]);
        }
        if (NT <= 2) { /* c(2r + t) */
            I8_ACC(0, 0, c0); I8_ACC(0, 1, c1); I8_ACC(1, 0, c2); I8_ACC(1, 1, c3);
            I8_ACC(2, 0, c4); I8_ACC(2, 1, c5); I8_ACC(3, 0, c6); I8_ACC(3, 1, c7);
        } else { /* c(4r + t) */
            I8_ACC(0, 0, c0); I8_ACC(0, 1, c1); I8_ACC(0, 2, c2); I8_ACC(0, 3, c3);
            I8_ACC(1, 0, c4); I8_ACC(1, 1, c5); I8_ACC(1, 2, c6); I8_ACC(1, 3, c7);
        }
    }
    const __m256i c[8] = {c0, c1, c2, c3, c4, c5, c6, c7};
    const int stride = NT <= 2 ? 2 : 4;
    for (int r = 0; r < NR; r++)
        for (int t = 0; t < NT; t++)
            out[r][t] = qk_hsum_epi32(c[stride * r + t]);
}
#undef I8_ACC

/* W_INT8 (symmetric) x QK_A_I8 on the rows as stored, the reference's steps (wq_int.c). */
QK_TARGET_AVX2 static void rows_tile(const qk_wq *w, int64_t r0, int nr, const uint8_t *y, size_t ys, int nt,
                                      float *out, size_t ldo)
{
    const int64_t n = w->cols, g = w->s.cdiv < n ? w->s.cdiv : n;
    /* only the dynamic symmetric codes stay within [-127, 127] */
    const bool wide = w->a_asym || w->a_static;
    if (!wide && g == n) { /* one group a row: 2 rows x 4 tokens of int32 sums in registers */
        float ws[64];
        for (int r = 0; r < nr && r < 64; r++)
            ws[r] = qk_wq_scale(w, r0 + r, 0);
        for (int t0 = 0; t0 < nt; t0 += 4) {
            const int mt = nt - t0 < 4 ? nt - t0 : 4;
            const int8_t *a[4];
            qk_a_i8_head h[4];
            for (int t = 0; t < mt; t++) {
                memcpy(&h[t], y + (size_t)(t0 + t) * ys, sizeof h[t]);
                a[t] = (const int8_t *)(y + (size_t)(t0 + t) * ys + QK_A_I8_HEAD);
            }
            const int rs = mt == 1 ? 4 : 2; /* one token: 4 rows x 1 */
            for (int r = 0; r < nr; r += rs) {
                const int mr = nr - r < rs ? nr - r : rs;
                const int8_t *wr[4];
                for (int q = 0; q < mr; q++)
                    wr[q] = (const int8_t *)(w->q + (r0 + r + q) * w->q_rs);
                int64_t dot[4][4];
                if (mr == 2 && mt == 4)
                    i8_rows(wr, a, n, 2, 4, 0, dot);
                else if (mr == 4 && mt == 1)
                    i8_rows(wr, a, n, 4, 1, w->q_rs, dot);
                else
                    for (int q = 0; q < mr; q++)
                        for (int t = 0; t < mt; t++) {
                            int64_t d1[4][4];
                            const int8_t *w1[4] = {wr[q]}, *a1[4] = {a[t]};
                            i8_rows(w1, a1, n, 1, 1, 0, d1);
                            dot[q][t] = d1[0][0];
                        }
                for (int q = 0; q < mr; q++) {
                    const float s = r + q < 64 ? ws[r + q] : qk_wq_scale(w, r0 + r + q, 0);
                    for (int t = 0; t < mt; t++)
                        out[(size_t)(t0 + t) * ldo + (size_t)(r + q)] = h[t].scale * (0.0f + (float)dot[q][t] * s);
                }
            }
        }
        return;
    }
    for (int t = 0; t < nt; t++) {
        const uint8_t *row = y + (size_t)t * ys;
        qk_a_i8_head h;
        memcpy(&h, row, sizeof h);
        const int8_t *a = (const int8_t *)(row + QK_A_I8_HEAD);
        for (int r = 0; r < nr; r++) {
            const int8_t *wr = (const int8_t *)(w->q + (r0 + r) * w->q_rs);
            float sum = 0.0f;
            for (int64_t k0 = 0; k0 < n; k0 += g) {
                int64_t dot, ws;
                i8_sums(wr, a, k0, g, wide, &dot, &ws);
                sum = sum + (float)(dot - (int64_t)h.zero * ws) * qk_wq_scale(w, r0 + r, k0);
            }
            out[(size_t)t * ldo + (size_t)r] = h.scale * sum;
        }
    }
}

/* ---- the packing ------------------------------------------------------------ */

#define P8_MAGIC 0x38415751u /* "QWA8" (avx512_wq_i8.c's 16-row packing is "QWI8") */
#define P8_HEAD 64

/* Symmetric dynamic activations (|a| <= 127: the magnitude trick), one scale
 * a row, whole groups of 8 rows, and exact int32 sums (cols / 4 steps of at
 * most 2 * 128 * 127 per lane). */
static bool p8_takes(const qk_wq *w)
{
    return w->type == QK_W_INT8 && w->act == QK_A_I8 && !w->z.p && !w->gidx && w->s.p && w->s.cdiv >= w->cols &&
           !w->a_asym && !w->a_static && w->rows > 0 && w->rows % 8 == 0 && w->cols > 0 && w->cols % 4 == 0 &&
           w->cols < (1 << 16);
}

size_t qk_x86_avx2_i8_pack(const qk_wq *w, uint8_t *dst, int64_t g0, int64_t g1)
{
    if (!p8_takes(w))
        return 0;
    const size_t grp = (size_t)w->cols * 8;
    if (!dst)
        return P8_HEAD + grp * (size_t)(w->rows / 8);
    if (g0 == 0)
        qk_wq_pack_head_put(dst, P8_HEAD, P8_MAGIC, 0, w);
    for (int64_t g = g0; g < g1; g++)
        for (int l = 0; l < 8; l++) {
            const uint8_t *q = w->q + (g * 8 + l) * w->q_rs;
            uint8_t *o = dst + P8_HEAD + (size_t)g * grp + 4 * (size_t)l;
            for (int64_t k = 0; k < w->cols; k += 4)
                memcpy(o + (size_t)k * 8, q + k, 4);
        }
    return P8_HEAD + grp * (size_t)(w->rows / 8);
}

/* The exact dots of one packed group (8 rows in the lanes) and NT tokens'
 * codes a[t], n columns; pf: bytes ahead to prefetch (one token: the
 * stream), 0 for none. */
QK_TARGET_AVX2 __attribute__((always_inline)) static inline void
p8_dots(const uint8_t *gp, const int8_t *const a[4], int64_t n, const int NT, const int pf, __m256i d[4])
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i s[4];
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)
        s[t] = _mm256_setzero_si256();
    for (int64_t k = 0; k < n; k += 4, gp += 32) {
        if (pf && k % 8 == 0)
            __builtin_prefetch(gp + QK_PREFETCH_AHEAD, 0, 2);
        const __m256i w = _mm256_loadu_si256((const __m256i *)gp), mag = _mm256_sign_epi8(w, w);
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            const __m256i av = _mm256_set1_epi32((int)qk_ld_u32((const uint8_t *)a[t] + k));
            s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(_mm256_maddubs_epi16(mag, _mm256_sign_epi8(av, w)), ones));
        }
    }
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)
        d[t] = s[t];
}

/* Rows [r0, r0 + nr) (any, the groups they touch computed whole) against nt
 * tokens on the packing at pk: out = as * (0 + (float)dot * ws), lane by lane. */
QK_TARGET_AVX2 static void packed_tile(const qk_wq *w, const uint8_t *pk, int64_t r0, int nr, const uint8_t *y,
                                       size_t ys, int nt, float *out, size_t ldo)
{
    const int64_t n = w->cols, g0 = r0 / 8, g1 = (r0 + nr + 7) / 8;
    const size_t grp = (size_t)n * 8;
    for (int64_t g = g0; g < g1; g++) {
        _Alignas(32) float sc[8];
        for (int l = 0; l < 8; l++)
            sc[l] = qk_wq_val_inline(w->s.p, w->s.type, (g * 8 + l) / w->s.rdiv * w->s.rs);
        const __m256 ws = _mm256_load_ps(sc);
        const int lo = g * 8 < r0 ? (int)(r0 - g * 8) : 0, hi = g * 8 + 8 > r0 + nr ? (int)(r0 + nr - g * 8) : 8;
        const uint8_t *gp = pk + P8_HEAD + (size_t)g * grp;
        for (int t0 = 0; t0 < nt; t0 += 4) {
            const int mt = nt - t0 < 4 ? nt - t0 : 4;
            const int8_t *a[4];
            float as[4];
            for (int t = 0; t < mt; t++) {
                const uint8_t *row = y + (size_t)(t0 + t) * ys;
                qk_a_i8_head h;
                memcpy(&h, row, sizeof h);
                as[t] = h.scale;
                a[t] = (const int8_t *)(row + QK_A_I8_HEAD);
            }
            __m256i d[4];
            switch (mt) {
            case 1: p8_dots(gp, a, n, 1, 1, d); break;
            case 2: p8_dots(gp, a, n, 2, 0, d); break;
            case 3: p8_dots(gp, a, n, 3, 0, d); break;
            default: p8_dots(gp, a, n, 4, 0, d); break;
            }
            for (int t = 0; t < mt; t++) {
                const __m256 v = _mm256_mul_ps(_mm256_set1_ps(as[t]), _mm256_add_ps(_mm256_setzero_ps(),
                                                                                    _mm256_mul_ps(_mm256_cvtepi32_ps(d[t]), ws)));
                float *o = out + (size_t)(t0 + t) * ldo + (g * 8 - r0);
                if (lo == 0 && hi == 8) {
                    _mm256_storeu_ps(o, v);
                    continue;
                }
                _Alignas(32) float tmp[8];
                _mm256_store_ps(tmp, v);
                for (int l = lo; l < hi; l++)
                    o[l] = tmp[l];
            }
        }
    }
}

bool qk_x86_avx2_i8_tile(const qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt, float *out,
                         size_t ldo)
{
    qk_wq_pack_head h;
    if (p8_takes(w) && qk_wq_packed_as(w, P8_MAGIC, &h)) {
        packed_tile(w, w->packed, r0, nr, y, ys, nt, out, ldo);
        return true;
    }
    if (w->type != QK_W_INT8 || w->z.p || w->s.cdiv % 32 || w->cols % 32 || w->gidx)
        return false;
    rows_tile(w, r0, nr, y, ys, nt, out, ldo);
    return true;
}
#endif
