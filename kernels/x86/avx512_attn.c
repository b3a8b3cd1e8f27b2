/* avx512_attn.c - the attention inner loops of attn.h in 512-bit vectors:
 * avx2_attn.c's loops with sixteen lanes and larger register tiles.  Scores
 * and the softmax step put sixteen queries in the lanes (the queries are
 * padded to a multiple of 8, so a last group of eight runs in the low half),
 * the value step sixteen dimensions; every lane does the scalar reference's
 * operations (kernels/attn.c) in the same order, so the bits are equal
 * (test_attn). */
#include "kernels/x86/simd_common.h"

#ifdef QK_X86
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/attn.h"
#include "kernels/half.h"

#define T512 QK_TARGET_AVX512
#define INLINE T512 static inline __attribute__((always_inline))

/* Sixteen floats at p, or with half the first eight (the rest zero). */
INLINE __m512 ld16(const float *p, int half)
{
    return half ? _mm512_zextps256_ps512(_mm256_loadu_ps(p)) : _mm512_loadu_ps(p);
}

INLINE void st16(float *p, __m512 v, int half)
{
    if (half)
        _mm256_storeu_ps(p, _mm512_castps512_ps256(v));
    else
        _mm512_storeu_ps(p, v);
}

/* qk_attn_expf in sixteen lanes (attn.c says what each step is). */
INLINE __m512 v_expf(__m512 x)
{
    const __m512 r = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
    const __m512 n = _mm512_sub_ps(z, r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __m512i e = _mm512_slli_epi32(_mm512_castps_si512(z), 23);
    const __m512 k = _mm512_castsi512_ps(_mm512_add_epi32(e, _mm512_set1_epi32(0x3f800000)));
    const __m512 an = _mm512_abs_ps(n);
    const __mmask16 c = _mm512_cmp_ps_mask(an, _mm512_set1_ps(126.0f), _CMP_GT_OQ);
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                        _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
        u, _mm512_mul_ps(_mm512_set1_ps(0x1.ffffecp-1f), b));
    const __m512 fast = _mm512_fmadd_ps(j, k, k);
    if (!c)
        return fast;
    const __mmask16 le0 = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ);
    const __m512i g = _mm512_maskz_mov_epi32(le0, _mm512_set1_epi32((int)0x82000000u));
    const __m512 s1 = _mm512_castsi512_ps(_mm512_add_epi32(g, _mm512_set1_epi32(0x7f000000)));
    const __m512 s2 = _mm512_castsi512_ps(_mm512_sub_epi32(e, g));
    const __mmask16 d = _mm512_cmp_ps_mask(an, _mm512_set1_ps(192.0f), _CMP_GT_OQ);
    const __m512 mid = _mm512_mul_ps(_mm512_fmadd_ps(s2, j, s2), s1);
    return _mm512_mask_blend_ps(d, _mm512_mask_blend_ps(c, fast, mid), _mm512_mul_ps(s1, s1));
}

/* Four keys against IN vectors of sixteen queries (half: the last vector
 * has eight). */
INLINE void scores_tile(const float *qt, int nqp, const float *kf, int hd, __m512 sc, float *st, const int IN,
                        const int half)
{
    __m512 a[4][4];
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
        _Pragma("GCC unroll 4") for (int r = 0; r < IN; r++)
            a[k][r] = _mm512_setzero_ps();
    for (int d = 0; d < hd; d++) {
        __m512 q[4];
        _Pragma("GCC unroll 4") for (int r = 0; r < IN; r++)
            q[r] = ld16(qt + (size_t)d * nqp + 16 * r, half && r == IN - 1);
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
            const __m512 kb = _mm512_set1_ps(kf[(size_t)k * hd + d]);
            _Pragma("GCC unroll 4") for (int r = 0; r < IN; r++)
                a[k][r] = _mm512_fmadd_ps(kb, q[r], a[k][r]);
        }
    }
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
        _Pragma("GCC unroll 4") for (int r = 0; r < IN; r++)
            st16(st + (size_t)k * nqp + 16 * r, _mm512_mul_ps(a[k][r], sc), half && r == IN - 1);
}

/* Rows are computed in fours: rows nk .. nk rounded up to 4 (< QK_ATT_TILE)
 * are written from whatever kf holds there, and are unused. */
T512 static void scores(const float *qt, int nqp, const float *kf, int nk, int hd, float scale, float *st)
{
    const __m512 sc = _mm512_set1_ps(scale);
    for (int k0 = 0; k0 < nk; k0 += 4) {
        const float *kr = kf + (size_t)k0 * hd;
        float *sr = st + (size_t)k0 * nqp;
        int i = 0;
        for (; i + 64 <= nqp; i += 64)
            scores_tile(qt + i, nqp, kr, hd, sc, sr + i, 4, 0);
        for (; i + 32 <= nqp; i += 32)
            scores_tile(qt + i, nqp, kr, hd, sc, sr + i, 2, 0);
        for (; i + 16 <= nqp; i += 16)
            scores_tile(qt + i, nqp, kr, hd, sc, sr + i, 1, 0);
        if (i < nqp)
            scores_tile(qt + i, nqp, kr, hd, sc, sr + i, 1, 1);
    }
}

/* The softmax step for the queries i0 .. i0 + 15 (half: i0 .. i0 + 7). */
INLINE void softmax16(float *st, int nqp, int nk, int p0, const int *pos, float *M, float *S, float *ms,
                      int i0, const int half)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    /* key k is visible to lane l when p0 + k <= pos[l] */
    const __m512i pv = half ? _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(pos + i0)))
                            : _mm512_loadu_si512((const void *)(pos + i0));
    __m512 m = ninf;
    for (int k = 0; k < nk; k++) {
        const __mmask16 vis = _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(p0 + k), pv);
        m = _mm512_max_ps(_mm512_mask_blend_ps(vis, ld16(st + (size_t)k * nqp + i0, half), ninf), m);
    }
    float mv[16];
    _mm512_storeu_ps(mv, m);
    const int nl = half ? 8 : 16;
    __mmask16 live = 0;
    for (int l = 0; l < nl; l++) {
        const int i = i0 + l;
        ms[i] = 1.0f;
        if (mv[l] == -INFINITY)
            continue;
        live |= (__mmask16)(1u << l);
        const float mn = fmaxf(M[i], mv[l]);
        if (mn > M[i]) {
            ms[i] = expf(M[i] - mn);
            S[i] *= ms[i];
        }
        M[i] = mn;
    }
    const __m512 mn = ld16(M + i0, half);
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    for (int k0 = 0; k0 < nk; k0 += 8) {
        __m512 w[8];
        for (int l = 0; l < 8; l++) {
            const int k = k0 + l;
            w[l] = _mm512_setzero_ps();
            if (k >= nk)
                continue;
            float *x = st + (size_t)k * nqp + i0;
            const __mmask16 hid = _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(p0 + k), pv);
            const __m512 e = v_expf(_mm512_sub_ps(ld16(x, half), mn));
            w[l] = _mm512_maskz_mov_ps((__mmask16)(~hid & live), e);
            st16(x, w[l], half);
        }
        const __m512 t = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(w[0], w[4]), _mm512_add_ps(w[2], w[6])),
                                       _mm512_add_ps(_mm512_add_ps(w[1], w[5]), _mm512_add_ps(w[3], w[7])));
        lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(t)));
        hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(t, 1)));
    }
    double sum[16];
    _mm512_storeu_pd(sum, lo);
    _mm512_storeu_pd(sum + 8, hi);
    for (int l = 0; l < nl; l++)
        if (mv[l] != -INFINITY)
            S[i0 + l] = (float)((double)S[i0 + l] + sum[l]);
}

T512 static void softmax(float *st, int nqp, int nk, int p0, const int *pos, float *M, float *S, float *ms)
{
    int i0 = 0;
    for (; i0 + 16 <= nqp; i0 += 16)
        softmax16(st, nqp, nk, p0, pos, M, S, ms, i0, 0);
    if (i0 < nqp)
        softmax16(st, nqp, nk, p0, pos, M, S, ms, i0, 1);
}

/* RM queries times RN vectors of sixteen dimensions (half: the last has
 * eight), the accumulators held in registers across the tile's keys. */
INLINE void pv_tile(float *acc, int hdv, const float *st, int nqp, const float *vf, int nk, const int RM,
                    const int RN, const int half)
{
    __m512 a[6][4];
    _Pragma("GCC unroll 6") for (int i = 0; i < RM; i++)
        _Pragma("GCC unroll 4") for (int r = 0; r < RN; r++)
            a[i][r] = ld16(acc + (size_t)i * hdv + 16 * r, half && r == RN - 1);
    for (int k = 0; k < nk; k++) {
        __m512 b[4];
        _Pragma("GCC unroll 4") for (int r = 0; r < RN; r++)
            b[r] = ld16(vf + (size_t)k * hdv + 16 * r, half && r == RN - 1);
        _Pragma("GCC unroll 6") for (int i = 0; i < RM; i++) {
            const __m512 p = _mm512_set1_ps(st[(size_t)k * nqp + i]);
            _Pragma("GCC unroll 4") for (int r = 0; r < RN; r++)
                a[i][r] = _mm512_fmadd_ps(p, b[r], a[i][r]);
        }
    }
    _Pragma("GCC unroll 6") for (int i = 0; i < RM; i++)
        _Pragma("GCC unroll 4") for (int r = 0; r < RN; r++)
            st16(acc + (size_t)i * hdv + 16 * r, a[i][r], half && r == RN - 1);
}

#define PV_ROWS(RN, H)                                                 \
    switch (rm) {                                                      \
    case 6: pv_tile(ac, hdv, sw, nqp, vd, nk, 6, RN, H); break;        \
    case 5: pv_tile(ac, hdv, sw, nqp, vd, nk, 5, RN, H); break;        \
    case 4: pv_tile(ac, hdv, sw, nqp, vd, nk, 4, RN, H); break;        \
    case 3: pv_tile(ac, hdv, sw, nqp, vd, nk, 3, RN, H); break;        \
    case 2: pv_tile(ac, hdv, sw, nqp, vd, nk, 2, RN, H); break;        \
    default: pv_tile(ac, hdv, sw, nqp, vd, nk, 1, RN, H); break;       \
    }

T512 static void pv(float *acc, int nq, int hdv, const float *st, int nqp, const float *vf, int nk)
{
    for (int i0 = 0; i0 < nq; i0 += 6) {
        const int rm = nq - i0 < 6 ? nq - i0 : 6;
        const float *sw = st + i0;
        int d = 0;
        for (; d + 64 <= hdv; d += 64) {
            float *ac = acc + (size_t)i0 * hdv + d;
            const float *vd = vf + d;
            PV_ROWS(4, 0)
        }
        for (; d + 32 <= hdv; d += 32) {
            float *ac = acc + (size_t)i0 * hdv + d;
            const float *vd = vf + d;
            PV_ROWS(2, 0)
        }
        for (; d + 16 <= hdv; d += 16) {
            float *ac = acc + (size_t)i0 * hdv + d;
            const float *vd = vf + d;
            PV_ROWS(1, 0)
        }
        for (; d + 8 <= hdv; d += 8) {
            float *ac = acc + (size_t)i0 * hdv + d;
            const float *vd = vf + d;
            PV_ROWS(1, 1)
        }
        if (d < hdv)
            qk_attn_pv_cols(acc + (size_t)i0 * hdv, rm, hdv, d, sw, nqp, vf, nk);
    }
}

T512 static void f16_row(const uint16_t *h, float *f, int n)
{
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(f + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i))));
    for (; i < n; i++)
        f[i] = qk_f16_to_f32(h[i]);
}

/* ---- few queries: lanes (query i, key j) of four and four (attn.h) ---- */

/* Four rows of sixteen dimensions from d0 into k4's order: after the
 * transpose inside 128-bit lanes, u[m] lane L holds the four keys at
 * dimension d0 + 4L + m, which is k4's position d0 + 4m + L. */
INLINE void k4_block(const void *rows, int f16, size_t stride, int nr, int d0, float *dst)
{
    __m512 r[4];
    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
        if (j >= nr)
            r[j] = _mm512_setzero_ps();
        else if (f16)
            r[j] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)rows + (size_t)j * stride + d0)));
        else
            r[j] = _mm512_loadu_ps((const float *)rows + (size_t)j * stride + d0);
    }
    const __m512 t0 = _mm512_unpacklo_ps(r[0], r[1]), t1 = _mm512_unpackhi_ps(r[0], r[1]);
    const __m512 t2 = _mm512_unpacklo_ps(r[2], r[3]), t3 = _mm512_unpackhi_ps(r[2], r[3]);
    const __m512d a0 = _mm512_castps_pd(t0), a1 = _mm512_castps_pd(t1);
    const __m512d a2 = _mm512_castps_pd(t2), a3 = _mm512_castps_pd(t3);
    _mm512_storeu_ps(dst, _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2)));
    _mm512_storeu_ps(dst + 16, _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2)));
    _mm512_storeu_ps(dst + 32, _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3)));
    _mm512_storeu_ps(dst + 48, _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3)));
}

T512 static void k4_rows(const void *rows, int f16, size_t stride, int nk, int hd, float *k4)
{
#define BLOCK(g, nr, d0, dst) k4_block(g, f16, stride, nr, d0, dst)
    QK_ATT_K4_ROWS(rows, f16, stride, nk, hd, k4, BLOCK);
#undef BLOCK
}

/* G groups of four keys against the four queries of qr (qr[d*16 + 4i + j]
 * = query i at dimension d): G chains a lane, each over d in order. */
INLINE void scores4_tile(const float *qr, const float *k4, int hd, __m512 sc, float *st, int nqp, const int G)
{
    const __m512i tr = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    __m512 a[8];
    _Pragma("GCC unroll 8") for (int g = 0; g < G; g++)
        a[g] = _mm512_setzero_ps();
#define STEP(d, p)                                                                                          \
    {                                                                                                       \
        const __m512 q = _mm512_loadu_ps(qr + (size_t)(d) * 16);                                            \
        _Pragma("GCC unroll 8") for (int g = 0; g < G; g++)                                                 \
            a[g] = _mm512_fmadd_ps(_mm512_broadcast_f32x4(_mm_loadu_ps(k4 + ((size_t)g * hd + (p)) * 4)), q, a[g]); \
    }
    QK_ATT_K4_DIMS(hd, STEP);
#undef STEP
    /* lane 4i + j -> 4j + i: key j's four queries in 128-bit lane j */
    _Pragma("GCC unroll 8") for (int g = 0; g < G; g++) {
        const __m512 v = _mm512_permutexvar_ps(tr, _mm512_mul_ps(a[g], sc));
        _mm_storeu_ps(st + (size_t)(4 * g) * nqp, _mm512_castps512_ps128(v));
        _mm_storeu_ps(st + (size_t)(4 * g + 1) * nqp, _mm512_extractf32x4_ps(v, 1));
        _mm_storeu_ps(st + (size_t)(4 * g + 2) * nqp, _mm512_extractf32x4_ps(v, 2));
        _mm_storeu_ps(st + (size_t)(4 * g + 3) * nqp, _mm512_extractf32x4_ps(v, 3));
    }
}

T512 static void scores4(const float *qt, int nqp, int nq, const float *k4, int nk, int hd, float scale, float *st)
{
    const __m512 sc = _mm512_set1_ps(scale);
    const __m512i rep = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    float qr[QK_ATT_K4_MAXD * 16];
    const int ng = (nk + 3) / 4;
    for (int i0 = 0; i0 < nq; i0 += 4) {
        for (int d = 0; d < hd; d++)
            _mm512_storeu_ps(qr + (size_t)d * 16,
                             _mm512_permutexvar_ps(rep, _mm512_castps128_ps512(_mm_loadu_ps(qt + (size_t)d * nqp + i0))));
#define TILE(g, G) scores4_tile(qr, k4 + (size_t)(g) * 4 * hd, hd, sc, st + (size_t)(g) * 4 * nqp + i0, nqp, G)
        QK_ATT_K4_GROUPS(ng, TILE);
#undef TILE
    }
}

/* scale: the AVX2 loop (called once per query and tile at most, when its maximum moves) */
const qk_attn_kernels qk_x86_avx512_attn = {scores, softmax, pv, qk_x86_avx2_attn_scale, f16_row, k4_rows, scores4};

#endif
