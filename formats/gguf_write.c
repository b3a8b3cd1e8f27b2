/* gguf_write.c - streaming GGUF v2/v3 writer.
 *
 * Produces the layout of gguf_write_out() in llama.cpp's ggml/src/gguf.cpp
 * (d32676d): header, key/values, tensor infos, zero padding to the
 * alignment, then each tensor's data padded to the alignment.  Tensor
 * offsets are assigned in order, each at the previous end rounded up to the
 * alignment, as ggml does, so copying every kv and tensor of a file written
 * by llama.cpp gives the identical bytes.  Key/values are serialized when
 * added; only tensor data is streamed.
 */
#include "formats/gguf.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/ckd.h"
#include "lib/core/outfile.h"
#include "kernels/types.h"

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_NAME 64 /* ggml's GGML_MAX_NAME: names are < 64 bytes */

/* A growable byte buffer; a failed allocation sets oom and drops writes. */
typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} bytes;

static void put(bytes *b, const void *src, size_t n)
{
    if (b->oom || n == 0)
        return;
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->n < n) {
            if (cap > SIZE_MAX / 2) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put32(bytes *b, uint32_t v) { put(b, &v, 4); } /* little-endian host */
static void put64(bytes *b, uint64_t v) { put(b, &v, 8); }
static void put_str(bytes *b, const char *s, uint64_t len)
{
    put64(b, len);
    put(b, s, (size_t)len);
}

typedef struct wkv {
    char *key;  /* copy, for replacement look-ups */
    size_t klen;
    bytes blob; /* the serialized key/value */
} wkv;

typedef struct wtensor {
    char *name;
    size_t nlen;
    int type;
    uint32_t n_dims;
    int64_t ne[4];
    uint64_t nbytes, offset;
} wtensor;

struct qk_gguf_writer {
    uint32_t version;
    uint32_t alignment;
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
    qk_out out;
    bool begun, failed;
    bool no_pad_empty;    /* no padding after a header without tensors */
    uint64_t data_start;  /* file offset of the data section */
    size_t cur;           /* tensor whose data is being written */
    uint64_t cur_written; /* its bytes so far */
};

qk_gguf_writer *qk_gguf_writer_new(uint32_t version)
{
    if (version != 2 && version != 3)
        return NULL;
    qk_gguf_writer *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->version = version;
    w->alignment = GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void qk_gguf_writer_no_pad_empty(qk_gguf_writer *w) { w->no_pad_empty = true; }

void qk_gguf_writer_free(qk_gguf_writer *w)
{
    if (!w)
        return;
    qk_out_abort(&w->out); /* removes the temp file unless committed */
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].blob.p);
    }
    for (size_t i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

static int oom(qk_err *err) { return qk_errf(err, QK_EIO, "gguf writer: out of memory"); }

/* ---- key/values ---------------------------------------------------------- */

static size_t vsize(int vtype)
{
    switch (vtype) {
    case QK_GGUF_U8: case QK_GGUF_I8: case QK_GGUF_BOOL: return 1;
    case QK_GGUF_U16: case QK_GGUF_I16: return 2;
    case QK_GGUF_U32: case QK_GGUF_I32: case QK_GGUF_F32: return 4;
    case QK_GGUF_U64: case QK_GGUF_I64: case QK_GGUF_F64: return 8;
    default: return 0;
    }
}

/* f64 -> f32 bits; a NaN keeps its payload (see f32_to_f64 in gguf_read.c). */
static uint32_t f64_to_f32_bits(double f)
{
    uint64_t d;
    memcpy(&d, &f, 8);
    if ((d & 0x7ff0000000000000ull) == 0x7ff0000000000000ull && (d & 0x000fffffffffffffull)) {
        uint32_t m = (uint32_t)((d >> 29) & 0x007fffffu);
        return (uint32_t)(d >> 63) << 31 | 0x7f800000u | (m ? m : 0x00400000u);
    }
    float x = (float)f;
    uint32_t b;
    memcpy(&b, &x, 4);
    return b;
}

/* The payload of a value (no type tag), nested arrays included. */
static int put_value(bytes *b, const qk_gguf_value *v, const char *key, int depth, qk_err *err)
{
    uint8_t tmp[8];
    switch (v->type) {
    case QK_GGUF_U8: case QK_GGUF_BOOL: tmp[0] = (uint8_t)v->u; put(b, tmp, 1); break;
    case QK_GGUF_I8: tmp[0] = (uint8_t)v->i; put(b, tmp, 1); break;
    case QK_GGUF_U16: { uint16_t x = (uint16_t)v->u; put(b, &x, 2); } break;
    case QK_GGUF_I16: { uint16_t x = (uint16_t)v->i; put(b, &x, 2); } break;
    case QK_GGUF_U32: put32(b, (uint32_t)v->u); break;
    case QK_GGUF_I32: put32(b, (uint32_t)v->i); break;
    case QK_GGUF_U64: put64(b, v->u); break;
    case QK_GGUF_I64: put64(b, (uint64_t)v->i); break;
    case QK_GGUF_F32: put32(b, f64_to_f32_bits(v->f)); break;
    case QK_GGUF_F64: put(b, &v->f, 8); break;
    case QK_GGUF_STRING:
        if (v->s.len && !v->s.ptr)
            return qk_errf(err, QK_EINPUT, "gguf writer: key '%s': string without bytes", key);
        put_str(b, v->s.ptr, v->s.len);
        break;
    case QK_GGUF_ARRAY: {
        int elem = v->arr.elem;
        if (elem < 0 || elem >= QK_GGUF_VTYPE_COUNT || (elem == QK_GGUF_ARRAY && depth >= 7))
            return qk_errf(err, QK_EINPUT, "gguf writer: key '%s': invalid array element type %d",
                           key, elem);
        put32(b, (uint32_t)elem);
        put64(b, v->arr.n);
        size_t es = vsize(elem);
        if (es) {
            uint64_t n;
            if (qk_ckd_mul(&n, v->arr.n, es) || n > SIZE_MAX || (n && !v->arr.raw))
                return qk_errf(err, QK_EINPUT, "gguf writer: key '%s': bad array of %llu %s", key,
                               (unsigned long long)v->arr.n, qk_gguf_vtype_name(elem));
            put(b, v->arr.raw, (size_t)n);
            break;
        }
        if (v->arr.n && !v->arr.items)
            return qk_errf(err, QK_EINPUT, "gguf writer: key '%s': array of %s without items", key,
                           qk_gguf_vtype_name(elem));
        for (uint64_t i = 0; i < v->arr.n; i++) {
            if (v->arr.items[i].type != elem)
                return qk_errf(err, QK_EINPUT,
                               "gguf writer: key '%s': item %llu is %s in an array of %s", key,
                               (unsigned long long)i, qk_gguf_vtype_name(v->arr.items[i].type),
                               qk_gguf_vtype_name(elem));
            int rc = put_value(b, &v->arr.items[i], key, depth + 1, err);
            if (rc)
                return rc;
        }
        break;
    }
    default:
        return qk_errf(err, QK_EINPUT, "gguf writer: key '%s': invalid value type %d", key, v->type);
    }
    return QK_OK;
}

/* Adds or replaces key (klen bytes) with value v. */
static int add_kv(qk_gguf_writer *w, const char *key, size_t klen, const qk_gguf_value *v, qk_err *err)
{
    char shown[80];
    snprintf(shown, sizeof shown, "%.*s", (int)(klen < 64 ? klen : 64), key);
    if (w->begun)
        return qk_errf(err, QK_EINPUT, "gguf writer: key '%s' added after the header was written", shown);
    if (klen == 0)
        return qk_errf(err, QK_EINPUT, "gguf writer: empty key");
    uint32_t alignment = w->alignment;
    if (klen == 17 && memcmp(key, "general.alignment", 17) == 0) {
        if (v->type != QK_GGUF_U32 || v->u == 0 || (v->u & (v->u - 1)) || v->u > UINT32_MAX)
            return qk_errf(err, QK_EINPUT,
                           "gguf writer: general.alignment must be a u32 power of two");
        alignment = (uint32_t)v->u;
    }
    bytes b = {0};
    put_str(&b, key, klen);
    put32(&b, (uint32_t)v->type);
    int rc = put_value(&b, v, shown, 0, err);
    if (!rc && b.oom)
        rc = oom(err);
    if (rc) {
        free(b.p);
        return rc;
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        if (w->kv[i].klen == klen && memcmp(w->kv[i].key, key, klen) == 0) {
            free(w->kv[i].blob.p); /* replace in place */
            w->kv[i].blob = b;
            w->alignment = alignment;
            return QK_OK;
        }
    }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 32;
        wkv *kv = realloc(w->kv, cap * sizeof *kv);
        if (!kv) {
            free(b.p);
            return oom(err);
        }
        w->kv = kv;
        w->cap_kv = cap;
    }
    char *k = malloc(klen + 1);
    if (!k) {
        free(b.p);
        return oom(err);
    }
    memcpy(k, key, klen);
    k[klen] = 0;
    w->kv[w->n_kv++] = (wkv){k, klen, b};
    w->alignment = alignment;
    return QK_OK;
}

int qk_gguf_w_kv_copy(qk_gguf_writer *w, const qk_gguf_kv *kv, qk_err *err)
{
    if (kv->key.len > SIZE_MAX - 1 || (kv->key.len && !kv->key.ptr))
        return qk_errf(err, QK_EINPUT, "gguf writer: invalid key");
    return add_kv(w, kv->key.ptr, (size_t)kv->key.len, &kv->v, err);
}

static int add_scalar(qk_gguf_writer *w, const char *key, qk_gguf_value v, qk_err *err)
{
    return add_kv(w, key, strlen(key), &v, err);
}

int qk_gguf_w_kv_u32(qk_gguf_writer *w, const char *key, uint32_t v, qk_err *err)
{
    return add_scalar(w, key, (qk_gguf_value){.type = QK_GGUF_U32, .u = v}, err);
}

int qk_gguf_w_kv_u16(qk_gguf_writer *w, const char *key, uint16_t v, qk_err *err)
{
    return add_scalar(w, key, (qk_gguf_value){.type = QK_GGUF_U16, .u = v}, err);
}

int qk_gguf_w_kv_i32(qk_gguf_writer *w, const char *key, int32_t v, qk_err *err)
{
    return add_scalar(w, key, (qk_gguf_value){.type = QK_GGUF_I32, .i = v}, err);
}

int qk_gguf_w_kv_u64(qk_gguf_writer *w, const char *key, uint64_t v, qk_err *err)
{
    return add_scalar(w, key, (qk_gguf_value){.type = QK_GGUF_U64, .u = v}, err);
}

int qk_gguf_w_kv_f32(qk_gguf_writer *w, const char *key, float v, qk_err *err)
{
    return add_scalar(w, key, (qk_gguf_value){.type = QK_GGUF_F32, .f = v}, err);
}

int qk_gguf_w_kv_bool(qk_gguf_writer *w, const char *key, bool v, qk_err *err)
{
    return add_scalar(w, key, (qk_gguf_value){.type = QK_GGUF_BOOL, .u = v ? 1 : 0}, err);
}

int qk_gguf_w_kv_str(qk_gguf_writer *w, const char *key, const char *v, qk_err *err)
{
    return add_scalar(w, key, (qk_gguf_value){.type = QK_GGUF_STRING, .s = {v, strlen(v)}}, err);
}

int qk_gguf_w_kv_arr_str(qk_gguf_writer *w, const char *key, const char *const *v, uint64_t n,
                         qk_err *err)
{
    if (n > SIZE_MAX / sizeof(qk_gguf_value))
        return oom(err);
    qk_gguf_value *items = n ? calloc((size_t)n, sizeof *items) : NULL;
    if (n && !items)
        return oom(err);
    for (uint64_t i = 0; i < n; i++)
        items[i] = (qk_gguf_value){.type = QK_GGUF_STRING, .s = {v[i], strlen(v[i])}};
    qk_gguf_value a = {.type = QK_GGUF_ARRAY, .arr = {QK_GGUF_STRING, n, NULL, items}};
    int rc = add_kv(w, key, strlen(key), &a, err);
    free(items);
    return rc;
}

int qk_gguf_w_kv_arr(qk_gguf_writer *w, const char *key, int elem_vtype, const void *raw, uint64_t n,
                     qk_err *err)
{
    if (!vsize(elem_vtype))
        return qk_errf(err, QK_EINPUT, "gguf writer: key '%s': %s is not a fixed-size element type",
                       key, qk_gguf_vtype_name(elem_vtype));
    qk_gguf_value a = {.type = QK_GGUF_ARRAY, .arr = {elem_vtype, n, raw, NULL}};
    return add_kv(w, key, strlen(key), &a, err);
}

/* ---- tensor infos -------------------------------------------------------- */

static int add_tensor(qk_gguf_writer *w, const char *name, size_t nlen, int type, uint32_t n_dims,
                      const int64_t *ne, qk_err *err)
{
    char shown[80];
    snprintf(shown, sizeof shown, "%.*s", (int)(nlen < 64 ? nlen : 64), name);
    if (w->begun)
        return qk_errf(err, QK_EINPUT, "gguf writer: tensor '%s' added after the header was written",
                       shown);
    if (nlen >= GGUF_MAX_NAME)
        return qk_errf(err, QK_EINPUT, "gguf writer: tensor name '%s...' is %zu bytes, ggml allows %d",
                       shown, nlen, GGUF_MAX_NAME - 1);
    const qk_type_traits *tt = type >= 0 && type < QK_TYPE_MAX ? qk_type_get(type) : NULL;
    if (!tt || !tt->in_gguf)
        return qk_errf(err, QK_EINPUT, "gguf writer: tensor '%s': type %d cannot be stored in GGUF",
                       shown, type);
    if (n_dims < 1 || n_dims > 4)
        return qk_errf(err, QK_EINPUT, "gguf writer: tensor '%s': %u dimensions, must be 1 to 4", shown,
                       n_dims);
    wtensor t = {.type = type, .n_dims = n_dims, .ne = {1, 1, 1, 1}};
    uint64_t count = 1;
    for (uint32_t j = 0; j < n_dims; j++) {
        if (ne[j] < 0)
            return qk_errf(err, QK_EINPUT, "gguf writer: tensor '%s': negative dimension", shown);
        t.ne[j] = ne[j];
        /* zero dims count as 1 so that every partial product fits too (as the reader checks) */
        if (qk_ckd_mul(&count, count, ne[j] ? (uint64_t)ne[j] : 1) || count > (uint64_t)INT64_MAX)
            return qk_errf(err, QK_EINPUT, "gguf writer: tensor '%s': element count overflows", shown);
    }
    if (t.ne[0] % tt->blck != 0)
        return qk_errf(err, QK_EINPUT,
                       "gguf writer: tensor '%s': %lld columns is not a multiple of the %s block size %d",
                       shown, (long long)t.ne[0], tt->name, tt->blck);
    uint64_t row;
    if (qk_ckd_mul(&row, (uint64_t)(t.ne[0] / tt->blck), tt->type_size) ||
        qk_ckd_mul(&t.nbytes, row, (uint64_t)(t.ne[1] * t.ne[2] * t.ne[3])))
        return qk_errf(err, QK_EINPUT, "gguf writer: tensor '%s': size overflows", shown);
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? 2 * w->cap_t : 64;
        wtensor *p = realloc(w->t, cap * sizeof *p);
        if (!p)
            return oom(err);
        w->t = p;
        w->cap_t = cap;
    }
    t.name = malloc(nlen + 1);
    if (!t.name)
        return oom(err);
    memcpy(t.name, name, nlen);
    t.name[nlen] = 0;
    t.nlen = nlen;
    w->t[w->n_t++] = t;
    return QK_OK;
}

int qk_gguf_w_tensor(qk_gguf_writer *w, const char *name, int type, uint32_t n_dims, const int64_t *ne,
                     qk_err *err)
{
    return add_tensor(w, name, strlen(name), type, n_dims, ne, err);
}

int qk_gguf_w_tensor_copy(qk_gguf_writer *w, const qk_gguf_tensor *t, qk_err *err)
{
    if (t->name.len >= GGUF_MAX_NAME || (t->name.len && !t->name.ptr))
        return qk_errf(err, QK_EINPUT, "gguf writer: invalid tensor name");
    return add_tensor(w, t->name.ptr, (size_t)t->name.len, t->type, t->n_dims, t->ne, err);
}

/* ---- output ---------------------------------------------------------------- */

static int cmp_tensor_name(const void *a, const void *b)
{
    const wtensor *x = *(const wtensor *const *)a, *y = *(const wtensor *const *)b;
    size_t n = x->nlen < y->nlen ? x->nlen : y->nlen;
    int c = memcmp(x->name, y->name, n);
    return c ? c : (x->nlen > y->nlen) - (x->nlen < y->nlen);
}

static int check_unique_names(qk_gguf_writer *w, qk_err *err)
{
    if (w->n_t < 2)
        return QK_OK;
    const wtensor **v = malloc(w->n_t * sizeof *v);
    if (!v)
        return oom(err);
    for (size_t i = 0; i < w->n_t; i++)
        v[i] = &w->t[i];
    qsort(v, w->n_t, sizeof *v, cmp_tensor_name);
    int rc = QK_OK;
    for (size_t i = 1; i < w->n_t && !rc; i++)
        if (cmp_tensor_name(&v[i - 1], &v[i]) == 0)
            rc = qk_errf(err, QK_EINPUT, "gguf writer: tensor '%s' added twice", v[i]->name);
    free(v);
    return rc;
}

/* Offsets: each tensor at the previous end rounded up to the alignment. */
static int assign_offsets(qk_gguf_writer *w, qk_err *err)
{
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        w->t[i].offset = off;
        if (qk_ckd_add(&off, off, w->t[i].nbytes) || qk_ckd_align(&off, off, w->alignment))
            return qk_errf(err, QK_EINPUT, "gguf writer: data section size overflows");
    }
    return QK_OK;
}

static int put_header(qk_gguf_writer *w, bytes *b)
{
    put(b, "GGUF", 4);
    put32(b, w->version);
    put64(b, w->n_t);
    put64(b, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++)
        put(b, w->kv[i].blob.p, w->kv[i].blob.n);
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        put_str(b, t->name, t->nlen);
        put32(b, t->n_dims);
        for (uint32_t j = 0; j < t->n_dims; j++)
            put64(b, (uint64_t)t->ne[j]);
        put32(b, (uint32_t)t->type);
        put64(b, t->offset);
    }
    size_t pad = (w->alignment - b->n % w->alignment) % w->alignment;
    if (!w->n_t && w->no_pad_empty)
        pad = 0;
    while (pad-- > 0)
        put(b, "", 1);
    return b->oom ? -1 : 0;
}

static int fail(qk_gguf_writer *w, int rc)
{
    w->failed = true;
    return rc;
}

int qk_gguf_w_begin(qk_gguf_writer *w, const char *path, qk_err *err)
{
    if (w->failed || w->begun)
        return qk_errf(err, QK_EINPUT, "%s: gguf writer: %s", path,
                       w->begun ? "header already written" : "an earlier step failed");
    int rc = check_unique_names(w, err);
    if (!rc)
        rc = assign_offsets(w, err);
    if (rc)
        return rc;
    bytes b = {0};
    if (put_header(w, &b)) {
        free(b.p);
        return oom(err);
    }
    rc = qk_out_open(&w->out, path, err);
    if (!rc)
        rc = qk_out_write(&w->out, b.p, b.n, err);
    free(b.p);
    w->begun = true;
    if (rc)
        return fail(w, rc);
    w->data_start = w->out.written;
    return QK_OK;
}

/* The writer is ready for tensor data. */
static int check_streaming(qk_gguf_writer *w, qk_err *err)
{
    const char *path = w->out.dst ? w->out.dst : "-";
    if (w->failed)
        return qk_errf(err, QK_EINPUT, "%s: gguf writer: an earlier step failed", path);
    if (!w->begun)
        return qk_errf(err, QK_EINPUT, "gguf writer: tensor data before qk_gguf_w_begin");
    if (w->cur >= w->n_t)
        return fail(w, qk_errf(err, QK_EINPUT, "%s: gguf writer: data past the last tensor", path));
    return QK_OK;
}

int qk_gguf_w_data(qk_gguf_writer *w, const void *buf, size_t n, qk_err *err)
{
    int rc = check_streaming(w, err);
    if (rc)
        return rc;
    const wtensor *t = &w->t[w->cur];
    if (n > t->nbytes - w->cur_written)
        return fail(w, qk_errf(err, QK_EINPUT, "%s: gguf writer: tensor '%s' takes %llu bytes, given more",
                               w->out.dst, t->name, (unsigned long long)t->nbytes));
    rc = qk_out_write(&w->out, buf, n, err);
    if (rc)
        return fail(w, rc);
    w->cur_written += n;
    return QK_OK;
}

int qk_gguf_w_end_tensor(qk_gguf_writer *w, qk_err *err)
{
    int rc = check_streaming(w, err);
    if (rc)
        return rc;
    const wtensor *t = &w->t[w->cur];
    if (w->cur_written != t->nbytes)
        return fail(w, qk_errf(err, QK_EINPUT, "%s: gguf writer: tensor '%s' takes %llu bytes, given %llu",
                               w->out.dst, t->name, (unsigned long long)t->nbytes,
                               (unsigned long long)w->cur_written));
    uint64_t rel = w->out.written - w->data_start;
    rc = qk_out_pad(&w->out, (size_t)((w->alignment - rel % w->alignment) % w->alignment), err);
    if (rc)
        return fail(w, rc);
    w->cur++;
    w->cur_written = 0;
    return QK_OK;
}

int qk_gguf_writer_finish(qk_gguf_writer *w, qk_err *err)
{
    if (w->failed)
        return qk_errf(err, QK_EINPUT, "%s: gguf writer: an earlier step failed",
                       w->out.dst ? w->out.dst : "-");
    if (!w->begun)
        return qk_errf(err, QK_EINPUT, "gguf writer: finish before qk_gguf_w_begin");
    if (w->cur != w->n_t)
        return fail(w, qk_errf(err, QK_EINPUT, "%s: gguf writer: data of %zu of %zu tensors written",
                               w->out.dst, w->cur, w->n_t));
    int rc = qk_out_commit(&w->out, err);
    w->failed = true; /* done: nothing more may be written */
    return rc;
}
