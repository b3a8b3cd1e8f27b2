/* safetensors.c - .safetensors reader and writer (see safetensors.h). */
#include "formats/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/ckd.h"
#include "lib/core/outfile.h"
#include "kernels/types.h"

/* The reference library's Dtype enum (safetensors/src/tensor.rs), in
 * declaration order: `rank` is the position, which save_file sorts by. */
static const qk_st_dtype dtypes[] = {
    {"BOOL", QK_BOOL, 8, 0},
    {"F4", -1, 4, 1},
    {"F6_E2M3", -1, 6, 2},
    {"F6_E3M2", -1, 6, 3},
    {"U8", QK_U8, 8, 4},
    {"I8", QK_I8, 8, 5},
    {"F8_E5M2", QK_F8_E5M2, 8, 6},
    {"F8_E4M3", QK_F8_E4M3, 8, 7},
    {"F8_E8M0", QK_E8M0, 8, 8},
    {"F8_E4M3FNUZ", -1, 8, 9},
    {"F8_E5M2FNUZ", -1, 8, 10},
    {"I16", QK_I16, 16, 11},
    {"U16", QK_U16, 16, 12},
    {"F16", QK_F16, 16, 13},
    {"BF16", QK_BF16, 16, 14},
    {"I32", QK_I32, 32, 15},
    {"U32", QK_U32, 32, 16},
    {"F32", QK_F32, 32, 17},
    {"C64", -1, 64, 18},
    {"F64", QK_F64, 64, 19},
    {"I64", QK_I64, 64, 20},
    {"U64", QK_U64, 64, 21},
};
#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])

const qk_st_dtype *qk_st_dtype_by_name(const char *name)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (strcmp(dtypes[i].name, name) == 0)
            return &dtypes[i];
    return NULL;
}

const qk_st_dtype *qk_st_dtype_by_type(int type)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (type >= 0 && dtypes[i].type == type)
            return &dtypes[i];
    return NULL;
}

/* ---- reader ---------------------------------------------------------------- */

/* A name for messages: quoted, control bytes escaped, long names cut. */
static const char *shown(const char *s, size_t len, char *buf, size_t cap)
{
    size_t k = 0;
    buf[k++] = '\'';
    for (size_t i = 0; i < len && k + 8 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f || c == '\'')
            k += (size_t)snprintf(buf + k, cap - k, "\\x%02x", c);
        else
            buf[k++] = (char)c;
        if (i + 1 < len && k + 8 >= cap) {
            memcpy(buf + k, "...", 3);
            k += 3;
            break;
        }
    }
    buf[k++] = '\'';
    buf[k] = '\0';
    return buf;
}

typedef struct ctx {
    qk_st *st;
    qk_err *err;
    char field[160];
} ctx;

/* File offset of a JSON value of the header. */
static uint64_t at(const ctx *c, const qk_jsonv *v) { return 8 + v->off; }

static const char *tfield(ctx *c, const qk_jsonm *m, const char *sub)
{
    char nm[100];
    shown(m->key, m->key_len, nm, sizeof nm);
    snprintf(c->field, sizeof c->field, "tensor %s%s%s", nm, sub ? " " : "", sub ? sub : "");
    return c->field;
}

static int parse_metadata(ctx *c, const qk_jsonm *m)
{
    qk_st *st = c->st;
    const qk_jsonv *v = m->val;
    if (v->type != QK_JOBJ)
        return qk_err_at(c->err, st->path, "__metadata__", at(c, v), "is %s %s, expected an object",
                         v->type == QK_JARR || v->type == QK_JOBJ ? "an" : "a", qk_jtype_name(v->type));
    st->has_metadata = true;
    st->n_meta = v->obj.n;
    st->meta = calloc(v->obj.n ? v->obj.n : 1, sizeof *st->meta);
    if (!st->meta)
        return qk_errf(c->err, QK_EIO, "%s: out of memory", st->path);
    for (size_t i = 0; i < v->obj.n; i++) {
        const qk_jsonm *e = &v->obj.m[i];
        if (e->val->type != QK_JSTR) {
            char nm[100];
            snprintf(c->field, sizeof c->field, "__metadata__ %s", shown(e->key, e->key_len, nm, sizeof nm));
            return qk_err_at(c->err, st->path, c->field, at(c, e->val), "value is %s %s, expected a string",
                             e->val->type == QK_JARR || e->val->type == QK_JOBJ ? "an" : "a",
                             qk_jtype_name(e->val->type));
        }
        st->meta[i].key = e->key;
        st->meta[i].value = e->val->str.s;
    }
    return QK_OK;
}

/* A JSON number that is a non-negative integer written as one. */
static bool json_count(const qk_jsonv *v, uint64_t max, uint64_t *out)
{
    if (!v || v->type != QK_JNUM || !(v->num.flags & QK_JNUM_INT) || !(v->num.flags & QK_JNUM_U64) ||
        v->num.u > max)
        return false;
    *out = v->num.u;
    return true;
}

static int parse_shape(ctx *c, const qk_jsonm *m, const qk_jsonv *sv, qk_st_tensor *t)
{
    qk_st *st = c->st;
    if (sv->type != QK_JARR)
        return qk_err_at(c->err, st->path, tfield(c, m, "shape"), at(c, sv), "is a %s, expected an array",
                         qk_jtype_name(sv->type));
    if (sv->arr.n > QK_ST_MAX_DIMS)
        return qk_err_at(c->err, st->path, tfield(c, m, "shape"), at(c, sv),
                         "%zu dimensions, at most %d supported", sv->arr.n, QK_ST_MAX_DIMS);
    t->n_dims = (int)sv->arr.n;
    uint64_t nelem = 1;
    bool over = false;
    for (int d = 0; d < QK_ST_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (int d = 0; d < t->n_dims; d++) {
        uint64_t x;
        const qk_jsonv *e = sv->arr.items[d];
        if (!json_count(e, (uint64_t)INT64_MAX, &x)) {
            char sub[32];
            snprintf(sub, sizeof sub, "shape[%d]", d);
            return qk_err_at(c->err, st->path, tfield(c, m, sub), at(c, e),
                             "must be a non-negative integer below 2^63");
        }
        t->shape[d] = (int64_t)x;
        t->ne[t->n_dims - 1 - d] = (int64_t)x;
        over = over || qk_ckd_mul(&nelem, nelem, x);
    }
    uint64_t nbits = 0;
    if (over || qk_ckd_mul(&nbits, nelem, (uint64_t)t->dtype->bits))
        return qk_err_at(c->err, st->path, tfield(c, m, "shape"), at(c, sv),
                         "size of the tensor overflows 64 bits");
    if (nbits % 8)
        return qk_err_at(c->err, st->path, tfield(c, m, "shape"), at(c, sv),
                         "%llu elements of %s are not a whole number of bytes",
                         (unsigned long long)nelem, t->dtype->name);
    t->nelem = nelem;
    t->nbytes = nbits / 8;
    return QK_OK;
}

static int parse_offsets(ctx *c, const qk_jsonm *m, const qk_jsonv *ov, qk_st_tensor *t)
{
    qk_st *st = c->st;
    const char *f = tfield(c, m, "data_offsets");
    if (ov->type != QK_JARR || ov->arr.n != 2)
        return qk_err_at(c->err, st->path, f, at(c, ov), "must be an array of two integers [begin, end]");
    if (!json_count(ov->arr.items[0], UINT64_MAX, &t->begin) ||
        !json_count(ov->arr.items[1], UINT64_MAX, &t->end))
        return qk_err_at(c->err, st->path, f, at(c, ov), "must be two non-negative integers [begin, end]");
    if (t->begin > t->end)
        return qk_err_at(c->err, st->path, f, at(c, ov), "begin %llu is past end %llu",
                         (unsigned long long)t->begin, (unsigned long long)t->end);
    if (t->end > st->data_size)
        return qk_err_at(c->err, st->path, f, at(c, ov), "end %llu exceeds data size %llu",
                         (unsigned long long)t->end, (unsigned long long)st->data_size);
    if (t->end - t->begin != t->nbytes)
        return qk_err_at(c->err, st->path, f, at(c, ov),
                         "span of %llu bytes, but shape and dtype %s need %llu",
                         (unsigned long long)(t->end - t->begin), t->dtype->name,
                         (unsigned long long)t->nbytes);
    t->offsets_at = at(c, ov);
    t->file_offset = st->data_start + t->begin;
    t->data = st->buf + t->file_offset;
    return QK_OK;
}

static int parse_tensor(ctx *c, const qk_jsonm *m, qk_st_tensor *t)
{
    qk_st *st = c->st;
    const qk_jsonv *v = m->val;
    t->name = m->key;
    t->name_len = m->key_len;
    t->info_offset = 8 + m->key_off;
    if (v->type != QK_JOBJ)
        return qk_err_at(c->err, st->path, tfield(c, m, NULL), at(c, v), "is a%s %s, expected an object",
                         v->type == QK_JARR || v->type == QK_JOBJ ? "n" : "", qk_jtype_name(v->type));
    static const char *const keys[] = {"dtype", "shape", "data_offsets"};
    const qk_jsonv *kv[3];
    for (int i = 0; i < 3; i++)
        if (!(kv[i] = qk_jsonv_get(v, keys[i])))
            return qk_err_at(c->err, st->path, tfield(c, m, NULL), at(c, v), "missing \"%s\"", keys[i]);
    if (kv[0]->type != QK_JSTR)
        return qk_err_at(c->err, st->path, tfield(c, m, "dtype"), at(c, kv[0]), "is a %s, expected a string",
                         qk_jtype_name(kv[0]->type));
    if (!(t->dtype = qk_st_dtype_by_name(kv[0]->str.s))) {
        char dn[48];
        return qk_err_at(c->err, st->path, tfield(c, m, "dtype"), at(c, kv[0]), "unknown dtype %s",
                         shown(kv[0]->str.s, kv[0]->str.len, dn, sizeof dn));
    }
    t->type = t->dtype->type;
    int rc = parse_shape(c, m, kv[1], t);
    return rc ? rc : parse_offsets(c, m, kv[2], t);
}

static int cmp_by_offsets(const void *a, const void *b, void *arg)
{
    const qk_st_tensor *ts = arg;
    const qk_st_tensor *x = &ts[*(const size_t *)a], *y = &ts[*(const size_t *)b];
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

static int cmp_by_name(const void *a, const void *b, void *arg)
{
    const qk_st_tensor *ts = arg;
    const qk_st_tensor *x = &ts[*(const size_t *)a], *y = &ts[*(const size_t *)b];
    size_t l = x->name_len < y->name_len ? x->name_len : y->name_len;
    int r = memcmp(x->name, y->name, l);
    return r ? r : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

/* The byte buffer must be covered exactly (reference: Metadata::validate
 * and the MetadataIncompleteBuffer check of read_metadata). */
static int check_coverage(ctx *c)
{
    qk_st *st = c->st;
    size_t n = st->n_tensors;
    size_t *ord = malloc((n ? n : 1) * sizeof *ord);
    if (!ord)
        return qk_errf(c->err, QK_EIO, "%s: out of memory", st->path);
    for (size_t i = 0; i < n; i++)
        ord[i] = i;
    qsort_r(ord, n, sizeof *ord, cmp_by_offsets, st->tensors);
    uint64_t pos = 0;
    const qk_st_tensor *prev = NULL;
    int rc = QK_OK;
    for (size_t i = 0; i < n && rc == QK_OK; i++) {
        const qk_st_tensor *t = &st->tensors[ord[i]];
        qk_jsonm m = {.key = (char *)t->name, .key_len = t->name_len};
        char pn[100];
        if (t->begin > pos)
            rc = qk_err_at(c->err, st->path, tfield(c, &m, "data_offsets"), t->offsets_at,
                           "begins at %llu, leaving a hole of %llu bytes after %s",
                           (unsigned long long)t->begin, (unsigned long long)(t->begin - pos),
                           prev ? shown(prev->name, prev->name_len, pn, sizeof pn) : "the start of the data");
        else if (t->begin < pos)
            rc = qk_err_at(c->err, st->path, tfield(c, &m, "data_offsets"), t->offsets_at,
                           "begins at %llu, overlapping tensor %s which ends at %llu",
                           (unsigned long long)t->begin, shown(prev->name, prev->name_len, pn, sizeof pn),
                           (unsigned long long)pos);
        pos = t->end;
        prev = t;
    }
    free(ord);
    if (rc == QK_OK && pos != st->data_size)
        rc = qk_err_at(c->err, st->path, "data", st->data_start + pos,
                       "%llu bytes after the last tensor are not covered by any tensor",
                       (unsigned long long)(st->data_size - pos));
    return rc;
}

static int parse_header(qk_st *st, qk_err *err)
{
    ctx c = {.st = st, .err = err};
    const uint8_t *b = st->buf;
    if (st->size < 8)
        return qk_err_at(err, st->path, "header length", 0, "file is %llu bytes, too short for the 8-byte header length",
                         (unsigned long long)st->size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | b[i];
    st->header_len = n;
    if (n > QK_ST_MAX_HEADER)
        return qk_err_at(err, st->path, "header length", 0, "%llu exceeds the limit of %llu bytes",
                         (unsigned long long)n, QK_ST_MAX_HEADER);
    if (n > st->size - 8)
        return qk_err_at(err, st->path, "header length", 0, "%llu runs past the end of the file (%llu bytes)",
                         (unsigned long long)n, (unsigned long long)st->size);
    if (n < 2)
        return qk_err_at(err, st->path, "header length", 0, "%llu is too small for a JSON object",
                         (unsigned long long)n);
    st->data_start = 8 + n;
    st->data_size = st->size - st->data_start;
    if (b[8] != '{')
        return qk_err_at(err, st->path, "header", 8, "does not begin with '{'");
    qk_jsonp_err je;
    if (qk_jsonp_parse((const char *)b + 8, n, QK_JSONP_NO_DUP_KEYS, &st->header, &je))
        return qk_err_at(err, st->path, "header", 8 + je.off, "invalid JSON: %s", je.msg);
    const qk_jsonv *h = st->header;
    if (h->type != QK_JOBJ) /* unreachable after the '{' check, kept for clarity */
        return qk_err_at(err, st->path, "header", 8, "is not a JSON object");
    st->tensors = calloc(h->obj.n ? h->obj.n : 1, sizeof *st->tensors);
    if (!st->tensors)
        return qk_errf(err, QK_EIO, "%s: out of memory", st->path);
    for (size_t i = 0; i < h->obj.n; i++) {
        const qk_jsonm *m = &h->obj.m[i];
        int rc;
        if (strcmp(m->key, "__metadata__") == 0 && m->key_len == 12)
            rc = parse_metadata(&c, m);
        else
            rc = parse_tensor(&c, m, &st->tensors[st->n_tensors++]);
        if (rc)
            return rc;
    }
    int rc = check_coverage(&c);
    if (rc)
        return rc;
    st->by_name = malloc((st->n_tensors ? st->n_tensors : 1) * sizeof *st->by_name);
    if (!st->by_name)
        return qk_errf(err, QK_EIO, "%s: out of memory", st->path);
    for (size_t i = 0; i < st->n_tensors; i++)
        st->by_name[i] = i;
    qsort_r(st->by_name, st->n_tensors, sizeof *st->by_name, cmp_by_name, st->tensors);
    return QK_OK;
}

static int open_common(qk_st **out, qk_st *st, qk_err *err)
{
    int rc = parse_header(st, err);
    if (rc) {
        qk_st_close(st);
        return rc;
    }
    *out = st;
    return QK_OK;
}

int qk_st_open_mem(qk_st **out, const void *buf, size_t n, const char *name, qk_err *err)
{
    *out = NULL;
    qk_st *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(name ? name : "-"))) {
        free(st);
        return qk_errf(err, QK_EIO, "%s: out of memory", name ? name : "-");
    }
    st->map.fd = -1;
    st->buf = buf;
    st->size = n;
    return open_common(out, st, err);
}

int qk_st_open(qk_st **out, const char *path, qk_err *err)
{
    *out = NULL;
    qk_st *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path))) {
        free(st);
        return qk_errf(err, QK_EIO, "%s: out of memory", path);
    }
    int rc = qk_map_open(&st->map, path, err);
    if (rc) {
        st->map.fd = -1;
        qk_st_close(st);
        return rc;
    }
    st->buf = st->map.data;
    st->size = st->map.size;
    return open_common(out, st, err);
}

void qk_st_close(qk_st *st)
{
    if (!st)
        return;
    if (st->map.fd >= 0 || st->map.data)
        qk_map_close(&st->map);
    qk_jsonv_free(st->header);
    free(st->meta);
    free(st->tensors);
    free(st->by_name);
    free(st->path);
    free(st);
}

const qk_st_tensor *qk_st_find(const qk_st *st, const char *name)
{
    size_t lo = 0, hi = st->n_tensors, len = strlen(name);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const qk_st_tensor *t = &st->tensors[st->by_name[mid]];
        size_t l = t->name_len < len ? t->name_len : len;
        int r = memcmp(t->name, name, l);
        if (!r)
            r = (t->name_len > len) - (t->name_len < len);
        if (!r)
            return t;
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const char *qk_st_meta_get(const qk_st *st, const char *key)
{
    for (size_t i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta[i].key, key) == 0)
            return st->meta[i].value;
    return NULL;
}

/* ---- writer ---------------------------------------------------------------- */

typedef struct wtensor {
    char *name;
    const qk_st_dtype *dtype;
    int n_dims;
    int64_t shape[QK_ST_MAX_DIMS];
    uint64_t nbytes, begin;
    const void *data;
} wtensor;

struct qk_st_writer {
    unsigned flags;
    char **mkeys, **mvals;
    size_t n_meta;
    bool has_meta;
    wtensor *t;
    size_t n, cap;
    size_t *order;  /* output order, after begin */
    qk_out out;
    bool begun, failed;
    size_t cur;     /* position in order of the tensor being written */
    uint64_t cur_done;
};

qk_st_writer *qk_st_writer_new(unsigned flags)
{
    qk_st_writer *w = calloc(1, sizeof *w);
    if (w)
        w->flags = flags;
    return w;
}

void qk_st_writer_free(qk_st_writer *w)
{
    if (!w)
        return;
    qk_out_abort(&w->out);
    for (size_t i = 0; i < w->n_meta; i++) {
        free(w->mkeys[i]);
        free(w->mvals[i]);
    }
    free(w->mkeys);
    free(w->mvals);
    for (size_t i = 0; i < w->n; i++)
        free(w->t[i].name);
    free(w->t);
    free(w->order);
    free(w);
}

int qk_st_w_meta(qk_st_writer *w, const char *key, const char *value, qk_err *err)
{
    w->has_meta = true;
    for (size_t i = 0; i < w->n_meta; i++)
        if (strcmp(w->mkeys[i], key) == 0) {
            char *v = strdup(value);
            if (!v)
                return qk_errf(err, QK_EIO, "out of memory");
            free(w->mvals[i]);
            w->mvals[i] = v;
            return QK_OK;
        }
    char **k = realloc(w->mkeys, (w->n_meta + 1) * sizeof *k);
    if (k)
        w->mkeys = k;
    char **v = realloc(w->mvals, (w->n_meta + 1) * sizeof *v);
    if (v)
        w->mvals = v;
    if (!k || !v)
        return qk_errf(err, QK_EIO, "out of memory");
    w->mkeys[w->n_meta] = strdup(key);
    w->mvals[w->n_meta] = strdup(value);
    w->n_meta++;
    if (!w->mkeys[w->n_meta - 1] || !w->mvals[w->n_meta - 1])
        return qk_errf(err, QK_EIO, "out of memory");
    return QK_OK;
}

int qk_st_w_tensor(qk_st_writer *w, const char *name, const char *dtype, int n_dims,
                   const int64_t *shape, const void *data, qk_err *err)
{
    if (w->begun)
        return qk_errf(err, QK_EINPUT, "tensor '%s' declared after the header was written", name);
    const qk_st_dtype *dt = qk_st_dtype_by_name(dtype);
    if (!dt)
        return qk_errf(err, QK_EINPUT, "tensor '%s': unknown safetensors dtype '%s'", name, dtype);
    if (n_dims < 0 || n_dims > QK_ST_MAX_DIMS)
        return qk_errf(err, QK_EINPUT, "tensor '%s': %d dimensions", name, n_dims);
    if (strcmp(name, "__metadata__") == 0)
        return qk_errf(err, QK_EINPUT, "a tensor may not be named __metadata__");
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return qk_errf(err, QK_EINPUT, "tensor '%s' declared twice", name);
    uint64_t nel = 1, nbits;
    for (int d = 0; d < n_dims; d++)
        if (shape[d] < 0 || qk_ckd_mul(&nel, nel, (uint64_t)shape[d]))
            return qk_errf(err, QK_EINPUT, "tensor '%s': bad shape", name);
    if (qk_ckd_mul(&nbits, nel, (uint64_t)dt->bits) || nbits % 8)
        return qk_errf(err, QK_EINPUT, "tensor '%s': size is not a whole number of bytes", name);
    if (w->n == w->cap) {
        size_t nc = w->cap ? w->cap * 2 : 16;
        wtensor *nt = realloc(w->t, nc * sizeof *nt);
        if (!nt)
            return qk_errf(err, QK_EIO, "out of memory");
        w->t = nt;
        w->cap = nc;
    }
    wtensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name)))
        return qk_errf(err, QK_EIO, "out of memory");
    t->dtype = dt;
    t->n_dims = n_dims;
    for (int d = 0; d < n_dims; d++)
        t->shape[d] = shape[d];
    t->nbytes = nbits / 8;
    t->data = data;
    w->n++;
    return QK_OK;
}

/* A growing byte buffer for the header. */
typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1)
            nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

/* A JSON string literal escaped as serde_json does: '"', '\\' and control
 * characters (short forms for \b \f \n \r \t, else \u00xx). */
static void sb_json(sbuf *b, const char *s)
{
    sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char e[8];
        const char *r = NULL;
        switch (c) {
        case '"': r = "\\\""; break;
        case '\\': r = "\\\\"; break;
        case '\b': r = "\\b"; break;
        case '\f': r = "\\f"; break;
        case '\n': r = "\\n"; break;
        case '\r': r = "\\r"; break;
        case '\t': r = "\\t"; break;
        default:
            if (c < 0x20) {
                snprintf(e, sizeof e, "\\u%04x", c);
                r = e;
            }
        }
        if (r)
            sb_str(b, r);
        else
            sb_put(b, s, 1);
    }
    sb_put(b, "\"", 1);
}

static void sb_u64(sbuf *b, uint64_t v)
{
    char t[24];
    sb_put(b, t, (size_t)snprintf(t, sizeof t, "%llu", (unsigned long long)v));
}

static int cmp_write_order(const void *a, const void *b, void *arg)
{
    const wtensor *ts = arg;
    const wtensor *x = &ts[*(const size_t *)a], *y = &ts[*(const size_t *)b];
    if (x->dtype->rank != y->dtype->rank)
        return x->dtype->rank > y->dtype->rank ? -1 : 1;
    return strcmp(x->name, y->name);
}

int qk_st_w_begin(qk_st_writer *w, const char *path, qk_err *err)
{
    if (w->begun)
        return qk_errf(err, QK_EINPUT, "%s: header already written", path);
    w->order = malloc((w->n ? w->n : 1) * sizeof *w->order);
    if (!w->order)
        return qk_errf(err, QK_EIO, "%s: out of memory", path);
    for (size_t i = 0; i < w->n; i++)
        w->order[i] = i;
    if (w->flags & QK_ST_W_SORT)
        qsort_r(w->order, w->n, sizeof *w->order, cmp_write_order, w->t);
    sbuf b = {0};
    sb_str(&b, "{");
    if (w->has_meta) {
        sb_str(&b, "\"__metadata__\":{");
        for (size_t i = 0; i < w->n_meta; i++) {
            if (i)
                sb_str(&b, ",");
            sb_json(&b, w->mkeys[i]);
            sb_str(&b, ":");
            sb_json(&b, w->mvals[i]);
        }
        sb_str(&b, "}");
    }
    uint64_t off = 0;
    for (size_t k = 0; k < w->n; k++) {
        wtensor *t = &w->t[w->order[k]];
        if (k || w->has_meta)
            sb_str(&b, ",");
        sb_json(&b, t->name);
        sb_str(&b, ":{\"dtype\":");
        sb_json(&b, t->dtype->name);
        sb_str(&b, ",\"shape\":[");
        for (int d = 0; d < t->n_dims; d++) {
            if (d)
                sb_str(&b, ",");
            sb_u64(&b, (uint64_t)t->shape[d]);
        }
        sb_str(&b, "],\"data_offsets\":[");
        t->begin = off;
        if (qk_ckd_add(&off, off, t->nbytes)) {
            free(b.p);
            return qk_errf(err, QK_EINPUT, "%s: total size overflows", path);
        }
        sb_u64(&b, t->begin);
        sb_str(&b, ",");
        sb_u64(&b, off);
        sb_str(&b, "]}");
    }
    sb_str(&b, "}");
    while (!b.oom && b.n % 8)
        sb_str(&b, " ");
    if (b.oom) {
        free(b.p);
        return qk_errf(err, QK_EIO, "%s: out of memory", path);
    }
    if (b.n > QK_ST_MAX_HEADER) {
        free(b.p);
        return qk_errf(err, QK_EINPUT, "%s: header of %zu bytes exceeds the safetensors limit", path, b.n);
    }
    uint8_t len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)((uint64_t)b.n >> (8 * i));
    int rc = qk_out_open(&w->out, path, err);
    if (!rc)
        rc = qk_out_write(&w->out, len, 8, err);
    if (!rc)
        rc = qk_out_write(&w->out, b.p, b.n, err);
    free(b.p);
    w->begun = true;
    w->failed = rc != QK_OK;
    return rc;
}

size_t qk_st_w_count(const qk_st_writer *w) { return w->begun ? w->n : 0; }

const char *qk_st_w_name(const qk_st_writer *w, size_t i)
{
    return w->begun && i < w->n ? w->t[w->order[i]].name : NULL;
}

/* Write every tensor with a data pointer (or no bytes) from the cursor on,
 * stopping at the first one to be streamed. */
static int advance(qk_st_writer *w, qk_err *err)
{
    while (w->cur < w->n) {
        const wtensor *t = &w->t[w->order[w->cur]];
        if (w->cur_done == t->nbytes) {
            w->cur++;
            w->cur_done = 0;
            continue;
        }
        if (!t->data)
            break;
        int rc = qk_out_write(&w->out, t->data, t->nbytes, err);
        if (rc)
            return rc;
        w->cur_done = t->nbytes;
    }
    return QK_OK;
}

int qk_st_w_data(qk_st_writer *w, const void *buf, size_t n, qk_err *err)
{
    if (!w->begun || w->failed)
        return qk_errf(err, QK_EINPUT, "safetensors writer: data before the header or after an error");
    int rc = advance(w, err);
    if (rc)
        return rc;
    if (w->cur >= w->n)
        return qk_errf(err, QK_EINPUT, "%s: more data than the tensors declared", w->out.dst);
    const wtensor *t = &w->t[w->order[w->cur]];
    if (n > t->nbytes - w->cur_done)
        return qk_errf(err, QK_EINPUT, "%s: tensor '%s': %zu bytes given, %llu left", w->out.dst, t->name, n,
                       (unsigned long long)(t->nbytes - w->cur_done));
    rc = qk_out_write(&w->out, buf, n, err);
    if (rc)
        return rc;
    w->cur_done += n;
    return advance(w, err);
}

int qk_st_writer_finish(qk_st_writer *w, qk_err *err)
{
    if (!w->begun || w->failed)
        return qk_errf(err, QK_EINPUT, "safetensors writer: finish without a header or after an error");
    int rc = advance(w, err);
    if (rc)
        return rc;
    if (w->cur < w->n) {
        const wtensor *t = &w->t[w->order[w->cur]];
        return qk_errf(err, QK_EINPUT, "%s: tensor '%s' got %llu of its %llu bytes", w->out.dst, t->name,
                       (unsigned long long)w->cur_done, (unsigned long long)t->nbytes);
    }
    return qk_out_commit(&w->out, err);
}
