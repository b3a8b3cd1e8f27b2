/* model.h - a decoder-only transformer's hyper-parameters and weights, read
 * from a GGUF file (llama.cpp's tensor names and metadata keys).
 *
 * Architectures: llama (and mistral, the same graph), qwen2 (q/k/v biases),
 * qwen3 (RMSNorm on each q and k head).  Weights stay in the file mapping in
 * their stored type; only the small 1-D tensors (norms, biases, rope
 * frequency factors) are decoded to owned float arrays. */
#ifndef QK_MODEL_H
#define QK_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/err.h"
#include "formats/gguf.h"
#include "kernels/wq.h"

typedef enum qk_arch { QK_ARCH_LLAMA, QK_ARCH_QWEN2, QK_ARCH_QWEN3 } qk_arch;

/* ggml's rope modes: NORMAL rotates adjacent pairs (2i, 2i+1), NEOX rotates
 * (i, i + n_rot/2). */
typedef enum qk_rope_mode { QK_ROPE_NORMAL = 0, QK_ROPE_NEOX = 2 } qk_rope_mode;

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
} qk_weight;

typedef struct qk_layer {
    const float *attn_norm;          /* [n_embd] */
    qk_weight wq, wk, wv, wo;
    const float *bq, *bk, *bv, *bo;  /* optional biases (NULL when absent) */
    const float *q_norm, *k_norm;    /* [head_dim], qwen3 only */
    const float *ffn_norm;           /* [n_embd] */
    qk_weight w_gate, w_up, w_down;
    /* an FP8 E4M3 KV cache with static per-tensor scales (a quantized HF
     * checkpoint's kv_cache_scheme, k_scale and v_scale): keys (after rope)
     * and values enter the cache as e4m3(x / scale) * scale; 0: none */
    float kv_scale[2];
} qk_layer;

typedef struct qk_model {
    qk_hparams hp;
    const qk_gguf *gguf;             /* borrowed: must outlive the model (NULL: other source) */
    qk_weight tok_embd;              /* [n_vocab rows of n_embd] */
    const float *output_norm;        /* [n_embd] */
    qk_weight output;                /* lm head; tok_embd when output.weight is absent */
    const float *output_bias;        /* optional [n_vocab] */
    const float *rope_freqs;         /* optional [n_rot/2] frequency divisors */
    qk_layer *layers;                /* n_layer */
    void **owned;                    /* decoded 1-D tensors and packed weights, freed with the model */
    int n_owned, cap_owned;
} qk_model;

/* Read hyper-parameters and locate every tensor.  Errors (code 2) name the
 * missing key or tensor, the unsupported architecture or the bad shape. */
int qk_model_load(qk_model *m, const qk_gguf *g, qk_err *err);

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
} qk_model_source;

/* Locate every tensor for the hyper-parameters *hp (n_vocab is taken from
 * the embeddings).  m->gguf is NULL afterwards.  Errors as qk_model_load. */
int qk_model_load_source(qk_model *m, const qk_hparams *hp, const qk_model_source *src,
                         qk_err *err);
void qk_model_free(qk_model *m);

/* Decode row `row` of a weight into out[w->cols] floats (token embeddings). */
int qk_weight_row(const qk_weight *w, int64_t row, float *out, qk_err *err);

#endif
