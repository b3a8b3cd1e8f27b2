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
 */
#include "formats/gguf.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/core/ckd.h"
#include "kernels/types.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf_read.c loads little-endian fields with memcpy: little-endian hosts only"
#endif

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_NAME 64      /* ggml's GGML_MAX_NAME: names are < 64 bytes */
#define GGUF_MAX_DEPTH 8      /* arrays of arrays nest at most this deep */
#define GGUF_MAX_SHARDS 99999 /* the %05d of the shard file names */

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

/* Bytes of one element of a fixed-size type; 0 for STRING, ARRAY, invalid. */
static size_t vtype_size(int vtype)
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

/* ---- little-endian loads --------------------------------------------- */

static uint16_t ld16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t ld32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t ld64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* f32 -> f64 keeping a NaN's payload bit for bit (a cast may quiet it), so
 * that writing a value back reproduces the file's bytes. */
static double f32_to_f64(uint32_t b)
{
    if ((b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu)) {
        uint64_t d = ((uint64_t)(b >> 31) << 63) | (0x7ffull << 52) | ((uint64_t)(b & 0x007fffffu) << 29);
        double f;
        memcpy(&f, &d, 8);
        return f;
    }
    float f;
    memcpy(&f, &b, 4);
    return (double)f;
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

    size_t es = vtype_size((int)elem);
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
            v->arr.n = i + 1; /* free_value visits only the items parsed */
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
    size_t es = vtype_size(type);
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

typedef struct parsed {
    uint32_t version;
    uint64_t n_kv;
    qk_gguf_kv *kv;
    uint64_t n_tensors;
    qk_gguf_tensor *tensors;
    uint32_t alignment;
    uint64_t data_offset;
} parsed;

static void free_kvs(qk_gguf_kv *kv, uint64_t n)
{
    for (uint64_t i = 0; kv && i < n; i++)
        free_value(&kv[i].v);
    free(kv);
}

static void free_parsed(parsed *ps)
{
    free_kvs(ps->kv, ps->n_kv);
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

static int check_duplicate_keys(rd *r, const parsed *ps)
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

static int parse_kvs(rd *r, parsed *ps)
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
            ps->n_kv = i + 1; /* free what was parsed */
            return rc;
        }
    }
    return check_duplicate_keys(r, ps);
}

static const qk_gguf_kv *find_kv(const qk_gguf_kv *kv, uint64_t n, const char *key, uint64_t *idx)
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
static int read_alignment(rd *r, parsed *ps)
{
    uint64_t i;
    const qk_gguf_kv *kv = find_kv(ps->kv, ps->n_kv, "general.alignment", &i);
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

static int parse_tensor_info(rd *r, parsed *ps, uint64_t i, int shard)
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

static int check_duplicate_tensors(rd *r, const qk_gguf_tensor *t, uint64_t n,
                                   char *const *paths)
{
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
static int check_data(rd *r, parsed *ps)
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

/* Parse and validate one whole GGUF file held at p[0..size). */
static int parse_file(const uint8_t *p, uint64_t size, const char *path, int shard,
                      parsed *ps, qk_err *err)
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
    rc = check_duplicate_tensors(&r, ps->tensors, ps->n_tensors, NULL);
    if (rc)
        return rc;
    /* the data section starts at the next multiple of the alignment */
    if (qk_ckd_align(&ps->data_offset, r.pos, ps->alignment))
        return qk_err_at(err, path, "data section", r.pos, "offset overflows");
    return check_data(&r, ps);
}

/* ---- opening ------------------------------------------------------------ */

void qk_gguf_close(qk_gguf *g)
{
    if (!g)
        return;
    free_kvs(g->kv, g->n_kv);
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
static void adopt_first(qk_gguf *g, parsed *ps)
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
    parsed ps;
    int rc = parse_file(g->maps[0].data, size, name, 0, &ps, err);
    if (rc) {
        free_parsed(&ps);
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

static int read_split(const parsed *ps, const char *path, split_info *s, qk_err *err)
{
    char field[64];
    memset(s, 0, sizeof *s);
    s->count_kv = find_kv(ps->kv, ps->n_kv, "split.count", &s->count_idx);
    if (!s->count_kv)
        return QK_OK;
    snprintf(field, sizeof field, "kv[%llu] 'split.count' value", (unsigned long long)s->count_idx);
    if (!kv_uint(s->count_kv, &s->count) || s->count < 1 || s->count > GGUF_MAX_SHARDS)
        return qk_err_at(err, path, field, s->count_kv->v.offset,
                         "split count must be an integer in 1..%d", GGUF_MAX_SHARDS);
    s->no_kv = find_kv(ps->kv, ps->n_kv, "split.no", &s->no_idx);
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
static int open_one(qk_gguf *g, int i, const char *path, parsed *ps, qk_err *err)
{
    memset(ps, 0, sizeof *ps);
    g->shard_paths[i] = strdup(path);
    if (!g->shard_paths[i])
        return qk_errf(err, QK_EIO, "%s: out of memory", path);
    int rc = qk_map_open(&g->maps[i], path, err);
    if (rc)
        return rc;
    return parse_file(g->maps[i].data, g->maps[i].size, path, i, ps, err);
}

/* A file of a split model must be shard want_no (0-based) of count. */
static int check_shard(const parsed *ps, const char *path, uint64_t want_no, uint64_t count,
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
        parsed ps;
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
        free_parsed(&ps);
        if (rc)
            return rc;
    }
    rd r = {g->maps[0].data, g->maps[0].size, 0, first, err};
    int rc = check_duplicate_tensors(&r, g->tensors, g->n_tensors, g->shard_paths);
    if (rc)
        return rc;
    uint64_t idx, want;
    const qk_gguf_kv *tc = find_kv(g->kv, g->n_kv, "split.tensors.count", &idx);
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
    parsed ps;
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
        free_parsed(&ps);
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
    free_parsed(&ps);
    qk_gguf_close(g);
    return rc;
}

/* ---- look-ups ----------------------------------------------------------- */

const qk_gguf_kv *qk_gguf_find(const qk_gguf *g, const char *key)
{
    return find_kv(g->kv, g->n_kv, key, NULL);
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
    size_t es = vtype_size(v->arr.elem);
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
