/* gptq_model.c - GPTQ over a whole model, layer by layer (see
 * gptq_model.h). */
#include "lib/quant/gptq_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/grid.h"
#include "kernels/types.h"
#include "lib/core/files.h"
#include "lib/core/progress.h"
#include "lib/engine/forward.h"
#include "lib/engine/matmul.h"
#include "lib/engine/model.h"
#include "lib/engine/tokenizer.h"
#include "lib/quant/imatrix_run.h"

#define MAX_BATCH 512

bool qk_gptq_supports(int type) { return qk_grid_for(type) != NULL; }

/* ---- the sequential pipeline ------------------------------------------------------------ */

static int hook(void *user, const qk_weight *w, const float *x, int n_tok, qk_err *err)
{
    qk_gptq_seq *s = user;
    if (!s->collecting_)
        return 0;
    for (int k = 0; k < QK_GS_N; k++)
        if (s->slot_w_[k] == w) {
            if (s->on_input)
                return s->on_input(s->user, s, k, x, n_tok, w->cols, err);
            qk_hess_add(&s->h[k], x, n_tok, s->o.nthreads);
            break;
        }
    return 0;
}

int qk_gptq_seq_factor(qk_gptq_seq *s, int slot, const qk_gptq_factor **f, qk_err *err)
{
    int rc = s->f_[slot].u ? 0 : qk_gptq_factor_make(&s->f_[slot], &s->h[slot], &s->o, err);
    *f = &s->f_[slot];
    return rc;
}

/* Run layer l (or, l == n_layer, nothing but the head's norm) over every
 * chunk: in place on the stream, or on a scratch copy. */
static int pass(qk_gptq_seq *s, int l, bool in_place, qk_err *err)
{
    const int n_ctx = s->n_ctx, e = s->m->hp.n_embd;
    const int nb = n_ctx < MAX_BATCH ? n_ctx : MAX_BATCH;
    for (int ci = 0; ci < s->chunks; ci++) {
        float *x = s->x_ + (size_t)ci * n_ctx * e;
        if (!in_place) {
            memcpy(s->scratch_, x, (size_t)n_ctx * e * sizeof *x);
            x = s->scratch_;
        }
        qk_ctx_reset(s->ctx_);
        for (int p0 = 0; p0 < n_ctx; p0 += nb) {
            const int n = n_ctx - p0 < nb ? n_ctx - p0 : nb;
            int rc = l < s->m->hp.n_layer ? qk_forward_layers(s->ctx_, x + (size_t)p0 * e, n, l, l + 1, err)
                                          : qk_forward_head(s->ctx_, x + (size_t)p0 * e, n, NULL, err);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static int hessians(qk_gptq_seq *s, const int64_t dims[QK_GS_N], qk_err *err)
{
    for (int k = 0; k < QK_GS_N; k++) {
        qk_hess_free(&s->h[k]);
        qk_gptq_factor_free(&s->f_[k]);
        if (dims[k] && qk_hess_init(&s->h[k], dims[k], err))
            return err->code;
    }
    return 0;
}

static void free_packed(qk_gptq_seq *s)
{
    for (int i = 0; i < 8; i++) {
        free(s->packed[i]);
        s->packed[i] = NULL;
    }
}

/* Calibrate, encode and re-run layer l (l == n_layer: the head, not re-run). */
static int seq_layer(qk_gptq_seq *s, int l, qk_err *err)
{
    const bool head = l == s->m->hp.n_layer;
    qk_layer *L = head ? NULL : &s->layers[l];
    const bool h = !s->on_input;
    const int64_t dims[QK_GS_N] = {head || !h ? 0 : L->wq.cols, head || !h ? 0 : L->wo.cols,
                                   head || !h ? 0 : L->w_gate.cols, head || !h ? 0 : L->w_down.cols,
                                   head && h ? s->mq.output.cols : 0};
    int rc = hessians(s, dims, err);
    if (rc)
        return rc;
    memset(s->slot_w_, 0, sizeof s->slot_w_);
    if (head) {
        s->slot_w_[QK_GS_OUT] = &s->mq.output;
    } else {
        s->slot_w_[QK_GS_QKV] = &L->wq, s->slot_w_[QK_GS_O] = &L->wo;
        s->slot_w_[QK_GS_GU] = &L->w_gate, s->slot_w_[QK_GS_DOWN] = &L->w_down;
    }
    s->collecting_ = true;
    rc = pass(s, l, false, err);
    s->collecting_ = false;
    if (!rc)
        rc = s->layer(s->user, s, l, err);
    if (!rc && !head)
        rc = pass(s, l, true, err);
    if (!head) {
        qk_weight *ws[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (int i = 0; i < 7; i++)
            if (s->packed[i])
                ws[i]->packed = NULL; /* its repacked copy is gone; no later pass runs this layer */
    }
    free_packed(s);
    return rc;
}

int qk_gptq_seq_pass(qk_gptq_seq *s, int l, qk_err *err)
{
    s->collecting_ = true;
    int rc = pass(s, l, false, err);
    s->collecting_ = false;
    return rc;
}

int qk_gptq_seq_run(qk_gptq_seq *s, qk_err *err)
{
    const int e = s->m->hp.n_embd;
    const size_t n_tok = (size_t)s->chunks * (size_t)s->n_ctx;
    s->mq = *s->m;
    s->layers = malloc((size_t)s->m->hp.n_layer * sizeof *s->layers);
    s->x_ = malloc(n_tok * (size_t)e * sizeof *s->x_);
    s->scratch_ = malloc((size_t)s->n_ctx * (size_t)e * sizeof *s->scratch_);
    int rc = 0;
    if (!s->layers || !s->x_ || !s->scratch_) {
        rc = qk_errf(err, QK_EIO, "out of memory (the residual stream of %zu calibration tokens)", n_tok);
        goto done;
    }
    memcpy(s->layers, s->m->layers, (size_t)s->m->hp.n_layer * sizeof *s->layers);
    s->mq.layers = s->layers;
    if (s->embed)
        rc = s->embed(s->user, s, err);
    for (int ci = 0; ci < s->chunks && !rc; ci++) {
        int32_t *t = s->ids + (size_t)ci * s->n_ctx;
        const int32_t first = t[0];
        if (s->add_bos)
            t[0] = s->bos;
        rc = qk_forward_embed(&s->mq, t, s->n_ctx, s->x_ + (size_t)ci * s->n_ctx * e, err);
        t[0] = first;
    }
    const qk_ctx_params cp = {.n_ctx = s->n_ctx, .n_batch = s->n_ctx < MAX_BATCH ? s->n_ctx : MAX_BATCH,
                              .nthreads = s->o.nthreads, .kv_type = s->kv_f32 ? QK_F32 : QK_F16, .mm_hook = hook,
                              .mm_user = s};
    if (!rc)
        rc = qk_ctx_new(&s->ctx_, &s->mq, &cp, err);
    qk_progress pg;
    qk_progress_init(&pg, "calibrating", (uint64_t)s->m->hp.n_layer + 1, s->quiet);
    for (int l = 0; l < s->m->hp.n_layer && !rc; l++) {
        rc = seq_layer(s, l, err);
        qk_progress_add(&pg, 1);
    }
    if (!rc && s->head)
        rc = seq_layer(s, s->m->hp.n_layer, err);
    qk_progress_add(&pg, 1);
    qk_progress_end(&pg);
done:
    free_packed(s);
    for (int k = 0; k < QK_GS_N; k++) {
        qk_hess_free(&s->h[k]);
        qk_gptq_factor_free(&s->f_[k]);
    }
    qk_ctx_free(s->ctx_);
    s->ctx_ = NULL;
    free(s->layers);
    free(s->x_);
    free(s->scratch_);
    s->layers = NULL, s->x_ = s->scratch_ = NULL;
    return rc;
}

int qk_calib_tokenize(const qk_tokenizer *tok, const char *text_path, int n_ctx, int n_chunks, int32_t **ids,
                      int *chunks, qk_err *err)
{
    char *text = NULL;
    size_t n = 0, n_ids = 0;
    *ids = NULL;
    int rc = qk_read_file(text_path, false, &text, &n, err);
    if (!rc) {
        if (n > 0 && text[n - 1] == '\n')
            n--;
        rc = qk_tok_encode(tok, text, n, true, false, ids, &n_ids, err);
    }
    free(text);
    if (rc)
        return rc;
    const int avail = (int)(n_ids / (size_t)n_ctx);
    if (avail < 1 || n_chunks > avail) {
        free(*ids);
        *ids = NULL;
        return qk_errf(err, QK_EINPUT, "%s: %zu tokens: %s chunks of %d tokens (--calib-chunks %d)", text_path,
                       n_ids, avail < 1 ? "not even one of the" : "fewer than the", n_ctx, n_chunks ? n_chunks : 1);
    }
    *chunks = n_chunks ? n_chunks : avail;
    return 0;
}

int qk_gptq_seq_tokens(qk_gptq_seq *s, const qk_tokenizer *tok, const char *text, int n_chunks, qk_err *err)
{
    int rc = qk_calib_tokenize(tok, text, s->n_ctx, n_chunks, &s->ids, &s->chunks, err);
    s->bos = qk_tok_bos(tok);
    s->add_bos = qk_tok_add_bos(tok);
    return rc;
}

/* ---- GGUF types: the plan's items ----------------------------------------------------------- */

typedef struct {
    qk_quant_plan *p;
    qk_gptq_calib *c;
} run;

static qk_quant_item *item_of(const qk_quant_plan *p, const qk_weight *w)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->t[i].src->name.len == (uint64_t)w->name_len && !memcmp(p->t[i].src->name.ptr, w->name, (size_t)w->name_len))
            return &p->t[i];
    return NULL;
}

/* The source rows of an item as floats (malloc'd). */
static float *source_rows(const qk_quant_item *it, qk_err *err)
{
    const qk_gguf_tensor *s = it->src;
    const uint64_t n = (uint64_t)s->ne[0] * (uint64_t)s->ne[1];
    float *f = malloc(n * sizeof *f);
    if (!f) {
        qk_errf(err, QK_EIO, "out of memory (%s)", it->name);
        return NULL;
    }
    qk_type_get(s->type)->to_float(s->data, f, (int64_t)n);
    return f;
}

/* Encode an item as the plan will (round to nearest; GPTQ when its Hessian
 * slot is given (>= 0) and its type has a grid) into it->data. */
static int encode_item(run *r, qk_gptq_seq *s, qk_quant_item *it, int slot, qk_err *err)
{
    const qk_gguf_tensor *t = it->src;
    const size_t bytes = qk_row_size(it->type, t->ne[0]) * (size_t)t->ne[1];
    float *f = source_rows(it, err);
    if (!f)
        return err->code;
    it->data = malloc(bytes ? bytes : 1);
    int rc = 0;
    if (!it->data) {
        rc = qk_errf(err, QK_EIO, "out of memory (%s)", it->name);
    } else if (slot >= 0 && qk_gptq_supports(it->type)) {
        double loss = 0;
        const qk_gptq_factor *fa;
        rc = qk_gptq_seq_factor(s, slot, &fa, err);
        if (!rc)
            rc = qk_gptq_quantize(f, t->ne[1], t->ne[0], it->type, fa, r->c->o.nthreads, it->data, &loss, err);
        if (rc) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            qk_errf(err, rc, "%s: %s", it->name, msg);
        }
        r->c->loss += loss;
        r->c->n_gptq++;
        it->gptq = true;
    } else {
        qk_type_get(it->type)->quantize(f, it->data, t->ne[1], t->ne[0], NULL);
    }
    free(f);
    return rc;
}

/* Point w at an item's encoded bytes, repacked into *mem for the products
 * when the level has a packed kernel (mem NULL: rows only).  w may be a row
 * range of the tensor (phi3's fused attn_qkv and ffn_up): it keeps its rows. */
static int use_encoded(qk_weight *w, const qk_quant_item *it, void **mem, qk_err *err)
{
    const uint8_t *src = it->src->data;
    const size_t src_row = qk_row_size(it->src->type, w->cols);
    if (w->data < src || (size_t)(w->data - src) % src_row ||
        (size_t)(w->data - src) / src_row + (size_t)w->rows > (size_t)it->src->ne[1])
        return qk_errf(err, QK_EINPUT, "%s: the model's weight is not a row range of the tensor", it->name);
    const size_t r0 = (size_t)(w->data - src) / src_row;
    w->type = it->type;
    w->row_size = qk_row_size(it->type, w->cols);
    w->data = (const uint8_t *)it->data + r0 * w->row_size;
    w->packed = NULL;
    w->mapped = 0;
    return mem ? qk_weight_pack(w, mem, err) : 0;
}

/* Encode layer l's planned weights (l == n_layer: output.weight). */
static int plan_layer(void *user, qk_gptq_seq *s, int l, qk_err *err)
{
    run *r = user;
    if (l == s->m->hp.n_layer) {
        qk_quant_item *it = item_of(r->p, &s->mq.output);
        return it && it->quantize && !it->data ? encode_item(r, s, it, QK_GS_OUT, err) : 0;
    }
    qk_layer *L = &s->layers[l];
    qk_weight *ws[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    static const int slot[7] = {QK_GS_QKV, QK_GS_QKV, QK_GS_QKV, QK_GS_O, QK_GS_GU, QK_GS_GU, QK_GS_DOWN};
    int rc = 0;
    for (int i = 0; i < 7 && !rc; i++) {
        qk_quant_item *it = item_of(r->p, ws[i]);
        if (!it || !it->quantize)
            continue; /* kept in its type: the products read it as it is */
        /* the views of one fused tensor share its Hessian slot: encoded once */
        if (it->data || !(rc = encode_item(r, s, it, slot[i], err)))
            rc = use_encoded(ws[i], it, &s->packed[i], err);
    }
    return rc;
}

/* The stream starts from the token embeddings as the output file has them. */
static int plan_embed(void *user, qk_gptq_seq *s, qk_err *err)
{
    run *r = user;
    int rc = 0;
    qk_quant_item *emb = item_of(r->p, &s->m->tok_embd);
    if (emb && emb->quantize && !(rc = encode_item(r, s, emb, -1, err)))
        rc = use_encoded(&s->mq.tok_embd, emb, NULL, err);
    if (s->m->output.data == s->m->tok_embd.data)
        s->mq.output = s->mq.tok_embd;
    return rc;
}

int qk_gptq_plan_run(qk_quant_plan *p, qk_gptq_calib *c, bool quiet, qk_err *err)
{
    run r = {.p = p, .c = c};
    qk_model m;
    qk_tokenizer *tok = NULL;
    qk_gptq_seq s = {.m = &m, .n_ctx = c->n_ctx, .o = c->o, .quiet = quiet, .embed = plan_embed,
                     .layer = plan_layer, .user = &r};
    int rc = qk_model_load(&m, p->g, err);
    if (rc)
        return rc;
    if ((rc = qk_calib_dense_check(&m, c->model ? c->model : "model", "--method gptq", err)))
        goto done;
    if (!(tok = qk_tok_from_gguf(p->g, err))) {
        rc = err->code ? err->code : QK_EINPUT;
        goto done;
    }
    if ((rc = qk_gptq_seq_tokens(&s, tok, c->text, c->n_chunks, err)))
        goto done;
    c->chunks_used = s.chunks;
    /* the head: output.weight when the model has its own (a tied head is token_embd, encoded round-to-nearest) */
    qk_quant_item *out = item_of(p, &m.output);
    s.head = out && out->quantize && !strcmp(out->name, "output.weight");
    rc = qk_gptq_seq_run(&s, err);
    /* whatever else the plan quantizes is encoded by the writer */
done:
    free(s.ids);
    qk_tok_free(tok);
    qk_model_free(&m);
    return rc;
}
