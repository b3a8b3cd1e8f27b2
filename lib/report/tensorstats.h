/* tensorstats.h - statistics of one tensor, decoded through the format table.
 * Accumulation is in double, row by row in order, so the result depends only
 * on the tensor (never on threads). */
#ifndef QK_TENSORSTATS_H
#define QK_TENSORSTATS_H

#include <stdint.h>

#include "lib/core/err.h"
#include "formats/tensorset.h"

#define QK_STATS_OUTLIERS 3

typedef struct qk_tstats {
    uint64_t n;          /* elements */
    uint64_t n_nan, n_inf, n_zero;
    double min, max, mean, std, absmax, rms;
    double kurtosis;     /* Pearson kurtosis m4/m2^2 (3 for a Gaussian); NaN if std = 0 */
    /* input channels (columns, ne[0] index) with the largest absmax / tensor rms */
    int n_outliers;
    int64_t outlier_col[QK_STATS_OUTLIERS];
    double outlier_ratio[QK_STATS_OUTLIERS];
} qk_tstats;

/* Returns 0, or 2 when the type has no decoder. */
int qk_tensor_stats(const qk_tensor *t, qk_tstats *s, qk_err *err);

#endif
