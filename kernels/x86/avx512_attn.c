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

/* scale: the AVX2 loop (called once per query and tile at most, when its maximum moves) */
const qk_attn_kernels qk_x86_avx512_attn = {scores, softmax, pv, qk_x86_avx2_attn_scale, f16_row};

#endif
