/* ckpt_modelopt.c - NVIDIA TensorRT Model Optimizer unified HF checkpoints
 * (modelopt/torch/export/unified_export_hf.py, quant_utils.py): NVFP4 stores
 * weight U8 [N, K/2] (E2M1 codes, the even element in the low nibble),
 * weight_scale F8_E4M3 [N, K/16] and weight_scale_2 F32 (scalar); the value
 * is E2M1(code) * float(weight_scale) * weight_scale_2 (NVFP4QTensor
 * dequantize).  FP8 (weight F8_E4M3 + one weight_scale) is read by the fp8
 * reader of ckpt_ct.c; which layers a MIXED_PRECISION checkpoint quantizes is
 * quantcfg.c's business, the layout of each follows from its parts. */
#include "formats/ckpt_impl.h"

#include <stdio.h>

int ck_setup_nvfp4_mo(ck_ctx *c, qk_ck_tensor *t, const ck_parts *p)
{
    const qk_hf_tensor *w = p->p[CK_WEIGHT], *s = p->p[CK_WEIGHT_SCALE], *s2 = p->p[CK_WEIGHT_SCALE_2];
    if (w->n_dims != 2 || w->shape[0] <= 0 || w->shape[1] <= 0)
        return ck_bad(c, w, "a quantized weight must be a non-empty matrix (has %d dimensions)", w->n_dims);
    int64_t n = w->shape[0], k = w->shape[1] * 2;
    int64_t gs = c->sc.w.group_size > 0 ? c->sc.w.group_size : 16;
    int rc;
    if ((rc = ck_need_type(c, s, QK_F8_E4M3)) || (rc = ck_need_float(c, s2)))
        return rc;
    if (!ck_is2(s, n, ck_cdiv(k, gs), false))
        return ck_bad(c, s, "shape does not match [%lld, %lld] (groups of %lld along %lld columns)", (long long)n,
                      (long long)ck_cdiv(k, gs), (long long)gs, (long long)k);
    if (s2->nelem != 1)
        return ck_bad(c, s2, "has %llu values, expected 1", (unsigned long long)s2->nelem);
    t->layout = QK_CK_NVFP4_MO;
    t->w = w;
    t->scale = s;
    t->scale2 = s2;
    t->bits = 4;
    t->group = gs;
    t->elem = QK_ELEM_FP4_E2M1;
    t->scale_elem = QK_ELEM_FP8_E4M3;
    t->scale_rows = n;
    t->scale_cols = ck_cdiv(k, gs);
    ck_set_shape2(t, n, k);
    snprintf(t->scheme, sizeof t->scheme, "nvfp4 (modelopt)");
    return QK_OK;
}
