/* ppl.c - llama-perplexity's chunking and scoring (perplexity.cpp:
 * perplexity(), kl_divergence(), the log_softmax variants). */
#include "lib/eval/ppl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/expf.h"
#include "lib/engine/forward.h"
#include "lib/engine/matmul.h"
#include "lib/core/threads.h"

int qk_ppl_tokenize(const qk_tokenizer *t, const char *text, size_t n, int32_t **ids,
                    size_t *n_ids, qk_err *err)
{
    if (n > 0 && text[n - 1] == '\n')
        n--; /* common/arg.cpp, -f: "params.prompt.pop_back()" */
    return qk_tok_encode(t, text, n, true, false, ids, n_ids, err);
}

double qk_ppl_nll(const float *logits, int n_vocab, int tok, bool file_formula)
{
    const float max = qk_row_max(logits, (size_t)n_vocab);
    const double sum = qk_expf_sum(logits, max, (size_t)n_vocab);
    if (file_formula) {
        const float lse = (float)log(sum);
        return max + lse - logits[tok];
    }
    return -(logits[tok] - max - log(sum));
}

void qk_ppl_logprobs(const float *logits, int n_vocab, float *lp)
{
    qk_kldb_logprobs(logits, n_vocab, lp);
}

void qk_kld_score(const float *logits, const float *base_lp, int n_vocab, int tok, qk_kld_tok *out)
{
    /* llama's log_softmax(..., kl_divergence_result &) with the model's
     * log-probabilities computed exactly as the base's are (qk_kldb_logprobs),
     * so that identical logits give exactly 0: same nll, same top token, and
     * every term of the sum p_base * (lp_base - lp) zero. */
    float max;
    const float lse = qk_kldb_lse(logits, n_vocab, &max);
    const qk_expf_fn ex = qk_expf_ops_active()->expf;
    enum { CHUNK = 512 };
    float pb[CHUNK]; /* expf of the chunk's base log-probs */
    double sum = 0;
    int imax = -1, imax_base = -1;
    float lp_max = 0, lpb_max = 0;
    for (int i0 = 0; i0 < n_vocab; i0 += CHUNK) {
        const int m = n_vocab - i0 < CHUNK ? n_vocab - i0 : CHUNK;
        ex(base_lp + i0, 0.0f, pb, (size_t)m);
        for (int j = 0; j < m; j++) {
            const int i = i0 + j;
            const float lp = QK_KLDB_LOGPROB(logits[i], max, lse), lpb = base_lp[i];
            if (i == 0 || lp > lp_max) {
                lp_max = lp;
                imax = i;
            }
            if (i == 0 || lpb > lpb_max) {
                lpb_max = lpb;
                imax_base = i;
            }
            if (lpb > -16.f)
                sum += pb[j] * (lpb - lp); /* p_base = expf(lpb) */
        }
    }
    const float nll = -QK_KLDB_LOGPROB(logits[tok], max, lse), nll_base = -base_lp[tok];
    out->nll = nll;
    out->nll_base = nll_base;
    out->kld = sum;
    out->same_top = imax == imax_base;
    const float p_base = qk_expf(-nll_base), p = qk_expf(-nll);
    out->p_diff = p - p_base;
}

/* Per-row scoring of one batch, spread over threads (each row independent). */
typedef struct {
    const float *la, *blp;
    const int32_t *target;
    int nv;
    bool kld, file_formula;
    qk_kld_tok *rec;
} score_ctx;

static void score_rows(void *vctx, size_t begin, size_t end)
{
    const score_ctx *s = vctx;
    for (size_t r = begin; r < end; r++) {
        const float *l = s->la + r * (size_t)s->nv;
        if (s->kld) {
            qk_kld_score(l, s->blp + r * (size_t)s->nv, s->nv, s->target[r], &s->rec[r]);
        } else {
            memset(&s->rec[r], 0, sizeof s->rec[r]);
            s->rec[r].nll = qk_ppl_nll(l, s->nv, s->target[r], s->file_formula);
        }
    }
}

void qk_ppl_nll_rows(const float *logits, int n_vocab, const int32_t *target, int n, qk_kld_tok *rec,
                     int nthreads)
{
    score_ctx sc = {.la = logits, .target = target, .nv = n_vocab, .rec = rec};
    qk_parallel_for(nthreads, (size_t)n, 1, score_rows, &sc);
}

typedef struct {
    const float *lb;
    float *blp;
    int nv;
} lp_ctx;

static void lp_rows(void *vctx, size_t begin, size_t end)
{
    const lp_ctx *c = vctx;
    for (size_t r = begin; r < end; r++)
        qk_ppl_logprobs(c->lb + r * (size_t)c->nv, c->nv, c->blp + r * (size_t)c->nv);
}

typedef struct {
    qk_ctx *a, *b;
    qk_ctx *v[QK_PPL_MAX_VARIANTS]; /* the variants' contexts */
    float *la, *lb, *blp;
    float *lv, *plp, *vlp;   /* variants: logits, the model's and the variant's log-probs */
    float *hid;            /* factored base output: normalised hidden states */
    float *xa, *xb, *xv[QK_PPL_MAX_VARIANTS]; /* a batch's residual rows, per context */
    int nl;                /* logits rows per step (QK_PPL_LOGITS_BUDGET) */
    int32_t *win;
    qk_kld_tok *rec;
} run_bufs;

static void free_bufs(run_bufs *r)
{
    qk_ctx_free(r->a);
    qk_ctx_free(r->b);
    for (int i = 0; i < QK_PPL_MAX_VARIANTS; i++)
        qk_ctx_free(r->v[i]);
    free(r->la), free(r->lb), free(r->blp), free(r->hid), free(r->win), free(r->rec);
    free(r->lv), free(r->plp), free(r->vlp);
    free(r->xa), free(r->xb);
    for (int i = 0; i < QK_PPL_MAX_VARIANTS; i++)
        free(r->xv[i]);
}

/* The engine's output block (qk_forward_head) on the n residual rows x, with
 * the normalised hidden states it leaves in c->xb kept for a factored base
 * file. */
static int head_and_hidden(qk_ctx *c, const float *x, int n, float *hid, float *logits, qk_err *err)
{
    if (qk_forward_head(c, x, n, logits, err))
        return err->code;
    memcpy(hid, c->xb, (size_t)n * c->m->hp.n_embd * sizeof *hid);
    return 0;
}

/* The n tokens at tok through every layer (no logits), their residual rows
 * kept in x (n <= the context's batch, so c->x holds them all). */
static int layers_only(qk_ctx *c, const int32_t *tok, int n, float *x, qk_err *err)
{
    if (qk_forward(c, tok, n, NULL, false, err))
        return err->code;
    memcpy(x, c->x, (size_t)n * c->m->hp.n_embd * sizeof *x);
    return 0;
}

/* Score n rows of logits l against base log-probs blp into acc. */
static int score_into(const qk_ppl_job *j, run_bufs *r, const float *l, const float *blp,
                      const int32_t *target, int n, qk_kld_acc *acc, qk_err *err)
{
    score_ctx sc = {l, blp, target, j->model->hp.n_vocab, true, false, r->rec};
    qk_parallel_for(j->nthreads, (size_t)n, 1, score_rows, &sc);
    for (int k = 0; k < n; k++)
        if (qk_kld_acc_add(acc, &r->rec[k], err))
            return err->code;
    return 0;
}

/* The variants on the n tokens at p (rows k0 .. k0+n-1 of the batch) whose
 * model logits are r->la (and base log-probs r->blp): score each. */
static int run_variants(qk_ppl_job *j, run_bufs *r, int p, int k0, int n, qk_err *err)
{
    const int nv = j->model->hp.n_vocab, e = j->model->hp.n_embd;
    const int32_t *target = r->win + p + 1;
    bool plp_done = false;
    for (int i = 0; i < j->n_variants; i++) {
        const qk_ppl_variant *v = &j->variants[i];
        if (qk_forward_head(r->v[i], r->xv[i] + (size_t)k0 * e, n, r->lv, err))
            return err->code;
        if (v->vs_base && score_into(j, r, r->lv, r->blp, target, n, v->vs_base, err))
            return err->code;
        if (v->vs_model) {
            if (!plp_done) {
                lp_ctx lc = {r->la, r->plp, nv};
                qk_parallel_for(j->nthreads, (size_t)n, 1, lp_rows, &lc);
                plp_done = true;
            }
            if (score_into(j, r, r->lv, r->plp, target, n, v->vs_model, err))
                return err->code;
        }
        if (v->model_vs) {
            lp_ctx lc = {r->lv, r->vlp, nv};
            qk_parallel_for(j->nthreads, (size_t)n, 1, lp_rows, &lc);
            if (score_into(j, r, r->la, r->vlp, target, n, v->model_vs, err))
                return err->code;
        }
    }
    return 0;
}

/* One window: first half without logits, second half batch by batch. */
static int run_chunk(qk_ppl_job *j, run_bufs *r, int c, qk_err *err)
{
    const int n_ctx = j->n_ctx, first = n_ctx / 2, nv = j->model->hp.n_vocab;
    const bool kld = j->base_model || j->base_in;
    memcpy(r->win, j->tokens + (size_t)c * n_ctx, (size_t)n_ctx * sizeof *r->win);
    if (j->add_bos)
        r->win[0] = j->bos;
    qk_ctx_reset(r->a);
    if (qk_forward(r->a, r->win, first, NULL, false, err))
        return err->code;
    if (r->b) {
        qk_ctx_reset(r->b);
        if (qk_forward(r->b, r->win, first, NULL, false, err))
            return err->code;
    }
    for (int i = 0; i < j->n_variants; i++) {
        qk_ctx_reset(r->v[i]);
        if (qk_forward(r->v[i], r->win, first, NULL, false, err))
            return err->code;
    }
    j->tokens_evaluated += (uint64_t)first;
    if (j->base_in && qk_kldb_seek_chunk(j->base_in, c, err))
        return err->code;
    const int nb = j->n_batch, e = j->model->hp.n_embd;
    /* the last position's logits score nothing: it is never evaluated; a
     * batch's layers run at once, its logits r->nl rows at a time */
    for (int p0 = first; p0 < n_ctx - 1; p0 += nb) {
        const int nt = n_ctx - 1 - p0 < nb ? n_ctx - 1 - p0 : nb;
        if (layers_only(r->a, r->win + p0, nt, r->xa, err) || (r->b && layers_only(r->b, r->win + p0, nt, r->xb, err)))
            return err->code;
        for (int i = 0; i < j->n_variants; i++)
            if (layers_only(r->v[i], r->win + p0, nt, r->xv[i], err))
                return err->code;
        j->tokens_evaluated += (uint64_t)nt;
        for (int k0 = 0; k0 < nt; k0 += r->nl) {
            const int n = nt - k0 < r->nl ? nt - k0 : r->nl, p = p0 + k0;
            const float *xa = r->xa + (size_t)k0 * e;
            if (r->hid ? head_and_hidden(r->a, xa, n, r->hid, r->la, err)
                       : qk_forward_head(r->a, xa, n, r->la, err))
                return err->code;
            if (r->b) {
                if (qk_forward_head(r->b, r->xb + (size_t)k0 * e, n, r->lb, err))
                    return err->code;
                lp_ctx lc = {r->lb, r->blp, nv};
                qk_parallel_for(j->nthreads, (size_t)n, 1, lp_rows, &lc);
            }
            if (j->base_in && qk_kldb_read_rows(j->base_in, n, r->blp, err))
                return err->code;
            for (int k = 0; k < n && j->base_out; k++)
                if (qk_kldb_write_row(j->base_out, r->la + (size_t)k * nv,
                                      r->hid ? r->hid + (size_t)k * e : NULL, err))
                    return err->code;
            score_ctx sc = {r->la, r->blp, r->win + p + 1, nv, kld, j->base_out != NULL, r->rec};
            qk_parallel_for(j->nthreads, (size_t)n, 1, score_rows, &sc);
            for (int k = 0; k < n; k++)
                if (qk_kld_acc_add(j->acc, &r->rec[k], err))
                    return err->code;
            if (j->n_variants && run_variants(j, r, p, k0, n, err))
                return err->code;
        }
    }
    return 0;
}

int qk_ppl_run(qk_ppl_job *j, qk_err *err)
{
    const int nv = j->model->hp.n_vocab;
    if (j->n_ctx < 4)
        return qk_errf(err, QK_EINPUT, "-c %d: the context must hold at least 4 tokens", j->n_ctx);
    if (j->base_model && j->base_model->hp.n_vocab != nv)
        return qk_errf(err, QK_EINPUT, "the base model's vocabulary has %d tokens, the model's %d",
                       j->base_model->hp.n_vocab, nv);
    if (j->n_batch <= 0)
        j->n_batch = 512;
    if (j->n_batch > j->n_ctx)
        j->n_batch = j->n_ctx;
    if (j->n_variants < 0 || j->n_variants > QK_PPL_MAX_VARIANTS)
        return qk_errf(err, QK_EINPUT, "%d variant runs (at most %d)", j->n_variants, QK_PPL_MAX_VARIANTS);
    for (int i = 0; i < j->n_variants; i++)
        if (j->variants[i].vs_base && !j->base_model && !j->base_in)
            return qk_errf(err, QK_EINPUT, "a variant scored against the base needs a base");
    run_bufs r = {0};
    qk_ctx_params cp = {.n_ctx = j->n_ctx, .n_batch = j->n_batch, .nthreads = j->nthreads,
                        .kv_type = j->kv_type};
    qk_ctx_params cpa = cp;
    cpa.layer_hook = j->layer_hook, cpa.hook_user = j->hook_user, cpa.kvq = j->kvq;
    cpa.act_type = j->act_type;
    int rc = qk_ctx_new(&r.a, j->model, &cpa, err);
    if (!rc && j->base_model)
        rc = qk_ctx_new(&r.b, j->base_model, &cp, err);
    for (int i = 0; i < j->n_variants && !rc; i++) {
        qk_ctx_params cv = cp;
        cv.act_type = j->variants[i].act_type, cv.act_variant = j->variants[i].act_variant;
        rc = qk_ctx_new(&r.v[i], j->model, &cv, err);
    }
    if (rc)
        goto done;
    /* logits rows per step: as many as keep them within QK_PPL_LOGITS_BUDGET,
     * at least 32, at most the batch */
    const uint64_t fit = QK_PPL_LOGITS_BUDGET / ((uint64_t)nv * sizeof(float)), want = fit < 32 ? 32 : fit;
    r.nl = want < (uint64_t)j->n_batch ? (int)want : j->n_batch;
    const size_t rows = (size_t)r.nl * (size_t)nv, xrows = (size_t)j->n_batch * (size_t)j->model->hp.n_embd;
    r.xa = malloc(xrows * sizeof *r.xa);
    if (j->base_model)
        r.xb = malloc(xrows * sizeof *r.xb);
    for (int i = 0; i < j->n_variants; i++)
        r.xv[i] = malloc(xrows * sizeof *r.xv[i]);
    r.la = malloc(rows * sizeof *r.la);
    r.win = malloc((size_t)j->n_ctx * sizeof *r.win);
    r.rec = malloc((size_t)r.nl * sizeof *r.rec);
    if (j->base_model)
        r.lb = malloc(rows * sizeof *r.lb);
    if (j->base_model || j->base_in)
        r.blp = malloc(rows * sizeof *r.blp);
    if (j->n_variants) {
        r.lv = malloc(rows * sizeof *r.lv);
        r.plp = malloc(rows * sizeof *r.plp);
        r.vlp = malloc(rows * sizeof *r.vlp);
    }
    if (j->base_out && qk_kldb_wants_hidden(j->base_out))
        r.hid = malloc((size_t)r.nl * (size_t)j->model->hp.n_embd * sizeof *r.hid);
    if (j->base_in)
        qk_kldb_set_threads(j->base_in, j->nthreads);
    bool xok = r.xa && (!j->base_model || r.xb);
    for (int i = 0; i < j->n_variants; i++)
        xok = xok && r.xv[i];
    if (!xok || !r.la || !r.win || !r.rec || (j->base_model && !r.lb) ||
        (j->base_out && qk_kldb_wants_hidden(j->base_out) && !r.hid) ||
        ((j->base_model || j->base_in) && !r.blp) || (j->n_variants && (!r.lv || !r.plp || !r.vlp))) {
        rc = qk_errf(err, QK_EIO, "out of memory (%zu logits per batch)", rows);
        goto done;
    }
    for (int c = j->chunk_a; c < j->chunk_b; c++) {
        if ((rc = run_chunk(j, &r, c, err)))
            goto done;
        if (j->on_chunk)
            j->on_chunk(j->ud, c + 1, j->acc);
        if (j->progress)
            qk_progress_add(j->progress, 1);
    }
done:
    free_bufs(&r);
    return rc;
}
