/* fuzz_gguf.c - libFuzzer harness for the GGUF reader (qk_gguf_open_mem) and
 * the writer's value serializer.  A file that does not open must say why in
 * the usual "fuzz: FIELD at offset N: what" form; a file that opens must be
 * self-consistent: every tensor's bytes inside the buffer and no two
 * overlapping, every value readable, and every kv and tensor info accepted
 * by the writer (which re-validates them). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint8_t sink;

static void touch(const void *p, uint64_t n)
{
    if (n) {
        const uint8_t *b = p;
        sink ^= b[0] ^ b[n - 1];
    }
}

/* Walk a value: strings and arrays must lie inside the buffer. */
static void walk(const qk_gguf_value *v, const uint8_t *data, size_t size)
{
    if (v->offset > size)
        abort();
    if (v->type == QK_GGUF_STRING) {
        if (v->s.len && ((const uint8_t *)v->s.ptr < data || (const uint8_t *)v->s.ptr + v->s.len > data + size))
            abort();
        touch(v->s.ptr, v->s.len);
    } else if (v->type == QK_GGUF_ARRAY) {
        if (v->arr.items) {
            for (uint64_t i = 0; i < v->arr.n; i++) {
                if (v->arr.items[i].type != v->arr.elem)
                    abort();
                walk(&v->arr.items[i], data, size);
            }
        } else if (v->arr.n) {
            if (v->arr.elem == QK_GGUF_STRING || v->arr.elem == QK_GGUF_ARRAY)
                abort();
            double last = qk_gguf_arr_f64(v, v->arr.n - 1);
            sink ^= (uint8_t)qk_gguf_arr_i64(v, 0) ^ (uint8_t)(last > 0 && last < 256 ? last : 0);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    qk_err err = {0};
    qk_gguf *g = NULL;
    int rc = qk_gguf_open_mem(&g, data, size, "fuzz", &err);
    if (rc) {
        if (rc != QK_EINPUT || g || strncmp(err.msg, "fuzz: ", 6) != 0 || !strstr(err.msg, " at offset "))
            abort();
        return 0;
    }
    if (g->data_offset % g->alignment || (g->n_tensors && g->data_offset > size))
        abort();
    qk_gguf_writer *w = qk_gguf_writer_new(g->version);
    if (!w)
        abort();
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const qk_gguf_kv *kv = &g->kv[i];
        walk(&kv->v, data, size);
        char key[64];
        size_t n = kv->key.len < sizeof key - 1 ? (size_t)kv->key.len : sizeof key - 1;
        memcpy(key, kv->key.ptr, n);
        key[n] = 0;
        uint64_t u;
        int64_t s;
        double f;
        qk_str str;
        bool b;
        sink ^= (uint8_t)(qk_gguf_get_uint(g, key, &u) + qk_gguf_get_int(g, key, &s) +
                          qk_gguf_get_f64(g, key, &f) + qk_gguf_get_str(g, key, &str) +
                          qk_gguf_get_bool(g, key, &b));
        if (qk_gguf_w_kv_copy(w, kv, &err) != 0)
            abort(); /* what was read must be writable */
    }
    uint64_t end_max = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const qk_gguf_tensor *t = &g->tensors[i];
        if (t->data != data + g->data_offset + t->offset || g->data_offset + t->offset + t->nbytes > size)
            abort();
        touch(t->data, t->nbytes);
        if (t->n_dims < 1 || t->n_dims > 4 || t->offset % g->alignment)
            abort();
        if (t->offset + t->nbytes > end_max)
            end_max = t->offset + t->nbytes;
        if (qk_gguf_w_tensor_copy(w, t, &err) != 0)
            abort();
        if (t->name.len < 64 && !memchr(t->name.ptr, 0, (size_t)t->name.len)) {
            char name[64];
            memcpy(name, t->name.ptr, (size_t)t->name.len);
            name[t->name.len] = 0;
            const qk_gguf_tensor *f = qk_gguf_find_tensor(g, name);
            if (!f || !qk_str_eq(f->name, name))
                abort();
        }
    }
    qk_gguf_writer_free(w); /* never begun: nothing is written */
    qk_gguf_close(g);
    return 0;
}
