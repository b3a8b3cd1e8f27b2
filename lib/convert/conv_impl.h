/* conv_impl.h - what the files of lib/convert share (not a public header). */
#ifndef QK_CONV_IMPL_H
#define QK_CONV_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/gguf.h"
#include "formats/hfdir.h"
#include "lib/convert/convert.h"
#include "lib/core/jsonp.h"

/* One row of the architecture table: a converter model class. */
typedef struct qk_conv_arch {
    const char *hf_arch[4];     /* config.json "architectures"[0] */
    const char *gguf_arch;      /* general.architecture */
    bool permute_qk;            /* LlamaModel.undo_permute: q/k rows for rope */
    bool llama_class;           /* LlamaModel: vocab_size, rope.dimension_count, add_prefix_space */
    bool experts;               /* Mixtral: block_sparse_moe experts stacked per layer */
} qk_conv_arch;

/* AutoConfig's defaults for the keys the converter reads, per model_type. */
typedef struct qk_conv_defaults {
    const char *model_type;
    int64_t max_position_embeddings, vocab_size, intermediate_size, hidden_size, num_hidden_layers;
    int64_t num_attention_heads;
    int64_t num_key_value_heads;    /* 0: num_attention_heads */
    int64_t head_dim;               /* 0: hidden_size / heads; -1: none */
    double rms_norm_eps, rope_theta;
    int64_t num_local_experts, num_experts_per_tok;   /* 0: not a mixture of experts */
} qk_conv_defaults;

/* The hyper-parameters after AutoConfig (config.json over the defaults). */
typedef struct qk_conv_hp {
    int64_t n_layer, n_ctx, n_embd, n_ff, n_head, n_head_kv, head_dim, vocab_size, n_expert, n_expert_used;
    bool has_head_dim;
    double rms_eps, rope_theta;
} qk_conv_hp;

const qk_conv_arch *qk_conv_arch_find(const char *hf_arch);
/* Resolve the hyper-parameters of config (model_type's defaults); refuses
 * what qk does not reproduce (rope scaling, sliding windows, ...). */
int qk_conv_hparams(const qk_jsonv *config, const char *path, qk_conv_hp *hp, qk_err *err);
/* Write general.file_type's neighbours: TextModel.set_gguf_parameters and
 * the model class's additions, in the converter's order. */
int qk_conv_write_hparams(qk_gguf_writer *w, const qk_conv_arch *a, const qk_conv_hp *hp, int ftype, qk_err *err);

/* One output tensor of the plan. */
typedef struct qk_conv_tensor {
    const qk_hf_tensor *src;    /* the first (or only) source */
    const qk_hf_tensor **srcs;  /* n_src > 1: stacked experts, in expert order */
    int n_src;
    uint32_t n_dims;
    int64_t ne[4];              /* ggml order */
    char name[96];              /* GGUF name */
    int type;                   /* kernels/types.h id of the output */
    int perm_heads;             /* > 0: rope permutation with this many heads */
    uint64_t nbytes;
    int shard;
} qk_conv_tensor;

/* Convert and write t's data (row blocks, pages released behind). */
int qk_conv_write_tensor(qk_gguf_writer *w, const qk_conv_tensor *t, int threads, qk_err *err);

#endif
