/* conv_plan.c - which tensors a conversion writes, in which order, shape and
 * type: ModelBase.prepare_tensors and the classes' filter_tensors,
 * modify_tensors and generate_extra_tensors (llama.cpp d32676d,
 * conversion/base.py, llama.py, qwen.py, gemma.py, phi.py, gpt_oss.py).
 * Tensor names are the model family's (lib/engine/hfarch.h, which also
 * serves qk-run's Hugging Face loader) or the generic Llama ones
 * (formats/hfnames.h). */
#include "lib/convert/conv_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/hfnames.h"
#include "kernels/types.h"
#include "lib/convert/conv_meta.h"
#include "lib/engine/hfarch.h"

static int oom(qk_err *err) { return qk_errf(err, QK_EIO, "qk-convert: out of memory"); }

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const qk_hf_tensor *const *)a)->name, (*(const qk_hf_tensor *const *)b)->name);
}

const qk_hf_tensor **qk_conv_source_order(const qk_hfdir *hf)
{
    const qk_hf_tensor **order = malloc((hf->n_tensors ? hf->n_tensors : 1) * sizeof *order);
    if (!order)
        return NULL;
    size_t k = 0;
    for (int f = 0; f < hf->n_files; f++) {
        size_t first = k;
        for (size_t i = 0; i < hf->n_tensors; i++)
            if (hf->tensors[i].file == f)
                order[k++] = &hf->tensors[i];
        qsort(order + first, k - first, sizeof *order, cmp_name);
    }
    return order;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t l = strlen(s), n = strlen(suffix);
    return l >= n && !strcmp(s + l - n, suffix);
}

/* TextModel.filter_tensors / the skipped names of prepare_tensors. */
static bool dropped(const char *n)
{
    static const char *const prefixes[] = {"mlp", "vit.", "vpm.", "siglip2.", "conformer.", "merger.", "resampler.",
                                           "sound_encoder.", "sound_projection.", "speech_embeddings."};
    static const char *const inside[] = {"visual.", "vision.", "audio.", "talker.", "vision_", "audio_", "token2wav.",
                                         "code2wav.", "projector.", "pre_mm_projector_norm", "image_newline",
                                         "view_seperator", "patch_embed", "patch_embedding", "patch_merger.",
                                         "patch_merge_mlp.", "model.connector."};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strncmp(n, prefixes[i], strlen(prefixes[i])))
            return true;
    for (size_t i = 0; i < sizeof inside / sizeof inside[0]; i++)
        if (strstr(n, inside[i]))
            return true;
    return ends_with(n, ".attention.masked_bias") || ends_with(n, ".attention.bias") ||
           ends_with(n, ".rotary_emb.inv_freq");
}

/* The output type and bytes of a planned tensor (prepare_tensors' rules). */
static void type_tensor(qk_conv_tensor *t, int ftype)
{
    bool f32 = t->n_dims <= 1 || ends_with(t->name, "_norm.weight") || strstr(t->name, ".ffn_gate_inp.") ||
               strstr(t->name, ".ffn_gate_inp_shexp.") || !ends_with(t->name, ".weight");
    t->type = f32                         ? QK_F32
              : ftype == QK_CONV_F32  ? QK_F32
              : ftype == QK_CONV_F16  ? QK_F16
              : ftype == QK_CONV_BF16 ? QK_BF16
                                      : QK_Q8_0;
    if (t->type == QK_Q8_0 && t->ne[0] % 32)
        t->type = QK_F16; /* QuantError: falls back to F16 */
    t->nbytes = qk_row_size(t->type, t->ne[0]) * qk_conv_tensor_nrows(t);
}

typedef struct builder {
    qk_conv_plan *p;
    size_t cap;
    const qk_conv_arch *a;
    const qk_conv_hp *hp;
    int ftype;
    const char *dir;
    qk_err *err;
} builder;

static qk_conv_tensor *add(builder *b, const char *name)
{
    if (b->p->n == b->cap)
        return NULL;
    qk_conv_tensor *t = &b->p->t[b->p->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ne[0] = t->ne[1] = t->ne[2] = t->ne[3] = 1;
    return t;
}

static void finish(builder *b, qk_conv_tensor *t)
{
    type_tensor(t, b->ftype);
    int64_t size = 1;
    for (uint32_t d = 0; d < t->n_dims; d++)
        size *= t->ne[d];
    b->p->n_params += size;
}

/* A tensor generated from the config (rope factors): F32 values. */
static int add_generated(builder *b, const char *name, const float *v, int64_t n)
{
    qk_conv_tensor *t = add(b, name);
    if (!t)
        return oom(b->err);
    t->gen = v;
    t->n_dims = 1;
    t->ne[0] = n;
    finish(b, t);
    return 0;
}

/* Phi3MiniModel.generate_extra_tensors: rope_factors_long / _short. */
static int phi3_factors(builder *b, const qk_conv_cfg *c)
{
    const qk_jsonv *lf = qk_jsonv_get(c->rope, "long_factor"), *sf = qk_jsonv_get(c->rope, "short_factor");
    if (!lf || lf->type == QK_JNULL || (lf->type == QK_JARR && !qk_jsonv_len(lf)))
        return 0;
    double rot = isnan(c->partial_rotary) ? 1.0 : c->partial_rotary;
    int64_t rope_dims = (int64_t)(rot * (double)b->hp->n_embd) / b->hp->n_head;
    if (!qk_jsonv_is(lf, QK_JARR) || !qk_jsonv_is(sf, QK_JARR) || qk_jsonv_len(lf) != qk_jsonv_len(sf) ||
        (int64_t)qk_jsonv_len(lf) * 2 != rope_dims)
        return qk_err_at(b->err, c->path, "rope_parameters.long_factor", lf->off,
                         "long and short factors must both have %lld values (the converter fails)",
                         (long long)(rope_dims / 2));
    size_t n = qk_jsonv_len(lf);
    b->p->gen = malloc(2 * n * sizeof *b->p->gen + 1);
    if (!b->p->gen)
        return oom(b->err);
    for (size_t i = 0; i < 2 * n; i++) {
        double d;
        const qk_jsonv *e = qk_jsonv_at(i < n ? lf : sf, i % n);
        if (!qk_jsonv_f64(e, &d))
            return qk_err_at(b->err, c->path, i < n ? "long_factor" : "short_factor", e->off, "not a number");
        b->p->gen[i] = (float)d;
    }
    int rc = add_generated(b, "rope_factors_long.weight", b->p->gen, (int64_t)n);
    return rc ? rc : add_generated(b, "rope_factors_short.weight", b->p->gen + n, (int64_t)n);
}

/* The class's order of a layer's stacked experts: gate/down/up indices. */
static const char *const exp_kind[3] = {"ffn_gate_exps.weight", "ffn_down_exps.weight", "ffn_up_exps.weight"};

static int emit_experts(builder *b, long layer, const qk_hf_tensor **ex)
{
    static const int mixtral[3] = {0, 1, 2}, qwen[3] = {1, 0, 2}; /* w1 w2 w3; down gate up */
    const int *order = b->a->experts == QK_EXP_MIXTRAL ? mixtral : qwen;
    int64_t ne = b->hp->n_expert;
    for (int k = 0; k < 3; k++) {
        const qk_hf_tensor **srcs = &ex[(layer * 3 + order[k]) * ne];
        for (int64_t e = 0; e < ne; e++)
            if (!srcs[e] || srcs[e]->n_dims != 2 || srcs[e]->ne[0] != srcs[0]->ne[0] || srcs[e]->ne[1] != srcs[0]->ne[1] ||
                srcs[e]->type != srcs[0]->type)
                return qk_errf(b->err, QK_EINPUT, "%s: layer %ld: experts of different shapes or types", b->dir, layer);
        char name[96];
        snprintf(name, sizeof name, "blk.%ld.%s", layer, exp_kind[order[k]]);
        qk_conv_tensor *t = add(b, name);
        if (!t)
            return oom(b->err);
        t->src = srcs[0];
        t->srcs = srcs;
        t->n_src = (int)ne;
        t->n_dims = 3;
        t->ne[0] = srcs[0]->ne[0];
        t->ne[1] = srcs[0]->ne[1];
        t->ne[2] = ne;
        finish(b, t);
    }
    return 0;
}

/* One tensor of a source (xform as the family's names say). */
static int add_mapped(builder *b, const qk_hf_tensor *s, const char *name, int perm, int hfx, int64_t n_vocab_real)
{
    static const struct { int hfx, cx; } xf[] = {
        {QK_HFX_NONE, QK_CX_NONE},     {QK_HFX_T, QK_CX_T},         {QK_HFX_GU_EVEN, QK_CX_T_EVEN},
        {QK_HFX_GU_ODD, QK_CX_T_ODD}, {QK_HFX_B_EVEN, QK_CX_EVEN}, {QK_HFX_B_ODD, QK_CX_ODD},
    };
    int cx = -1;
    for (size_t i = 0; i < sizeof xf / sizeof xf[0]; i++)
        if (xf[i].hfx == hfx)
            cx = xf[i].cx;
    if (cx < 0)
        return qk_errf(b->err, QK_EINPUT, "%s: tensor '%s': MXFP4 experts are not reproduced by qk-convert yet", b->dir,
                       s->name);
    qk_conv_tensor *t = add(b, name);
    if (!t)
        return oom(b->err);
    t->src = s;
    t->n_src = 1;
    t->xform = cx;
    t->n_dims = (uint32_t)(s->n_dims ? s->n_dims : 1);
    for (int d = 0; d < 4; d++)
        t->ne[d] = s->ne[d];
    bool ok = true;
    if (cx == QK_CX_T || cx == QK_CX_T_EVEN || cx == QK_CX_T_ODD) {
        ok = s->n_dims == 3 && (cx == QK_CX_T || s->ne[0] % 2 == 0);
        t->ne[0] = s->ne[1];
        t->ne[1] = cx == QK_CX_T ? s->ne[0] : s->ne[0] / 2;
    } else if (cx == QK_CX_EVEN || cx == QK_CX_ODD) {
        ok = s->n_dims == 2 && s->ne[0] % 2 == 0;
        t->ne[0] = s->ne[0] / 2;
    }
    if (!ok)
        return qk_errf(b->err, QK_EINPUT, "%s: tensor '%s': unexpected shape for %s", b->dir, s->name, name);
    const qk_conv_arch *a = b->a;
    if (a->permute_qk && perm == QK_PERM_Q)
        t->perm_heads = (int)b->hp->n_head;
    else if (a->permute_qk && perm == QK_PERM_K)
        t->perm_heads = (int)(b->hp->n_head != b->hp->n_head_kv ? b->hp->n_head_kv : b->hp->n_head);
    if (t->perm_heads > 0 && (s->shape[0] % (2 * t->perm_heads)))
        return qk_errf(b->err, QK_EINPUT, "%s: tensor '%s': %lld rows do not split into %d heads", b->dir, s->name,
                       (long long)s->shape[0], t->perm_heads);
    t->plus_one = a->norm_plus_one && ends_with(s->name, "norm.weight");
    /* Gemma3Model.modify_tensors: token_embd keeps the tokenizer's rows */
    if (a->cls == QK_CC_GEMMA3 && strstr(s->name, "embed_tokens.weight") && n_vocab_real > 0 && t->n_dims == 2 &&
        n_vocab_real < t->ne[1])
        t->ne[1] = n_vocab_real;
    finish(b, t);
    return 0;
}

/* get_total_parameter_count / size_label: experts as COUNTxSIZE. */
static void size_label(qk_conv_plan *p)
{
    int64_t shared = 0, expert = 0, expert_sum = 0, n_exp = 0;
    for (size_t i = 0; i < p->n; i++) {
        const qk_conv_tensor *t = &p->t[i];
        int64_t size = 1;
        for (uint32_t d = 0; d < t->n_dims; d++)
            size *= t->ne[d];
        if (strstr(t->name, "_exps.") && t->n_dims >= 3) {
            /* numpy's shape[-2] (bias) or shape[-3]: ggml's ne[1] or ne[2] */
            int64_t cnt = strstr(t->name, ".bias") ? t->ne[1] : t->ne[2];
            expert += size / cnt;
            expert_sum += cnt;
            n_exp++;
        } else {
            shared += size;
        }
    }
    p->size_label[0] = '\0';
    if (p->n_params <= 0)
        return;
    if (n_exp) {
        char part[32];
        qk_conv_size_label(shared + expert, part, sizeof part);
        snprintf(p->size_label, sizeof p->size_label, "%lldx%s", (long long)(expert_sum / n_exp), part);
    } else {
        qk_conv_size_label(p->n_params, p->size_label, sizeof p->size_label);
    }
}

int qk_conv_plan_make(qk_conv_plan *p, const qk_hfdir *hf, const qk_conv_arch *a, const qk_conv_cfg *c,
                      const qk_conv_hp *hp, int64_t n_vocab_real, int ftype, qk_err *err)
{
    memset(p, 0, sizeof *p);
    const qk_hf_family *fam = NULL;
    int rc = qk_hf_family_find(c->cfg, c->path, &fam, err);
    if (rc)
        return rc;
    builder b = {p, 2 * hf->n_tensors + 4, a, hp, ftype, hf->dir, err};
    const qk_hf_tensor **order = qk_conv_source_order(hf);
    p->t = calloc(b.cap, sizeof *p->t);
    int64_t ne = hp->n_expert > 0 ? hp->n_expert : 1;
    bool stacking = a->experts != QK_EXP_NONE;
    const qk_hf_tensor **ex = stacking ? calloc((size_t)(hp->n_layer * 3 * ne) + 1, sizeof *ex) : NULL;
    int64_t *ex_count = stacking ? calloc((size_t)hp->n_layer + 1, sizeof *ex_count) : NULL;
    p->experts = ex;
    if (!order || !p->t || (stacking && (!ex || !ex_count))) {
        free(order);
        free(ex_count);
        return oom(err);
    }
    if (a->cls == QK_CC_PHI3)
        rc = phi3_factors(&b, c);
    if (!rc && a->cls == QK_CC_LLAMA && !strcmp(c->rope_type, "llama3"))
        rc = qk_err_at(err, c->path, "rope_parameters.rope_type", c->rope ? c->rope->off : 0,
                       "'llama3' (rope_freqs.weight): not reproduced by qk-convert yet");
    for (size_t i = 0; i < hf->n_tensors && !rc; i++) {
        const qk_hf_tensor *s = order[i];
        const char *name = s->name;
        if (dropped(name) || (a->skip_lm_head && !strcmp(name, "lm_head.weight")))
            continue;
        if (strstr(name, "language_model.")) {
            rc = qk_errf(err, QK_EINPUT, "%s: tensor '%s': multimodal checkpoints are not reproduced by qk-convert",
                         hf->dir, name);
            break;
        }
        if (a->cls == QK_CC_GPT_OSS && (ends_with(name, "_blocks") || ends_with(name, "_scales"))) {
            rc = qk_errf(err, QK_EINPUT, "%s: tensor '%s': MXFP4 experts are not reproduced by qk-convert yet", hf->dir,
                         name);
            break;
        }
        if (s->type != QK_F32 && s->type != QK_F16 && s->type != QK_BF16) {
            rc = qk_errf(err, QK_EINPUT, "%s: tensor '%s' is %s: qk-convert reads F32, F16 and BF16 safetensors",
                         hf->dir, name, s->dtype);
            break;
        }
        qk_hf_target tg[2];
        int perm = QK_PERM_NONE;
        int n = qk_hf_family_names(fam, name, tg);
        if (n == 0) {
            if (qk_hf_to_gguf_name(name, tg[0].gguf, sizeof tg[0].gguf, &perm)) {
                rc = qk_errf(err, QK_EINPUT, "%s: can not map tensor '%s' (the converter refuses it)", hf->dir, name);
                break;
            }
            tg[0].expert = -1;
            tg[0].xform = QK_HFX_NONE;
            n = 1;
        }
        for (int k = 0; k < n && !rc; k++) {
            if (tg[k].expert < 0) {
                rc = add_mapped(&b, s, tg[k].gguf, perm, tg[k].xform, n_vocab_real);
                continue;
            }
            long layer;
            char kind[64];
            int kx = -1;
            if (stacking && sscanf(tg[k].gguf, "blk.%ld.%63s", &layer, kind) == 2)
                for (int q = 0; q < 3; q++)
                    if (!strcmp(kind, exp_kind[q]))
                        kx = q;
            if (kx < 0 || layer < 0 || layer >= hp->n_layer || tg[k].expert >= ne || s->n_dims != 2) {
                rc = qk_errf(err, QK_EINPUT, "%s: tensor '%s': expert or layer out of range", hf->dir, name);
                break;
            }
            ex[(layer * 3 + kx) * ne + tg[k].expert] = s;
            if (++ex_count[layer] == 3 * ne)
                rc = emit_experts(&b, layer, ex);
        }
    }
    for (int64_t l = 0; stacking && l < hp->n_layer && !rc; l++)
        if (ex_count[l] && ex_count[l] < 3 * ne)
            rc = qk_errf(err, QK_EINPUT, "%s: layer %lld: unprocessed experts (the converter refuses them)", hf->dir,
                         (long long)l);
    free(order);
    free(ex_count);
    if (!rc)
        size_label(p);
    return rc;
}

void qk_conv_plan_free(qk_conv_plan *p)
{
    free(p->t);
    free(p->experts);
    free(p->gen);
    memset(p, 0, sizeof *p);
}
