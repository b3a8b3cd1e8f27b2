/* study_run.c - KLD of modified forward passes against the plain one
 * (study_run.h). */
#include "lib/study/study_run.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/engine/forward.h"
#include "kernels/types.h"

/* log-softmax of logits[n] into lp, in double. */
static void log_softmax(const float *logits, int n, double *lp)
{
    double mx = logits[0];
    for (int i = 1; i < n; i++)
        if (logits[i] > mx)
            mx = logits[i];
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += exp((double)logits[i] - mx);
    const double lse = mx + log(sum);
    for (int i = 0; i < n; i++)
        lp[i] = (double)logits[i] - lse;
}

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* One configuration's context and running sums. */
typedef struct {
    qk_ctx *ctx;
    qk_wire wire;
    bool has_wire;
    double sum_nll, sum_kld, sum_kld2;
    uint64_t same, n;
    float *kld;               /* per token, for the percentiles */
} run_state;

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Evaluate one window: first half without logits, second half with. */
static int eval_window(qk_ctx *c, const int32_t *win, int n_ctx, float *logits, qk_err *err)
{
    const int first = n_ctx / 2;
    qk_ctx_reset(c);
    if (qk_forward(c, win, first, NULL, false, err) ||
        qk_forward(c, win + first, n_ctx - first, logits, true, err))
        return err->code;
    return 0;
}

static int setup(run_state *st, const qk_model *m, const qk_study_cfg *cfg, int n_ctx,
                 int nthreads, size_t n_scored, qk_err *err)
{
    qk_ctx_params p = {.n_ctx = n_ctx, .n_batch = n_ctx, .nthreads = nthreads,
                       .kv_type = QK_F32};
    if (cfg && cfg->wire) {
        if (qk_wire_init(&st->wire, cfg->wire, m->hp.n_layer, m->hp.n_embd, err))
            return err->code;
        st->has_wire = true;
        p.layer_hook = qk_wire_layer_hook;
        p.hook_user = &st->wire;
    }
    if (cfg)
        p.kvq = cfg->kvq;
    if (qk_ctx_new(&st->ctx, m, &p, err))
        return err->code;
    if (cfg && !(st->kld = malloc((n_scored ? n_scored : 1) * sizeof *st->kld)))
        return qk_errf(err, QK_EIO, "out of memory");
    return 0;
}

static void teardown(run_state *st)
{
    qk_ctx_free(st->ctx);
    if (st->has_wire)
        qk_wire_free(&st->wire);
    free(st->kld);
}

/* Score the second-half rows of one window against the base. */
static void score(run_state *st, const float *logits, const double *base_lp, const int *base_top,
                  const int32_t *win, int n_ctx, int nv, double *lp)
{
    const int first = n_ctx / 2;
    for (int r = 0; r < n_ctx - 1 - first; r++) {
        const float *l = logits + (size_t)r * nv;
        const double *bl = base_lp + (size_t)r * nv;
        log_softmax(l, nv, lp);
        double kld = 0.0;
        for (int i = 0; i < nv; i++)
            kld += exp(bl[i]) * (bl[i] - lp[i]);
        st->sum_nll += -lp[win[first + r + 1]];
        st->sum_kld += kld;
        st->sum_kld2 += kld * kld;
        st->same += argmax(l, nv) == base_top[r];
        st->kld[st->n++] = (float)kld;
    }
}

static void finish(run_state *st, double base_nll, qk_study_res *r)
{
    const double n = (double)st->n;
    memset(r, 0, sizeof *r);
    r->n = st->n;
    if (st->n) {
        r->kld_mean = st->sum_kld / n;
        const double var = st->sum_kld2 / n - r->kld_mean * r->kld_mean;
        r->kld_se = st->n > 1 && var > 0 ? sqrt(var / (n - 1)) : 0.0;
        r->ppl = exp(st->sum_nll / n);
        r->ppl_base = exp(base_nll / n);
        r->same_top = (double)st->same / n;
        qsort(st->kld, st->n, sizeof *st->kld, cmp_float);
        r->kld_max = st->kld[st->n - 1];
        r->kld_p99 = st->kld[(size_t)floor(0.99 * (double)(st->n - 1))];
    }
    if (st->has_wire) {
        r->n_boundaries = st->wire.n_boundaries;
        r->wire = st->wire.st;
    }
    r->kv_bytes_token = st->ctx->n_past ? qk_ctx_kv_bytes(st->ctx) / st->ctx->n_past : 0.0;
}

int qk_study_run(const qk_model *m, const int32_t *tokens, size_t n_tokens, int n_ctx,
                 int32_t bos, int nthreads, const qk_study_cfg *cfgs, int n_cfg,
                 qk_study_res *res, qk_err *err)
{
    if (n_ctx < 4 || n_ctx % 2)
        return qk_errf(err, QK_EINPUT, "-c %d: the window must be even and at least 4", n_ctx);
    const size_t n_chunk = n_tokens / (size_t)n_ctx;
    if (n_chunk == 0)
        return qk_errf(err, QK_EINPUT, "%zu tokens: fewer than one window of %d", n_tokens, n_ctx);
    const int nv = m->hp.n_vocab, first = n_ctx / 2, rows = n_ctx - 1 - first;
    const size_t n_scored = n_chunk * (size_t)rows;
    run_state base = {0}, *st = calloc((size_t)n_cfg ? (size_t)n_cfg : 1, sizeof *st);
    float *logits = malloc((size_t)(n_ctx - first) * nv * sizeof *logits);
    double *base_lp = malloc((size_t)rows * nv * sizeof *base_lp);
    double *lp = malloc((size_t)nv * sizeof *lp);
    int *base_top = malloc((size_t)rows * sizeof *base_top);
    int32_t *win = malloc((size_t)n_ctx * sizeof *win);
    int rc = 0;
    if (!st || !logits || !base_lp || !lp || !base_top || !win) {
        rc = qk_errf(err, QK_EIO, "out of memory");
        goto done;
    }
    if ((rc = setup(&base, m, NULL, n_ctx, nthreads, 0, err)))
        goto done;
    for (int k = 0; k < n_cfg; k++)
        if ((rc = setup(&st[k], m, &cfgs[k], n_ctx, nthreads, n_scored, err)))
            goto done;
    double base_nll = 0.0;
    for (size_t ch = 0; ch < n_chunk; ch++) {
        memcpy(win, tokens + ch * (size_t)n_ctx, (size_t)n_ctx * sizeof *win);
        win[0] = bos;
        if ((rc = eval_window(base.ctx, win, n_ctx, logits, err)))
            goto done;
        for (int r = 0; r < rows; r++) {
            log_softmax(logits + (size_t)r * nv, nv, base_lp + (size_t)r * nv);
            base_top[r] = argmax(logits + (size_t)r * nv, nv);
            base_nll += -base_lp[(size_t)r * nv + win[first + r + 1]];
        }
        for (int k = 0; k < n_cfg; k++) {
            if ((rc = eval_window(st[k].ctx, win, n_ctx, logits, err)))
                goto done;
            score(&st[k], logits, base_lp, base_top, win, n_ctx, nv, lp);
        }
    }
    for (int k = 0; k < n_cfg; k++)
        finish(&st[k], base_nll, &res[k]);
done:
    teardown(&base);
    for (int k = 0; st && k < n_cfg; k++)
        teardown(&st[k]);
    free(st), free(logits), free(base_lp), free(lp), free(base_top), free(win);
    return rc;
}
