/* quant_common.c - scale searches shared by the legacy and K-quant encoders,
 * reproducing the static helpers of ggml-quants.c (llama.cpp d32676d):
 * make_qx_quants, make_q3_quants, make_qkx2_quants/make_qkx3_quants and
 * make_qp_quants.  All arithmetic is float, in ggml's order (see the header). */
#include "kernels/quant_common.h"

#include <math.h>

#include "kernels/cpu.h"
#include "kernels/x86/x86.h"

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Index of the element with the largest |x| (first on ties), or -1 when
 * every |x| is below QK_GROUP_MAX_EPS. */
static int absmax_index(int n, const float *x)
{
    float amax = 0;
    int at = -1;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            at = i;
        }
    }
    return amax < QK_GROUP_MAX_EPS ? -1 : at;
}

/* The weight make_qx_quants gives x (rmse_type 1). */
static inline float qx_weight(const float *qw, const float *x, int i) { return qw ? qw[i] : x[i] * x[i]; }

float qk_make_qx_quants(int n, int nmax, const float *x, int8_t *L, const float *qw)
{
    int at = absmax_index(n, x);
    if (at < 0) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    const float max = x[at];
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(qk_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        float w = qx_weight(qw, x, i);
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0)
            continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(qk_nearest_int(iscale * x[i]), -nmax, nmax - 1);
            float w = qx_weight(qw, x, i);
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clampi(qk_nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

void qk_make_qx_quants_x8(int n, int nmax, const float *x, int8_t *L, const float *qw,
                          float *scales)
{
#ifdef QK_X86
    if (qk_cpu_level_active() >= QK_CPU_AVX2) {
        qk_x86_avx2_make_qx_quants_x8(n, nmax, x, L, qw, scales);
        return;
    }
#endif
    for (int g = 0; g < 8; g++)
        scales[g] = qk_make_qx_quants(n, nmax, x + g * n, L + g * n, qw ? qw + g * n : NULL);
}

float qk_make_q3_quants(int n, int nmax, const float *x, int8_t *L)
{
    int at = absmax_index(n, x);
    if (at < 0) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    const float iscale = -nmax / x[at];
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(qk_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    /* coordinate descent: move one level at a time when it improves
     * sumlx^2/suml2 (the least-squares fit quality) */
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                int new_l = clampi(qk_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed)
            break;
    }
    for (int i = 0; i < n; i++)
        L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Weighted error of x ~ scale*L + min: sum w*|diff| (use_mad) or w*diff^2. */
static float qkx_error(int n, const float *x, const float *weights, const uint8_t *L, float scale,
                       float min, bool use_mad)
{
    float err = 0;
    for (int i = 0; i < n; i++) {
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        err += weights[i] * diff;
    }
    return err;
}

float qk_make_qkx_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                         float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                         bool use_mad)
{
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0)
        min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    for (int i = 0; i < n; i++)
        L[i] = (uint8_t)clampi(qk_nearest_int(iscale * (x[i] - min)), 0, nmax);
    float best_error = qkx_error(n, x, weights, L, scale, min, use_mad);
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(qk_nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = qkx_error(n, x, weights, Laux, this_scale, this_min, use_mad);
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

void qk_make_qkx_quants_x8(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                           float *scales, float *the_mins, float rmin, float rdelta, int nstep,
                           bool use_mad)
{
#ifdef QK_X86
    if (qk_cpu_level_active() >= QK_CPU_AVX2) {
        qk_x86_avx2_make_qkx_quants_x8(n, nmax, x, weights, L, scales, the_mins, rmin, rdelta,
                                       nstep, use_mad);
        return;
    }
#endif
    uint8_t Laux[QK_SEARCH_MAX_N];
    for (int g = 0; g < 8; g++)
        scales[g] = qk_make_qkx_quants(n, nmax, x + g * n, weights + g * n, L + g * n,
                                       the_mins + g, Laux, rmin, rdelta, nstep, use_mad);
}

float qk_make_qp_quants(int n, int nmax, const float *x, uint8_t *L, const float *qw)
{
    float max = 0;
    for (int i = 0; i < n; i++)
        max = max > x[i] ? max : x[i]; /* ggml's MAX(max, x[i]), NaN behaviour included */
    if (max < QK_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = nmax / max;
    for (int i = 0; i < n; i++)
        L[i] = (uint8_t)qk_nearest_int(iscale * x[i]);
    float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; i++) {
        float diff = x[i] - scale * L[i];
        best_mse += qw[i] * diff * diff;
    }
    for (int is = -4; is <= 4; is++) {
        if (is == 0)
            continue;
        float iscale_is = (0.1f * is + nmax) / max;
        float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; i++) {
            int l = qk_nearest_int(iscale_is * x[i]);
            l = l < nmax ? l : nmax;
            float diff = x[i] - scale_is * l;
            mse += qw[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = qk_nearest_int(iscale * x[i]);
        l = l < nmax ? l : nmax;
        L[i] = (uint8_t)l;
        float w = qw[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            float w = qw[i];
            float slx = sumlx - w * x[i] * L[i];
            float sl2 = suml2 - w * L[i] * L[i];
            if (slx > 0 && sl2 > 0) {
                int new_l = qk_nearest_int(x[i] * sl2 / slx);
                new_l = new_l < nmax ? new_l : nmax;
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed)
            break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}
