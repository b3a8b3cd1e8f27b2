/* model.c - hyper-parameters and weights of a llama-family model from GGUF.
 *
 * Key and tensor names follow llama.cpp (src/llama-arch.cpp); which tensors
 * each architecture has follows src/models/{llama,qwen2,qwen3}.cpp, and the
 * rope mode follows llama_model_rope_type() in src/llama-model.cpp. */
#include "lib/engine/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/ckd.h"
#include "kernels/cpu.h"
#include "lib/core/mapfile.h"
#include "lib/engine/matmul.h"
#include "kernels/types.h"

#define MAX_DIM (1 << 24) /* sanity bound on every hyper-parameter */

static const struct arch_row {
    const char *name;
    qk_arch arch;
    qk_rope_mode rope;
} arches[] = {
    {"llama", QK_ARCH_LLAMA, QK_ROPE_NORMAL},
    {"mistral", QK_ARCH_LLAMA, QK_ROPE_NORMAL},
    {"qwen2", QK_ARCH_QWEN2, QK_ROPE_NEOX},
    {"qwen3", QK_ARCH_QWEN3, QK_ROPE_NEOX},
};

/* ---- metadata ------------------------------------------------------------ */

static uint64_t kv_offset(const qk_gguf *g, const char *key)
{
    const qk_gguf_kv *kv = qk_gguf_find(g, key);
    return kv ? kv->offset : 0;
}

/* ARCH.suffix as an integer in [lo, MAX_DIM]; def < 0: the key is required. */
static int get_dim(const qk_gguf *g, const char *arch, const char *suffix, int64_t def, int64_t lo,
                   int *out, qk_err *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t v;
    if (!qk_gguf_find(g, key)) {
        if (def < 0)
            return qk_err_at(err, g->path, key, 0, "required key is missing");
        *out = (int)def;
        return 0;
    }
    if (!qk_gguf_get_int(g, key, &v))
        return qk_err_at(err, g->path, key, kv_offset(g, key), "not an integer");
    if (v < lo || v > MAX_DIM)
        return qk_err_at(err, g->path, key, kv_offset(g, key), "%lld is out of range [%lld, %d]",
                         (long long)v, (long long)lo, MAX_DIM);
    *out = (int)v;
    return 0;
}

/* ARCH.suffix as a finite float; absent: def (required when !has_def). */
static int get_real(const qk_gguf *g, const char *arch, const char *suffix, bool has_def, float def,
                    float *out, qk_err *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    double v;
    if (!qk_gguf_find(g, key)) {
        if (!has_def)
            return qk_err_at(err, g->path, key, 0, "required key is missing");
        *out = def;
        return 0;
    }
    if (!qk_gguf_get_f64(g, key, &v) || !isfinite(v) || v < 0)
        return qk_err_at(err, g->path, key, kv_offset(g, key), "not a finite non-negative number");
    *out = (float)v;
    return 0;
}

static int read_arch(const qk_gguf *g, qk_hparams *hp, qk_err *err)
{
    const char *key = "general.architecture";
    qk_str s;
    if (!qk_gguf_find(g, key))
        return qk_err_at(err, g->path, key, 0, "required key is missing");
    if (!qk_gguf_get_str(g, key, &s))
        return qk_err_at(err, g->path, key, kv_offset(g, key), "not a string");
    for (size_t i = 0; i < sizeof arches / sizeof arches[0]; i++) {
        if (qk_str_eq(s, arches[i].name)) {
            snprintf(hp->arch_name, sizeof hp->arch_name, "%s", arches[i].name);
            hp->arch = arches[i].arch;
            hp->rope_mode = arches[i].rope;
            return 0;
        }
    }
    int n = s.len > 64 ? 64 : (int)s.len;
    return qk_err_at(err, g->path, key, kv_offset(g, key),
                     "unsupported architecture '%.*s' (supported: llama, mistral, qwen2, qwen3)", n,
                     s.ptr);
}

/* rope.scaling.type: none or linear (freq_scale = 1/factor); YaRN and the
 * others change the rotation itself and are not implemented. */
static int read_rope_scaling(const qk_gguf *g, qk_hparams *hp, qk_err *err)
{
    char key[128];
    const char *a = hp->arch_name;
    hp->rope_freq_scale = 1.0f;
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    qk_str s;
    if (!qk_gguf_get_str(g, key, &s) || qk_str_eq(s, "none"))
        return 0;
    if (!qk_str_eq(s, "linear")) {
        int n = s.len > 32 ? 32 : (int)s.len;
        return qk_err_at(err, g->path, key, kv_offset(g, key),
                         "unsupported rope scaling '%.*s' (supported: none, linear)", n, s.ptr);
    }
    float factor;
    if (get_real(g, a, "rope.scaling.factor", true, 0.0f, &factor, err))
        return err->code;
    if (factor != 0.0f)
        hp->rope_freq_scale = 1.0f / factor;
    return 0;
}

static int read_hparams(const qk_gguf *g, qk_hparams *hp, qk_err *err)
{
    if (read_arch(g, hp, err))
        return err->code;
    const char *a = hp->arch_name;
    if (get_dim(g, a, "embedding_length", -1, 1, &hp->n_embd, err) ||
        get_dim(g, a, "block_count", -1, 1, &hp->n_layer, err) ||
        get_dim(g, a, "feed_forward_length", -1, 1, &hp->n_ff, err) ||
        get_dim(g, a, "attention.head_count", -1, 1, &hp->n_head, err) ||
        get_dim(g, a, "attention.head_count_kv", hp->n_head, 1, &hp->n_head_kv, err) ||
        get_dim(g, a, "attention.key_length", hp->n_embd / hp->n_head, 1, &hp->head_dim, err) ||
        get_dim(g, a, "attention.value_length", hp->head_dim, 1, &hp->head_dim_v, err) ||
        get_dim(g, a, "rope.dimension_count", hp->head_dim, 0, &hp->n_rot, err) ||
        get_dim(g, a, "context_length", 0, 0, &hp->n_ctx_train, err))
        return err->code;
    if (get_real(g, a, "rope.freq_base", true, 10000.0f, &hp->rope_freq_base, err) ||
        get_real(g, a, "attention.layer_norm_rms_epsilon", false, 0.0f, &hp->rms_eps, err))
        return err->code;
    hp->kq_scale = 1.0f / sqrtf((float)hp->head_dim);
    if (hp->arch == QK_ARCH_LLAMA) {
        float s;
        if (get_real(g, a, "attention.scale", true, 0.0f, &s, err))
            return err->code;
        if (s != 0.0f)
            hp->kq_scale = s;
    }
    if (read_rope_scaling(g, hp, err))
        return err->code;
    int n_expert;
    if (get_dim(g, a, "expert_count", 0, 0, &n_expert, err))
        return err->code;
    if (n_expert > 0) {
        char k[128];
        snprintf(k, sizeof k, "%s.expert_count", a);
        return qk_err_at(err, g->path, k, kv_offset(g, k),
                         "mixture-of-experts models (%d experts) are not supported", n_expert);
    }

    char key[128];
    if (hp->head_dim < 1) {
        snprintf(key, sizeof key, "%s.attention.key_length", a);
        return qk_err_at(err, g->path, key, kv_offset(g, key),
                         "head size is 0 (embedding_length %d < head_count %d)", hp->n_embd,
                         hp->n_head);
    }
    if (hp->n_head % hp->n_head_kv != 0) {
        snprintf(key, sizeof key, "%s.attention.head_count_kv", a);
        return qk_err_at(err, g->path, key, kv_offset(g, key),
                         "head_count %d is not a multiple of head_count_kv %d", hp->n_head,
                         hp->n_head_kv);
    }
    if (hp->n_rot > hp->head_dim || hp->n_rot % 2 != 0) {
        snprintf(key, sizeof key, "%s.rope.dimension_count", a);
        return qk_err_at(err, g->path, key, kv_offset(g, key),
                         "%d must be even and at most the head size %d", hp->n_rot, hp->head_dim);
    }
    uint64_t t;
    if (qk_ckd_mul(&t, (uint64_t)hp->n_head, (uint64_t)(hp->head_dim > hp->head_dim_v ? hp->head_dim : hp->head_dim_v)) ||
        t > MAX_DIM) {
        snprintf(key, sizeof key, "%s.attention.head_count", a);
        return qk_err_at(err, g->path, key, kv_offset(g, key), "heads x head size is too large");
    }
    return 0;
}

/* ---- tensors -------------------------------------------------------------- */

/* One load in progress: the model being filled and where tensors come from. */
typedef struct loader {
    qk_model *m;
    const qk_model_source *src;
} loader;

static const char *type_name(int type)
{
    const qk_type_traits *t = qk_type_get(type);
    return t ? t->name : "unknown";
}

/* *t = the tensor llama.cpp calls `name`; returns 1 found, 0 absent (an
 * error naming the source's tensor when required), -1 on failure. */
static int find(const loader *ld, const char *name, bool required, qk_src_tensor *t, qk_err *err)
{
    int rc = ld->src->find(ld->src->ctx, name, t, err);
    if (rc != 0)
        return rc;
    if (required) {
        char sname[160];
        if (ld->src->source_name)
            ld->src->source_name(ld->src->ctx, name, sname, sizeof sname);
        else
            snprintf(sname, sizeof sname, "%s", name);
        qk_err_at(err, ld->src->path, sname, 0, "required tensor is missing");
        return -1;
    }
    return 0;
}

/* Check a tensor is [ne0] or [ne0, ne1] (ne1 = 0: 1-D). */
static int check_shape(const loader *ld, const qk_src_tensor *t, int64_t ne0, int64_t ne1,
                       qk_err *err)
{
    bool ok = t->ne[0] == ne0 && t->ne[2] == 1 && t->ne[3] == 1 && t->ne[1] == (ne1 ? ne1 : 1);
    if (ok)
        return 0;
    char name[160];
    snprintf(name, sizeof name, "%.*s", t->name_len, t->name);
    if (ne1)
        return qk_err_at(err, ld->src->path, name, t->offset,
                         "shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                         (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                         (long long)t->ne[3], (long long)ne0, (long long)ne1);
    return qk_err_at(err, ld->src->path, name, t->offset,
                     "shape [%lld, %lld, %lld, %lld], expected [%lld]", (long long)t->ne[0],
                     (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                     (long long)ne0);
}

/* A tensor's own error: "PATH: NAME at offset N: what". */
static int tensor_err(const loader *ld, const qk_src_tensor *t, qk_err *err, const char *fmt,
                      const char *a, const char *b)
{
    char name[160], what[256];
    snprintf(name, sizeof name, "%.*s", t->name_len, t->name);
    snprintf(what, sizeof what, fmt, a, b);
    return qk_err_at(err, ld->src->path, name, t->offset, "%s", what);
}

static void set_weight(qk_weight *w, const qk_src_tensor *t)
{
    w->name = t->name;
    w->name_len = t->name_len;
    w->type = t->type;
    w->cols = t->ne[0];
    w->rows = t->ne[1];
    w->row_size = qk_row_size(t->type, t->ne[0]);
    w->data = t->data;
    w->mapped = t->mapped;
    w->wq = t->wq;
}

/* A parted weight (kernels/wq.h): its layout has products for its activation type. */
static int check_wq(const loader *ld, const qk_src_tensor *t, bool matmul, qk_err *err)
{
    const qk_type_traits *tt = qk_type_get(t->type), *at = qk_type_get(t->wq->act);
    if (!tt || !tt->wq_rows || (matmul && !tt->wq_tile))
        return tensor_err(ld, t, err, "layout %s has no %s", type_name(t->type),
                          matmul ? "product kernel" : "decoder");
    if (matmul && (!at || (t->wq->act != QK_F32 && !at->wq_act)))
        return tensor_err(ld, t, err, "activation type %s has no encoder%s", type_name(t->wq->act), "");
    if (t->wq->rows != t->ne[1] || t->wq->cols != t->ne[0])
        return tensor_err(ld, t, err, "parts do not match the shape%s%s", "", "");
    return 0;
}

/* A matrix used in y = W x: its type must have a dot product, and x must be
 * encodable as the dot product's activation type. */
static int check_matmul_type(const loader *ld, const qk_src_tensor *t, qk_err *err)
{
    if (t->wq)
        return check_wq(ld, t, true, err);
    const qk_type_traits *tt = qk_type_get(t->type);
    if (!tt || !tt->vec_dot || tt->vec_dot_type < 0)
        return tensor_err(ld, t, err, "type %s has no dot-product kernel%s", type_name(t->type),
                          "");
    const qk_type_traits *vt = qk_type_get(tt->vec_dot_type);
    if (!vt || (tt->vec_dot_type != QK_F32 && !vt->from_float))
        return tensor_err(ld, t, err, "activation type %s of %s has no encoder",
                          type_name(tt->vec_dot_type), tt->name);
    if (qk_row_size(t->type, t->ne[0]) == 0 || qk_row_size(tt->vec_dot_type, t->ne[0]) == 0) {
        char len[32];
        snprintf(len, sizeof len, "%lld", (long long)t->ne[0]);
        return tensor_err(ld, t, err, "row length %s is not a multiple of the block size of %s",
                          len, tt->name);
    }
    return 0;
}

static int load_matrix(const loader *ld, const char *name, int64_t cols, int64_t rows,
                       qk_weight *w, qk_err *err)
{
    qk_src_tensor t;
    if (find(ld, name, true, &t, err) != 1)
        return err->code;
    if (check_shape(ld, &t, cols, rows, err) || check_matmul_type(ld, &t, err))
        return err->code;
    set_weight(w, &t);
    return 0;
}

static int own(qk_model *m, void *p, qk_err *err)
{
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? 2 * m->cap_owned : 64;
        void **o = realloc(m->owned, (size_t)cap * sizeof *o);
        if (!o) {
            free(p);
            return qk_errf(err, QK_EIO, "out of memory");
        }
        m->owned = o;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = p;
    return 0;
}

/* A 1-D tensor of n elements decoded to floats; *out = NULL when absent and
 * not required. */
static int load_vector(const loader *ld, const char *name, int64_t n, bool required,
                       const float **out, qk_err *err)
{
    *out = NULL;
    qk_src_tensor t;
    int found = find(ld, name, required, &t, err);
    if (found != 1)
        return found < 0 ? err->code : 0;
    if (check_shape(ld, &t, n, 0, err))
        return err->code;
    const qk_type_traits *tt = qk_type_get(t.type);
    if (!tt || (t.type != QK_F32 && !tt->to_float) || qk_row_size(t.type, n) == 0)
        return tensor_err(ld, &t, err, "type %s cannot be decoded%s", type_name(t.type), "");
    float *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return qk_errf(err, QK_EIO, "out of memory");
    if (t.type == QK_F32)
        memcpy(v, t.data, (size_t)n * sizeof *v);
    else
        tt->to_float(t.data, v, n);
    if (own(ld->m, v, err))
        return err->code;
    *out = v;
    return 0;
}

static int load_layer(const loader *ld, int il, qk_err *err)
{
    const qk_hparams *hp = &ld->m->hp;
    qk_layer *L = &ld->m->layers[il];
    const int64_t e = hp->n_embd, f = hp->n_ff;
    const int64_t nq = (int64_t)hp->n_head * hp->head_dim;
    const int64_t nk = (int64_t)hp->n_head_kv * hp->head_dim;
    const int64_t nv = (int64_t)hp->n_head_kv * hp->head_dim_v;
    const int64_t no = (int64_t)hp->n_head * hp->head_dim_v;
    char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    if (load_vector(ld, NAME("attn_norm.weight"), e, true, &L->attn_norm, err) ||
        load_matrix(ld, NAME("attn_q.weight"), e, nq, &L->wq, err) ||
        load_matrix(ld, NAME("attn_k.weight"), e, nk, &L->wk, err) ||
        load_matrix(ld, NAME("attn_v.weight"), e, nv, &L->wv, err) ||
        load_matrix(ld, NAME("attn_output.weight"), no, e, &L->wo, err) ||
        load_vector(ld, NAME("attn_q.bias"), nq, false, &L->bq, err) ||
        load_vector(ld, NAME("attn_k.bias"), nk, false, &L->bk, err) ||
        load_vector(ld, NAME("attn_v.bias"), nv, false, &L->bv, err) ||
        load_vector(ld, NAME("attn_output.bias"), e, false, &L->bo, err) ||
        load_vector(ld, NAME("ffn_norm.weight"), e, true, &L->ffn_norm, err) ||
        load_matrix(ld, NAME("ffn_gate.weight"), e, f, &L->w_gate, err) ||
        load_matrix(ld, NAME("ffn_up.weight"), e, f, &L->w_up, err) ||
        load_matrix(ld, NAME("ffn_down.weight"), f, e, &L->w_down, err))
        return err->code;
    if (hp->arch == QK_ARCH_QWEN3 &&
        (load_vector(ld, NAME("attn_q_norm.weight"), hp->head_dim, true, &L->q_norm, err) ||
         load_vector(ld, NAME("attn_k_norm.weight"), hp->head_dim, true, &L->k_norm, err)))
        return err->code;
#undef NAME
    return 0;
}

static int load_embeddings(const loader *ld, qk_err *err)
{
    qk_model *m = ld->m;
    qk_src_tensor t;
    if (find(ld, "token_embd.weight", true, &t, err) != 1)
        return err->code;
    if (t.ne[1] < 1 || t.ne[1] > INT32_MAX) {
        char rows[32];
        snprintf(rows, sizeof rows, "%lld", (long long)t.ne[1]);
        return tensor_err(ld, &t, err, "vocabulary size %s out of range%s", rows, "");
    }
    m->hp.n_vocab = (int)t.ne[1];
    if (check_shape(ld, &t, m->hp.n_embd, m->hp.n_vocab, err))
        return err->code;
    const qk_type_traits *tt = qk_type_get(t.type);
    if (t.wq) {
        if (check_wq(ld, &t, false, err))
            return err->code;
    } else if (!tt || (t.type != QK_F32 && !tt->to_float) || qk_row_size(t.type, t.ne[0]) == 0) {
        return tensor_err(ld, &t, err, "type %s cannot be decoded%s", type_name(t.type), "");
    }
    set_weight(&m->tok_embd, &t);

    /* lm head: output.weight, or tied to the embeddings when absent */
    qk_src_tensor o;
    int has_output = find(ld, "output.weight", false, &o, err);
    if (has_output < 0)
        return err->code;
    return load_matrix(ld, has_output ? "output.weight" : "token_embd.weight", m->hp.n_embd,
                       m->hp.n_vocab, &m->output, err);
}

/* ---- repacking (lib/engine/matmul.h) ------------------------------------------------- */

static int pack_weight(qk_model *m, qk_weight *w, bool mapped, qk_err *err)
{
    void *mem;
    if (qk_weight_pack(w, &mem, err))
        return err->code;
    if (!mem)
        return 0;
    if (mapped && qk_kernels_for(w->type)->pack_decode)
        qk_map_release(w->data, (size_t)w->rows * w->row_size);
    return own(m, mem, err);
}

static int pack_weights(qk_model *m, qk_err *err)
{
    /* a tied output shares token_embd's pages, whose rows are still read */
    if (pack_weight(m, &m->output, m->output.mapped && m->output.data != m->tok_embd.data, err))
        return err->code;
    for (int il = 0; il < m->hp.n_layer; il++) {
        qk_layer *l = &m->layers[il];
        qk_weight *ws[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate, &l->w_up, &l->w_down};
        for (size_t i = 0; i < sizeof ws / sizeof *ws; i++)
            if (pack_weight(m, ws[i], ws[i]->mapped, err))
                return err->code;
    }
    return 0;
}

int qk_model_load_source(qk_model *m, const qk_hparams *hp, const qk_model_source *src,
                         qk_err *err)
{
    memset(m, 0, sizeof *m);
    m->hp = *hp;
    const loader ld = {.m = m, .src = src};
    if (load_embeddings(&ld, err))
        goto fail;
    if (load_vector(&ld, "output_norm.weight", m->hp.n_embd, true, &m->output_norm, err) ||
        load_vector(&ld, "output.bias", m->hp.n_vocab, false, &m->output_bias, err) ||
        load_vector(&ld, "rope_freqs.weight", m->hp.n_rot / 2, false, &m->rope_freqs, err))
        goto fail;
    m->layers = calloc((size_t)m->hp.n_layer, sizeof *m->layers);
    if (!m->layers) {
        qk_errf(err, QK_EIO, "out of memory");
        goto fail;
    }
    for (int il = 0; il < m->hp.n_layer; il++)
        if (load_layer(&ld, il, err))
            goto fail;
    if (pack_weights(m, err))
        goto fail;
    return 0;
fail:
    qk_model_free(m);
    return err->code ? err->code : QK_EINPUT;
}

/* The GGUF file as a source: tensors by their own names. */
static int gguf_find(void *ctx, const char *name, qk_src_tensor *out, qk_err *err)
{
    (void)err;
    const qk_gguf_tensor *t = qk_gguf_find_tensor(ctx, name);
    if (!t)
        return 0;
    *out = (qk_src_tensor){.name = t->name.ptr, .name_len = (int)t->name.len, .type = t->type,
                           .ne = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]}, .data = t->data,
                           .offset = t->info_offset, .mapped = 1};
    return 1;
}

int qk_model_load(qk_model *m, const qk_gguf *g, qk_err *err)
{
    qk_hparams hp;
    memset(m, 0, sizeof *m);
    memset(&hp, 0, sizeof hp);
    if (read_hparams(g, &hp, err))
        return err->code ? err->code : QK_EINPUT;
    const qk_model_source src = {.path = g->path, .ctx = (void *)g, .find = gguf_find};
    if (qk_model_load_source(m, &hp, &src, err))
        return err->code;
    m->gguf = g;
    return 0;
}

void qk_model_free(qk_model *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_owned; i++)
        free(m->owned[i]);
    free(m->owned);
    free(m->layers);
    memset(m, 0, sizeof *m);
}

int qk_weight_row(const qk_weight *w, int64_t row, float *out, qk_err *err)
{
    if (row < 0 || row >= w->rows)
        return qk_errf(err, QK_EINPUT, "%.*s: row %lld out of range [0, %lld)", w->name_len,
                       w->name, (long long)row, (long long)w->rows);
    if (w->wq) {
        qk_type_get(w->type)->wq_rows(w->wq, row, 1, out);
        return 0;
    }
    const uint8_t *src = w->data + (size_t)row * w->row_size;
    if (w->type == QK_F32) {
        memcpy(out, src, (size_t)w->cols * sizeof *out);
        return 0;
    }
    const qk_type_traits *t = qk_type_get(w->type);
    t->to_float(src, out, w->cols);
    return 0;
}
