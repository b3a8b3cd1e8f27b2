/* bench_kernels.h - qk-bench kernels: throughput of each type's kernels at
 * each SIMD level the CPU has (cpu.h's qk_kernels_at), on one ROWS x COLS
 * weight matrix of pseudo-random Gaussian values:
 *
 *   quantize  the format table's weight encoder (what qk-quant runs; the same
 *             at every level, so measured once per type, on the first 64 rows,
 *             which are then repeated to fill the matrix)
 *   encode    the activation encoder of the type's dot partner (vec_dot_type:
 *             q8_0, q8_K, f16, ...) over ROWS rows
 *   decode    to_float of the whole matrix
 *   dot       one activation row against every weight row (decode's matrix-
 *             vector product)
 *   gemm      TOKENS activation rows against every weight row through dot
 *             tiles (prompt processing's matrix-matrix product)
 *
 * GB/s counts the bytes of the encoded type (written by quantize/encode, read
 * by decode/dot/gemm); GFLOP/s counts 2 per multiply-add.  Work is split over
 * rows with the engine's qk_parallel_for.  Each figure is the median of
 * `reps` measurements, each repeating the operation for at least `seconds`.
 *
 * The float reference point is OpenBLAS's cblas_sgemm on the same shapes
 * (M = 1 and M = TOKENS), loaded at run time with dlopen: OpenBLAS is never
 * linked into qk.  Without the library the row is left out and a note says so. */
#ifndef QK_BENCH_KERNELS_H
#define QK_BENCH_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/bench/bench_report.h"
#include "kernels/cpu.h"
#include "lib/core/err.h"
#include "kernels/types.h"

typedef struct qk_kernels_bench_opts {
    int types[QK_TYPE_MAX], n_types;
    bool level_on[QK_CPU_LEVELS]; /* all false: every supported level */
    int threads;
    int64_t rows, cols;
    int tokens;                   /* activation rows of the gemm test */
    double seconds;               /* least time per measurement */
    int reps;
    const char *blas;             /* library to dlopen, NULL: "libopenblas.so.0"; "" : none */
    bool quiet;
} qk_kernels_bench_opts;

/* The default type list: the types issue #7 gives SIMD kernels. */
extern const char *const qk_bench_default_types;

int qk_bench_kernels(const qk_kernels_bench_opts *o, qk_report *r, qk_err *err);

#endif
