/* quantize.h - whole-tensor encode/decode through the format table, rows
 * split across threads.  Output bytes never depend on the thread count. */
#ifndef QK_QUANTIZE_H
#define QK_QUANTIZE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/err.h"

/* Encode nrows x ncols floats as `type` (imatrix: ncols weights or NULL).
 * Returns 0, or 2 with err filled (unknown type, ncols not a multiple of the
 * block, importance matrix required but absent, no encoder). */
int qk_quantize_rows(int type, const float *src, void *dst, int64_t nrows, int64_t ncols,
                     const float *imatrix, int nthreads, qk_err *err);
/* Decode nrows x ncols elements of `type` to floats. */
int qk_dequantize_rows(int type, const void *src, float *dst, int64_t nrows, int64_t ncols,
                       int nthreads, qk_err *err);

#endif
