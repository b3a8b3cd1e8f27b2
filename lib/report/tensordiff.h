/* tensordiff.h - compare two checkpoints tensor by tensor (qk-inspect --diff).
 *
 * Tensors are paired by name; across a Hugging Face directory and a GGUF file
 * the HF names are mapped to GGUF names (hfnames.h) and, for llama/mistral
 * GGUFs, llama.cpp's q/k row permutation is undone.  Values are compared
 * after decoding both sides through the format table, so any two types
 * compare.  Output order follows A; results do not depend on threads. */
#ifndef QK_TENSORDIFF_H
#define QK_TENSORDIFF_H

#include <stdbool.h>
#include <stdio.h>

#include "lib/core/err.h"

typedef struct qk_diff_opts {
    const char *tensor_glob; /* compare only these (names as in A) */
    bool json;
    bool quiet;
    int threads;
    double max_rmse;         /* < 0: no bound */
    double min_snr;          /* -INFINITY: no bound */
} qk_diff_opts;

/* Prints the report on out.  Returns 0, QK_EFAIL (1) when a bound is
 * violated (one line per violation already printed on stderr), or an
 * error code with err filled. */
int qk_diff_run(const char *a, const char *b, const qk_diff_opts *o, FILE *out, qk_err *err);

#endif
