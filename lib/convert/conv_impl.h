/* conv_impl.h - what the files of lib/convert share (not a public header). */
#ifndef QK_CONV_IMPL_H
#define QK_CONV_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/gguf.h"
#include "formats/hfdir.h"
#include "lib/convert/convert.h"
#include "lib/core/jsonp.h"

/* The converter classes qk reproduces (conversion/{llama,qwen,gemma,phi,
 * gpt_oss}.py): each decides the hyper-parameter keys, the tensor handling
 * and the vocabulary path. */
enum qk_conv_class {
    QK_CC_LLAMA,     /* LlamaModel: Llama, Mistral, Mixtral */
    QK_CC_QWEN2,     /* Qwen2Model, Qwen3Model */
    QK_CC_QWEN2MOE,  /* Qwen2MoeModel, Qwen3MoeModel */
    QK_CC_GEMMA2,    /* Gemma2Model */
    QK_CC_GEMMA3,    /* Gemma3Model */
    QK_CC_PHI3,      /* Phi3MiniModel */
    QK_CC_GPT_OSS,   /* GptOssModel */
};

/* Per-expert tensors stacked into one 3-D tensor per layer and kind, in the
 * order the class emits them (w1 w2 w3 for Mixtral: gate, down, up;
 * down_proj gate_proj up_proj for Qwen). */
enum { QK_EXP_NONE, QK_EXP_MIXTRAL, QK_EXP_QWEN };

/* One row of the architecture table. */
typedef struct qk_conv_arch {
    const char *hf_arch;        /* config.json "architectures"[0] */
    const char *gguf_arch;      /* general.architecture */
    int cls;                    /* enum qk_conv_class */
    bool permute_qk;            /* LlamaModel.undo_permute: q/k rows for rope */
    int experts;                /* QK_EXP_* */
    bool norm_plus_one;         /* gemma: "*norm.weight" + 1 (Gemma RMSNorm's 1 + w) */
    bool skip_lm_head;          /* gemma2's filter_tensors drops lm_head.weight */
} qk_conv_arch;

/* The hyper-parameters as the converter sees them: transformers'
 * AutoConfig(...).to_dict() (config.json over the model type's defaults,
 * rope_theta / rope_scaling folded into rope_parameters), then
 * TextModel.__init__'s rope_parameters mirroring. */
typedef struct qk_conv_cfg {
    const qk_jsonv *cfg;        /* config.json */
    qk_jsonv *dflt;             /* the model type's defaults (owned) */
    const char *path;           /* config.json's path, for messages */
    const char *model_type;
    bool derive_head_dim;       /* LlamaConfig / MistralConfig: head_dim = hidden / heads when null */
    /* rope_parameters: rope, or per layer type (gemma3) full / swa */
    const qk_jsonv *rope, *rope_full, *rope_swa;
    double rope_theta, swa_theta;     /* NAN: none */
    const char *rope_type;            /* of the full-attention layers; NULL: none */
    double partial_rotary, orig_ctx;  /* mirrored top-level keys; NAN: none */
} qk_conv_cfg;

/* The numbers the tensors and vocabulary need. */
typedef struct qk_conv_hp {
    int64_t n_layer, n_embd, n_head, n_head_kv, head_dim, vocab_size, n_expert, n_expert_used;
} qk_conv_hp;

const qk_conv_arch *qk_conv_arch_find(const char *hf_arch);
/* The names of the table, for messages ("A, B and C"). */
const char *qk_conv_arch_list(void);

/* Read config.json's view (defaults of its model_type) into *c and the
 * numbers into *hp; refuses (QK_EINPUT, one line) what qk does not
 * reproduce.  qk_conv_cfg_free releases c. */
int qk_conv_cfg_load(qk_conv_cfg *c, const qk_conv_arch *a, const qk_jsonv *config, const char *path,
                     qk_conv_hp *hp, qk_err *err);
void qk_conv_cfg_free(qk_conv_cfg *c);
/* hparams[key] (NULL: absent; a QK_JNULL value: None). */
const qk_jsonv *qk_conv_cfg_get(const qk_conv_cfg *c, const char *key);

/* Write the class's set_gguf_parameters, general.file_type among them, in
 * the converter's order (conv_hparams.c). */
int qk_conv_write_hparams(qk_gguf_writer *w, const qk_conv_arch *a, const qk_conv_cfg *c, const qk_conv_hp *hp,
                          int ftype, qk_err *err);
/* Keys the class writes while preparing the tensors, right after
 * general.architecture (Phi-3's rope.scaling.attn_factor). */
int qk_conv_write_early(qk_gguf_writer *w, const qk_conv_arch *a, const qk_conv_cfg *c, qk_err *err);

/* How an output tensor's rows come from its source(s). */
enum {
    QK_CX_NONE,
    QK_CX_T,          /* the source matrix transposed (gpt-oss down_proj [E, I, H]) */
    QK_CX_T_EVEN,     /* transposed, even rows of that (gpt-oss gate_up_proj: gate) */
    QK_CX_T_ODD,      /* ... odd rows (up) */
    QK_CX_EVEN,       /* even elements of each row (gpt-oss gate_up_proj_bias) */
    QK_CX_ODD,
};

/* One output tensor of the plan. */
typedef struct qk_conv_tensor {
    const qk_hf_tensor *src;    /* the first (or only) source; NULL: generated (gen) */
    const qk_hf_tensor **srcs;  /* n_src > 1: stacked experts, in expert order */
    int n_src;
    const float *gen;           /* generated F32 data (rope factors), owned by the plan */
    uint32_t n_dims;
    int64_t ne[4];              /* ggml order */
    char name[96];              /* GGUF name */
    int type;                   /* kernels/types.h id of the output */
    int perm_heads;             /* > 0: rope permutation with this many heads */
    int xform;                  /* QK_CX_* */
    bool plus_one;              /* every element + 1, in the source's precision */
    uint64_t nbytes;
    int shard;
} qk_conv_tensor;

/* prepare_tensors: the output tensors in the converter's order (its
 * generate_extra_tensors first, then the safetensors files in sorted order,
 * names sorted within a file), mapped, rearranged and typed. */
typedef struct qk_conv_plan {
    qk_conv_tensor *t;
    size_t n;
    int n_shards;
    const qk_hf_tensor **experts;   /* the stacked tensors' sources */
    float *gen;                     /* generated tensors' data */
    int64_t n_params;               /* get_total_parameter_count()'s total */
    char size_label[48];            /* gguf.size_label of the tensors ("" when no parameters) */
} qk_conv_plan;

/* n_vocab_real: the rows of token_embd.weight gemma3 keeps (its tokenizer's
 * size); 0: all. */
int qk_conv_plan_make(qk_conv_plan *p, const qk_hfdir *hf, const qk_conv_arch *a, const qk_conv_cfg *c,
                      const qk_conv_hp *hp, int64_t n_vocab_real, int ftype, qk_err *err);
void qk_conv_plan_free(qk_conv_plan *p);
/* The tensors as ModelBase.index_tensors lists them (files in sorted order,
 * names sorted within a file); malloc'd. */
const qk_hf_tensor **qk_conv_source_order(const qk_hfdir *hf);

/* Rows [row0, row0 + n) of t (rows of all matrices in sequence) in its
 * output type into dst; the bytes do not depend on threads. */
int qk_conv_tensor_rows(const qk_conv_tensor *t, uint64_t row0, uint64_t n, void *dst, int threads, qk_err *err);
/* Convert and write t's data (row blocks, source pages released behind). */
int qk_conv_write_tensor(qk_gguf_writer *w, const qk_conv_tensor *t, int threads, qk_err *err);
/* Rows of t (product of ne[1..]). */
uint64_t qk_conv_tensor_nrows(const qk_conv_tensor *t);

#endif
