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

/* Where key or value row p of KV head h sits in a layer's cache (elements;
 * len = head_dim or head_dim_v).  The caches are head-major: one head's rows
 * of a layer are contiguous, so attention streams them (a decode step reads
 * each layer's cache once, and rows kv_dim apart read at a third of the
 * bandwidth of contiguous ones).  The KIVI key copy (kq_cache) stays
 * token-major: its per-channel groups are whole token rows. */
static inline size_t qk_kv_off(const qk_ctx *c, int h, int p, int len)
{
    return ((size_t)h * (size_t)c->n_ctx + (size_t)p) * (size_t)len;
}

#endif
