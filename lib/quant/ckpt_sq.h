/* ckpt_sq.h - SmoothQuant for qk-quant --to ct-w8a8 --method smoothquant
 * (and smoothquant+gptq), as llm-compressor's SmoothQuantModifier (0.14,
 * modifiers/transform/smoothquant) computes it (ckpt_sq.c; driven by
 * ckpt_calib.c through the sequential pipeline of gptq_model.h). */
#ifndef QK_CKPT_SQ_H
#define QK_CKPT_SQ_H

#include <stdint.h>

#include "lib/core/err.h"
#include "lib/quant/gptq_model.h"

enum { QK_SQ_NB = 5 }; /* the balance layers of a decoder layer: q k v gate up */

typedef struct qk_sq {
    float alpha;              /* smoothing strength */
    int n_layer;
    int64_t e;                /* n_embd: the smoothed channels */
    float *mn[2], *mx[2];     /* the layer's norm outputs (q/k/v's, gate/up's input), per channel */
    int64_t seen[2];
    qk_layer *layers;         /* per layer: the pipeline's layer, pointing at the smoothed copies */
    float **w;                /* n_layer x QK_SQ_NB smoothed balance weights (engine row order, F32) */
    float **norm;             /* n_layer x 2: input_layernorm, post_attention_layernorm, smoothed */
} qk_sq;

/* Errors: an architecture the Llama mappings do not fit (gemma, phi3, gpt-oss: code 2, naming path). */
int qk_sq_init(qk_sq *q, const qk_model *m, double alpha, const char *path, qk_err *err);
void qk_sq_free(qk_sq *q);
/* The sequential pipeline's on_input: a slot's input rows (cols wide). */
int qk_sq_on_input(qk_sq *q, int slot, const float *x, int n, int64_t cols, qk_err *err);
/* After the calibration pass of layer l: smooth it (q->w, q->norm, q->layers[l]) and point the
 * pipeline's layer at the smoothed float weights, which the next pass runs. */
int qk_sq_layer(qk_sq *q, qk_gptq_seq *s, int l, qk_err *err);
/* Balance weight b (0..4: q k v gate up) of layer l as the engine holds it. */
qk_weight *qk_sq_balance(qk_layer *L, int b);

#endif
