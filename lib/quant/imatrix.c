/* imatrix.c - read llama-imatrix's GGUF and legacy .dat importance matrices
 * (see imatrix.h for the formats and the normalization). */
#include "lib/quant/imatrix.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/ckd.h"
#include "formats/gguf.h"
#include "lib/core/mapfile.h"
#include "kernels/types.h"

static int oom(qk_err *err, const char *path)
{
    return qk_errf(err, QK_EIO, "%s: out of memory", path);
}

void qk_imatrix_free(qk_imatrix *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++) {
        free(m->e[i].name);
        free(m->e[i].values);
        free(m->e[i].sums);
        free(m->e[i].counts);
    }
    for (size_t i = 0; i < m->n_datasets; i++)
        free(m->datasets[i]);
    free(m->e);
    free(m->datasets);
    free(m);
}

static int cmp_entry(const void *a, const void *b)
{
    const qk_imatrix_entry *x = a, *y = b;
    return strcmp(x->name, y->name);
}

const qk_imatrix_entry *qk_imatrix_find(const qk_imatrix *m, const char *name)
{
    if (!m || m->n == 0)
        return NULL;
    qk_imatrix_entry key = {.name = (char *)name};
    return bsearch(&key, m->e, m->n, sizeof *m->e, cmp_entry);
}

static void entry_free(qk_imatrix_entry *e)
{
    free(e->name);
    free(e->values);
    free(e->sums);
    free(e->counts);
}

/* Append an entry that owns its arrays (freed here on failure). */
static int add_entry(qk_imatrix *m, size_t *cap, qk_imatrix_entry e, const char *path, qk_err *err)
{
    if (!e.name || !e.values || !e.sums || !e.counts) {
        entry_free(&e);
        return oom(err, path);
    }
    if (m->n == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        qk_imatrix_entry *v = realloc(m->e, nc * sizeof *v);
        if (!v) {
            entry_free(&e);
            return oom(err, path);
        }
        m->e = v;
        *cap = nc;
    }
    m->e[m->n++] = e;
    return QK_OK;
}

static int add_dataset(qk_imatrix *m, const char *s, size_t len, const char *path, qk_err *err)
{
    char **d = realloc(m->datasets, (m->n_datasets + 1) * sizeof *d);
    if (!d)
        return oom(err, path);
    m->datasets = d;
    char *c = strndup(s, len);
    if (!c)
        return oom(err, path);
    m->datasets[m->n_datasets++] = c;
    return QK_OK;
}

/* Sort by name; for repeated names (legacy files) the later entry wins, as
 * std::map's operator[] in the loader does.  qsort is not stable, so the
 * file position breaks ties. */
typedef struct { qk_imatrix_entry e; size_t pos; } ranked;

static int cmp_ranked(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    int c = strcmp(x->e.name, y->e.name);
    return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

static int sort_unique(qk_imatrix *m, const char *path, qk_err *err)
{
    if (m->n < 2)
        return QK_OK;
    ranked *r = malloc(m->n * sizeof *r);
    if (!r)
        return oom(err, path);
    for (size_t i = 0; i < m->n; i++)
        r[i] = (ranked){m->e[i], i};
    qsort(r, m->n, sizeof *r, cmp_ranked);
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++) {
        if (i + 1 < m->n && strcmp(r[i].e.name, r[i + 1].e.name) == 0) {
            entry_free(&r[i].e);
            continue;
        }
        m->e[k++] = r[i].e;
    }
    m->n = k;
    free(r);
    return QK_OK;
}

/* ---- legacy .dat ------------------------------------------------------------ */

typedef struct { const uint8_t *p; size_t n, off; } cursor;

static bool get_i32(cursor *c, int32_t *v)
{
    if (c->n - c->off < 4)
        return false;
    memcpy(v, c->p + c->off, 4);
    c->off += 4;
    return true;
}

static int load_legacy(qk_imatrix *m, const uint8_t *data, size_t size, const char *path, qk_err *err)
{
    cursor c = {data, size, 0};
    size_t cap = 0;
    int32_t n_entries;
    if (!get_i32(&c, &n_entries) || n_entries < 1)
        return qk_err_at(err, path, "entry count", 0, "no importance data (not a GGUF or legacy imatrix file)");
    for (int32_t i = 0; i < n_entries; i++) {
        size_t at = c.off;
        int32_t len, ncall, nval;
        if (!get_i32(&c, &len) || len < 0 || (size_t)len > c.n - c.off)
            return qk_err_at(err, path, "entry name", at,
                             "entry %d: truncated or negative name length (not an importance matrix?)", i + 1);
        const char *name = (const char *)c.p + c.off;
        c.off += (size_t)len;
        at = c.off;
        if (!get_i32(&c, &ncall) || !get_i32(&c, &nval) || nval < 1)
            return qk_err_at(err, path, "value count", at,
                             "entry %d: truncated or no values (not an importance matrix?)", i + 1);
        uint64_t bytes;
        if (qk_ckd_mul(&bytes, (uint64_t)nval, 4) || bytes > c.n - c.off)
            return qk_err_at(err, path, "values", c.off, "entry %d: %d values run past the end of the file",
                             i + 1, nval);
        qk_imatrix_entry e = {.n = (uint64_t)nval, .n_counts = 1, .values = malloc(bytes),
                              .sums = malloc(bytes), .counts = malloc(sizeof *e.counts)};
        if (e.values && e.sums && e.counts) {
            memcpy(e.sums, c.p + c.off, bytes);
            e.counts[0] = ncall;
            /* quantize.cpp: sums hold (raw / count) * ncall; divide by ncall */
            for (int32_t k = 0; k < nval; k++)
                e.values[k] = ncall > 0 ? e.sums[k] / (float)ncall : e.sums[k];
        }
        c.off += bytes;
        /* the name ends at its first NUL, as std::string{char *} makes it */
        e.name = strndup(name, (size_t)len);
        int rc = add_entry(m, &cap, e, path, err);
        if (rc)
            return rc;
    }
    /* optional trailer: chunk count, dataset name */
    int32_t n_calls, len;
    if (get_i32(&c, &n_calls)) {
        m->chunk_count = n_calls;
        if (get_i32(&c, &len) && len > 0 && (size_t)len <= c.n - c.off) {
            int rc = add_dataset(m, (const char *)c.p + c.off, (size_t)len, path, err);
            if (rc)
                return rc;
        }
    }
    m->legacy = true;
    return sort_unique(m, path, err);
}

/* ---- GGUF ---------------------------------------------------------------------- */

static bool strip_suffix(qk_str name, const char *suffix, size_t *base_len)
{
    size_t n = strlen(suffix);
    if (name.len < n || memcmp(name.ptr + name.len - n, suffix, n) != 0)
        return false;
    *base_len = (size_t)name.len - n;
    return true;
}

static int cmp_tensor_ptr(const void *a, const void *b)
{
    const qk_gguf_tensor *x = *(const qk_gguf_tensor *const *)a, *y = *(const qk_gguf_tensor *const *)b;
    size_t n = x->name.len < y->name.len ? (size_t)x->name.len : (size_t)y->name.len;
    int c = memcmp(x->name.ptr, y->name.ptr, n);
    return c ? c : (x->name.len > y->name.len) - (x->name.len < y->name.len);
}

/* Find "<base>.counts" among the tensors sorted by name. */
static const qk_gguf_tensor *find_counts(const qk_gguf_tensor **sorted, size_t n, const char *base,
                                         size_t blen)
{
    char want[300];
    if (blen + 8 > sizeof want)
        return NULL;
    memcpy(want, base, blen);
    memcpy(want + blen, ".counts", 8);
    qk_gguf_tensor key = {.name = {want, blen + 7}};
    const qk_gguf_tensor *kp = &key;
    const qk_gguf_tensor **hit = bsearch(&kp, sorted, n, sizeof *sorted, cmp_tensor_ptr);
    return hit ? *hit : NULL;
}

static uint64_t n_elements(const qk_gguf_tensor *t)
{
    return (uint64_t)t->ne[0] * (uint64_t)t->ne[1] * (uint64_t)t->ne[2] * (uint64_t)t->ne[3];
}

static int gguf_entry(qk_imatrix *m, size_t *cap, const qk_gguf_tensor *sums, const qk_gguf_tensor *counts,
                      size_t blen, const char *path, qk_err *err)
{
    const char *base = sums->name.ptr;
    if (sums->type != QK_F32 || counts->type != QK_F32)
        return qk_err_at(err, path, "tensor type", sums->info_offset, "%.*s: in_sum2 and counts must be f32",
                         (int)blen, base);
    uint64_t nval = n_elements(sums), ncounts = n_elements(counts);
    if (nval == 0 || ncounts == 0 || nval % ncounts)
        return qk_err_at(err, path, "tensor shape", sums->info_offset,
                         "%.*s: %llu sums do not split into %llu experts", (int)blen, base,
                         (unsigned long long)nval, (unsigned long long)ncounts);
    if (nval > SIZE_MAX / sizeof(float) || ncounts > SIZE_MAX / sizeof(int64_t))
        return oom(err, path);
    qk_imatrix_entry e = {.n = nval, .n_counts = ncounts, .values = malloc((size_t)nval * sizeof(float)),
                          .sums = malloc((size_t)nval * sizeof(float)),
                          .counts = malloc((size_t)ncounts * sizeof(int64_t))};
    if (e.values && e.sums && e.counts) {
        uint64_t ne0 = nval / ncounts;
        memcpy(e.sums, sums->data, (size_t)nval * sizeof(float));
        const float *cn = (const float *)counts->data;
        for (uint64_t j = 0; j < ncounts; j++) {
            float cj;
            memcpy(&cj, cn + j, 4);
            /* the loader rounds each count to an integer (std::lround), quantize.cpp divides by it */
            e.counts[j] = isfinite(cj) && fabsf(cj) < 9e18f ? (int64_t)llroundf(cj) : 0;
            const float count = (float)e.counts[j];
            for (uint64_t i = 0; i < ne0; i++)
                e.values[j * ne0 + i] = count > 0.0f ? e.sums[j * ne0 + i] / count : 1.0f;
        }
    }
    e.name = strndup(base, blen);
    return add_entry(m, cap, e, path, err);
}

static int load_gguf(qk_imatrix *m, const void *buf, size_t size, const char *path, qk_err *err)
{
    qk_gguf *g;
    int rc = qk_gguf_open_mem(&g, buf, size, path, err);
    if (rc)
        return rc;
    const qk_gguf_tensor **sorted = NULL;
    size_t cap = 0;
    if (g->n_tensors < 1) {
        rc = qk_err_at(err, path, "tensor count", 0, "no importance data");
        goto done;
    }
    const qk_gguf_kv *ds = qk_gguf_find(g, "imatrix.datasets");
    const qk_gguf_kv *cc = qk_gguf_find(g, "imatrix.chunk_count");
    const qk_gguf_kv *cs = qk_gguf_find(g, "imatrix.chunk_size");
    m->has_metadata = ds && cc && cs;
    for (int k = 0; k < 2; k++) {
        const qk_gguf_kv *kv = k ? cs : cc;
        if (kv && kv->v.type != QK_GGUF_U32) {
            rc = qk_err_at(err, path, k ? "imatrix.chunk_size" : "imatrix.chunk_count", kv->offset,
                           "must be u32, is %s", qk_gguf_vtype_name(kv->v.type));
            goto done;
        }
    }
    m->chunk_count = cc ? (int32_t)(uint32_t)cc->v.u : 0;
    m->chunk_size = cs ? (int32_t)(uint32_t)cs->v.u : 0;
    if (ds && ds->v.type == QK_GGUF_ARRAY && ds->v.arr.elem == QK_GGUF_STRING)
        for (uint64_t i = 0; i < ds->v.arr.n && !rc; i++)
            rc = add_dataset(m, ds->v.arr.items[i].s.ptr, (size_t)ds->v.arr.items[i].s.len, path, err);
    if (rc)
        goto done;

    sorted = malloc((size_t)g->n_tensors * sizeof *sorted);
    if (!sorted) {
        rc = oom(err, path);
        goto done;
    }
    for (uint64_t i = 0; i < g->n_tensors; i++)
        sorted[i] = &g->tensors[i];
    qsort(sorted, (size_t)g->n_tensors, sizeof *sorted, cmp_tensor_ptr);
    for (uint64_t i = 0; i < g->n_tensors && !rc; i++) {
        const qk_gguf_tensor *t = &g->tensors[i];
        size_t blen;
        if (t->name.len == 0)
            continue;
        if (strip_suffix(t->name, ".in_sum2", &blen)) {
            const qk_gguf_tensor *c = find_counts(sorted, (size_t)g->n_tensors, t->name.ptr, blen);
            if (!c)
                rc = qk_err_at(err, path, "tensor", t->info_offset, "%.*s has sums but no counts",
                               (int)blen, t->name.ptr);
            else
                rc = gguf_entry(m, &cap, t, c, blen, path, err);
        } else if (strip_suffix(t->name, ".counts", &blen)) {
            char want[300];
            if (blen + 9 <= sizeof want) {
                memcpy(want, t->name.ptr, blen);
                memcpy(want + blen, ".in_sum2", 9);
                if (!qk_gguf_find_tensor(g, want))
                    rc = qk_err_at(err, path, "tensor", t->info_offset, "%.*s has counts but no sums",
                                   (int)blen, t->name.ptr);
            }
        }
    }
    if (!rc)
        rc = sort_unique(m, path, err);
done:
    free(sorted);
    qk_gguf_close(g);
    return rc;
}

int qk_imatrix_parse(qk_imatrix **out, const void *buf, size_t size, const char *name, qk_err *err)
{
    *out = NULL;
    qk_imatrix *m = calloc(1, sizeof *m);
    if (!m)
        return oom(err, name);
    bool is_gguf = size >= 4 && memcmp(buf, "GGUF", 4) == 0;
    int rc = is_gguf ? load_gguf(m, buf, size, name, err) : load_legacy(m, buf, size, name, err);
    if (!rc && m->n == 0)
        rc = qk_err_at(err, name, "tensors", 0, "no importance data (no NAME.in_sum2 / NAME.counts pairs: not an imatrix file?)");
    if (rc) {
        qk_imatrix_free(m);
        return rc;
    }
    *out = m;
    return QK_OK;
}

int qk_imatrix_read(qk_imatrix **out, const char *path, qk_err *err)
{
    *out = NULL;
    qk_map map;
    int rc = qk_map_open(&map, path, err);
    if (rc)
        return rc;
    rc = qk_imatrix_parse(out, map.data, map.size, path, err);
    qk_map_close(&map);
    return rc;
}

int qk_imatrix_load(qk_imatrix **out, const char *path, qk_err *err)
{
    int rc = qk_imatrix_read(out, path, err);
    if (rc || (*out)->legacy || (*out)->has_metadata)
        return rc;
    qk_imatrix_free(*out);
    *out = NULL;
    return qk_err_at(err, path, "imatrix.datasets", 0,
                     "missing imatrix metadata (not an importance matrix from llama-imatrix?)");
}

static bool contains_any(const char *s, const char *const *subs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strstr(s, subs[i]))
            return true;
    return false;
}

void qk_imatrix_filter(qk_imatrix *m, const char *const *include, size_t n_include,
                       const char *const *exclude, size_t n_exclude)
{
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++) {
        bool keep = !contains_any(m->e[i].name, exclude, n_exclude) &&
                    (n_include == 0 || contains_any(m->e[i].name, include, n_include));
        if (keep) {
            m->e[k++] = m->e[i];
        } else {
            entry_free(&m->e[i]);
        }
    }
    m->n = k;
}
