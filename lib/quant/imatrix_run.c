/* imatrix_run.c - llama-imatrix's chunk loop on qk's engine (see
 * imatrix_run.h). */
#include "lib/quant/imatrix_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/types.h"
#include "lib/engine/forward.h"

#define UBATCH 512   /* llama's default n_ubatch */
#define MIN_ROWS 16  /* llama-imatrix ignores smaller products */

typedef struct {
    const qk_weight *w;
    long idx;
} wmap;

/* A layer's expert tensors: gate, up, down (n_expert matrices each). */
typedef struct {
    const qk_weight *base[3];
    long idx[3];
} xmap;

typedef struct {
    qk_imatrix_job *j;
    wmap *map;
    int n_map;
    xmap *xm;
    int n_xm;
    bool counting; /* the current piece belongs to a micro-batch of >= 16 rows */
} run_ctx;

/* MUL_MAT: the weights of build_map, micro-batches of 16 rows or more. */
static int hook(void *user, const qk_weight *w, const float *x, int n_tok, qk_err *err)
{
    run_ctx *r = user;
    if (!r->counting)
        return 0;
    for (int i = 0; i < r->n_map; i++)
        if (r->map[i].w == w)
            return qk_imx_add(r->j->stats, r->map[i].idx, x, n_tok, w->cols, r->j->nthreads, err);
    return 0;
}

/* MUL_MAT_ID: every expert product, whatever its batch (llama-imatrix
 * collects all indirect products). */
static int exp_hook(void *user, const qk_weight *w, int e, const float *x, int n_rows, qk_err *err)
{
    run_ctx *r = user;
    const int nx = r->j->model->hp.n_expert;
    for (int i = 0; i < r->n_xm; i++)
        for (int k = 0; k < 3; k++)
            if (r->xm[i].base[k] + e == w)
                return qk_imx_add_expert(r->j->stats, r->xm[i].idx[k], e, nx, x, n_rows, w->cols,
                                         r->j->nthreads, err);
    return 0;
}

static bool named(const qk_weight *w, const char *prefix, bool whole)
{
    const size_t n = strlen(prefix);
    return (size_t)w->name_len >= n && !memcmp(w->name, prefix, n) && (!whole || (size_t)w->name_len == n);
}

#define LAYER_W 12 /* dense products a layer can have */

/* The weights llama-imatrix collects: every blk.* product (a MoE layer's
 * router and shared expert, and its experts), and output.weight with
 * process_output (not the token embeddings standing in for it). */
static int build_map(run_ctx *r, qk_err *err)
{
    const qk_model *m = r->j->model;
    r->map = malloc(((size_t)m->hp.n_layer * LAYER_W + 1) * sizeof *r->map);
    r->xm = malloc(((size_t)m->hp.n_layer + 1) * sizeof *r->xm);
    if (!r->map || !r->xm)
        return qk_errf(err, QK_EIO, "out of memory");
    for (int l = 0; l < m->hp.n_layer; l++) {
        const qk_layer *L = &m->layers[l];
        const qk_weight *ws[LAYER_W] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down,
                                        &L->gate_inp, &L->gate_inp_shexp, &L->gate_shexp, &L->up_shexp,
                                        &L->down_shexp};
        for (int i = 0; i < LAYER_W; i++)
            if (ws[i]->rows > 0 && named(ws[i], "blk.", false))
                r->map[r->n_map++] = (wmap){ws[i], -1};
        if (L->moe && m->hp.n_expert > 0) {
            xmap *x = &r->xm[r->n_xm++];
            const qk_weight *b[3] = {L->exps.gate, L->exps.up, L->exps.down};
            for (int k = 0; k < 3; k++) {
                x->base[k] = b[k];
                x->idx[k] = qk_imx_entry_index(r->j->stats, b[k]->name, (size_t)b[k]->name_len, err);
                if (x->idx[k] < 0)
                    return err->code;
            }
        }
    }
    if (r->j->process_output && named(&m->output, "output.weight", true))
        r->map[r->n_map++] = (wmap){&m->output, -1};
    for (int i = 0; i < r->n_map; i++) {
        r->map[i].idx = qk_imx_entry_index(r->j->stats, r->map[i].w->name, (size_t)r->map[i].w->name_len, err);
        if (r->map[i].idx < 0)
            return err->code;
    }
    return 0;
}

/* collect_imatrix's bookkeeping after a chunk: the chunk count, and the
 * --output-frequency / --save-frequency saves. */
static int periodic_save(const qk_imatrix_job *j, qk_err *err)
{
    qk_imx *s = j->stats;
    const int32_t n = qk_imx_chunks(s);
    if (n <= s->last_chunk)
        return 0;
    const int32_t step = n - s->last_chunk;
    s->last_chunk = n;
    if (!j->out_path)
        return 0;
    if ((n % j->out_freq) / step == 0 && qk_imx_save(s, j->out_path, j->legacy, j->prompt_file, err))
        return err->code;
    if (j->save_freq > 0 && (n % j->save_freq) / step == 0) {
        char *p = malloc(strlen(j->out_path) + 24);
        if (!p)
            return qk_errf(err, QK_EIO, "out of memory");
        sprintf(p, "%s.at_%d", j->out_path, (int)n);
        int rc = qk_imx_save(s, p, j->legacy, j->prompt_file, err);
        free(p);
        if (rc)
            return rc;
    }
    return 0;
}

/* One piece of a chunk: tokens [p0, p0+n) at their positions. */
static int piece(run_ctx *r, qk_ctx *c, const int32_t *win, int ci, int p0, int n, float *logits,
                 qk_err *err)
{
    qk_imatrix_job *j = r->j;
    const int first = j->n_ctx / 2, nv = j->model->hp.n_vocab;
    /* logits when output.weight is collected, or where this piece overlaps
     * the scored positions first .. n_ctx-2 */
    const bool scored = j->want_logits && p0 + n > first && p0 < j->n_ctx - 1;
    if (!(j->process_output && r->counting) && !scored)
        return qk_forward(c, win + p0, n, NULL, false, err);
    if (qk_forward(c, win + p0, n, logits, true, err))
        return err->code;
    if (!scored || !j->on_logits)
        return 0;
    const int a = p0 > first ? p0 : first, b = p0 + n < j->n_ctx - 1 ? p0 + n : j->n_ctx - 1;
    return j->on_logits(j->ud, ci, a, b - a, logits + (size_t)(a - p0) * nv, err);
}

int qk_calib_dense_check(const qk_model *m, const char *path, const char *method, qk_err *err)
{
    for (int l = 0; l < m->hp.n_layer; l++)
        if (m->layers[l].moe)
            return qk_errf(err, QK_EINPUT,
                           "%s: blk.%d.ffn_gate_exps.weight: %s calibrates dense products only, not "
                           "mixture-of-experts layers (qk-imatrix collects experts)",
                           path, l, method);
    return 0;
}

int qk_imatrix_run(qk_imatrix_job *j, qk_err *err)
{
    const int n_ctx = j->n_ctx, nv = j->model->hp.n_vocab;
    /* llama-imatrix's layout: n_seq chunks per batch, batches of nb, micro-batches of nub */
    const int n_seq = j->n_batch / n_ctx > 1 ? j->n_batch / n_ctx : 1;
    const int nb = j->n_batch < n_seq * n_ctx ? j->n_batch : n_seq * n_ctx;
    const int nub = nb < UBATCH ? nb : UBATCH;
    /* qk's pieces: within a micro-batch, split at n_ctx/2 where only the
     * second half needs logits */
    const int pmax = n_seq > 1 ? (n_ctx < UBATCH ? n_ctx : UBATCH) : nub;
    run_ctx r = {.j = j};
    qk_ctx *c = NULL;
    int32_t *win = malloc((size_t)n_ctx * sizeof *win);
    float *logits = malloc((size_t)pmax * (size_t)nv * sizeof *logits);
    int rc = !win || !logits ? qk_errf(err, QK_EIO, "out of memory") : build_map(&r, err);
    const qk_ctx_params cp = {.n_ctx = n_ctx, .n_batch = pmax, .nthreads = j->nthreads,
                              .kv_type = QK_F16, .mm_hook = hook, .exp_hook = exp_hook, .mm_user = &r};
    if (!rc)
        rc = qk_ctx_new(&c, j->model, &cp, err);
    const int first = n_ctx / 2;
    for (int ci = 0; ci < j->n_chunk && !rc; ci++) {
        memcpy(win, j->tokens + (size_t)ci * n_ctx, (size_t)n_ctx * sizeof *win);
        if (j->add_bos)
            win[0] = j->bos;
        qk_ctx_reset(c);
        for (int b0 = 0; b0 < n_ctx && !rc; b0 += nb) {
            const int bs = n_ctx - b0 < nb ? n_ctx - b0 : nb;
            for (int u0 = 0; u0 < bs && !rc; u0 += pmax) {
                const int us = bs - u0 < pmax ? bs - u0 : pmax;
                r.counting = n_seq > 1 || us >= MIN_ROWS;
                const int p0 = b0 + u0;
                const bool split = j->want_logits && !j->process_output && p0 < first && p0 + us > first;
                if (split)
                    rc = piece(&r, c, win, ci, p0, first - p0, logits, err) ||
                         piece(&r, c, win, ci, first, p0 + us - first, logits, err);
                else
                    rc = piece(&r, c, win, ci, p0, us, logits, err);
                if (rc)
                    rc = err->code;
            }
        }
        j->tokens_evaluated += (uint64_t)n_ctx;
        if (!rc && j->on_chunk)
            rc = j->on_chunk(j->ud, ci, err);
        if (!rc)
            rc = periodic_save(j, err);
        if (!rc && j->progress)
            qk_progress_add(j->progress, 1);
    }
    qk_ctx_free(c);
    free(r.map);
    free(r.xm);
    free(win);
    free(logits);
    return rc;
}
