#include "formats/tensorset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/ckpt.h"
#include "formats/gguf.h"
#include "formats/hfdir.h"
#include "kernels/types.h"

static int oom(qk_err *err, const char *path) { return qk_errf(err, QK_EIO, "%s: out of memory", path); }

static char *dupn(const char *p, size_t n)
{
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, p, n);
        s[n] = 0;
    }
    return s;
}

static int from_gguf(qk_tensorset *s, qk_err *err)
{
    qk_gguf *g;
    int rc = qk_gguf_open(&g, s->path, 0, err);
    if (rc)
        return rc;
    s->kind = QK_SET_GGUF;
    s->gguf = g;
    s->n = g->n_tensors;
    s->t = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *s->t);
    if (!s->t)
        return oom(err, s->path);
    s->file_bytes = g->total_size;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const qk_gguf_tensor *gt = &g->tensors[i];
        qk_tensor *t = &s->t[i];
        if (!(t->name = dupn(gt->name.ptr, gt->name.len)))
            return oom(err, s->path);
        t->type = gt->type;
        t->type_name = qk_type_get(gt->type)->name;
        t->n_dims = (int)gt->n_dims;
        t->nelem = 1;
        for (int d = 0; d < QK_MAX_DIMS; d++)
            t->ne[d] = d < 4 ? gt->ne[d] : 1;
        for (int d = 0; d < 4; d++)
            t->nelem *= (uint64_t)gt->ne[d];
        t->nbytes = gt->nbytes;
        t->data = gt->data;
        t->file = g->shard_paths ? g->shard_paths[gt->shard] : g->path;
        t->offset = (uint64_t)(gt->data - g->maps[gt->shard].data);
    }
    return 0;
}

/* The dequantized view of a quantized directory (see tensorset.h). */
typedef struct deq_view {
    qk_ckpt *ck;
    float **buf; /* per listed tensor, NULL when stored data is used */
    uint64_t n;
} deq_view;

static void deq_free(deq_view *d)
{
    if (!d)
        return;
    for (uint64_t i = 0; d->buf && i < d->n; i++)
        free(d->buf[i]);
    free(d->buf);
    qk_ckpt_close(d->ck);
    free(d);
}

/* 1: listed the logical tensors; 0: not quantized (the caller lists the
 * stored tensors); < 0: error (rc in *rc). */
static int from_ckpt(qk_tensorset *s, qk_hfdir *h, int *rc, qk_err *err)
{
    qk_ckpt *ck = NULL;
    if ((*rc = qk_ckpt_open(&ck, h, err)))
        return -1;
    if (!ck->quantized) {
        qk_ckpt_close(ck);
        return 0;
    }
    deq_view *d = calloc(1, sizeof *d);
    if (!d || !(d->buf = calloc(ck->n ? ck->n : 1, sizeof *d->buf)) ||
        !(s->t = calloc(ck->n ? ck->n : 1, sizeof *s->t))) {
        free(d ? d->buf : NULL);
        free(d);
        qk_ckpt_close(ck);
        *rc = oom(err, s->path);
        return -1;
    }
    d->ck = ck;
    d->n = ck->n;
    s->deq = d;
    s->n = ck->n;
    for (uint64_t i = 0; i < ck->n; i++) {
        const qk_ck_tensor *c = &ck->t[i];
        qk_tensor *t = &s->t[i];
        if (!(t->name = strdup(c->name))) {
            *rc = oom(err, s->path);
            return -1;
        }
        if (c->n_dims > QK_MAX_DIMS) {
            *rc = qk_errf(err, QK_EINPUT, "%s: tensor '%s' has %d dimensions (at most %d supported)",
                          h->file_paths[c->w->file], c->name, c->n_dims, QK_MAX_DIMS);
            return -1;
        }
        t->n_dims = c->n_dims;
        for (int k = 0; k < QK_MAX_DIMS; k++)
            t->ne[k] = k < c->n_dims ? c->shape[c->n_dims - 1 - k] : 1;
        t->nelem = c->nelem;
        t->nbytes = c->stored_bytes;
        t->file = h->file_paths[c->w->file];
        t->offset = c->w->file_offset;
        if (c->layout == QK_CK_DENSE) {
            t->type = c->w->type;
            t->type_name = c->w->type >= 0 ? qk_type_get(c->w->type)->name : c->w->dtype;
            t->data = c->w->data;
            continue;
        }
        t->type = QK_F32;
        t->type_name = qk_ck_layout_name(c->layout);
        if (c->nelem > SIZE_MAX / sizeof(float) || !(d->buf[i] = malloc(c->nelem ? c->nelem * sizeof(float) : 1))) {
            *rc = oom(err, s->path);
            return -1;
        }
        if ((*rc = qk_ckpt_read(ck, c, d->buf[i], err)))
            return -1;
        t->data = (const uint8_t *)d->buf[i];
    }
    return 1;
}

static int from_safetensors(qk_tensorset *s, qk_err *err)
{
    qk_hfdir *h;
    int rc = qk_hf_open(&h, s->path, err);
    if (rc)
        return rc;
    s->kind = QK_SET_SAFETENSORS;
    s->st = h;
    for (int f = 0; f < h->n_files; f++)
        s->file_bytes += h->files[f]->size;
    int q = from_ckpt(s, h, &rc, err);
    if (q)
        return q < 0 ? rc : 0;
    s->n = h->n_tensors;
    s->t = calloc(h->n_tensors ? h->n_tensors : 1, sizeof *s->t);
    if (!s->t)
        return oom(err, s->path);
    for (uint64_t i = 0; i < h->n_tensors; i++) {
        const qk_hf_tensor *ht = &h->tensors[i];
        qk_tensor *t = &s->t[i];
        if (!(t->name = strdup(ht->name)))
            return oom(err, s->path);
        if (ht->n_dims > QK_MAX_DIMS)
            return qk_errf(err, QK_EINPUT, "%s: tensor '%s' has %d dimensions (at most %d supported)",
                           h->file_paths[ht->file], ht->name, ht->n_dims, QK_MAX_DIMS);
        t->type = ht->type;
        t->type_name = ht->type >= 0 ? qk_type_get(ht->type)->name : ht->dtype;
        t->n_dims = ht->n_dims;
        for (int d = 0; d < QK_MAX_DIMS; d++)
            t->ne[d] = d < ht->n_dims ? ht->ne[d] : 1;
        t->nelem = ht->nelem;
        t->nbytes = ht->nbytes;
        t->data = ht->data;
        t->file = h->file_paths[ht->file];
        t->offset = ht->file_offset;
    }
    return 0;
}

static int is_gguf(const char *path)
{
    FILE *f = fopen(path, "rb");
    char m[4] = {0};
    int ok = f && fread(m, 1, 4, f) == 4 && memcmp(m, "GGUF", 4) == 0;
    if (f)
        fclose(f);
    return ok;
}

int qk_tensorset_open(qk_tensorset **out, const char *path, qk_err *err)
{
    *out = NULL;
    qk_tensorset *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return oom(err, path);
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        qk_tensorset_close(s);
        return qk_err_sys(err, path, "cannot open");
    }
    int rc = !S_ISDIR(st.st_mode) && is_gguf(path) ? from_gguf(s, err) : from_safetensors(s, err);
    if (rc) {
        qk_tensorset_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void qk_tensorset_close(qk_tensorset *s)
{
    if (!s)
        return;
    for (uint64_t i = 0; s->t && i < s->n; i++)
        free(s->t[i].name);
    free(s->t);
    deq_free(s->deq);
    if (s->gguf)
        qk_gguf_close(s->gguf);
    if (s->st)
        qk_hf_close(s->st);
    free(s->path);
    free(s);
}

const qk_tensor *qk_tensorset_find(const qk_tensorset *s, const char *name)
{
    for (uint64_t i = 0; i < s->n; i++)
        if (strcmp(s->t[i].name, name) == 0)
            return &s->t[i];
    return NULL;
}

void qk_tensor_shape_str(const qk_tensor *t, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    for (int d = 0; d < t->n_dims && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, d ? "x%lld" : "%lld", (long long)t->ne[d]);
}

uint64_t qk_tensor_rows(const qk_tensor *t)
{
    uint64_t r = 1;
    for (int d = 1; d < QK_MAX_DIMS; d++)
        r *= (uint64_t)t->ne[d];
    return r;
}
