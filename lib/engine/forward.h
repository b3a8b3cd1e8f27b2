/* forward.h - the CPU forward pass: token ids in, next-token logits out.
 *
 * One context holds a model's KV cache and activation buffers for a
 * batch of up to n_batch tokens.  qk_forward() appends tokens to the cache:
 * a prompt goes through as matrix-matrix products a batch at a time, a
 * generated token alone.  Every output element is computed with a fixed
 * reduction order, so logits are bit-identical for any thread count and for
 * any split of the same tokens into calls and batches.
 *
 * The arithmetic follows llama.cpp's graph for these architectures on its CPU
 * backend (see forward.c for the op-by-op references).  Attention is computed
 * as ggml's flash-attention kernel does (online softmax), which llama.cpp
 * uses on the CPU by default.  The KV cache is F32 unless kv_type is QK_F16,
 * llama.cpp's default cache type: keys and values are then stored as F16 and
 * the attention arithmetic is the one llama.cpp's CPU backend uses for a
 * prompt batch (AVX-512 build): an F32 value accumulator when head_dim_v is
 * a multiple of 16, else an F16 one.  That tracks llama.cpp's logits far more
 * closely than an F32 cache (llama-perplexity's printout to 4 decimals on
 * stories260K). */
#ifndef QK_FORWARD_H
#define QK_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/core/err.h"
#include "lib/engine/kvquant.h"
#include "lib/engine/matmul.h"
#include "lib/engine/model.h"
#include "kernels/types.h"

#define QK_MAX_HEAD_DIM 1024

typedef struct qk_ctx_params {
    int n_ctx;    /* KV cache capacity in tokens; 0: the model's context_length (or 2048) */
    int n_batch;  /* most tokens per internal batch; 0: 512 */
    int nthreads; /* <= 1: run on the calling thread */
    int kv_type;  /* QK_F32 (default, 0) or QK_F16: llama.cpp's default cache, see below */
    /* The products' activations (lib/engine/matmul.h): QK_ACT_DEFAULT (0),
     * each weight type's activation encoding as llama.cpp's CPU backend
     * does it, or QK_ACT_F32, float activations for every weight (the model
     * then computes what its weights dequantized to F32 compute, bit for
     * bit).  act_variant: a numerically equivalent variant of the activation
     * encoders (kernels/actvar.h, qk-kld --noise-floor); 0: none. */
    int act_type;
    int act_variant;
    /* Numerics studies (docs/studies.md); zero: off.
     * layer_hook: called on the calling thread after each layer `layer`
     * (0-based) with the batch's residual stream x (n_tok rows of n_embd),
     * which it may change in place, one row independently of the others
     * (lib/study/wire.h's qk_wire_layer_hook simulates a pipeline-wire codec).
     * A non-zero return fails the forward pass with that code.
     * kvq: a KV-cache codec (lib/engine/kvquant.h, copied): keys and values are
     * quantized and dequantized as they are written into the cache, which
     * must then be F32. */
    int (*layer_hook)(void *user, int layer, float *x, int n_tok, int n_embd, qk_err *err);
    void *hook_user;
    const qk_kvq *kvq;
    /* Calibration (lib/quant/imatrix_run.h, lib/quant/gptq.h); NULL: off, at
     * no cost.  mm_hook is called on the calling thread before each weight
     * product with the product's input: n_tok rows of w->cols floats in x
     * (q/k/v and gate/up share one x and get one call per weight; the output
     * product's rows are those whose logits are computed).  It must not
     * change x; a non-zero return fails the forward pass with that code. */
    int (*mm_hook)(void *user, const qk_weight *w, const float *x, int n_tok, qk_err *err);
    void *mm_user;
    /* exp_hook (mm_user's): the experts' products (llama.cpp's MUL_MAT_ID),
     * called on the calling thread before each with the rows routed to
     * expert e: n_rows rows of w->cols floats in x, token order, where w is
     * &L->exps.gate[e], .up[e] (one call each, the same x) or .down[e].  A
     * layer's router and shared expert are dense products (mm_hook).  NULL:
     * off, at no cost.  It must not change x. */
    int (*exp_hook)(void *user, const qk_weight *w, int e, const float *x, int n_rows, qk_err *err);
} qk_ctx_params;

/* One rope table's parameters (ggml_rope_ext's arguments, see forward.c). */
typedef struct qk_rope_params {
    float theta_scale;     /* freq_base^(-2/n_rot) */
    float freq_scale, ext_factor, mscale;
    float corr[2];         /* YaRN's correction dimensions */
    const float *factors;  /* frequency divisors [n_rot/2] or NULL */
} qk_rope_params;

/* The mixture-of-experts block's scratch, for up to QK_MOE_CHUNK tokens. */
#define QK_MOE_CHUNK 64
typedef struct qk_moe_ws {
    float *logits;         /* [chunk][n_expert] router output */
    int32_t *sel;          /* [chunk][n_expert_used] chosen experts, best first */
    float *w;              /* [chunk][n_expert_used] their weights */
    int32_t *rows;         /* [chunk * n_expert_used] (token, slot) of one expert's rows */
    float *x, *g, *u, *d;  /* gathered inputs [n][n_embd], gate/up [n][n_ff_exp], down [n][n_embd] */
    float *slots;          /* [chunk][n_expert_used][n_embd] weighted expert outputs */
    float *sg, *sh;        /* shared expert: gate logit [chunk], output [chunk][n_embd] */
} qk_moe_ws;

typedef struct qk_ctx {
    const qk_model *m;
    int n_ctx, n_batch, nthreads;
    int n_past;                /* tokens in the cache */
    int kv_type;               /* QK_F32 or QK_F16 */
    bool f16_acc;              /* attention accumulates values in F16 (see qk_ctx_new) */
    const struct qk_attn_kernels *attn; /* attention inner loops, active CPU level */
    void (*f16_enc)(const float *src, void *dst, int64_t n); /* F16 row encoder (cache) */
    int kv_dim, kv_dim_v;      /* n_head_kv * head_dim (_v) */
    void *k_cache, *v_cache;   /* [n_layer][n_head_kv][n_ctx][head_dim(_v)] of kv_type (qk_kv_off) */
    int (*layer_hook)(void *user, int layer, float *x, int n_tok, int n_embd, qk_err *err);
    void *hook_user;
    int (*mm_hook)(void *user, const qk_weight *w, const float *x, int n_tok, qk_err *err);
    void *mm_user;
    int (*exp_hook)(void *user, const qk_weight *w, int e, const float *x, int n_rows, qk_err *err);
    bool has_kvq;              /* kvq is applied to the cache */
    qk_kvq kvq;
    float *kq_cache;           /* KIVI: complete key groups quantized per channel, [n_layer][n_ctx][kv_dim] */
    /* activations, n_batch rows each */
    float *x;                  /* residual stream [n_embd] */
    float *xb;                 /* normalised input of a sub-layer [n_embd] */
    float *q;                  /* queries [n_head * head_dim] */
    float *k, *v;              /* new keys and values [kv_dim], [kv_dim_v] */
    float *att;                /* attention output [n_head * head_dim_v] */
    float *proj;               /* output of attn_output / ffn_down [n_embd] */
    float *gate, *up;          /* FFN [max(n_ff, n_ff_shexp)] */
    float *rope;               /* cos/sin per position [n_batch][n_rot] */
    float *rope_swa;           /* the same for sliding-window layers, or NULL: rope */
    qk_rope_params rope_p[2];  /* [0] the other layers, [1] sliding-window layers */
    qk_moe_ws moe;
    qk_matmul_ws ws;
} qk_ctx;

int qk_ctx_new(qk_ctx **out, const qk_model *m, const qk_ctx_params *p, qk_err *err);
void qk_ctx_free(qk_ctx *c);
/* Forget every cached token (n_past = 0). */
void qk_ctx_reset(qk_ctx *c);
/* Forget the cached tokens from position n on (0 <= n <= n_past): the next
 * tokens go to positions n, n+1, ... as if only the first n had been
 * evaluated.  Not with a per-channel key codec (KIVI), whose key groups would
 * be stale (code 2). */
int qk_ctx_rewind(qk_ctx *c, int n, qk_err *err);

/* Evaluate tokens[0..n) at positions n_past .. n_past+n-1 and append them to
 * the cache.  logits (may be NULL): all_logits ? n rows : 1 row (the last
 * token's) of n_vocab floats.  Errors: a token id outside the vocabulary or
 * a full cache (code 2; nothing is appended), out of memory (code 3). */
int qk_forward(qk_ctx *c, const int32_t *tokens, int n, float *logits, bool all_logits,
               qk_err *err);

/* The forward pass in its stages, for calibration pipelines that run a
 * model layer by layer (lib/quant/gptq.h); the same arithmetic as
 * qk_forward.
 * qk_forward_embed: the embedding rows of tokens[0..n) into x (n rows of
 * n_embd); a token outside the vocabulary is code 2.
 * qk_forward_layers: layers [l0, l1) on the residual stream x (n <= n_batch
 * rows of n_embd, updated in place) of the tokens at positions n_past ..
 * n_past+n-1, whose keys and values go into those layers' caches; n_past
 * advances by n.  A full cache or too many rows is code 2.
 * qk_forward_head: the final norm and output product of the n rows of x
 * (n <= n_batch) into logits (n rows of n_vocab); logits NULL: the norm
 * only, for the mm_hook, which still sees the output product's input. */
int qk_forward_embed(const qk_model *m, const int32_t *tokens, int n, float *x, qk_err *err);
int qk_forward_layers(qk_ctx *c, float *x, int n, int l0, int l1, qk_err *err);
int qk_forward_head(qk_ctx *c, const float *x, int n, float *logits, qk_err *err);
/* The output layer on n rows of final hidden states h (after the output
 * norm): logits = Wout h + bout, soft-capped when the model says so; the
 * forward pass's own last step. */
int qk_output_logits(const qk_model *m, const float *h, int n, float *logits, qk_matmul_ws *ws,
                     int nthreads, qk_err *err);

/* Bytes the cached tokens would take in the cache's storage type (the KV
 * codec's, scales included, when one is set), all layers. */
double qk_ctx_kv_bytes(const qk_ctx *c);

#endif
