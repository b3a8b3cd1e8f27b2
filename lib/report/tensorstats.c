#include "lib/report/tensorstats.h"

#include <math.h>
#include <stdlib.h>

#include "kernels/types.h"

int qk_tensor_stats(const qk_tensor *t, qk_tstats *s, qk_err *err)
{
    const qk_type_traits *tt = qk_type_get(t->type);
    *s = (qk_tstats){.min = INFINITY, .max = -INFINITY};
    if (!tt || !tt->to_float)
        return qk_errf(err, QK_EINPUT, "%s: tensor '%s': no decoder for type %s", t->file, t->name,
                       tt ? tt->name : "?");
    int64_t cols = t->ne[0];
    uint64_t rows = qk_tensor_rows(t);
    size_t rs = qk_row_size(t->type, cols);
    float *row = malloc((size_t)(cols > 0 ? cols : 1) * sizeof *row);
    double *col_absmax = calloc((size_t)(cols > 0 ? cols : 1), sizeof *col_absmax);
    if (!row || !col_absmax) {
        free(row), free(col_absmax);
        return qk_errf(err, QK_EIO, "out of memory");
    }
    double sum = 0, sum2 = 0;
    uint64_t finite = 0;
    for (uint64_t r = 0; r < rows && cols > 0; r++) {
        tt->to_float(t->data + r * rs, row, cols);
        for (int64_t i = 0; i < cols; i++) {
            double v = row[i];
            if (isnan(v)) {
                s->n_nan++;
                continue;
            }
            if (isinf(v)) {
                s->n_inf++;
                continue;
            }
            finite++;
            s->n_zero += v == 0;
            sum += v;
            sum2 += v * v;
            if (v < s->min)
                s->min = v;
            if (v > s->max)
                s->max = v;
            if (fabs(v) > col_absmax[i])
                col_absmax[i] = fabs(v);
        }
    }
    s->n = t->nelem;
    if (finite) {
        s->mean = sum / (double)finite;
        s->rms = sqrt(sum2 / (double)finite);
        s->absmax = fmax(fabs(s->min), fabs(s->max));
        /* second pass for central moments (numerically sound) */
        double m2 = 0, m4 = 0;
        for (uint64_t r = 0; r < rows; r++) {
            tt->to_float(t->data + r * rs, row, cols);
            for (int64_t i = 0; i < cols; i++) {
                double v = row[i];
                if (!isfinite(v))
                    continue;
                double d = v - s->mean, d2 = d * d;
                m2 += d2;
                m4 += d2 * d2;
            }
        }
        m2 /= (double)finite;
        m4 /= (double)finite;
        s->std = sqrt(m2);
        s->kurtosis = m2 > 0 ? m4 / (m2 * m2) : NAN;
    } else {
        s->min = s->max = s->mean = s->std = s->rms = s->absmax = NAN;
        s->kurtosis = NAN;
    }
    /* outlier channels: only meaningful for matrices */
    if (t->n_dims >= 2 && s->rms > 0) {
        for (int64_t i = 0; i < cols; i++) {
            double ratio = col_absmax[i] / s->rms;
            int k;
            if (s->n_outliers < QK_STATS_OUTLIERS)
                k = s->n_outliers++;
            else if (ratio > s->outlier_ratio[QK_STATS_OUTLIERS - 1])
                k = QK_STATS_OUTLIERS - 1;
            else
                continue;
            /* bubble up, keeping descending order; ties keep the lower column first */
            while (k > 0 && s->outlier_ratio[k - 1] < ratio) {
                s->outlier_ratio[k] = s->outlier_ratio[k - 1];
                s->outlier_col[k] = s->outlier_col[k - 1];
                k--;
            }
            s->outlier_ratio[k] = ratio;
            s->outlier_col[k] = i;
        }
    }
    free(row);
    free(col_absmax);
    return 0;
}
