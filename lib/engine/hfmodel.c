/* hfmodel.c - a Hugging Face directory as the engine's model (see hfmodel.h).
 *
 * References: transformers' LlamaConfig / Qwen2Config / Qwen3Config for the
 * config.json keys and defaults, and llama.cpp's converter
 * (convert_hf_to_gguf.py, conversion/llama.py at d32676d) for the tensor
 * names, the q/k permutation and the llama3 rope factors.  What the other
 * families add (experts, sliding windows, gemma's norms, ...) is in
 * lib/engine/hfarch.c. */
#include "lib/engine/hfmodel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/ckd.h"
#include "formats/ckpt.h"
#include "formats/hfnames.h"
#include "lib/engine/hfarch.h"
#include "kernels/types.h"
#include "lib/engine/hfweights.h"
#include "lib/engine/hfxform.h"

#define MAX_DIM (1 << 24) /* sanity bound on every hyper-parameter */

struct qk_hfmodel_map {
    char gguf[96];            /* llama.cpp's name */
    int expert;               /* expert index of a per-expert matrix, else -1 */
    const qk_hf_tensor *t;    /* the stored tensor (a quantized one's main part) */
    int perm;                 /* QK_PERM_* (applied only when permute_qk) */
    int xform;                /* QK_HFX_* (hfarch.h): the family's own layout */
    uint8_t *permuted;        /* the permuted or rearranged copy, made on first use */
    int64_t ne[4];            /* the rearranged copy's shape and type */
    int type;
    const qk_ck_tensor *ct;   /* a quantized logical tensor (NULL: t as stored) */
    qk_wq wq;                 /* its view, made when the map is built */
};

/* The rope_scaling object (or transformers 5's rope_parameters), or NULL. */
static const qk_jsonv *rope_params(const qk_jsonv *cfg)
{
    const qk_jsonv *r = qk_jsonv_get(cfg, "rope_scaling");
    if (qk_jsonv_is(r, QK_JOBJ))
        return r;
    r = qk_jsonv_get(cfg, "rope_parameters");
    return qk_jsonv_is(r, QK_JOBJ) ? r : NULL;
}

/* Llama 3's per-frequency divisors: conversion/llama.py
 * generate_extra_tensors, in float as its float32 tensors compute them. */
static int llama3_factors(const qk_jsonv *rs, const char *path, const qk_hparams *hp,
                          float **out, qk_err *err)
{
    double factor, lo_f, hi_f, old_ctx;
    if (qk_hfcfg_real(rs, path, "factor", 8.0, &factor, err) ||
        qk_hfcfg_real(rs, path, "low_freq_factor", 1.0, &lo_f, err) ||
        qk_hfcfg_real(rs, path, "high_freq_factor", 4.0, &hi_f, err) ||
        qk_hfcfg_real(rs, path, "original_max_position_embeddings", 8192.0, &old_ctx, err))
        return err->code;
    if (hi_f == lo_f)
        return qk_err_at(err, path, "rope_scaling", rs->off,
                         "llama3 scaling needs high_freq_factor != low_freq_factor");
    const int n = hp->n_rot / 2;
    float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    if (!f)
        return qk_errf(err, QK_EIO, "out of memory");
    const float lo_wavelen = (float)(old_ctx / lo_f), hi_wavelen = (float)(old_ctx / hi_f);
    const float pi2 = (float)(2.0 * 3.14159265358979323846);
    for (int i = 0; i < n; i++) {
        const float freq = 1.0f / powf(hp->rope_freq_base, (float)(2 * i) / (float)hp->n_rot);
        const float wavelen = pi2 / freq;
        if (wavelen < hi_wavelen) {
            f[i] = 1.0f;
        } else if (wavelen > lo_wavelen) {
            f[i] = (float)factor;
        } else {
            const float smooth = ((float)old_ctx / wavelen - (float)lo_f) / (float)(hi_f - lo_f);
            f[i] = 1.0f / ((1.0f - smooth) / (float)factor + smooth);
        }
    }
    *out = f;
    return 0;
}

static int read_rope(const qk_hf_family *fam, const qk_jsonv *cfg, const char *path, qk_hparams *hp,
                     qk_hf_rope_tables *rt, qk_err *err)
{
    bool done;
    if (qk_hf_family_rope(fam, cfg, path, hp, rt, &done, err) || done)
        return err->code;
    float **factors = &rt->freqs;
    const qk_jsonv *rs = rope_params(cfg);
    double theta;
    /* rope_theta: top level, or inside rope_parameters (transformers 5) */
    if (qk_hfcfg_real(cfg, path, "rope_theta", 10000.0, &theta, err))
        return err->code;
    if (rs && !qk_jsonv_get(cfg, "rope_theta") && qk_hfcfg_real(rs, path, "rope_theta", theta, &theta, err))
        return err->code;
    hp->rope_freq_base = (float)theta;
    hp->rope_freq_scale = 1.0f;
    if (!rs)
        return 0;
    const char *type = qk_jsonv_get_str(rs, "rope_type", qk_jsonv_get_str(rs, "type", "default"));
    if (strcmp(type, "default") == 0)
        return 0;
    if (strcmp(type, "llama3") == 0)
        return llama3_factors(rs, path, hp, factors, err);
    if (strcmp(type, "linear") == 0) {
        double factor;
        if (qk_hfcfg_real(rs, path, "factor", 1.0, &factor, err))
            return err->code;
        hp->rope_freq_scale = (float)(1.0 / factor);
        return 0;
    }
    return qk_err_at(err, path, "rope_scaling", rs->off,
                     "unsupported rope scaling '%.32s' (supported: default, linear, llama3, yarn, longrope)", type);
}

int qk_hf_config_hparams(const qk_jsonv *cfg, const char *path, qk_hparams *hp, bool *tied,
                         qk_hf_rope_tables *rt, qk_err *err)
{
    memset(hp, 0, sizeof *hp);
    memset(rt, 0, sizeof *rt);
    if (!qk_jsonv_is(cfg, QK_JOBJ))
        return qk_err_at(err, path, "config", cfg ? cfg->off : 0, "not a JSON object");
    const qk_hf_family *fam;
    if (qk_hf_family_find(cfg, path, &fam, err) || qk_hf_family_check(fam, cfg, path, err))
        return err->code;
    qk_arch_set(hp, qk_hf_family_arch(fam), strlen(qk_hf_family_arch(fam)));
    const int hd = qk_hf_family_head_dim(fam);
    int vocab;
    if (qk_hfcfg_int(cfg, path, "hidden_size", -1, 1, &hp->n_embd, err) ||
        qk_hfcfg_int(cfg, path, "intermediate_size", -1, 1, &hp->n_ff, err) ||
        qk_hfcfg_int(cfg, path, "num_hidden_layers", -1, 1, &hp->n_layer, err) ||
        qk_hfcfg_int(cfg, path, "num_attention_heads", -1, 1, &hp->n_head, err) ||
        qk_hfcfg_int(cfg, path, "num_key_value_heads", hp->n_head, 1, &hp->n_head_kv, err) ||
        qk_hfcfg_int(cfg, path, "head_dim", hd ? hd : hp->n_embd / hp->n_head, 1, &hp->head_dim, err) ||
        qk_hfcfg_int(cfg, path, "max_position_embeddings", 2048, 1, &hp->n_ctx_train, err) ||
        qk_hfcfg_int(cfg, path, "vocab_size", 0, 0, &vocab, err))
        return err->code;
    hp->n_vocab = vocab;
    hp->head_dim_v = hp->head_dim;
    hp->n_rot = hp->head_dim;
    if (hp->n_head % hp->n_head_kv != 0)
        return qk_err_at(err, path, "num_key_value_heads", qk_hfcfg_off(cfg, "num_key_value_heads"),
                         "num_attention_heads %d is not a multiple of %d", hp->n_head,
                         hp->n_head_kv);
    if (hp->head_dim % 2 != 0)
        return qk_err_at(err, path, "head_dim", qk_hfcfg_off(cfg, "head_dim"),
                         "head size %d is odd: rope needs pairs", hp->head_dim);
    uint64_t t;
    if (qk_ckd_mul(&t, (uint64_t)hp->n_head, (uint64_t)hp->head_dim) || t > MAX_DIM)
        return qk_err_at(err, path, "num_attention_heads", qk_hfcfg_off(cfg, "num_attention_heads"),
                         "heads x head size is too large");
    /* Mistral's sliding window: the engine attends to the whole context, so
     * keep the context within the window, where the two agree. */
    int window;
    if (qk_hfcfg_int(cfg, path, "sliding_window", 0, 0, &window, err))
        return err->code;
    if (strcmp(hp->arch_name, "mistral") == 0 && window > 0 && window < hp->n_ctx_train)
        hp->n_ctx_train = window;
    double eps;
    if (qk_hfcfg_real(cfg, path, "rms_norm_eps", qk_hf_family_eps(fam), &eps, err))
        return err->code;
    hp->rms_eps = (float)eps;
    hp->kq_scale = 1.0f / sqrtf((float)hp->head_dim);
    *tied = qk_jsonv_get_bool(cfg, "tie_word_embeddings", qk_hf_family_tied(fam));
    if (read_rope(fam, cfg, path, hp, rt, err))
        return err->code;
    return qk_hf_family_config(fam, cfg, path, hp, err);
}

/* ---- tensors ------------------------------------------------------------------ */

static int map_cmp(const void *a, const void *b)
{
    const qk_hfmodel_map *x = a, *y = b;
    const int c = strcmp(x->gguf, y->gguf);
    return c ? c : (x->expert > y->expert) - (x->expert < y->expert);
}

/* Every HF tensor llama.cpp has a name for (the family's own names first,
 * hfarch.h; a tensor may make two), sorted by that name and expert; for a
 * quantized checkpoint its logical tensors (MODULE.weight for each quantized
 * module, with its view). */
static int build_map(qk_hfmodel *h, qk_err *err)
{
    const qk_hfdir *hf = h->hf;
    const size_t n = h->ck ? h->ck->n : hf->n_tensors;
    h->map = calloc(n ? 2 * n : 1, sizeof *h->map);
    if (!h->map)
        return qk_errf(err, QK_EIO, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const qk_ck_tensor *ct = h->ck ? &h->ck->t[i] : NULL;
        const char *name = ct ? ct->name : hf->tensors[i].name;
        const qk_hf_tensor *st = ct ? ct->w : &hf->tensors[i];
        const bool parted = ct && ct->layout != QK_CK_DENSE;
        qk_hf_target tg[2];
        const int nt = qk_hf_family_names(h->fam, name, tg);
        if (nt && parted)
            return qk_err_at(err, hf->dir, name, st->st->info_offset,
                             "a quantized tensor in this family's own layout (fused or per-expert) "
                             "cannot be computed on its parts");
        for (int k = 0; k < nt; k++) {
            qk_hfmodel_map *e = &h->map[h->n_map++];
            memcpy(e->gguf, tg[k].gguf, sizeof e->gguf);
            e->expert = tg[k].expert;
            e->xform = tg[k].xform;
            e->t = st;
        }
        if (nt)
            continue;
        qk_hfmodel_map *e = &h->map[h->n_map];
        if (qk_hf_to_gguf_name(name, e->gguf, sizeof e->gguf, &e->perm) != 0)
            continue; /* e.g. rotary_emb.inv_freq: not part of the graph */
        e->expert = -1;
        e->t = st;
        if (parted) {
            e->ct = ct;
            if (qk_hf_weight_view(h->ck, ct, h->config_path, &e->wq, err))
                return err->code;
        }
        h->n_map++;
    }
    qsort(h->map, h->n_map, sizeof *h->map, map_cmp);
    return 0;
}

static qk_hfmodel_map *map_find_expert(const qk_hfmodel *h, const char *gguf, int expert)
{
    qk_hfmodel_map key;
    snprintf(key.gguf, sizeof key.gguf, "%s", gguf);
    key.expert = expert;
    return bsearch(&key, h->map, h->n_map, sizeof *h->map, map_cmp);
}

static qk_hfmodel_map *map_find(const qk_hfmodel *h, const char *gguf)
{
    return map_find_expert(h, gguf, -1);
}

/* LlamaModel.permute: GGUF row r is HF row qk_unpermute_row(r) (rows of a
 * 2-D weight, elements of a 1-D bias). */
static int permute(const qk_hfmodel *h, qk_hfmodel_map *e, qk_err *err)
{
    const qk_hf_tensor *t = e->t;
    const int64_t n_head = e->perm == QK_PERM_Q ? h->m.hp.n_head : h->m.hp.n_head_kv;
    const int64_t rows = t->n_dims == 1 ? t->ne[0] : t->ne[1];
    if (t->n_dims < 1 || t->n_dims > 2 || rows % (2 * n_head) != 0 || t->nbytes % rows != 0)
        return qk_err_at(err, h->hf->dir, t->name, t->st->info_offset,
                         "cannot permute for rope: %lld rows, %lld heads", (long long)rows,
                         (long long)n_head);
    const size_t row_bytes = (size_t)(t->nbytes / (uint64_t)rows);
    e->permuted = malloc(t->nbytes ? (size_t)t->nbytes : 1);
    if (!e->permuted)
        return qk_errf(err, QK_EIO, "out of memory");
    for (int64_t r = 0; r < rows; r++)
        memcpy(e->permuted + (size_t)r * row_bytes,
               t->data + (size_t)qk_unpermute_row(r, rows, n_head) * row_bytes, row_bytes);
    return 0;
}

/* A table the config made (rope factors) as a tensor. */
static int table(const qk_hfmodel *h, const float *t, const char *what, qk_src_tensor *out)
{
    if (!t)
        return 0;
    *out = (qk_src_tensor){.name = what, .name_len = (int)strlen(what), .type = QK_F32,
                           .ne = {h->m.hp.n_rot / 2, 1, 1, 1}, .data = (const uint8_t *)t};
    return 1;
}

/* Map entry e as a tensor: stored, permuted for rope, or in the family's
 * own layout rearranged (hfarch.h). */
static int entry_tensor(qk_hfmodel *h, qk_hfmodel_map *e, qk_src_tensor *out, qk_err *err)
{
    const qk_hf_tensor *t = e->t;
    if (e->ct) {
        *out = (qk_src_tensor){.name = e->ct->name, .name_len = (int)strlen(e->ct->name), .type = e->wq.type,
                               .ne = {e->ct->cols, e->ct->rows, 1, 1}, .offset = t->st->info_offset,
                               .wq = &e->wq, .mapped = 1}; /* a view of the mapped parts */
        return 1;
    }
    if (t->n_dims > 4) {
        qk_err_at(err, h->hf->dir, t->name, t->st->info_offset, "%d dimensions", t->n_dims);
        return -1;
    }
    if (t->type < 0) {
        qk_err_at(err, h->hf->dir, t->name, t->st->info_offset, "dtype %s is not supported",
                  t->dtype);
        return -1;
    }
    const uint8_t *data = t->data;
    const int64_t *ne = t->ne;
    int type = t->type;
    if (e->xform != QK_HFX_NONE) {
        if (!e->permuted && qk_hf_family_derive(e->xform, h->hf, t, e->ne, &e->type, &e->permuted, err))
            return -1;
        data = e->permuted;
        ne = e->ne;
        type = e->type;
    } else if (h->permute_qk && e->perm != QK_PERM_NONE) {
        if (!e->permuted && permute(h, e, err))
            return -1;
        data = e->permuted;
    }
    *out = (qk_src_tensor){.name = t->name, .name_len = (int)strlen(t->name), .type = type,
                           .ne = {ne[0], ne[1], ne[2], ne[3]}, .data = data,
                           .offset = t->st->info_offset, .mapped = data == t->data}; /* qk_st_open maps */
    return 1;
}

static int hf_find(void *ctx, const char *name, qk_src_tensor *out, qk_err *err)
{
    qk_hfmodel *h = ctx;
    if (strcmp(name, "rope_freqs.weight") == 0)
        return table(h, h->rope.freqs, "rope_scaling", out);
    if (strcmp(name, "rope_factors_long.weight") == 0)
        return table(h, h->rope.lng, "rope_scaling.long_factor", out);
    if (strcmp(name, "rope_factors_short.weight") == 0)
        return table(h, h->rope.shrt, "rope_scaling.short_factor", out);
    if (h->tied && strcmp(name, "output.weight") == 0)
        return 0; /* tie_word_embeddings: transformers ignores a stored lm_head */
    qk_hfmodel_map *e = map_find(h, name);
    return e ? entry_tensor(h, e, out, err) : 0;
}

/* Expert e's own matrix (Qwen-MoE, Mixtral: one HF tensor per expert). */
static int hf_find_expert(void *ctx, const char *name, int expert, qk_src_tensor *out, qk_err *err)
{
    qk_hfmodel *h = ctx;
    qk_hfmodel_map *e = map_find_expert(h, name, expert);
    return e ? entry_tensor(h, e, out, err) : 0;
}

/* The Hugging Face name of a GGUF tensor name, for "missing" messages. */
static void hf_name(void *ctx, const char *gguf, char *buf, size_t n)
{
    const qk_hfmodel *h = ctx;
    if (qk_hf_family_hf_name(h->fam, gguf, strstr(gguf, "_exps.weight") ? 0 : -1, buf, n))
        return;
    static const char *const globals[] = {"model.embed_tokens.weight", "model.norm.weight",
                                          "lm_head.weight"};
    static const char *const suffixes[] = {
        "input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
        "self_attn.v_proj.weight", "self_attn.o_proj.weight", "self_attn.q_norm.weight",
        "self_attn.k_norm.weight", "post_attention_layernorm.weight", "mlp.gate_proj.weight",
        "mlp.up_proj.weight", "mlp.down_proj.weight"};
    char cand[160], g[96];
    int perm;
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
        if (qk_hf_to_gguf_name(globals[i], g, sizeof g, &perm) == 0 && strcmp(g, gguf) == 0) {
            snprintf(buf, n, "%s", globals[i]);
            return;
        }
    int layer;
    if (sscanf(gguf, "blk.%d.", &layer) == 1) {
        for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
            snprintf(cand, sizeof cand, "model.layers.%d.%s", layer, suffixes[i]);
            if (qk_hf_to_gguf_name(cand, g, sizeof g, &perm) == 0 && strcmp(g, gguf) == 0) {
                snprintf(buf, n, "%s", cand);
                return;
            }
        }
    }
    snprintf(buf, n, "%s", gguf);
}

int qk_hfmodel_open(qk_hfmodel **out, const char *path, qk_err *err)
{
    *out = NULL;
    qk_hfmodel *h = calloc(1, sizeof *h);
    if (!h)
        return qk_errf(err, QK_EIO, "out of memory");
    if (qk_hf_open(&h->hf, path, err))
        goto fail;
    /* a quantization config is checked against the tensors here too (formats/ckpt_claim.c),
     * though the model reads its tensors by name: a config that lies is refused, not run */
    qk_ckpt *ck = NULL;
    if (qk_ckpt_open(&ck, h->hf, err))
        goto fail;
    qk_ckpt_close(ck);
    size_t n = strlen(h->hf->dir) + sizeof "/config.json";
    h->config_path = malloc(n);
    if (!h->config_path) {
        qk_errf(err, QK_EIO, "out of memory");
        goto fail;
    }
    snprintf(h->config_path, n, "%s/config.json", h->hf->dir);
    if (!h->hf->config) {
        qk_err_at(err, h->config_path, "config.json", 0,
                  "missing: a Hugging Face model directory needs its config.json");
        goto fail;
    }
    qk_hparams hp;
    if (qk_hf_config_hparams(h->hf->config, h->config_path, &hp, &h->tied, &h->rope, err) ||
        qk_hf_family_find(h->hf->config, h->config_path, &h->fam, err))
        goto fail;
    const int vocab = hp.n_vocab;
    if (qk_ckpt_open(&h->ck, h->hf, err))
        goto fail;
    if (!h->ck->quantized) {
        qk_ckpt_close(h->ck);
        h->ck = NULL;
    } else if (hp.rope_mode == QK_ROPE_NORMAL) {
        hp.rope_mode = QK_ROPE_NEOX; /* the stored rows, rotate_half as transformers (hfmodel.h) */
    }
    h->permute_qk = hp.rope_mode == QK_ROPE_NORMAL;
    h->m.hp = hp; /* permute() reads the head counts */
    if (build_map(h, err))
        goto fail;
    if (!h->tied && !map_find(h, "output.weight")) {
        qk_err_at(err, h->hf->dir, "lm_head.weight", 0,
                  "required tensor is missing (tie_word_embeddings is false)");
        goto fail;
    }
    const qk_model_source src = {.path = h->hf->dir, .ctx = h, .find = hf_find,
                                 .source_name = hf_name, .find_expert = hf_find_expert};
    if (qk_model_load_source(&h->m, &hp, &src, err) ||
        (h->ck && qk_hf_kv_scales(h->ck, h->config_path, &h->m, err)))
        goto fail;
    qk_tcfg *tc = NULL; /* SpinQuant / QuaRot: the online part of the rotations */
    int trc = qk_tcfg_parse(h->hf->config, h->config_path, &tc, err);
    if (!trc)
        trc = qk_hf_apply_transforms(tc, h->hf, h->config_path, &h->m, err);
    qk_tcfg_free(tc);
    if (trc)
        goto fail;
    if (vocab && vocab != h->m.hp.n_vocab) {
        qk_err_at(err, h->config_path, "vocab_size", qk_hfcfg_off(h->hf->config, "vocab_size"),
                  "%d, but model.embed_tokens.weight has %d rows", vocab, h->m.hp.n_vocab);
        goto fail;
    }
    *out = h;
    return 0;
fail:
    qk_hfmodel_close(h);
    return err->code ? err->code : QK_EINPUT;
}

void qk_hfmodel_close(qk_hfmodel *h)
{
    if (!h)
        return;
    qk_model_free(&h->m);
    for (size_t i = 0; i < h->n_map; i++)
        free(h->map[i].permuted);
    free(h->map);
    qk_ckpt_close(h->ck);
    free(h->rope.freqs), free(h->rope.lng), free(h->rope.shrt);
    free(h->config_path);
    qk_hf_close(h->hf);
    free(h);
}
