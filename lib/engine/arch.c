/* arch.c - the architectures as a table of traits, and a GGUF file's
 * hyper-parameters.
 *
 * References (llama.cpp at d32676d): the metadata keys of src/llama-arch.cpp;
 * the defaults and per-architecture reads of src/llama-model.cpp
 * (load_hparams), src/llama-hparams.{h,cpp} (set_swa_pattern, is_swa),
 * src/llama-context.cpp (rope scaling, YaRN's attention factor) and
 * src/models/{llama,qwen2,qwen3,qwen2moe,qwen3moe,openai-moe,gemma2,gemma3,
 * phi3}.cpp (load_arch_hparams: expert counts, sliding windows, soft-capping,
 * gemma's attention scale); llama_model_rope_type() for the rope modes.
 * Hugging Face directories set the same fields from config.json
 * (lib/engine/hfarch.c). */
#include "lib/engine/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/core/ckd.h"

#define MAX_DIM (1 << 24) /* sanity bound on every hyper-parameter */

enum {
    T_ATTN_SCALE = 1 << 0,  /* attention.scale is read (llama) */
    T_QK_NORM = 1 << 1,     /* per-head q/k RMSNorm */
    T_MOE = 1 << 2,         /* every layer has experts (expert_count required) */
    T_MOE_OPT = 1 << 3,     /* experts where a layer has a router (llama: mixtral) */
    T_EXPERT_NORM = 1 << 4, /* top-k weights normalised */
    T_SHEXP = 1 << 5,       /* a shared expert with a sigmoid gate (qwen2moe) */
    T_GEMMA = 1 << 6,       /* scaled embeddings, GeGLU, post-norms, q pre-scaled */
    T_SOFTCAP = 1 << 7,     /* attention and final soft-capping (gemma2) */
    T_OAI = 1 << 8,         /* gpt-oss: sinks, top-k softmax routing, clamped SwiGLU */
    T_Q_PRESCALE = 1 << 9,  /* phi3: q pre-scaled */
};

static const struct arch_row {
    const char *name;
    qk_arch arch;
    qk_rope_mode rope;
    unsigned traits;
    int swa_period;         /* sliding_window_pattern's default; 0: no sliding window */
} arches[] = {
    {"llama", QK_ARCH_LLAMA, QK_ROPE_NORMAL, T_ATTN_SCALE | T_MOE_OPT | T_EXPERT_NORM, 0},
    {"mistral", QK_ARCH_LLAMA, QK_ROPE_NORMAL, T_ATTN_SCALE | T_MOE_OPT | T_EXPERT_NORM, 0},
    {"qwen2", QK_ARCH_QWEN2, QK_ROPE_NEOX, 0, 0},
    {"qwen3", QK_ARCH_QWEN3, QK_ROPE_NEOX, T_QK_NORM, 0},
    {"qwen2moe", QK_ARCH_QWEN2MOE, QK_ROPE_NEOX, T_MOE | T_SHEXP, 0},
    {"qwen3moe", QK_ARCH_QWEN3MOE, QK_ROPE_NEOX, T_QK_NORM | T_MOE | T_EXPERT_NORM, 0},
    {"gpt-oss", QK_ARCH_GPT_OSS, QK_ROPE_NEOX, T_MOE | T_OAI, 2},
    {"gemma2", QK_ARCH_GEMMA2, QK_ROPE_NEOX, T_GEMMA | T_SOFTCAP, 2},
    {"gemma3", QK_ARCH_GEMMA3, QK_ROPE_NEOX, T_GEMMA | T_QK_NORM, 6},
    {"phi3", QK_ARCH_PHI3, QK_ROPE_NEOX, T_Q_PRESCALE, 0},
};

static const struct arch_row *arch_row(qk_arch a)
{
    for (size_t i = 0; i < sizeof arches / sizeof arches[0]; i++)
        if (arches[i].arch == a)
            return &arches[i];
    return &arches[0];
}

const char *qk_arch_list(void)
{
    return "llama, mistral, qwen2, qwen3, qwen2moe, qwen3moe, gpt-oss, gemma2, gemma3, phi3";
}

bool qk_arch_set(qk_hparams *hp, const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof arches / sizeof arches[0]; i++) {
        const struct arch_row *r = &arches[i];
        if (strlen(r->name) != len || memcmp(r->name, name, len) != 0)
            continue;
        snprintf(hp->arch_name, sizeof hp->arch_name, "%s", r->name);
        hp->arch = r->arch;
        hp->rope_mode = r->rope;
        hp->qk_norm = r->traits & T_QK_NORM;
        hp->q_prescale = r->traits & (T_GEMMA | T_Q_PRESCALE);
        hp->post_norms = r->traits & T_GEMMA;
        hp->attn_sinks = r->traits & T_OAI;
        hp->ffn_act = r->traits & T_GEMMA ? QK_ACT_GELU : r->traits & T_OAI ? QK_ACT_SWIGLU_OAI
                                                                            : QK_ACT_SILU;
        hp->swiglu_alpha = 1.702f; /* llama-graph.cpp LLM_FFN_SWIGLU_OAI_MOE */
        hp->swiglu_limit = 7.0f;
        hp->swa_period = r->swa_period;
        hp->gating = r->traits & T_OAI ? QK_GATE_TOPK_SOFTMAX : QK_GATE_SOFTMAX;
        hp->expert_norm = r->traits & T_EXPERT_NORM;
        hp->rope_scaling = QK_ROPE_LINEAR;
        hp->rope_freq_scale = 1.0f;
        hp->rope_attn_factor = 1.0f;
        hp->yarn_beta_fast = 32.0f; /* llama_hparams' defaults */
        hp->yarn_beta_slow = 1.0f;
        hp->yarn_truncate = true;
        return true;
    }
    return false;
}

bool qk_layer_is_swa(const qk_hparams *hp, int il)
{
    if (hp->n_swa <= 0)
        return false;
    return hp->swa_period == 0 || il % hp->swa_period < hp->swa_period - 1;
}

/* ---- GGUF metadata ------------------------------------------------------------ */

static uint64_t kv_offset(const qk_gguf *g, const char *key)
{
    const qk_gguf_kv *kv = qk_gguf_find(g, key);
    return kv ? kv->offset : 0;
}

static const char *akey(char *buf, size_t n, const char *arch, const char *suffix)
{
    snprintf(buf, n, "%s.%s", arch, suffix);
    return buf;
}

/* ARCH.suffix as an integer in [lo, MAX_DIM]; def < 0: the key is required. */
static int get_dim(const qk_gguf *g, const char *arch, const char *suffix, int64_t def, int64_t lo,
                   int *out, qk_err *err)
{
    char key[128];
    akey(key, sizeof key, arch, suffix);
    int64_t v;
    if (!qk_gguf_find(g, key)) {
        if (def < 0)
            return qk_err_at(err, g->path, key, 0, "required key is missing");
        *out = (int)def;
        return 0;
    }
    if (!qk_gguf_get_int(g, key, &v))
        return qk_err_at(err, g->path, key, kv_offset(g, key), "not an integer");
    if (v < lo || v > MAX_DIM)
        return qk_err_at(err, g->path, key, kv_offset(g, key), "%lld is out of range [%lld, %d]",
                         (long long)v, (long long)lo, MAX_DIM);
    *out = (int)v;
    return 0;
}

/* ARCH.suffix as a finite non-negative float; absent: def (required when !has_def). */
static int get_real(const qk_gguf *g, const char *arch, const char *suffix, bool has_def, float def,
                    float *out, qk_err *err)
{
    char key[128];
    akey(key, sizeof key, arch, suffix);
    double v;
    if (!qk_gguf_find(g, key)) {
        if (!has_def)
            return qk_err_at(err, g->path, key, 0, "required key is missing");
        *out = def;
        return 0;
    }
    if (!qk_gguf_get_f64(g, key, &v) || !isfinite(v) || v < 0)
        return qk_err_at(err, g->path, key, kv_offset(g, key), "not a finite non-negative number");
    *out = (float)v;
    return 0;
}

static int read_arch(const qk_gguf *g, qk_hparams *hp, qk_err *err)
{
    const char *key = "general.architecture";
    qk_str s;
    if (!qk_gguf_find(g, key))
        return qk_err_at(err, g->path, key, 0, "required key is missing");
    if (!qk_gguf_get_str(g, key, &s))
        return qk_err_at(err, g->path, key, kv_offset(g, key), "not a string");
    if (qk_arch_set(hp, s.ptr, (size_t)s.len))
        return 0;
    int n = s.len > 64 ? 64 : (int)s.len;
    return qk_err_at(err, g->path, key, kv_offset(g, key), "unsupported architecture '%.*s' (supported: %s)",
                     n, s.ptr, qk_arch_list());
}

/* rope.scaling.type (llama.cpp's default "linear") and its factor; YaRN's
 * parameters as llama_context sets them: ext_factor 1, beta_fast 32 and
 * beta_slow 1 (the GGUF keys are read by other architectures only), and the
 * attention factor that cancels get_mscale so that rope_yarn's own
 * 1 + 0.1 ln(factor) remains, times rope.scaling.attn_factor. */
static int read_rope_scaling(const qk_gguf *g, qk_hparams *hp, qk_err *err)
{
    char key[128];
    const char *a = hp->arch_name;
    qk_str s = {"linear", 6};
    akey(key, sizeof key, a, "rope.scaling.type");
    if (qk_gguf_find(g, key) && !qk_gguf_get_str(g, key, &s))
        return qk_err_at(err, g->path, key, kv_offset(g, key), "not a string");
    const bool none = qk_str_eq(s, "none"), yarn = qk_str_eq(s, "yarn");
    if (!none && !yarn && !qk_str_eq(s, "linear")) {
        int n = s.len > 32 ? 32 : (int)s.len;
        return qk_err_at(err, g->path, key, kv_offset(g, key),
                         "unsupported rope scaling '%.*s' (supported: none, linear, yarn)", n, s.ptr);
    }
    float factor;
    if (get_real(g, a, "rope.scaling.factor", true, 0.0f, &factor, err) ||
        get_real(g, a, "rope.scaling.attn_factor", true, 1.0f, &hp->rope_attn_factor, err) ||
        get_dim(g, a, "rope.scaling.original_context_length", hp->n_ctx_train, 0, &hp->n_ctx_orig, err))
        return err->code;
    hp->rope_freq_scale = factor == 0.0f || none ? 1.0f : 1.0f / factor;
    if (yarn) {
        hp->rope_scaling = QK_ROPE_YARN;
        hp->yarn_ext_factor = 1.0f;
        const float f = 1.0f / hp->rope_freq_scale;
        const float mscale = f <= 1.0f ? 1.0f : 0.1f * logf(f) + 1.0f;
        hp->rope_attn_factor *= mscale * (1.0f / (1.0f + 0.1f * logf(f)));
    }
    return 0;
}

/* attention.sliding_window_pattern: a period, or one bool per layer (true:
 * sliding window), which must then follow some period (set_swa_pattern). */
static int read_swa_pattern(const qk_gguf *g, qk_hparams *hp, qk_err *err)
{
    char key[128];
    akey(key, sizeof key, hp->arch_name, "attention.sliding_window_pattern");
    const qk_gguf_kv *kv = qk_gguf_find(g, key);
    if (!kv)
        return 0;
    if (kv->v.type != QK_GGUF_ARRAY)
        return get_dim(g, hp->arch_name, "attention.sliding_window_pattern", 0, 0, &hp->swa_period,
                       err);
    if (kv->v.arr.elem != QK_GGUF_BOOL || kv->v.arr.n != (uint64_t)hp->n_layer)
        return qk_err_at(err, g->path, key, kv->offset, "not an array of %d bools", hp->n_layer);
    for (int p = 0; p <= hp->n_layer + 1; p++) {
        bool same = true;
        for (int il = 0; il < hp->n_layer && same; il++)
            same = (kv->v.arr.raw[il] != 0) == (p == 0 || il % p < p - 1);
        if (same) {
            hp->swa_period = p;
            return 0;
        }
    }
    return qk_err_at(err, g->path, key, kv->offset,
                     "sliding-window layers that do not follow a period are not supported");
}

/* Sliding windows, soft-capping and gemma's attention scale (load_arch_hparams). */
static int read_family(const qk_gguf *g, qk_hparams *hp, qk_err *err)
{
    const char *a = hp->arch_name;
    hp->rope_freq_base_swa = hp->rope_freq_base;
    hp->rope_freq_scale_swa = hp->rope_freq_scale;
    switch (hp->arch) {
    case QK_ARCH_GPT_OSS:
        if (get_dim(g, a, "attention.sliding_window", -1, 0, &hp->n_swa, err) ||
            get_dim(g, a, "expert_feed_forward_length", -1, 1, &hp->n_ff_exp, err))
            return err->code;
        break;
    case QK_ARCH_GEMMA2:
        if (get_dim(g, a, "attention.sliding_window", 4096, 0, &hp->n_swa, err) ||
            get_real(g, a, "attn_logit_softcapping", true, 50.0f, &hp->attn_softcap, err) ||
            get_real(g, a, "final_logit_softcapping", true, 30.0f, &hp->final_softcap, err))
            return err->code;
        break;
    case QK_ARCH_GEMMA3:
        hp->rope_freq_base_swa = 10000.0f; /* llama_hparams' default, not the global base */
        hp->rope_freq_scale_swa = 1.0f;
        if (get_dim(g, a, "attention.sliding_window", 0, 0, &hp->n_swa, err) ||
            get_real(g, a, "final_logit_softcapping", true, 0.0f, &hp->final_softcap, err))
            return err->code;
        break;
    default:
        hp->swa_period = 0; /* phi3's window is disabled in llama.cpp; llama's is not read */
        return 0;
    }
    if (read_swa_pattern(g, hp, err) ||
        get_real(g, a, "rope.freq_base_swa", true, hp->rope_freq_base_swa, &hp->rope_freq_base_swa, err))
        return err->code;
    if (hp->arch == QK_ARCH_GEMMA2 || hp->arch == QK_ARCH_GEMMA3) {
        hp->embd_scale = sqrtf((float)hp->n_embd);
        /* gemma_pytorch's config: the 27B models scale by the model width per head */
        const bool b27 = hp->n_layer == (hp->arch == QK_ARCH_GEMMA2 ? 46 : 62);
        hp->kq_scale = b27 ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                           : 1.0f / sqrtf((float)hp->head_dim);
    }
    return 0;
}

/* expert_count and the expert shapes (load_arch_hparams / load_arch_tensors). */
static int read_experts(const qk_gguf *g, const struct arch_row *row, qk_hparams *hp, qk_err *err)
{
    const char *a = hp->arch_name;
    char key[128];
    const bool required = row->traits & T_MOE;
    if (get_dim(g, a, "expert_count", required ? -1 : 0, 0, &hp->n_expert, err))
        return err->code;
    if (hp->n_expert == 0 && !required)
        return 0;
    if (!(row->traits & (T_MOE | T_MOE_OPT)))
        return qk_err_at(err, g->path, akey(key, sizeof key, a, "expert_count"),
                         kv_offset(g, key), "mixture-of-experts %s models (%d experts) are not supported",
                         a, hp->n_expert);
    if (get_dim(g, a, "expert_used_count", -1, 1, &hp->n_expert_used, err))
        return err->code;
    if (hp->n_expert < 1 || hp->n_expert_used > hp->n_expert)
        return qk_err_at(err, g->path, akey(key, sizeof key, a, "expert_used_count"), kv_offset(g, key),
                         "%d experts used of %d", hp->n_expert_used, hp->n_expert);
    const int def = row->traits & T_MOE_OPT ? hp->n_ff : hp->n_ff / hp->n_expert_used;
    if (hp->n_ff_exp == 0 && get_dim(g, a, "expert_feed_forward_length", def, 1, &hp->n_ff_exp, err))
        return err->code;
    if ((row->traits & T_SHEXP) &&
        get_dim(g, a, "expert_shared_feed_forward_length", hp->n_ff, 1, &hp->n_ff_shexp, err))
        return err->code;
    return 0;
}

static int check_shapes(const qk_gguf *g, qk_hparams *hp, qk_err *err)
{
    const char *a = hp->arch_name;
    char key[128];
    if (hp->head_dim < 1)
        return qk_err_at(err, g->path, akey(key, sizeof key, a, "attention.key_length"), kv_offset(g, key),
                         "head size is 0 (embedding_length %d < head_count %d)", hp->n_embd, hp->n_head);
    if (hp->n_head % hp->n_head_kv != 0)
        return qk_err_at(err, g->path, akey(key, sizeof key, a, "attention.head_count_kv"),
                         kv_offset(g, key), "head_count %d is not a multiple of head_count_kv %d",
                         hp->n_head, hp->n_head_kv);
    if (hp->n_rot > hp->head_dim || hp->n_rot % 2 != 0)
        return qk_err_at(err, g->path, akey(key, sizeof key, a, "rope.dimension_count"), kv_offset(g, key),
                         "%d must be even and at most the head size %d", hp->n_rot, hp->head_dim);
    uint64_t t;
    const int hd = hp->head_dim > hp->head_dim_v ? hp->head_dim : hp->head_dim_v;
    if (qk_ckd_mul(&t, (uint64_t)hp->n_head, (uint64_t)hd) || t > MAX_DIM)
        return qk_err_at(err, g->path, akey(key, sizeof key, a, "attention.head_count"), kv_offset(g, key),
                         "heads x head size is too large");
    return 0;
}

int qk_gguf_hparams(const qk_gguf *g, qk_hparams *hp, qk_err *err)
{
    memset(hp, 0, sizeof *hp);
    if (read_arch(g, hp, err))
        return err->code;
    const struct arch_row *row = arch_row(hp->arch);
    const char *a = hp->arch_name;
    if (get_dim(g, a, "embedding_length", -1, 1, &hp->n_embd, err) ||
        get_dim(g, a, "block_count", -1, 1, &hp->n_layer, err) ||
        get_dim(g, a, "feed_forward_length", -1, 1, &hp->n_ff, err) ||
        get_dim(g, a, "attention.head_count", -1, 1, &hp->n_head, err) ||
        get_dim(g, a, "attention.head_count_kv", hp->n_head, 1, &hp->n_head_kv, err) ||
        get_dim(g, a, "attention.key_length", hp->n_embd / hp->n_head, 1, &hp->head_dim, err) ||
        get_dim(g, a, "attention.value_length", hp->head_dim, 1, &hp->head_dim_v, err) ||
        get_dim(g, a, "rope.dimension_count", hp->head_dim, 0, &hp->n_rot, err) ||
        get_dim(g, a, "context_length", 0, 0, &hp->n_ctx_train, err))
        return err->code;
    if (get_real(g, a, "rope.freq_base", true, 10000.0f, &hp->rope_freq_base, err) ||
        get_real(g, a, "attention.layer_norm_rms_epsilon", false, 0.0f, &hp->rms_eps, err))
        return err->code;
    hp->kq_scale = 1.0f / sqrtf((float)hp->head_dim);
    if (row->traits & T_ATTN_SCALE) {
        float s;
        if (get_real(g, a, "attention.scale", true, 0.0f, &s, err))
            return err->code;
        if (s != 0.0f)
            hp->kq_scale = s;
    }
    if (check_shapes(g, hp, err) || read_rope_scaling(g, hp, err) || read_family(g, hp, err) ||
        read_experts(g, row, hp, err))
        return err->code;
    return 0;
}
