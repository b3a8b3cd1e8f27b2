/* bench_model.h - qk-bench model: prompt processing and generation speed of
 * the engine (forward.h), with llama-bench's semantics:
 *
 *   ppP  one prompt of P tokens from an empty cache, evaluated in batches of
 *        n_batch (only the last token's logits are computed); t/s = P / time
 *   tgN  N single-token steps from an empty cache (each step's logits
 *        computed, the next token drawn at random); t/s = N / time
 *   ... @ dD  the same after a cache of D tokens (llama-bench -d): the D
 *        tokens are evaluated once, untimed, and each repetition starts from
 *        them (the cache cut back to D, as llama-bench restores its state)
 *
 * Tokens are pseudo-random (fixed seed; the first is BOS when the model adds
 * one).  Before the timed repetitions one warm-up run (pp: the whole prompt,
 * tg: one token), then for each repetition the cache is cleared and the test
 * timed; the row reports the mean and sample standard deviation of the
 * per-repetition tokens/s (llama-bench's avg_ts/stddev_ts) and, in csv/json,
 * the median.
 *
 * Roofline: a tg row also says at what fraction of the read bandwidth it
 * decodes: bytes read per token (every weight matrix, the norms, one
 * embedding row and, on average over the run, the KV cache) times tokens/s
 * divided by the read bandwidth of the same thread count: the median of
 * read bursts (bench_roofline.h) run before each repetition and after the
 * last, so the decode is compared with what the machine gave it then. */
#ifndef QK_BENCH_MODEL_H
#define QK_BENCH_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/bench/bench_report.h"
#include "lib/core/err.h"
#include "lib/engine/model.h"

#define QK_BENCH_LIST_MAX 32 /* most values in a comma list */

typedef struct qk_model_bench_opts {
    const char *const *models;
    int n_models;
    int prompts[QK_BENCH_LIST_MAX], n_prompts; /* 0 entries are skipped */
    int gens[QK_BENCH_LIST_MAX], n_gens;
    int depths[QK_BENCH_LIST_MAX], n_depths;   /* cached tokens before each test (0: none) */
    int threads[QK_BENCH_LIST_MAX], n_threads;
    int reps;            /* timed repetitions, >= 1 */
    bool warmup;
    int n_batch;         /* tokens per batch, 0: 512 */
    int kv_type;         /* QK_F16 (llama.cpp's default) or QK_F32 */
    int act_type;        /* QK_ACT_DEFAULT or QK_ACT_F32 (lib/engine/matmul.h) */
    double bandwidth;    /* bytes/s of read bandwidth: > 0 given, 0 measure, < 0 no roofline */
    size_t bw_bytes;     /* buffer for measuring it */
    uint64_t seed;
    bool quiet;
} qk_model_bench_opts;

/* Bytes one decoded token reads from memory at cache length n_past (the
 * token attends to n_past + 1 positions), split into weights and KV cache. */
void qk_model_decode_bytes(const qk_model *m, int kv_type, int64_t n_past, double *weights,
                           double *kv);

int qk_bench_model(const qk_model_bench_opts *o, qk_report *r, qk_err *err);

#endif
