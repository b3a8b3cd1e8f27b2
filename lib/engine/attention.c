/* attention.c - attention of a batch's queries against a layer's KV cache,
 * as ggml's CPU flash-attention kernels compute it (ggml-cpu/ops.cpp at
 * d32676d: ggml_compute_forward_flash_attn_ext_tiled for the F32
 * accumulator, ..._f16_one_chunk for the F16 one; see forward.h for which
 * llama.cpp uses), with the options llama.cpp's graphs give it
 * (src/llama-graph.cpp build_attn_mha):
 * - a sliding window (src/llama-hparams.h is_masked_swa, LLAMA_SWA_TYPE_STANDARD):
 *   a query at position p sees the keys at p - n_swa + 1 .. p;
 * - soft-capping of the scores (gemma2): the scale divided by the cap, then
 *   s = cap * tanhf(s), before the mask;
 * - attention sinks (gpt-oss): after the last key, one more logit per head
 *   joins the softmax with no value (ggml_flash_attn_ext_add_sinks).
 * Reduction orders: see forward.c. */
#include "lib/engine/forward_impl.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attn.h"
#include "kernels/half.h"
#include "lib/core/threads.h"

typedef struct {
    qk_ctx *c;
    const qk_layer *L;
    const void *kc, *vc; /* this layer's cache */
    const float *kqc;    /* KIVI: this layer's quantized key groups, or NULL */
    int pos0;
    int n_swa;           /* 0: no window */
    float scale, cap;    /* scores: s * scale, then cap * tanhf (cap 0: not) */
    int n_tok, tb, hc;   /* attend_blocks: tokens in the batch, tokens per block, heads per chunk */
    atomic_int *oom;     /* attend_blocks: set when its scratch could not be allocated */
} attn_job;

/* The first position a query at pos sees. */
static int first_seen(const attn_job *j, int pos)
{
    return j->n_swa > 0 && pos - j->n_swa + 1 > 0 ? pos - j->n_swa + 1 : 0;
}

/* The online softmax of ggml's flash-attention kernel
 * (ggml_compute_forward_flash_attn_ext_f16_one_chunk): keys in order, running
 * maximum M and sum S in float; when a score raises the maximum the value
 * accumulator is scaled by ms = expf(Mold - M), otherwise the value is added
 * with weight vs = expf(s - M); at the end the accumulator is divided by S. */
typedef struct {
    float M, S;
} online;

static void online_step(online *o, float s, float *ms, float *vs)
{
    *ms = 1.0f;
    *vs = 1.0f;
    if (s > o->M) {
        *ms = expf(o->M - s);
        o->M = s;
    } else {
        *vs = expf(s - o->M);
    }
}

/* F16 cache and F16 accumulator, llama.cpp's generic kernel
 * (ggml_compute_forward_flash_attn_ext_f16_one_chunk with F16 K and V): q is
 * rounded to F16, each score is ggml_vec_dot_f16 (exact products summed in
 * double), and the value accumulator itself is F16, rounded after every
 * ggml_vec_scale_f16 / ggml_vec_mad_f16 step; keys outside the window are
 * skipped; a sink scales the F32 copy of the accumulator. */
static void attend_f16acc(const attn_job *j, const float *q, int h, int pos, float *out)
{
    const qk_ctx *c = j->c;
    const qk_hparams *hp = &c->m->hp;
    const int hd = hp->head_dim, hdv = hp->head_dim_v, kvh = h / (hp->n_head / hp->n_head_kv);
    const uint16_t *kc = j->kc, *vc = j->vc;
    uint16_t q16[QK_MAX_HEAD_DIM], acc[QK_MAX_HEAD_DIM];
    for (int i = 0; i < hd; i++)
        q16[i] = qk_f32_to_f16(q[i]);
    memset(acc, 0, (size_t)hdv * sizeof *acc);
    online o = {-INFINITY, 0.0f};
    for (int p = first_seen(j, pos); p <= pos; p++) {
        const uint16_t *k = kc + qk_kv_off(c, kvh, p, hd);
        const uint16_t *v = vc + qk_kv_off(c, kvh, p, hdv);
        double dot = 0.0;
        for (int i = 0; i < hd; i++)
            dot += (double)(qk_f16_to_f32(k[i]) * qk_f16_to_f32(q16[i]));
        float s = (float)dot * j->scale, ms, vs;
        if (j->cap != 0.0f)
            s = j->cap * tanhf(s);
        online_step(&o, s, &ms, &vs);
        if (ms != 1.0f)
            for (int i = 0; i < hdv; i++)
                acc[i] = qk_f32_to_f16(qk_f16_to_f32(acc[i]) * ms);
        /* y = f16(y + x*vs), the product and sum fused as in ggml's FMA */
        for (int i = 0; i < hdv; i++)
            acc[i] = qk_f32_to_f16(
                (float)((double)qk_f16_to_f32(v[i]) * vs + (double)qk_f16_to_f32(acc[i])));
        o.S = o.S * ms + vs;
    }
    for (int i = 0; i < hdv; i++)
        out[i] = qk_f16_to_f32(acc[i]);
    if (j->L->sinks) {
        const float s = j->L->sinks[h];
        float ms = 1.0f, vs = 1.0f;
        if (s > o.M) {
            ms = expf(o.M - s);
            for (int i = 0; i < hdv; i++)
                out[i] *= ms;
        } else {
            vs = expf(s - o.M);
        }
        o.S = o.S * ms + vs;
    }
    const float inv = o.S == 0.0f ? 0.0f : 1.0f / o.S;
    for (int i = 0; i < hdv; i++)
        out[i] *= inv;
}

/* Work items: (token, head) pairs, for the F16 accumulator. */
static void attend_range(void *ctx, size_t begin, size_t end)
{
    const attn_job *j = ctx;
    const qk_ctx *c = j->c;
    const qk_hparams *hp = &c->m->hp;
    for (size_t i = begin; i < end; i++) {
        const int t = (int)(i / (size_t)hp->n_head), h = (int)(i % (size_t)hp->n_head);
        const float *q = c->q + ((size_t)t * hp->n_head + h) * hp->head_dim;
        float *out = c->att + ((size_t)t * hp->n_head + h) * hp->head_dim_v;
        attend_f16acc(j, q, h, j->pos0 + t, out);
    }
}

/* ---- attention for a block of queries sharing one KV head ------------------- */

/* F32 accumulator, keys and values read from an F32 or an F16 cache, in
 * tiles of QK_ATT_TILE keys at positions 0, 64, 128, ..., with attn.h's
 * arithmetic (llama.cpp's tiled kernel).  The queries of up to ATT_TB
 * consecutive tokens times up to ATT_MAXQ heads of one KV group walk the
 * keys together: each key and value row is converted to float once for all
 * of them.  A query's numbers do not depend on its companions: it reads
 * its own scores, its maximum and sum cover the keys it may see (outside
 * its window a score is -inf, as ggml's mask makes it), and the others add
 * w = 0 to its accumulator (acc + 0 v = acc; a -0 left by a scaling is made
 * +0 first, so the sign of a zero cannot tell either); tiles no query of
 * the block sees are skipped, as ggml skips a fully masked tile.  With KIVI
 * keys a block holds one token, so all its queries read a key from the
 * same copy. */
#define ATT_TB 16
#define ATT_MAXQ 64
#define ATT_K4_MAXQ 16 /* blocks of up to this many query lanes use scores4 */

typedef struct {
    float *qt, *kf, *vf, *st, *acc, *M, *S, *ms;
    int *pos;
} att_scratch;

static float *att_scratch_new(att_scratch *w, int hd, int hdv)
{
    const size_t nf = (size_t)ATT_MAXQ * hd + (size_t)QK_ATT_TILE * (hd + hdv) +
                      (size_t)QK_ATT_TILE * ATT_MAXQ + (size_t)ATT_MAXQ * hdv + 3 * ATT_MAXQ;
    float *f = malloc(nf * sizeof *f + ATT_MAXQ * sizeof *w->pos);
    if (!f)
        return NULL;
    w->qt = f;
    w->kf = w->qt + (size_t)ATT_MAXQ * hd;
    w->vf = w->kf + (size_t)QK_ATT_TILE * hd;
    w->st = w->vf + (size_t)QK_ATT_TILE * hdv;
    w->acc = w->st + (size_t)QK_ATT_TILE * ATT_MAXQ;
    w->M = w->acc + (size_t)ATT_MAXQ * hdv;
    w->S = w->M + ATT_MAXQ;
    w->ms = w->S + ATT_MAXQ;
    w->pos = (int *)(w->ms + ATT_MAXQ);
    /* scores4 leaves the padding queries' columns alone: zeros, then the
     * softmax step's zero weights */
    memset(w->st, 0, (size_t)QK_ATT_TILE * ATT_MAXQ * sizeof *w->st);
    return f;
}

/* Bytes of one cache element (kv_type). */
static size_t kv_bytes(const qk_ctx *c) { return c->kv_type == QK_F16 ? 2 : 4; }

/* Row p of KV head h in the cache (len elements a row). */
static const char *cache_at(const qk_ctx *c, const void *cache, int h, int p, int len)
{
    return (const char *)cache + qk_kv_off(c, h, p, len) * kv_bytes(c);
}

/* Rows p .. p+n-1 of KV head h (len elements each) as float rows: from
 * the cache (kv_type, head-major, so the rows are one run), or from the
 * KIVI key copy kqc (float, token-major). */
static void cache_rows(const qk_ctx *c, const void *cache, bool kivi, int h, int p, int n, int len, float *dst)
{
    if (kivi) {
        for (int k = 0; k < n; k++)
            memcpy(dst + (size_t)k * len, (const float *)cache + (size_t)(p + k) * c->kv_dim + (size_t)h * len,
                   (size_t)len * sizeof *dst);
    } else if (c->kv_type == QK_F16) {
        c->attn->f16_row((const uint16_t *)cache_at(c, cache, h, p, len), dst, n * len);
    } else {
        memcpy(dst, cache_at(c, cache, h, p, len), (size_t)n * len * sizeof *dst);
    }
}

/* The cache's rows p .. p+n-1 of head h prefetched: a decode step reads
 * each layer's cache once, from memory, and the tile's arithmetic can run
 * under the loads. */
static void cache_prefetch(const qk_ctx *c, const void *cache, int h, int p, int n, int len)
{
    const char *r = cache_at(c, cache, h, p, len);
    for (size_t b = 0; b < (size_t)n * len * kv_bytes(c); b += 64)
        __builtin_prefetch(r + b, 0, 3);
}

/* Soft-capping and the window on one tile's scores (ggml: tanh, scale by
 * the cap, then the mask's -inf). */
static void cap_and_window(const attn_job *j, float *st, int nqp, int nq, int nk, int p0,
                           const int *pos)
{
    if (j->cap != 0.0f)
        for (size_t i = 0; i < (size_t)nk * nqp; i++)
            st[i] = j->cap * tanhf(st[i]);
    if (j->n_swa > 0)
        for (int i = 0; i < nq; i++) {
            const int lo = first_seen(j, pos[i]);
            for (int k = 0; k < nk && p0 + k < lo; k++)
                st[(size_t)k * nqp + i] = -INFINITY;
        }
}

/* A sink joins query i's softmax at the end (the tiled kernel's step). */
static void add_sink(const qk_attn_kernels *ak, float s, float *acc, int hdv, float M, float *S)
{
    float ms = 1.0f, vs = 1.0f;
    if (s > M) {
        ms = expf(M - s);
        ak->scale(acc, ms, hdv);
    } else {
        vs = expf(s - M);
    }
    *S = *S * ms + vs;
}

static void attend_block(const attn_job *j, int kvh, int g0, int ng, int t0, int nt, att_scratch *w)
{
    const qk_ctx *c = j->c;
    const qk_hparams *hp = &c->m->hp;
    const qk_attn_kernels *ak = c->attn;
    const int hd = hp->head_dim, hdv = hp->head_dim_v, group = hp->n_head / hp->n_head_kv;
    const int nq = nt * ng, nqp = (nq + 7) / 8 * 8, pos_max = j->pos0 + t0 + nt - 1;
    for (int i = 0; i < nqp; i++) {
        const int t = t0 + i / ng, g = g0 + i % ng;
        const float *q = c->q + ((size_t)t * hp->n_head + (size_t)(kvh * group + g)) * hd;
        for (int d = 0; d < hd; d++)
            w->qt[(size_t)d * nqp + i] = i < nq ? q[d] : 0.0f;
        w->pos[i] = i < nq ? j->pos0 + t : -1;
        w->M[i] = -INFINITY, w->S[i] = 0.0f;
    }
    memset(w->acc, 0, (size_t)nq * hdv * sizeof *w->acc);
    const int kq_end = j->kqc ? (pos_max + 1) / qk_kvq_group(&c->kvq) * qk_kvq_group(&c->kvq) : 0;
    /* few queries (decode): scores in (query, key) lanes, the same bits */
    const bool k4 = ak->scores4 && !j->kqc && nqp <= ATT_K4_MAXQ && hd <= QK_ATT_K4_MAXD;
    const int first = first_seen(j, j->pos0 + t0) / QK_ATT_TILE * QK_ATT_TILE;
    for (int p0 = first; p0 <= pos_max; p0 += QK_ATT_TILE) {
        const int nk = pos_max + 1 - p0 < QK_ATT_TILE ? pos_max + 1 - p0 : QK_ATT_TILE;
        if (k4) {
            ak->k4_rows(cache_at(c, j->kc, kvh, p0, hd), c->kv_type == QK_F16, (size_t)hd, nk, hd, w->kf);
            cache_prefetch(c, j->vc, kvh, p0, nk, hdv);
            ak->scores4(w->qt, nqp, nq, w->kf, nk, hd, j->scale, w->st);
        } else {
            /* KIVI: keys of the groups complete at the (one) token's
             * position come from the quantized copy */
            const int nkq = kq_end - p0 < 0 ? 0 : kq_end - p0 < nk ? kq_end - p0 : nk;
            cache_rows(c, j->kqc, true, kvh, p0, nkq, hd, w->kf);
            cache_rows(c, j->kc, false, kvh, p0 + nkq, nk - nkq, hd, w->kf + (size_t)nkq * hd);
            ak->scores(w->qt, nqp, w->kf, nk, hd, j->scale, w->st);
        }
        cap_and_window(j, w->st, nqp, nq, nk, p0, w->pos);
        ak->softmax(w->st, nqp, nk, p0, w->pos, w->M, w->S, w->ms);
        for (int i = 0; i < nq; i++)
            if (w->ms[i] != 1.0f) {
                float *a = w->acc + (size_t)i * hdv;
                ak->scale(a, w->ms[i], hdv);
                for (int d = 0; d < hdv; d++)
                    a[d] += 0.0f; /* -0 -> +0 */
            }
        cache_rows(c, j->vc, false, kvh, p0, nk, hdv, w->vf);
        if (k4 && p0 + QK_ATT_TILE <= pos_max) {
            const int nn = pos_max + 1 - (p0 + QK_ATT_TILE);
            cache_prefetch(c, j->kc, kvh, p0 + QK_ATT_TILE, nn < QK_ATT_TILE ? nn : QK_ATT_TILE, hd);
        }
        ak->pv(w->acc, nq, hdv, w->st, nqp, w->vf, nk);
    }
    for (int i = 0; i < nq; i++) {
        const int t = t0 + i / ng, h = kvh * group + g0 + i % ng;
        float *out = c->att + ((size_t)t * hp->n_head + (size_t)h) * hdv;
        memcpy(out, w->acc + (size_t)i * hdv, (size_t)hdv * sizeof *out);
        if (j->L->sinks)
            add_sink(ak, j->L->sinks[h], out, hdv, w->M[i], &w->S[i]);
        ak->scale(out, w->S[i] == 0.0f ? 0.0f : 1.0f / w->S[i], hdv);
    }
}

/* Work items: (block of j->tb tokens, from the last, KV head, chunk of j->hc heads). */
static void attend_blocks(void *ctx, size_t begin, size_t end)
{
    const attn_job *j = ctx;
    const qk_hparams *hp = &j->c->m->hp;
    const int group = hp->n_head / hp->n_head_kv, nch = (group + j->hc - 1) / j->hc;
    const int nblk = (j->n_tok + j->tb - 1) / j->tb;
    att_scratch w;
    float *mem = att_scratch_new(&w, hp->head_dim, hp->head_dim_v);
    if (!mem) {
        atomic_store(j->oom, 1);
        return;
    }
    for (size_t i = begin; i < end; i++) {
        const int ch = (int)(i % (size_t)nch);
        const int kvh = (int)(i / (size_t)nch % (size_t)hp->n_head_kv);
        /* the last blocks first: they see the most keys, and a thread
         * left with one of them at the end would keep the others waiting */
        const int blk = nblk - 1 - (int)(i / (size_t)nch / (size_t)hp->n_head_kv);
        const int t0 = blk * j->tb, nt = j->n_tok - t0 < j->tb ? j->n_tok - t0 : j->tb;
        const int g0 = ch * j->hc, ng = group - g0 < j->hc ? group - g0 : j->hc;
        attend_block(j, kvh, g0, ng, t0, nt, &w);
    }
    free(mem);
}

int qk_attend(qk_ctx *c, int il, const void *kc, const void *vc, const float *kqc, int n_tok,
              qk_err *err)
{
    const qk_hparams *hp = &c->m->hp;
    const qk_layer *L = &c->m->layers[il];
    attn_job j = {.c = c, .L = L, .kc = kc, .vc = vc, .kqc = kqc, .pos0 = c->n_past,
                  .n_swa = L->swa ? hp->n_swa : 0, .cap = hp->attn_softcap};
    /* q was scaled already (gemma, phi3), or the scores are */
    j.scale = hp->q_prescale ? 1.0f : hp->kq_scale;
    if (j.cap != 0.0f)
        j.scale /= j.cap;
    const int group = hp->n_head / hp->n_head_kv;
    if (c->f16_acc) {
        qk_parallel_for(c->nthreads, (size_t)n_tok * hp->n_head, 1, attend_range, &j);
        return 0;
    }
    j.n_tok = n_tok;
    j.hc = group < ATT_MAXQ ? group : ATT_MAXQ;
    j.tb = kqc ? 1 : j.hc * ATT_TB <= ATT_MAXQ ? ATT_TB : ATT_MAXQ / j.hc;
    const size_t nblk = (size_t)(n_tok + j.tb - 1) / (size_t)j.tb;
    const size_t nch = (size_t)(group + j.hc - 1) / (size_t)j.hc;
    atomic_int oom = 0;
    j.oom = &oom;
    qk_parallel_for(c->nthreads, nblk * (size_t)hp->n_head_kv * nch, 1, attend_blocks, &j);
    if (atomic_load(&oom))
        return qk_errf(err, QK_EIO, "out of memory (attention scratch)");
    return 0;
}
