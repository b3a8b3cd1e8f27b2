/* imatrix_stats.c - llama-imatrix's statistics: collect, combine, save
 * (see imatrix_stats.h). */
#include "lib/quant/imatrix_stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "kernels/types.h"
#include "lib/core/outfile.h"
#include "lib/core/threads.h"

static int oom(qk_err *err) { return qk_errf(err, QK_EIO, "out of memory (importance statistics)"); }

void qk_imx_init(qk_imx *s, int32_t chunk_size)
{
    memset(s, 0, sizeof *s);
    s->chunk_size = chunk_size > 0 ? chunk_size : 1;
}

void qk_imx_free(qk_imx *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->e[i].name);
        free(s->e[i].values);
        free(s->e[i].counts);
    }
    for (size_t i = 0; i < s->n_datasets; i++)
        free(s->datasets[i]);
    free(s->e);
    free(s->datasets);
    memset(s, 0, sizeof *s);
}

long qk_imx_entry_index(qk_imx *s, const char *name, size_t len, qk_err *err)
{
    for (size_t i = 0; i < s->n; i++)
        if (strlen(s->e[i].name) == len && !memcmp(s->e[i].name, name, len))
            return (long)i;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        qk_imx_entry *e = realloc(s->e, cap * sizeof *e);
        if (!e) {
            oom(err);
            return -1;
        }
        s->e = e;
        s->cap = cap;
    }
    char *nm = strndup(name, len);
    if (!nm) {
        oom(err);
        return -1;
    }
    s->e[s->n] = (qk_imx_entry){.name = nm};
    return (long)s->n++;
}

/* Resize an entry's arrays to nv values and nc counts, new elements zero
 * (counts: fill). */
static int resize(qk_imx_entry *e, int64_t nv, int64_t nc, int64_t fill, qk_err *err)
{
    if (nv != e->n_values) {
        float *v = realloc(e->values, (size_t)(nv ? nv : 1) * sizeof *v);
        if (!v)
            return oom(err);
        for (int64_t i = e->n_values; i < nv; i++)
            v[i] = 0.0f;
        e->values = v;
        e->n_values = nv;
    }
    if (nc != e->n_counts) {
        int64_t *c = realloc(e->counts, (size_t)(nc ? nc : 1) * sizeof *c);
        if (!c)
            return oom(err);
        for (int64_t i = e->n_counts; i < nc; i++)
            c[i] = fill;
        e->counts = c;
        e->n_counts = nc;
    }
    return 0;
}

/* ---- collect ------------------------------------------------------------------ */

typedef struct {
    float *v;
    const float *x;
    int64_t rows, ne0;
} sq_job;

#define SQ_COLS 64 /* columns summed at once, in registers (a multiple of the vector width) */

/* values[j] += x[r][j] * x[r][j] for rows r in order (float, as llama's
 * loop), SQ_COLS columns at a time into a local block the compiler keeps in
 * vector registers (each column's sum sees the rows in order). */
static void sq_cols(void *ctx, size_t b, size_t e)
{
    const sq_job *j = ctx;
    size_t c0 = b;
    for (; c0 + SQ_COLS <= e; c0 += SQ_COLS) {
        float acc[SQ_COLS];
        memcpy(acc, j->v + c0, sizeof acc);
        for (int64_t r = 0; r < j->rows; r++) {
            const float *x = j->x + (size_t)r * (size_t)j->ne0 + c0;
            for (int c = 0; c < SQ_COLS; c++)
                acc[c] = acc[c] + x[c] * x[c];
        }
        memcpy(j->v + c0, acc, sizeof acc);
    }
    for (int64_t r = 0; r < j->rows && c0 < e; r++) {
        const float *x = j->x + (size_t)r * (size_t)j->ne0;
        for (size_t c = c0; c < e; c++)
            j->v[c] = j->v[c] + x[c] * x[c];
    }
}

int qk_imx_add(qk_imx *s, long idx, const float *x, int64_t n_rows, int64_t ne0, int nthreads,
               qk_err *err)
{
    qk_imx_entry *e = &s->e[idx];
    /* a single count per dense tensor (counts merged from 3-D files, when equal) */
    bool equal = true;
    for (int64_t i = 1; i < e->n_counts; i++)
        equal = equal && e->counts[i] == e->counts[0];
    if (e->n_counts > 1 && equal)
        e->n_counts = 1;
    if (e->n_values == 0) {
        if (resize(e, ne0, 1, 0, err))
            return err->code;
    } else if (e->n_values != ne0) {
        return qk_errf(err, QK_EINPUT, "%s: inconsistent size (%lld sums, the product has %lld columns)",
                       e->name, (long long)e->n_values, (long long)ne0);
    }
    sq_job j = {.v = e->values, .x = x, .rows = n_rows, .ne0 = ne0};
    qk_parallel_for(nthreads, (size_t)ne0, SQ_COLS, sq_cols, &j);
    for (int64_t c = 0; c < ne0; c++)
        if (!isfinite(e->values[c]))
            return qk_errf(err, QK_EINPUT, "%s: the sum of squared inputs of column %lld is %f",
                           e->name, (long long)c, (double)e->values[c]);
    for (int64_t i = 0; i < e->n_counts; i++)
        e->counts[i] += n_rows;
    return 0;
}

int qk_imx_add_expert(qk_imx *s, long idx, int expert, int n_expert, const float *x, int64_t n_rows,
                      int64_t ne0, int nthreads, qk_err *err)
{
    qk_imx_entry *e = &s->e[idx];
    const int64_t nv = ne0 * n_expert;
    if (e->n_counts == 1 && n_expert > 1 && resize(e, e->n_values, n_expert, e->counts[0], err))
        return err->code; /* broadcast, as for an old imatrix */
    if (e->n_values == 0) {
        if (resize(e, nv, n_expert, 0, err))
            return err->code;
    } else if (e->n_values != nv) {
        return qk_errf(err, QK_EINPUT, "%s: inconsistent size (%lld sums, the experts have %lld x %d)",
                       e->name, (long long)e->n_values, (long long)ne0, n_expert);
    } else if (e->n_counts != n_expert) {
        return qk_errf(err, QK_EINPUT, "%s: inconsistent expert count (%lld counts, the model has %d)",
                       e->name, (long long)e->n_counts, n_expert);
    }
    float *v = e->values + (size_t)expert * (size_t)ne0;
    sq_job j = {.v = v, .x = x, .rows = n_rows, .ne0 = ne0};
    qk_parallel_for(nthreads, (size_t)ne0, SQ_COLS, sq_cols, &j);
    for (int64_t c = 0; c < ne0; c++)
        if (!isfinite(v[c]))
            return qk_errf(err, QK_EINPUT, "%s: the sum of squared inputs of expert %d column %lld is %f",
                           e->name, expert, (long long)c, (double)v[c]);
    e->counts[expert] += n_rows;
    return 0;
}

int32_t qk_imx_chunks(const qk_imx *s)
{
    int64_t mx = 0;
    for (size_t i = 0; i < s->n; i++)
        for (int64_t k = 0; k < s->e[i].n_counts; k++)
            if (s->e[i].counts[k] > mx)
                mx = s->e[i].counts[k];
    return (int32_t)(mx / s->chunk_size);
}

/* ---- combine (--in-file) ---------------------------------------------------------- */

static int add_dataset(qk_imx *s, const char *d, qk_err *err)
{
    char **v = realloc(s->datasets, (s->n_datasets + 1) * sizeof *v);
    if (!v)
        return oom(err);
    s->datasets = v;
    if (!(v[s->n_datasets] = strdup(d)))
        return oom(err);
    s->n_datasets++;
    return 0;
}

int qk_imx_combine(qk_imx *s, const qk_imatrix *m, const char *path, qk_err *err)
{
    for (size_t i = 0; i < m->n; i++) {
        const qk_imatrix_entry *in = &m->e[i];
        long k = qk_imx_entry_index(s, in->name, strlen(in->name), err);
        if (k < 0)
            return err->code;
        qk_imx_entry *e = &s->e[k];
        const int64_t nval = (int64_t)in->n, ncounts = (int64_t)in->n_counts;
        if (e->n_values && e->n_values != nval)
            return qk_errf(err, QK_EINPUT, "%s: %s: %lld sums, the matrices before have %lld", path,
                           in->name, (long long)nval, (long long)e->n_values);
        if (m->legacy) {
            /* stored: (sum / count) * ncall with counts {ncall}: back to sums over chunk_size rows */
            if (!e->n_values && resize(e, nval, 1, 0, err))
                return err->code;
            for (int64_t j = 0; j < nval; j++)
                e->values[j] += in->sums[j] * (float)s->chunk_size;
            for (int64_t j = 0; j < e->n_counts; j++)
                e->counts[j] += in->counts[0] * s->chunk_size;
            continue;
        }
        if (!e->n_values && resize(e, nval, e->n_counts, 0, err))
            return err->code;
        if (e->n_counts == 0) {
            if (resize(e, nval, ncounts, 0, err))
                return err->code;
        } else if (e->n_counts == 1 && ncounts > 1) {
            if (resize(e, nval, ncounts, e->counts[0], err))
                return err->code;
        } else if (e->n_counts != ncounts) {
            return qk_errf(err, QK_EINPUT, "%s: %s: %lld counts, the matrices before have %lld", path,
                           in->name, (long long)ncounts, (long long)e->n_counts);
        }
        for (int64_t j = 0; j < nval; j++)
            e->values[j] += in->sums[j];
        for (int64_t j = 0; j < ncounts; j++)
            e->counts[j] += in->counts[j];
    }
    for (size_t i = 0; i < m->n_datasets; i++)
        if (add_dataset(s, m->datasets[i], err))
            return err->code;
    s->last_chunk = qk_imx_chunks(s);
    return 0;
}

/* ---- save ------------------------------------------------------------------------- */

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const qk_imx_entry *const *)a)->name, (*(const qk_imx_entry *const *)b)->name);
}

/* The entries sorted by name (std::sort of the names); NULL when out of memory. */
static const qk_imx_entry **sorted(const qk_imx *s)
{
    const qk_imx_entry **v = malloc((s->n ? s->n : 1) * sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < s->n; i++)
        v[i] = &s->e[i];
    qsort(v, s->n, sizeof *v, cmp_name);
    return v;
}

static int save_gguf(const qk_imx *s, const qk_imx_entry **e, const char *path, const char *prompt,
                     qk_err *err)
{
    qk_gguf_writer *w = qk_gguf_writer_new(3);
    const char **ds = malloc((s->n_datasets + 1) * sizeof *ds);
    float *cnt = NULL;
    int rc = 0;
    if (!w || !ds) {
        rc = oom(err);
        goto done;
    }
    size_t nd = 0, maxc = 1;
    for (size_t i = 0; i < s->n_datasets; i++)
        ds[nd++] = s->datasets[i];
    if (prompt && *prompt)
        ds[nd++] = prompt;
    if ((rc = qk_gguf_w_kv_str(w, "general.type", "imatrix", err)) ||
        (rc = qk_gguf_w_kv_arr_str(w, "imatrix.datasets", ds, nd, err)) ||
        (rc = qk_gguf_w_kv_u32(w, "imatrix.chunk_count", (uint32_t)s->last_chunk, err)) ||
        (rc = qk_gguf_w_kv_u32(w, "imatrix.chunk_size", (uint32_t)s->chunk_size, err)))
        goto done;
    for (size_t i = 0; i < s->n && !rc; i++) {
        const int64_t nv = e[i]->n_values, nm = e[i]->n_counts;
        if (nv <= 0 || nm <= 0)
            continue;
        char name[160];
        /* 2-D tensors [ne0, n_mat] and [1, n_mat]: one dimension when n_mat is 1 */
        const int64_t ne_s[2] = {nv / nm, nm}, ne_c[2] = {1, nm};
        snprintf(name, sizeof name, "%s.in_sum2", e[i]->name);
        rc = qk_gguf_w_tensor(w, name, QK_F32, nm > 1 ? 2 : 1, ne_s, err);
        snprintf(name, sizeof name, "%s.counts", e[i]->name);
        if (!rc)
            rc = qk_gguf_w_tensor(w, name, QK_F32, nm > 1 ? 2 : 1, ne_c, err);
        if ((size_t)nm > maxc)
            maxc = (size_t)nm;
    }
    if (rc || (rc = qk_gguf_w_begin(w, path, err)))
        goto done;
    if (!(cnt = malloc(maxc * sizeof *cnt))) {
        rc = oom(err);
        goto done;
    }
    for (size_t i = 0; i < s->n && !rc; i++) {
        const int64_t nv = e[i]->n_values, nm = e[i]->n_counts;
        if (nv <= 0 || nm <= 0)
            continue;
        for (int64_t k = 0; k < nm; k++)
            cnt[k] = (float)e[i]->counts[k];
        if (!(rc = qk_gguf_w_data(w, e[i]->values, (size_t)nv * sizeof(float), err)) &&
            !(rc = qk_gguf_w_end_tensor(w, err)) &&
            !(rc = qk_gguf_w_data(w, cnt, (size_t)nm * sizeof(float), err)))
            rc = qk_gguf_w_end_tensor(w, err);
    }
    if (!rc)
        rc = qk_gguf_writer_finish(w, err);
done:
    qk_gguf_writer_free(w);
    free(ds);
    free(cnt);
    return rc;
}

static int put_i32(qk_out *o, int32_t v, qk_err *err) { return qk_out_write(o, &v, 4, err); }

static int save_legacy(const qk_imx *s, const qk_imx_entry **e, const char *path, const char *prompt,
                       qk_err *err)
{
    /* entries whose counts are all zero have no data and are left out */
    int32_t n_entries = 0;
    for (size_t i = 0; i < s->n; i++) {
        int64_t nz = 0;
        for (int64_t k = 0; k < e[i]->n_counts; k++)
            nz += e[i]->counts[k] == 0;
        n_entries += e[i]->n_counts > 0 && nz < e[i]->n_counts;
    }
    qk_out o = {0};
    float *tmp = NULL;
    int rc = qk_out_open(&o, path, err);
    if (!rc)
        rc = put_i32(&o, n_entries, err);
    for (size_t i = 0; i < s->n && !rc; i++) {
        const qk_imx_entry *x = e[i];
        int64_t nz = 0, mx = 0;
        for (int64_t k = 0; k < x->n_counts; k++) {
            nz += x->counts[k] == 0;
            mx = x->counts[k] > mx ? x->counts[k] : mx;
        }
        if (x->n_counts == 0 || nz == x->n_counts)
            continue;
        const int32_t len = (int32_t)strlen(x->name), nval = (int32_t)x->n_values;
        const int32_t nmat = (int32_t)x->n_counts;
        /* ceiling division to avoid accidental zeros */
        const int32_t ncall = (int32_t)((mx + (s->chunk_size - 1)) / s->chunk_size);
        if ((rc = put_i32(&o, len, err)) || (rc = qk_out_write(&o, x->name, (size_t)len, err)) ||
            (rc = put_i32(&o, ncall, err)) || (rc = put_i32(&o, nval, err)))
            break;
        if (nval <= 0)
            continue;
        float *t = realloc(tmp, (size_t)nval * sizeof *t);
        if (!t) {
            rc = oom(err);
            break;
        }
        tmp = t;
        for (int32_t k = 0; k < nval; k++) {
            float count = (float)x->counts[k / (nval / nmat)], value = x->values[k];
            if (count == 0.0f) /* partial data: 1 */
                value = count = 1.0f;
            tmp[k] = (value / count) * (float)ncall;
        }
        rc = qk_out_write(&o, tmp, (size_t)nval * sizeof *tmp, err);
    }
    /* the chunk count, then the dataset: the prompt file, else the last loaded one */
    const char *ds = prompt && *prompt ? prompt : s->n_datasets ? s->datasets[s->n_datasets - 1] : "";
    if (!rc && !(rc = put_i32(&o, s->last_chunk, err)) &&
        !(rc = put_i32(&o, (int32_t)strlen(ds), err)) &&
        !(rc = qk_out_write(&o, ds, strlen(ds), err)))
        rc = qk_out_commit(&o, err);
    if (rc)
        qk_out_abort(&o);
    free(tmp);
    return rc;
}

int qk_imx_save(const qk_imx *s, const char *path, bool legacy, const char *prompt_file, qk_err *err)
{
    const qk_imx_entry **e = sorted(s);
    if (!e)
        return oom(err);
    int rc = legacy ? save_legacy(s, e, path, prompt_file, err) : save_gguf(s, e, path, prompt_file, err);
    free(e);
    return rc;
}
