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

/* The Hessian slots of a layer (and the head): the inputs of q/k/v,
 * attn_output, gate/up, down, output. */
enum { H_QKV, H_O, H_GU, H_DOWN, H_OUT, N_H };

typedef struct {
    qk_quant_plan *p;
    qk_gptq_calib *c;
    qk_model m;           /* as loaded */
    qk_model mq;          /* the copy the context runs: its layers become the encoded ones */
    qk_layer *layers;     /* mq's */
    const int32_t *tokens;
    size_t n_tok;         /* n_chunk * n_ctx */
    float *x;             /* the residual stream of every chunk, n_tok x n_embd */
    float *scratch;       /* one chunk */
    qk_ctx *ctx;
    qk_hess h[N_H];
    qk_gptq_factor f[N_H]; /* made from h when a weight of the slot is encoded */
    const qk_weight *slot_w[N_H]; /* the weight whose hook call feeds each slot */
    bool collecting;
    void *packed[8];      /* repacked encoded weights of the layer in use */
} run;

static int hook(void *user, const qk_weight *w, const float *x, int n_tok, qk_err *err)
{
    (void)err;
    run *r = user;
    if (!r->collecting)
        return 0;
    for (int s = 0; s < N_H; s++)
        if (r->slot_w[s] == w) {
            qk_hess_add(&r->h[s], x, n_tok, r->c->o.nthreads);
            break;
        }
    return 0;
}

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
static int encode_item(run *r, qk_quant_item *it, int slot, qk_err *err)
{
    const qk_gguf_tensor *s = it->src;
    const size_t bytes = qk_row_size(it->type, s->ne[0]) * (size_t)s->ne[1];
    float *f = source_rows(it, err);
    if (!f)
        return err->code;
    it->data = malloc(bytes ? bytes : 1);
    int rc = 0;
    if (!it->data) {
        rc = qk_errf(err, QK_EIO, "out of memory (%s)", it->name);
    } else if (slot >= 0 && qk_gptq_supports(it->type)) {
        double loss = 0;
        if (!r->f[slot].u)
            rc = qk_gptq_factor_make(&r->f[slot], &r->h[slot], &r->c->o, err);
        if (!rc)
            rc = qk_gptq_quantize(f, s->ne[1], s->ne[0], it->type, &r->f[slot], r->c->o.nthreads, it->data,
                                  &loss, err);
        if (rc) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            qk_errf(err, rc, "%s: %s", it->name, msg);
        }
        r->c->loss += loss;
        r->c->n_gptq++;
        it->gptq = true;
    } else {
        qk_type_get(it->type)->quantize(f, it->data, s->ne[1], s->ne[0], NULL);
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

/* Run layer l (or, l == n_layer, nothing but the head's norm) over every
 * chunk: in place on the stream, or on a scratch copy. */
static int pass(run *r, int l, bool in_place, qk_err *err)
{
    const int n_ctx = r->c->n_ctx, e = r->m.hp.n_embd;
    const int nb = n_ctx < MAX_BATCH ? n_ctx : MAX_BATCH;
    for (int ci = 0; ci < r->c->chunks_used; ci++) {
        float *x = r->x + (size_t)ci * n_ctx * e;
        if (!in_place) {
            memcpy(r->scratch, x, (size_t)n_ctx * e * sizeof *x);
            x = r->scratch;
        }
        qk_ctx_reset(r->ctx);
        for (int p0 = 0; p0 < n_ctx; p0 += nb) {
            const int n = n_ctx - p0 < nb ? n_ctx - p0 : nb;
            int rc = l < r->m.hp.n_layer ? qk_forward_layers(r->ctx, x + (size_t)p0 * e, n, l, l + 1, err)
                                         : qk_forward_head(r->ctx, x + (size_t)p0 * e, n, NULL, err);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static int hessians(run *r, const int64_t dims[N_H], qk_err *err)
{
    for (int s = 0; s < N_H; s++) {
        qk_hess_free(&r->h[s]);
        qk_gptq_factor_free(&r->f[s]);
        if (dims[s] && qk_hess_init(&r->h[s], dims[s], err))
            return err->code;
    }
    return 0;
}

static void free_packed(run *r)
{
    for (int i = 0; i < 8; i++) {
        free(r->packed[i]);
        r->packed[i] = NULL;
    }
}

/* Calibrate, encode and re-run layer l. */
static int do_layer(run *r, int l, qk_err *err)
{
    qk_layer *L = &r->layers[l];
    qk_weight *ws[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    static const int slot[7] = {H_QKV, H_QKV, H_QKV, H_O, H_GU, H_GU, H_DOWN};
    const int64_t dims[N_H] = {L->wq.cols, L->wo.cols, L->w_gate.cols, L->w_down.cols, 0};
    int rc = hessians(r, dims, err);
    if (rc)
        return rc;
    memset(r->slot_w, 0, sizeof r->slot_w);
    r->slot_w[H_QKV] = &L->wq, r->slot_w[H_O] = &L->wo, r->slot_w[H_GU] = &L->w_gate, r->slot_w[H_DOWN] = &L->w_down;
    r->collecting = true;
    rc = pass(r, l, false, err);
    r->collecting = false;
    bool enc[7] = {0};
    for (int i = 0; i < 7 && !rc; i++) {
        qk_quant_item *it = item_of(r->p, ws[i]);
        if (!it || !it->quantize)
            continue; /* kept in its type: the products read it as it is */
        enc[i] = true;
        /* the views of one fused tensor share its Hessian slot: encoded once */
        if (it->data || !(rc = encode_item(r, it, slot[i], err)))
            rc = use_encoded(ws[i], it, &r->packed[i], err);
    }
    if (!rc)
        rc = pass(r, l, true, err);
    free_packed(r);
    for (int i = 0; i < 7; i++)
        if (enc[i])
            ws[i]->packed = NULL; /* its repacked copy is gone; no later pass runs this layer */
    return rc;
}

static int do_head(run *r, qk_err *err)
{
    qk_quant_item *it = item_of(r->p, &r->mq.output);
    /* a tied head is token_embd, encoded round-to-nearest */
    if (!it || !it->quantize || it->data || strcmp(it->name, "output.weight"))
        return 0;
    const int64_t dims[N_H] = {0, 0, 0, 0, r->mq.output.cols};
    int rc = hessians(r, dims, err);
    if (rc)
        return rc;
    memset(r->slot_w, 0, sizeof r->slot_w);
    r->slot_w[H_OUT] = &r->mq.output;
    r->collecting = true;
    rc = pass(r, r->m.hp.n_layer, false, err);
    r->collecting = false;
    return rc ? rc : encode_item(r, it, H_OUT, err);
}

/* The calibration tokens: llama-imatrix's tokenization of the text. */
static int calib_tokens(run *r, int32_t **ids, size_t *n_ids, int32_t *bos, bool *add_bos, qk_err *err)
{
    qk_tokenizer *tok = qk_tok_from_gguf(r->p->g, err);
    if (!tok)
        return err->code ? err->code : QK_EINPUT;
    char *text = NULL;
    size_t n = 0;
    int rc = qk_read_file(r->c->text, false, &text, &n, err);
    if (!rc) {
        if (n > 0 && text[n - 1] == '\n')
            n--;
        rc = qk_tok_encode(tok, text, n, true, false, ids, n_ids, err);
    }
    *bos = qk_tok_bos(tok);
    *add_bos = qk_tok_add_bos(tok);
    free(text);
    qk_tok_free(tok);
    return rc;
}

int qk_gptq_plan_run(qk_quant_plan *p, qk_gptq_calib *c, bool quiet, qk_err *err)
{
    run r = {.p = p, .c = c};
    int32_t *ids = NULL, bos = 0;
    size_t n_ids = 0;
    bool add_bos = false;
    int rc = qk_model_load(&r.m, p->g, err);
    if (rc)
        return rc;
    if ((rc = qk_calib_dense_check(&r.m, c->model ? c->model : "model", err)))
        goto done;
    if ((rc = calib_tokens(&r, &ids, &n_ids, &bos, &add_bos, err)))
        goto done;
    const int avail = (int)(n_ids / (size_t)c->n_ctx);
    if (avail < 1 || c->n_chunks > avail) {
        rc = qk_errf(err, QK_EINPUT, "%s: %zu tokens: %s chunks of %d tokens (--calib-chunks %d)", c->text,
                     n_ids, avail < 1 ? "not even one of the" : "fewer than the", c->n_ctx,
                     c->n_chunks ? c->n_chunks : 1);
        goto done;
    }
    c->chunks_used = c->n_chunks ? c->n_chunks : avail;
    r.n_tok = (size_t)c->chunks_used * (size_t)c->n_ctx;
    const int e = r.m.hp.n_embd;
    r.mq = r.m;
    r.layers = malloc((size_t)r.m.hp.n_layer * sizeof *r.layers);
    r.x = malloc(r.n_tok * (size_t)e * sizeof *r.x);
    r.scratch = malloc((size_t)c->n_ctx * (size_t)e * sizeof *r.scratch);
    if (!r.layers || !r.x || !r.scratch) {
        rc = qk_errf(err, QK_EIO, "out of memory (the residual stream of %zu calibration tokens)", r.n_tok);
        goto done;
    }
    memcpy(r.layers, r.m.layers, (size_t)r.m.hp.n_layer * sizeof *r.layers);
    r.mq.layers = r.layers;
    /* the stream starts from the token embeddings as the output file has them */
    qk_quant_item *emb = item_of(p, &r.m.tok_embd);
    if (emb && emb->quantize && !(rc = encode_item(&r, emb, -1, err)))
        rc = use_encoded(&r.mq.tok_embd, emb, NULL, err);
    if (r.m.output.data == r.m.tok_embd.data)
        r.mq.output = r.mq.tok_embd;
    for (int ci = 0; ci < c->chunks_used && !rc; ci++) {
        int32_t *t = ids + (size_t)ci * c->n_ctx;
        const int32_t first = t[0];
        if (add_bos)
            t[0] = bos;
        rc = qk_forward_embed(&r.mq, t, c->n_ctx, r.x + (size_t)ci * c->n_ctx * e, err);
        t[0] = first;
    }
    const qk_ctx_params cp = {.n_ctx = c->n_ctx, .n_batch = c->n_ctx < MAX_BATCH ? c->n_ctx : MAX_BATCH,
                              .nthreads = c->o.nthreads, .kv_type = QK_F16, .mm_hook = hook, .mm_user = &r};
    if (!rc)
        rc = qk_ctx_new(&r.ctx, &r.mq, &cp, err);
    qk_progress pg;
    qk_progress_init(&pg, "calibrating", (uint64_t)r.m.hp.n_layer + 1, quiet);
    for (int l = 0; l < r.m.hp.n_layer && !rc; l++) {
        rc = do_layer(&r, l, err);
        qk_progress_add(&pg, 1);
    }
    if (!rc)
        rc = do_head(&r, err);
    qk_progress_add(&pg, 1);
    qk_progress_end(&pg);
    /* whatever else the plan quantizes is encoded by the writer */
done:
    free_packed(&r);
    for (int s = 0; s < N_H; s++) {
        qk_hess_free(&r.h[s]);
        qk_gptq_factor_free(&r.f[s]);
    }
    qk_ctx_free(r.ctx);
    free(r.layers);
    free(r.x);
    free(r.scratch);
    free(ids);
    qk_model_free(&r.m);
    return rc;
}
