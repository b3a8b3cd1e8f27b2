/* gguf_read.c - GGUF v2/v3 reader.
 *
 * Implements the file layout of llama.cpp's ggml/src/gguf.cpp (d32676d) and
 * docs of gguf-py/gguf/constants.py:
 *
 *   "GGUF" u32 version, u64 n_tensors, u64 n_kv,
 *   n_kv x { string key, u32 vtype, value },
 *   n_tensors x { string name, u32 n_dims, n_dims x i64 ne, u32 type, u64 offset },
 *   padding to general.alignment (default 32), tensor data.
 *
 * Strings are u64 length + bytes; arrays are u32 element type + u64 count +
 * elements.  Everything is little-endian.  Every count read from the file is
 * bounded by the bytes left before anything is allocated, so a header that
 * claims 2^62 keys fails cleanly.  The checks follow gguf_init_from_reader()
 * and add what the brief of qk asks for: tensor data must lie in the file,
 * be aligned and not overlap (ggml itself demands the exact packed layout).
 * Opening files and split sets, and the look-ups, are gguf_open.c's.
 */
#include "formats/gguf.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/gguf_parse.h"
#include "lib/core/ckd.h"
#include "kernels/types.h"

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_NAME 64      /* ggml's GGML_MAX_NAME: names are < 64 bytes */
#define GGUF_MAX_DEPTH 8      /* arrays of arrays nest at most this deep */

/* Smallest possible encodings, used to bound counts by the bytes left. */
#define MIN_KV_BYTES 14          /* u64 len + 1 key byte + u32 type + 1 value byte */
#define MIN_TENSOR_INFO_BYTES 32 /* u64 len + u32 n_dims + 1 x i64 + u32 type + u64 offset */

static const char *const vtype_names[QK_GGUF_VTYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

const char *qk_gguf_vtype_name(int vtype)
{
    if (vtype < 0 || vtype >= QK_GGUF_VTYPE_COUNT)
        return "invalid";
    return vtype_names[vtype];
}

size_t qk_gguf_vtype_size(int vtype)
{
    switch (vtype) {
    case QK_GGUF_U8: case QK_GGUF_I8: case QK_GGUF_BOOL: return 1;
    case QK_GGUF_U16: case QK_GGUF_I16: return 2;
    case QK_GGUF_U32: case QK_GGUF_I32: case QK_GGUF_F32: return 4;
    case QK_GGUF_U64: case QK_GGUF_I64: case QK_GGUF_F64: return 8;
    default: return 0;
    }
}

bool qk_str_eq(qk_str s, const char *c)
{
    size_t n = strlen(c);
    return s.len == n && (n == 0 || memcmp(s.ptr, c, n) == 0);
}

/* A name from the file, printable and truncated, for messages. */
static const char *show(char *buf, size_t cap, const char *p, uint64_t len)
{
    size_t lim = cap - 4, o = 0;
    for (uint64_t i = 0; i < len && o < lim; i++) {
        unsigned char c = (unsigned char)p[i];
        buf[o++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (len > lim) {
        memcpy(buf + lim, "...", 3);
        o = lim + 3;
    }
    buf[o] = 0;
    return buf;
}

/* ---- cursor ----------------------------------------------------------- */

typedef struct rd {
    const uint8_t *p; /* whole file */
    uint64_t size;
    uint64_t pos;
    const char *path;
    qk_err *err;
} rd;

static uint64_t left(const rd *r) { return r->size - r->pos; }

/* Fails unless n more bytes are in the file. */
static int need(rd *r, uint64_t n, const char *field)
{
    if (n <= left(r))
        return QK_OK;
    if (r->size == 0)
        return qk_err_at(r->err, r->path, field, r->pos, "empty file, not a GGUF file");
    return qk_err_at(r->err, r->path, field, r->pos,
                     "truncated: needs %llu bytes, only %llu left before end of file",
                     (unsigned long long)n, (unsigned long long)left(r));
}

static int get32(rd *r, uint32_t *v, const char *field)
{
    int rc = need(r, 4, field);
    if (rc)
        return rc;
    *v = ld32(r->p + r->pos);
    r->pos += 4;
    return QK_OK;
}

static int get64(rd *r, uint64_t *v, const char *field)
{
    int rc = need(r, 8, field);
    if (rc)
        return rc;
    *v = ld64(r->p + r->pos);
    r->pos += 8;
    return QK_OK;
}

static int get_str(rd *r, qk_str *s, const char *field)
{
    uint64_t at = r->pos, len;
    int rc = get64(r, &len, field);
    if (rc)
        return rc;
    if (len > left(r))
        return qk_err_at(r->err, r->path, field, at,
                         "string length %llu runs past end of file (%llu bytes left)",
                         (unsigned long long)len, (unsigned long long)left(r));
    s->ptr = (const char *)r->p + r->pos;
    s->len = len;
    r->pos += len;
    return QK_OK;
}

/* ---- values ----------------------------------------------------------- */

static void free_value(qk_gguf_value *v)
{
    if (v->type != QK_GGUF_ARRAY || !v->arr.items)
        return;
    for (uint64_t i = 0; v->arr.elem == QK_GGUF_ARRAY && i < v->arr.n; i++)
        free_value(&v->arr.items[i]);
    free(v->arr.items);
    v->arr.items = NULL;
}

/* The field of a value being parsed: the kv part ("kv[2] 'k' value") and
 * the array indices below it, spelled out ("...value[5][1]") only when an
 * error needs the name, so that a 150k-entry string array costs no printf. */
typedef struct fieldbuf {
    char s[256];
    size_t base;                 /* length of the kv part in s */
    uint64_t idx[GGUF_MAX_DEPTH]; /* indices of the enclosing arrays */
    int depth;
} fieldbuf;

static const char *fname(fieldbuf *f)
{
    size_t n = f->base;
    for (int d = 0; d < f->depth && n < sizeof f->s; d++) {
        int k = snprintf(f->s + n, sizeof f->s - n, "[%llu]", (unsigned long long)f->idx[d]);
        if (k < 0 || (size_t)k >= sizeof f->s - n)
            break;
        n += (size_t)k;
    }
    f->s[n < sizeof f->s ? n : sizeof f->s - 1] = 0;
    return f->s;
}

static int parse_value(rd *r, int type, qk_gguf_value *v, fieldbuf *f);

/* Array payload: u32 element type, u64 count, elements. */
static int parse_array(rd *r, qk_gguf_value *v, fieldbuf *f)
{
    uint64_t at = r->pos;
    uint32_t elem;
    uint64_t n;
    if (left(r) < 12) {
        int rc = get32(r, &elem, fname(f));
        return rc ? rc : get64(r, &n, f->s);
    }
    elem = ld32(r->p + r->pos);
    n = ld64(r->p + r->pos + 4);
    r->pos += 12;
    if (elem >= QK_GGUF_VTYPE_COUNT)
        return qk_err_at(r->err, r->path, fname(f), at, "unknown array element type %u", elem);
    if (elem == QK_GGUF_ARRAY && f->depth + 1 >= GGUF_MAX_DEPTH)
        return qk_err_at(r->err, r->path, fname(f), at, "arrays nested more than %d deep",
                         GGUF_MAX_DEPTH);
    v->arr.elem = (int)elem;
    v->arr.n = n;
    v->arr.raw = r->p + r->pos;
    v->arr.items = NULL;

    size_t es = qk_gguf_vtype_size((int)elem);
    if (es) { /* fixed-size elements stay in the mapping */
        uint64_t bytes;
        if (qk_ckd_mul(&bytes, n, es) || bytes > left(r))
            return qk_err_at(r->err, r->path, fname(f), at,
                             "array of %llu %s elements runs past end of file (%llu bytes left)",
                             (unsigned long long)n, vtype_names[elem], (unsigned long long)left(r));
        r->pos += bytes;
        return QK_OK;
    }
    /* strings take at least 8 bytes each, arrays 12: bound n before allocating */
    uint64_t min = elem == QK_GGUF_STRING ? 8 : 12;
    if (n > left(r) / min)
        return qk_err_at(r->err, r->path, fname(f), at,
                         "array of %llu %s elements runs past end of file (%llu bytes left)",
                         (unsigned long long)n, vtype_names[elem], (unsigned long long)left(r));
    if (n == 0)
        return QK_OK;
    /* not calloc: each item is initialised once, by parse_value */
    v->arr.items = malloc((size_t)n * sizeof *v->arr.items);
    if (!v->arr.items)
        return qk_errf(r->err, QK_EIO, "%s: out of memory", r->path);
    int rc = QK_OK;
    f->depth++;
    for (uint64_t i = 0; i < n && !rc; i++) {
        f->idx[f->depth - 1] = i;
        rc = parse_value(r, (int)elem, &v->arr.items[i], f);
        if (rc)
            v->arr.n = i + 1; /* free_value visits only the items qk_gguf_parsed */
    }
    f->depth--;
    return rc;
}

static int parse_value(rd *r, int type, qk_gguf_value *v, fieldbuf *f)
{
    *v = (qk_gguf_value){.type = type, .offset = r->pos};
    if (type == QK_GGUF_STRING) {
        uint64_t len;
        if (left(r) < 8 || (len = ld64(r->p + r->pos)) > left(r) - 8)
            return get_str(r, &v->s, fname(f)); /* reports the error */
        v->s.ptr = (const char *)r->p + r->pos + 8;
        v->s.len = len;
        r->pos += 8 + len;
        return QK_OK;
    }
    if (type == QK_GGUF_ARRAY)
        return parse_array(r, v, f);
    size_t es = qk_gguf_vtype_size(type);
    if (!es)
        return qk_err_at(r->err, r->path, fname(f), r->pos, "unknown value type %d", type);
    if (es > left(r))
        return need(r, es, fname(f));
    const uint8_t *p = r->p + r->pos;
    switch (type) {
    case QK_GGUF_U8: case QK_GGUF_BOOL: v->u = p[0]; break; /* bool keeps its byte */
    case QK_GGUF_I8: v->i = (int8_t)p[0]; break;
    case QK_GGUF_U16: v->u = ld16(p); break;
    case QK_GGUF_I16: v->i = (int16_t)ld16(p); break;
    case QK_GGUF_U32: v->u = ld32(p); break;
    case QK_GGUF_I32: v->i = (int32_t)ld32(p); break;
    case QK_GGUF_U64: v->u = ld64(p); break;
    case QK_GGUF_I64: v->i = (int64_t)ld64(p); break;
    case QK_GGUF_F32: v->f = f32_to_f64(ld32(p)); break;
    case QK_GGUF_F64: memcpy(&v->f, p, 8); break;
    }
    r->pos += es;
    return QK_OK;
}

/* ---- one file ---------------------------------------------------------- */

void qk_gguf_free_kvs(qk_gguf_kv *kv, uint64_t n)
{
    for (uint64_t i = 0; kv && i < n; i++)
        free_value(&kv[i].v);
    free(kv);
}

void qk_gguf_parsed_free(qk_gguf_parsed *ps)
{
    qk_gguf_free_kvs(ps->kv, ps->n_kv);
    free(ps->tensors);
    memset(ps, 0, sizeof *ps);
}

static int cmp_str(qk_str a, qk_str b)
{
    uint64_t n = a.len < b.len ? a.len : b.len;
    int c = n ? memcmp(a.ptr, b.ptr, (size_t)n) : 0;
    if (c)
        return c;
    return (a.len > b.len) - (a.len < b.len);
}

/* Sorting an index array by name finds duplicates in O(n log n). */
typedef struct named {
    qk_str name;
    uint64_t idx;
} named;

static int cmp_named(const void *a, const void *b)
{
    const named *x = a, *y = b;
    int c = cmp_str(x->name, y->name);
    if (c)
        return c;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Finds a repeated name: returns 1 and sets *first < *second (the smallest
 * such second), 0 when all are distinct, -1 when out of memory. */
static int find_duplicate(named *v, uint64_t n, uint64_t *first, uint64_t *second)
{
    qsort(v, (size_t)n, sizeof *v, cmp_named);
    int found = 0;
    for (uint64_t i = 1; i < n; i++) {
        if (cmp_str(v[i - 1].name, v[i].name) == 0 && (!found || v[i].idx < *second)) {
            /* v[i-1] is the first of a run of equal names only at a run start,
             * but the lowest index of the run is there since ties sort by idx */
            uint64_t j = i - 1;
            while (j > 0 && cmp_str(v[j - 1].name, v[i].name) == 0)
                j--;
            *first = v[j].idx;
            *second = v[i].idx;
            found = 1;
        }
    }
    return found;
}

static int check_duplicate_keys(rd *r, const qk_gguf_parsed *ps)
{
    if (ps->n_kv < 2)
        return QK_OK;
    named *v = malloc((size_t)ps->n_kv * sizeof *v);
    if (!v)
        return qk_errf(r->err, QK_EIO, "%s: out of memory", r->path);
    for (uint64_t i = 0; i < ps->n_kv; i++)
        v[i] = (named){ps->kv[i].key, i};
    uint64_t a = 0, b = 0;
    int dup = find_duplicate(v, ps->n_kv, &a, &b);
    free(v);
    if (!dup)
        return QK_OK;
    char field[64], nm[96];
    snprintf(field, sizeof field, "kv[%llu].key", (unsigned long long)b);
    const qk_gguf_kv *kv = &ps->kv[b];
    return qk_err_at(r->err, r->path, field, kv->offset, "duplicate key '%s' (also kv[%llu])",
                     show(nm, sizeof nm, kv->key.ptr, kv->key.len), (unsigned long long)a);
}

static int parse_kvs(rd *r, qk_gguf_parsed *ps)
{
    for (uint64_t i = 0; i < ps->n_kv; i++) {
        qk_gguf_kv *kv = &ps->kv[i];
        fieldbuf f;
        char nm[96];
        kv->offset = r->pos;
        snprintf(f.s, sizeof f.s, "kv[%llu].key", (unsigned long long)i);
        int rc = get_str(r, &kv->key, f.s);
        if (rc)
            return rc;
        if (kv->key.len == 0)
            return qk_err_at(r->err, r->path, f.s, kv->offset, "empty key");
        show(nm, sizeof nm, kv->key.ptr, kv->key.len);
        snprintf(f.s, sizeof f.s, "kv[%llu] '%s' type", (unsigned long long)i, nm);
        uint64_t at = r->pos;
        uint32_t type;
        rc = get32(r, &type, f.s);
        if (rc)
            return rc;
        if (type >= QK_GGUF_VTYPE_COUNT)
            return qk_err_at(r->err, r->path, f.s, at, "unknown value type %u", type);
        int k = snprintf(f.s, sizeof f.s, "kv[%llu] '%s' value", (unsigned long long)i, nm);
        f.base = k < 0 ? 0 : (size_t)k < sizeof f.s ? (size_t)k : sizeof f.s - 1;
        f.depth = 0;
        rc = parse_value(r, (int)type, &kv->v, &f);
        if (rc) {
            ps->n_kv = i + 1; /* free what was qk_gguf_parsed */
            return rc;
        }
    }
    return check_duplicate_keys(r, ps);
}

const qk_gguf_kv *qk_gguf_find_kv(const qk_gguf_kv *kv, uint64_t n, const char *key, uint64_t *idx)
{
    for (uint64_t i = 0; i < n; i++)
        if (qk_str_eq(kv[i].key, key)) {
            if (idx)
                *idx = i;
            return &kv[i];
        }
    return NULL;
}

/* general.alignment: a u32 power of two (gguf.cpp), default 32. */
static int read_alignment(rd *r, qk_gguf_parsed *ps)
{
    uint64_t i;
    const qk_gguf_kv *kv = qk_gguf_find_kv(ps->kv, ps->n_kv, "general.alignment", &i);
    ps->alignment = GGUF_DEFAULT_ALIGNMENT;
    if (!kv)
        return QK_OK;
    char field[64];
    snprintf(field, sizeof field, "kv[%llu] 'general.alignment' value", (unsigned long long)i);
    if (kv->v.type != QK_GGUF_U32)
        return qk_err_at(r->err, r->path, field, kv->v.offset, "alignment must be a u32, not %s",
                         qk_gguf_vtype_name(kv->v.type));
    uint64_t a = kv->v.u;
    if (a == 0 || (a & (a - 1)) != 0)
        return qk_err_at(r->err, r->path, field, kv->v.offset,
                         "alignment %llu is not a nonzero power of two", (unsigned long long)a);
    ps->alignment = (uint32_t)a;
    return QK_OK;
}

/* ne[0..n_dims) after the name and n_dims: each >= 0, product <= INT64_MAX. */
static int parse_dims(rd *r, qk_gguf_tensor *t, uint64_t i, const char *nm)
{
    char field[64];
    for (int j = 0; j < 4; j++)
        t->ne[j] = 1;
    for (uint32_t j = 0; j < t->n_dims; j++) {
        snprintf(field, sizeof field, "tensor_info[%llu].ne[%u]", (unsigned long long)i, j);
        uint64_t at = r->pos, u;
        int rc = get64(r, &u, field);
        if (rc)
            return rc;
        if (u > (uint64_t)INT64_MAX)
            return qk_err_at(r->err, r->path, field, at, "negative dimension %lld (tensor '%s')",
                             (long long)(int64_t)u, nm);
        t->ne[j] = (int64_t)u;
    }
    /* zero dims count as 1 so that every partial product (rows, planes) fits too */
    uint64_t count = 1;
    for (int j = 0; j < 4; j++) {
        uint64_t d = t->ne[j] ? (uint64_t)t->ne[j] : 1;
        if (qk_ckd_mul(&count, count, d) || count > (uint64_t)INT64_MAX) {
            snprintf(field, sizeof field, "tensor_info[%llu].ne", (unsigned long long)i);
            return qk_err_at(r->err, r->path, field, t->info_offset + 8 + t->name.len + 4,
                             "element count %lld x %lld x %lld x %lld overflows 64 bits (tensor '%s')",
                             (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                             (long long)t->ne[3], nm);
        }
    }
    return QK_OK;
}

/* The type (a live GGUF type of the table) and the byte size it implies. */
static int parse_type(rd *r, qk_gguf_tensor *t, uint64_t i, const char *nm)
{
    char field[64];
    snprintf(field, sizeof field, "tensor_info[%llu].type", (unsigned long long)i);
    uint64_t at = r->pos;
    uint32_t type;
    int rc = get32(r, &type, field);
    if (rc)
        return rc;
    const qk_type_traits *tt = type < QK_TYPE_MAX ? qk_type_get((int)type) : NULL;
    if (!tt || !tt->in_gguf)
        return qk_err_at(r->err, r->path, field, at, "unknown tensor type %u (tensor '%s')", type, nm);
    t->type = (int)type;
    uint64_t ne0_at = t->info_offset + 8 + t->name.len + 4;
    if (t->ne[0] % tt->blck != 0) {
        snprintf(field, sizeof field, "tensor_info[%llu].ne[0]", (unsigned long long)i);
        return qk_err_at(r->err, r->path, field, ne0_at,
                         "%lld columns is not a multiple of the %s block size %d (tensor '%s')",
                         (long long)t->ne[0], tt->name, tt->blck, nm);
    }
    uint64_t row, nbytes = 0;
    bool ovf = qk_ckd_mul(&row, (uint64_t)(t->ne[0] / tt->blck), tt->type_size);
    if (!ovf && row > 0)
        row = qk_row_size(t->type, t->ne[0]); /* the table's word on it */
    ovf = ovf || qk_ckd_mul(&nbytes, row, (uint64_t)t->ne[1]) ||
          qk_ckd_mul(&nbytes, nbytes, (uint64_t)t->ne[2]) ||
          qk_ckd_mul(&nbytes, nbytes, (uint64_t)t->ne[3]);
    if (ovf) {
        snprintf(field, sizeof field, "tensor_info[%llu].ne", (unsigned long long)i);
        return qk_err_at(r->err, r->path, field, ne0_at, "size in bytes overflows 64 bits (tensor '%s')",
                         nm);
    }
    t->nbytes = nbytes;
    return QK_OK;
}

static int parse_tensor_info(rd *r, qk_gguf_parsed *ps, uint64_t i, int shard)
{
    qk_gguf_tensor *t = &ps->tensors[i];
    char field[64], nm[96];
    memset(t, 0, sizeof *t);
    t->shard = shard;
    t->info_offset = r->pos;
    snprintf(field, sizeof field, "tensor_info[%llu].name", (unsigned long long)i);
    int rc = get_str(r, &t->name, field);
    if (rc)
        return rc;
    show(nm, sizeof nm, t->name.ptr, t->name.len);
    if (t->name.len >= GGUF_MAX_NAME)
        return qk_err_at(r->err, r->path, field, t->info_offset,
                         "name '%s' is %llu bytes, ggml allows at most %d", nm,
                         (unsigned long long)t->name.len, GGUF_MAX_NAME - 1);

    snprintf(field, sizeof field, "tensor_info[%llu].n_dims", (unsigned long long)i);
    uint64_t at = r->pos;
    rc = get32(r, &t->n_dims, field);
    if (rc)
        return rc;
    if (t->n_dims < 1 || t->n_dims > 4)
        return qk_err_at(r->err, r->path, field, at, "%u dimensions, must be 1 to 4 (tensor '%s')",
                         t->n_dims, nm);
    rc = parse_dims(r, t, i, nm);
    if (!rc)
        rc = parse_type(r, t, i, nm);
    if (rc)
        return rc;

    snprintf(field, sizeof field, "tensor_info[%llu].offset", (unsigned long long)i);
    at = r->pos;
    rc = get64(r, &t->offset, field);
    if (rc)
        return rc;
    if (t->offset % ps->alignment != 0)
        return qk_err_at(r->err, r->path, field, at,
                         "offset %llu is not a multiple of the alignment %u (tensor '%s')",
                         (unsigned long long)t->offset, ps->alignment, nm);
    return QK_OK;
}

int qk_gguf_check_duplicate_tensors(const char *file, const qk_gguf_tensor *t, uint64_t n, char *const *paths,
                                    qk_err *err)
{
    rd r0 = {NULL, 0, 0, file, err}, *r = &r0;
    if (n < 2)
        return QK_OK;
    named *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return qk_errf(r->err, QK_EIO, "%s: out of memory", r->path);
    for (uint64_t i = 0; i < n; i++)
        v[i] = (named){t[i].name, i};
    uint64_t a = 0, b = 0;
    int dup = find_duplicate(v, n, &a, &b);
    free(v);
    if (!dup)
        return QK_OK;
    char field[64], nm[96];
    /* the index within b's own file */
    uint64_t first_of_shard = b;
    while (first_of_shard > 0 && t[first_of_shard - 1].shard == t[b].shard)
        first_of_shard--;
    snprintf(field, sizeof field, "tensor_info[%llu].name", (unsigned long long)(b - first_of_shard));
    show(nm, sizeof nm, t[b].name.ptr, t[b].name.len);
    const char *path = paths ? paths[t[b].shard] : r->path;
    if (t[a].shard != t[b].shard)
        return qk_err_at(r->err, path, field, t[b].info_offset,
                         "duplicate tensor name '%s' (also in %s)", nm, paths[t[a].shard]);
    return qk_err_at(r->err, path, field, t[b].info_offset, "duplicate tensor name '%s'", nm);
}

static int cmp_by_offset(const void *a, const void *b)
{
    const qk_gguf_tensor *x = *(const qk_gguf_tensor *const *)a, *y = *(const qk_gguf_tensor *const *)b;
    if (x->offset != y->offset)
        return (x->offset > y->offset) - (x->offset < y->offset);
    return (x->info_offset > y->info_offset) - (x->info_offset < y->info_offset);
}

/* Each tensor's bytes lie inside the file; no two tensors share a byte. */
static int check_data(rd *r, qk_gguf_parsed *ps)
{
    char field[128], nm[96], nm2[96];
    if (ps->n_tensors > 0 && ps->data_offset > r->size)
        return qk_err_at(r->err, r->path, "data section", ps->data_offset,
                         "starts past end of file (%llu bytes)", (unsigned long long)r->size);
    uint64_t room = ps->n_tensors > 0 ? r->size - ps->data_offset : 0;
    for (uint64_t i = 0; i < ps->n_tensors; i++) {
        qk_gguf_tensor *t = &ps->tensors[i];
        if (t->offset > room || t->nbytes > room - t->offset) {
            show(nm, sizeof nm, t->name.ptr, t->name.len);
            snprintf(field, sizeof field, "tensor '%s' data", nm);
            uint64_t at;
            if (qk_ckd_add(&at, ps->data_offset, t->offset))
                at = UINT64_MAX;
            return qk_err_at(r->err, r->path, field, at,
                             "%llu bytes at data offset %llu run past end of file (%llu bytes)",
                             (unsigned long long)t->nbytes, (unsigned long long)t->offset,
                             (unsigned long long)r->size);
        }
        t->data = r->p + ps->data_offset + t->offset;
    }
    if (ps->n_tensors < 2)
        return QK_OK;
    const qk_gguf_tensor **by = malloc((size_t)ps->n_tensors * sizeof *by);
    if (!by)
        return qk_errf(r->err, QK_EIO, "%s: out of memory", r->path);
    for (uint64_t i = 0; i < ps->n_tensors; i++)
        by[i] = &ps->tensors[i];
    qsort(by, (size_t)ps->n_tensors, sizeof *by, cmp_by_offset);
    const qk_gguf_tensor *prev = NULL; /* the non-empty tensor reaching furthest */
    int rc = QK_OK;
    for (uint64_t i = 0; i < ps->n_tensors && !rc; i++) {
        const qk_gguf_tensor *t = by[i];
        if (t->nbytes == 0)
            continue;
        if (prev && t->offset < prev->offset + prev->nbytes) {
            show(nm, sizeof nm, t->name.ptr, t->name.len);
            snprintf(field, sizeof field, "tensor '%s' data", nm);
            rc = qk_err_at(r->err, r->path, field, ps->data_offset + t->offset,
                           "overlaps tensor '%s' (data offsets %llu..%llu)",
                           show(nm2, sizeof nm2, prev->name.ptr, prev->name.len),
                           (unsigned long long)prev->offset,
                           (unsigned long long)(prev->offset + prev->nbytes));
        }
        if (!prev || t->offset + t->nbytes > prev->offset + prev->nbytes)
            prev = t;
    }
    free(by);
    return rc;
}

int qk_gguf_parse_file(const uint8_t *p, uint64_t size, const char *path, int shard,
                      qk_gguf_parsed *ps, qk_err *err)
{
    rd r = {p, size, 0, path, err};
    memset(ps, 0, sizeof *ps);
    int rc = need(&r, 4, "magic");
    if (rc)
        return rc;
    if (memcmp(p, "GGUF", 4) != 0) {
        char m[8];
        return qk_err_at(err, path, "magic", 0, "not a GGUF file (starts with '%s', expected 'GGUF')",
                         show(m, sizeof m, (const char *)p, 4));
    }
    r.pos = 4;
    rc = get32(&r, &ps->version, "version");
    if (rc)
        return rc;
    if (ps->version != 0 && (ps->version & 0xffffu) == 0)
        return qk_err_at(err, path, "version", 4,
                         "unsupported version 0x%08x: a big-endian GGUF file? only little-endian is read",
                         ps->version);
    if (ps->version != 2 && ps->version != 3)
        return qk_err_at(err, path, "version", 4, "unsupported version %u (only 2 and 3 are read)",
                         ps->version);
    uint64_t at = r.pos;
    rc = get64(&r, &ps->n_tensors, "n_tensors");
    if (rc)
        return rc;
    uint64_t n_tensors = ps->n_tensors;
    ps->n_tensors = 0; /* nothing allocated yet */
    uint64_t at_kv = r.pos;
    rc = get64(&r, &ps->n_kv, "n_kv");
    if (rc)
        return rc;
    if (ps->n_kv > left(&r) / MIN_KV_BYTES) {
        uint64_t n = ps->n_kv;
        ps->n_kv = 0;
        return qk_err_at(err, path, "n_kv", at_kv,
                         "%llu key/value pairs cannot fit in the %llu bytes left (one takes at least %d)",
                         (unsigned long long)n, (unsigned long long)left(&r), MIN_KV_BYTES);
    }
    if (ps->n_kv) {
        ps->kv = calloc((size_t)ps->n_kv, sizeof *ps->kv);
        if (!ps->kv) {
            ps->n_kv = 0;
            return qk_errf(err, QK_EIO, "%s: out of memory", path);
        }
    }
    rc = parse_kvs(&r, ps);
    if (!rc)
        rc = read_alignment(&r, ps);
    if (rc)
        return rc;

    /* checked after the key/values so that a cut inside them is reported there */
    if (n_tensors > left(&r) / MIN_TENSOR_INFO_BYTES)
        return qk_err_at(err, path, "n_tensors", at,
                         "%llu tensors cannot fit in the %llu bytes left after the key/values "
                         "(a tensor info takes at least %d)",
                         (unsigned long long)n_tensors, (unsigned long long)left(&r), MIN_TENSOR_INFO_BYTES);
    if (n_tensors) {
        ps->tensors = calloc((size_t)n_tensors, sizeof *ps->tensors);
        if (!ps->tensors)
            return qk_errf(err, QK_EIO, "%s: out of memory", path);
    }
    ps->n_tensors = n_tensors;
    for (uint64_t i = 0; i < n_tensors; i++) {
        rc = parse_tensor_info(&r, ps, i, shard);
        if (rc)
            return rc;
    }
    rc = qk_gguf_check_duplicate_tensors(path, ps->tensors, ps->n_tensors, NULL, err);
    if (rc)
        return rc;
    /* the data section starts at the next multiple of the alignment */
    if (qk_ckd_align(&ps->data_offset, r.pos, ps->alignment))
        return qk_err_at(err, path, "data section", r.pos, "offset overflows");
    return check_data(&r, ps);
}

