/* model.h - a decoder-only transformer's hyper-parameters and weights, read
 * from a GGUF file (llama.cpp's tensor names and metadata keys).
 *
 * Architectures (lib/engine/arch.c holds their traits): llama (and mistral,
 * mixtral: llama with experts), qwen2 (q/k/v biases), qwen3 (RMSNorm on each
 * q and k head), qwen2moe (experts and a gated shared expert), qwen3moe,
 * gpt-oss (experts with biases, attention sinks, sliding-window layers, YaRN),
 * gemma2, gemma3 (scaled embeddings, GeGLU, pre- and post-norms, soft-capping,
 * sliding-window layers), phi3 (fused qkv and gate/up, LongRoPE).  Weights
 * stay in the file mapping in their stored type (experts too: a 3-D tensor is
 * n_expert matrices side by side); only the small 1-D tensors (norms, biases,
 * rope frequency factors) are decoded to owned float arrays. */
#ifndef QK_MODEL_H
#define QK_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/core/err.h"
#include "formats/gguf.h"
#include "kernels/wq.h"

typedef enum qk_arch {
    QK_ARCH_LLAMA, QK_ARCH_QWEN2, QK_ARCH_QWEN3, QK_ARCH_QWEN2MOE, QK_ARCH_QWEN3MOE,
    QK_ARCH_GPT_OSS, QK_ARCH_GEMMA2, QK_ARCH_GEMMA3, QK_ARCH_PHI3
} qk_arch;

/* ggml's rope modes: NORMAL rotates adjacent pairs (2i, 2i+1), NEOX rotates
 * (i, i + n_rot/2). */
typedef enum qk_rope_mode { QK_ROPE_NORMAL = 0, QK_ROPE_NEOX = 2 } qk_rope_mode;

/* How rope frequencies are scaled: LINEAR is freq_scale alone (also "none";
 * LongRoPE is its per-frequency divisors, qk_model.rope_long/short, with
 * rope_attn_factor); YARN mixes interpolated and extrapolated frequencies per
 * dimension and scales cos/sin. */
typedef enum qk_rope_scaling { QK_ROPE_LINEAR, QK_ROPE_YARN } qk_rope_scaling;

/* The FFN's activation: silu(gate) * up; gelu_tanh(gate) * up (ggml's GeGLU,
 * the F16 table); gpt-oss's clamped SwiGLU
 * min(g, limit) * sigmoid(alpha min(g, limit)) * (clamp(u, -limit, limit) + 1). */
typedef enum qk_ffn_act { QK_ACT_SILU, QK_ACT_GELU, QK_ACT_SWIGLU_OAI } qk_ffn_act;

/* Expert routing: SOFTMAX, softmax over all experts then the top k (their
 * weights divided by their sum when expert_norm); TOPK_SOFTMAX, the top k
 * logits then a softmax over those k (gpt-oss). */
typedef enum qk_gating { QK_GATE_SOFTMAX, QK_GATE_TOPK_SOFTMAX } qk_gating;

typedef struct qk_hparams {
    char arch_name[32];   /* general.architecture as written */
    qk_arch arch;
    qk_rope_mode rope_mode;
    int n_vocab;          /* rows of token_embd.weight */
    int n_embd;
    int n_layer;
    int n_ff;
    int n_head;
    int n_head_kv;
    int head_dim;         /* attention.key_length (default n_embd / n_head) */
    int head_dim_v;       /* attention.value_length (default head_dim) */
    int n_rot;            /* rope.dimension_count (default head_dim) */
    int n_ctx_train;      /* context_length (0 when absent) */
    float rope_freq_base; /* default 10000 */
    float rope_freq_scale; /* 1 / rope.scaling.factor for linear scaling, else 1 */
    float rms_eps;
    float kq_scale;       /* attention.scale, default 1/sqrt(head_dim) */

    /* ---- the traits of the families beyond llama (lib/engine/arch.c) ---- */
    bool qk_norm;         /* RMSNorm of each q and k head (qwen3, qwen3moe, gemma3) */
    bool q_prescale;      /* q is multiplied by kq_scale before attention, scores by 1 (gemma, phi3) */
    bool post_norms;      /* RMSNorm of the attention and FFN outputs before the residual (gemma) */
    bool attn_sinks;      /* a learnt logit per head joins each softmax (gpt-oss) */
    bool norm_plus_one;   /* norm weights are stored as w - 1 (Hugging Face gemma): load adds 1 */
    qk_ffn_act ffn_act;
    float swiglu_alpha, swiglu_limit; /* QK_ACT_SWIGLU_OAI */
    float embd_scale;     /* embeddings multiplied by this (gemma: sqrt(n_embd)); 0: not */
    float attn_softcap;   /* scores become c tanh(s / c) (gemma2); 0: not */
    float final_softcap;  /* logits become c tanh(l / c) (gemma2, gemma3 when set); 0: not */
    /* sliding-window attention: layer il attends to the n_swa latest
     * positions (its own included) when il % swa_period < swa_period - 1;
     * swa_period 0: every layer does, n_swa 0: none */
    int n_swa, swa_period;
    float rope_freq_base_swa, rope_freq_scale_swa; /* rope of the sliding-window layers */
    /* rope scaling (see qk_rope_scaling) */
    qk_rope_scaling rope_scaling;
    int n_ctx_orig;       /* YaRN / LongRoPE: the original training context */
    float yarn_ext_factor, yarn_beta_fast, yarn_beta_slow;
    bool yarn_truncate;   /* correction dimensions floored / ceiled (llama.cpp; transformers' "truncate") */
    float rope_attn_factor; /* cos and sin multiplied by this (1: not) */
    /* mixture of experts: n_expert 0 for a dense model */
    int n_expert, n_expert_used;
    int n_ff_exp;         /* rows of each expert's gate and up (expert_feed_forward_length) */
    int n_ff_shexp;       /* the shared expert's (qwen2moe) */
    qk_gating gating;
    bool expert_norm;     /* SOFTMAX: the k weights divided by their sum */
    bool moe_dense_layers; /* a layer without a router is a dense one (qwen's decoder_sparse_step) */
} qk_hparams;

/* A 2-D weight matrix in the mapping: rows of `cols` elements of `type`. */
typedef struct qk_weight {
    const char *name;     /* points into the source (not NUL-terminated: see name_len) */
    int name_len;
    int type;             /* ggml type id */
    int64_t rows, cols;   /* ne[1], ne[0] */
    size_t row_size;      /* bytes per row */
    const uint8_t *data;
    /* The rows repacked at load for the active CPU level's packed_tile
     * (kernels/cpu.h), in groups of QK_PACK_ROWS; NULL when the type and
     * level have no packed kernel or rows is not a multiple of the group. */
    const uint8_t *packed;
    int mapped;           /* data is file pages that may be dropped once packed (qk_src_tensor) */
    /* A weight of a quantized Hugging Face checkpoint whose parts are
     * separate tensors: its view (kernels/wq.h), computed by its type's
     * (QK_W_*) wq kernels; data and row_size are then unused.  NULL for
     * every one-array type. */
    const qk_wq *wq;
    /* An online Hadamard on the product's input (a Hugging Face checkpoint's
     * transform_config "input" transform, lib/engine/hfxform.c): blocks of
     * in_had elements, kernels/hadamard.h's float64 rule when in_had_f64;
     * 0: none.  The forward pass applies it before the products. */
    int in_had;
    bool in_had_f64;
} qk_weight;

/* A layer's experts: n_expert matrices of each kind (views of a 3-D GGUF
 * tensor, or one Hugging Face tensor each) and their optional biases. */
typedef struct qk_experts {
    qk_weight *gate, *up, *down;     /* n_expert each (owned arrays) */
    const float *gate_b, *up_b, *down_b; /* [n_expert][n_ff_exp], [n_expert][n_embd]; or NULL */
} qk_experts;

typedef struct qk_layer {
    const float *attn_norm;          /* [n_embd] */
    qk_weight wq, wk, wv, wo;        /* fused attn_qkv (phi3): three row ranges of it */
    const float *bq, *bk, *bv, *bo;  /* optional biases (NULL when absent) */
    const float *q_norm, *k_norm;    /* [head_dim], hp.qk_norm */
    const float *attn_post_norm;     /* [n_embd], hp.post_norms */
    const float *sinks;              /* [n_head], hp.attn_sinks */
    bool swa;                        /* sliding-window layer */
    const float *ffn_norm;           /* [n_embd] */
    const float *ffn_post_norm;      /* [n_embd], hp.post_norms */
    /* dense FFN (also phi3's fused gate_up: two row ranges of ffn_up) */
    qk_weight w_gate, w_up, w_down;
    /* an FP8 E4M3 KV cache with static per-tensor scales (a quantized HF
     * checkpoint's kv_cache_scheme, k_scale and v_scale): keys (after rope)
     * and values enter the cache as e4m3(x / scale) * scale; 0: none */
    float kv_scale[2];
    /* mixture of experts (moe: this layer has them) */
    bool moe;
    qk_weight gate_inp;              /* router [n_expert rows of n_embd] */
    const float *gate_inp_b;         /* [n_expert] or NULL */
    qk_experts exps;
    bool shexp;                      /* qwen2moe's shared expert */
    qk_weight gate_inp_shexp;        /* one row: its sigmoid gate */
    qk_weight gate_shexp, up_shexp, down_shexp;
} qk_layer;

typedef struct qk_model {
    qk_hparams hp;
    const qk_gguf *gguf;             /* borrowed: must outlive the model (NULL: other source) */
    qk_weight tok_embd;              /* [n_vocab rows of n_embd] */
    const float *output_norm;        /* [n_embd] */
    qk_weight output;                /* lm head; tok_embd when output.weight is absent */
    const float *output_bias;        /* optional [n_vocab] */
    const float *rope_freqs;         /* optional [n_rot/2] frequency divisors */
    const float *rope_long, *rope_short; /* LongRoPE divisors [n_rot/2] (phi3) */
    qk_layer *layers;                /* n_layer */
    void **owned;                    /* decoded 1-D tensors and packed weights, freed with the model */
    int n_owned, cap_owned;
} qk_model;

/* Read hyper-parameters and locate every tensor.  Errors (code 2) name the
 * missing key or tensor, the unsupported architecture or the bad shape. */
int qk_model_load(qk_model *m, const qk_gguf *g, qk_err *err);

/* The hyper-parameters of a GGUF file alone (lib/engine/arch.c). */
int qk_gguf_hparams(const qk_gguf *g, qk_hparams *hp, qk_err *err);

/* Set the traits of architecture `name` ("llama", "qwen3moe", "gemma2", ...)
 * in *hp: arch, rope mode, and the defaults of its trait fields.  Returns
 * false for an unknown name.  *list: the supported names, for messages. */
bool qk_arch_set(qk_hparams *hp, const char *name, size_t len);
const char *qk_arch_list(void);

/* Whether layer il attends to a sliding window (hp.n_swa, hp.swa_period). */
bool qk_layer_is_swa(const qk_hparams *hp, int il);

/* ---- other tensor sources (lib/engine/hfmodel.h builds one for Hugging Face
 * directories) ----------------------------------------------------------------- */

/* A tensor as a source presents it, looked up by its GGUF name. */
typedef struct qk_src_tensor {
    const char *name;    /* the source's own name (messages, qk_weight.name) */
    int name_len;
    int type;            /* ggml type id */
    int64_t ne[4];       /* ggml order; unused dims 1 */
    const uint8_t *data; /* must outlive the model */
    uint64_t offset;     /* file offset of its description, for messages */
    /* data lies in a qk_map_open mapping: once the matrix is repacked (and
     * its one-token products read the copy too), its pages may be dropped
     * (lib/core/mapfile.h qk_map_release) */
    int mapped;
    /* a parted weight (type QK_W_*, data NULL): its view, owned by the
     * source, outliving the model */
    const qk_wq *wq;
} qk_src_tensor;

typedef struct qk_model_source {
    const char *path;    /* for messages */
    void *ctx;
    /* The tensor llama.cpp calls `name` ("blk.0.attn_q.weight"): returns 1
     * and fills *out when present, 0 when absent, -1 with err set on failure. */
    int (*find)(void *ctx, const char *name, qk_src_tensor *out, qk_err *err);
    /* The source's name for GGUF name `name` (used in "missing" messages);
     * NULL: the GGUF name. */
    void (*source_name)(void *ctx, const char *name, char *buf, size_t n);
    /* Expert e's matrix (2-D) of the expert tensor GGUF calls `name`
     * ("blk.0.ffn_gate_exps.weight"), for sources that store one tensor per
     * expert: as find.  NULL: experts are 3-D tensors found by find. */
    int (*find_expert)(void *ctx, const char *name, int e, qk_src_tensor *out, qk_err *err);
} qk_model_source;

/* Locate every tensor for the hyper-parameters *hp (n_vocab is taken from
 * the embeddings).  m->gguf is NULL afterwards.  Errors as qk_model_load. */
int qk_model_load_source(qk_model *m, const qk_hparams *hp, const qk_model_source *src,
                         qk_err *err);
void qk_model_free(qk_model *m);

/* Decode row `row` of a weight into out[w->cols] floats (token embeddings). */
int qk_weight_row(const qk_weight *w, int64_t row, float *out, qk_err *err);

#endif
