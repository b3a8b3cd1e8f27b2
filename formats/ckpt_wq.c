/* ckpt_wq.c - a logical tensor of a quantized checkpoint (ckpt.h) as the
 * kernels' view of its parts (kernels/wq.h): which row of the format table
 * computes it, and where its codes, scales, zero points and group indices
 * lie in the mapping, with their strides.  Nothing is copied.  The
 * activation side (wq->act and the a_* parameters) is the model builder's
 * (lib/engine/hfweights.c); here wq->act is QK_F32. */
#include "formats/ckpt.h"

#include <stdio.h>
#include <string.h>

#include "kernels/elements.h"
#include "kernels/wq.h"

static int unsupported(const qk_ck_tensor *t, qk_err *err, const char *what)
{
    return qk_errf(err, QK_EINPUT, "%s: %s layout: %s is not supported by the products", t->name,
                   qk_ck_layout_name(t->layout), what);
}

static float scalar_of(const qk_hf_tensor *s)
{
    return qk_wq_val(s->data, s->type, 0);
}

static bool float_part(const qk_hf_tensor *s)
{
    return s->type == QK_F32 || s->type == QK_F16 || s->type == QK_BF16 || s->type == QK_F8_E4M3;
}

/* The scale grid of the fp8 / int8 / pack layouts: blocks of block_r x
 * block_c over a scale_rows x scale_cols grid, row-major. */
static void grid_of(const qk_ck_tensor *t, const qk_hf_tensor *p, qk_wq_grid *g)
{
    *g = (qk_wq_grid){.p = p->data, .type = p->type, .rdiv = t->block_r > 0 ? t->block_r : 1,
                      .cdiv = t->block_c > 0 ? t->block_c : t->cols, .rs = t->scale_cols, .cs = 1};
}

int qk_ckpt_wq(const qk_ck_tensor *t, qk_wq *w, qk_err *err)
{
    memset(w, 0, sizeof *w);
    w->act = QK_F32;
    w->rows = t->rows;
    w->cols = t->cols;
    w->bytes = t->stored_bytes;
    w->bits = t->bits;
    w->elem = t->elem;
    w->g = 1.0f;
    if (t->layout != QK_CK_DENSE && t->n_dims != 2)
        return unsupported(t, err, "a weight that is not a matrix");
    const qk_hf_tensor *s = t->scale;
    switch (t->layout) {
    case QK_CK_FP8:
    case QK_CK_INT8:
        w->type = t->layout == QK_CK_FP8 ? QK_W_FP8 : QK_W_INT8;
        w->q = t->w->data;
        w->q_rs = t->cols;
        if (!float_part(s) && s->type != QK_U8)
            return unsupported(t, err, "a scale of this dtype");
        grid_of(t, s, &w->s);
        if (s->type == QK_U8) /* MXFP8: E8M0 exponents */
            w->s.type = QK_E8M0;
        if (t->zero) {
            grid_of(t, t->zero, &w->z);
            if (t->zero->type != QK_I8 && t->zero->type != QK_U8 && t->zero->type != QK_I32 && !float_part(t->zero))
                return unsupported(t, err, "a zero point of this dtype");
        }
        return QK_OK;
    case QK_CK_PACK:
        w->type = QK_W_PACK;
        w->q = t->w->data;
        w->q_rs = t->w->shape[1] * 4;
        w->order = t->bitstream ? QK_WQ_STREAM : QK_WQ_WORDS;
        w->code_offset = 1 << (t->bits - 1);
        if (!float_part(s))
            return unsupported(t, err, "a scale of this dtype");
        grid_of(t, s, &w->s);
        if (t->scale_rows == 1)
            w->s.rdiv = t->rows;
        if (t->zero) {
            if (t->zero_packed) {
                w->z = (qk_wq_grid){.p = t->zero->data, .type = QK_I32, .rdiv = 1, .cdiv = w->s.cdiv,
                                    .rs = t->scale_cols, .cs = 1, .bits = t->bits,
                                    .offset = -(1 << (t->bits - 1)), .stream = t->bitstream};
            } else {
                grid_of(t, t->zero, &w->z);
                w->z.rdiv = w->s.rdiv;
            }
        }
        if (t->gidx) {
            if (t->gidx->type != QK_I32)
                return unsupported(t, err, "a weight_g_idx that is not I32");
            w->gidx = t->gidx->data;
        }
        return QK_OK;
    case QK_CK_NVFP4_CT:
    case QK_CK_NVFP4_MO:
    case QK_CK_MXFP4_CT:
        w->type = t->layout == QK_CK_MXFP4_CT ? QK_W_MXFP4 : QK_W_NVFP4;
        w->q = t->w->data;
        w->q_rs = t->w->shape[1];
        w->s = (qk_wq_grid){.p = s->data, .type = t->layout == QK_CK_MXFP4_CT ? QK_E8M0 : QK_F8_E4M3,
                            .rdiv = 1, .cdiv = t->group, .rs = t->scale_cols, .cs = 1};
        if (t->scale2) {
            w->g = scalar_of(t->scale2);
            w->g_div = t->layout == QK_CK_NVFP4_CT;
        }
        return QK_OK;
    case QK_CK_AWQ:
    case QK_CK_GPTQ: {
        const bool awq = t->layout == QK_CK_AWQ;
        const int pf = 32 / t->bits;
        w->type = awq ? QK_W_AWQ : QK_W_GPTQ;
        w->order = awq ? QK_WQ_AWQ : QK_WQ_GPTQ;
        w->q = t->w->data;
        if (awq && t->rows % pf)
            return unsupported(t, err, "output features that are no multiple of the packing");
        /* scales [ngroups, N]: cell (n, g) at g * N + n */
        w->s = (qk_wq_grid){.p = s->data, .type = s->type, .rdiv = 1, .cdiv = t->group, .rs = 1, .cs = t->rows};
        if (!float_part(s))
            return unsupported(t, err, "a scale of this dtype");
        w->z = (qk_wq_grid){.p = t->zero->data, .type = QK_I32, .rdiv = 1, .cdiv = t->group, .rs = 1,
                            .cs = t->zero->shape[1], .bits = t->bits, .offset = t->zero_offset ? 1 : 0,
                            .awq_order = awq};
        if (t->gidx) {
            if (t->gidx->type != QK_I32)
                return unsupported(t, err, "a g_idx that is not I32");
            w->gidx = t->gidx->data;
        }
        (void)pf;
        return QK_OK;
    }
    case QK_CK_MLX:
        w->q = t->w->data;
        w->q_rs = t->w->shape[1] * 4;
        if (t->bias) { /* affine */
            w->type = QK_W_MLX;
            w->order = QK_WQ_STREAM;
            w->bias = true;
            w->s = (qk_wq_grid){.p = s->data, .type = s->type, .rdiv = 1, .cdiv = t->group, .rs = t->scale_cols, .cs = 1};
            w->z = w->s;
            w->z.p = t->bias->data;
            w->z.type = t->bias->type;
            if (!float_part(s) || !float_part(t->bias))
                return unsupported(t, err, "scales or biases of this dtype");
            return QK_OK;
        }
        w->s = (qk_wq_grid){.p = s->data, .type = t->scale_elem == QK_ELEM_E8M0 ? QK_E8M0 : QK_F8_E4M3, .rdiv = 1,
                            .cdiv = t->group, .rs = t->scale_cols, .cs = 1};
        w->type = t->elem == QK_ELEM_FP8_E4M3 ? QK_W_FP8 : t->scale_elem == QK_ELEM_E8M0 ? QK_W_MXFP4 : QK_W_NVFP4;
        return QK_OK;
    case QK_CK_BNB4:
        w->type = QK_W_BNB4;
        w->q = t->w->data;
        w->block = t->blocksize;
        w->s = (qk_wq_grid){.p = s->data, .type = s->type, .rdiv = 1, .cdiv = t->blocksize};
        if (t->qmap->type != QK_F32)
            return unsupported(t, err, "a quant_map that is not F32");
        w->qmap = t->qmap->data;
        if (t->nabsmax) {
            if (t->nqmap->type != QK_F32 || t->nabsmax->type != QK_F32)
                return unsupported(t, err, "a nested quant_map or absmax that is not F32");
            w->nested_map = t->nqmap->data;
            w->nested_absmax = t->nabsmax->data;
            w->nested_block = t->nested_blocksize;
            w->nested_offset = t->nested_offset;
        } else if (!float_part(s)) {
            return unsupported(t, err, "an absmax of this dtype");
        }
        return QK_OK;
    case QK_CK_BNB8:
        w->type = QK_W_BNB8;
        w->q = t->w->data;
        w->q_rs = t->cols;
        w->s = (qk_wq_grid){.p = s->data, .type = s->type, .rdiv = 1, .cdiv = t->cols, .rs = 1};
        if (!float_part(s))
            return unsupported(t, err, "an SCB of this dtype");
        return QK_OK;
    default:
        return unsupported(t, err, "this layout");
    }
}
