/* hfmodel.h - the engine's model (lib/engine/model.h) from a Hugging Face
 * directory: config.json plus F32/F16/BF16 safetensors (formats/hfdir.h).
 *
 * Architectures (config.json "architectures", else "model_type"):
 *   LlamaForCausalLM, MistralForCausalLM -> llama
 *   Qwen2ForCausalLM -> qwen2 (q/k/v biases), Qwen3ForCausalLM -> qwen3
 * Hyper-parameters: hidden_size, intermediate_size, num_hidden_layers,
 * num_attention_heads, num_key_value_heads (default: heads), head_dim
 * (default hidden_size / heads), max_position_embeddings (default 2048;
 * capped by a Mistral sliding_window, which the engine does not apply),
 * rms_norm_eps (default 1e-6, transformers' default), rope_theta (default
 * 10000), rope_scaling null / "linear" / "llama3", tie_word_embeddings
 * (default false: lm_head.weight is then required).  hidden_act must be
 * silu and mlp_bias false.
 *
 * Tensors keep their stored type and stay in the mapping, named as
 * llama.cpp's converter names them (formats/hfnames.h).  Rope: Hugging Face
 * rotates the halves of each head (x_i with x_{i+d/2}, "rotate_half").  For
 * llama/mistral the q/k rows are permuted at load exactly as
 * convert_hf_to_gguf.py does (LlamaModel.permute), so the engine's NORMAL
 * rope on them is the same rotation and the result is bit-identical with the
 * converted GGUF; qwen2/qwen3 keep their rows and use NEOX rope, as llama.cpp
 * does for them.  Llama-3 rope scaling becomes per-frequency divisors
 * (rope_freqs.weight), computed like the converter's generate_extra_tensors.
 *
 * Quantized checkpoints (compressed-tensors, ModelOpt, AWQ, GPTQ, MLX,
 * bitsandbytes: formats/ckpt.h) load each quantized module as a view of its
 * stored parts (lib/engine/hfweights.h), computed by the format table's
 * kernels for its layout; modules the checkpoint leaves in float (lm_head,
 * embeddings, norms) keep their stored type.  Their q/k rows are not
 * permuted (a permutation would be a copy): llama and mistral then take
 * NEOX rope, which on the unpermuted rows is transformers' rotate_half.
 */
#ifndef QK_HFMODEL_H
#define QK_HFMODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/core/err.h"
#include "formats/hfdir.h"
#include "lib/core/jsonp.h"
#include "lib/engine/hfarch.h"
#include "lib/engine/model.h"

typedef struct qk_hfmodel_map qk_hfmodel_map;
struct qk_ckpt;

typedef struct qk_hfmodel {
    qk_hfdir *hf;
    qk_model m;
    char *config_path;
    bool tied;               /* lm head = embeddings */
    bool permute_qk;         /* llama/mistral: q/k rows permuted at load */
    qk_hf_rope_tables rope;  /* llama3 / LongRoPE divisors (n_rot/2 each), or NULL */
    const qk_hf_family *fam; /* lib/engine/hfarch.h */
    qk_hfmodel_map *map;     /* GGUF name -> HF tensor, sorted */
    size_t n_map;
    /* a quantized checkpoint (formats/ckpt.h): its logical tensors, each
     * quantized one computed on its stored parts (kernels/wq.h); NULL when
     * every tensor is a plain float one */
    struct qk_ckpt *ck;
} qk_hfmodel;

/* Hyper-parameters from config.json's DOM; *rt gets the rope tables
 * (malloc'd, may be NULL: the llama3 divisors, LongRoPE's), *tied the
 * lm-head tying.  n_vocab is set from vocab_size (0 when absent).  Errors
 * name the key (code 2). */
int qk_hf_config_hparams(const qk_jsonv *cfg, const char *path, qk_hparams *hp, bool *tied,
                         qk_hf_rope_tables *rt, qk_err *err);

/* Open a directory (or a .safetensors / .index.json path, see hfdir.h) and
 * load the model.  Errors (code 2): an unsupported architecture named, a
 * missing tensor by its Hugging Face name, a bad shape or type. */
int qk_hfmodel_open(qk_hfmodel **out, const char *path, qk_err *err);
void qk_hfmodel_close(qk_hfmodel *h);

#endif
