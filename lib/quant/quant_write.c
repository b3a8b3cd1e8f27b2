/* quant_write.c - the second half of qk-quant's GGUF path: the output
 * metadata (llama-quantize's key order and rewrites) and the streaming
 * writer that encodes each tensor in slabs across the thread pool and
 * writes shards atomically.  The plan is quant_model.c's. */
#include "lib/quant/quant_plan.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu.h"
#include "lib/core/threads.h"
#include "lib/quant/quant_rules.h"

/* ---- output metadata ------------------------------------------------------------- */

/* An ordered key/value list with gguf_set_val's semantics: setting a key
 * removes it and appends it at the end. */
typedef struct okv {
    char key[160];
    qk_gguf_value v;    /* the input's value, or one built here */
    bool own_str;       /* v is a string held in sbuf (fixed up when written) */
    char sbuf[128];
} okv;

typedef struct kvlist {
    okv *v;
    size_t n, cap;
} kvlist;

static void kvl_remove(kvlist *l, const char *key)
{
    for (size_t i = 0; i < l->n; i++) {
        if (!strcmp(l->v[i].key, key)) {
            memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof *l->v);
            l->n--;
            return;
        }
    }
}

static okv *kvl_append(kvlist *l, const char *key)
{
    kvl_remove(l, key);
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        okv *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return NULL;
        l->v = v;
        l->cap = cap;
    }
    okv *e = &l->v[l->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->key, sizeof e->key, "%s", key);
    return e;
}

static bool kvl_set_uint(kvlist *l, const char *key, int vtype, uint64_t v)
{
    okv *e = kvl_append(l, key);
    if (!e)
        return false;
    e->v.type = vtype;
    e->v.u = v;
    return true;
}

static bool kvl_set_i32(kvlist *l, const char *key, int32_t v)
{
    okv *e = kvl_append(l, key);
    if (!e)
        return false;
    e->v.type = QK_GGUF_I32;
    e->v.i = v;
    return true;
}

static bool kvl_set_str(kvlist *l, const char *key, const char *s)
{
    okv *e = kvl_append(l, key);
    if (!e)
        return false;
    snprintf(e->sbuf, 128, "%s", s); /* llama_model_kv_override: 127 bytes at most */
    e->v.type = QK_GGUF_STRING;
    e->own_str = true;
    return true;
}

static bool kvl_set_kvo(kvlist *l, const qk_quant_kvo *o)
{
    switch (o->tag) {
    case QK_KVO_FLOAT: {
        okv *e = kvl_append(l, o->key);
        if (!e)
            return false;
        e->v.type = QK_GGUF_F32;
        e->v.f = (double)(float)o->f;
        return true;
    }
    case QK_KVO_INT: /* written as u32 of the absolute value (llama.cpp PR 14182) */
        return kvl_set_uint(l, o->key, QK_GGUF_U32, (uint32_t)(o->i < 0 ? -(uint64_t)o->i : (uint64_t)o->i));
    case QK_KVO_BOOL:
        return kvl_set_uint(l, o->key, QK_GGUF_BOOL, o->b);
    default:
        return kvl_set_str(l, o->key, o->s);
    }
}

/* The metadata of shard 0, in llama-quant's order of operations. */
static int build_kvs(const qk_quant_plan *p, kvlist *l, qk_err *err)
{
    const qk_gguf *g = p->g;
    bool ok = true;
    for (uint64_t i = 0; i < g->n_kv && ok; i++) {
        const qk_gguf_kv *kv = &g->kv[i];
        if (kv->key.len >= 160)
            return qk_err_at(err, g->path, "key", kv->offset, "key longer than 159 bytes");
        char key[160];
        memcpy(key, kv->key.ptr, (size_t)kv->key.len);
        key[kv->key.len] = 0;
        okv *e = kvl_append(l, key);
        if (!e)
            ok = false;
        else
            e->v = kv->v;
    }
    ok = ok && kvl_set_uint(l, "general.quantization_version", QK_GGUF_U32, QNT_VERSION);
    ok = ok && kvl_set_uint(l, "general.file_type", QK_GGUF_U32, p->file_type);
    kvl_remove(l, "split.no");
    kvl_remove(l, "split.count");
    kvl_remove(l, "split.tensors.count");
    for (size_t i = 0; i < p->o.n_kvo && ok; i++)
        ok = kvl_set_kvo(l, &p->o.kvo[i]);
    const qk_imatrix *im = p->o.imatrix;
    if (im && ok) {
        ok = kvl_set_str(l, "quantize.imatrix.file", p->o.imatrix_file ? p->o.imatrix_file : "");
        if (ok && im->n_datasets)
            ok = kvl_set_str(l, "quantize.imatrix.dataset", im->datasets[0]);
        ok = ok && kvl_set_uint(l, "quantize.imatrix.entries_count", QK_GGUF_U32, (uint32_t)im->n);
        if (ok && im->chunk_count > 0)
            ok = kvl_set_uint(l, "quantize.imatrix.chunks_count", QK_GGUF_U32, (uint32_t)im->chunk_count);
    }
    if (ok && p->o.calibrated) {
        ok = kvl_set_str(l, "quantize.gptq.dataset", p->o.calib_file ? p->o.calib_file : "");
        ok = ok && kvl_set_uint(l, "quantize.gptq.chunks_count", QK_GGUF_U32, (uint32_t)p->o.calib_chunks);
    }
    const plan_priv *pv = priv_of(p);
    if (ok && pv->pruned) {
        char key[160];
        snprintf(key, sizeof key, "%s.block_count", pv->arch);
        ok = kvl_set_uint(l, key, QK_GGUF_U32, (uint32_t)pv->n_layer_out);
    }
    return ok ? 0 : qk_errf(err, QK_EIO, "out of memory");
}

static int add_split_kvs(const qk_quant_plan *p, kvlist *l, int shard, qk_err *err)
{
    if (p->n_shards <= 1)
        return 0;
    bool ok = kvl_set_uint(l, "split.no", QK_GGUF_U16, (uint64_t)shard) &&
              kvl_set_uint(l, "split.count", QK_GGUF_U16, (uint64_t)p->n_shards) &&
              kvl_set_i32(l, "split.tensors.count", (int32_t)p->n);
    return ok ? 0 : qk_errf(err, QK_EIO, "out of memory");
}

char *qk_quant_shard_path(const qk_quant_plan *p, const char *out, int shard)
{
    if (!p->o.keep_split)
        return strdup(out);
    size_t n = strlen(out) + 32;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s-%05d-of-%05d.gguf", out, shard + 1, p->n_shards);
    return s;
}

/* ---- streaming the tensors --------------------------------------------------------- */

#define GRAIN_ELEMS 32768   /* elements per work item */
#define SLAB_GRAINS 32      /* work items per slab: fixed, so results never depend on threads */

typedef struct slab {
    const qk_kernels *sk, *dk; /* source decoder, target encoder: active CPU level */
    const uint8_t *src;     /* first row of the slab */
    size_t src_rs, dst_rs;
    int64_t ne0;
    size_t grain;
    float *f32;             /* converted rows (NULL: the source is F32) */
    uint8_t *out;
    float *dec;             /* --measure: decoded rows */
    const float *imatrix;
    bool check_finite;
    double *err2, *ref2;    /* per work item */
    atomic_int bad;         /* non-finite source value seen */
} slab;

static void slab_range(void *ctx, size_t b, size_t e)
{
    slab *s = ctx;
    int64_t rows = (int64_t)(e - b), n = rows * s->ne0;
    const float *x;
    if (!s->f32) {
        x = (const float *)(s->src + b * s->src_rs);
    } else {
        s->sk->to_float(s->src + b * s->src_rs, s->f32 + b * (size_t)s->ne0, n);
        x = s->f32 + b * (size_t)s->ne0;
    }
    if (s->check_finite) {
        for (int64_t i = 0; i < n; i++) {
            if (!isfinite(x[i])) {
                atomic_store(&s->bad, 1);
                return;
            }
        }
    }
    s->dk->quantize(x, s->out + b * s->dst_rs, rows, s->ne0, s->imatrix);
    if (s->dec) {
        float *d = s->dec + b * (size_t)s->ne0;
        s->dk->to_float(s->out + b * s->dst_rs, d, n);
        double e2 = 0, r2 = 0;
        for (int64_t i = 0; i < n; i++) {
            double dx = (double)x[i] - (double)d[i];
            e2 += dx * dx;
            r2 += (double)x[i] * (double)x[i];
        }
        s->err2[b / s->grain] = e2;
        s->ref2[b / s->grain] = r2;
    }
}

/* A reusable buffer that only grows. */
typedef struct buf {
    void *p;
    size_t n;
} buf;

static bool grow(buf *b, size_t want)
{
    if (want <= b->n)
        return true;
    void *q = realloc(b->p, want);
    if (!q)
        return false;
    b->p = q;
    b->n = want;
    return true;
}

typedef struct bufs {
    buf f32, out, dec;
} bufs;

typedef struct runner {
    qk_quant_plan *p;
    qk_gguf_writer **w;
    bufs b;
    void (*progress)(void *, uint64_t);
    void *pctx;
} runner;

/* A tensor kept in its type: copy the bytes (checking float data is finite,
 * as llama.cpp's loader does). */
static int copy_tensor(runner *rn, qk_quant_item *it, qk_err *err)
{
    const qk_gguf_tensor *s = it->src;
    qk_gguf_writer *w = rn->w[it->shard];
    const size_t piece = 1 << 22;
    for (uint64_t off = 0; off < s->nbytes; off += piece) {
        size_t n = s->nbytes - off < piece ? (size_t)(s->nbytes - off) : piece;
        if (is_float_type(s->type)) {
            size_t es = s->type == QK_F32 ? 4 : 2, cnt = n / es;
            if (!grow(&rn->b.f32, cnt * sizeof(float)))
                return qk_errf(err, QK_EIO, "out of memory");
            float *f = rn->b.f32.p;
            qk_type_get(s->type)->to_float(s->data + off, f, (int64_t)cnt);
            for (size_t i = 0; i < cnt; i++)
                if (!isfinite(f[i]))
                    return qk_errf(err, QK_EINPUT, "%s: tensor data is not valid (NaN or infinity)", it->name);
        }
        int rc = qk_gguf_w_data(w, s->data + off, n, err);
        if (rc)
            return rc;
    }
    if (rn->progress)
        rn->progress(rn->pctx, (uint64_t)s->ne[0] * nrows_of(s));
    return 0;
}

/* A tensor encoded before the run (GPTQ): its bytes, measured like the others. */
static int write_encoded(runner *rn, qk_quant_item *it, qk_err *err)
{
    const qk_gguf_tensor *s = it->src;
    const size_t rs = qk_row_size(it->type, s->ne[0]), row_f = (size_t)s->ne[0] * sizeof(float);
    const uint64_t rows = nrows_of(s);
    const qk_type_traits *st = qk_type_get(s->type), *dt = qk_type_get(it->type);
    const bool measure = rn->p->o.measure && dt->to_float && st->to_float;
    it->err2 = it->ref2 = 0;
    if (measure && (!grow(&rn->b.f32, row_f) || !grow(&rn->b.dec, row_f)))
        return qk_errf(err, QK_EIO, "out of memory");
    for (uint64_t r = 0; r < rows && measure; r++) {
        float *x = rn->b.f32.p, *d = rn->b.dec.p;
        st->to_float(s->data + r * qk_row_size(s->type, s->ne[0]), x, s->ne[0]);
        dt->to_float(it->data + r * rs, d, s->ne[0]);
        for (int64_t i = 0; i < s->ne[0]; i++) {
            const double dx = (double)x[i] - (double)d[i];
            it->err2 += dx * dx;
            it->ref2 += (double)x[i] * (double)x[i];
        }
    }
    it->measured = measure;
    int rc = qk_gguf_w_data(rn->w[it->shard], it->data, (size_t)(rows * rs), err);
    if (!rc && rn->progress)
        rn->progress(rn->pctx, rows * (uint64_t)s->ne[0]);
    return rc;
}

static int encode_tensor(runner *rn, qk_quant_item *it, qk_err *err)
{
    if (it->data)
        return write_encoded(rn, it, err);
    const qk_gguf_tensor *s = it->src;
    const int nthreads = rn->p->o.nthreads;
    slab sl = {.sk = qk_kernels_for(s->type), .dk = qk_kernels_for(it->type), .ne0 = s->ne[0],
               .src_rs = qk_row_size(s->type, s->ne[0]), .dst_rs = qk_row_size(it->type, s->ne[0]),
               .check_finite = is_float_type(s->type)};
    size_t grain = (size_t)(GRAIN_ELEMS / s->ne[0]);
    sl.grain = grain ? grain : 1;
    uint64_t rows_per_mat = (uint64_t)s->ne[1], n_mat = (uint64_t)s->ne[2] * (uint64_t)s->ne[3];
    uint64_t slab_rows = (uint64_t)sl.grain * SLAB_GRAINS;
    if (slab_rows > rows_per_mat)
        slab_rows = rows_per_mat;
    size_t row_f = (size_t)s->ne[0] * sizeof(float);
    bool measure = rn->p->o.measure && sl.dk->to_float;
    double e2[SLAB_GRAINS], r2[SLAB_GRAINS];
    sl.err2 = e2;
    sl.ref2 = r2;
    if ((s->type != QK_F32 && !grow(&rn->b.f32, slab_rows * row_f)) ||
        !grow(&rn->b.out, slab_rows * sl.dst_rs) || (measure && !grow(&rn->b.dec, slab_rows * row_f)))
        return qk_errf(err, QK_EIO, "out of memory");
    sl.f32 = s->type == QK_F32 ? NULL : rn->b.f32.p;
    sl.out = rn->b.out.p;
    sl.dec = measure ? rn->b.dec.p : NULL;
    it->err2 = it->ref2 = 0;
    for (uint64_t m = 0; m < n_mat; m++) {
        /* experts (ne[2] > 1) have one importance vector each */
        sl.imatrix = it->imatrix ? it->imatrix + (m % (uint64_t)s->ne[2]) * (uint64_t)s->ne[0] : NULL;
        for (uint64_t r0 = 0; r0 < rows_per_mat; r0 += slab_rows) {
            uint64_t rows = rows_per_mat - r0 < slab_rows ? rows_per_mat - r0 : slab_rows;
            sl.src = s->data + (m * rows_per_mat + r0) * sl.src_rs;
            atomic_init(&sl.bad, 0);
            qk_parallel_for(nthreads, (size_t)rows, sl.grain, slab_range, &sl);
            if (atomic_load(&sl.bad))
                return qk_errf(err, QK_EINPUT, "%s: tensor data is not valid (NaN or infinity)", it->name);
            if (measure) {
                size_t nr = ((size_t)rows + sl.grain - 1) / sl.grain;
                for (size_t k = 0; k < nr; k++) {
                    it->err2 += e2[k];
                    it->ref2 += r2[k];
                }
            }
            int rc = qk_gguf_w_data(rn->w[it->shard], sl.out, (size_t)rows * sl.dst_rs, err);
            if (rc)
                return rc;
            if (rn->progress)
                rn->progress(rn->pctx, rows * (uint64_t)s->ne[0]);
        }
    }
    it->measured = measure;
    return 0;
}

static int put_kv(qk_gguf_writer *w, const okv *e, qk_err *err)
{
    qk_gguf_kv kv = {.key = {e->key, strlen(e->key)}, .v = e->v};
    if (e->own_str)
        kv.v.s = (qk_str){e->sbuf, strlen(e->sbuf)};
    return qk_gguf_w_kv_copy(w, &kv, err);
}

/* Shard 0 carries all the metadata, the others only the split keys (as
 * llama-quant's fresh gguf contexts do). */
static int begin_shard(runner *rn, int shard, kvlist *base, const char *path, qk_err *err)
{
    qk_quant_plan *p = rn->p;
    kvlist empty = {0};
    kvlist *l = shard == 0 ? base : &empty;
    int rc = add_split_kvs(p, l, shard, err);
    qk_gguf_writer *w = rc ? NULL : qk_gguf_writer_new(3);
    if (!rc && !w)
        rc = qk_errf(err, QK_EIO, "out of memory");
    for (size_t i = 0; !rc && i < l->n; i++)
        rc = put_kv(w, &l->v[i], err);
    for (size_t i = 0; !rc && i < p->n; i++) {
        const qk_quant_item *it = &p->t[i];
        if (it->shard != shard)
            continue;
        uint32_t nd = (uint32_t)qk_qrules_n_dims(it->src->ne);
        rc = qk_gguf_w_tensor(w, it->name, it->type, nd, it->src->ne, err);
    }
    if (!rc)
        rc = qk_gguf_w_begin(w, path, err);
    free(empty.v);
    rn->w[shard] = w;
    return rc;
}

int qk_quant_run(qk_quant_plan *p, const char *out, void (*progress)(void *, uint64_t), void *pctx,
                 qk_err *err)
{
    runner rn = {.p = p, .progress = progress, .pctx = pctx};
    kvlist base = {0};
    char **paths = calloc((size_t)p->n_shards, sizeof *paths);
    rn.w = calloc((size_t)p->n_shards, sizeof *rn.w);
    int rc = !paths || !rn.w ? qk_errf(err, QK_EIO, "out of memory") : 0;
    for (int s = 0; !rc && s < p->n_shards; s++) {
        paths[s] = qk_quant_shard_path(p, out, s);
        if (!paths[s])
            rc = qk_errf(err, QK_EIO, "out of memory");
        for (int k = 0; !rc && k < p->g->n_shards; k++)
            if (qk_same_file(paths[s], p->g->shard_paths[k]))
                rc = qk_errf(err, QK_EINPUT, "%s: output is the same file as the input", paths[s]);
    }
    if (!rc)
        rc = build_kvs(p, &base, err);
    for (int s = 0; !rc && s < p->n_shards; s++)
        rc = begin_shard(&rn, s, &base, paths[s], err);
    for (size_t i = 0; !rc && i < p->n; i++) {
        qk_quant_item *it = &p->t[i];
        rc = it->quantize ? encode_tensor(&rn, it, err) : copy_tensor(&rn, it, err);
        if (!rc)
            rc = qk_gguf_w_end_tensor(rn.w[it->shard], err);
    }
    /* every shard is complete: rename them all into place */
    for (int s = 0; !rc && s < p->n_shards; s++)
        rc = qk_gguf_writer_finish(rn.w[s], err);
    for (int s = 0; s < p->n_shards; s++) {
        if (rn.w)
            qk_gguf_writer_free(rn.w[s]);
        if (paths)
            free(paths[s]);
    }
    free(rn.w);
    free(paths);
    free(base.v);
    free(rn.b.f32.p);
    free(rn.b.out.p);
    free(rn.b.dec.p);
    return rc;
}
