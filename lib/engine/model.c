/* model.c - the weights of a model, from GGUF or another tensor source.
 *
 * Tensor names follow llama.cpp (src/llama-arch.cpp); which tensors each
 * architecture has follows the load_arch_tensors of src/models/{llama,qwen2,
 * qwen3,qwen2moe,qwen3moe,openai-moe,gemma2,gemma3,phi3}.cpp (at d32676d):
 * a layer has experts when it has ffn_gate_inp (llama's "ffn_gate_inp ==
 * nullptr" test), phi3's fused attn_qkv and ffn_up are used as row ranges
 * (build_qkv's views, ggml_swiglu's halves).  The hyper-parameters come from
 * lib/engine/arch.c. */
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
    *w = (qk_weight){.name = t->name, .name_len = t->name_len, .type = t->type, .cols = t->ne[0],
                     .rows = t->ne[1], .row_size = qk_row_size(t->type, t->ne[0]), .data = t->data,
                     .mapped = t->mapped, .wq = t->wq};
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

/* A tensor of [n] (or [n, n1]) elements decoded to floats; *out = NULL
 * when absent and not required. */
static int load_table(const loader *ld, const char *name, int64_t n, int64_t n1, bool required,
                      const float **out, qk_err *err)
{
    *out = NULL;
    qk_src_tensor t;
    int found = find(ld, name, required, &t, err);
    if (found != 1)
        return found < 0 ? err->code : 0;
    if (check_shape(ld, &t, n, n1, err))
        return err->code;
    n *= n1 ? n1 : 1;
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

static int load_vector(const loader *ld, const char *name, int64_t n, bool required,
                       const float **out, qk_err *err)
{
    return load_table(ld, name, n, 0, required, out, err);
}

/* A norm's weights; Hugging Face gemma stores w - 1 (its RMSNorm multiplies
 * by 1 + w, which convert_hf_to_gguf.py folds in), so 1 is added here. */
static int load_norm(const loader *ld, const char *name, int64_t n, bool required, const float **out,
                     qk_err *err)
{
    if (load_vector(ld, name, n, required, out, err))
        return err->code;
    if (*out && ld->m->hp.norm_plus_one) {
        float *v = (float *)*out;
        for (int64_t i = 0; i < n; i++)
            v[i] = 1.0f + v[i];
    }
    return 0;
}

/* Rows [r0, r0 + rows) of matrix `all` as a weight of their own. */
static void row_view(qk_weight *w, const qk_weight *all, int64_t r0, int64_t rows)
{
    *w = *all;
    w->data = all->data + (size_t)r0 * all->row_size;
    w->rows = rows;
}

/* Matrix `name` of cols x rows, or (fused) the rows of several matrices
 * stacked: parts[i] gets rows[i] rows in order. */
static int load_fused(const loader *ld, const char *name, int64_t cols, const int64_t *rows, int n,
                      qk_weight *const *parts, qk_err *err)
{
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += rows[i];
    qk_weight all;
    if (load_matrix(ld, name, cols, total, &all, err))
        return err->code;
    for (int i = 0, r0 = 0; i < n; r0 += (int)rows[i], i++)
        row_view(parts[i], &all, r0, rows[i]);
    return 0;
}

/* Whether tensor `name` exists. */
static int has(const loader *ld, const char *name, qk_err *err)
{
    qk_src_tensor t;
    return find(ld, name, false, &t, err);
}

/* An expert tensor (llama.cpp: {cols, rows, n_expert}): n_expert weights,
 * views of the 3-D tensor, or the source's per-expert matrices. */
static int load_experts(const loader *ld, const char *name, int64_t cols, int64_t rows,
                        qk_weight **out, qk_err *err)
{
    const int ne = ld->m->hp.n_expert;
    qk_weight *w = calloc((size_t)ne, sizeof *w);
    if (!w || own(ld->m, w, err))
        return w ? err->code : qk_errf(err, QK_EIO, "out of memory");
    *out = w;
    qk_src_tensor t;
    int found = ld->src->find(ld->src->ctx, name, &t, err);
    if (found < 0)
        return err->code;
    if (found == 0 && ld->src->find_expert) {
        for (int e = 0; e < ne; e++) {
            found = ld->src->find_expert(ld->src->ctx, name, e, &t, err);
            if (found < 0)
                return err->code;
            if (found == 0) {
                char sname[160];
                ld->src->source_name(ld->src->ctx, name, sname, sizeof sname);
                return qk_err_at(err, ld->src->path, sname, 0, "required tensor is missing (expert %d)", e);
            }
            if (check_shape(ld, &t, cols, rows, err) || check_matmul_type(ld, &t, err))
                return err->code;
            set_weight(&w[e], &t);
        }
        return 0;
    }
    if (found == 0)
        return find(ld, name, true, &t, err) < 0 ? err->code : QK_EINPUT;
    if (t.ne[0] != cols || t.ne[1] != rows || t.ne[2] != ne || t.ne[3] != 1) {
        char nm[160];
        snprintf(nm, sizeof nm, "%.*s", t.name_len, t.name);
        return qk_err_at(err, ld->src->path, nm, t.offset,
                         "shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %d]", (long long)t.ne[0],
                         (long long)t.ne[1], (long long)t.ne[2], (long long)t.ne[3], (long long)cols,
                         (long long)rows, ne);
    }
    if (check_matmul_type(ld, &t, err))
        return err->code;
    qk_weight all;
    t.ne[1] = rows * ne;
    set_weight(&all, &t);
    for (int e = 0; e < ne; e++)
        row_view(&w[e], &all, (int64_t)e * rows, rows);
    return 0;
}

/* The router, experts and (qwen2moe) shared expert of layer il. */
static int load_moe(const loader *ld, int il, qk_layer *L, qk_err *err)
{
    const qk_hparams *hp = &ld->m->hp;
    const int64_t e = hp->n_embd, f = hp->n_ff_exp, ne = hp->n_expert;
    char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    L->moe = true;
    if (load_matrix(ld, NAME("ffn_gate_inp.weight"), e, ne, &L->gate_inp, err) ||
        load_vector(ld, NAME("ffn_gate_inp.bias"), ne, false, &L->gate_inp_b, err) ||
        load_experts(ld, NAME("ffn_gate_exps.weight"), e, f, &L->exps.gate, err) ||
        load_experts(ld, NAME("ffn_up_exps.weight"), e, f, &L->exps.up, err) ||
        load_experts(ld, NAME("ffn_down_exps.weight"), f, e, &L->exps.down, err) ||
        load_table(ld, NAME("ffn_gate_exps.bias"), f, ne, false, &L->exps.gate_b, err) ||
        load_table(ld, NAME("ffn_up_exps.bias"), f, ne, false, &L->exps.up_b, err) ||
        load_table(ld, NAME("ffn_down_exps.bias"), e, ne, false, &L->exps.down_b, err))
        return err->code;
    if (hp->n_ff_shexp > 0) {
        const int64_t fs = hp->n_ff_shexp;
        L->shexp = true;
        if (load_matrix(ld, NAME("ffn_gate_inp_shexp.weight"), e, 1, &L->gate_inp_shexp, err) ||
            load_matrix(ld, NAME("ffn_gate_shexp.weight"), e, fs, &L->gate_shexp, err) ||
            load_matrix(ld, NAME("ffn_up_shexp.weight"), e, fs, &L->up_shexp, err) ||
            load_matrix(ld, NAME("ffn_down_shexp.weight"), fs, e, &L->down_shexp, err))
            return err->code;
    }
#undef NAME
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
    int rc;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    L->swa = qk_layer_is_swa(hp, il);
    if (load_norm(ld, NAME("attn_norm.weight"), e, true, &L->attn_norm, err))
        return err->code;
    if ((rc = has(ld, NAME("attn_qkv.weight"), err)) < 0)
        return err->code;
    if (rc) {
        const int64_t rows[3] = {nq, nk, nv};
        qk_weight *const parts[3] = {&L->wq, &L->wk, &L->wv};
        if (load_fused(ld, n, e, rows, 3, parts, err))
            return err->code;
    } else if (load_matrix(ld, NAME("attn_q.weight"), e, nq, &L->wq, err) ||
               load_matrix(ld, NAME("attn_k.weight"), e, nk, &L->wk, err) ||
               load_matrix(ld, NAME("attn_v.weight"), e, nv, &L->wv, err) ||
               load_vector(ld, NAME("attn_q.bias"), nq, false, &L->bq, err) ||
               load_vector(ld, NAME("attn_k.bias"), nk, false, &L->bk, err) ||
               load_vector(ld, NAME("attn_v.bias"), nv, false, &L->bv, err)) {
        return err->code;
    }
    if (load_matrix(ld, NAME("attn_output.weight"), no, e, &L->wo, err) ||
        load_vector(ld, NAME("attn_output.bias"), e, false, &L->bo, err))
        return err->code;
    if (hp->qk_norm && (load_norm(ld, NAME("attn_q_norm.weight"), hp->head_dim, true, &L->q_norm, err) ||
                        load_norm(ld, NAME("attn_k_norm.weight"), hp->head_dim, true, &L->k_norm, err)))
        return err->code;
    if (hp->post_norms &&
        (load_norm(ld, NAME("post_attention_norm.weight"), e, true, &L->attn_post_norm, err) ||
         load_norm(ld, NAME("post_ffw_norm.weight"), e, true, &L->ffn_post_norm, err)))
        return err->code;
    if (hp->attn_sinks && load_vector(ld, NAME("attn_sinks.weight"), hp->n_head, true, &L->sinks, err))
        return err->code;
    /* gpt-oss names its pre-FFN norm post_attention_norm (openai-moe.cpp) */
    const char *ffn_norm = hp->arch == QK_ARCH_GPT_OSS ? NAME("post_attention_norm.weight")
                                                        : NAME("ffn_norm.weight");
    if (load_norm(ld, ffn_norm, e, true, &L->ffn_norm, err))
        return err->code;
    if (hp->n_expert > 0) {
        if ((rc = has(ld, NAME("ffn_gate_inp.weight"), err)) < 0)
            return err->code;
        if (rc || (hp->arch != QK_ARCH_LLAMA && !hp->moe_dense_layers))
            return load_moe(ld, il, L, err);
    }
    if ((rc = has(ld, NAME("ffn_gate.weight"), err)) < 0)
        return err->code;
    if (!rc && hp->arch == QK_ARCH_PHI3) {
        const int64_t rows[2] = {f, f};
        qk_weight *const parts[2] = {&L->w_gate, &L->w_up};
        if (load_fused(ld, NAME("ffn_up.weight"), e, rows, 2, parts, err))
            return err->code;
    } else if (load_matrix(ld, NAME("ffn_gate.weight"), e, f, &L->w_gate, err) ||
               load_matrix(ld, NAME("ffn_up.weight"), e, f, &L->w_up, err)) {
        return err->code;
    }
    if (load_matrix(ld, NAME("ffn_down.weight"), f, e, &L->w_down, err))
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
    if (w->wq) {
        /* the packed rows serve every product: the stored codes of a row-major
         * layout are read again only by the decoder (embedding rows) */
        if (mapped && w->wq->q_rs > 0 && (w->wq->order == QK_WQ_WORDS || w->wq->order == QK_WQ_STREAM ||
                                          w->wq->type == QK_W_FP8 || w->wq->type == QK_W_INT8 ||
                                          w->wq->type == QK_W_NVFP4 || w->wq->type == QK_W_MXFP4))
            qk_map_release(w->wq->q, (size_t)w->wq->rows * (size_t)w->wq->q_rs);
    } else if (mapped && qk_kernels_for(w->type)->pack_decode) {
        qk_map_release(w->data, (size_t)w->rows * w->row_size);
    }
    return own(m, mem, err);
}

static int pack_weights(qk_model *m, qk_err *err)
{
    /* a tied output shares token_embd's pages, whose rows are still read */
    if (pack_weight(m, &m->output, m->output.mapped && m->output.data != m->tok_embd.data, err))
        return err->code;
    for (int il = 0; il < m->hp.n_layer; il++) {
        qk_layer *l = &m->layers[il];
        qk_weight *ws[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate, &l->w_up, &l->w_down,
                           &l->gate_inp, &l->gate_inp_shexp, &l->gate_shexp, &l->up_shexp,
                           &l->down_shexp};
        for (size_t i = 0; i < sizeof ws / sizeof *ws; i++)
            if ((ws[i]->data || ws[i]->wq) && pack_weight(m, ws[i], ws[i]->mapped, err))
                return err->code;
        for (int e = 0; l->moe && e < m->hp.n_expert; e++) {
            qk_weight *xs[] = {&l->exps.gate[e], &l->exps.up[e], &l->exps.down[e]};
            for (size_t i = 0; i < 3; i++)
                if (pack_weight(m, xs[i], xs[i]->mapped, err))
                    return err->code;
        }
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
    if (load_norm(&ld, "output_norm.weight", m->hp.n_embd, true, &m->output_norm, err) ||
        load_vector(&ld, "output.bias", m->hp.n_vocab, false, &m->output_bias, err) ||
        load_vector(&ld, "rope_freqs.weight", m->hp.n_rot / 2, false, &m->rope_freqs, err) ||
        load_vector(&ld, "rope_factors_long.weight", m->hp.n_rot / 2, false, &m->rope_long, err) ||
        load_vector(&ld, "rope_factors_short.weight", m->hp.n_rot / 2, false, &m->rope_short, err))
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
    if (qk_gguf_hparams(g, &hp, err))
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
