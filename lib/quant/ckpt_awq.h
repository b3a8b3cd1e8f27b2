/* ckpt_awq.h - AWQ scales for qk-quant --to ct-w4a16 --method awq, as
 * llm-compressor's AWQModifier computes them (ckpt_awq.c; driven by
 * ckpt_calib.c through the sequential pipeline of gptq_model.h). */
#ifndef QK_CKPT_AWQ_H
#define QK_CKPT_AWQ_H

#include <stdint.h>

#include "lib/core/err.h"
#include "lib/engine/matmul.h"
#include "lib/quant/ckpt_calib.h"
#include "lib/quant/gptq_model.h"

typedef struct qk_awq {
    const qk_calib_target *t;
    int64_t n_tok;
    int nthreads;
    int phase;
    double *xs[QK_GS_N];     /* sum |x| per input channel, per slot */
    int64_t nx[QK_GS_N];
    float *o_in, *d_in, *cap; /* o_proj's and down_proj's inputs (n_tok rows); a re-run's */
    int64_t n_o, n_d, n_cap;
    float *cur[7];           /* the layer's weights (q k v o gate up down), smoothed, engine row order */
    int64_t rows[7], cols[7];
    float *norm[2];          /* input_layernorm, post_attention_layernorm, smoothed */
    qk_matmul_ws ws;
} qk_awq;

int qk_awq_init(qk_awq *a, const qk_calib_target *t, const qk_model *m, int64_t n_tok, int nthreads, qk_err *err);
void qk_awq_free(qk_awq *a);
/* The sequential pipeline's on_input: a slot's input rows (cols wide). */
int qk_awq_on_input(qk_awq *a, int slot, const float *x, int n, int64_t cols, qk_err *err);
/* After the calibration pass of layer l: smooth it (a->cur, a->norm) and point
 * the pipeline's layer at the smoothed float weights. */
int qk_awq_layer(qk_awq *a, qk_gptq_seq *s, int l, qk_err *err);

#endif
