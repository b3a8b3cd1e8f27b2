/* inspect_print.h - the report of qk-inspect (text and JSON). */
#ifndef QK_INSPECT_PRINT_H
#define QK_INSPECT_PRINT_H

#include <stdbool.h>
#include <stdio.h>

#include "lib/core/err.h"

typedef struct qk_inspect_opts {
    const char *tensor_glob;
    const char *meta_glob;
    bool meta_full;
    bool stats;
    bool json;
    bool quiet;
    int threads;
} qk_inspect_opts;

int qk_inspect_run(const char *path, const qk_inspect_opts *o, FILE *out, qk_err *err);

#endif
