/* bench_stats.h - summary statistics and a clock for the benchmarks.
 *
 * Standard deviation is the sample one (n - 1 in the denominator), as
 * llama-bench reports it; a single sample has sd 0. */
#ifndef QK_BENCH_STATS_H
#define QK_BENCH_STATS_H

#include <stdint.h>

typedef struct qk_stats {
    int n;
    double mean, sd, median, min, max;
} qk_stats;

#define QK_STATS_MAX 4096 /* most samples qk_stats_of takes (callers enforce it) */

/* Statistics of v[0..n), 0 <= n <= QK_STATS_MAX (v is not modified; n = 0:
 * all zero; a larger n counts only the first QK_STATS_MAX samples). */
qk_stats qk_stats_of(const double *v, int n);

/* Monotonic clock in seconds. */
double qk_bench_now(void);

#endif
