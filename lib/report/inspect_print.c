#include "lib/report/inspect_print.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats/ftype.h"
#include "formats/gguf.h"
#include "lib/core/json.h"
#include "lib/report/meta_print.h"
#include "lib/core/progress.h"
#include "formats/quantcfg.h"
#include "formats/tensorset.h"
#include "lib/report/tensorstats.h"
#include "lib/core/threads.h"
#include "kernels/types.h"

typedef struct census_row {
    uint64_t tensors, params, bytes;
} census_row;

static bool want_tensor(const qk_inspect_opts *o, const char *name)
{
    return !o->tensor_glob || fnmatch(o->tensor_glob, name, 0) == 0;
}

/* ---- stats, computed in parallel over tensors, printed in order -------- */
typedef struct stats_job {
    const qk_tensorset *s;
    const uint64_t *idx;
    qk_tstats *st;
    int *rc;
} stats_job;

static void stats_range(void *v, size_t b, size_t e)
{
    stats_job *j = v;
    for (size_t i = b; i < e; i++) {
        qk_err err;
        j->rc[i] = qk_tensor_stats(&j->s->t[j->idx[i]], &j->st[i], &err);
    }
}

static void print_stats_text(FILE *out, const qk_tensor *t, const qk_tstats *s, int rc)
{
    if (rc) {
        fprintf(out, "  %-40s (no decoder for %s)\n", t->name, t->type_name);
        return;
    }
    fprintf(out, "  %-40s %11.4g %11.4g %11.4g %11.4g %11.4g %11.4g %9.3f %5" PRIu64 " %5" PRIu64
                 " %7.4f",
            t->name, s->min, s->max, s->mean, s->std, s->absmax, s->rms, s->kurtosis, s->n_nan,
            s->n_inf, s->n ? (double)s->n_zero / (double)s->n : 0.0);
    for (int k = 0; k < s->n_outliers; k++)
        fprintf(out, " %s%" PRId64 ":%.1f", k ? "" : " ", s->outlier_col[k], s->outlier_ratio[k]);
    fputc('\n', out);
}

static void json_stats(qk_json *j, const qk_tstats *s)
{
    qk_json_key(j, "stats");
    qk_json_obj(j);
    qk_json_key(j, "min"), qk_json_f64(j, s->min);
    qk_json_key(j, "max"), qk_json_f64(j, s->max);
    qk_json_key(j, "mean"), qk_json_f64(j, s->mean);
    qk_json_key(j, "std"), qk_json_f64(j, s->std);
    qk_json_key(j, "absmax"), qk_json_f64(j, s->absmax);
    qk_json_key(j, "rms"), qk_json_f64(j, s->rms);
    qk_json_key(j, "kurtosis"), qk_json_f64(j, s->kurtosis);
    qk_json_key(j, "nan"), qk_json_uint(j, s->n_nan);
    qk_json_key(j, "inf"), qk_json_uint(j, s->n_inf);
    qk_json_key(j, "zero_fraction"), qk_json_f64(j, s->n ? (double)s->n_zero / (double)s->n : 0);
    qk_json_key(j, "outlier_channels");
    qk_json_arr(j);
    for (int k = 0; k < s->n_outliers; k++) {
        qk_json_obj(j);
        qk_json_key(j, "channel"), qk_json_int(j, s->outlier_col[k]);
        qk_json_key(j, "absmax_over_rms"), qk_json_f64(j, s->outlier_ratio[k]);
        qk_json_end_obj(j);
    }
    qk_json_end_arr(j);
    qk_json_end_obj(j);
}

int qk_inspect_run(const char *path, const qk_inspect_opts *o, FILE *out, qk_err *err)
{
    qk_tensorset *s;
    int rc = qk_tensorset_open(&s, path, err);
    if (rc)
        return rc;
    qk_quantcfg *qc = NULL; /* HF quantization_config: a scheme per tensor */
    if (s->kind == QK_SET_SAFETENSORS && (rc = qk_quantcfg_open_hf(&qc, s->st, err))) {
        qk_tensorset_close(s);
        return rc;
    }
    if (qc && qc->method == QK_QM_NONE) {
        qk_quantcfg_free(qc);
        qc = NULL;
    }
    uint64_t *idx = malloc((s->n ? s->n : 1) * sizeof *idx), n = 0;
    census_row census[QK_TYPE_MAX + 1] = {{0}}; /* last: dtypes qk cannot decode */
    if (!idx) {
        qk_tensorset_close(s);
        return qk_errf(err, QK_EIO, "out of memory");
    }
    uint64_t tot_params = 0, tot_bytes = 0;
    for (uint64_t i = 0; i < s->n; i++) {
        const qk_tensor *t = &s->t[i];
        census_row *c = &census[t->type >= 0 ? t->type : QK_TYPE_MAX];
        c->tensors++;
        c->params += t->nelem;
        c->bytes += t->nbytes;
        tot_params += t->nelem;
        tot_bytes += t->nbytes;
        if (want_tensor(o, t->name))
            idx[n++] = i;
    }
    qk_tstats *st = NULL;
    int *st_rc = NULL;
    if (o->stats) {
        st = calloc(n ? n : 1, sizeof *st);
        st_rc = calloc(n ? n : 1, sizeof *st_rc);
        if (!st || !st_rc) {
            rc = qk_errf(err, QK_EIO, "out of memory");
            goto done;
        }
        stats_job j = {.s = s, .idx = idx, .st = st, .rc = st_rc};
        qk_progress pr;
        qk_progress_init(&pr, "stats", n, o->quiet);
        qk_parallel_for(o->threads, n, 1, stats_range, &j);
        qk_progress_add(&pr, n);
        qk_progress_end(&pr);
    }

    qk_json j;
    qk_json_init(&j, out, true);
    if (o->json) {
        qk_json_obj(&j);
        qk_json_key(&j, "file"), qk_json_str(&j, path);
        qk_meta_json(&j, s, o->meta_glob, o->meta_full);
        qk_json_key(&j, "tensors");
        qk_json_arr(&j);
        for (uint64_t k = 0; k < n; k++) {
            const qk_tensor *t = &s->t[idx[k]];
            qk_json_obj(&j);
            qk_json_key(&j, "name"), qk_json_str(&j, t->name);
            qk_json_key(&j, "type"), qk_json_str(&j, t->type_name);
            qk_json_key(&j, "shape");
            qk_json_arr(&j);
            for (int d = 0; d < t->n_dims; d++)
                qk_json_int(&j, t->ne[d]);
            qk_json_end_arr(&j);
            qk_json_key(&j, "offset"), qk_json_uint(&j, t->offset);
            qk_json_key(&j, "bytes"), qk_json_uint(&j, t->nbytes);
            qk_json_key(&j, "file"), qk_json_str(&j, t->file);
            if (qc) {
                qk_qscheme sc;
                qk_quantcfg_scheme_for(qc, t->name, t->n_dims, &sc);
                qk_json_key(&j, "scheme"), qk_json_str(&j, sc.desc);
            }
            if (o->stats && st_rc[k] == 0)
                json_stats(&j, &st[k]);
            qk_json_end_obj(&j);
        }
        qk_json_end_arr(&j);
        qk_json_key(&j, "census");
        qk_json_arr(&j);
    } else {
        qk_meta_text(out, s, o->meta_glob, o->meta_full);
        fprintf(out, "\ntensors (%" PRIu64 "%s):\n", n, o->tensor_glob ? " matching" : "");
        if (qc)
            fprintf(out, "quantization: %s (from %s)\n", qc->desc, qc->source);
        fprintf(out, "  %-40s %-8s %-18s %12s %12s%s\n", "name", "type", "shape", "offset", "bytes",
                qc ? "  scheme" : "");
        for (uint64_t k = 0; k < n; k++) {
            const qk_tensor *t = &s->t[idx[k]];
            char sh[96];
            qk_tensor_shape_str(t, sh, sizeof sh);
            fprintf(out, "  %-40s %-8s %-18s %12" PRIu64 " %12" PRIu64, t->name, t->type_name, sh,
                    t->offset, t->nbytes);
            if (qc) {
                qk_qscheme sc;
                qk_quantcfg_scheme_for(qc, t->name, t->n_dims, &sc);
                fprintf(out, "  %s", sc.desc);
            }
            fputc('\n', out);
        }
        if (o->stats) {
            fprintf(out, "\nstats (kurtosis: Pearson, 3 for a Gaussian; outliers: channel:absmax/rms):\n");
            fprintf(out, "  %-40s %11s %11s %11s %11s %11s %11s %9s %5s %5s %7s  %s\n", "name", "min",
                    "max", "mean", "std", "absmax", "rms", "kurtosis", "nan", "inf", "zeros",
                    "outlier channels");
            for (uint64_t k = 0; k < n; k++)
                print_stats_text(out, &s->t[idx[k]], &st[k], st_rc[k]);
        }
        fprintf(out, "\ncensus:\n  %-9s %8s %14s %14s %7s %8s\n", "type", "tensors", "params",
                "bytes", "share", "bpw");
    }
    for (int id = 0; id <= QK_TYPE_MAX; id++) { /* id order; QK_TYPE_MAX: "other", last */
        const census_row *c = &census[id];
        if (!c->tensors)
            continue; /* also skips ids without a row: no tensor can have them */
        const char *tname = id < QK_TYPE_MAX ? qk_type_get(id)->name : "other";
        double share = s->file_bytes ? 100.0 * (double)c->bytes / (double)s->file_bytes : 0;
        double bpw = c->params ? 8.0 * (double)c->bytes / (double)c->params : 0;
        if (o->json) {
            qk_json_obj(&j);
            qk_json_key(&j, "type"), qk_json_str(&j, tname);
            qk_json_key(&j, "tensors"), qk_json_uint(&j, c->tensors);
            qk_json_key(&j, "params"), qk_json_uint(&j, c->params);
            qk_json_key(&j, "bytes"), qk_json_uint(&j, c->bytes);
            qk_json_key(&j, "share_of_file"), qk_json_f64(&j, share / 100);
            qk_json_key(&j, "bpw"), qk_json_f64(&j, bpw);
            qk_json_end_obj(&j);
        } else {
            fprintf(out, "  %-9s %8" PRIu64 " %14" PRIu64 " %14" PRIu64 " %6.2f%% %8.4f\n",
                    tname, c->tensors, c->params, c->bytes, share, bpw);
        }
    }
    double bpw = tot_params ? 8.0 * (double)tot_bytes / (double)tot_params : 0;
    if (o->json) {
        qk_json_end_arr(&j);
        qk_json_key(&j, "total");
        qk_json_obj(&j);
        qk_json_key(&j, "tensors"), qk_json_uint(&j, s->n);
        qk_json_key(&j, "params"), qk_json_uint(&j, tot_params);
        qk_json_key(&j, "bytes"), qk_json_uint(&j, tot_bytes);
        qk_json_key(&j, "file_bytes"), qk_json_uint(&j, s->file_bytes);
        qk_json_key(&j, "bpw"), qk_json_f64(&j, bpw);
        qk_json_end_obj(&j);
        qk_json_end_obj(&j);
        qk_json_done(&j);
    } else {
        fprintf(out, "  %-9s %8" PRIu64 " %14" PRIu64 " %14" PRIu64 " %6.2f%% %8.4f\n", "total", s->n,
                tot_params, tot_bytes,
                s->file_bytes ? 100.0 * (double)tot_bytes / (double)s->file_bytes : 0.0, bpw);
    }
done:
    qk_quantcfg_free(qc);
    free(idx);
    free(st);
    free(st_rc);
    qk_tensorset_close(s);
    return rc;
}
