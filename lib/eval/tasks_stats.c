/* tasks_stats.c - a score with its interval, and a model against its base
 * on the same tasks (recovery, agreement); see tasks.h. */
#include "lib/eval/tasks.h"

#include <math.h>

#define ZA 1.95996398454 /* hellaswag_score's za */

void qk_task_prop_make(qk_task_prop *p, int k, int n)
{
    p->k = k, p->n = n;
    if (n <= 0) {
        p->pct = p->lo = p->hi = p->sigma = NAN;
        return;
    }
    /* hellaswag_score's Wilson score interval */
    const double freq = (double)k / (double)n;
    const double z = ZA * ZA / (double)n;
    const double cnf = z * sqrt((double)n * (4.0 * freq * (1 - freq) + z)) / (ZA + ZA);
    p->pct = 100.0 * freq;
    p->lo = 100.0 * (freq + z * 0.5 - cnf) / (1.0 + z);
    p->hi = 100.0 * (freq + z * 0.5 + cnf) / (1.0 + z);
    p->sigma = n > 1 ? 100.0 * sqrt(freq * (1 - freq) / (double)(n - 1)) : NAN;
}

void qk_task_compare(const qk_task_answers *a, const qk_task_answers *b, qk_task_cmp *c)
{
    const int n = a->n;
    int ka = 0, kb = 0, kab = 0, same = 0;
    for (int i = 0; i < n; i++) {
        ka += a->correct[i];
        if (b) {
            kb += b->correct[i];
            kab += a->correct[i] && b->correct[i];
            same += a->pick[i] == b->pick[i];
        }
    }
    qk_task_prop_make(&c->score, ka, n);
    qk_task_prop_make(&c->base, kb, b ? n : 0);
    qk_task_prop_make(&c->agree, same, b ? n : 0);
    c->n_disagree = b ? n - same : 0;
    c->recovery = c->rec_lo = c->rec_hi = NAN;
    if (!b || kb == 0 || n == 0)
        return;
    /* R = pA / pB; delta method with the paired covariance,
     *   var R = var pA / pB^2 + pA^2 var pB / pB^4 - 2 pA cov / pB^3,
     * from the 2x2 table of (A right, B right) with 0.5 added to each cell
     * (Agresti-Min), so that a table without discordant tasks does not claim
     * a zero-width interval; the point estimate is the plain ratio. */
    const double N = n + 2.0;
    const double qa = (ka + 1.0) / N, qb = (kb + 1.0) / N, qab = (kab + 0.5) / N;
    const double va = qa * (1 - qa) / N, vb = qb * (1 - qb) / N, cov = (qab - qa * qb) / N;
    const double r = (double)ka / (double)kb;
    double v = va / (qb * qb) + qa * qa * vb / (qb * qb * qb * qb) - 2 * qa * cov / (qb * qb * qb);
    const double e = v > 0 ? ZA * sqrt(v) : 0;
    c->recovery = 100.0 * r;
    c->rec_lo = 100.0 * (r - e);
    c->rec_hi = 100.0 * (r + e);
}
