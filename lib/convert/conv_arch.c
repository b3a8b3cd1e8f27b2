/* conv_arch.c - the architectures qk-convert reproduces, one row each, and
 * their hyper-parameters as convert_hf_to_gguf.py writes them
 * (TextModel.set_gguf_parameters in conversion/base.py, LlamaModel in
 * conversion/llama.py, Qwen2Model / Qwen3Model in conversion/qwen.py,
 * llama.cpp d32676d).  hparams there are transformers' AutoConfig(...)
 * .to_dict(): config.json over the model type's defaults, which
 * qk_conv_defaults repeats for the keys read (transformers 5.17's
 * LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config).
 *
 * Adding a family is adding a row here (and its defaults) when its tensors
 * map through formats/hfnames.c; families whose converter class does more
 * (experts, fused tensors, extra keys) need their own few lines beside. */
#include "lib/convert/conv_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const qk_conv_arch archs[] = {
    {{"LlamaForCausalLM", "LLaMAForCausalLM", "MistralForCausalLM"}, "llama", true, true, false},
    {{"MixtralForCausalLM"}, "llama", true, true, true},
    {{"Qwen2ForCausalLM"}, "qwen2", false, false, false},
    {{"Qwen3ForCausalLM"}, "qwen3", false, false, false},
};

static const qk_conv_defaults defaults[] = {
    {"llama", 2048, 32000, 11008, 4096, 32, 32, 0, 0, 1e-6, 10000.0, 0, 0},
    {"mistral", 4096 * 32, 32000, 14336, 4096, 32, 32, 8, 0, 1e-6, 10000.0, 0, 0},
    {"mixtral", 4096 * 32, 32000, 14336, 4096, 32, 32, 8, -1, 1e-5, 1e6, 8, 2},
    {"qwen2", 32768, 151936, 22016, 4096, 32, 32, 0, -1, 1e-6, 10000.0, 0, 0},
    {"qwen3", 32768, 151936, 22016, 4096, 32, 32, 0, 128, 1e-6, 10000.0, 0, 0},
};

const qk_conv_arch *qk_conv_arch_find(const char *hf_arch)
{
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        for (int k = 0; k < 4 && archs[i].hf_arch[k]; k++)
            if (!strcmp(archs[i].hf_arch[k], hf_arch))
                return &archs[i];
    return NULL;
}

/* An integer key: config.json's when given (not null), else the default. */
static int get_int(const qk_jsonv *c, const char *key, int64_t dflt, int64_t *out, const char *path, qk_err *err)
{
    const qk_jsonv *v = qk_jsonv_get(c, key);
    if (!v || v->type == QK_JNULL) {
        *out = dflt;
        return 0;
    }
    if (v->type != QK_JNUM || !(v->num.flags & QK_JNUM_INT) || !qk_jsonv_i64(v, out))
        return qk_err_at(err, path, key, v->off, "not an integer");
    return 0;
}

static int get_num(const qk_jsonv *c, const char *key, double dflt, double *out, const char *path, qk_err *err)
{
    const qk_jsonv *v = qk_jsonv_get(c, key);
    if (!v || v->type == QK_JNULL) {
        *out = dflt;
        return 0;
    }
    if (!qk_jsonv_f64(v, out))
        return qk_err_at(err, path, key, v->off, "not a number");
    return 0;
}

/* Keys whose presence changes what the converter writes beyond this table. */
static const char *const unsupported_keys[] = {
    "rope_scaling", "num_experts", "n_routed_experts", "num_experts_per_token", "top_k_experts",
    "n_group", "topk_group", "layer_norm_eps", "layer_norm_epsilon", "norm_epsilon", "partial_rotary_factor",
    "local_rope_theta", "rope_local_base_freq", "text_config", "n_layers", "n_layer", "num_layers",
    "n_ctx", "n_positions", "n_embd", "dim", "n_inner", "n_head", "n_heads", "n_kv_heads", "norm_eps",
    "prefix_dense_intermediate_size", "dense_intermediate_size", "original_max_position_embeddings",
    "global_rope_theta", "rotary_emb_base", "score_function", "scoring_func", "quantization_config",
};

int qk_conv_hparams(const qk_jsonv *c, const char *path, qk_conv_hp *hp, qk_err *err)
{
    memset(hp, 0, sizeof *hp);
    const char *mt = qk_jsonv_get_str(c, "model_type", "");
    const qk_conv_defaults *d = NULL;
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        if (!strcmp(defaults[i].model_type, mt))
            d = &defaults[i];
    if (!d)
        return qk_err_at(err, path, "model_type", 0, "'%s': qk-convert knows llama, mistral, qwen2, qwen3", mt);
    for (size_t i = 0; i < sizeof unsupported_keys / sizeof unsupported_keys[0]; i++) {
        const qk_jsonv *v = qk_jsonv_get(c, unsupported_keys[i]);
        if (v && v->type != QK_JNULL)
            return qk_err_at(err, path, unsupported_keys[i], v->off, "not reproduced by qk-convert yet");
    }
    if (qk_jsonv_get_bool(c, "is_causal", true) == false)
        return qk_err_at(err, path, "is_causal", 0, "false: not reproduced by qk-convert yet");
    int rc = get_int(c, "num_hidden_layers", d->num_hidden_layers, &hp->n_layer, path, err);
    if (!rc)
        rc = get_int(c, "max_position_embeddings", d->max_position_embeddings, &hp->n_ctx, path, err);
    if (!rc)
        rc = get_int(c, "hidden_size", d->hidden_size, &hp->n_embd, path, err);
    if (!rc)
        rc = get_int(c, "intermediate_size", d->intermediate_size, &hp->n_ff, path, err);
    if (!rc)
        rc = get_int(c, "num_attention_heads", d->num_attention_heads, &hp->n_head, path, err);
    if (!rc)
        rc = get_int(c, "num_key_value_heads", d->num_key_value_heads ? d->num_key_value_heads : hp->n_head,
                     &hp->n_head_kv, path, err);
    if (!rc)
        rc = get_int(c, "vocab_size", d->vocab_size, &hp->vocab_size, path, err);
    if (!rc)
        rc = get_num(c, "rms_norm_eps", d->rms_norm_eps, &hp->rms_eps, path, err);
    if (!rc)
        rc = get_int(c, "num_local_experts", d->num_local_experts, &hp->n_expert, path, err);
    if (!rc)
        rc = get_int(c, "num_experts_per_tok", d->num_experts_per_tok, &hp->n_expert_used, path, err);
    if (rc)
        return rc;
    if (hp->n_expert < 0 || hp->n_expert > 4096 || hp->n_expert_used < 0)
        return qk_err_at(err, path, "num_local_experts", 0, "bad expert counts");
    if (hp->n_head <= 0 || hp->n_head_kv <= 0 || hp->n_embd <= 0 || hp->n_layer < 0 || hp->vocab_size <= 0 ||
        hp->vocab_size > UINT32_MAX)
        return qk_err_at(err, path, "num_attention_heads", 0, "bad head, layer or vocabulary counts");
    /* head_dim: given, or the config class's derived default */
    const qk_jsonv *hd = qk_jsonv_get(c, "head_dim");
    if (hd && hd->type != QK_JNULL) {
        if ((rc = get_int(c, "head_dim", 0, &hp->head_dim, path, err)))
            return rc;
        hp->has_head_dim = true;
    } else if (d->head_dim >= 0) {
        hp->head_dim = d->head_dim ? d->head_dim : hp->n_embd / hp->n_head;
        hp->has_head_dim = true;
    } else {
        hp->head_dim = hp->n_embd / hp->n_head;
    }
    /* rope: rope_parameters (transformers 5) or rope_theta; only "default" */
    const qk_jsonv *rp = qk_jsonv_get(c, "rope_parameters");
    hp->rope_theta = d->rope_theta;
    if (rp && rp->type == QK_JOBJ) {
        const char *type = qk_jsonv_get_str(rp, "rope_type", qk_jsonv_get_str(rp, "type", "default"));
        if (strcmp(type, "default") != 0)
            return qk_err_at(err, path, "rope_parameters.rope_type", rp->off, "'%s': not reproduced by qk-convert yet",
                             type);
        for (size_t i = 0; i < qk_jsonv_len(rp); i++) {
            const char *k = qk_jsonv_member(rp, i)->key;
            if (strcmp(k, "rope_type") && strcmp(k, "type") && strcmp(k, "rope_theta"))
                return qk_err_at(err, path, "rope_parameters", rp->off, "key '%s': not reproduced by qk-convert yet", k);
        }
        if ((rc = get_num(rp, "rope_theta", d->rope_theta, &hp->rope_theta, path, err)))
            return rc;
    } else if ((rc = get_num(c, "rope_theta", d->rope_theta, &hp->rope_theta, path, err))) {
        return rc;
    }
    return 0;
}

int qk_conv_write_hparams(qk_gguf_writer *w, const qk_conv_arch *a, const qk_conv_hp *hp, int ftype, qk_err *err)
{
    char key[96];
#define KEY(s) (snprintf(key, sizeof key, "%s." s, a->gguf_arch), key)
    int rc = qk_gguf_w_kv_u32(w, KEY("block_count"), (uint32_t)hp->n_layer, err);
    if (!rc)
        rc = qk_gguf_w_kv_u32(w, KEY("context_length"), (uint32_t)hp->n_ctx, err);
    if (!rc)
        rc = qk_gguf_w_kv_u32(w, KEY("embedding_length"), (uint32_t)hp->n_embd, err);
    if (!rc)
        rc = qk_gguf_w_kv_u32(w, KEY("feed_forward_length"), (uint32_t)hp->n_ff, err);
    if (!rc)
        rc = qk_gguf_w_kv_u32(w, KEY("attention.head_count"), (uint32_t)hp->n_head, err);
    if (!rc)
        rc = qk_gguf_w_kv_u32(w, KEY("attention.head_count_kv"), (uint32_t)hp->n_head_kv, err);
    if (!rc)
        rc = qk_gguf_w_kv_f32(w, KEY("rope.freq_base"), (float)hp->rope_theta, err);
    if (!rc)
        rc = qk_gguf_w_kv_f32(w, KEY("attention.layer_norm_rms_epsilon"), (float)hp->rms_eps, err);
    if (!rc && hp->n_expert > 0)
        rc = qk_gguf_w_kv_u32(w, KEY("expert_count"), (uint32_t)hp->n_expert, err);
    if (!rc && hp->n_expert_used > 0)
        rc = qk_gguf_w_kv_u32(w, KEY("expert_used_count"), (uint32_t)hp->n_expert_used, err);
    if (!rc && hp->has_head_dim) {
        rc = qk_gguf_w_kv_u32(w, KEY("attention.key_length"), (uint32_t)hp->head_dim, err);
        if (!rc)
            rc = qk_gguf_w_kv_u32(w, KEY("attention.value_length"), (uint32_t)hp->head_dim, err);
    }
    if (!rc)
        rc = qk_gguf_w_kv_u32(w, "general.file_type", (uint32_t)ftype, err);
    if (!rc && a->llama_class) {
        rc = qk_gguf_w_kv_u32(w, KEY("vocab_size"), (uint32_t)hp->vocab_size, err);
        if (!rc)
            rc = qk_gguf_w_kv_u32(w, KEY("rope.dimension_count"), (uint32_t)hp->head_dim, err);
    }
#undef KEY
    return rc;
}
