/* ckpt_calib.c - GPTQ for Hugging Face checkpoints (see ckpt_calib.h). */
#include "lib/quant/ckpt_calib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/hfnames.h"
#include "kernels/half.h"
#include "kernels/types.h"
#include "lib/engine/hfmodel.h"
#include "lib/engine/matmul.h"
#include "lib/engine/modelfile.h"
#include "lib/quant/ckpt_awq.h"
#include "lib/quant/ckpt_sq.h"
#include "lib/quant/gptq_model.h"
#include "lib/quant/imatrix_run.h"

/* Which --to schemes each method applies to ("dense": f32, f16, bf16, the smoothed float model). */
static const struct { int method; const char *name, *schemes[3], *list; } methods[] = {
    {QK_CALIB_RTN, "rtn", {NULL}, NULL},
    {QK_CALIB_GPTQ, "gptq", {"ct-w4a16", "ct-w8a8", NULL}, "ct-w4a16 or ct-w8a8 only"},
    {QK_CALIB_AWQ, "awq", {"ct-w4a16", NULL}, "ct-w4a16 only"},
    {QK_CALIB_SQ, "smoothquant", {"ct-w8a8", "dense", NULL}, "ct-w8a8 only (or f32, f16, bf16: the smoothed float model)"},
    {QK_CALIB_SQ_GPTQ, "smoothquant+gptq", {"ct-w8a8", NULL}, "ct-w8a8 only"},
};

bool qk_calib_supports(int method, const char *scheme)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (methods[i].method == method) {
            if (method == QK_CALIB_RTN)
                return true;
            for (int j = 0; methods[i].schemes[j]; j++)
                if (!strcmp(scheme, methods[i].schemes[j]))
                    return true;
        }
    return false;
}

const char *qk_calib_method_name(int method)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (methods[i].method == method)
            return methods[i].name;
    return "?";
}

const char *qk_calib_method_schemes(int method)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (methods[i].method == method)
            return methods[i].list ? methods[i].list : "every scheme";
    return "";
}

int qk_calib_method_by_name(const char *name)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (!strcmp(methods[i].name, name))
            return methods[i].method;
    return -1;
}

/* The seven products of a layer, their Hessian slots. */
#define NW 7
static const int slot_of[NW] = {QK_GS_QKV, QK_GS_QKV, QK_GS_QKV, QK_GS_O, QK_GS_GU, QK_GS_GU, QK_GS_DOWN};

static qk_weight *layer_weight(qk_layer *L, int i)
{
    qk_weight *ws[NW] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    return ws[i];
}

typedef struct {
    const qk_calib_target *t;
    qk_ckpt_calib *c;
    qk_hfmodel *h;
    qk_calib_res *res;
    int *mod_of;        /* per layer x NW: the index of the target module, or -1 */
    int *perm_of;       /* its QK_PERM_* */
    float *deq[NW];     /* the layer's quantized weights, in the engine's row order */
    qk_awq awq;
    qk_sq sq;
} cal;

/* The levels of one weight: the observer's parameters (the writer's own
 * encoding of the original weights), then GPTQ on that grid. */
static int quantize_weight(cal *k, qk_gptq_seq *s, qk_weight *w, int slot, int8_t *q, float *deq, qk_err *err)
{
    const int64_t rows = w->rows, cols = w->cols;
    const size_t n = (size_t)rows * (size_t)cols;
    const qk_calib_target *t = k->t;
    qk_scheme_layout l;
    int rc = qk_scheme_layout_of(t->s, rows, cols, &t->so, &l, err);
    if (rc)
        return rc;
    float *x = malloc(n * sizeof *x), *sc = malloc((size_t)l.n_scales * sizeof *sc * 2);
    uint8_t *enc = malloc((size_t)l.total);
    if (!x || !sc || !enc) {
        rc = qk_errf(err, QK_EIO, "out of memory (%zu weights)", n);
        goto done;
    }
    for (int64_t r = 0; r < rows; r++)
        qk_type_get(w->type)->to_float(w->data + (size_t)r * w->row_size, x + (size_t)r * (size_t)cols, cols);
    if ((rc = qk_scheme_encode(t->s, x, rows, cols, &t->so, enc, err)))
        goto done;
    const bool asym = t->s->rule == QK_RULE_MINMAX;
    const int half = 1 << (l.bits - 1); /* int4: levels -8..7, int8: -128..127 */
    float *zero = asym ? sc + l.n_scales : NULL;
    for (uint64_t i = 0; i < l.n_scales; i++) {
        const uint8_t *p = enc + l.scales_off + i * (uint64_t)l.scale_bytes;
        uint16_t hb;
        if (l.scale_bytes == 4) {
            memcpy(&sc[i], p, 4);
        } else {
            memcpy(&hb, p, 2);
            sc[i] = t->so.scale_type == QK_F16 ? qk_f16_to_f32(hb) : qk_bf16_to_f32(hb);
        }
        if (asym)
            zero[i] = (float)enc[l.zeros_off + i] - (float)half;
    }
    const qk_gptq_igrid g = {.group = (int)l.cell_cols, .lo = (float)-half, .hi = (float)(half - 1), .scale = sc,
                             .zero = zero};
    const qk_gptq_factor *f;
    double loss = 0;
    if (!(rc = qk_gptq_seq_factor(s, slot, &f, err)))
        rc = qk_gptq_quantize_int(x, rows, cols, &g, f, k->c->o.nthreads, q, deq, &loss, err);
    k->c->loss += loss;
done:
    free(x), free(sc), free(enc);
    return rc;
}

static void free_deq(cal *k)
{
    for (int i = 0; i < NW; i++) {
        free(k->deq[i]);
        k->deq[i] = NULL;
    }
}

static int cal_layer(void *user, qk_gptq_seq *s, int l, qk_err *err)
{
    cal *k = user;
    free_deq(k);
    qk_layer *L = &s->layers[l];
    const qk_hparams *hp = &s->m->hp;
    for (int i = 0; i < NW; i++) {
        const int mi = k->mod_of[l * NW + i];
        if (mi < 0)
            continue;
        qk_weight *w = layer_weight(L, i);
        qk_calib_mod *m = &k->res->m[mi];
        const size_t n = (size_t)w->rows * (size_t)w->cols;
        int8_t *q = malloc(n);
        k->deq[i] = malloc(n * sizeof(float));
        m->q = malloc(n);
        if (!q || !k->deq[i] || !m->q) {
            free(q);
            return qk_errf(err, QK_EIO, "out of memory (%s)", m->name);
        }
        m->rows = w->rows, m->cols = w->cols;
        int rc = quantize_weight(k, s, w, slot_of[i], q, k->deq[i], err);
        if (rc) {
            free(q);
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            return qk_errf(err, rc, "%s: %s", m->name, msg);
        }
        /* the checkpoint's rows: the engine's q/k rows are llama.cpp's permutation of them */
        const int perm = k->h->permute_qk ? k->perm_of[l * NW + i] : QK_PERM_NONE;
        const int64_t heads = perm == QK_PERM_Q ? hp->n_head : hp->n_head_kv;
        for (int64_t r = 0; r < w->rows; r++) {
            const int64_t hr = perm == QK_PERM_NONE ? r : qk_unpermute_row(r, w->rows, heads);
            memcpy(m->q + (size_t)hr * (size_t)w->cols, q + (size_t)r * (size_t)w->cols, (size_t)w->cols);
        }
        free(q);
        k->c->n_gptq++;
        /* the next pass runs the layer on the quantized weights */
        qk_gptq_point_f32(w, k->deq[i]);
        if ((rc = qk_weight_pack(w, &s->packed[i], err)))
            return rc;
    }
    return 0;
}

static int awq_input(void *user, qk_gptq_seq *s, int slot, const float *x, int n, int64_t cols, qk_err *err)
{
    (void)s;
    return qk_awq_on_input(&((cal *)user)->awq, slot, x, n, cols, err);
}

/* A new entry of res: name with `from` replaced by `to`, its floats. */
static int put_floats(cal *k, const char *like, const char *from, const char *to, const float *x, int64_t rows,
                      int64_t cols, const int64_t *row_of, qk_err *err)
{
    const char *at = strstr(like, from);
    if (!at)
        return qk_errf(err, QK_EINPUT, "%s: --method %s: no '%s' in the name to find its %s", like,
                       qk_calib_method_name(k->c->method), from, to);
    qk_calib_mod *m = &k->res->m[k->res->n];
    const size_t n = (size_t)rows * (size_t)cols, nl = strlen(like) - strlen(from) + strlen(to) + 1;
    m->name = malloc(nl);
    m->x = malloc(n * sizeof *m->x);
    if (!m->name || !m->x) {
        free(m->name), free(m->x);
        return qk_errf(err, QK_EIO, "out of memory");
    }
    snprintf(m->name, nl, "%.*s%s%s", (int)(at - like), like, to, at + strlen(from));
    m->rows = rows, m->cols = cols;
    for (int64_t r = 0; r < rows; r++)
        memcpy(m->x + (size_t)(row_of ? row_of[r] : r) * (size_t)cols, x + (size_t)r * (size_t)cols,
               (size_t)cols * sizeof *x);
    k->res->n++;
    return 0;
}

static int awq_layer(void *user, qk_gptq_seq *s, int l, qk_err *err)
{
    cal *k = user;
    const qk_hparams *hp = &s->m->hp;
    for (int i = 0; i < NW; i++)
        if (k->mod_of[l * NW + i] < 0)
            return qk_errf(err, QK_EINPUT, "%s: --method awq needs every product of layer %d quantized "
                           "(q/k/v/o_proj, gate/up/down_proj)", k->h->hf->dir, l);
    int rc = qk_awq_layer(&k->awq, s, l, err);
    int64_t *row_of = malloc((size_t)k->awq.rows[0] * sizeof *row_of);
    if (!rc && !row_of)
        rc = qk_errf(err, QK_EIO, "out of memory");
    for (int i = 0; i < NW && !rc; i++) {
        qk_calib_mod *m = &k->res->m[k->mod_of[l * NW + i]];
        const int perm = k->h->permute_qk ? k->perm_of[l * NW + i] : QK_PERM_NONE;
        const int64_t rows = k->awq.rows[i], heads = perm == QK_PERM_Q ? hp->n_head : hp->n_head_kv;
        for (int64_t r = 0; r < rows && perm != QK_PERM_NONE; r++)
            row_of[r] = qk_unpermute_row(r, rows, heads);
        /* the module's own entry gets the floats: rewrite it in place */
        const size_t keep = k->res->n;
        k->res->n = (size_t)(m - k->res->m);
        char *name = m->name;
        rc = put_floats(k, name, "", "", k->awq.cur[i], rows, k->awq.cols[i], perm != QK_PERM_NONE ? row_of : NULL,
                        err);
        free(name);
        k->res->n = keep;
        k->c->n_gptq++;
    }
    free(row_of);
    const char *q = rc ? NULL : k->res->m[k->mod_of[l * NW]].name, *g = rc ? NULL : k->res->m[k->mod_of[l * NW + 4]].name;
    if (!rc)
        rc = put_floats(k, q, "self_attn.q_proj", "input_layernorm", k->awq.norm[0], 1, hp->n_embd, NULL, err);
    if (!rc)
        rc = put_floats(k, g, "mlp.gate_proj", "post_attention_layernorm", k->awq.norm[1], 1, hp->n_embd, NULL, err);
    return rc;
}

/* Which engine weight each target module is. */
static int map_modules(cal *k, const qk_model *m, qk_err *err)
{
    const int nl = m->hp.n_layer;
    k->mod_of = malloc((size_t)(nl ? nl : 1) * NW * sizeof *k->mod_of);
    k->perm_of = calloc((size_t)(nl ? nl : 1) * NW, sizeof *k->perm_of);
    k->res->m = calloc(k->t->n_modules + (2 + QK_SQ_NB) * (size_t)nl + 1,
                         sizeof *k->res->m); /* AWQ: the norms too; SmoothQuant: the norms, unquantized balance layers */
    if (!k->mod_of || !k->perm_of || !k->res->m)
        return qk_errf(err, QK_EIO, "out of memory");
    for (int i = 0; i < nl * NW; i++)
        k->mod_of[i] = -1;
    for (size_t mi = 0; mi < k->t->n_modules; mi++) {
        const char *mod = k->t->modules[mi];
        char hf[1100], gg[128];
        int perm = 0;
        snprintf(hf, sizeof hf, "%s.weight", mod);
        if (!(k->res->m[k->res->n].name = strdup(mod)))
            return qk_errf(err, QK_EIO, "out of memory");
        k->res->n++;
        bool found = false;
        /* the engine names a Hugging Face weight by its own name (lib/engine/hfmodel.c) */
        if (qk_hf_to_gguf_name(hf, gg, sizeof gg, &perm) == 0)
            for (int l = 0; l < nl && !found; l++)
                for (int i = 0; i < NW && !found; i++) {
                    qk_weight *w = layer_weight(&m->layers[l], i);
                    if (w->name && (size_t)w->name_len == strlen(hf) && !memcmp(w->name, hf, strlen(hf))) {
                        if (!qk_type_get(w->type) || !qk_type_get(w->type)->to_float || w->wq ||
                            (w->type != QK_F32 && w->type != QK_F16 && w->type != QK_BF16))
                            return qk_errf(err, QK_EINPUT, "%s: --method %s needs float weights", hf,
                                           qk_calib_method_name(k->c->method));
                        k->mod_of[l * NW + i] = (int)mi;
                        k->perm_of[l * NW + i] = perm;
                        found = true;
                    }
                }
        if (!found)
            return qk_errf(err, QK_EINPUT, "%s: not a product of a decoder layer, which --method %s calibrates "
                           "(leave it out with --ignore)", mod, qk_calib_method_name(k->c->method));
    }
    return 0;
}

/* ---- SmoothQuant (ckpt_sq.c), then round to nearest (the writer) or GPTQ ---- */

static int sq_input(void *user, qk_gptq_seq *s, int slot, const float *x, int n, int64_t cols, qk_err *err)
{
    (void)s;
    return qk_sq_on_input(&((cal *)user)->sq, slot, x, n, cols, err);
}

static int sq_layer(void *user, qk_gptq_seq *s, int l, qk_err *err)
{
    return qk_sq_layer(&((cal *)user)->sq, s, l, err);
}

/* The smoothed floats into res: each balance weight's module entry (a new one when the module is not
 * quantized: it is written in its dtype), and the two norms of every layer. */
static int sq_results(cal *k, const qk_model *m, qk_err *err)
{
    const qk_hparams *hp = &m->hp;
    int64_t *row_of = NULL;
    int rc = 0;
    for (int l = 0; l < hp->n_layer && !rc; l++) {
        char q[1100] = "";
        for (int b = 0; b < QK_SQ_NB && !rc; b++) {
            const qk_weight *w = qk_sq_balance(&m->layers[l], b);
            const float *x = k->sq.w[(size_t)l * QK_SQ_NB + b];
            char hf[1100], gg[128];
            int perm = QK_PERM_NONE;
            if (!w->name || w->name_len < 8 || (size_t)w->name_len >= sizeof hf) {
                rc = qk_errf(err, QK_EINPUT, "%s: layer %d: a balance weight without its name", k->h->hf->dir, l);
                break;
            }
            snprintf(hf, sizeof hf, "%.*s", w->name_len, w->name);
            if (qk_hf_to_gguf_name(hf, gg, sizeof gg, &perm))
                perm = QK_PERM_NONE;
            if (!k->h->permute_qk)
                perm = QK_PERM_NONE;
            const int64_t heads = perm == QK_PERM_Q ? hp->n_head : hp->n_head_kv;
            int64_t *ro = realloc(row_of, (size_t)w->rows * sizeof *row_of);
            if (!ro) {
                rc = qk_errf(err, QK_EIO, "out of memory");
                break;
            }
            row_of = ro;
            for (int64_t r = 0; r < w->rows; r++)
                row_of[r] = perm == QK_PERM_NONE ? r : qk_unpermute_row(r, w->rows, heads);
            hf[strlen(hf) - 7] = 0; /* the module: no ".weight" */
            if (b == 0)
                snprintf(q, sizeof q, "%s", hf);
            size_t at = k->res->n;
            for (size_t i = 0; i < k->res->n; i++)
                if (!strcmp(k->res->m[i].name, hf))
                    at = i;
            const size_t keep = k->res->n;
            char *old = at < keep ? k->res->m[at].name : NULL;
            int8_t *oq = at < keep ? k->res->m[at].q : NULL;
            k->res->n = at;
            rc = put_floats(k, hf, "", "", x, w->rows, w->cols, row_of, err);
            k->res->m[at].q = oq;
            if (rc)
                k->res->m[at].name = NULL, k->res->m[at].x = NULL;
            free(old);
            k->res->n = at < keep ? keep : k->res->n;
        }
        if (!rc)
            rc = put_floats(k, q, "self_attn.q_proj", "input_layernorm", k->sq.norm[(size_t)l * 2], 1, hp->n_embd,
                            NULL, err);
        if (!rc)
            rc = put_floats(k, q, "self_attn.q_proj", "post_attention_layernorm", k->sq.norm[(size_t)l * 2 + 1], 1,
                            hp->n_embd, NULL, err);
    }
    free(row_of);
    return rc;
}

/* oneshot's independent pipeline: SmoothQuant's own pass over the float model, smoothing each layer
 * after its calibration; then, for smoothquant+gptq, GPTQ's pass over the smoothed model. */
static int smoothquant(cal *k, const qk_gptq_seq *s, qk_err *err)
{
    int rc = qk_sq_init(&k->sq, s->m, k->c->alpha, k->h->hf->dir, err);
    qk_gptq_seq a = *s;
    a.layer = sq_layer, a.on_input = sq_input;
    if (!rc)
        rc = qk_gptq_seq_run(&a, err);
    if (!rc && k->c->method == QK_CALIB_SQ_GPTQ) {
        qk_model sm = *s->m;
        sm.layers = k->sq.layers;
        qk_gptq_seq g = *s;
        g.m = &sm;
        rc = qk_gptq_seq_run(&g, err);
        free_deq(k);
    }
    if (!rc)
        rc = sq_results(k, s->m, err);
    return rc;
}

int qk_ckpt_calibrate(const char *src_dir, const qk_calib_target *t, qk_ckpt_calib *c, qk_calib_res *res,
                      qk_err *err)
{
    memset(res, 0, sizeof *res);
    cal k = {.t = t, .c = c, .res = res};
    qk_tokenizer *tok = NULL;
    /* float attention, as transformers computes it for llm-compressor */
    qk_gptq_seq s = {.n_ctx = c->n_ctx, .o = c->o, .kv_f32 = true, .quiet = c->quiet, .layer = cal_layer, .user = &k};
    int rc = qk_hfmodel_open(&k.h, src_dir, err);
    if (rc)
        return rc;
    s.m = &k.h->m;
    if (k.h->ck) {
        rc = qk_errf(err, QK_EINPUT, "%s: a quantized checkpoint; --method %s needs a float one", src_dir,
                     qk_calib_method_name(c->method));
        goto done;
    }
    const char *how = c->method == QK_CALIB_AWQ ? "--method awq" : "--method gptq";
    if ((rc = qk_calib_dense_check(s.m, src_dir, how, err)) || (rc = map_modules(&k, s.m, err)))
        goto done;
    if ((rc = c->tokenizer ? qk_tokenizer_from(c->tokenizer, &tok, err) : qk_hf_tokenizer(src_dir, &tok, err)))
        goto done;
    if ((rc = qk_gptq_seq_tokens(&s, tok, c->text, c->n_chunks, err)))
        goto done;
    c->chunks_used = s.chunks;
    if (c->method == QK_CALIB_AWQ) {
        s.layer = awq_layer, s.on_input = awq_input;
        rc = qk_awq_init(&k.awq, t, s.m, (int64_t)s.chunks * s.n_ctx, c->o.nthreads, err);
    }
    if (!rc)
        rc = c->method == QK_CALIB_SQ || c->method == QK_CALIB_SQ_GPTQ ? smoothquant(&k, &s, err)
                                                                        : qk_gptq_seq_run(&s, err);
done:
    qk_awq_free(&k.awq);
    qk_sq_free(&k.sq);
    free_deq(&k);
    free(k.mod_of);
    free(k.perm_of);
    free(s.ids);
    qk_tok_free(tok);
    qk_hfmodel_close(k.h);
    if (rc)
        qk_calib_res_free(res);
    return rc;
}

const float *qk_calib_floats(const qk_calib_res *r, const char *name)
{
    const size_t n = strlen(name);
    for (size_t i = 0; r && n > 7 && !strcmp(name + n - 7, ".weight") && i < r->n; i++)
        if (r->m[i].x && strlen(r->m[i].name) == n - 7 && !strncmp(r->m[i].name, name, n - 7))
            return r->m[i].x;
    return NULL;
}

const qk_calib_mod *qk_calib_find(const qk_calib_res *r, const char *module)
{
    for (size_t i = 0; r && i < r->n; i++)
        if (r->m[i].q && !strcmp(r->m[i].name, module))
            return &r->m[i];
    return NULL;
}

void qk_calib_put_codes(const qk_calib_mod *m, const qk_scheme *s, const qk_scheme_layout *l, uint8_t *enc)
{
    const bool asym = s->rule == QK_RULE_MINMAX;
    for (int64_t r = 0; r < m->rows; r++) {
        const int8_t *q = m->q + (size_t)r * (size_t)m->cols;
        uint8_t *dst = enc + l->codes_off + (uint64_t)r * l->row_bytes;
        memset(dst, 0, (size_t)l->row_bytes);
        for (int64_t j = 0; j < m->cols && l->bits == 8; j++) /* int8: one code a byte */
            dst[j] = asym ? (uint8_t)(q[j] + 128) : (uint8_t)q[j];
        for (int64_t j = 0; j < m->cols && l->bits == 4; j++) { /* 4-bit codes, LSB first (kernels/scaled.h) */
            const unsigned code = asym ? (unsigned)(q[j] + 8) : (unsigned)q[j] & 15u;
            dst[j / 2] |= (uint8_t)(code << (4 * (j % 2)));
        }
    }
}

void qk_calib_res_free(qk_calib_res *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->m[i].name);
        free(r->m[i].q);
        free(r->m[i].x);
    }
    free(r->m);
    memset(r, 0, sizeof *r);
}
