/* ckpt_bnb.c - bitsandbytes serialized weights (bitsandbytes/functional.py
 * QuantState.as_dict(packed=True), nn/modules.py Params4bit / Int8Params).
 *
 * 4-bit (NF4 / FP4): the tensor is flattened and cut into blocks of
 * `blocksize` values (blocks may span rows); weight U8 holds two codes a
 * byte, the first in the high nibble (kQuantizeBlockwise: qvals[j] =
 * code(2j) << 4 | code(2j+1)); value = quant_map[code] * absmax[block].
 * With double quantization (nested) absmax is U8 and the block's absmax is
 * nested_quant_map[absmax[j]] * nested_absmax[j / nested_blocksize] +
 * nested_offset (dequantize_blockwise, then "absmax += offset").  The
 * non-tensor fields (quant_type, blocksize, shape, dtype, nested_blocksize,
 * nested_offset) are JSON in weight.quant_state.bitsandbytes__{nf4,fp4}.
 *
 * LLM.int8: weight I8 [N, K] (CB) and SCB F32 [N] (row absmax); value =
 * CB * SCB * (1/127), as transformers' dequantize_bnb_weight computes it. */
#include "formats/ckpt_impl.h"

#include <stdio.h>
#include <stdlib.h>

#include "lib/core/jsonp.h"

static int qstate(ck_ctx *c, qk_ck_tensor *t, const qk_hf_tensor *qs, bool nested)
{
    qk_jsonv *root = NULL;
    qk_jsonp_err je;
    if (qs->type != QK_U8)
        return ck_bad(c, qs, "dtype %s, expected U8 (JSON bytes)", qs->dtype);
    if (qk_jsonp_parse((const char *)qs->data, (size_t)qs->nbytes, 0, &root, &je))
        return ck_bad(c, qs, "bad JSON at byte %llu: %s", (unsigned long long)je.off, je.msg);
    int rc = QK_OK;
    const qk_jsonv *sh = qk_jsonv_get(root, "shape");
    int64_t bs = qk_jsonv_get_i64(root, "blocksize", 64);
    size_t nd = qk_jsonv_len(sh);
    if (!qk_jsonv_is(sh, QK_JARR) || nd < 1 || nd > QK_ST_MAX_DIMS) {
        rc = ck_bad(c, qs, "\"shape\" must be an array of 1 to %d integers", QK_ST_MAX_DIMS);
        goto done;
    }
    if (bs <= 0 || bs > (1 << 20)) {
        rc = ck_bad(c, qs, "\"blocksize\" %lld out of range", (long long)bs);
        goto done;
    }
    uint64_t ne = 1;
    t->n_dims = (int)nd;
    for (size_t d = 0; d < nd; d++) {
        int64_t v;
        if (!qk_jsonv_i64(qk_jsonv_at(sh, d), &v) || v <= 0 || v > ((int64_t)1 << 40) ||
            __builtin_mul_overflow(ne, (uint64_t)v, &ne) || ne > ((uint64_t)1 << 44)) {
            rc = ck_bad(c, qs, "\"shape\" entry %zu is not a positive size", d);
            goto done;
        }
        t->shape[d] = v;
    }
    t->nelem = ne;
    t->cols = t->shape[nd - 1];
    t->rows = (int64_t)(ne / (uint64_t)t->cols);
    t->blocksize = bs;
    if (nested) {
        double off = 0;
        t->nested_blocksize = qk_jsonv_get_i64(root, "nested_blocksize", 256);
        if (!qk_jsonv_f64(qk_jsonv_get(root, "nested_offset"), &off)) {
            rc = ck_bad(c, qs, "\"nested_offset\" missing with a nested absmax");
            goto done;
        }
        t->nested_offset = (float)off;
        if (t->nested_blocksize <= 0 || t->nested_blocksize > (1 << 20))
            rc = ck_bad(c, qs, "\"nested_blocksize\" out of range");
    }
done:
    qk_jsonv_free(root);
    return rc;
}

static int need_n(ck_ctx *c, const qk_hf_tensor *t, uint64_t n, bool is_float)
{
    int rc = is_float ? ck_need_float(c, t) : ck_need_type(c, t, QK_U8);
    if (rc)
        return rc;
    return t->nelem == n ? QK_OK
                         : ck_bad(c, t, "has %llu values, expected %llu", (unsigned long long)t->nelem,
                                  (unsigned long long)n);
}

int ck_setup_bnb4(ck_ctx *c, qk_ck_tensor *t, const ck_parts *p)
{
    const qk_hf_tensor *w = p->p[CK_WEIGHT], *am = p->p[CK_ABSMAX], *qm = p->p[CK_QUANT_MAP];
    const qk_hf_tensor *qs = p->p[CK_QSTATE_NF4] ? p->p[CK_QSTATE_NF4] : p->p[CK_QSTATE_FP4];
    const qk_hf_tensor *na = p->p[CK_NESTED_ABSMAX], *nq = p->p[CK_NESTED_QUANT_MAP];
    bool nested = na != NULL;
    int rc;
    if ((rc = ck_need(c, w, qm, "weight.quant_map")) || (rc = qstate(c, t, qs, nested)))
        return rc;
    if ((rc = ck_need_type(c, w, QK_U8)))
        return rc;
    if (w->nbytes < (t->nelem + 1) / 2)
        return ck_bad(c, w, "%llu bytes for %llu 4-bit codes", (unsigned long long)w->nbytes,
                      (unsigned long long)t->nelem);
    uint64_t nb = (t->nelem + (uint64_t)t->blocksize - 1) / (uint64_t)t->blocksize;
    if ((rc = need_n(c, qm, 16, true)) || (rc = need_n(c, am, nb, !nested)))
        return rc;
    if (nested) {
        if ((rc = ck_need(c, w, nq, "weight.nested_quant_map")) || (rc = need_n(c, nq, 256, true)) ||
            (rc = need_n(c, na, (nb + (uint64_t)t->nested_blocksize - 1) / (uint64_t)t->nested_blocksize, true)))
            return rc;
        t->nabsmax = na;
        t->nqmap = nq;
    }
    t->layout = QK_CK_BNB4;
    t->w = w;
    t->scale = am;
    t->qmap = qm;
    t->qstate = qs;
    t->bits = 4;
    t->group = t->blocksize;
    t->elem = qs == p->p[CK_QSTATE_NF4] ? QK_ELEM_NF4 : QK_ELEM_BNB_FP4;
    snprintf(t->scheme, sizeof t->scheme, "bnb %s b%lld%s", t->elem == QK_ELEM_NF4 ? "nf4" : "fp4",
             (long long)t->blocksize, nested ? " dq" : "");
    return QK_OK;
}


int ck_setup_bnb8(ck_ctx *c, qk_ck_tensor *t, const ck_parts *p)
{
    const qk_hf_tensor *w = p->p[CK_WEIGHT], *s = p->p[CK_SCB];
    if (w->n_dims != 2 || w->shape[0] <= 0 || w->shape[1] <= 0)
        return ck_bad(c, w, "an LLM.int8 weight must be a non-empty matrix");
    int rc = ck_need_float(c, s);
    if (rc)
        return rc;
    if (s->nelem != (uint64_t)w->shape[0])
        return ck_bad(c, s, "has %llu values, expected %lld", (unsigned long long)s->nelem, (long long)w->shape[0]);
    t->layout = QK_CK_BNB8;
    t->w = w;
    t->scale = s;
    t->bits = 8;
    t->elem = QK_ELEM_INT8;
    ck_set_shape2(t, w->shape[0], w->shape[1]);
    snprintf(t->scheme, sizeof t->scheme, "bnb llm.int8");
    return QK_OK;
}
