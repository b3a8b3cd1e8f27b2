/* avx2_search.c - the encoders' scale searches, eight groups at a time.
 *
 * ggml's searches (quant_common.c) run one group of n values through a
 * sequence of candidate scales; each step depends on the previous one (the
 * best so far, and in make_qkx2_quants the minimum), so the candidates do
 * not vectorise without changing the result.  The groups of a block do not
 * depend on each other: here lane g of every vector follows group g through
 * exactly the scalar sequence of float operations (same operands, same
 * order, no FMA, comparisons that treat NaN as C does), so each lane gives
 * the bits the scalar search gives.  tests/test_simd.c checks it with memcmp. */
#include "kernels/x86/x86.h"

#ifdef QK_X86
#include <immintrin.h>
#include <string.h>

#include "kernels/quant_common.h"

/* ggml's nearest_int on 8 lanes: the same add-1.5*2^23-and-read-bits trick. */
QK_TARGET_AVX2 static inline __m256i nearest8(__m256 v)
{
    const __m256i b = _mm256_castps_si256(_mm256_add_ps(v, _mm256_set1_ps(12582912.f)));
    return _mm256_sub_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x007fffff)),
                            _mm256_set1_epi32(0x00400000));
}

QK_TARGET_AVX2 static inline __m256i clamp8(__m256i v, int lo, int hi)
{
    return _mm256_min_epi32(_mm256_max_epi32(v, _mm256_set1_epi32(lo)), _mm256_set1_epi32(hi));
}

/* Lane g of row i: element i of group g (groups of n, contiguous). */
QK_TARGET_AVX2 static void transpose8(int n, const float *x, float (*t)[8])
{
    for (int g = 0; g < 8; g++)
        for (int i = 0; i < n; i++)
            t[i][g] = x[g * n + i];
}

QK_TARGET_AVX2 void qk_x86_avx2_make_qx_quants_x8(int n, int nmax, const float *x, int8_t *L,
                                                  const float *qw, float *scales)
{
    float xt[QK_SEARCH_MAX_N][8], wt[QK_SEARCH_MAX_N][8];
    transpose8(n, x, xt);
    if (qw)
        transpose8(n, qw, wt);
    __m256 w[QK_SEARCH_MAX_N], xv[QK_SEARCH_MAX_N], wx[QK_SEARCH_MAX_N];
    /* absmax_index: the first largest |x| */
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 amax = _mm256_setzero_ps(), max = _mm256_setzero_ps();
    for (int i = 0; i < n; i++) {
        xv[i] = _mm256_loadu_ps(xt[i]);
        w[i] = qw ? _mm256_loadu_ps(wt[i]) : _mm256_mul_ps(xv[i], xv[i]);
        wx[i] = _mm256_mul_ps(w[i], xv[i]);
        const __m256 ax = _mm256_andnot_ps(sign, xv[i]);
        const __m256 gt = _mm256_cmp_ps(ax, amax, _CMP_GT_OQ);
        amax = _mm256_blendv_ps(amax, ax, gt);
        max = _mm256_blendv_ps(max, xv[i], gt);
    }
    const __m256 zero_group = _mm256_cmp_ps(amax, _mm256_set1_ps(QK_GROUP_MAX_EPS), _CMP_LT_OQ);
    __m256 scale = _mm256_setzero_ps(), best = _mm256_setzero_ps(), best_iscale = _mm256_setzero_ps();
    for (int is = 0; is <= 18; is++) {
        /* is 0 is ggml's first pass (-nmax / max); then -9..9 without 0 */
        const int k = is == 0 ? 0 : is <= 9 ? is - 10 : is - 9;
        const __m256 iscale = _mm256_div_ps(_mm256_set1_ps(-(nmax + 0.1f * k)), max);
        __m256 sumlx = _mm256_setzero_ps(), suml2 = _mm256_setzero_ps();
        for (int i = 0; i < n; i++) {
            const __m256i l = clamp8(nearest8(_mm256_mul_ps(iscale, xv[i])), -nmax, nmax - 1);
            const __m256 lf = _mm256_cvtepi32_ps(l);
            sumlx = _mm256_add_ps(sumlx, _mm256_mul_ps(wx[i], lf));
            suml2 = _mm256_add_ps(suml2, _mm256_mul_ps(_mm256_mul_ps(w[i], lf), lf));
        }
        if (is == 0) {
            /* scale = suml2 ? sumlx / suml2 : 0 (NaN counts as true) */
            const __m256 nz = _mm256_cmp_ps(suml2, _mm256_setzero_ps(), _CMP_NEQ_UQ);
            scale = _mm256_and_ps(nz, _mm256_div_ps(sumlx, suml2));
            best = _mm256_mul_ps(scale, sumlx);
            best_iscale = iscale;
            continue;
        }
        const __m256 better = _mm256_and_ps(
            _mm256_cmp_ps(suml2, _mm256_setzero_ps(), _CMP_GT_OQ),
            _mm256_cmp_ps(_mm256_mul_ps(sumlx, sumlx), _mm256_mul_ps(best, suml2), _CMP_GT_OQ));
        const __m256 s = _mm256_div_ps(sumlx, suml2);
        scale = _mm256_blendv_ps(scale, s, better);
        best = _mm256_blendv_ps(best, _mm256_mul_ps(s, sumlx), better);
        best_iscale = _mm256_blendv_ps(best_iscale, iscale, better);
    }
    scale = _mm256_andnot_ps(zero_group, scale);
    _mm256_storeu_ps(scales, scale);
    int32_t lt[QK_SEARCH_MAX_N][8];
    for (int i = 0; i < n; i++) {
        __m256i l = clamp8(nearest8(_mm256_mul_ps(best_iscale, xv[i])), -nmax, nmax - 1);
        l = _mm256_add_epi32(l, _mm256_set1_epi32(nmax));
        l = _mm256_andnot_si256(_mm256_castps_si256(zero_group), l);
        _mm256_storeu_si256((__m256i *)lt[i], l);
    }
    for (int g = 0; g < 8; g++)
        for (int i = 0; i < n; i++)
            L[g * n + i] = (int8_t)lt[i][g];
}

#endif

/* qkx_error on 8 lanes: sum over i of w * (scale*L + min - x)^2 (or |.|). */
QK_TARGET_AVX2 static inline __m256 qkx_error8(int n, const __m256 *xv, const __m256 *wv,
                                               const __m256i *L, __m256 scale, __m256 min,
                                               bool use_mad)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 err = _mm256_setzero_ps();
    for (int i = 0; i < n; i++) {
        __m256 diff = _mm256_sub_ps(
            _mm256_add_ps(_mm256_mul_ps(scale, _mm256_cvtepi32_ps(L[i])), min), xv[i]);
        diff = use_mad ? _mm256_andnot_ps(sign, diff) : _mm256_mul_ps(diff, diff);
        err = _mm256_add_ps(err, _mm256_mul_ps(wv[i], diff));
    }
    return err;
}

QK_TARGET_AVX2 void qk_x86_avx2_make_qkx_quants_x8(int n, int nmax, const float *x,
                                                   const float *weights, uint8_t *L, float *scales,
                                                   float *the_mins, float rmin, float rdelta,
                                                   int nstep, bool use_mad)
{
    float xt[QK_SEARCH_MAX_N][8], wt[QK_SEARCH_MAX_N][8];
    transpose8(n, x, xt);
    transpose8(n, weights, wt);
    __m256 xv[QK_SEARCH_MAX_N] = {0}, wv[QK_SEARCH_MAX_N] = {0}; /* n >= 1 */
    __m256i Lb[QK_SEARCH_MAX_N], La[QK_SEARCH_MAX_N];
    for (int i = 0; i < n; i++) {
        xv[i] = _mm256_loadu_ps(xt[i]);
        wv[i] = _mm256_loadu_ps(wt[i]);
    }
    __m256 min = xv[0], max = xv[0], sum_w = wv[0];
    __m256 sum_x = _mm256_mul_ps(sum_w, xv[0]);
    for (int i = 1; i < n; i++) {
        min = _mm256_blendv_ps(min, xv[i], _mm256_cmp_ps(xv[i], min, _CMP_LT_OQ));
        max = _mm256_blendv_ps(max, xv[i], _mm256_cmp_ps(xv[i], max, _CMP_GT_OQ));
        sum_w = _mm256_add_ps(sum_w, wv[i]);
        sum_x = _mm256_add_ps(sum_x, _mm256_mul_ps(wv[i], xv[i]));
    }
    const __m256 zero = _mm256_setzero_ps();
    min = _mm256_blendv_ps(min, zero, _mm256_cmp_ps(min, zero, _CMP_GT_OQ));
    /* lanes with max == min are finished: levels 0, scale 0, the_min -min */
    const __m256 flat = _mm256_cmp_ps(max, min, _CMP_EQ_OQ);
    const __m256 flat_min = min;
    __m256 iscale = _mm256_div_ps(_mm256_set1_ps((float)nmax), _mm256_sub_ps(max, min));
    __m256 scale = _mm256_div_ps(_mm256_set1_ps(1.0f), iscale);
    for (int i = 0; i < n; i++)
        Lb[i] = clamp8(nearest8(_mm256_mul_ps(iscale, _mm256_sub_ps(xv[i], min))), 0, nmax);
    __m256 best_error = qkx_error8(n, xv, wv, Lb, scale, min, use_mad);
    for (int is = 0; nstep >= 1 && is <= nstep; is++) {
        iscale = _mm256_div_ps(_mm256_set1_ps(rmin + rdelta * is + nmax), _mm256_sub_ps(max, min));
        __m256 sum_l = zero, sum_l2 = zero, sum_xl = zero;
        for (int i = 0; i < n; i++) {
            La[i] = clamp8(nearest8(_mm256_mul_ps(iscale, _mm256_sub_ps(xv[i], min))), 0, nmax);
            const __m256 lf = _mm256_cvtepi32_ps(La[i]);
            const __m256 wl = _mm256_mul_ps(wv[i], lf);
            sum_l = _mm256_add_ps(sum_l, wl);
            sum_l2 = _mm256_add_ps(sum_l2, _mm256_mul_ps(wl, lf));
            sum_xl = _mm256_add_ps(sum_xl, _mm256_mul_ps(wl, xv[i]));
        }
        const __m256 D = _mm256_sub_ps(_mm256_mul_ps(sum_w, sum_l2), _mm256_mul_ps(sum_l, sum_l));
        const __m256 dpos = _mm256_cmp_ps(D, zero, _CMP_GT_OQ);
        if (_mm256_movemask_ps(dpos) == 0)
            continue;
        __m256 this_scale = _mm256_div_ps(
            _mm256_sub_ps(_mm256_mul_ps(sum_w, sum_xl), _mm256_mul_ps(sum_x, sum_l)), D);
        __m256 this_min = _mm256_div_ps(
            _mm256_sub_ps(_mm256_mul_ps(sum_l2, sum_x), _mm256_mul_ps(sum_l, sum_xl)), D);
        const __m256 mpos = _mm256_cmp_ps(this_min, zero, _CMP_GT_OQ);
        this_min = _mm256_blendv_ps(this_min, zero, mpos);
        this_scale = _mm256_blendv_ps(this_scale, _mm256_div_ps(sum_xl, sum_l2), mpos);
        const __m256 cur_error = qkx_error8(n, xv, wv, La, this_scale, this_min, use_mad);
        const __m256 better = _mm256_and_ps(dpos, _mm256_cmp_ps(cur_error, best_error, _CMP_LT_OQ));
        if (_mm256_movemask_ps(better) == 0)
            continue;
        const __m256i bi = _mm256_castps_si256(better);
        for (int i = 0; i < n; i++)
            Lb[i] = _mm256_blendv_epi8(Lb[i], La[i], bi);
        best_error = _mm256_blendv_ps(best_error, cur_error, better);
        scale = _mm256_blendv_ps(scale, this_scale, better);
        min = _mm256_blendv_ps(min, this_min, better);
    }
    min = _mm256_blendv_ps(min, flat_min, flat);
    scale = _mm256_andnot_ps(flat, scale);
    _mm256_storeu_ps(scales, scale);
    _mm256_storeu_ps(the_mins, _mm256_xor_ps(min, _mm256_set1_ps(-0.0f)));
    int32_t lt[QK_SEARCH_MAX_N][8];
    for (int i = 0; i < n; i++)
        _mm256_storeu_si256((__m256i *)lt[i],
                            _mm256_andnot_si256(_mm256_castps_si256(flat), Lb[i]));
    for (int g = 0; g < 8; g++)
        for (int i = 0; i < n; i++)
            L[g * n + i] = (uint8_t)lt[i][g];
}

/* The lower bracket of best_index_int8's bisection on 8 lanes, for a
 * 16-entry increasing codebook strictly inside (cb[0], cb[15]): the
 * bisection ends at lo = #{k in 1..14 : !(v < cb[k])}, so count it (a NaN
 * lands where the scalar bisection puts it, at 14). */
QK_TARGET_AVX2 static inline __m256i nearest_lo16(__m256 v, const __m256 *cbv)
{
    __m256i lo = _mm256_setzero_si256();
    for (int k = 1; k < 15; k++)
        lo = _mm256_sub_epi32(lo, _mm256_castps_si256(_mm256_cmp_ps(v, cbv[k], _CMP_NLT_UQ)));
    return lo;
}

/* The float codebook value of 16-entry table tab (as two 8-lane halves) at idx. */
QK_TARGET_AVX2 static inline __m256 lookup16(__m256 t0, __m256 t1, __m256i idx)
{
    const __m256 a = _mm256_permutevar8x32_ps(t0, idx), b = _mm256_permutevar8x32_ps(t1, idx);
    return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}

/* best_index_int8 on 8 lanes: the index of the codebook value nearest v
 * (ties to the upper one; clamped at both ends), and that value. */
QK_TARGET_AVX2 static inline __m256i nearest16(__m256 v, const __m256 *cbv, __m256 t0, __m256 t1,
                                               __m256 *value)
{
    const __m256i lo = nearest_lo16(v, cbv);
    const __m256i hi = _mm256_add_epi32(lo, _mm256_set1_epi32(1));
    const __m256 vlo = lookup16(t0, t1, lo), vhi = lookup16(t0, t1, hi);
    const __m256 take_lo = _mm256_cmp_ps(_mm256_sub_ps(v, vlo), _mm256_sub_ps(vhi, v), _CMP_LT_OQ);
    const __m256 at0 = _mm256_cmp_ps(v, cbv[0], _CMP_LE_OQ), at15 = _mm256_cmp_ps(v, cbv[15], _CMP_GE_OQ);
    __m256i idx = _mm256_blendv_epi8(hi, lo, _mm256_castps_si256(take_lo));
    idx = _mm256_andnot_si256(_mm256_castps_si256(at0), idx);
    idx = _mm256_blendv_epi8(idx, _mm256_set1_epi32(15), _mm256_castps_si256(at15));
    __m256 q = _mm256_blendv_ps(vhi, vlo, take_lo);
    q = _mm256_blendv_ps(q, cbv[0], at0);
    *value = _mm256_blendv_ps(q, cbv[15], at15);
    return idx;
}

QK_TARGET_AVX2 void qk_x86_avx2_iq4_pack(const float *x, float id, const int8_t *codebook,
                                         uint8_t *qs)
{
    __m256 cbv[16];
    float cbf[16];
    for (int k = 0; k < 16; k++)
        cbv[k] = _mm256_set1_ps(cbf[k] = (float)codebook[k]);
    const __m256 t0 = _mm256_loadu_ps(cbf), t1 = _mm256_loadu_ps(cbf + 8), idv = _mm256_set1_ps(id);
    int32_t idx[32];
    for (int j = 0; j < 32; j += 8) {
        __m256 q;
        _mm256_storeu_si256((__m256i *)(idx + j),
                            nearest16(_mm256_mul_ps(idv, _mm256_loadu_ps(x + j)), cbv, t0, t1, &q));
    }
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)(idx[j] | idx[j + 16] << 4);
}

QK_TARGET_AVX2 void qk_x86_avx2_iq4_scales_x8(const float *x, const float *qw,
                                              const float *sigma2, const int8_t *codebook,
                                              int ntry, float *scales)
{
    enum { N = 32 };
    float xt[N][8], qt[N][8];
    transpose8(N, x, xt);
    if (qw)
        transpose8(N, qw, qt);
    __m256 cbv[16];
    float cbf[16];
    for (int k = 0; k < 16; k++)
        cbv[k] = _mm256_set1_ps(cbf[k] = (float)codebook[k]);
    const __m256 t0 = _mm256_loadu_ps(cbf), t1 = _mm256_loadu_ps(cbf + 8);
    const __m256 s2 = _mm256_loadu_ps(sigma2), sign = _mm256_set1_ps(-0.0f), zero = _mm256_setzero_ps();
    __m256 xv[N], wv[N];
    __m256 amax = zero, max = zero;
    for (int j = 0; j < N; j++) {
        xv[j] = _mm256_loadu_ps(xt[j]);
        const __m256 xx = _mm256_mul_ps(xv[j], xv[j]);
        wv[j] = qw ? _mm256_mul_ps(_mm256_loadu_ps(qt[j]), _mm256_sqrt_ps(_mm256_add_ps(s2, xx))) : xx;
        const __m256 ax = _mm256_andnot_ps(sign, xv[j]);
        const __m256 gt = _mm256_cmp_ps(ax, amax, _CMP_GT_OQ);
        amax = _mm256_blendv_ps(amax, ax, gt);
        max = _mm256_blendv_ps(max, xv[j], gt);
    }
    const __m256 zero_group = _mm256_cmp_ps(amax, _mm256_set1_ps(QK_GROUP_MAX_EPS), _CMP_LT_OQ);
    const __m256 c0 = cbv[0];
    __m256 d = zero, best = zero;
    for (int t = -ntry - 1; t <= ntry; t++) {
        /* t = -ntry - 1 stands for ggml's first fit at 1 / (-max / codebook[0]) */
        const __m256 id = t < -ntry
            ? _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_div_ps(_mm256_xor_ps(max, sign), c0))
            : _mm256_div_ps(_mm256_set1_ps((float)(t + codebook[0])), max);
        __m256 sqx = zero, sq2 = zero;
        for (int j = 0; j < N; j++) {
            const __m256 v = _mm256_mul_ps(id, xv[j]);
            __m256 q;
            (void)nearest16(v, cbv, t0, t1, &q);
            const __m256 wq = _mm256_mul_ps(wv[j], q);
            sqx = _mm256_add_ps(sqx, _mm256_mul_ps(wq, xv[j]));
            sq2 = _mm256_add_ps(sq2, _mm256_mul_ps(wq, q));
        }
        const __m256 pos = _mm256_cmp_ps(sq2, zero, _CMP_GT_OQ);
        if (t < -ntry) {
            d = _mm256_and_ps(pos, _mm256_div_ps(sqx, sq2));
            best = _mm256_mul_ps(d, sqx);
            continue;
        }
        const __m256 better = _mm256_and_ps(
            pos, _mm256_cmp_ps(_mm256_mul_ps(sqx, sqx), _mm256_mul_ps(best, sq2), _CMP_GT_OQ));
        const __m256 nd = _mm256_div_ps(sqx, sq2);
        d = _mm256_blendv_ps(d, nd, better);
        best = _mm256_blendv_ps(best, _mm256_mul_ps(nd, sqx), better);
    }
    _mm256_storeu_ps(scales, _mm256_andnot_ps(zero_group, d));
}
