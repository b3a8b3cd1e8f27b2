/* threads.h - a fixed-partition parallel for.
 *
 * Items [0, n) are cut into contiguous ranges whose boundaries depend only on
 * n and grain, never on the thread count; threads take ranges in order.  Code
 * that writes each item's output independently therefore produces the same
 * bytes with any number of threads.  Reductions must not be split across
 * ranges unless the caller combines per-range partials in range order. */
#ifndef QK_THREADS_H
#define QK_THREADS_H

#include <stddef.h>

/* fn(ctx, begin, end): process items [begin, end). */
typedef void (*qk_range_fn)(void *ctx, size_t begin, size_t end);

/* Run fn over [0, n) in ranges of `grain` items (last one shorter) with up to
 * nthreads threads (nthreads <= 1: inline, in order). */
void qk_parallel_for(int nthreads, size_t n, size_t grain, qk_range_fn fn, void *ctx);

/* Online CPUs, at least 1. */
int qk_cpu_count(void);

#endif
