/* bench_stats.c - mean, sample standard deviation, median, extremes. */
#include "lib/bench/bench_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

qk_stats qk_stats_of(const double *v, int n)
{
    if (n > QK_STATS_MAX)
        n = QK_STATS_MAX;
    qk_stats s = {.n = n > 0 ? n : 0};
    if (n <= 0)
        return s;
    double sum = 0;
    s.min = s.max = v[0];
    for (int i = 0; i < n; i++) {
        sum += v[i];
        s.min = v[i] < s.min ? v[i] : s.min;
        s.max = v[i] > s.max ? v[i] : s.max;
    }
    s.mean = sum / n;
    /* two-pass variance: no cancellation when the spread is small */
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += (v[i] - s.mean) * (v[i] - s.mean);
    s.sd = n > 1 ? sqrt(ss / (n - 1)) : 0;

    double sorted[QK_STATS_MAX];
    memcpy(sorted, v, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
    s.median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    return s;
}

double qk_bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
