/* forward_impl.h - what the parts of the forward pass share (lib/engine/
 * only): forward.c runs the layers and calls the attention of attention.c
 * and the mixture-of-experts block of moe.c. */
#ifndef QK_FORWARD_IMPL_H
#define QK_FORWARD_IMPL_H

#include "lib/engine/forward.h"

/* ggml_compute_forward_rms_norm_f32 followed by ggml_mul with the weight:
 * squares summed in double, scale = 1/sqrtf(mean + eps) in float. */
void qk_rmsnorm(float *y, const float *x, const float *w, int n, float eps);

/* y[r][i] += b[i] for n_rows rows of n (b NULL: nothing). */
void qk_add_rows(float *y, const float *b, int n_rows, int n);

/* Attention of the batch's n_tok queries (c->q) against layer il's cache
 * (kc, vc: keys and values of positions 0 .. c->n_past + n_tok - 1 already
 * stored; kqc: KIVI's quantized key groups or NULL) into c->att. */
int qk_attend(qk_ctx *c, int il, const void *kc, const void *vc, const float *kqc, int n_tok,
              qk_err *err);

/* The products of weights w[0..nw) with one input x (n_tok rows), after
 * the calibration hook (qk_ctx_params.mm_hook) has seen x once per weight. */
int qk_ctx_products(qk_ctx *c, const qk_weight *const *w, float *const *y, int nw, const float *x,
                    int n_tok, qk_err *err);

/* The FFN of a layer with experts: c->xb (n_tok rows) in, c->proj out. */
int qk_moe_block(qk_ctx *c, const qk_layer *L, int n_tok, qk_err *err);

/* The FFN activation in place on n elements: g = act(g, u) (model.h qk_ffn_act). */
void qk_ffn_act_rows(const qk_hparams *hp, float *g, const float *u, size_t n);

#endif
