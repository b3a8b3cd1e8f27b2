/* conv_arch.c - the architectures qk-convert reproduces, one row each, and
 * the hyper-parameters as convert_hf_to_gguf.py sees them (llama.cpp
 * d32676d): ModelBase.load_hparams is transformers'
 * AutoConfig.from_pretrained(dir).to_dict(), that is config.json over the
 * model type's defaults with rope_theta / rope_scaling folded into
 * rope_parameters (transformers 5.17: its configuration_*.py), and
 * TextModel.__init__ mirrors top-level rope keys into rope_parameters.  The
 * defaults below are the keys the converter reads of each model type's
 * AutoConfig.for_model(TYPE).to_dict() (transformers 5.17.0).
 *
 * Adding a family is adding a row here (its class decides the keys written,
 * conv_hparams.c, and the tensors' handling, conv_plan.c) and its model
 * type's defaults. */
#include "lib/convert/conv_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const qk_conv_arch archs[] = {
    {"LlamaForCausalLM", "llama", QK_CC_LLAMA, true, QK_EXP_NONE, false, false},
    {"LLaMAForCausalLM", "llama", QK_CC_LLAMA, true, QK_EXP_NONE, false, false},
    {"MistralForCausalLM", "llama", QK_CC_LLAMA, true, QK_EXP_NONE, false, false},
    {"MixtralForCausalLM", "llama", QK_CC_LLAMA, true, QK_EXP_MIXTRAL, false, false},
    {"Qwen2ForCausalLM", "qwen2", QK_CC_QWEN2, false, QK_EXP_NONE, false, false},
    {"Qwen3ForCausalLM", "qwen3", QK_CC_QWEN2, false, QK_EXP_NONE, false, false},
    {"Qwen2MoeForCausalLM", "qwen2moe", QK_CC_QWEN2MOE, false, QK_EXP_QWEN, false, false},
    {"Qwen3MoeForCausalLM", "qwen3moe", QK_CC_QWEN2MOE, false, QK_EXP_QWEN, false, false},
    {"Gemma2ForCausalLM", "gemma2", QK_CC_GEMMA2, false, QK_EXP_NONE, true, true},
    {"Gemma3ForCausalLM", "gemma3", QK_CC_GEMMA3, false, QK_EXP_NONE, true, false},
    {"Phi3ForCausalLM", "phi3", QK_CC_PHI3, false, QK_EXP_NONE, false, false},
    {"GptOssForCausalLM", "gpt-oss", QK_CC_GPT_OSS, false, QK_EXP_NONE, false, false},
};

const qk_conv_arch *qk_conv_arch_find(const char *hf_arch)
{
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (!strcmp(archs[i].hf_arch, hf_arch))
            return &archs[i];
    return NULL;
}

const char *qk_conv_arch_list(void)
{
    return "LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
           "Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, Phi3ForCausalLM "
           "and GptOssForCausalLM";
}

/* AutoConfig.for_model(TYPE).to_dict(), the keys the converter reads. */
static const struct {
    const char *model_type;
    bool derive_head_dim;           /* head_dim = hidden_size / num_attention_heads when None */
    const char *alias;              /* attribute_map: alias -> num_local_experts */
    const char *json;
} defaults[] = {
    {"llama", true, NULL,
     "{\"max_position_embeddings\": 2048, \"hidden_size\": 4096, \"intermediate_size\": 11008, "
     "\"num_hidden_layers\": 32, \"num_attention_heads\": 32, \"num_key_value_heads\": 32, \"rms_norm_eps\": 1e-06, "
     "\"vocab_size\": 32000, \"rope_parameters\": {\"rope_theta\": 10000.0, \"rope_type\": \"default\"}}"},
    {"mistral", true, NULL,
     "{\"max_position_embeddings\": 131072, \"hidden_size\": 4096, \"intermediate_size\": 14336, "
     "\"num_hidden_layers\": 32, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-06, "
     "\"vocab_size\": 32000, \"sliding_window\": 4096, "
     "\"rope_parameters\": {\"rope_theta\": 10000.0, \"rope_type\": \"default\"}}"},
    {"mixtral", false, "num_experts",
     "{\"max_position_embeddings\": 131072, \"hidden_size\": 4096, \"intermediate_size\": 14336, "
     "\"num_hidden_layers\": 32, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-05, "
     "\"head_dim\": null, \"vocab_size\": 32000, \"num_local_experts\": 8, \"num_experts_per_tok\": 2, "
     "\"sliding_window\": null, \"rope_parameters\": {\"rope_theta\": 1000000.0, \"rope_type\": \"default\"}}"},
    {"qwen2", false, NULL,
     "{\"max_position_embeddings\": 32768, \"hidden_size\": 4096, \"intermediate_size\": 22016, "
     "\"num_hidden_layers\": 32, \"num_attention_heads\": 32, \"num_key_value_heads\": 32, \"rms_norm_eps\": 1e-06, "
     "\"vocab_size\": 151936, \"rope_parameters\": {\"rope_theta\": 10000.0, \"rope_type\": \"default\"}}"},
    {"qwen3", false, NULL,
     "{\"max_position_embeddings\": 32768, \"hidden_size\": 4096, \"intermediate_size\": 22016, "
     "\"num_hidden_layers\": 32, \"num_attention_heads\": 32, \"num_key_value_heads\": 32, \"rms_norm_eps\": 1e-06, "
     "\"head_dim\": 128, \"vocab_size\": 151936, "
     "\"rope_parameters\": {\"rope_theta\": 10000.0, \"rope_type\": \"default\"}}"},
    {"qwen2_moe", false, NULL,
     "{\"max_position_embeddings\": 32768, \"hidden_size\": 2048, \"intermediate_size\": 5632, "
     "\"num_hidden_layers\": 24, \"num_attention_heads\": 16, \"num_key_value_heads\": 16, \"rms_norm_eps\": 1e-06, "
     "\"vocab_size\": 151936, \"num_experts\": 60, \"num_experts_per_tok\": 4, \"moe_intermediate_size\": 1408, "
     "\"shared_expert_intermediate_size\": 5632, \"rope_parameters\": {\"rope_theta\": 10000.0, \"rope_type\": \"default\"}}"},
    {"qwen3_moe", false, "num_experts",
     "{\"max_position_embeddings\": 32768, \"hidden_size\": 2048, \"intermediate_size\": 6144, "
     "\"num_hidden_layers\": 24, \"num_attention_heads\": 32, \"num_key_value_heads\": 4, \"rms_norm_eps\": 1e-06, "
     "\"vocab_size\": 151936, \"num_local_experts\": 128, \"num_experts_per_tok\": 8, \"moe_intermediate_size\": 768, "
     "\"rope_parameters\": {\"rope_theta\": 10000.0, \"rope_type\": \"default\"}}"},
    {"gemma2", false, NULL,
     "{\"max_position_embeddings\": 8192, \"hidden_size\": 2304, \"intermediate_size\": 9216, "
     "\"num_hidden_layers\": 26, \"num_attention_heads\": 8, \"num_key_value_heads\": 4, \"rms_norm_eps\": 1e-06, "
     "\"head_dim\": 256, \"vocab_size\": 256000, \"attn_logit_softcapping\": 50.0, \"final_logit_softcapping\": 30.0, "
     "\"sliding_window\": 4096, \"rope_parameters\": {\"rope_theta\": 10000.0, \"rope_type\": \"default\"}}"},
    {"gemma3_text", false, NULL,
     "{\"max_position_embeddings\": 131072, \"hidden_size\": 2304, \"intermediate_size\": 9216, "
     "\"num_hidden_layers\": 26, \"num_attention_heads\": 8, \"num_key_value_heads\": 4, \"rms_norm_eps\": 1e-06, "
     "\"head_dim\": 256, \"vocab_size\": 262208, \"attn_logit_softcapping\": null, \"final_logit_softcapping\": null, "
     "\"sliding_window\": 4096}"},
    {"phi3", false, NULL,
     "{\"max_position_embeddings\": 4096, \"hidden_size\": 3072, \"intermediate_size\": 8192, "
     "\"num_hidden_layers\": 32, \"num_attention_heads\": 32, \"num_key_value_heads\": 32, \"rms_norm_eps\": 1e-05, "
     "\"vocab_size\": 32064, \"sliding_window\": null, \"original_max_position_embeddings\": 4096, "
     "\"rope_parameters\": {\"rope_theta\": 10000.0, \"partial_rotary_factor\": 1.0, \"rope_type\": \"default\"}}"},
    {"gpt_oss", false, "num_experts",
     "{\"max_position_embeddings\": 131072, \"hidden_size\": 2880, \"intermediate_size\": 2880, "
     "\"num_hidden_layers\": 36, \"num_attention_heads\": 64, \"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-05, "
     "\"head_dim\": 64, \"vocab_size\": 201088, \"num_local_experts\": 128, \"num_experts_per_tok\": 4, "
     "\"sliding_window\": 128, \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 32.0, \"beta_fast\": 32.0, "
     "\"beta_slow\": 1.0, \"truncate\": false, \"original_max_position_embeddings\": 4096, \"rope_theta\": 150000.0}}"},
};

/* Which model types each class takes (its config class). */
static bool type_fits(int cls, const char *mt)
{
    switch (cls) {
    case QK_CC_LLAMA: return !strcmp(mt, "llama") || !strcmp(mt, "mistral") || !strcmp(mt, "mixtral");
    case QK_CC_QWEN2: return !strcmp(mt, "qwen2") || !strcmp(mt, "qwen3");
    case QK_CC_QWEN2MOE: return !strcmp(mt, "qwen2_moe") || !strcmp(mt, "qwen3_moe");
    case QK_CC_GEMMA2: return !strcmp(mt, "gemma2");
    case QK_CC_GEMMA3: return !strcmp(mt, "gemma3_text");
    case QK_CC_PHI3: return !strcmp(mt, "phi3");
    default: return !strcmp(mt, "gpt_oss");
    }
}

static const char *alias_of(const qk_conv_cfg *c)
{
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        if (!strcmp(defaults[i].model_type, c->model_type))
            return defaults[i].alias;
    return NULL;
}

const qk_jsonv *qk_conv_cfg_get(const qk_conv_cfg *c, const char *key)
{
    if (!strcmp(key, "rope_theta") || !strcmp(key, "rope_scaling") || !strcmp(key, "rope_parameters") ||
        !strcmp(key, "rope_local_base_freq"))
        return NULL; /* folded into rope_parameters (see the rope fields) */
    const char *alias = alias_of(c);
    if (alias && !strcmp(key, alias))
        return NULL; /* AutoConfig keeps it under its canonical name */
    const qk_jsonv *v = qk_jsonv_get(c->cfg, key);
    if (!v && alias && !strcmp(key, "num_local_experts"))
        v = qk_jsonv_get(c->cfg, alias);
    return v ? v : qk_jsonv_get(c->dflt, key);
}

/* An integer hyper-parameter: the value, or def when absent or None. */
static int get_int(const qk_conv_cfg *c, const char *key, int64_t def, int64_t *out, qk_err *err)
{
    const qk_jsonv *v = qk_conv_cfg_get(c, key);
    if (!v || v->type == QK_JNULL) {
        *out = def;
        return 0;
    }
    if (v->type != QK_JNUM || !(v->num.flags & QK_JNUM_INT) || !qk_jsonv_i64(v, out))
        return qk_err_at(err, c->path, key, v->off, "not an integer");
    return 0;
}

static double num_or_nan(const qk_jsonv *v)
{
    double d;
    return v && v->type == QK_JNUM && qk_jsonv_f64(v, &d) ? d : NAN;
}

/* Keys whose presence changes what the converter writes beyond what qk
 * reproduces (other find_hparam spellings, multimodal and grouped-expert
 * keys, quantized checkpoints). */
static const char *const unsupported_keys[] = {
    "n_routed_experts", "num_experts_per_token", "top_k_experts", "n_group", "topk_group", "layer_norm_eps",
    "layer_norm_epsilon", "norm_epsilon", "local_rope_theta", "rope_local_theta", "rope_theta_local",
    "swa_rope_theta", "global_rope_theta", "rope_global_theta", "rope_theta_global", "rotary_emb_base",
    "text_config", "llm_config", "lm_config", "thinker_config", "language_config", "n_layers", "n_layer",
    "num_layers", "n_ctx", "n_positions", "n_embd", "dim", "n_inner", "n_head", "n_heads", "n_kv_heads",
    "norm_eps", "prefix_dense_intermediate_size", "dense_intermediate_size", "score_function", "scoring_func",
    "score_func", "moe_router_activation", "moe_router_activation_func", "expert_selection_fn",
    "quantization_config", "rope_pct", "rope_percent", "mrope_section",
};

/* rope_parameters as AutoConfig builds it, and TextModel's mirroring. */
static int rope_view(qk_conv_cfg *c, qk_err *err)
{
    const qk_jsonv *cfg = c->cfg;
    const qk_jsonv *rp = qk_jsonv_get(cfg, "rope_parameters"), *rs = qk_jsonv_get(cfg, "rope_scaling");
    if (rp && rp->type != QK_JOBJ && rp->type != QK_JNULL)
        return qk_err_at(err, c->path, "rope_parameters", rp->off, "not an object");
    if (rs && rs->type != QK_JOBJ && rs->type != QK_JNULL)
        return qk_err_at(err, c->path, "rope_scaling", rs->off, "not an object");
    if (rp && rp->type != QK_JOBJ)
        rp = NULL;
    if (rs && rs->type != QK_JOBJ)
        rs = NULL;
    double top_theta = num_or_nan(qk_jsonv_get(cfg, "rope_theta"));
    c->rope_theta = c->swa_theta = c->partial_rotary = c->orig_ctx = NAN;
    if (!strcmp(c->model_type, "gemma3_text")) {
        const qk_jsonv *full = qk_jsonv_get(rp, "full_attention"), *swa = qk_jsonv_get(rp, "sliding_attention");
        if (rp && (qk_jsonv_is(full, QK_JOBJ) || qk_jsonv_is(swa, QK_JOBJ))) {
            c->rope_full = qk_jsonv_is(full, QK_JOBJ) ? full : NULL;
            c->rope_swa = qk_jsonv_is(swa, QK_JOBJ) ? swa : NULL;
            c->rope_theta = num_or_nan(qk_jsonv_get(c->rope_full, "rope_theta"));
            c->swa_theta = num_or_nan(qk_jsonv_get(c->rope_swa, "rope_theta"));
        } else {
            /* Gemma3TextConfig: rope_theta / rope_scaling for the global
             * layers, rope_local_base_freq (default 10000) for the local ones */
            c->rope_full = rp ? rp : rs;
            c->rope_theta = isnan(top_theta) ? num_or_nan(qk_jsonv_get(c->rope_full, "rope_theta")) : top_theta;
            if (isnan(c->rope_theta))
                c->rope_theta = 1e6;
            c->swa_theta = num_or_nan(qk_jsonv_get(cfg, "rope_local_base_freq"));
            if (isnan(c->swa_theta))
                c->swa_theta = 1e4;
        }
        c->rope = c->rope_full;
    } else {
        c->rope = rp ? rp : rs ? rs : qk_jsonv_get(c->dflt, "rope_parameters");
        c->rope_theta = num_or_nan(qk_jsonv_get(c->rope, "rope_theta"));
        if (isnan(c->rope_theta))
            c->rope_theta = top_theta;
        if (isnan(c->rope_theta))
            c->rope_theta = num_or_nan(qk_jsonv_get(qk_jsonv_get(c->dflt, "rope_parameters"), "rope_theta"));
        c->partial_rotary = num_or_nan(qk_jsonv_get(c->rope, "partial_rotary_factor"));
        if (isnan(c->partial_rotary))
            c->partial_rotary = num_or_nan(qk_jsonv_get(cfg, "partial_rotary_factor"));
        c->orig_ctx = num_or_nan(qk_jsonv_get(c->rope, "original_max_position_embeddings"));
        if (isnan(c->orig_ctx))
            c->orig_ctx = num_or_nan(qk_conv_cfg_get(c, "original_max_position_embeddings"));
    }
    c->rope_type = qk_jsonv_get_str(c->rope, "rope_type", qk_jsonv_get_str(c->rope, "type", "default"));
    if (!isnan(c->rope_theta) && !(c->rope_theta > 0))
        return qk_err_at(err, c->path, "rope_theta", 0, "not a positive number");
    return 0;
}

int qk_conv_cfg_load(qk_conv_cfg *c, const qk_conv_arch *a, const qk_jsonv *config, const char *path,
                     qk_conv_hp *hp, qk_err *err)
{
    memset(c, 0, sizeof *c);
    memset(hp, 0, sizeof *hp);
    c->cfg = config;
    c->path = path;
    c->model_type = qk_jsonv_get_str(config, "model_type", "");
    size_t d = 0;
    while (d < sizeof defaults / sizeof defaults[0] && strcmp(defaults[d].model_type, c->model_type))
        d++;
    if (d == sizeof defaults / sizeof defaults[0] || !type_fits(a->cls, c->model_type))
        return qk_err_at(err, path, "model_type", 0, "'%s' with %s: not reproduced by qk-convert", c->model_type,
                         a->hf_arch);
    qk_jsonp_err je;
    if (qk_jsonp_parse(defaults[d].json, strlen(defaults[d].json), 0, &c->dflt, &je))
        return qk_errf(err, QK_EIO, "qk-convert: built-in defaults of %s: %s", c->model_type, je.msg);
    c->derive_head_dim = defaults[d].derive_head_dim;
    for (size_t i = 0; i < sizeof unsupported_keys / sizeof unsupported_keys[0]; i++) {
        const qk_jsonv *v = qk_jsonv_get(config, unsupported_keys[i]);
        if (v && v->type != QK_JNULL)
            return qk_err_at(err, path, unsupported_keys[i], v->off, "not reproduced by qk-convert yet");
    }
    if (qk_jsonv_get_bool(config, "is_causal", true) == false)
        return qk_err_at(err, path, "is_causal", 0, "false: not reproduced by qk-convert yet");
    int rc = rope_view(c, err);
    if (!rc)
        rc = get_int(c, "num_hidden_layers", -1, &hp->n_layer, err);
    if (!rc)
        rc = get_int(c, "hidden_size", 0, &hp->n_embd, err);
    if (!rc)
        rc = get_int(c, "num_attention_heads", 0, &hp->n_head, err);
    if (!rc)
        rc = get_int(c, "num_key_value_heads", hp->n_head, &hp->n_head_kv, err);
    if (!rc)
        rc = get_int(c, "vocab_size", 0, &hp->vocab_size, err);
    if (!rc)
        rc = get_int(c, "num_local_experts", 0, &hp->n_expert, err);
    if (!rc && !hp->n_expert)
        rc = get_int(c, "num_experts", 0, &hp->n_expert, err);
    if (!rc)
        rc = get_int(c, "num_experts_per_tok", 0, &hp->n_expert_used, err);
    if (!rc)
        rc = get_int(c, "head_dim", 0, &hp->head_dim, err);
    if (rc)
        return rc;
    if (hp->n_expert < 0 || hp->n_expert > 4096 || hp->n_expert_used < 0)
        return qk_err_at(err, path, "num_local_experts", 0, "bad expert counts");
    if ((a->experts != QK_EXP_NONE || a->cls == QK_CC_GPT_OSS) && hp->n_expert <= 0)
        return qk_err_at(err, path, "num_local_experts", 0, "missing: %s has experts", a->hf_arch);
    if (hp->n_head <= 0 || hp->n_head_kv <= 0 || hp->n_embd <= 0 || hp->n_layer < 0 || hp->n_layer > 1 << 16 ||
        hp->vocab_size <= 0 || hp->vocab_size > UINT32_MAX)
        return qk_err_at(err, path, "num_attention_heads", 0, "bad head, layer or vocabulary counts");
    if (hp->head_dim <= 0)
        hp->head_dim = hp->n_embd / hp->n_head;
    return 0;
}

void qk_conv_cfg_free(qk_conv_cfg *c)
{
    qk_jsonv_free(c->dflt);
    memset(c, 0, sizeof *c);
}
