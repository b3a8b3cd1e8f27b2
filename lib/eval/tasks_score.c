/* tasks_score.c - tokenizing and answering tasks as llama-perplexity does
 * (perplexity.cpp: hellaswag_score, winogrande_score, multiple_choice_score,
 * compute_logprobs, softmax); see tasks.h.
 *
 * llama-perplexity puts a task's common prefix into its batch once (shared
 * by one sequence per candidate) and each candidate's remaining tokens
 * after it; its logits are laid out as: row 0 the prefix's last token, then
 * per candidate the rows of its tokens after the prefix.  The pairs (row,
 * next token) whose log-probabilities it adds up are taken here with the
 * same indices into the same layout, and the rows are computed by
 * evaluating the prefix once and each candidate from the prefix on (the
 * cache rewound to the prefix between candidates), which gives every
 * candidate the context it has in llama's batch. */
#include "lib/eval/tasks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/expf.h"

static int oom(qk_err *err) { return qk_errf(err, QK_EIO, "out of memory"); }

void qk_task_toks_free(qk_task_toks *tt)
{
    for (int i = 0; tt->t && i < tt->n; i++) {
        qk_task_tok *k = &tt->t[i];
        for (int c = 0; k->seq && c < k->n_cand; c++)
            free(k->seq[c]);
        free(k->seq), free(k->len);
    }
    free(tt->t);
    memset(tt, 0, sizeof *tt);
}

/* Rows of logits candidate c needs after the prefix: HellaSwag and multiple
 * choice its tokens after the prefix but the last, Winogrande all of them
 * (llama asks logits for every token there). */
static size_t cand_rows(int kind, const qk_task_tok *k, int c)
{
    const size_t rest = k->len[c] - k->cp;
    return kind == QK_TASK_WINOGRANDE ? rest : rest - 1;
}

int qk_tasks_tokenize(const qk_taskset *ts, const qk_tokenizer *tok, int n_ctx, const char *path,
                      qk_task_toks *out, qk_err *err)
{
    memset(out, 0, sizeof *out);
    out->t = calloc((size_t)(ts->n ? ts->n : 1), sizeof *out->t);
    if (!out->t)
        return oom(err);
    const size_t limit = 4 * (size_t)n_ctx;
    int rc = 0;
    for (int i = 0; i < ts->n && !rc; i++) {
        const qk_task *t = &ts->t[i];
        qk_task_tok *k = &out->t[out->n++];
        k->n_cand = t->n_cand;
        k->seq = calloc((size_t)t->n_cand, sizeof *k->seq);
        k->len = calloc((size_t)t->n_cand, sizeof *k->len);
        if (!k->seq || !k->len)
            return oom(err);
        for (int c = 0; c < t->n_cand && !rc; c++)
            rc = qk_tok_encode(tok, t->text[c], strlen(t->text[c]), true, false, &k->seq[c],
                               &k->len[c], err);
        for (int c = 0; c < 2 && t->base && !rc; c++) {
            int32_t *ids = NULL;
            rc = qk_tok_encode(tok, t->base[c], strlen(t->base[c]), true, false, &ids, &k->n_base[c],
                               err);
            free(ids);
        }
        if (rc)
            break;
        size_t min_len = k->len[0];
        for (int c = 1; c < t->n_cand; c++)
            min_len = k->len[c] < min_len ? k->len[c] : min_len;
        size_t cp = 0;
        while (cp < min_len) {
            int c = 1;
            while (c < t->n_cand && k->seq[c][cp] == k->seq[0][cp])
                c++;
            if (c < t->n_cand)
                break;
            cp++;
        }
        k->cp = cp;
        k->required = cp;
        for (int c = 0; c < t->n_cand; c++)
            k->required += k->len[c] - cp;
        char where[64];
        qk_task_where(ts, i, where, sizeof where);
        if (cp == 0) {
            rc = qk_errf(err, QK_EINPUT, "%s: %s: the candidates share no first token (no BOS): "
                         "llama-perplexity cannot score this task", path, where);
            break;
        }
        for (int c = 0; c < t->n_cand && !rc; c++)
            if (k->len[c] == cp)
                rc = qk_errf(err, QK_EINPUT, "%s: %s: candidate %d has no token after the %zu all "
                             "candidates share: llama-perplexity cannot score it", path, where, c + 1,
                             cp);
        if (rc)
            break;
        if (k->required > limit) {
            rc = qk_errf(err, QK_EINPUT, "%s: %s: the task needs %zu tokens, more than the context "
                         "of %zu (4 x -c %d)", path, where, k->required, limit, n_ctx);
            break;
        }
        for (int c = 0; c < t->n_cand; c++) {
            out->max_len = k->len[c] > out->max_len ? k->len[c] : out->max_len;
            const size_t r = cand_rows(ts->kind, k, c);
            out->max_rows = r > out->max_rows ? r : out->max_rows;
        }
    }
    if (rc)
        qk_task_toks_free(out);
    return rc;
}

int qk_task_answers_init(qk_task_answers *a, const qk_taskset *ts, qk_err *err)
{
    memset(a, 0, sizeof *a);
    a->n = ts->n;
    const size_t m = ts->n > 0 ? (size_t)ts->n : 1;
    size_t total = 0;
    a->pick = calloc(m, sizeof *a->pick);
    a->correct = calloc(m, 1);
    a->off = calloc(m, sizeof *a->off);
    if (a->off)
        for (int i = 0; i < ts->n; i++) {
            a->off[i] = total;
            total += (size_t)ts->t[i].n_cand;
        }
    a->score = calloc(total ? total : 1, sizeof *a->score);
    if (!a->pick || !a->correct || !a->off || !a->score) {
        qk_task_answers_free(a);
        return oom(err);
    }
    return 0;
}

void qk_task_answers_free(qk_task_answers *a)
{
    free(a->pick), free(a->correct), free(a->score), free(a->off);
    memset(a, 0, sizeof *a);
}

/* ---- one model ------------------------------------------------------------- */

typedef struct {
    int64_t row;   /* in llama's layout */
    int32_t tok;
} pair;

struct qk_task_scorer {
    qk_ctx *ctx;
    int nv;
    float *row0;   /* the prefix's last logits */
    float *rows;   /* one candidate's rows */
    pair *pairs;
    float *res;
    size_t cap_pairs;
};

int qk_task_scorer_new(qk_task_scorer **out, const qk_model *m, const qk_task_toks *tt,
                       int kv_type, int n_batch, int nthreads, qk_err *err)
{
    qk_task_scorer *s = calloc(1, sizeof *s);
    if (!s)
        return oom(err);
    s->nv = m->hp.n_vocab;
    const size_t rows = tt->max_rows ? tt->max_rows : 1;
    if (n_batch <= 0)
        n_batch = (int)(rows < 512 ? rows : 512);
    const qk_ctx_params cp = {.n_ctx = (int)(tt->max_len ? tt->max_len : 1), .n_batch = n_batch,
                              .nthreads = nthreads, .kv_type = kv_type};
    int rc = qk_ctx_new(&s->ctx, m, &cp, err);
    if (rc) {
        free(s);
        return rc;
    }
    s->row0 = malloc((size_t)s->nv * sizeof *s->row0);
    s->rows = malloc(rows * (size_t)s->nv * sizeof *s->rows);
    if (!s->row0 || !s->rows) {
        qk_task_scorer_free(s);
        return oom(err);
    }
    *out = s;
    return 0;
}

void qk_task_scorer_free(qk_task_scorer *s)
{
    if (!s)
        return;
    qk_ctx_free(s->ctx);
    free(s->row0), free(s->rows), free(s->pairs), free(s->res);
    free(s);
}

/* compute_logprobs: logits[tok] - max - log(sum exp(l - max)), all float */
static float logprob_f(const float *l, int nv, int32_t tok)
{
    const float max = qk_row_max(l, (size_t)nv); /* std::max over the row */
    const qk_expf_fn ex = qk_expf_ops_active()->expf;
    float e[512], sum = 0.f;
    for (int j0 = 0; j0 < nv; j0 += 512) {
        const int m = nv - j0 < 512 ? nv - j0 : 512;
        ex(l + j0, max, e, (size_t)m);
        for (int j = 0; j < m; j++)
            sum += e[j];
    }
    return l[tok] - max - logf(sum);
}

/* softmax(): float max, double sum of float exps, prob = (float)(exp / sum) */
static float softmax_prob(const float *l, int nv, int32_t tok)
{
    const float max = qk_row_max(l, (size_t)nv); /* std::max over the row */
    const double sum = qk_expf_sum(l, max, (size_t)nv);
    return (float)((double)qk_expf(l[tok] - max) / sum);
}

static int add_pair(qk_task_scorer *s, size_t *np, int64_t row, int32_t tok, qk_err *err)
{
    if (*np == s->cap_pairs) {
        const size_t cap = s->cap_pairs ? 2 * s->cap_pairs : 256;
        pair *p = realloc(s->pairs, cap * sizeof *p);
        float *r = p ? realloc(s->res, cap * sizeof *r) : NULL;
        if (p)
            s->pairs = p;
        if (!r)
            return oom(err);
        s->res = r;
        s->cap_pairs = cap;
    }
    s->pairs[(*np)++] = (pair){row, tok};
    return 0;
}

/* The eval pairs in llama-perplexity's order. */
static int make_pairs(qk_task_scorer *s, int kind, const qk_task_tok *k, size_t *np, qk_err *err)
{
    *np = 0;
    const size_t cp = k->cp;
    if (kind != QK_TASK_WINOGRANDE) {
        int64_t li = 1; /* row 0 is scored through softmax() */
        for (int c = 0; c < k->n_cand; c++)
            for (size_t j = cp; j + 1 < k->len[c]; j++)
                if (add_pair(s, np, li++, k->seq[c][j + 1], err))
                    return err->code;
        return 0;
    }
    const size_t len0 = k->len[0], len1 = k->len[1];
    const bool skip = len0 - cp > 3 && len1 - cp > 3; /* k_min_trailing_ctx */
    const size_t nb1 = skip ? k->n_base[0] : cp, nb2 = skip ? k->n_base[1] : cp;
    const size_t last1 = len0 - nb1 > 1 ? 1 : 0, last2 = len1 - nb2 > 1 ? 1 : 0;
    int64_t li = (int64_t)nb1 - (int64_t)cp;
    for (size_t j = nb1 - 1; j + 1 + last1 < len0; j++)
        if (add_pair(s, np, li++, k->seq[0][j + 1], err))
            return err->code;
    li = (int64_t)(len0 - cp) + (int64_t)nb2 - (int64_t)cp; /* llama's FIXME kept */
    for (size_t j = nb2 - 1; j + 1 + last2 < len1; j++)
        if (add_pair(s, np, li++, k->seq[1][j + 1], err))
            return err->code;
    return 0;
}

/* Check llama's indices stay inside the task's layout (they can leave it
 * when the tokens of first + option are not a prefix of the candidate's). */
static int check_pairs(const qk_task_scorer *s, size_t np, int64_t n_rows, const qk_taskset *ts, int i,
                       qk_err *err)
{
    for (size_t p = 0; p < np; p++)
        if (s->pairs[p].row < 0 || s->pairs[p].row >= n_rows) {
            char where[64];
            qk_task_where(ts, i, where, sizeof where);
            return qk_errf(err, QK_EINPUT, "task %s: llama-perplexity would read logits row %lld of "
                           "%lld (the tokens of sentence + option are not a prefix of the "
                           "candidate's): not scorable", where, (long long)s->pairs[p].row,
                           (long long)n_rows);
        }
    return 0;
}

int qk_task_score(qk_task_scorer *s, const qk_taskset *ts, const qk_task_toks *tt, int i,
                  qk_task_answers *a, qk_err *err)
{
    const qk_task_tok *k = &tt->t[i];
    const int kind = ts->kind, nv = s->nv;
    const size_t cp = k->cp;
    size_t np;
    int rc;
    if (kind == QK_TASK_WINOGRANDE)
        for (int c = 0; c < 2; c++)
            if (k->n_base[c] < 1 || k->n_base[c] > k->len[c]) {
                char where[64];
                qk_task_where(ts, i, where, sizeof where);
                return qk_errf(err, QK_EINPUT, "task %s: sentence + option %d has %zu tokens, the "
                               "candidate %zu: not scorable as llama-perplexity scores it", where,
                               c + 1, k->n_base[c], k->len[c]);
            }
    if ((rc = make_pairs(s, kind, k, &np, err)))
        return rc;
    int64_t n_rows = 1;
    for (int c = 0; c < k->n_cand; c++)
        n_rows += (int64_t)cand_rows(kind, k, c);
    if ((rc = check_pairs(s, np, n_rows, ts, i, err)))
        return rc;
    /* the prefix once: its last token's logits are row 0 */
    qk_ctx_reset(s->ctx);
    if ((rc = qk_forward(s->ctx, k->seq[0], (int)cp, s->row0, false, err)))
        return rc;
    for (size_t p = 0; p < np; p++)
        if (s->pairs[p].row == 0)
            s->res[p] = logprob_f(s->row0, nv, s->pairs[p].tok);
    int64_t off = 1;
    for (int c = 0; c < k->n_cand; c++) {
        const size_t nr = cand_rows(kind, k, c);
        if (nr == 0)
            continue;
        if ((rc = qk_ctx_rewind(s->ctx, (int)cp, err)) ||
            (rc = qk_forward(s->ctx, k->seq[c] + cp, (int)nr, s->rows, true, err)))
            return rc;
        for (size_t p = 0; p < np; p++) {
            const int64_t r = s->pairs[p].row - off;
            if (r >= 0 && r < (int64_t)nr)
                s->res[p] = logprob_f(s->rows + (size_t)r * nv, nv, s->pairs[p].tok);
        }
        off += (int64_t)nr;
    }
    size_t ir = 0;
    int pick = 0;
    double best = 0, *sc = a->score + a->off[i];
    if (kind == QK_TASK_WINOGRANDE) {
        const size_t len0 = k->len[0], len1 = k->len[1];
        const bool skip = len0 - cp > 3 && len1 - cp > 3;
        const size_t nb1 = skip ? k->n_base[0] : cp, nb2 = skip ? k->n_base[1] : cp;
        const size_t last1 = len0 - nb1 > 1 ? 1 : 0, last2 = len1 - nb2 > 1 ? 1 : 0;
        float s1 = 0, s2 = 0;
        for (size_t j = nb1 - 1; j + 1 + last1 < len0; j++)
            s1 += s->res[ir++];
        s1 /= (float)(len0 - nb1 - last1);
        for (size_t j = nb2 - 1; j + 1 + last2 < len1; j++)
            s2 += s->res[ir++];
        s2 /= (float)(len1 - nb2 - last2);
        pick = s1 > s2 ? 0 : 1;
        sc[0] = s1, sc[1] = s2;
    } else {
        for (int c = 0; c < k->n_cand; c++) {
            const float first = logf(softmax_prob(s->row0, nv, k->seq[c][cp]));
            double v;
            if (kind == QK_TASK_HELLASWAG) { /* double sum, size_t count */
                double lp = first;
                size_t count = 1;
                for (size_t j = cp; j + 1 < k->len[c]; j++, count++)
                    lp += s->res[ir++];
                v = lp / (double)count;
            } else { /* float sum */
                float lp = first;
                size_t count = 1;
                for (size_t j = cp; j + 1 < k->len[c]; j++, count++)
                    lp += s->res[ir++];
                v = lp / (float)count;
            }
            sc[c] = v;
            if (c == 0 || v > best) { /* the first of equal scores wins */
                best = v;
                pick = c;
            }
        }
    }
    a->pick[i] = pick;
    a->correct[i] = ts->t[i].correct[pick];
    return 0;
}
