/* hfarch.h - the model families of Hugging Face directories (lib/engine/
 * only; hfmodel.c builds the model with them): which config.json keys set
 * which traits of qk_hparams, how each family names its tensors, and the
 * tensors whose layout differs from llama.cpp's (gpt-oss's fused experts).
 *
 *   family                       GGUF arch   config.json traits
 *   LlamaForCausalLM, Mistral..  llama       (generic)
 *   MixtralForCausalLM           llama       num_local_experts, num_experts_per_tok, sliding_window
 *   Qwen2ForCausalLM             qwen2       (generic)
 *   Qwen3ForCausalLM             qwen3       (generic)
 *   Qwen2MoeForCausalLM          qwen2moe    num_experts, num_experts_per_tok, moe_intermediate_size,
 *                                            shared_expert_intermediate_size, norm_topk_prob,
 *                                            decoder_sparse_step, mlp_only_layers
 *   Qwen3MoeForCausalLM          qwen3moe    the same but the shared expert
 *   GptOssForCausalLM            gpt-oss     num_local_experts, num_experts_per_tok, sliding_window,
 *                                            layer_types, swiglu_limit, rope yarn (truncate);
 *                                            experts in BF16/F32 or MXFP4 (*_blocks, *_scales)
 *   Gemma2ForCausalLM            gemma2      query_pre_attn_scalar, attn_/final_logit_softcapping,
 *                                            sliding_window, layer_types, hidden_activation
 *   Gemma3ForCausalLM            gemma3      the same, rope per layer type (rope_local_base_freq)
 *   Phi3ForCausalLM              phi3        rope longrope (short_factor, long_factor,
 *                                            original_max_position_embeddings), sliding_window
 */
#ifndef QK_HFARCH_H
#define QK_HFARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/core/err.h"
#include "lib/core/jsonp.h"
#include "formats/hfdir.h"
#include "lib/engine/model.h"

typedef struct qk_hf_family qk_hf_family;

/* ---- config.json values (shared with hfmodel.c) ------------------------------- */

uint64_t qk_hfcfg_off(const qk_jsonv *obj, const char *key);
/* An integer key in [lo, 2^24]; def < 0: required; null: def. */
int qk_hfcfg_int(const qk_jsonv *obj, const char *path, const char *key, int64_t def, int64_t lo,
                 int *out, qk_err *err);
/* A finite positive number; absent or null: def. */
int qk_hfcfg_real(const qk_jsonv *obj, const char *path, const char *key, double def, double *out,
                  qk_err *err);

/* ---- families ------------------------------------------------------------------ */

/* The family of config.json (architectures[0], else model_type).  Errors
 * name the unsupported class. */
int qk_hf_family_find(const qk_jsonv *cfg, const char *path, const qk_hf_family **out, qk_err *err);
/* Its GGUF architecture (for qk_arch_set), and its defaults of generic
 * keys: head_dim (0: hidden_size / heads), rms_norm_eps, tie_word_embeddings. */
const char *qk_hf_family_arch(const qk_hf_family *f);
int qk_hf_family_head_dim(const qk_hf_family *f);
double qk_hf_family_eps(const qk_hf_family *f);
bool qk_hf_family_tied(const qk_hf_family *f);

/* The activation, mlp_bias and partial-rotary checks, per family. */
int qk_hf_family_check(const qk_hf_family *f, const qk_jsonv *cfg, const char *path, qk_err *err);

/* Rope tables made from the config (malloc'd, n_rot/2 floats, or NULL). */
typedef struct qk_hf_rope_tables {
    float *freqs;        /* llama3 divisors (rope_freqs.weight) */
    float *lng, *shrt;   /* LongRoPE (rope_factors_long/short.weight) */
} qk_hf_rope_tables;

/* The rope of the families whose config the generic reader does not know:
 * rope parameters per layer type (gemma3), yarn, longrope.  Returns 1 when
 * *done is set when it handled them (the generic reader does the others). */
int qk_hf_family_rope(const qk_hf_family *f, const qk_jsonv *cfg, const char *path, qk_hparams *hp,
                      qk_hf_rope_tables *rt, bool *done, qk_err *err);

/* Everything else a family's config sets in *hp (after the generic keys):
 * experts, sliding windows, soft-capping, attention scale, norms. */
int qk_hf_family_config(const qk_hf_family *f, const qk_jsonv *cfg, const char *path,
                        qk_hparams *hp, qk_err *err);

/* ---- tensors --------------------------------------------------------------------- */

enum {
    QK_HFX_NONE = 0,
    QK_HFX_GU_EVEN,   /* gpt-oss gate_up_proj [E, H, 2I]: the even columns, transposed */
    QK_HFX_GU_ODD,    /* ... the odd columns (up) */
    QK_HFX_T,         /* [E, I, H] -> [E, H, I] (gpt-oss down_proj) */
    QK_HFX_B_EVEN,    /* [E, 2I] -> [E, I], even (gpt-oss gate_up_proj_bias) */
    QK_HFX_B_ODD,
    /* gpt-oss's MXFP4 experts: *_blocks [E, rows, cols/32, 16] and *_scales
     * [E, rows, cols/32] as ggml's MXFP4 blocks (the scale byte, then 16
     * bytes holding elements j and j+16), rows 2i (gate), 2i+1 (up), all */
    QK_HFX_MX_EVEN, QK_HFX_MX_ODD, QK_HFX_MX_ALL,
};

/* One GGUF tensor a Hugging Face tensor is, or is part of. */
typedef struct qk_hf_target {
    char gguf[96];
    int expert;          /* expert index of a per-expert matrix, else -1 */
    int xform;           /* QK_HFX_* */
} qk_hf_target;

/* The GGUF tensors the family makes of HF tensor `hf` (up to 2 in out[]);
 * 0 when the family has no special name for it (the generic names of
 * formats/hfnames.h then apply). */
int qk_hf_family_names(const qk_hf_family *f, const char *hf, qk_hf_target *out);

/* The family's HF name of GGUF tensor `gguf` (messages), or false. */
bool qk_hf_family_hf_name(const qk_hf_family *f, const char *gguf, int expert, char *buf, size_t n);

/* Tensor t of hf rearranged by xform into a malloc'd *owned of type *type
 * and shape out_ne. */
int qk_hf_family_derive(int xform, const qk_hfdir *hf, const qk_hf_tensor *t, int64_t out_ne[4],
                        int *type, uint8_t **owned, qk_err *err);

#endif
