/* ckpt_mlx.c - MLX quantized weights (mlx/ops.cpp quantize, mlx/backend/cpu/
 * quantized.cpp).  The codes of a row form one LSB-first bit stream stored
 * in U32 words: element j occupies bits [b*j, b*j + b) (for b = 3, 5 and 6
 * MLX packs 8, 8 and 4 elements into 3, 5 and 3 bytes, which is the same
 * stream).  Modes:
 *   affine   b in 2,3,4,5,6,8, groups of 32/64/128: value = scale * q + bias
 *            (scales and biases [N, K/G] in the model's dtype)
 *   mxfp4    E2M1 codes, groups of 32, scales U8 E8M0: value = e2m1 * 2^(s-127)
 *   mxfp8    E4M3 codes, groups of 32, scales U8 E8M0
 *   nvfp4    E2M1 codes, groups of 16, scales U8 holding FP8 E4M3
 * Bits, group size and mode come from config.json "quantization" (with the
 * per-module overrides quantcfg.c resolves). */
#include "formats/ckpt_impl.h"

#include <math.h>
#include <stdio.h>


enum { MODE_AFFINE, MODE_MXFP4, MODE_MXFP8, MODE_NVFP4 };

int ck_setup_mlx(ck_ctx *c, qk_ck_tensor *t, const ck_parts *p)
{
    const qk_hf_tensor *w = p->p[CK_WEIGHT], *s = p->p[CK_SCALES], *b = p->p[CK_BIASES];
    const char *type = c->sc.w.type;
    int mode = b ? MODE_AFFINE : strcmp(type, "mxfp8") == 0 ? MODE_MXFP8 : strcmp(type, "nvfp4") == 0 ? MODE_NVFP4
                                 : strcmp(type, "mxfp4") == 0 ? MODE_MXFP4 : -1;
    if (mode < 0)
        return ck_bad(c, w, "MLX weight without biases in mode '%s' (expected mxfp4, mxfp8 or nvfp4)", type);
    int bits = mode == MODE_AFFINE ? c->sc.w.num_bits : mode == MODE_MXFP8 ? 8 : 4;
    int64_t gs = mode == MODE_AFFINE ? c->sc.w.group_size : mode == MODE_NVFP4 ? 16 : 32;
    if (mode == MODE_AFFINE && (bits < 2 || bits > 8 || bits == 7))
        return ck_bad(c, w, "MLX affine bits %d (expected 2, 3, 4, 5, 6 or 8)", bits);
    if (gs <= 0)
        return ck_bad(c, w, "MLX group size %lld", (long long)gs);
    if (w->n_dims != 2 || w->shape[0] <= 0 || w->shape[1] <= 0 || (w->shape[1] * 32) % bits)
        return ck_bad(c, w, "must be a non-empty [N, K*%d/32] matrix", bits);
    int64_t n = w->shape[0], k = w->shape[1] * 32 / bits;
    int rc;
    if (k % gs)
        return ck_bad(c, w, "%lld columns are not a multiple of the group size %lld", (long long)k, (long long)gs);
    if (mode == MODE_AFFINE) {
        if ((rc = ck_need_float(c, s)) || (rc = ck_need_float(c, b)))
            return rc;
        if (!ck_is2(b, n, k / gs, false))
            return ck_bad(c, b, "shape does not match [%lld, %lld]", (long long)n, (long long)(k / gs));
    } else if ((rc = ck_need_type(c, s, QK_U8)))
        return rc;
    if (!ck_is2(s, n, k / gs, false))
        return ck_bad(c, s, "shape does not match [%lld, %lld]", (long long)n, (long long)(k / gs));
    t->layout = QK_CK_MLX;
    t->w = w;
    t->scale = s;
    t->bias = b;
    t->bits = bits;
    t->group = gs;
    t->scale_rows = n;
    t->scale_cols = k / gs;
    t->elem = mode == MODE_MXFP8 ? QK_ELEM_FP8_E4M3 : QK_ELEM_FP4_E2M1;
    t->scale_elem = mode == MODE_AFFINE ? -1 : mode == MODE_NVFP4 ? QK_ELEM_FP8_E4M3 : QK_ELEM_E8M0;
    ck_set_shape2(t, n, k);
    if (mode == MODE_AFFINE)
        snprintf(t->scheme, sizeof t->scheme, "mlx affine q%d g%lld", bits, (long long)gs);
    else
        snprintf(t->scheme, sizeof t->scheme, "mlx %s", type);
    return QK_OK;
}

/* mlx/backend/cpu/quantized.cpp quantize(), one row. */
void qk_mlx_affine_quantize_row(const float *x, int64_t cols, int group, int bits, uint8_t *codes, float *scales,
                                float *biases)
{
    float n_bins = (float)((1 << bits) - 1), eps = 1e-7f;
    for (int64_t g = 0; g < cols / group; g++) {
        const float *w = x + g * group;
        float w_min = INFINITY, w_max = -INFINITY;
        for (int j = 0; j < group; j++) {
            w_max = fmaxf(w_max, w[j]);
            w_min = fminf(w_min, w[j]);
        }
        bool mask = fabsf(w_min) > fabsf(w_max);
        float scale = fmaxf((w_max - w_min) / n_bins, eps);
        scale = mask ? scale : -scale;
        float edge = mask ? w_min : w_max;
        float q0 = rintf(edge / scale), bias = 0;
        if (q0 != 0) {
            scale = edge / q0;
            bias = edge;
        }
        for (int j = 0; j < group; j++) {
            float q = rintf((w[j] - bias) / scale);
            codes[g * group + j] = (uint8_t)fminf(fmaxf(q, 0.0f), n_bins);
        }
        scales[g] = scale;
        biases[g] = bias;
    }
}
