/* avx2_attn.c - the attention inner loops of attn.h in AVX2 vectors.
 * Scores and the softmax step put eight queries in the eight lanes, the
 * value step eight dimensions; a block of few queries scores in lanes of
 * two queries by four keys (scores4); every lane does the scalar
 * reference's operations (kernels/attn.c) in the same order, so the bits
 * are equal. */
#include "kernels/x86/simd_common.h"

#ifdef QK_X86
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/attn.h"
#include "kernels/half.h"

#define INLINE QK_TARGET_AVX2 static inline __attribute__((always_inline))

/* qk_attn_expf in eight lanes (attn.c says what each step is). */
INLINE __m256 v_expf(__m256 x)
{
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
    const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_set1_epi32(0x3f800000)));
    const __m256 an = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 c = _mm256_cmp_ps(an, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)),
                        u,
                        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
        u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
    const __m256 fast = _mm256_fmadd_ps(j, k, k);
    if (!_mm256_movemask_ps(c))
        return fast;
    const __m256i g = _mm256_and_si256(
        _mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
        _mm256_set1_epi32((int)0x82000000u));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
    const __m256 d = _mm256_cmp_ps(an, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    const __m256 mid = _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1);
    return _mm256_blendv_ps(_mm256_blendv_ps(fast, mid, c), _mm256_mul_ps(s1, s1), d);
}

/* Four keys against IN vectors of eight queries. */
INLINE void scores_tile(const float *qt, int nqp, const float *kf, int hd, __m256 sc, float *st,
                        const int IN)
{
    __m256 a[4][2];
    _Pragma("GCC unroll 8")
    for (int k = 0; k < 4; k++)
        _Pragma("GCC unroll 8")
        for (int r = 0; r < IN; r++)
            a[k][r] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d++) {
        __m256 q[2];
        _Pragma("GCC unroll 8")
        for (int r = 0; r < IN; r++)
            q[r] = _mm256_loadu_ps(qt + (size_t)d * nqp + 8 * r);
        _Pragma("GCC unroll 8")
        for (int k = 0; k < 4; k++) {
            const __m256 kb = _mm256_broadcast_ss(kf + (size_t)k * hd + d);
            _Pragma("GCC unroll 8")
            for (int r = 0; r < IN; r++)
                a[k][r] = _mm256_fmadd_ps(kb, q[r], a[k][r]);
        }
    }
    _Pragma("GCC unroll 8")
    for (int k = 0; k < 4; k++)
        _Pragma("GCC unroll 8")
        for (int r = 0; r < IN; r++)
            _mm256_storeu_ps(st + (size_t)k * nqp + 8 * r, _mm256_mul_ps(a[k][r], sc));
}

/* Rows are computed in fours: rows nk .. nk rounded up to 4 (< QK_ATT_TILE)
 * are written from whatever kf holds there, and are unused. */
QK_TARGET_AVX2 static void scores(const float *qt, int nqp, const float *kf, int nk, int hd,
                                  float scale, float *st)
{
    const __m256 sc = _mm256_set1_ps(scale);
    for (int k0 = 0; k0 < nk; k0 += 4) {
        const float *kr = kf + (size_t)k0 * hd;
        float *sr = st + (size_t)k0 * nqp;
        int i = 0;
        for (; i + 16 <= nqp; i += 16)
            scores_tile(qt + i, nqp, kr, hd, sc, sr + i, 2);
        for (; i < nqp; i += 8)
            scores_tile(qt + i, nqp, kr, hd, sc, sr + i, 1);
    }
}

QK_TARGET_AVX2 static void softmax(float *st, int nqp, int nk, int p0, const int *pos, float *M,
                                   float *S, float *ms)
{
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    for (int i0 = 0; i0 < nqp; i0 += 8) {
        /* key k is visible to lane l when p0 + k <= pos[l] */
        const __m256i pv = _mm256_loadu_si256((const __m256i *)(pos + i0));
        __m256 m = ninf;
        for (int k = 0; k < nk; k++) {
            const __m256 vis = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(p0 + k), pv));
            const __m256 x = _mm256_blendv_ps(_mm256_loadu_ps(st + (size_t)k * nqp + i0), ninf, vis);
            m = _mm256_max_ps(x, m);
        }
        float mv[8], live[8];
        _mm256_storeu_ps(mv, m);
        for (int l = 0; l < 8; l++) {
            const int i = i0 + l;
            ms[i] = 1.0f;
            live[l] = 0.0f;
            if (mv[l] == -INFINITY)
                continue;
            memset(&live[l], 0xff, sizeof live[l]);
            const float mn = fmaxf(M[i], mv[l]);
            if (mn > M[i]) {
                ms[i] = expf(M[i] - mn);
                S[i] *= ms[i];
            }
            M[i] = mn;
        }
        const __m256 mn = _mm256_loadu_ps(M + i0), lv = _mm256_loadu_ps(live);
        __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
        for (int k0 = 0; k0 < nk; k0 += 8) {
            __m256 w[8];
            for (int l = 0; l < 8; l++) {
                const int k = k0 + l;
                w[l] = _mm256_setzero_ps();
                if (k >= nk)
                    continue;
                float *x = st + (size_t)k * nqp + i0;
                const __m256 hid = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(p0 + k), pv));
                const __m256 e = v_expf(_mm256_sub_ps(_mm256_loadu_ps(x), mn));
                w[l] = _mm256_and_ps(_mm256_andnot_ps(hid, lv), e);
                _mm256_storeu_ps(x, w[l]);
            }
            const __m256 t = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(w[0], w[4]), _mm256_add_ps(w[2], w[6])),
                                           _mm256_add_ps(_mm256_add_ps(w[1], w[5]), _mm256_add_ps(w[3], w[7])));
            lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(t)));
            hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(t, 1)));
        }
        double sum[8];
        _mm256_storeu_pd(sum, lo);
        _mm256_storeu_pd(sum + 4, hi);
        for (int l = 0; l < 8; l++)
            if (mv[l] != -INFINITY)
                S[i0 + l] = (float)((double)S[i0 + l] + sum[l]);
    }
}

/* RM queries times RN vectors of eight dimensions, the accumulators held
 * in registers across the tile's keys. */
INLINE void pv_tile(float *acc, int hdv, const float *st, int nqp, const float *vf, int nk,
                    const int RM, const int RN)
{
    __m256 a[6][2];
    _Pragma("GCC unroll 8")
    for (int i = 0; i < RM; i++)
        _Pragma("GCC unroll 8")
        for (int r = 0; r < RN; r++)
            a[i][r] = _mm256_loadu_ps(acc + (size_t)i * hdv + 8 * r);
    for (int k = 0; k < nk; k++) {
        __m256 b[2];
        _Pragma("GCC unroll 8")
        for (int r = 0; r < RN; r++)
            b[r] = _mm256_loadu_ps(vf + (size_t)k * hdv + 8 * r);
        _Pragma("GCC unroll 8")
        for (int i = 0; i < RM; i++) {
            const __m256 p = _mm256_broadcast_ss(st + (size_t)k * nqp + i);
            _Pragma("GCC unroll 8")
            for (int r = 0; r < RN; r++)
                a[i][r] = _mm256_fmadd_ps(p, b[r], a[i][r]);
        }
    }
    _Pragma("GCC unroll 8")
    for (int i = 0; i < RM; i++)
        _Pragma("GCC unroll 8")
        for (int r = 0; r < RN; r++)
            _mm256_storeu_ps(acc + (size_t)i * hdv + 8 * r, a[i][r]);
}

#define PV_ROWS(RN)                                                                        \
    switch (rm) {                                                                          \
    case 6: pv_tile(ac, hdv, sw, nqp, vd, nk, 6, RN); break;                               \
    case 5: pv_tile(ac, hdv, sw, nqp, vd, nk, 5, RN); break;                               \
    case 4: pv_tile(ac, hdv, sw, nqp, vd, nk, 4, RN); break;                               \
    case 3: pv_tile(ac, hdv, sw, nqp, vd, nk, 3, RN); break;                               \
    case 2: pv_tile(ac, hdv, sw, nqp, vd, nk, 2, RN); break;                               \
    default: pv_tile(ac, hdv, sw, nqp, vd, nk, 1, RN); break;                              \
    }

QK_TARGET_AVX2 static void pv(float *acc, int nq, int hdv, const float *st, int nqp,
                              const float *vf, int nk)
{
    for (int i0 = 0; i0 < nq; i0 += 6) {
        const int rm = nq - i0 < 6 ? nq - i0 : 6;
        const float *sw = st + i0;
        int d = 0;
        for (; d + 16 <= hdv; d += 16) {
            float *ac = acc + (size_t)i0 * hdv + d;
            const float *vd = vf + d;
            PV_ROWS(2)
        }
        for (; d + 8 <= hdv; d += 8) {
            float *ac = acc + (size_t)i0 * hdv + d;
            const float *vd = vf + d;
            PV_ROWS(1)
        }
        if (d < hdv)
            qk_attn_pv_cols(acc + (size_t)i0 * hdv, rm, hdv, d, sw, nqp, vf, nk);
    }
}

QK_TARGET_AVX2 void qk_x86_avx2_attn_scale(float *acc, float s, int n)
{
    const __m256 sv = _mm256_set1_ps(s);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_mul_ps(_mm256_loadu_ps(acc + i), sv));
    for (; i < n; i++)
        acc[i] *= s;
}

QK_TARGET_AVX2 static void f16_row(const uint16_t *h, float *f, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++)
        f[i] = qk_f16_to_f32(h[i]);
}

/* ---- few queries: lanes (query i, key j), two queries by four keys (attn.h) ---- */

/* Four rows of eight dimensions from d0 (the first or second half of a
 * block of sixteen: L0 = 0 or 2) into k4's order: after the transpose inside
 * 128-bit lanes, u[m] lane L holds the four keys at dimension 4 (L0 + L) + m,
 * k4's position 4m + L0 + L, so u[m] is the eight floats at 16m + 4 L0. */
INLINE void k4_half(const void *rows, int f16, size_t stride, int nr, int d0, float *blk, int L0)
{
    __m256 r[4];
    for (int j = 0; j < 4; j++) {
        if (j >= nr)
            r[j] = _mm256_setzero_ps();
        else if (f16)
            r[j] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)rows + (size_t)j * stride + d0)));
        else
            r[j] = _mm256_loadu_ps((const float *)rows + (size_t)j * stride + d0);
    }
    const __m256d a0 = _mm256_castps_pd(_mm256_unpacklo_ps(r[0], r[1])), a1 = _mm256_castps_pd(_mm256_unpackhi_ps(r[0], r[1]));
    const __m256d a2 = _mm256_castps_pd(_mm256_unpacklo_ps(r[2], r[3])), a3 = _mm256_castps_pd(_mm256_unpackhi_ps(r[2], r[3]));
    _mm256_storeu_ps(blk + 4 * L0, _mm256_castpd_ps(_mm256_unpacklo_pd(a0, a2)));
    _mm256_storeu_ps(blk + 16 + 4 * L0, _mm256_castpd_ps(_mm256_unpackhi_pd(a0, a2)));
    _mm256_storeu_ps(blk + 32 + 4 * L0, _mm256_castpd_ps(_mm256_unpacklo_pd(a1, a3)));
    _mm256_storeu_ps(blk + 48 + 4 * L0, _mm256_castpd_ps(_mm256_unpackhi_pd(a1, a3)));
}

QK_TARGET_AVX2 static void k4_rows(const void *rows, int f16, size_t stride, int nk, int hd, float *k4)
{
#define BLOCK(g, nr, d0, dst) k4_half(g, f16, stride, nr, d0, dst, 0), k4_half(g, f16, stride, nr, (d0) + 8, dst, 2)
    QK_ATT_K4_ROWS(rows, f16, stride, nk, hd, k4, BLOCK);
#undef BLOCK
}

/* G groups of four keys against the two queries of qr (qr[d*8 + 4i + j] =
 * query i at dimension d): G chains a lane, each over d in order. */
INLINE void scores4_tile(const float *qr, const float *k4, int hd, __m256 sc, float *st, int nqp, const int G)
{
    __m256 a[8];
    _Pragma("GCC unroll 8") for (int g = 0; g < G; g++)
        a[g] = _mm256_setzero_ps();
#define STEP(d, p)                                                                                          \
    {                                                                                                       \
        const __m256 q = _mm256_loadu_ps(qr + (size_t)(d) * 8);                                             \
        _Pragma("GCC unroll 8") for (int g = 0; g < G; g++)                                                 \
            a[g] = _mm256_fmadd_ps(_mm256_broadcast_ps((const __m128 *)(k4 + ((size_t)g * hd + (p)) * 4)), q, a[g]); \
    }
    QK_ATT_K4_DIMS(hd, STEP);
#undef STEP
    /* lanes 4i + j: key j's two queries to row 4g + j */
    _Pragma("GCC unroll 8") for (int g = 0; g < G; g++) {
        const __m256 v = _mm256_mul_ps(a[g], sc);
        const __m128 q0 = _mm256_castps256_ps128(v), q1 = _mm256_extractf128_ps(v, 1);
        const __m128 lo = _mm_unpacklo_ps(q0, q1), hi = _mm_unpackhi_ps(q0, q1);
        _mm_storel_pi((__m64 *)(st + (size_t)(4 * g) * nqp), lo);
        _mm_storeh_pi((__m64 *)(st + (size_t)(4 * g + 1) * nqp), lo);
        _mm_storel_pi((__m64 *)(st + (size_t)(4 * g + 2) * nqp), hi);
        _mm_storeh_pi((__m64 *)(st + (size_t)(4 * g + 3) * nqp), hi);
    }
}

QK_TARGET_AVX2 static void scores4(const float *qt, int nqp, int nq, const float *k4, int nk, int hd, float scale,
                                   float *st)
{
    const __m256 sc = _mm256_set1_ps(scale);
    float qr[QK_ATT_K4_MAXD * 8];
    const int ng = (nk + 3) / 4;
    for (int i0 = 0; i0 < nq; i0 += 2) {
        /* one 256-bit store a dimension (the loads below read whole vectors) */
        const __m256i rep = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
        for (int d = 0; d < hd; d++) {
            const __m128 two = _mm_castpd_ps(_mm_load_sd((const double *)(qt + (size_t)d * nqp + i0)));
            _mm256_storeu_ps(qr + (size_t)d * 8, _mm256_permutevar8x32_ps(_mm256_castps128_ps256(two), rep));
        }
#define TILE(g, G) scores4_tile(qr, k4 + (size_t)(g) * 4 * hd, hd, sc, st + (size_t)(g) * 4 * nqp + i0, nqp, G)
        QK_ATT_K4_GROUPS(ng, TILE);
#undef TILE
    }
}

const qk_attn_kernels qk_x86_avx2_attn = {scores, softmax, pv, qk_x86_avx2_attn_scale, f16_row, k4_rows, scores4};

#endif
