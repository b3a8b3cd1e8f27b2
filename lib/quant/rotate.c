/* rotate.c - SpinQuant's Hadamard rotations fused into the weights, as
 * llm-compressor's SpinQuantModifier (modifiers/transform/spinquant/base.py,
 * on_calibration_start) applies them, in its order and roundings:
 *
 *   1. untie the word embeddings (lm_head becomes a copy);
 *   2. center the embeddings: each row minus its mean (float64);
 *   3. fold every RMSNorm weight into the linears reading it (W[:, j] *= g[j],
 *      float64, fuse_norm_linears), the norm weights become ones:
 *      input_layernorm -> q/k/v_proj, post_attention_layernorm -> gate/up_proj,
 *      model.norm -> lm_head;
 *   4. R1 (hidden_size): weight_output of embed_tokens, o_proj, down_proj,
 *      weight_input (inverse) of q/k/v_proj, gate/up_proj, lm_head;
 *   5. R2 (head_dim, per head): weight_output of v_proj, weight_input
 *      (inverse) of o_proj;
 *   6. R4 (r4 block): weight_input (inverse) of down_proj; online on its input.
 *
 * Every step is compressed-tensors' apply_transform_weight in float64 (fused
 * transforms are always float64), rounded back to float32 after each one.
 * With Sylvester's matrix H (symmetric) and n its order: a linear's
 * weight_input is each row x -> x H / sqrt(n) (blocks of n along the row),
 * its weight_output each column c -> H c / sqrt(n); an embedding's
 * weight_output is each row x -> x H / sqrt(n). */
#include "lib/quant/rotate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/hadamard.h"
#include "lib/core/jsonp.h"

struct qk_rot {
    int n_embd, head_dim, n_ff, n_layer, r4;
    bool untie;
    float **attn_norm, **ffn_norm; /* n_layer each */
    float *out_norm;
};

#define R4_NAME "model.layers.0.mlp.down_proj.R4_input.weight"

bool qk_rot_unties(const qk_rot *r) { return r->untie; }

void qk_rot_added(const qk_rot *r, const qk_ckpt *ck, qk_ck_tensor *lm, qk_ck_tensor *r4)
{
    if (r->untie) {
        *lm = *qk_ckpt_find(ck, "model.embed_tokens.weight");
        lm->name = (char *)"lm_head.weight";
    }
    *r4 = (qk_ck_tensor){.name = (char *)R4_NAME, .n_dims = 2, .rows = r->r4, .cols = r->r4,
                         .shape = {r->r4, r->r4}, .nelem = (uint64_t)r->r4 * (uint64_t)r->r4};
}

void qk_rot_free(qk_rot *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->n_layer; i++) {
        free(r->attn_norm ? r->attn_norm[i] : NULL);
        free(r->ffn_norm ? r->ffn_norm[i] : NULL);
    }
    free(r->attn_norm);
    free(r->ffn_norm);
    free(r->out_norm);
    free(r);
}

static int oom(qk_err *err) { return qk_errf(err, QK_EIO, "out of memory"); }

static int cfg_int(const qk_jsonv *cfg, const char *path, const char *key, int64_t dflt, int *out, qk_err *err)
{
    const qk_jsonv *v = qk_jsonv_get(cfg, key);
    int64_t x = dflt;
    if (v && v->type != QK_JNULL && !qk_jsonv_i64(v, &x))
        return qk_err_at(err, path, key, v->off, "must be an integer");
    if (x <= 0 || x > (1 << 24))
        return qk_err_at(err, path, key, v ? v->off : 0, "%s %lld is missing or out of range", key, (long long)x);
    *out = (int)x;
    return QK_OK;
}

static int read_norm(const qk_hfdir *hf, const qk_ckpt *ck, const char *name, int n, float **out, qk_err *err)
{
    const qk_ck_tensor *t = qk_ckpt_find(ck, name);
    if (!t)
        return qk_err_at(err, hf->dir, name, 0, "--rotate: the model has no %s (a Llama layout is needed)", name);
    if (t->nelem != (uint64_t)n)
        return qk_err_at(err, hf->dir, name, t->w ? t->w->st->info_offset : 0, "%llu elements, hidden_size %d",
                         (unsigned long long)t->nelem, n);
    if (!(*out = malloc((size_t)n * sizeof **out)))
        return oom(err);
    return qk_ckpt_read(ck, t, *out, err);
}

int qk_rot_open(qk_rot **out, const qk_hfdir *hf, const qk_ckpt *ck, int r4_block, qk_err *err)
{
    *out = NULL;
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", hf->dir);
    const qk_jsonv *cfg = hf->config;
    const char *mt = qk_jsonv_get_str(cfg, "model_type", "");
    const qk_jsonv *mtv = qk_jsonv_get(cfg, "model_type");
    if (strcmp(mt, "llama") && strcmp(mt, "mistral"))
        return qk_err_at(err, path, "model_type", mtv ? mtv->off : 0,
                         "--rotate applies to Llama-layout models (model_type llama or mistral), not '%.40s'", mt);
    if (qk_jsonv_get_bool(cfg, "attention_bias", false) || qk_jsonv_get_bool(cfg, "mlp_bias", false))
        return qk_err_at(err, path, "attention_bias", 0, "--rotate: linear biases are not rotated by qk");
    qk_rot *r = calloc(1, sizeof *r);
    if (!r)
        return oom(err);
    int n_head, rc;
    if ((rc = cfg_int(cfg, path, "hidden_size", -1, &r->n_embd, err)) ||
        (rc = cfg_int(cfg, path, "num_attention_heads", -1, &n_head, err)) ||
        (rc = cfg_int(cfg, path, "head_dim", r->n_embd / n_head, &r->head_dim, err)) ||
        (rc = cfg_int(cfg, path, "intermediate_size", -1, &r->n_ff, err)) ||
        (rc = cfg_int(cfg, path, "num_hidden_layers", -1, &r->n_layer, err)))
        goto fail;
    if (!qk_is_pow2(r->n_embd) || !qk_is_pow2(r->head_dim)) {
        rc = qk_err_at(err, path, qk_is_pow2(r->n_embd) ? "head_dim" : "hidden_size", 0,
                       "--rotate hadamard needs a power of two (hidden_size %d, head_dim %d): Sylvester's matrix",
                       r->n_embd, r->head_dim);
        goto fail;
    }
    r->r4 = r4_block;
    if (!r->r4)
        for (r->r4 = 1; r->n_ff % (2 * r->r4) == 0; r->r4 *= 2)
            ;
    if (r->n_ff % r->r4) {
        rc = qk_err_at(err, path, "intermediate_size", 0, "--rotate: R4's block %d does not divide %d", r->r4, r->n_ff);
        goto fail;
    }
    r->untie = !qk_ckpt_find(ck, "lm_head.weight");
    if (!qk_ckpt_find(ck, "model.embed_tokens.weight")) {
        rc = qk_err_at(err, hf->dir, "model.embed_tokens.weight", 0, "--rotate: the model has no embeddings");
        goto fail;
    }
    for (size_t i = 0; i < ck->n; i++) {
        const char *nm = ck->t[i].name;
        size_t l = strlen(nm);
        if (l > 5 && !strcmp(nm + l - 5, ".bias")) {
            rc = qk_err_at(err, hf->dir, nm, 0, "--rotate: linear biases are not rotated by qk");
            goto fail;
        }
    }
    if (!(r->attn_norm = calloc((size_t)r->n_layer, sizeof *r->attn_norm)) ||
        !(r->ffn_norm = calloc((size_t)r->n_layer, sizeof *r->ffn_norm))) {
        rc = oom(err);
        goto fail;
    }
    char name[160];
    for (int il = 0; il < r->n_layer; il++) {
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", il);
        if ((rc = read_norm(hf, ck, name, r->n_embd, &r->attn_norm[il], err)))
            goto fail;
        snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", il);
        if ((rc = read_norm(hf, ck, name, r->n_embd, &r->ffn_norm[il], err)))
            goto fail;
    }
    if ((rc = read_norm(hf, ck, "model.norm.weight", r->n_embd, &r->out_norm, err)))
        goto fail;
    *out = r;
    return QK_OK;
fail:
    qk_rot_free(r);
    return rc;
}

typedef enum { T_NONE, T_EMBED, T_LM_HEAD, T_NORM, T_QK, T_V, T_O, T_GATE_UP, T_DOWN } tkind;

static tkind kind_of(const qk_rot *r, const char *name, int *layer)
{
    *layer = -1;
    if (!strcmp(name, "model.embed_tokens.weight"))
        return T_EMBED;
    if (!strcmp(name, "lm_head.weight"))
        return T_LM_HEAD;
    if (!strcmp(name, "model.norm.weight"))
        return T_NORM;
    int il, end = 0;
    if (sscanf(name, "model.layers.%d.%n", &il, &end) != 1 || !end || il < 0 || il >= r->n_layer)
        return T_NONE;
    *layer = il;
    static const struct { const char *s; tkind k; } tab[] = {
        {"input_layernorm.weight", T_NORM},    {"post_attention_layernorm.weight", T_NORM},
        {"self_attn.q_proj.weight", T_QK},     {"self_attn.k_proj.weight", T_QK},
        {"self_attn.v_proj.weight", T_V},      {"self_attn.o_proj.weight", T_O},
        {"mlp.gate_proj.weight", T_GATE_UP},   {"mlp.up_proj.weight", T_GATE_UP},
        {"mlp.down_proj.weight", T_DOWN},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (!strcmp(name + end, tab[i].s))
            return tab[i].k;
    return T_NONE;
}

bool qk_rot_changes(const qk_rot *r, const char *name)
{
    int il;
    return kind_of(r, name, &il) != T_NONE;
}

static void fuse(float *x, int64_t rows, int64_t cols, const float *g)
{
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            x[i * cols + j] = (float)((double)x[i * cols + j] * (double)g[j]);
}

static void center(float *x, int64_t rows, int64_t cols)
{
    for (int64_t i = 0; i < rows; i++) {
        double s = 0;
        for (int64_t j = 0; j < cols; j++)
            s += x[i * cols + j];
        const double mean = s / (double)cols;
        for (int64_t j = 0; j < cols; j++)
            x[i * cols + j] = (float)((double)x[i * cols + j] - mean);
    }
}

int qk_rot_tensor(const qk_rot *r, const char *name, float *x, int64_t rows, int64_t cols, qk_err *err)
{
    int il;
    const tkind k = kind_of(r, name, &il);
    const int64_t E = r->n_embd;
    if (k != T_NONE && k != T_NORM && (k == T_O || k == T_DOWN ? rows : cols) != E)
        return qk_errf(err, QK_EINPUT, "--rotate: %s is [%lld, %lld], hidden_size %lld", name, (long long)rows,
                       (long long)cols, (long long)E);
    int bad = 0;
    switch (k) {
    case T_NONE: break;
    case T_NORM:
        for (int64_t i = 0; i < rows * cols; i++)
            x[i] = 1.0f;
        break;
    case T_EMBED:
        center(x, rows, cols);
        bad = qk_hadamard_rows_f64(x, rows, cols, cols, (int)E);
        break;
    case T_LM_HEAD:
        fuse(x, rows, cols, r->out_norm);
        bad = qk_hadamard_rows_f64(x, rows, cols, cols, (int)E);
        break;
    case T_QK:
    case T_V:
        fuse(x, rows, cols, r->attn_norm[il]);
        bad = qk_hadamard_rows_f64(x, rows, cols, cols, (int)E);
        if (!bad && k == T_V) {
            if (rows % r->head_dim)
                return qk_errf(err, QK_EINPUT, "--rotate: %s has %lld rows, not whole heads of %d", name,
                               (long long)rows, r->head_dim);
            bad = qk_hadamard_cols_f64(x, rows, cols, r->head_dim);
        }
        break;
    case T_O:
        if (cols % r->head_dim)
            return qk_errf(err, QK_EINPUT, "--rotate: %s has %lld columns, not whole heads of %d", name,
                           (long long)cols, r->head_dim);
        bad = qk_hadamard_cols_f64(x, rows, cols, (int)E);
        if (!bad)
            bad = qk_hadamard_rows_f64(x, rows, cols, cols, r->head_dim);
        break;
    case T_GATE_UP:
        fuse(x, rows, cols, r->ffn_norm[il]);
        bad = qk_hadamard_rows_f64(x, rows, cols, cols, (int)E);
        break;
    case T_DOWN:
        if (cols % r->r4)
            return qk_errf(err, QK_EINPUT, "--rotate: %s has %lld columns, R4's block is %d", name,
                           (long long)cols, r->r4);
        bad = qk_hadamard_cols_f64(x, rows, cols, (int)E);
        if (!bad)
            bad = qk_hadamard_rows_f64(x, rows, cols, cols, r->r4);
        break;
    }
    return bad ? oom(err) : QK_OK;
}

void qk_rot_r4_matrix(const qk_rot *r, double *out) { qk_hadamard_matrix(out, r->r4); }

static void apply(qk_sbuf *b, bool inverse, const char *loc, const char *const *targets, int n)
{
    qk_sb_printf(b, "{\"ignore\": [], \"inverse\": %s, \"location\": \"%s\", \"targets\": [", inverse ? "true" : "false",
                 loc);
    for (int i = 0; i < n; i++)
        qk_sb_printf(b, "%s\"%s\"", i ? ", " : "", targets[i]);
    qk_sb_printf(b, "]}");
}

static void group(qk_sbuf *b, const char *name, int head_dim)
{
    qk_sb_printf(b, "\"%s\": {\"apply\": [", name);
    if (!strcmp(name, "R1")) {
        static const char *const out_t[] = {"re:.*embed_tokens$", "re:.*o_proj$", "re:.*down_proj$"};
        static const char *const in_t[] = {"re:.*q_proj$", "re:.*k_proj$", "re:.*v_proj$", "re:.*up_proj$",
                                           "re:.*gate_proj$", "lm_head"};
        apply(b, false, "weight_output", out_t, 3);
        qk_sb_printf(b, ", ");
        apply(b, true, "weight_input", in_t, 6);
    } else if (!strcmp(name, "R2")) {
        static const char *const v[] = {"re:.*v_proj$"}, *const o[] = {"re:.*o_proj$"};
        apply(b, false, "weight_output", v, 1);
        qk_sb_printf(b, ", ");
        apply(b, true, "weight_input", o, 1);
    } else {
        static const char *const d[] = {"re:.*down_proj$"};
        apply(b, false, "input", d, 1);
        qk_sb_printf(b, ", ");
        apply(b, true, "weight_input", d, 1);
    }
    qk_sb_printf(b, "], \"head_dim\": ");
    if (head_dim)
        qk_sb_printf(b, "%d", head_dim);
    else
        qk_sb_printf(b, "null");
    qk_sb_printf(b, ", \"precision\": \"torch.float64\", \"randomize\": false, \"requires_grad\": false, "
                 "\"type\": \"hadamard\"}");
}

void qk_rot_config(const qk_rot *r, qk_sbuf *b)
{
    qk_sb_printf(b, "{\"config_groups\": {");
    group(b, "R1", 0);
    qk_sb_printf(b, ", ");
    group(b, "R2", r->head_dim);
    qk_sb_printf(b, ", ");
    group(b, "R4", r->r4 == r->n_ff ? 0 : r->r4);
    qk_sb_printf(b, "}}");
}
