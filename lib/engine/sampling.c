/* sampling.c - greedy, top-k, top-p and temperature sampling (sampling.h). */
#include "lib/engine/sampling.h"

#include <math.h>
#include <stdlib.h>

int32_t qk_argmax(const float *v, int n)
{
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return best;
}

int qk_sampler_init(qk_sampler *s, int n_vocab, const qk_sampler_params *p, qk_err *err)
{
    s->cand = NULL;
    if (n_vocab < 1)
        return qk_errf(err, QK_EINPUT, "sampler: empty vocabulary");
    if (!isfinite(p->temp) || p->temp < 0)
        return qk_errf(err, QK_EINPUT, "sampler: temperature %g is not a finite number >= 0",
                       (double)p->temp);
    if (!(p->top_p > 0 && p->top_p <= 1))
        return qk_errf(err, QK_EINPUT, "sampler: top-p %g is not in (0, 1]", (double)p->top_p);
    s->p = *p;
    s->n_vocab = n_vocab;
    /* xorshift64* must not start at 0; splitmix the seed into a state */
    uint64_t z = p->seed + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    s->rng = z ? z : 0x2545f4914f6cdd1dull;
    if (p->temp > 0) {
        s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
        if (!s->cand)
            return qk_errf(err, QK_EIO, "sampler: out of memory");
    }
    return 0;
}

void qk_sampler_free(qk_sampler *s)
{
    free(s->cand);
    s->cand = NULL;
}

/* Uniform double in [0, 1) from xorshift64*. */
static double uniform(qk_sampler *s)
{
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return (double)((s->rng * 2685821657736338717ull) >> 11) * 0x1p-53;
}

/* Descending logit, ties by ascending id: a total order, so the sort result
 * does not depend on qsort's algorithm. */
static int by_logit(const void *a, const void *b)
{
    const qk_cand *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* p[i] = softmax of logit[i] / temp over cand[0..n); returns nothing, the
 * probabilities are normalised in double. */
static void softmax(qk_cand *c, int n, float temp)
{
    float max = c[0].logit;
    for (int i = 1; i < n; i++)
        max = c[i].logit > max ? c[i].logit : max;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        c[i].p = exp(((double)c[i].logit - max) / temp);
        sum += c[i].p;
    }
    for (int i = 0; i < n; i++)
        c[i].p /= sum;
}

/* Sift c[i] down a heap whose root is the worst (last in by_logit order). */
static void sift_down(qk_cand *c, int n, int i)
{
    for (;;) {
        int w = i, l = 2 * i + 1, r = l + 1;
        if (l < n && by_logit(&c[l], &c[w]) > 0)
            w = l;
        if (r < n && by_logit(&c[r], &c[w]) > 0)
            w = r;
        if (w == i)
            return;
        qk_cand t = c[i];
        c[i] = c[w];
        c[w] = t;
        i = w;
    }
}

/* c[0..k) = the k best of all logits, sorted by by_logit: a heap of the k
 * best so far, so O(n log k) rather than a full sort. */
static void top_k(qk_cand *c, const float *logits, int n, int k)
{
    for (int i = 0; i < k; i++)
        c[i] = (qk_cand){.id = i, .logit = logits[i]};
    for (int i = k / 2 - 1; i >= 0; i--)
        sift_down(c, k, i);
    for (int i = k; i < n; i++) {
        qk_cand x = {.id = i, .logit = logits[i]};
        if (by_logit(&x, &c[0]) < 0) {
            c[0] = x;
            sift_down(c, k, 0);
        }
    }
    qsort(c, (size_t)k, sizeof *c, by_logit);
}

int32_t qk_sample(qk_sampler *s, const float *logits)
{
    if (s->p.temp <= 0 || !s->cand)
        return qk_argmax(logits, s->n_vocab);
    qk_cand *c = s->cand;
    int n = s->n_vocab;
    if (s->p.top_k > 0 && s->p.top_k < n)
        n = s->p.top_k;
    top_k(c, logits, s->n_vocab, n);
    if (s->p.top_p < 1.0f) {
        softmax(c, n, 1.0f);
        double cum = 0.0;
        int keep = n;
        for (int i = 0; i < n; i++) {
            cum += c[i].p;
            if (cum >= s->p.top_p) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
    }
    softmax(c, n, s->p.temp);
    double r = uniform(s), cum = 0.0;
    for (int i = 0; i < n; i++) {
        cum += c[i].p;
        if (r < cum)
            return c[i].id;
    }
    return c[n - 1].id; /* r within rounding of 1 */
}
