/* conv_hparams.c - the hyper-parameter keys each converter class writes, in
 * its order (llama.cpp d32676d): TextModel.set_gguf_parameters
 * (conversion/base.py) and the classes' own set_gguf_parameters in
 * conversion/llama.py (LlamaModel), qwen.py (Qwen2Model, Qwen2MoeModel),
 * gemma.py (Gemma2Model, Gemma3Model), phi.py (Phi3MiniModel) and
 * gpt_oss.py (GptOssModel).  A key written twice keeps its first place and
 * takes the last value, as gguf-py's writer does (qk's writer does the
 * same). */
#include "lib/convert/conv_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct kw {
    qk_gguf_writer *w;
    const qk_conv_arch *a;
    const qk_conv_cfg *c;
    qk_err *err;
    int rc;
} kw;

static const char *key(const kw *k, const char *suffix, char *buf, size_t n)
{
    snprintf(buf, n, "%s.%s", k->a->gguf_arch, suffix);
    return buf;
}

/* add_uint32 of an integer value (absent or None: nothing). */
static void put_u32(kw *k, const char *suffix, const qk_jsonv *v)
{
    if (k->rc || !v || v->type == QK_JNULL)
        return;
    int64_t x;
    if (v->type != QK_JNUM || !(v->num.flags & QK_JNUM_INT) || !qk_jsonv_i64(v, &x) || x < 0 || x > UINT32_MAX) {
        k->rc = qk_err_at(k->err, k->c->path, suffix, v->off, "not an unsigned 32-bit integer");
        return;
    }
    char b[128];
    k->rc = qk_gguf_w_kv_u32(k->w, key(k, suffix, b, sizeof b), (uint32_t)x, k->err);
}

static void put_u32_n(kw *k, const char *suffix, int64_t x)
{
    char b[128];
    if (!k->rc)
        k->rc = qk_gguf_w_kv_u32(k->w, key(k, suffix, b, sizeof b), (uint32_t)x, k->err);
}

static void put_f32_n(kw *k, const char *suffix, double x)
{
    char b[128];
    if (!k->rc)
        k->rc = qk_gguf_w_kv_f32(k->w, key(k, suffix, b, sizeof b), (float)x, k->err);
}

/* add_float32 of a number (absent or None: nothing). */
static void put_f32(kw *k, const char *suffix, const qk_jsonv *v)
{
    if (k->rc || !v || v->type == QK_JNULL)
        return;
    double d;
    if (v->type != QK_JNUM || !qk_jsonv_f64(v, &d)) {
        k->rc = qk_err_at(k->err, k->c->path, suffix, v->off, "not a number");
        return;
    }
    put_f32_n(k, suffix, d);
}

static void put_str(kw *k, const char *suffix, const char *s)
{
    char b[128];
    if (!k->rc)
        k->rc = qk_gguf_w_kv_str(k->w, key(k, suffix, b, sizeof b), s, k->err);
}

/* find_hparam: the value of the first key present (None included). */
static const qk_jsonv *find(const qk_conv_cfg *c, const char *const *keys)
{
    for (; *keys; keys++) {
        const qk_jsonv *v = qk_conv_cfg_get(c, *keys);
        if (v)
            return v;
    }
    return NULL;
}

#define FIND(c, ...) find(c, (const char *const[]){__VA_ARGS__, NULL})

/* hparams.get("head_dim"), with LlamaConfig's derived default. */
static const qk_jsonv *head_dim(const qk_conv_cfg *c, int64_t *derived)
{
    const qk_jsonv *v = qk_conv_cfg_get(c, "head_dim");
    *derived = -1;
    if ((!v || v->type == QK_JNULL) && c->derive_head_dim) {
        int64_t h = 0, n = 0;
        qk_jsonv_i64(qk_conv_cfg_get(c, "hidden_size"), &h);
        qk_jsonv_i64(qk_conv_cfg_get(c, "num_attention_heads"), &n);
        *derived = n > 0 ? h / n : 0;
        return NULL;
    }
    return v;
}

static void put_head_dim(kw *k, const char *suffix)
{
    int64_t d;
    const qk_jsonv *v = head_dim(k->c, &d);
    if (d >= 0)
        put_u32_n(k, suffix, d);
    else
        put_u32(k, suffix, v);
}

static void put_rope_scaling(kw *k)
{
    const qk_conv_cfg *c = k->c;
    const char *t = c->rope_type;
    const qk_jsonv *factor = qk_jsonv_get(c->rope, "factor");
    bool has_factor = factor && factor->type != QK_JNULL;
    if (!strcmp(t, "linear") && has_factor) {
        put_str(k, "rope.scaling.type", "linear");
        put_f32(k, "rope.scaling.factor", factor);
    } else if (!strcmp(t, "yarn") && has_factor) {
        put_str(k, "rope.scaling.type", "yarn");
        put_f32(k, "rope.scaling.factor", factor);
        if (isnan(c->orig_ctx) && !k->rc)
            k->rc = qk_err_at(k->err, c->path, "rope_parameters.original_max_position_embeddings", 0,
                              "missing: yarn needs it (the converter fails)");
        if (!k->rc && (c->orig_ctx < 0 || c->orig_ctx > UINT32_MAX || c->orig_ctx != floor(c->orig_ctx)))
            k->rc = qk_err_at(k->err, c->path, "original_max_position_embeddings", 0, "not an unsigned integer");
        put_u32_n(k, "rope.scaling.original_context_length", (int64_t)c->orig_ctx);
        put_f32(k, "rope.scaling.yarn_ext_factor", qk_jsonv_get(c->rope, "extrapolation_factor"));
        const qk_jsonv *att = qk_jsonv_get(c->rope, "attention_factor");
        put_f32(k, "rope.scaling.yarn_attn_factor", att ? att : qk_jsonv_get(c->rope, "attn_factor"));
        put_f32(k, "rope.scaling.yarn_beta_fast", qk_jsonv_get(c->rope, "beta_fast"));
        put_f32(k, "rope.scaling.yarn_beta_slow", qk_jsonv_get(c->rope, "beta_slow"));
    } else if (!strcmp(t, "su") || !strcmp(t, "longrope")) {
        put_str(k, "rope.scaling.type", "longrope");
    }
    /* "dynamic", "llama3" (rope_freqs.weight, conv_plan.c), "default" and
     * the unknown ones: nothing here */
}

/* TextModel.set_gguf_parameters */
static void text_params(kw *k, const qk_conv_hp *hp, int ftype)
{
    const qk_conv_cfg *c = k->c;
    put_u32_n(k, "block_count", hp->n_layer);
    put_u32(k, "context_length",
            FIND(c, "max_position_embeddings", "n_ctx", "n_positions", "max_length", "max_sequence_length",
                 "model_max_length"));
    put_u32(k, "embedding_length", FIND(c, "hidden_size", "n_embd", "dim"));
    put_u32(k, "feed_forward_length",
            FIND(c, "prefix_dense_intermediate_size", "dense_intermediate_size", "intermediate_size", "n_inner",
                 "hidden_dim"));
    put_u32(k, "attention.head_count", FIND(c, "num_attention_heads", "n_head", "n_heads"));
    put_u32(k, "attention.head_count_kv", FIND(c, "num_key_value_heads", "n_kv_heads"));
    put_rope_scaling(k);
    if (!isnan(c->rope_theta))
        put_f32_n(k, "rope.freq_base", c->rope_theta);
    if (!isnan(c->swa_theta))
        put_f32_n(k, "rope.freq_base_swa", c->swa_theta);
    put_f32(k, "attention.layer_norm_rms_epsilon", FIND(c, "rms_norm_eps", "norm_eps"));
    put_u32(k, "expert_count", FIND(c, "num_local_experts", "num_experts", "n_routed_experts"));
    put_u32(k, "expert_used_count", FIND(c, "num_experts_per_tok", "num_experts_per_token", "top_k_experts"));
    put_head_dim(k, "attention.key_length");
    put_head_dim(k, "attention.value_length");
    if (!k->rc)
        k->rc = qk_gguf_w_kv_u32(k->w, "general.file_type", (uint32_t)ftype, k->err);
    (void)hp;
}

/* Gemma2Model.set_gguf_parameters (hparams[...]: present keys) */
static void gemma2_params(kw *k, const qk_conv_hp *hp, int ftype)
{
    const qk_conv_cfg *c = k->c;
    put_u32(k, "context_length", qk_conv_cfg_get(c, "max_position_embeddings"));
    put_u32(k, "embedding_length", qk_conv_cfg_get(c, "hidden_size"));
    put_u32_n(k, "block_count", hp->n_layer);
    put_u32(k, "feed_forward_length", qk_conv_cfg_get(c, "intermediate_size"));
    put_u32(k, "attention.head_count", qk_conv_cfg_get(c, "num_attention_heads"));
    put_u32_n(k, "attention.head_count_kv", hp->n_head_kv);
    put_f32(k, "attention.layer_norm_rms_epsilon", qk_conv_cfg_get(c, "rms_norm_eps"));
    put_head_dim(k, "attention.key_length");
    put_head_dim(k, "attention.value_length");
    if (!k->rc)
        k->rc = qk_gguf_w_kv_u32(k->w, "general.file_type", (uint32_t)ftype, k->err);
    put_f32(k, "attn_logit_softcapping", qk_conv_cfg_get(c, "attn_logit_softcapping"));
    put_f32(k, "final_logit_softcapping", qk_conv_cfg_get(c, "final_logit_softcapping"));
    put_u32(k, "attention.sliding_window", qk_conv_cfg_get(c, "sliding_window"));
}

/* Gemma3Model.set_gguf_parameters: TextModel's, then its own keys (some
 * again, with "hparams.get(key, default)") */
static void gemma3_params(kw *k, const qk_conv_hp *hp, int ftype)
{
    const qk_conv_cfg *c = k->c;
    text_params(k, hp, ftype);
    const qk_jsonv *v = qk_conv_cfg_get(c, "max_position_embeddings");
    if (v)
        put_u32(k, "context_length", v);
    else
        put_u32_n(k, "context_length", 131072);
    if ((v = qk_conv_cfg_get(c, "num_attention_heads")))
        put_u32(k, "attention.head_count", v);
    else
        put_u32_n(k, "attention.head_count", 8);
    if ((v = qk_conv_cfg_get(c, "rms_norm_eps")))
        put_f32(k, "attention.layer_norm_rms_epsilon", v);
    else
        put_f32_n(k, "attention.layer_norm_rms_epsilon", 1e-6);
    for (int i = 0; i < 2; i++) {
        const char *s = i ? "attention.value_length" : "attention.key_length";
        if ((v = qk_conv_cfg_get(c, "head_dim")))
            put_u32(k, s, v);
        else
            put_u32_n(k, s, 256);
    }
    put_f32_n(k, "rope.freq_base", isnan(c->rope_theta) ? 1e6 : c->rope_theta);
    const qk_jsonv *acap = qk_conv_cfg_get(c, "attn_logit_softcapping");
    if (acap && acap->type != QK_JNULL && !k->rc)
        k->rc = qk_err_at(k->err, c->path, "attn_logit_softcapping", acap->off, "set: Gemma 3 has none (the converter fails)");
    const qk_jsonv *fcap = qk_conv_cfg_get(c, "final_logit_softcapping");
    double d;
    if (fcap && qk_jsonv_f64(fcap, &d) && d != 0)
        put_f32(k, "final_logit_softcapping", fcap);
    const qk_jsonv *pat = qk_conv_cfg_get(c, "sliding_window_pattern");
    int64_t p;
    if (!(pat && qk_jsonv_i64(pat, &p) && p == 1)) {
        const qk_jsonv *sw = qk_conv_cfg_get(c, "sliding_window");
        if ((!sw || sw->type == QK_JNULL) && !k->rc)
            k->rc = qk_err_at(k->err, c->path, "sliding_window", 0, "missing (the converter fails)");
        put_u32(k, "attention.sliding_window", sw);
    }
    if ((v = qk_conv_cfg_get(c, "num_key_value_heads")))
        put_u32(k, "attention.head_count_kv", v);
    else
        put_u32_n(k, "attention.head_count_kv", 4);
}

/* Phi3MiniModel.set_gguf_parameters */
static void phi3_params(kw *k, const qk_conv_hp *hp, int ftype)
{
    const qk_conv_cfg *c = k->c;
    double rot = isnan(c->partial_rotary) ? 1.0 : c->partial_rotary;
    int64_t rope_dims = (int64_t)(rot * (double)hp->n_embd) / hp->n_head;
    if (isnan(c->orig_ctx) && !k->rc)
        k->rc = qk_err_at(k->err, c->path, "original_max_position_embeddings", 0, "missing (the converter fails)");
    put_u32(k, "context_length", FIND(c, "n_positions", "max_position_embeddings"));
    if (!k->rc && (c->orig_ctx < 0 || c->orig_ctx > UINT32_MAX || c->orig_ctx != floor(c->orig_ctx)))
        k->rc = qk_err_at(k->err, c->path, "original_max_position_embeddings", 0, "not an unsigned integer");
    put_u32_n(k, "rope.scaling.original_context_length", (int64_t)c->orig_ctx);
    put_u32_n(k, "embedding_length", hp->n_embd);
    put_u32(k, "feed_forward_length", qk_conv_cfg_get(c, "intermediate_size"));
    put_u32_n(k, "block_count", hp->n_layer);
    put_u32_n(k, "attention.head_count", hp->n_head);
    put_u32(k, "attention.head_count_kv", FIND(c, "num_key_value_heads", "n_head_kv"));
    put_f32(k, "attention.layer_norm_rms_epsilon", qk_conv_cfg_get(c, "rms_norm_eps"));
    put_u32_n(k, "rope.dimension_count", rope_dims);
    put_f32_n(k, "rope.freq_base", c->rope_theta);
    if (!k->rc)
        k->rc = qk_gguf_w_kv_u32(k->w, "general.file_type", (uint32_t)ftype, k->err);
    const qk_jsonv *sw = qk_conv_cfg_get(c, "sliding_window");
    if (!sw || sw->type == QK_JNULL)
        put_u32_n(k, "attention.sliding_window", 0);
    else
        put_u32(k, "attention.sliding_window", sw);
}

int qk_conv_write_hparams(qk_gguf_writer *w, const qk_conv_arch *a, const qk_conv_cfg *c, const qk_conv_hp *hp,
                          int ftype, qk_err *err)
{
    kw k = {w, a, c, err, 0};
    switch (a->cls) {
    case QK_CC_GEMMA2: gemma2_params(&k, hp, ftype); break;
    case QK_CC_GEMMA3: gemma3_params(&k, hp, ftype); break;
    case QK_CC_PHI3: phi3_params(&k, hp, ftype); break;
    default: text_params(&k, hp, ftype); break;
    }
    switch (a->cls) {
    case QK_CC_LLAMA: {
        put_u32(&k, "vocab_size", qk_conv_cfg_get(c, "vocab_size"));
        int64_t d;
        const qk_jsonv *v = head_dim(c, &d);
        if (d < 0 && (!v || v->type == QK_JNULL))
            d = hp->n_embd / hp->n_head;
        if (d >= 0)
            put_u32_n(&k, "rope.dimension_count", d);
        else
            put_u32(&k, "rope.dimension_count", v);
        break;
    }
    case QK_CC_QWEN2MOE:
        put_u32(&k, "expert_feed_forward_length", qk_conv_cfg_get(c, "moe_intermediate_size"));
        put_u32(&k, "expert_shared_feed_forward_length", qk_conv_cfg_get(c, "shared_expert_intermediate_size"));
        break;
    case QK_CC_GPT_OSS:
        put_u32(&k, "attention.sliding_window", qk_conv_cfg_get(c, "sliding_window"));
        put_u32(&k, "expert_feed_forward_length", qk_conv_cfg_get(c, "intermediate_size"));
        break;
    default: break;
    }
    return k.rc;
}

int qk_conv_write_early(qk_gguf_writer *w, const qk_conv_arch *a, const qk_conv_cfg *c, qk_err *err)
{
    if (a->cls != QK_CC_PHI3)
        return 0;
    /* Phi3MiniModel.generate_extra_tensors, when there are long factors */
    const qk_jsonv *lf = qk_jsonv_get(c->rope, "long_factor");
    if (!lf || lf->type == QK_JNULL || (lf->type == QK_JARR && !qk_jsonv_len(lf)))
        return 0;
    kw k = {w, a, c, err, 0};
    int64_t max_pos = 0;
    qk_jsonv_i64(FIND(c, "n_positions", "max_position_embeddings"), &max_pos);
    double orig = c->orig_ctx, scale = (double)max_pos / orig, att = 1.0;
    const char *t = c->rope_type;
    if (!strcmp(t, "su") || !strcmp(t, "longrope"))
        att = scale > 1.0 ? sqrt(1 + log(scale) / log(orig)) : 1.0;
    else if (!strcmp(t, "yarn"))
        att = scale > 1.0 ? 0.1 * log(scale) + 1.0 : 1.0;
    else
        return qk_err_at(err, c->path, "rope_parameters.rope_type", c->rope ? c->rope->off : 0,
                         "'%s' with long factors: the converter refuses it", t);
    put_f32_n(&k, "rope.scaling.attn_factor", att);
    return k.rc;
}
