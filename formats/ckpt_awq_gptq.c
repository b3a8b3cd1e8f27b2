/* ckpt_awq_gptq.c - AutoAWQ GEMM and GPTQ (AutoGPTQ / GPTQModel) int32
 * packings of b-bit integers (b = 4 or 8; pf = 32 / b values a word, value
 * j at bits [b*j, b*j + b)), dequantized as (q - zero) * scale with the
 * group g of input feature k: k / group_size, or g_idx[k] (act-order).
 *
 * AWQ (awq/utils/packing_utils.py unpack_awq + reverse_awq_order):
 *   qweight I32 [K, N/pf] and qzeros I32 [K/G, N/pf] are packed along the
 *   output dimension in the interleaved order AWQ_ORDER = [0,2,4,6,1,3,5,7]
 *   (b = 4; [0,2,1,3] for b = 8, vLLM awq_pack), so output column 8p + j is
 *   the nibble at position AWQ_REVERSE_ORDER[j] = [0,4,1,5,2,6,3,7][j] of
 *   word p; scales F16 [K/G, N].  Zeros are stored as they are.
 * GPTQ (auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py):
 *   qweight I32 [K/pf, N] packed along the input dimension in plain order,
 *   qzeros I32 [ngroups, N/pf] along the output dimension, scales
 *   [ngroups, N], g_idx I32 [K].  Format v1 stores zero - 1 (the reader
 *   adds 1, without masking, as AutoGPTQ does); checkpoint_format
 *   "gptq_v2" stores the zero itself. */
#include "formats/ckpt_impl.h"

#include <stdio.h>

static int bits_of(ck_ctx *c, const qk_hf_tensor *w, int *bits)
{
    *bits = c->sc.w.num_bits ? c->sc.w.num_bits : 4;
    if (*bits != 4 && *bits != 8)
        return ck_bad(c, w, "%d-bit packing is not supported (4 or 8)", *bits);
    if (w->type != QK_I32 && w->type != QK_U32)
        return ck_bad(c, w, "dtype %s, expected I32", w->dtype);
    if (w->n_dims != 2 || w->shape[0] <= 0 || w->shape[1] <= 0)
        return ck_bad(c, w, "must be a non-empty matrix");
    return QK_OK;
}

/* Groups: scales [ng, n] with ng = ceil(k / G). */
static int groups(ck_ctx *c, qk_ck_tensor *t, const qk_hf_tensor *s, int64_t n, int64_t k)
{
    int rc = ck_need_float(c, s);
    if (rc)
        return rc;
    if (s->n_dims != 2 || s->shape[1] != n || s->shape[0] <= 0)
        return ck_bad(c, s, "shape does not match [ngroups, %lld]", (long long)n);
    int64_t ng = s->shape[0];
    int64_t g = c->sc.w.group_size > 0 ? c->sc.w.group_size : ck_cdiv(k, ng);
    if (!t->gidx && ck_cdiv(k, g) != ng)
        return ck_bad(c, s, "%lld groups do not fit %lld input features in groups of %lld", (long long)ng,
                      (long long)k, (long long)g);
    t->group = g;
    t->scale_rows = ng;
    t->scale_cols = n;
    t->scale = s;
    return QK_OK;
}

static int zeros(ck_ctx *c, qk_ck_tensor *t, const qk_hf_tensor *qw, const qk_hf_tensor *z, int64_t n)
{
    if (!z)
        return ck_bad(c, qw, "companion tensor 'qzeros' is missing");
    int pf = 32 / t->bits;
    if (z->type != QK_I32 && z->type != QK_U32)
        return ck_bad(c, z, "dtype %s, expected I32", z->dtype);
    if (!ck_is2(z, t->scale_rows, ck_cdiv(n, pf), false))
        return ck_bad(c, z, "shape does not match [%lld, %lld]", (long long)t->scale_rows, (long long)ck_cdiv(n, pf));
    t->zero = z;
    return QK_OK;
}

int ck_setup_awq(ck_ctx *c, qk_ck_tensor *t, const ck_parts *p)
{
    const qk_hf_tensor *w = p->p[CK_QWEIGHT];
    int bits, rc;
    if ((rc = bits_of(c, w, &bits)) || (rc = ck_need(c, w, p->p[CK_SCALES], "scales")))
        return rc;
    int pf = 32 / bits;
    int64_t k = w->shape[0], n = w->shape[1] * pf;
    t->layout = QK_CK_AWQ;
    t->w = w;
    t->bits = bits;
    ck_set_shape2(t, n, k);
    if ((rc = groups(c, t, p->p[CK_SCALES], n, k)) || (rc = zeros(c, t, w, p->p[CK_QZEROS], n)))
        return rc;
    snprintf(t->scheme, sizeof t->scheme, "awq int%d g%lld", bits, (long long)t->group);
    return QK_OK;
}

static bool gptq_v2(const ck_ctx *c)
{
    const qk_jsonv *qc = qk_jsonv_get(c->hf->config, "quantization_config");
    const char *f = qk_jsonv_get_str(qc, "checkpoint_format", "gptq");
    return strcmp(f, "gptq_v2") == 0;
}

int ck_setup_gptq(ck_ctx *c, qk_ck_tensor *t, const ck_parts *p)
{
    const qk_hf_tensor *w = p->p[CK_QWEIGHT], *g = p->p[CK_G_IDX];
    int bits, rc;
    if ((rc = bits_of(c, w, &bits)) || (rc = ck_need(c, w, p->p[CK_SCALES], "scales")))
        return rc;
    int pf = 32 / bits;
    int64_t n = w->shape[1], k = w->shape[0] * pf;
    t->layout = QK_CK_GPTQ;
    t->w = w;
    t->bits = bits;
    t->zero_offset = !gptq_v2(c);
    ck_set_shape2(t, n, k);
    if (g) {
        if ((rc = ck_need_int(c, g)))
            return rc;
        if (g->nelem != (uint64_t)k)
            return ck_bad(c, g, "has %llu values, expected %lld", (unsigned long long)g->nelem, (long long)k);
        t->gidx = g;
    }
    if ((rc = groups(c, t, p->p[CK_SCALES], n, k)) || (rc = zeros(c, t, w, p->p[CK_QZEROS], n)))
        return rc;
    if (g) {
        for (int64_t i = 0; i < k; i++) {
            int64_t v = ck_i(g, (uint64_t)i);
            if (v < 0 || v >= t->scale_rows)
                return ck_bad(c, g, "value %lld at %lld is not a group index (0..%lld)", (long long)v, (long long)i,
                              (long long)t->scale_rows - 1);
        }
    }
    snprintf(t->scheme, sizeof t->scheme, "gptq int%d g%lld%s", bits, (long long)t->group,
             g ? " g_idx" : "");
    return QK_OK;
}
