/* wq_act.c - the activation encoders of the checkpoint schemes (wq.h): how
 * the serving engines quantize a token's input before the product, each rule
 * cited where it comes from.  The float encodings (QK_A_FP8, QK_A_MX8,
 * QK_A_MX4) write the dequantized operand, value(code) * scale, as floats
 * (what compressed-tensors' fake quantization hands the matmul, and what
 * the engines' scaled GEMMs multiply out); QK_A_I8 and QK_A_NV4 keep the
 * integer codes for the integer products (wq_int.c).
 *
 * Rounding is to nearest, ties to even, everywhere: the E4M3 and E2M1
 * conversions of the engines (CUDA's __nv_fp8_e4m3 and cvt.rn.satfinite),
 * and cvt.rni.sat.s8.f32 / nearbyint for int8.  Scalar only: an encoder is
 * O(tokens x columns), its products O(tokens x columns x rows). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/actvar.h"
#include "kernels/elements.h"
#include "kernels/fp4.h"
#include "kernels/half.h"
#include "kernels/wq_impl.h"

static inline float clampf(float x, float lo, float hi) { return fminf(fmaxf(x, lo), hi); }

/* The noise floor's variants (wq.h a_variant): a divisor one ulp smaller
 * (UP: quotients move away from zero) or larger (DOWN), a multiplier the
 * other way round. */
static inline float vdiv(const qk_wq *w, float d)
{
    return w->a_variant == QK_ACTV_UP ? nextafterf(d, 0.0f) : w->a_variant == QK_ACTV_DOWN ? nextafterf(d, INFINITY) : d;
}
static inline float vmul(const qk_wq *w, float m)
{
    return w->a_variant == QK_ACTV_UP ? nextafterf(m, INFINITY) : w->a_variant == QK_ACTV_DOWN ? nextafterf(m, 0.0f) : m;
}

static float e4m3_qdq(float v) /* v already clamped to +-448 */
{
    return qk_elem_decode(QK_ELEM_FP8_E4M3, qk_elem_encode(QK_ELEM_FP8_E4M3, v, QK_ENC_SAT));
}

/* FP8 E4M3 (compressed-tensors float-quantized input_activations, ModelOpt
 * FP8), vLLM csrc/quantization/fp8/common.cu and per_token_group_quant.cu:
 *   dynamic per token (dynamic_per_token_scaled_fp8_quant_kernel_strided):
 *     scale = max(amax / 448, min_scaling_factor = 1 / (448 * 512)),
 *     code = e4m3(clamp(x / scale, -448, 448));
 *   static per tensor, input_scale (scaled_fp8_quant_kernel_strided):
 *     code = e4m3(clamp(x * (1 / input_scale), -448, 448));
 *   dynamic per token group of G (per_token_group_quant_8bit_kernel, eps
 *     1e-10 as per_token_group_quant_fp8 passes it): amax over the group
 *     starting from eps, scale = amax / 448, code = e4m3(clamp(x / scale)).
 * The row holds value(code) * scale. */
void qk_wq_act_fp8(const qk_wq *w, const float *x, void *dst, int64_t n)
{
    float *y = dst;
    if (w->a_static) {
        const float s = w->a_scale, inv = vmul(w, 1.0f / s);
        for (int64_t i = 0; i < n; i++)
            y[i] = e4m3_qdq(clampf(x[i] * inv, -448.0f, 448.0f)) * s;
        return;
    }
    const int64_t g = w->a_group > 0 ? w->a_group : n;
    for (int64_t i0 = 0; i0 < n; i0 += g) {
        const int64_t m = n - i0 < g ? n - i0 : g;
        float amax = w->a_group > 0 ? 1e-10f : 0.0f, s;
        for (int64_t i = i0; i < i0 + m; i++)
            amax = fmaxf(amax, fabsf(x[i]));
        if (w->a_group > 0)
            s = amax / 448.0f;
        else
            s = fmaxf(amax / 448.0f, 1.0f / (448.0f * 512.0f));
        const float sd = vdiv(w, s);
        for (int64_t i = i0; i < i0 + m; i++)
            y[i] = e4m3_qdq(clampf(x[i] / sd, -448.0f, 448.0f)) * s;
    }
}

/* The E4M3 codes of x[0..m) times op (mul) or divided by it, clamped as
 * qk_wq_act_fp8 clamps, as their values' BF16 bits at q (the float's top
 * half: exact, 3 mantissa bits). */
static void f8_words(const float *x, int64_t m, float op, bool mul, uint8_t *q)
{
    for (int64_t i = 0; i < m; i++) {
        const float v = e4m3_qdq(clampf(mul ? x[i] * op : x[i] / op, -448.0f, 448.0f));
        const uint16_t b = (uint16_t)(qk_f32_bits(v) >> 16);
        memcpy(q + 2 * i, &b, 2);
    }
}

/* QK_A_F8B: qk_wq_act_fp8's codes and scale for a token-wide scale
 * (dynamic per token, or static), the scale in the header, the codes' words. */
void qk_wq_act_f8b(const qk_wq *w, const float *x, void *dst, int64_t n)
{
    qk_a_i8_head h = {0};
    uint8_t *q = (uint8_t *)dst + QK_A_I8_HEAD;
    float op; /* x is multiplied by op (static) or divided by it (dynamic) */
    if (w->a_static) {
        h.scale = w->a_scale;
        op = vmul(w, 1.0f / w->a_scale);
    } else {
        float amax = 0.0f;
        for (int64_t i = 0; i < n; i++)
            amax = fmaxf(amax, fabsf(x[i]));
        h.scale = fmaxf(amax / 448.0f, 1.0f / (448.0f * 512.0f));
        op = vdiv(w, h.scale);
    }
    f8_words(x, n, op, w->a_static, q);
    memcpy(dst, &h, sizeof h);
}

/* QK_A_F8G: qk_wq_act_fp8's codes and scales for groups of 128 (vLLM's
 * per_token_group_quant_fp8: amax from 1e-10, scale amax / 448), each code's
 * E4M3 value as BF16 bits, the group scales after them. */
void qk_wq_act_f8g(const qk_wq *w, const float *x, void *dst, int64_t n)
{
    const qk_a_i8_head h = {0};
    uint8_t *q = (uint8_t *)dst + QK_A_I8_HEAD, *sc = q + 2 * n;
    for (int64_t i0 = 0; i0 < n; i0 += QK_A_F8G_GROUP) {
        const int64_t m = n - i0 < QK_A_F8G_GROUP ? n - i0 : QK_A_F8G_GROUP;
        float amax = 1e-10f;
        for (int64_t i = i0; i < i0 + m; i++)
            amax = fmaxf(amax, fabsf(x[i]));
        const float s = amax / 448.0f;
        f8_words(x + i0, m, vdiv(w, s), false, q + 2 * i0);
        memcpy(sc + 4 * (i0 / QK_A_F8G_GROUP), &s, 4);
    }
    memcpy(dst, &h, sizeof h);
}

/* The FP8 KV cache of a checkpoint's kv_cache_scheme (float, 8 bits,
 * tensor, static): compressed-tensors' fake quantization of the cached
 * key and value states with the layer's k_scale / v_scale
 * (lifecycle/forward_helpers.py _quantize_dequantize: x / scale, clamped to
 * +-448, cast to E4M3 rounding to nearest even, times the scale), as
 * transformers applies it, and vLLM's fp8 cache (cache_kernels.cu
 * reshape_and_cache_flash, scaled_convert: x / scale). */
void qk_wq_kv_fp8(float *x, int64_t n, float scale)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = e4m3_qdq(clampf(x[i] / scale, -448.0f, 448.0f)) * scale;
}

/* MXFP8 / MXFP4 activations (compressed-tensors MXFP8 and MXFP4 presets,
 * dynamic groups of 32 with uint8 scales): quantization/utils/mxfp_utils.py
 * generate_mx_scales on the group's absmax: round_to_power_2 (add 1 << 21
 * to the float32 bits, keep sign and exponent), then the E8M0 exponent
 * 127 + floor(log2(p)) - floor(log2(elem max)) (8 for E4M3, 2 for E2M1),
 * kept in 0..254 (calculate_qparams rounds it to uint8; 255 would be NaN);
 * then lifecycle/forward_helpers.py _quantize: x / 2^(e - 127), clamped to
 * the element's range and rounded to it (to_dtype for E4M3, cast_to_fp4's
 * ties-to-even grid for E2M1), times the scale. */
void qk_wq_act_mx(const qk_wq *w, const float *x, void *dst, int64_t n)
{
    const bool fp4 = w->act == QK_A_MX4;
    const qk_elem e = fp4 ? QK_ELEM_FP4_E2M1 : QK_ELEM_FP8_E4M3;
    const float emax = fp4 ? 6.0f : 448.0f;
    const int off = fp4 ? 2 : 8;
    float *y = dst;
    for (int64_t i0 = 0; i0 < n; i0 += 32) {
        const int64_t m = n - i0 < 32 ? n - i0 : 32;
        float amax = 0.0f;
        for (int64_t i = i0; i < i0 + m; i++)
            amax = fmaxf(amax, fabsf(x[i]));
        uint32_t b;
        memcpy(&b, &amax, 4);
        b = (b + (1u << 21)) & 0xFF800000u;
        float p;
        memcpy(&p, &b, 4);
        int ex = 0;
        if (p > 0.0f && p <= FLT_MAX) {
            (void)frexpf(p, &ex);
            ex = 127 + (ex - 1) - off;
        }
        ex = ex < 0 ? 0 : ex > 254 ? 254 : ex;
        const float s = qk_elem_decode(QK_ELEM_E8M0, (uint8_t)ex), sd = vdiv(w, s);
        for (int64_t i = i0; i < i0 + m; i++)
            y[i] = qk_elem_decode(e, qk_elem_encode(e, clampf(x[i] / sd, -emax, emax), QK_ENC_SAT)) * s;
    }
}

/* cvt.rni.sat.s8.f32: to nearest even, saturated to int8 (NaN -> 0). */
static inline int8_t i8_rn(float v)
{
    if (!(v == v))
        return 0;
    const float r = nearbyintf(clampf(v, -128.0f, 127.0f));
    return (int8_t)r;
}

static inline int32_t i32_rn(float v)
{
    if (!(v == v))
        return 0;
    const float r = nearbyintf(v);
    return r >= 2147483648.0f ? INT32_MAX : r <= -2147483648.0f ? INT32_MIN : (int32_t)r;
}

/* INT8 (compressed-tensors int-quantized input_activations), vLLM
 * csrc/quantization/compressed_tensors/int8_quant_kernels.cu:
 *   dynamic, symmetric (dynamic_scaled_int8_quant_kernel): scale = amax /
 *     127, code = rn_sat(x * (127 / amax)) (amax 0: codes 0);
 *   dynamic, asymmetric (dynamic_scaled_int8_azp_quant_kernel): max and min
 *     over the token (max starting from FLT_MIN, min from FLT_MAX, as there),
 *     scale = (max - min) / 255, zero = nearbyint(-128 - min / scale),
 *     code = sat8(rn(x / scale) + zero);
 *   static (static_scaled_int8_quant_kernel): code = rn_sat(x / input_scale).
 * The row: qk_a_i8_head {scale, zero}, then the codes. */
void qk_wq_act_i8(const qk_wq *w, const float *x, void *dst, int64_t n)
{
    qk_a_i8_head h = {0};
    int8_t *q = (int8_t *)dst + QK_A_I8_HEAD;
    if (w->a_static) {
        h.scale = w->a_scale;
        const float sd = vdiv(w, w->a_scale);
        for (int64_t i = 0; i < n; i++)
            q[i] = i8_rn(x[i] / sd);
    } else if (w->a_asym) {
        float mx = FLT_MIN, mn = FLT_MAX;
        for (int64_t i = 0; i < n; i++) {
            mx = fmaxf(mx, x[i]);
            mn = fminf(mn, x[i]);
        }
        h.scale = (mx - mn) / 255.0f;
        h.zero = (int32_t)nearbyintf(-128.0f - mn / h.scale);
        const float sd = vdiv(w, h.scale);
        for (int64_t i = 0; i < n; i++) {
            const int32_t v = i32_rn(x[i] / sd) + h.zero;
            q[i] = (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
        }
    } else {
        float amax = 0.0f;
        for (int64_t i = 0; i < n; i++)
            amax = fmaxf(amax, fabsf(x[i]));
        h.scale = amax / 127.0f;
        const float inv = vmul(w, 127.0f / amax);
        for (int64_t i = 0; i < n; i++)
            q[i] = amax > 0.0f ? i8_rn(x[i] * inv) : 0;
    }
    memcpy(dst, &h, sizeof h);
}

/* NVFP4 (compressed-tensors nvfp4-pack-quantized with input_activations,
 * ModelOpt NVFP4): vLLM csrc/quantization/fp4/nvfp4_utils.cuh
 * cvt_warp_fp16_to_fp4 with SFScaleVal = input_global_scale, per block of
 * 16: SF = g * (amax * (1/6)), sf = e4m3(SF) (round to nearest even,
 * saturated), out_scale = sf != 0 ? 1 / (float(sf) * (1/g)) : 0, code =
 * e2m1(x * out_scale) (cvt.rn.satfinite).  vLLM's reciprocals are the
 * approximate rcp.approx.ftz; qk divides exactly.  The block multiplier
 * stored is float(sf) / g, compressed-tensors' dequantization of the
 * block (forward_helpers.py _dequantize: scale / global_scale), then each
 * block's code sum, and the codes are stored as twice their E2M1 value
 * (qk_e2m1_x2, -12..12). */
void qk_wq_act_nv4(const qk_wq *w, const float *x, void *dst, int64_t n)
{
    const qk_a_nv4_parts d = qk_a_nv4_parts_of(dst, n);
    const int64_t nb = d.nb;
    uint8_t *sums = d.sums;
    int8_t *q = d.q;
    const float g = w->a_global, rg = 1.0f / g;
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + b * QK_A_NV4_BLOCK;
        float amax = 0.0f;
        for (int i = 0; i < QK_A_NV4_BLOCK; i++)
            amax = fmaxf(amax, fabsf(xb[i]));
        const float sf = qk_elem_decode(QK_ELEM_FP8_E4M3,
                                        qk_elem_encode(QK_ELEM_FP8_E4M3, g * (amax * (1.0f / 6.0f)), QK_ENC_SAT));
        const float os = sf != 0.0f ? vmul(w, 1.0f / (sf * rg)) : 0.0f;
        const float m = sf / g;
        memcpy(d.mult + 4 * b, &m, 4);
        int32_t sum = 0;
        for (int i = 0; i < QK_A_NV4_BLOCK; i++) {
            q[b * QK_A_NV4_BLOCK + i] = qk_e2m1_x2[qk_elem_encode(QK_ELEM_FP4_E2M1, xb[i] * os, QK_ENC_SAT) & 15];
            sum += q[b * QK_A_NV4_BLOCK + i];
        }
        memcpy(sums + 4 * b, &sum, 4);
    }
}

/* bitsandbytes LLM.int8 (nn/modules.py Linear8bitLt, autograd/_functions.py
 * MatMul8bitLt with the default backend's int8_vectorwise_quant): the input
 * is quantized from a float16 copy: elements with |x16| >= threshold are
 * outliers and left out (zeroed), the row's scale is the absmax of the rest,
 * codes = round(x16 * (127 / absmax)) (half to even); the outliers keep the
 * input's own values for the float part of the product.  bitsandbytes
 * takes the outlier columns of the whole batch (a column is an outlier for
 * every token when one token has one there); qk takes each token's own, so
 * a product does not depend on the batch: the same as bitsandbytes for one
 * token at a time (generation), tests/cli_hfq.sh and crosscheck_hf.py. */
void qk_wq_act_i8o(const qk_wq *w, const float *x, void *dst, int64_t n)
{
    qk_a_i8_head h = {0};
    int8_t *q = (int8_t *)dst + QK_A_I8_HEAD;
    float *xo = (float *)(void *)(q + n);
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        const float v = qk_f16_to_f32(qk_f32_to_f16(x[i]));
        const bool out = w->a_threshold > 0.0f && fabsf(v) >= w->a_threshold;
        if (!out)
            amax = fmaxf(amax, fabsf(v));
        h.zero += out;
    }
    const float inv = vmul(w, 127.0f / amax);
    for (int64_t i = 0; i < n; i++) {
        const float v = qk_f16_to_f32(qk_f32_to_f16(x[i]));
        const bool out = w->a_threshold > 0.0f && fabsf(v) >= w->a_threshold;
        q[i] = out || !(amax > 0.0f) ? 0 : i8_rn(v * inv);
        const float o = out ? x[i] : 0.0f;
        memcpy(xo + i, &o, 4);
    }
    h.scale = amax;
    memcpy(dst, &h, sizeof h);
}
