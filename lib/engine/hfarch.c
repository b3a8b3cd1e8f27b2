/* hfarch.c - the Hugging Face model families (see hfarch.h).
 *
 * References: transformers 5.17's configuration_*.py (keys and defaults)
 * and modeling_*.py (what the keys do) for llama, mistral, mixtral, qwen2,
 * qwen3, qwen2_moe, qwen3_moe, gpt_oss, gemma2, gemma3 and phi3, and
 * modeling_rope_utils.py (_compute_yarn_parameters,
 * _compute_longrope_parameters); llama.cpp's converter (convert_hf_to_gguf.py
 * and conversion/{llama,qwen,gpt_oss,gemma,phi}.py at d32676d) for the
 * tensor names and for the gpt-oss expert layout (gate_up_proj's gate and up
 * interleaved by column, the experts' matrices transposed). */
#include "lib/engine/hfarch.h"

#include "kernels/types.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIM (1 << 24) /* sanity bound on every hyper-parameter */

enum {
    F_LLAMA, F_MIXTRAL, F_QWEN2, F_QWEN3, F_QWEN2MOE, F_QWEN3MOE, F_GPT_OSS, F_GEMMA2, F_GEMMA3,
    F_PHI3
};

struct qk_hf_family {
    const char *hf_class, *model_type;
    const char *arch;     /* GGUF architecture */
    int kind;
    int head_dim;         /* config default; 0: hidden_size / num_attention_heads */
    double eps;           /* rms_norm_eps default */
    bool tied;            /* tie_word_embeddings default */
};

static const qk_hf_family families[] = {
    {"LlamaForCausalLM", "llama", "llama", F_LLAMA, 0, 1e-6, false},
    {"MistralForCausalLM", "mistral", "mistral", F_LLAMA, 0, 1e-6, false},
    {"MixtralForCausalLM", "mixtral", "llama", F_MIXTRAL, 0, 1e-5, false},
    {"Qwen2ForCausalLM", "qwen2", "qwen2", F_QWEN2, 0, 1e-6, false},
    {"Qwen3ForCausalLM", "qwen3", "qwen3", F_QWEN3, 0, 1e-6, false},
    {"Qwen2MoeForCausalLM", "qwen2_moe", "qwen2moe", F_QWEN2MOE, 0, 1e-6, false},
    {"Qwen3MoeForCausalLM", "qwen3_moe", "qwen3moe", F_QWEN3MOE, 0, 1e-6, false},
    {"GptOssForCausalLM", "gpt_oss", "gpt-oss", F_GPT_OSS, 64, 1e-5, false},
    {"Gemma2ForCausalLM", "gemma2", "gemma2", F_GEMMA2, 256, 1e-6, true},
    {"Gemma3ForCausalLM", "gemma3_text", "gemma3", F_GEMMA3, 256, 1e-6, true},
    {"Phi3ForCausalLM", "phi3", "phi3", F_PHI3, 0, 1e-5, false},
};

static bool is_gemma(const qk_hf_family *f) { return f->kind == F_GEMMA2 || f->kind == F_GEMMA3; }
static bool is_qwen_moe(const qk_hf_family *f) { return f->kind == F_QWEN2MOE || f->kind == F_QWEN3MOE; }

/* ---- config.json values ---------------------------------------------------------- */

uint64_t qk_hfcfg_off(const qk_jsonv *obj, const char *key)
{
    const qk_jsonv *v = qk_jsonv_get(obj, key);
    return v ? v->off : 0;
}

int qk_hfcfg_int(const qk_jsonv *obj, const char *path, const char *key, int64_t def, int64_t lo,
                 int *out, qk_err *err)
{
    const qk_jsonv *v = qk_jsonv_get(obj, key);
    int64_t x;
    if (!v || v->type == QK_JNULL) {
        if (def < 0)
            return qk_err_at(err, path, key, 0, "required key is missing");
        *out = (int)def;
        return 0;
    }
    if (!qk_jsonv_i64(v, &x))
        return qk_err_at(err, path, key, v->off, "not an integer");
    if (x < lo || x > MAX_DIM)
        return qk_err_at(err, path, key, v->off, "%lld is out of range [%lld, %d]", (long long)x,
                         (long long)lo, MAX_DIM);
    *out = (int)x;
    return 0;
}

int qk_hfcfg_real(const qk_jsonv *obj, const char *path, const char *key, double def, double *out,
                  qk_err *err)
{
    const qk_jsonv *v = qk_jsonv_get(obj, key);
    if (!v || v->type == QK_JNULL) {
        *out = def;
        return 0;
    }
    if (!qk_jsonv_f64(v, out) || !isfinite(*out) || *out <= 0)
        return qk_err_at(err, path, key, v->off, "not a finite positive number");
    return 0;
}

/* ---- families ---------------------------------------------------------------------- */

int qk_hf_family_find(const qk_jsonv *cfg, const char *path, const qk_hf_family **out, qk_err *err)
{
    const qk_jsonv *archs = qk_jsonv_get(cfg, "architectures");
    const char *name = NULL, *key = "architectures";
    if (qk_jsonv_len(archs) > 0) {
        name = qk_jsonv_str(qk_jsonv_at(archs, 0));
        if (!name)
            return qk_err_at(err, path, key, archs->off, "not an array of strings");
    } else {
        key = "model_type";
        name = qk_jsonv_get_str(cfg, key, NULL);
        if (!name)
            return qk_err_at(err, path, "architectures", 0,
                             "neither architectures nor model_type is given");
    }
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        const qk_hf_family *f = &families[i];
        if (strcmp(name, f->hf_class) == 0 || strcmp(name, f->model_type) == 0) {
            *out = f;
            return 0;
        }
    }
    return qk_err_at(err, path, key, qk_hfcfg_off(cfg, key),
                     "unsupported architecture '%.64s' (supported: LlamaForCausalLM, "
                     "MistralForCausalLM, MixtralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
                     "Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, GptOssForCausalLM, "
                     "Gemma2ForCausalLM, Gemma3ForCausalLM, Phi3ForCausalLM)",
                     name);
}

const char *qk_hf_family_arch(const qk_hf_family *f) { return f->arch; }
int qk_hf_family_head_dim(const qk_hf_family *f) { return f->head_dim; }
double qk_hf_family_eps(const qk_hf_family *f) { return f->eps; }
bool qk_hf_family_tied(const qk_hf_family *f) { return f->tied; }

int qk_hf_family_check(const qk_hf_family *f, const qk_jsonv *cfg, const char *path, qk_err *err)
{
    if (is_gemma(f)) {
        /* gemma's GeGLU: the tanh approximation (llama.cpp's LLM_FFN_GELU) */
        const char *key = qk_jsonv_get(cfg, "hidden_activation") ? "hidden_activation" : "hidden_act";
        const char *act = qk_jsonv_get_str(cfg, key, "gelu_pytorch_tanh");
        if (strcmp(act, "gelu_pytorch_tanh") != 0 && strcmp(act, "gelu_new") != 0 &&
            strcmp(act, "gelu_tanh") != 0)
            return qk_err_at(err, path, key, qk_hfcfg_off(cfg, key),
                             "unsupported activation '%.32s' (supported: gelu_pytorch_tanh)", act);
    } else if (f->kind != F_GPT_OSS) { /* gpt-oss's experts have their own SwiGLU */
        const char *act = qk_jsonv_get_str(cfg, "hidden_act", "silu");
        if (strcmp(act, "silu") != 0)
            return qk_err_at(err, path, "hidden_act", qk_hfcfg_off(cfg, "hidden_act"),
                             "unsupported activation '%.32s' (supported: silu)", act);
    }
    if (qk_jsonv_get_bool(cfg, "mlp_bias", false))
        return qk_err_at(err, path, "mlp_bias", qk_hfcfg_off(cfg, "mlp_bias"),
                         "feed-forward biases are not supported");
    double prf;
    if (qk_hfcfg_real(cfg, path, "partial_rotary_factor", 1.0, &prf, err))
        return err->code;
    if (prf != 1.0)
        return qk_err_at(err, path, "partial_rotary_factor", qk_hfcfg_off(cfg, "partial_rotary_factor"),
                         "partial rotary embeddings are not supported");
    return 0;
}

/* ---- rope ---------------------------------------------------------------------------- */

static const qk_jsonv *rope_obj(const qk_jsonv *cfg)
{
    const qk_jsonv *r = qk_jsonv_get(cfg, "rope_parameters");
    if (!qk_jsonv_is(r, QK_JOBJ))
        r = qk_jsonv_get(cfg, "rope_scaling");
    return qk_jsonv_is(r, QK_JOBJ) ? r : NULL;
}

static const char *rope_type(const qk_jsonv *rs)
{
    return qk_jsonv_get_str(rs, "rope_type", qk_jsonv_get_str(rs, "type", "default"));
}

/* One rope parameter set (default or linear) into base / scale. */
static int rope_simple(const qk_jsonv *rs, const char *path, double def_theta, float *base,
                       float *scale, qk_err *err)
{
    double theta, factor = 1.0;
    if (qk_hfcfg_real(rs, path, "rope_theta", def_theta, &theta, err))
        return err->code;
    const char *t = rope_type(rs);
    if (strcmp(t, "linear") == 0 && qk_hfcfg_real(rs, path, "factor", 1.0, &factor, err))
        return err->code;
    if (strcmp(t, "default") != 0 && strcmp(t, "linear") != 0)
        return qk_err_at(err, path, "rope_parameters", rs->off,
                         "unsupported rope type '%.32s' for this layer type (supported: default, linear)", t);
    *base = (float)theta;
    *scale = (float)(1.0 / factor);
    return 0;
}

/* _compute_yarn_parameters: YaRN with transformers' correction range
 * (truncated unless "truncate": false) and attention factor (attention_factor,
 * else 0.1 ln(factor) + 1, which the engine's YaRN rope applies itself). */
static int rope_yarn(const qk_jsonv *rs, const char *path, qk_hparams *hp, qk_err *err)
{
    double factor, fast, slow, att;
    int orig;
    if (qk_hfcfg_real(rs, path, "factor", 1.0, &factor, err) ||
        qk_hfcfg_real(rs, path, "beta_fast", 32.0, &fast, err) ||
        qk_hfcfg_real(rs, path, "beta_slow", 1.0, &slow, err) ||
        qk_hfcfg_int(rs, path, "original_max_position_embeddings", hp->n_ctx_train, 1, &orig, err))
        return err->code;
    const double mscale = factor <= 1.0 ? 1.0 : 0.1 * log(factor) + 1.0;
    if (qk_hfcfg_real(rs, path, "attention_factor", mscale, &att, err))
        return err->code;
    hp->rope_scaling = QK_ROPE_YARN;
    hp->rope_freq_scale = (float)(1.0 / factor);
    hp->yarn_ext_factor = 1.0f;
    hp->yarn_beta_fast = (float)fast;
    hp->yarn_beta_slow = (float)slow;
    hp->yarn_truncate = qk_jsonv_get_bool(rs, "truncate", true);
    hp->n_ctx_orig = orig;
    /* the rope itself multiplies by 1 + 0.1 ln(factor) (ggml's rope_yarn) */
    hp->rope_attn_factor = (float)(att / (1.0 + 0.1 * log(factor)));
    return 0;
}

/* n floats of array `key` of rs into a malloc'd table. */
static int float_array(const qk_jsonv *rs, const char *path, const char *key, int n, float **out,
                       qk_err *err)
{
    const qk_jsonv *a = qk_jsonv_get(rs, key);
    if (!qk_jsonv_is(a, QK_JARR) || qk_jsonv_len(a) != (size_t)n)
        return qk_err_at(err, path, key, a ? a->off : rs->off, "expected an array of %d numbers", n);
    float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    if (!f)
        return qk_errf(err, QK_EIO, "out of memory");
    for (int i = 0; i < n; i++) {
        double v;
        if (!qk_jsonv_f64(qk_jsonv_at(a, (size_t)i), &v) || !isfinite(v) || v <= 0) {
            free(f);
            return qk_err_at(err, path, key, a->off, "element %d is not a finite positive number", i);
        }
        f[i] = (float)v;
    }
    *out = f;
    return 0;
}

/* _compute_longrope_parameters: divisors short_factor / long_factor (llama.cpp
 * picks long when the context exceeds the original one), cos and sin times
 * attention_factor, by default sqrt(1 + ln(s) / ln(original)) with
 * s = max_position_embeddings / original (or factor). */
static int rope_longrope(const qk_jsonv *cfg, const qk_jsonv *rs, const char *path, qk_hparams *hp,
                         qk_hf_rope_tables *rt, qk_err *err)
{
    int orig;
    const char *ko = "original_max_position_embeddings";
    if (qk_hfcfg_int(qk_jsonv_get(rs, ko) ? rs : cfg, path, ko, -1, 1, &orig, err))
        return err->code;
    double factor, att;
    if (qk_hfcfg_real(rs, path, "factor", (double)hp->n_ctx_train / orig, &factor, err))
        return err->code;
    const double def = factor <= 1.0 ? 1.0 : sqrt(1.0 + log(factor) / log((double)orig));
    if (qk_hfcfg_real(rs, path, "attention_factor", def, &att, err))
        return err->code;
    if (float_array(rs, path, "short_factor", hp->n_rot / 2, &rt->shrt, err) ||
        float_array(rs, path, "long_factor", hp->n_rot / 2, &rt->lng, err))
        return err->code;
    hp->n_ctx_orig = orig;
    hp->rope_attn_factor = (float)att;
    return 0;
}

int qk_hf_family_rope(const qk_hf_family *f, const qk_jsonv *cfg, const char *path, qk_hparams *hp,
                      qk_hf_rope_tables *rt, bool *done, qk_err *err)
{
    *done = false;
    const qk_jsonv *rs = rope_obj(cfg);
    if (f->kind == F_GEMMA3) {
        /* per layer type: {"full_attention": {...}, "sliding_attention": {...}},
         * or the older rope_theta, rope_scaling (global layers) and
         * rope_local_base_freq */
        const qk_jsonv *full = rs ? qk_jsonv_get(rs, "full_attention") : NULL;
        const qk_jsonv *swa = rs ? qk_jsonv_get(rs, "sliding_attention") : NULL;
        double local;
        if (qk_jsonv_is(full, QK_JOBJ)) {
            if (rope_simple(full, path, 1e6, &hp->rope_freq_base, &hp->rope_freq_scale, err))
                return err->code;
        } else {
            double theta, factor = 1.0;
            if (qk_hfcfg_real(cfg, path, "rope_theta", 1e6, &theta, err))
                return err->code;
            if (rs && strcmp(rope_type(rs), "linear") == 0 && qk_hfcfg_real(rs, path, "factor", 1.0, &factor, err))
                return err->code;
            hp->rope_freq_base = (float)theta;
            hp->rope_freq_scale = (float)(1.0 / factor);
        }
        if (qk_jsonv_is(swa, QK_JOBJ)) {
            if (rope_simple(swa, path, 1e4, &hp->rope_freq_base_swa, &hp->rope_freq_scale_swa, err))
                return err->code;
        } else {
            if (qk_hfcfg_real(cfg, path, "rope_local_base_freq", 1e4, &local, err))
                return err->code;
            hp->rope_freq_base_swa = (float)local;
            hp->rope_freq_scale_swa = 1.0f;
        }
        *done = true;
        return 0;
    }
    if (!rs)
        return 0;
    const char *t = rope_type(rs);
    const bool yarn = strcmp(t, "yarn") == 0, lr = strcmp(t, "longrope") == 0 || strcmp(t, "su") == 0;
    if (!yarn && !lr)
        return 0;
    double theta;
    if (qk_hfcfg_real(cfg, path, "rope_theta", 10000.0, &theta, err) ||
        (!qk_jsonv_get(cfg, "rope_theta") && qk_hfcfg_real(rs, path, "rope_theta", theta, &theta, err)))
        return err->code;
    hp->rope_freq_base = (float)theta;
    hp->rope_freq_scale = 1.0f;
    *done = true;
    return yarn ? rope_yarn(rs, path, hp, err) : rope_longrope(cfg, rs, path, hp, rt, err);
}

/* ---- the rest of the config ------------------------------------------------------- */

/* layer_types (one "sliding_attention" / "full_attention" per layer) as a
 * period, or the family's default one. */
static int swa_layers(const qk_jsonv *cfg, const char *path, qk_hparams *hp, int def_period,
                      qk_err *err)
{
    const qk_jsonv *lt = qk_jsonv_get(cfg, "layer_types");
    if (!qk_jsonv_is(lt, QK_JARR)) {
        int p = def_period;
        if (qk_hfcfg_int(cfg, path, "sliding_window_pattern", p, 0, &p, err) ||
            qk_hfcfg_int(cfg, path, "_sliding_window_pattern", p, 0, &p, err))
            return err->code;
        hp->swa_period = p;
        return 0;
    }
    if (qk_jsonv_len(lt) != (size_t)hp->n_layer)
        return qk_err_at(err, path, "layer_types", lt->off, "%zu entries for %d layers",
                         qk_jsonv_len(lt), hp->n_layer);
    for (int p = 0; p <= hp->n_layer + 1; p++) {
        bool same = true;
        for (int il = 0; il < hp->n_layer && same; il++) {
            const char *s = qk_jsonv_str(qk_jsonv_at(lt, (size_t)il));
            if (!s)
                return qk_err_at(err, path, "layer_types", lt->off, "not an array of strings");
            same = (strcmp(s, "sliding_attention") == 0) == (p == 0 || il % p < p - 1);
        }
        if (same) {
            hp->swa_period = p;
            return 0;
        }
    }
    return qk_err_at(err, path, "layer_types", lt->off,
                     "sliding-window layers that do not follow a period are not supported");
}

static int experts(const qk_hf_family *f, const qk_jsonv *cfg, const char *path, qk_hparams *hp,
                   qk_err *err)
{
    const bool qwen = is_qwen_moe(f);
    /* qwen's own key is num_experts; transformers 5 writes num_local_experts for all */
    const char *kn = qk_jsonv_get(cfg, "num_experts") ? "num_experts" : "num_local_experts";
    if (qk_hfcfg_int(cfg, path, kn, -1, 1, &hp->n_expert, err) ||
        qk_hfcfg_int(cfg, path, "num_experts_per_tok", -1, 1, &hp->n_expert_used, err) ||
        qk_hfcfg_int(cfg, path, qwen ? "moe_intermediate_size" : "intermediate_size", -1, 1,
                     &hp->n_ff_exp, err))
        return err->code;
    if (hp->n_expert_used > hp->n_expert)
        return qk_err_at(err, path, "num_experts_per_tok", qk_hfcfg_off(cfg, "num_experts_per_tok"),
                         "%d experts per token of %d", hp->n_expert_used, hp->n_expert);
    if (f->kind == F_QWEN2MOE &&
        qk_hfcfg_int(cfg, path, "shared_expert_intermediate_size", -1, 1, &hp->n_ff_shexp, err))
        return err->code;
    if (qwen) {
        hp->expert_norm = qk_jsonv_get_bool(cfg, "norm_topk_prob", false);
        int step;
        if (qk_hfcfg_int(cfg, path, "decoder_sparse_step", 1, 1, &step, err))
            return err->code;
        /* the dense layers have ffn_gate/up/down instead of a router: the
         * loader takes each layer as its tensors say */
        hp->moe_dense_layers = step > 1 || qk_jsonv_len(qk_jsonv_get(cfg, "mlp_only_layers")) > 0;
    }
    return 0;
}

int qk_hf_family_config(const qk_hf_family *f, const qk_jsonv *cfg, const char *path,
                        qk_hparams *hp, qk_err *err)
{
    if (f->kind == F_MIXTRAL || f->kind == F_GPT_OSS || is_qwen_moe(f))
        if (experts(f, cfg, path, hp, err))
            return err->code;
    /* sliding windows: per layer_types (gemma, gpt-oss), or in every layer
     * (mixtral, phi3, qwen with use_sliding_window) as transformers does */
    int window = 0;
    if (qk_hfcfg_int(cfg, path, "sliding_window", 0, 0, &window, err))
        return err->code;
    if (is_qwen_moe(f) && !qk_jsonv_get_bool(cfg, "use_sliding_window", false))
        window = 0;
    if (window > 0 && f->kind != F_LLAMA && f->kind != F_QWEN2 && f->kind != F_QWEN3) {
        hp->n_swa = window;
        /* the period when layer_types is absent: gemma2 and gpt-oss alternate,
         * gemma3 has 5 sliding layers to 1 global; the others slide in every layer */
        const int period = f->kind == F_GEMMA3 ? 6 : f->kind == F_GEMMA2 || f->kind == F_GPT_OSS ? 2 : 0;
        if (swa_layers(cfg, path, hp, period, err))
            return err->code;
    }
    if (f->kind == F_GPT_OSS) {
        double limit;
        if (qk_hfcfg_real(cfg, path, "swiglu_limit", 7.0, &limit, err))
            return err->code;
        hp->swiglu_limit = (float)limit;
    }
    if (is_gemma(f)) {
        double qs, acap, fcap;
        const bool g2 = f->kind == F_GEMMA2;
        if (qk_hfcfg_real(cfg, path, "query_pre_attn_scalar", 256.0, &qs, err) ||
            qk_hfcfg_real(cfg, path, "attn_logit_softcapping", g2 && !qk_jsonv_get(cfg, "attn_logit_softcapping") ? 50.0 : 0.0, &acap, err) ||
            qk_hfcfg_real(cfg, path, "final_logit_softcapping", g2 && !qk_jsonv_get(cfg, "final_logit_softcapping") ? 30.0 : 0.0, &fcap, err))
            return err->code;
        hp->kq_scale = (float)(1.0 / sqrt(qs));
        hp->attn_softcap = (float)acap;
        hp->final_softcap = (float)fcap;
        hp->embd_scale = sqrtf((float)hp->n_embd);
        hp->norm_plus_one = true; /* Gemma{2,3}RMSNorm: x * (1 + w) */
    }
    /* gemma3's sliding-window layers have their own rope (qk_hf_family_rope) */
    if (f->kind != F_GEMMA3) {
        hp->rope_freq_base_swa = hp->rope_freq_base;
        hp->rope_freq_scale_swa = hp->rope_freq_scale;
    }
    return 0;
}

/* ---- tensor names ----------------------------------------------------------------- */

enum { M_ALL = 0x7ff };
#define M(k) (1u << (k))

/* model.layers.N.<hf> -> blk.N.<gguf>, for the families of mask */
static const struct {
    const char *hf, *gguf;
    unsigned mask;
    int xform;
} layer_names[] = {
    {"self_attn.o_proj.bias", "attn_output.bias", M_ALL, 0},
    {"self_attn.sinks", "attn_sinks.weight", M(F_GPT_OSS), 0},
    {"post_attention_layernorm.weight", "post_attention_norm.weight",
     M(F_GEMMA2) | M(F_GEMMA3) | M(F_GPT_OSS), 0},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight", M(F_GEMMA2) | M(F_GEMMA3), 0},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", M(F_GEMMA2) | M(F_GEMMA3), 0},
    {"mlp.gate.weight", "ffn_gate_inp.weight", M(F_QWEN2MOE) | M(F_QWEN3MOE) | M(F_MIXTRAL), 0},
    {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight", M(F_MIXTRAL), 0},
    {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight", M(F_QWEN2MOE), 0},
    {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight", M(F_QWEN2MOE), 0},
    {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight", M(F_QWEN2MOE), 0},
    {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight", M(F_QWEN2MOE), 0},
    {"mlp.router.weight", "ffn_gate_inp.weight", M(F_GPT_OSS), 0},
    {"mlp.router.bias", "ffn_gate_inp.bias", M(F_GPT_OSS), 0},
    {"mlp.experts.gate_up_proj", "ffn_gate_exps.weight", M(F_GPT_OSS), QK_HFX_GU_EVEN},
    {"mlp.experts.gate_up_proj", "ffn_up_exps.weight", M(F_GPT_OSS), QK_HFX_GU_ODD},
    {"mlp.experts.down_proj", "ffn_down_exps.weight", M(F_GPT_OSS), QK_HFX_T},
    {"mlp.experts.gate_up_proj_bias", "ffn_gate_exps.bias", M(F_GPT_OSS), QK_HFX_B_EVEN},
    {"mlp.experts.gate_up_proj_bias", "ffn_up_exps.bias", M(F_GPT_OSS), QK_HFX_B_ODD},
    {"mlp.experts.down_proj_bias", "ffn_down_exps.bias", M(F_GPT_OSS), 0},
    {"mlp.experts.gate_up_proj_blocks", "ffn_gate_exps.weight", M(F_GPT_OSS), QK_HFX_MX_EVEN},
    {"mlp.experts.gate_up_proj_blocks", "ffn_up_exps.weight", M(F_GPT_OSS), QK_HFX_MX_ODD},
    {"mlp.experts.down_proj_blocks", "ffn_down_exps.weight", M(F_GPT_OSS), QK_HFX_MX_ALL},
    {"self_attn.qkv_proj.weight", "attn_qkv.weight", M(F_PHI3), 0},
    {"mlp.gate_up_proj.weight", "ffn_up.weight", M(F_PHI3), 0},
};

/* model.layers.N.<prefix>.E.<hf> -> blk.N.<gguf>, expert E */
static const struct {
    const char *prefix, *hf, *gguf;
} expert_names[] = {
    {"mlp.experts.", "gate_proj.weight", "ffn_gate_exps.weight"},
    {"mlp.experts.", "up_proj.weight", "ffn_up_exps.weight"},
    {"mlp.experts.", "down_proj.weight", "ffn_down_exps.weight"},
    {"block_sparse_moe.experts.", "w1.weight", "ffn_gate_exps.weight"},
    {"block_sparse_moe.experts.", "w3.weight", "ffn_up_exps.weight"},
    {"block_sparse_moe.experts.", "w2.weight", "ffn_down_exps.weight"},
};

/* The layer index of "model.layers.N.rest" and rest, or -1. */
static long layer_of(const char *hf, const char **rest)
{
    static const char prefix[] = "model.layers.";
    if (strncmp(hf, prefix, sizeof prefix - 1) != 0)
        return -1;
    const char *p = hf + sizeof prefix - 1;
    char *end;
    long il = strtol(p, &end, 10);
    if (end == p || *end != '.' || il < 0)
        return -1;
    *rest = end + 1;
    return il;
}

int qk_hf_family_names(const qk_hf_family *f, const char *hf, qk_hf_target *out)
{
    const char *rest;
    const long il = layer_of(hf, &rest);
    if (il < 0)
        return 0;
    int n = 0;
    for (size_t i = 0; i < sizeof layer_names / sizeof layer_names[0] && n < 2; i++)
        if ((layer_names[i].mask & M(f->kind)) && strcmp(rest, layer_names[i].hf) == 0) {
            snprintf(out[n].gguf, sizeof out[n].gguf, "blk.%ld.%s", il, layer_names[i].gguf);
            out[n].expert = -1;
            out[n].xform = layer_names[i].xform;
            n++;
        }
    if (n || !(f->kind == F_MIXTRAL || is_qwen_moe(f)))
        return n;
    for (size_t i = 0; i < sizeof expert_names / sizeof expert_names[0]; i++) {
        const size_t pl = strlen(expert_names[i].prefix);
        if (strncmp(rest, expert_names[i].prefix, pl) != 0)
            continue;
        char *end;
        const long e = strtol(rest + pl, &end, 10);
        if (end == rest + pl || *end != '.' || e < 0 || e > MAX_DIM || strcmp(end + 1, expert_names[i].hf) != 0)
            continue;
        snprintf(out[0].gguf, sizeof out[0].gguf, "blk.%ld.%s", il, expert_names[i].gguf);
        out[0].expert = (int)e;
        out[0].xform = 0;
        return 1;
    }
    return 0;
}

bool qk_hf_family_hf_name(const qk_hf_family *f, const char *gguf, int expert, char *buf, size_t n)
{
    int il;
    char rest[96];
    if (sscanf(gguf, "blk.%d.%95s", &il, rest) != 2)
        return false;
    if (expert >= 0) {
        for (size_t i = 0; i < sizeof expert_names / sizeof expert_names[0]; i++)
            if (strcmp(rest, expert_names[i].gguf) == 0 &&
                (f->kind == F_MIXTRAL) == (expert_names[i].prefix[0] == 'b')) {
                snprintf(buf, n, "model.layers.%d.%s%d.%s", il, expert_names[i].prefix, expert,
                         expert_names[i].hf);
                return true;
            }
        return false;
    }
    for (size_t i = 0; i < sizeof layer_names / sizeof layer_names[0]; i++)
        if ((layer_names[i].mask & M(f->kind)) && strcmp(rest, layer_names[i].gguf) == 0) {
            snprintf(buf, n, "model.layers.%d.%s", il, layer_names[i].hf);
            return true;
        }
    return false;
}

/* ---- gpt-oss's expert layout ------------------------------------------------------- */

/* *_blocks and its *_scales as MXFP4 rows (conversion/gpt_oss.py
 * repack_mxfp4 and transform_nibble_layout: gpt-oss packs elements 2j and
 * 2j+1 into byte j, ggml elements j and j+16). */
static int derive_mxfp4(int xform, const qk_hfdir *hf, const qk_hf_tensor *t, int64_t ne[4],
                        uint8_t **owned, qk_err *err)
{
    char sname[256];
    const size_t n = strlen(t->name);
    snprintf(sname, sizeof sname, "%.*s_scales", (int)(n - 7), t->name); /* "_blocks" */
    const qk_hf_tensor *sc = qk_hf_find(hf, sname);
    if (t->n_dims != 4 || t->ne[0] != 16 || strcmp(t->dtype, "U8") != 0)
        return qk_err_at(err, hf->dir, t->name, t->st->info_offset,
                         "expected U8 MXFP4 blocks [experts, rows, groups, 16]");
    const int64_t G = t->ne[1], R = t->ne[2], E = t->ne[3];
    if (!sc)
        return qk_err_at(err, hf->dir, sname, 0, "required tensor is missing (the scales of %s)", t->name);
    if (sc->n_dims != 3 || strcmp(sc->dtype, "U8") != 0 || sc->ne[0] != G || sc->ne[1] != R || sc->ne[2] != E)
        return qk_err_at(err, hf->dir, sc->name, sc->st->info_offset,
                         "expected U8 scales [%lld, %lld, %lld]", (long long)E, (long long)R, (long long)G);
    const int step = xform == QK_HFX_MX_ALL ? 1 : 2, first = xform == QK_HFX_MX_ODD;
    if (R % step != 0)
        return qk_err_at(err, hf->dir, t->name, t->st->info_offset, "an odd number of gate/up rows");
    const int64_t rows = R / step;
    uint8_t *o = malloc((size_t)(E * rows * G) * 17);
    if (!o)
        return qk_errf(err, QK_EIO, "out of memory");
    uint8_t *p = o;
    for (int64_t e = 0; e < E; e++)
        for (int64_t r = 0; r < rows; r++) {
            const int64_t src = e * R + r * step + first;
            for (int64_t g = 0; g < G; g++, p += 17) {
                const uint8_t *b = t->data + (size_t)(src * G + g) * 16;
                p[0] = sc->data[src * G + g];
                for (int j = 0; j < 16; j++) {
                    const int lo = (j % 2 ? b[j / 2] >> 4 : b[j / 2]) & 15;
                    const int hi = (j % 2 ? b[8 + j / 2] >> 4 : b[8 + j / 2]) & 15;
                    p[1 + j] = (uint8_t)(lo | hi << 4);
                }
            }
        }
    ne[0] = G * 32, ne[1] = rows, ne[2] = E, ne[3] = 1;
    *owned = o;
    return 0;
}

int qk_hf_family_derive(int xform, const qk_hfdir *hf, const qk_hf_tensor *t, int64_t ne[4],
                        int *type, uint8_t **owned, qk_err *err)
{
    const char *dir = hf->dir;
    *type = t->type;
    if (xform == QK_HFX_MX_EVEN || xform == QK_HFX_MX_ODD || xform == QK_HFX_MX_ALL) {
        *type = QK_MXFP4;
        return derive_mxfp4(xform, hf, t, ne, owned, err);
    }
    const bool matrix = xform == QK_HFX_GU_EVEN || xform == QK_HFX_GU_ODD || xform == QK_HFX_T;
    const size_t esz = t->nelem ? (size_t)(t->nbytes / t->nelem) : 0;
    if (t->type < 0 || esz == 0 || t->nbytes % t->nelem != 0 || t->n_dims != (matrix ? 3 : 2) ||
        (xform != QK_HFX_T && t->ne[0] % 2 != 0))
        return qk_err_at(err, dir, t->name, t->st->info_offset,
                         "expected a %s tensor of plain elements, %s", matrix ? "3-D" : "2-D",
                         xform == QK_HFX_T ? "[experts, rows, columns]" : "with an even last dimension");
    uint8_t *o = malloc(t->nbytes ? (size_t)t->nbytes : 1);
    if (!o)
        return qk_errf(err, QK_EIO, "out of memory");
    const uint8_t *s = t->data;
    const int64_t a = t->ne[0], b = t->ne[1], c = matrix ? t->ne[2] : 1;
    if (xform == QK_HFX_T) {
        /* [E][I][H] -> [E][H][I] */
        for (int64_t e = 0; e < c; e++)
            for (int64_t i = 0; i < b; i++)
                for (int64_t h = 0; h < a; h++)
                    memcpy(o + (size_t)((e * a + h) * b + i) * esz, s + (size_t)((e * b + i) * a + h) * esz, esz);
        ne[0] = b, ne[1] = a, ne[2] = c, ne[3] = 1;
    } else if (matrix) {
        /* [E][H][2I] -> [E][I][H], columns 2i + odd */
        const int odd = xform == QK_HFX_GU_ODD, half = (int)(a / 2);
        for (int64_t e = 0; e < c; e++)
            for (int64_t h = 0; h < b; h++)
                for (int64_t i = 0; i < half; i++)
                    memcpy(o + (size_t)((e * half + i) * b + h) * esz,
                           s + (size_t)((e * b + h) * a + 2 * i + odd) * esz, esz);
        ne[0] = b, ne[1] = half, ne[2] = c, ne[3] = 1;
    } else {
        /* [E][2I] -> [E][I], elements 2i + odd */
        const int odd = xform == QK_HFX_B_ODD, half = (int)(a / 2);
        for (int64_t e = 0; e < b; e++)
            for (int64_t i = 0; i < half; i++)
                memcpy(o + (size_t)(e * half + i) * esz, s + (size_t)(e * a + 2 * i + odd) * esz, esz);
        ne[0] = half, ne[1] = b, ne[2] = 1, ne[3] = 1;
    }
    *owned = o;
    return 0;
}
