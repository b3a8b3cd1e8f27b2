/* bench_roofline.h - the machine's ceilings: how fast memory can be read and
 * how many floating-point operations the cores can do.
 *
 * Read bandwidth: a buffer much larger than the last-level cache is split into
 * one contiguous slice per thread (each thread first touches its own slice);
 * all threads start each pass (burst) together at a barrier and the pass ends
 * when the last one has read its slice with wide loads.  The median of the
 * passes counts: what the machine gives at the time, interference included,
 * so that a decode measured between bursts of the same run (qk-bench model's
 * roofline) is compared with the bandwidth it had, not with a best case.
 *
 * FMA peak: each thread runs a loop of independent fused multiply-add chains
 * (enough chains to cover the FMA latency on two pipes) on the widest vector
 * unit the CPU has, chosen at run time (__builtin_cpu_supports): AVX-512F,
 * AVX2+FMA, or a plain multiply-add loop without FMA.  Best of three. */
#ifndef QK_BENCH_ROOFLINE_H
#define QK_BENCH_ROOFLINE_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/bench/bench_report.h"
#include "lib/core/err.h"

/* Median read bandwidth in bytes/s of nthreads threads over a buffer of
 * `bytes` bytes, `passes` passes.  Returns 0, or 3 (memory, threads). */
int qk_roofline_bandwidth(int nthreads, size_t bytes, int passes, double *bytes_per_s,
                          qk_err *err);

/* A series of single read bursts on one buffer (allocated once), to be
 * interleaved with other measurements: new allocates it (2 when bytes is
 * too small, 3 out of memory), run reads it once with all nthreads threads
 * and gives that burst's bytes/s (the first run also touches the pages). */
typedef struct qk_bw_burst qk_bw_burst;
int qk_bw_burst_new(qk_bw_burst **out, int nthreads, size_t bytes, qk_err *err);
int qk_bw_burst_run(qk_bw_burst *b, double *bytes_per_s, qk_err *err);
void qk_bw_burst_free(qk_bw_burst *b);

/* Peak FMA rate in FLOP/s (a fused multiply-add counts 2) of nthreads threads,
 * each running for about `seconds`.  *isa: "avx512f", "avx2+fma" or "scalar". */
int qk_roofline_fma(int nthreads, double seconds, double *flops_per_s, const char **isa,
                    qk_err *err);

typedef struct qk_roofline_opts {
    int threads;       /* measure 1..threads */
    size_t bytes;      /* bandwidth buffer */
    int passes;
    double fma_seconds;/* per thread count */
    bool quiet;
} qk_roofline_opts;

/* qk-bench roofline: one row per thread count. */
int qk_bench_roofline(const qk_roofline_opts *o, qk_report *r, qk_err *err);

/* Size in bytes of the largest cache sysfs lists for CPU 0, or 0 when unknown. */
size_t qk_bench_llc_bytes(void);

/* The CPU's model name (/proc/cpuinfo), or "unknown", into buf. */
void qk_bench_cpu_name(char *buf, size_t n);

#endif
