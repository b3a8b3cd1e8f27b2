/* ckpt_ct.c - compressed-tensors layouts (src/compressed_tensors/compressors/
 * quantized_compressors/: naive_quantized.py for float-quantized and
 * int-quantized, pack_quantized.py, fp4_quantized.py), dequantized the way
 * quantization/lifecycle/forward.py _dequantize does: (x_q - zero) * scale,
 * for NVFP4 x_q * (scale / global_scale).  The fp8 and int8 readers also
 * serve ModelOpt FP8 (weight_scale, one value) and DeepSeek-style
 * quant_method fp8 (weight_scale_inv, 128x128 blocks, edge blocks partial). */
#include "formats/ckpt_impl.h"

#include <stdio.h>

/* The scale grid of a [n, k] weight from the scale tensor's shape: one value
 * (tensor), [n,1] or [n] (channel), [n, ng] (groups along k), or
 * [ceil(n/R), ceil(k/C)] (blocks; R x C from the config, else 128 x 128). */
static int scale_grid(ck_ctx *c, qk_ck_tensor *t, const qk_hf_tensor *s, int64_t n, int64_t k, const char *what)
{
    int rc = ck_need_float(c, s);
    if (rc)
        return rc;
    if (s->nelem == 1) {
        t->block_r = n, t->block_c = k, t->scale_rows = 1, t->scale_cols = 1;
        snprintf(t->scheme, sizeof t->scheme, "%s tensor", what);
        return QK_OK;
    }
    if (ck_is2(s, n, 1, true)) {
        t->block_r = 1, t->block_c = k, t->scale_rows = n, t->scale_cols = 1;
        snprintf(t->scheme, sizeof t->scheme, "%s channel", what);
        return QK_OK;
    }
    if (s->n_dims == 2 && s->shape[0] > 0 && s->shape[1] > 0) {
        int64_t a = s->shape[0], b = s->shape[1];
        int64_t br = c->sc.w.block[0], bc = c->sc.w.block[1];
        if (!(br > 0 && bc > 0) && a == n) { /* groups */
            int64_t g = c->sc.w.group_size > 0 ? c->sc.w.group_size : ck_cdiv(k, b);
            if (ck_cdiv(k, g) != b)
                return ck_bad(c, s, "shape [%lld, %lld] does not match %lld groups of %lld along %lld columns",
                              (long long)a, (long long)b, (long long)ck_cdiv(k, g), (long long)g, (long long)k);
            t->block_r = 1, t->block_c = g, t->scale_rows = n, t->scale_cols = b, t->group = g;
            snprintf(t->scheme, sizeof t->scheme, "%s g%lld", what, (long long)g);
            return QK_OK;
        }
        if (!(br > 0 && bc > 0))
            br = bc = 128;
        if (ck_cdiv(n, br) != a || ck_cdiv(k, bc) != b)
            return ck_bad(c, s, "shape [%lld, %lld] does not match %lldx%lld blocks of a [%lld, %lld] weight",
                          (long long)a, (long long)b, (long long)br, (long long)bc, (long long)n, (long long)k);
        t->block_r = br, t->block_c = bc, t->scale_rows = a, t->scale_cols = b;
        snprintf(t->scheme, sizeof t->scheme, "%s block %lldx%lld", what, (long long)br, (long long)bc);
        return QK_OK;
    }
    return ck_bad(c, s, "shape does not give a scale grid for a [%lld, %lld] weight", (long long)n, (long long)k);
}

static int need2(ck_ctx *c, const qk_hf_tensor *w)
{
    if (w->n_dims != 2 || w->shape[0] <= 0 || w->shape[1] <= 0)
        return ck_bad(c, w, "a quantized weight must be a non-empty matrix (has %d dimensions)", w->n_dims);
    return QK_OK;
}

int ck_setup_fp8(ck_ctx *c, qk_ck_tensor *t, const ck_parts *p)
{
    const qk_hf_tensor *w = p->p[CK_WEIGHT];
    const qk_hf_tensor *s = p->p[CK_WEIGHT_SCALE] ? p->p[CK_WEIGHT_SCALE] : p->p[CK_WEIGHT_SCALE_INV];
    int rc = need2(c, w);
    if (rc)
        return rc;
    t->layout = QK_CK_FP8;
    t->w = w;
    t->scale = s;
    t->elem = w->type == QK_F8_E4M3 ? QK_ELEM_FP8_E4M3 : QK_ELEM_FP8_E5M2;
    t->bits = 8;
    ck_set_shape2(t, w->shape[0], w->shape[1]);
    if (s && s->type == QK_U8) { /* MXFP8 (compressed-tensors MXFP8 / MXFP8A16): E8M0 exponents per 32 */
        if (!ck_is2(s, t->rows, ck_cdiv(t->cols, 32), false))
            return ck_bad(c, s, "U8 (E8M0) scales: shape does not match [%lld, %lld] (groups of 32)", (long long)t->rows,
                          (long long)ck_cdiv(t->cols, 32));
        t->block_r = 1, t->block_c = 32, t->group = 32, t->scale_rows = t->rows, t->scale_cols = ck_cdiv(t->cols, 32);
        t->scale_elem = QK_ELEM_E8M0;
        snprintf(t->scheme, sizeof t->scheme, "mxfp8");
        return QK_OK;
    }
    return scale_grid(c, t, s, t->rows, t->cols, t->elem == QK_ELEM_FP8_E4M3 ? "fp8_e4m3" : "fp8_e5m2");
}

int ck_setup_int8(ck_ctx *c, qk_ck_tensor *t, const ck_parts *p)
{
    const qk_hf_tensor *w = p->p[CK_WEIGHT], *z = p->p[CK_WEIGHT_ZERO_POINT];
    int rc = need2(c, w);
    if (rc)
        return rc;
    t->layout = QK_CK_INT8;
    t->w = w;
    t->scale = p->p[CK_WEIGHT_SCALE];
    t->elem = QK_ELEM_INT8;
    t->bits = 8;
    ck_set_shape2(t, w->shape[0], w->shape[1]);
    if ((rc = scale_grid(c, t, t->scale, t->rows, t->cols, z ? "int8 asym" : "int8")))
        return rc;
    if (z) {
        if (!ck_is_int(z) && !ck_is_float(z))
            return ck_bad(c, z, "dtype %s, expected a number type", z->dtype);
        if (z->nelem != t->scale->nelem)
            return ck_bad(c, z, "%llu values for %llu scales", (unsigned long long)z->nelem,
                          (unsigned long long)t->scale->nelem);
        t->zero = z;
    }
    return QK_OK;
}

/* ---- pack-quantized ---------------------------------------------------------- */

int ck_setup_pack(ck_ctx *c, qk_ck_tensor *t, const ck_parts *p)
{
    const qk_hf_tensor *w = p->p[CK_WEIGHT_PACKED], *sh = p->p[CK_WEIGHT_SHAPE];
    const qk_hf_tensor *s = p->p[CK_WEIGHT_SCALE], *z = p->p[CK_WEIGHT_ZERO_POINT], *g = p->p[CK_WEIGHT_G_IDX];
    int rc;
    if ((rc = need2(c, w)) || (rc = ck_need(c, w, s, "weight_scale")) || (rc = ck_need(c, w, sh, "weight_shape")) ||
        (rc = ck_need_int(c, sh)))
        return rc;
    int bits = c->sc.w.num_bits ? c->sc.w.num_bits : 4;
    if (bits < 1 || bits > 8)
        return ck_bad(c, w, "num_bits %d: pack-quantized holds 1 to 8 bits", bits);
    if (sh->nelem != 2)
        return ck_bad(c, sh, "has %llu values, expected 2", (unsigned long long)sh->nelem);
    int64_t n = ck_i(sh, 0), k = ck_i(sh, 1), pf = 32 / bits;
    /* pack_to_int32: 32/b whole values a word (up to 0.12), or since 0.13 a
     * dense LSB-first stream, values straddling words (same for b = 1, 2, 4, 8) */
    bool dense = k > 0 && k < ((int64_t)1 << 40) && ck_cdiv(k * bits, 32) == w->shape[1] && ck_cdiv(k, pf) != w->shape[1];
    t->bitstream = dense;
    if (n != w->shape[0] || k <= 0 || (!dense && ck_cdiv(k, pf) != w->shape[1]))
        return ck_bad(c, sh, "[%lld, %lld] does not match weight_packed [%lld, %lld] at %d bits", (long long)n,
                      (long long)k, (long long)w->shape[0], (long long)w->shape[1], bits);
    t->layout = QK_CK_PACK;
    t->w = w;
    t->wshape = sh;
    t->scale = s;
    t->bits = bits;
    ck_set_shape2(t, n, k);
    char what[24];
    snprintf(what, sizeof what, "int%d%s", bits, z ? " asym" : "");
    if ((rc = scale_grid(c, t, s, n, k, what)))
        return rc;
    if (t->block_r != 1 && t->scale_rows != 1)
        return ck_bad(c, s, "block scales are not supported with pack-quantized");
    if (z) {
        if ((rc = ck_need_int(c, z)))
            return rc;
        int64_t zr = dense ? ck_cdiv(n * bits, 32) : ck_cdiv(n, pf);
        if (z->type == QK_I32 && ck_is2(z, zr, t->scale_cols, t->scale_cols == 1) && t->scale_rows == n)
            t->zero_packed = true;
        else if (z->nelem != s->nelem)
            return ck_bad(c, z, "shape does not match %lld x %lld scales (packed: [%lld, %lld] I32)",
                          (long long)t->scale_rows, (long long)t->scale_cols, (long long)zr,
                          (long long)t->scale_cols);
        t->zero = z;
    }
    if (g) {
        if ((rc = ck_need_int(c, g)))
            return rc;
        if (g->nelem != (uint64_t)k)
            return ck_bad(c, g, "has %llu values, expected %lld", (unsigned long long)g->nelem, (long long)k);
        bool minus1 = false;
        for (int64_t i = 0; i < k; i++) {
            int64_t v = ck_i(g, (uint64_t)i);
            minus1 |= v == -1;
            if (v != -1 && (v < 0 || v >= t->scale_cols))
                return ck_bad(c, g, "value %lld at %lld is not a group index (0..%lld)", (long long)v, (long long)i,
                              (long long)t->scale_cols - 1);
        }
        /* forward.py: g_idx holding -1 means column order */
        if (!minus1 && t->scale_cols > 1) {
            t->gidx = g;
            snprintf(t->scheme + strlen(t->scheme), sizeof t->scheme - strlen(t->scheme), " act-order");
        }
    }
    return QK_OK;
}

/* ---- nvfp4 / mxfp4 pack-quantized (and ModelOpt NVFP4) --------------------- */

int ck_setup_fp4_ct(ck_ctx *c, qk_ck_tensor *t, const ck_parts *p, bool nv)
{
    const qk_hf_tensor *w = p->p[CK_WEIGHT_PACKED], *s = p->p[CK_WEIGHT_SCALE], *g = p->p[CK_WEIGHT_GLOBAL_SCALE];
    int rc;
    if ((rc = need2(c, w)) || (rc = ck_need(c, w, s, "weight_scale")))
        return rc;
    int64_t n = w->shape[0], k = w->shape[1] * 2, gs = nv ? 16 : 32;
    if ((rc = ck_need_type(c, s, nv ? QK_F8_E4M3 : QK_U8)))
        return rc;
    if (!ck_is2(s, n, ck_cdiv(k, gs), false))
        return ck_bad(c, s, "shape does not match [%lld, %lld] (groups of %lld along %lld columns)", (long long)n,
                      (long long)ck_cdiv(k, gs), (long long)gs, (long long)k);
    if (nv) {
        if ((rc = ck_need_float(c, g)))
            return rc;
        if (g->nelem != 1)
            return ck_bad(c, g, "has %llu values, expected 1", (unsigned long long)g->nelem);
        t->scale2 = g;
    }
    t->layout = nv ? QK_CK_NVFP4_CT : QK_CK_MXFP4_CT;
    t->w = w;
    t->scale = s;
    t->bits = 4;
    t->group = gs;
    t->elem = QK_ELEM_FP4_E2M1;
    t->scale_elem = nv ? QK_ELEM_FP8_E4M3 : QK_ELEM_E8M0;
    t->scale_rows = n;
    t->scale_cols = ck_cdiv(k, gs);
    ck_set_shape2(t, n, k);
    snprintf(t->scheme, sizeof t->scheme, "%s", nv ? "nvfp4 (ct)" : "mxfp4");
    return QK_OK;
}
