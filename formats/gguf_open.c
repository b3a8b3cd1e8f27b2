/* gguf_open.c - opening GGUF files and split sets (gguf-split's
 * NAME-0000i-of-0000n.gguf with split.no / split.count / split.tensors.count,
 * llama.cpp's llama_split_prefix), and the metadata look-ups of gguf.h.
 * Parsing one file is gguf_read.c's. */
#include "formats/gguf.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/gguf_parse.h"
#include "lib/core/ckd.h"

/* ---- opening ------------------------------------------------------------ */

void qk_gguf_close(qk_gguf *g)
{
    if (!g)
        return;
    qk_gguf_free_kvs(g->kv, g->n_kv);
    free(g->tensors);
    for (int i = 0; i < g->n_shards; i++) {
        if (g->maps && !g->borrowed)
            qk_map_close(&g->maps[i]);
        if (g->shard_paths)
            free(g->shard_paths[i]);
    }
    free(g->maps);
    free(g->shard_paths);
    free(g->path);
    free(g);
}

/* A new qk_gguf for n shards, maps closed (fd -1), paths NULL. */
static qk_gguf *alloc_gguf(int n)
{
    qk_gguf *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->maps = calloc((size_t)n, sizeof *g->maps);
    g->shard_paths = calloc((size_t)n, sizeof *g->shard_paths);
    if (!g->maps || !g->shard_paths) {
        qk_gguf_close(g);
        return NULL;
    }
    g->n_shards = n;
    for (int i = 0; i < n; i++)
        g->maps[i].fd = -1;
    return g;
}

/* Moves the first file's parse into g. */
static void adopt_first(qk_gguf *g, qk_gguf_parsed *ps)
{
    g->version = ps->version;
    g->n_kv = ps->n_kv;
    g->kv = ps->kv;
    g->n_tensors = ps->n_tensors;
    g->tensors = ps->tensors;
    g->alignment = ps->alignment;
    g->data_offset = ps->data_offset;
    g->file_size = g->maps[0].size;
    g->total_size = g->maps[0].size;
    ps->kv = NULL;
    ps->n_kv = 0;
    ps->tensors = NULL;
    ps->n_tensors = 0;
}

int qk_gguf_open_mem(qk_gguf **out, const void *buf, size_t size, const char *name, qk_err *err)
{
    *out = NULL;
    qk_gguf *g = alloc_gguf(1);
    if (!g)
        return qk_errf(err, QK_EIO, "%s: out of memory", name);
    g->borrowed = true;
    g->maps[0].data = size ? buf : NULL;
    g->maps[0].size = size;
    g->path = strdup(name);
    g->shard_paths[0] = strdup(name);
    if (!g->path || !g->shard_paths[0]) {
        qk_gguf_close(g);
        return qk_errf(err, QK_EIO, "%s: out of memory", name);
    }
    qk_gguf_parsed ps;
    int rc = qk_gguf_parse_file(g->maps[0].data, size, name, 0, &ps, err);
    if (rc) {
        qk_gguf_parsed_free(&ps);
        qk_gguf_close(g);
        return rc;
    }
    adopt_first(g, &ps);
    *out = g;
    return QK_OK;
}

/* Unsigned integer value of a kv (any integer type, >= 0). */
static bool kv_uint(const qk_gguf_kv *kv, uint64_t *out)
{
    switch (kv->v.type) {
    case QK_GGUF_U8: case QK_GGUF_U16: case QK_GGUF_U32: case QK_GGUF_U64:
        *out = kv->v.u;
        return true;
    case QK_GGUF_I8: case QK_GGUF_I16: case QK_GGUF_I32: case QK_GGUF_I64:
        if (kv->v.i < 0)
            return false;
        *out = (uint64_t)kv->v.i;
        return true;
    default:
        return false;
    }
}

/* The split.* keys of one file: count 0 when it is not a shard. */
typedef struct split_info {
    uint64_t no, count;
    const qk_gguf_kv *count_kv, *no_kv;
    uint64_t count_idx, no_idx;
} split_info;

static int read_split(const qk_gguf_parsed *ps, const char *path, split_info *s, qk_err *err)
{
    char field[64];
    memset(s, 0, sizeof *s);
    s->count_kv = qk_gguf_find_kv(ps->kv, ps->n_kv, "split.count", &s->count_idx);
    if (!s->count_kv)
        return QK_OK;
    snprintf(field, sizeof field, "kv[%llu] 'split.count' value", (unsigned long long)s->count_idx);
    if (!kv_uint(s->count_kv, &s->count) || s->count < 1 || s->count > GGUF_MAX_SHARDS)
        return qk_err_at(err, path, field, s->count_kv->v.offset,
                         "split count must be an integer in 1..%d", GGUF_MAX_SHARDS);
    s->no_kv = qk_gguf_find_kv(ps->kv, ps->n_kv, "split.no", &s->no_idx);
    if (!s->no_kv) {
        if (s->count == 1)
            return QK_OK;
        return qk_err_at(err, path, field, s->count_kv->offset, "split.count without split.no");
    }
    snprintf(field, sizeof field, "kv[%llu] 'split.no' value", (unsigned long long)s->no_idx);
    if (!kv_uint(s->no_kv, &s->no) || s->no >= s->count)
        return qk_err_at(err, path, field, s->no_kv->v.offset,
                         "split number must be an integer below split.count %llu",
                         (unsigned long long)s->count);
    return QK_OK;
}

/* "PREFIX-00002-of-00003.gguf" -> prefix length; -1 when the name does not
 * have that form with these numbers (1-based no). */
static long shard_prefix_len(const char *path, uint64_t no1, uint64_t count)
{
    char suffix[64];
    int k = snprintf(suffix, sizeof suffix, "-%05llu-of-%05llu.gguf", (unsigned long long)no1,
                     (unsigned long long)count);
    size_t n = strlen(path);
    if (k <= 0 || (size_t)k > n || strcmp(path + n - (size_t)k, suffix) != 0)
        return -1;
    return (long)(n - (size_t)k);
}

static char *shard_path(const char *path, long prefix, uint64_t no1, uint64_t count)
{
    size_t cap = (size_t)prefix + 40;
    char *s = malloc(cap);
    if (s)
        snprintf(s, cap, "%.*s-%05llu-of-%05llu.gguf", (int)prefix, path, (unsigned long long)no1,
                 (unsigned long long)count);
    return s;
}

/* Map and parse one file into shard slot i of g. */
static int open_one(qk_gguf *g, int i, const char *path, qk_gguf_parsed *ps, qk_err *err)
{
    memset(ps, 0, sizeof *ps);
    g->shard_paths[i] = strdup(path);
    if (!g->shard_paths[i])
        return qk_errf(err, QK_EIO, "%s: out of memory", path);
    int rc = qk_map_open(&g->maps[i], path, err);
    if (rc)
        return rc;
    return qk_gguf_parse_file(g->maps[i].data, g->maps[i].size, path, i, ps, err);
}

/* A file of a split model must be shard want_no (0-based) of count. */
static int check_shard(const qk_gguf_parsed *ps, const char *path, uint64_t want_no, uint64_t count,
                       split_info *s, qk_err *err)
{
    char field[64];
    int rc = read_split(ps, path, s, err);
    if (rc)
        return rc;
    if (!s->count_kv)
        return qk_err_at(err, path, "split.count", 0, "no split.count key in shard %llu of %llu",
                         (unsigned long long)want_no + 1, (unsigned long long)count);
    if (s->count != count) {
        snprintf(field, sizeof field, "kv[%llu] 'split.count' value", (unsigned long long)s->count_idx);
        return qk_err_at(err, path, field, s->count_kv->v.offset,
                         "split count %llu, but the file name and first shard say %llu",
                         (unsigned long long)s->count, (unsigned long long)count);
    }
    if (s->no != want_no) { /* count > 1 here, so split.no exists */
        snprintf(field, sizeof field, "kv[%llu] 'split.no' value", (unsigned long long)s->no_idx);
        return qk_err_at(err, path, field, s->no_kv->v.offset,
                         "split number %llu (shard %llu), but the file name says shard %llu",
                         (unsigned long long)s->no, (unsigned long long)s->no + 1,
                         (unsigned long long)want_no + 1);
    }
    return QK_OK;
}

/* Shards 1..count-1 of a split model whose first shard is parsed in g. */
static int open_rest(qk_gguf *g, const split_info *s0, long prefix, qk_err *err)
{
    const char *first = g->shard_paths[0];
    char field[64];
    for (int i = 1; i < g->n_shards; i++) {
        char *p = shard_path(first, prefix, (uint64_t)i + 1, s0->count);
        if (!p)
            return qk_errf(err, QK_EIO, "%s: out of memory", first);
        struct stat st;
        if (stat(p, &st) != 0 && errno == ENOENT) {
            snprintf(field, sizeof field, "kv[%llu] 'split.count' value",
                     (unsigned long long)s0->count_idx);
            int rc = qk_err_at(err, first, field, s0->count_kv->v.offset,
                               "shard %d of %llu is missing: %s does not exist", i + 1,
                               (unsigned long long)s0->count, p);
            free(p);
            return rc;
        }
        qk_gguf_parsed ps;
        int rc = open_one(g, i, p, &ps, err);
        free(p);
        split_info s;
        if (!rc)
            rc = check_shard(&ps, g->shard_paths[i], (uint64_t)i, s0->count, &s, err);
        uint64_t n_all;
        if (!rc && qk_ckd_add(&n_all, g->n_tensors, ps.n_tensors))
            rc = qk_errf(err, QK_EINPUT, "%s: too many tensors", first);
        if (!rc && ps.n_tensors) {
            qk_gguf_tensor *t = realloc(g->tensors, (size_t)n_all * sizeof *t);
            if (!t) {
                rc = qk_errf(err, QK_EIO, "%s: out of memory", first);
            } else {
                memcpy(t + g->n_tensors, ps.tensors, (size_t)ps.n_tensors * sizeof *t);
                g->tensors = t;
                g->n_tensors = n_all;
            }
        }
        if (!rc && qk_ckd_add(&g->total_size, g->total_size, g->maps[i].size))
            rc = qk_errf(err, QK_EINPUT, "%s: total size overflows", first);
        qk_gguf_parsed_free(&ps);
        if (rc)
            return rc;
    }
    int rc = qk_gguf_check_duplicate_tensors(first, g->tensors, g->n_tensors, g->shard_paths, err);
    if (rc)
        return rc;
    uint64_t idx, want;
    const qk_gguf_kv *tc = qk_gguf_find_kv(g->kv, g->n_kv, "split.tensors.count", &idx);
    if (tc && (!kv_uint(tc, &want) || want != g->n_tensors)) {
        snprintf(field, sizeof field, "kv[%llu] 'split.tensors.count' value", (unsigned long long)idx);
        return qk_err_at(err, first, field, tc->v.offset, "says %s tensors, the %d shards hold %llu",
                         kv_uint(tc, &want) ? "a different number of" : "an invalid number of",
                         g->n_shards, (unsigned long long)g->n_tensors);
    }
    return QK_OK;
}

int qk_gguf_open(qk_gguf **out, const char *path, unsigned flags, qk_err *err)
{
    *out = NULL;
    qk_gguf *g = alloc_gguf(1);
    if (!g)
        return qk_errf(err, QK_EIO, "%s: out of memory", path);
    qk_gguf_parsed ps;
    split_info s;
    int rc = open_one(g, 0, path, &ps, err);
    if (!rc)
        rc = read_split(&ps, path, &s, err);
    if (rc)
        goto fail;
    if (s.count <= 1 || (flags & QK_GGUF_NO_SPLIT)) {
        g->path = strdup(path);
        if (!g->path) {
            rc = qk_errf(err, QK_EIO, "%s: out of memory", path);
            goto fail;
        }
        adopt_first(g, &ps);
        *out = g;
        return QK_OK;
    }

    /* a shard of a split model: start again from the first shard */
    char field[64];
    long prefix = shard_prefix_len(path, s.no + 1, s.count);
    if (prefix < 0) {
        snprintf(field, sizeof field, "kv[%llu] 'split.count' value", (unsigned long long)s.count_idx);
        rc = qk_err_at(err, path, field, s.count_kv->v.offset,
                       "shard %llu of %llu, but the file name does not end in -%05llu-of-%05llu.gguf "
                       "so the other shards cannot be found",
                       (unsigned long long)s.no + 1, (unsigned long long)s.count,
                       (unsigned long long)s.no + 1, (unsigned long long)s.count);
        goto fail;
    }
    uint64_t count = s.count;
    if (s.no != 0) {
        char *p0 = shard_path(path, prefix, 1, count);
        if (!p0) {
            rc = qk_errf(err, QK_EIO, "%s: out of memory", path);
            goto fail;
        }
        uint64_t no_off = s.no_kv->v.offset, no_idx = s.no_idx; /* ps is freed next */
        snprintf(field, sizeof field, "kv[%llu] 'split.no' value", (unsigned long long)no_idx);
        qk_gguf_parsed_free(&ps);
        qk_gguf_close(g);
        g = alloc_gguf(1);
        struct stat st;
        if (!g)
            rc = qk_errf(err, QK_EIO, "%s: out of memory", path);
        else if (stat(p0, &st) != 0 && errno == ENOENT)
            rc = qk_err_at(err, path, field, no_off,
                           "shard %llu of %llu; the first shard %s does not exist",
                           (unsigned long long)s.no + 1, (unsigned long long)count, p0);
        else
            rc = open_one(g, 0, p0, &ps, err);
        if (!rc)
            rc = check_shard(&ps, p0, 0, count, &s, err);
        free(p0);
        if (rc)
            goto fail;
    }
    g->path = strdup(g->shard_paths[0]);
    qk_map *maps = realloc(g->maps, (size_t)count * sizeof *maps);
    if (maps)
        g->maps = maps;
    char **paths = maps ? realloc(g->shard_paths, (size_t)count * sizeof *paths) : NULL;
    if (paths)
        g->shard_paths = paths;
    if (!g->path || !maps || !paths) {
        rc = qk_errf(err, QK_EIO, "%s: out of memory", path);
        goto fail;
    }
    for (uint64_t i = 1; i < count; i++) {
        g->maps[i] = (qk_map){NULL, 0, -1};
        g->shard_paths[i] = NULL;
    }
    g->n_shards = (int)count;
    adopt_first(g, &ps);
    rc = open_rest(g, &s, prefix, err);
    if (rc)
        goto fail;
    *out = g;
    return QK_OK;
fail:
    qk_gguf_parsed_free(&ps);
    qk_gguf_close(g);
    return rc;
}

/* ---- look-ups ----------------------------------------------------------- */

const qk_gguf_kv *qk_gguf_find(const qk_gguf *g, const char *key)
{
    return qk_gguf_find_kv(g->kv, g->n_kv, key, NULL);
}

const qk_gguf_tensor *qk_gguf_find_tensor(const qk_gguf *g, const char *name)
{
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (qk_str_eq(g->tensors[i].name, name))
            return &g->tensors[i];
    return NULL;
}

bool qk_gguf_get_uint(const qk_gguf *g, const char *key, uint64_t *out)
{
    const qk_gguf_kv *kv = qk_gguf_find(g, key);
    return kv && kv_uint(kv, out);
}

bool qk_gguf_get_int(const qk_gguf *g, const char *key, int64_t *out)
{
    const qk_gguf_kv *kv = qk_gguf_find(g, key);
    if (!kv)
        return false;
    switch (kv->v.type) {
    case QK_GGUF_U8: case QK_GGUF_U16: case QK_GGUF_U32: case QK_GGUF_U64:
        if (kv->v.u > (uint64_t)INT64_MAX)
            return false;
        *out = (int64_t)kv->v.u;
        return true;
    case QK_GGUF_I8: case QK_GGUF_I16: case QK_GGUF_I32: case QK_GGUF_I64:
        *out = kv->v.i;
        return true;
    default:
        return false;
    }
}

bool qk_gguf_get_f64(const qk_gguf *g, const char *key, double *out)
{
    const qk_gguf_kv *kv = qk_gguf_find(g, key);
    if (!kv || (kv->v.type != QK_GGUF_F32 && kv->v.type != QK_GGUF_F64))
        return false;
    *out = kv->v.f;
    return true;
}

bool qk_gguf_get_str(const qk_gguf *g, const char *key, qk_str *out)
{
    const qk_gguf_kv *kv = qk_gguf_find(g, key);
    if (!kv || kv->v.type != QK_GGUF_STRING)
        return false;
    *out = kv->v.s;
    return true;
}

bool qk_gguf_get_bool(const qk_gguf *g, const char *key, bool *out)
{
    const qk_gguf_kv *kv = qk_gguf_find(g, key);
    if (!kv || kv->v.type != QK_GGUF_BOOL)
        return false;
    *out = kv->v.u != 0;
    return true;
}

/* Element i of a fixed-size array as i64 or f64; false when not numeric. */
static bool arr_elem(const qk_gguf_value *v, uint64_t i, int64_t *iv, double *fv, bool *is_float)
{
    if (!v || v->type != QK_GGUF_ARRAY || i >= v->arr.n)
        return false;
    size_t es = qk_gguf_vtype_size(v->arr.elem);
    if (!es)
        return false;
    const uint8_t *p = v->arr.raw + i * es;
    *is_float = false;
    switch (v->arr.elem) {
    case QK_GGUF_U8: case QK_GGUF_BOOL: *iv = p[0]; return true;
    case QK_GGUF_I8: *iv = (int8_t)p[0]; return true;
    case QK_GGUF_U16: *iv = ld16(p); return true;
    case QK_GGUF_I16: *iv = (int16_t)ld16(p); return true;
    case QK_GGUF_U32: *iv = ld32(p); return true;
    case QK_GGUF_I32: *iv = (int32_t)ld32(p); return true;
    case QK_GGUF_I64: *iv = (int64_t)ld64(p); return true;
    case QK_GGUF_U64: {
        uint64_t u = ld64(p);
        *is_float = u > (uint64_t)INT64_MAX; /* keep the magnitude as a double */
        if (*is_float)
            *fv = (double)u;
        else
            *iv = (int64_t)u;
        return true;
    }
    case QK_GGUF_F32: *fv = f32_to_f64(ld32(p)); *is_float = true; return true;
    case QK_GGUF_F64: memcpy(fv, p, 8); *is_float = true; return true;
    }
    return false;
}

double qk_gguf_arr_f64(const qk_gguf_value *v, uint64_t i)
{
    int64_t iv = 0;
    double fv = 0;
    bool fl = false;
    if (!arr_elem(v, i, &iv, &fv, &fl))
        return 0;
    return fl ? fv : (double)iv;
}

int64_t qk_gguf_arr_i64(const qk_gguf_value *v, uint64_t i)
{
    int64_t iv = 0;
    double fv = 0;
    bool fl = false;
    if (!arr_elem(v, i, &iv, &fv, &fl))
        return 0;
    if (!fl)
        return iv;
    if (fv != fv)
        return 0;
    if (fv >= 0x1p63)
        return INT64_MAX;
    if (fv < -0x1p63)
        return INT64_MIN;
    return (int64_t)fv;
}

