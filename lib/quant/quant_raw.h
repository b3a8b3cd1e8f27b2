/* quant_raw.h - qk-quant's raw paths: encode raw float32 rows into a tensor
 * type of the format table (kernels/types.h) or a datacenter scheme
 * (kernels/scaled.h), decode them back, and list both tables. */
#ifndef QK_QUANT_RAW_H
#define QK_QUANT_RAW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/core/err.h"
#include "kernels/scaled.h"

typedef struct qk_raw_req {
    const char *type;      /* a table type or a scheme name */
    bool encode;           /* else decode */
    int64_t rows, cols;
    const char *imatrix;   /* COLS float32 importance weights, or NULL (table types) */
    int threads;
    bool scheme;           /* use the scheme table even where a GGUF type has the name
                              (mxfp4, nvfp4): set by --granularity/--global-scale/--ct */
    qk_scheme_opts so;
} qk_raw_req;

/* Read IN, write OUT atomically.  2: unknown type, wrong input size, columns
 * not a multiple of the block, importance required, OUT equal to IN. */
int qk_raw_convert(const qk_raw_req *r, const char *in, const char *out, qk_err *err);
/* The format table, then the schemes (text or one JSON document). */
void qk_raw_list(FILE *f, bool json);

#endif
