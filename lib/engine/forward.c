/* forward.c - the transformer forward pass, one layer at a time, as
 * llama.cpp builds it (src/models/llama.cpp, qwen2.cpp, qwen3.cpp) and as
 * ggml's CPU backend computes each op (ggml-cpu/ops.cpp, vec.h):
 *
 *   x = embed(token)
 *   per layer:  h  = rmsnorm(x) * attn_norm
 *               q, k, v = Wq h + bq, Wk h + bk, Wv h + bv
 *               (qwen3: q, k = rmsnorm per head * q_norm, k_norm)
 *               q, k = rope(q, k, pos);  k, v -> cache
 *               x += Wo attention(q, cache) + bo
 *               h  = rmsnorm(x) * ffn_norm
 *               x += Wdown (silu(Wgate h) * Wup h)
 *   logits = Wout (rmsnorm(x) * output_norm)
 *
 * Reduction orders (issue #10; the REPRODUCIBILITY section of qk-run(1)
 * states them for users).  Every value below is computed by one thread, in
 * an order that depends on nothing but the model and the token's position,
 * so the logits are bit-identical for any thread count, any batch size,
 * prompt or one-token decode, and any SIMD level:
 * - y = W x (matmul.c): each y[t][r] is one dot product over the whole
 *   row, never split along K; its order is the weight type's (types.h,
 *   kernels/float.c: F32 a double sum, F16/BF16 the float-dot order
 *   (llama.cpp's AVX2 one), quantized types integer block sums then float over blocks in
 *   block order), the same bits at every level (cpu.h).  Threads take
 *   fixed ranges of weight rows (and of tokens for the activation encoding).
 * - rmsnorm: squares summed in double in index order, per token row (and
 *   per head for qwen3's q/k norms).
 * - attention: per (token, head) pair, one thread (which takes blocks of
 *   tokens x the heads of one KV group); keys in position order 0 .. pos in
 *   tiles of 64 with attn.h's arithmetic, llama.cpp's tiled AVX2 kernel:
 *   each score a fused chain over the head dimension, a running maximum per
 *   tile, weights by ggml's vector expf, their sum in 8-key groups and
 *   double, values accumulated in position order with fused multiply-adds
 *   (F16 accumulator path: a double sum of F16 products per score and the
 *   C library's expf, llama.cpp's one-query kernel).  A token's own key
 *   and value are stored in the cache before any pair reads it, so prompt
 *   batches and decode calls read the same data.  Threads take fixed
 *   ranges of (token block, KV head) items.
 * - rope angles come from libm (powf, cosf, sinf) per position; the
 *   elementwise ops (biases, SwiGLU's expf, residual adds) have no order.
 * - calibration (qk_ctx_params.mm_hook) only reads the products' inputs,
 *   on the calling thread, between the parallel steps.
 * - studies (qk_ctx_params.layer_hook, .kvq): the hook runs on the calling
 *   thread and changes each token row on its own (lib/study/wire.c); the KV codec
 *   quantizes each token's rows as they are stored, on the calling thread,
 *   and a KIVI key group (fixed positions gG .. gG+G-1) once it is complete;
 *   a query at position p reads a key from the quantized group copy exactly
 *   when that group ends at or before p, so what it sees depends on p alone.
 */
#include "lib/engine/forward.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/ckd.h"
#include "kernels/attn.h"
#include "kernels/cpu.h"
#include "kernels/half.h"
#include "lib/core/threads.h"

/* ---- elementwise ops ------------------------------------------------------ */

/* ggml_compute_forward_rms_norm_f32 followed by ggml_mul with the weight:
 * squares summed in double, scale = 1/sqrtf(mean + eps) in float. */
static void rmsnorm(float *y, const float *x, const float *w, int n, float eps)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int i = 0; i < n; i++)
        y[i] = x[i] * scale * w[i];
}

static void add_bias(float *y, const float *b, int n_tok, int n)
{
    if (!b)
        return;
    for (int t = 0; t < n_tok; t++)
        for (int i = 0; i < n; i++)
            y[(size_t)t * n + i] += b[i];
}

/* ggml_vec_swiglu_f32: silu(g) * u with silu(x) = x / (1 + expf(-x)). */
static void swiglu(float *g, const float *u, size_t n)
{
    for (size_t i = 0; i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* ---- rope ------------------------------------------------------------------ */

/* ggml_rope_cache_init without YaRN (ext_factor 0, attn_factor 1):
 * theta_i = pos * freq_scale * base^(-2i/n_rot) / freq_factor_i, the power
 * built by repeated multiplication in float like ggml. */
static void rope_cache(float *cs, int pos, const qk_model *m)
{
    const qk_hparams *hp = &m->hp;
    const float theta_scale = powf(hp->rope_freq_base, -2.0f / (float)hp->n_rot);
    float theta = (float)pos;
    for (int i0 = 0; i0 < hp->n_rot; i0 += 2) {
        const float ff = m->rope_freqs ? m->rope_freqs[i0 / 2] : 1.0f;
        const float t = hp->rope_freq_scale * (theta / ff);
        cs[i0] = cosf(t);
        cs[i0 + 1] = sinf(t);
        theta *= theta_scale;
    }
}

/* rotate_pairs() of ggml_compute_forward_rope_flt for one head: NORMAL mode
 * rotates (2i, 2i+1), NEOX mode (i, i + n_rot/2); dims past n_rot are kept. */
static void rope_head(float *v, const float *cs, int n_rot, qk_rope_mode mode)
{
    const int stride = mode == QK_ROPE_NEOX ? n_rot / 2 : 1;
    for (int i0 = 0; i0 < n_rot; i0 += 2) {
        float *p = v + (mode == QK_ROPE_NEOX ? i0 / 2 : i0);
        const float c = cs[i0], s = cs[i0 + 1];
        const float x0 = p[0], x1 = p[stride];
        p[0] = x0 * c - x1 * s;
        p[stride] = x0 * s + x1 * c;
    }
}

/* Per-head RMSNorm (qwen3), then rope, for the n_heads heads of token t's row. */
static void prepare_heads(const qk_ctx *c, float *row, int t, int n_heads, const float *norm)
{
    const qk_hparams *hp = &c->m->hp;
    const int hd = hp->head_dim;
    for (int h = 0; h < n_heads; h++) {
        float *v = row + (size_t)h * hd;
        if (norm)
            rmsnorm(v, v, norm, hd, hp->rms_eps);
        rope_head(v, c->rope + (size_t)t * hp->n_rot, hp->n_rot, hp->rope_mode);
    }
}

/* ---- attention ------------------------------------------------------------ */

typedef struct {
    qk_ctx *c;
    const void *kc, *vc; /* this layer's cache */
    const float *kqc;    /* KIVI: this layer's quantized key groups, or NULL */
    int pos0;
    int n_tok, tb, hc;   /* attend_blocks: tokens in the batch, tokens per block, heads per chunk */
    atomic_int *oom;     /* attend_blocks: set when its scratch could not be allocated */
} attn_job;

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
 * ggml_vec_scale_f16 / ggml_vec_mad_f16 step. */
static void attend_f16acc(const attn_job *j, const float *q, int kvh, int pos, float *out)
{
    const qk_ctx *c = j->c;
    const int hd = c->m->hp.head_dim, hdv = c->m->hp.head_dim_v;
    const uint16_t *kc = j->kc, *vc = j->vc;
    uint16_t q16[QK_MAX_HEAD_DIM], acc[QK_MAX_HEAD_DIM];
    for (int i = 0; i < hd; i++)
        q16[i] = qk_f32_to_f16(q[i]);
    memset(acc, 0, (size_t)hdv * sizeof *acc);
    online o = {-INFINITY, 0.0f};
    for (int p = 0; p <= pos; p++) {
        const uint16_t *k = kc + (size_t)p * c->kv_dim + (size_t)kvh * hd;
        const uint16_t *v = vc + (size_t)p * c->kv_dim_v + (size_t)kvh * hdv;
        double dot = 0.0;
        for (int i = 0; i < hd; i++)
            dot += (double)(qk_f16_to_f32(k[i]) * qk_f16_to_f32(q16[i]));
        float ms, vs;
        online_step(&o, (float)dot * c->m->hp.kq_scale, &ms, &vs);
        if (ms != 1.0f)
            for (int i = 0; i < hdv; i++)
                acc[i] = qk_f32_to_f16(qk_f16_to_f32(acc[i]) * ms);
        /* y = f16(y + x*vs), the product and sum fused as in ggml's FMA */
        for (int i = 0; i < hdv; i++)
            acc[i] = qk_f32_to_f16(
                (float)((double)qk_f16_to_f32(v[i]) * vs + (double)qk_f16_to_f32(acc[i])));
        o.S = o.S * ms + vs;
    }
    const float inv = o.S == 0.0f ? 0.0f : 1.0f / o.S;
    for (int i = 0; i < hdv; i++)
        out[i] = qk_f16_to_f32(acc[i]) * inv;
}

/* Work items: (token, head) pairs, for the F16 accumulator. */
static void attend_range(void *ctx, size_t begin, size_t end)
{
    const attn_job *j = ctx;
    const qk_ctx *c = j->c;
    const qk_hparams *hp = &c->m->hp;
    const int group = hp->n_head / hp->n_head_kv;
    for (size_t i = begin; i < end; i++) {
        const int t = (int)(i / (size_t)hp->n_head), h = (int)(i % (size_t)hp->n_head);
        const float *q = c->q + ((size_t)t * hp->n_head + h) * hp->head_dim;
        float *out = c->att + ((size_t)t * hp->n_head + h) * hp->head_dim_v;
        attend_f16acc(j, q, h / group, j->pos0 + t, out);
    }
}

/* ---- attention for a block of queries sharing one KV head ------------------- */

/* F32 accumulator, keys and values read from an F32 or an F16 cache, in
 * tiles of QK_ATT_TILE keys at positions 0, 64, 128, ..., with attn.h's
 * arithmetic (llama.cpp's tiled kernel).  The queries of up to ATT_TB
 * consecutive tokens times up to ATT_MAXQ heads of one KV group walk the
 * keys together: each key and value row is converted to float once for all
 * of them.  A query's numbers do not depend on its companions: it reads
 * its own scores, its maximum and sum cover the keys it may see, and the
 * others add w = 0 to its accumulator (acc + 0 v = acc; a -0 left by a
 * scaling is made +0 first, so the sign of a zero cannot tell either).
 * With KIVI keys a block holds one token, so all its queries read a key
 * from the same copy. */
#define ATT_TB 16
#define ATT_MAXQ 64

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
    return f;
}

/* Row p of a cache (F16 or F32, row length `len`, this head at `off`) as floats. */
static void cache_row(const qk_ctx *c, const void *cache, size_t stride, size_t off, int p, int len,
                      float *dst)
{
    const size_t o = (size_t)p * stride + off;
    if (c->kv_type == QK_F16)
        c->attn->f16_row((const uint16_t *)cache + o, dst, len);
    else
        memcpy(dst, (const float *)cache + o, (size_t)len * sizeof *dst);
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
    for (int p0 = 0; p0 <= pos_max; p0 += QK_ATT_TILE) {
        const int nk = pos_max + 1 - p0 < QK_ATT_TILE ? pos_max + 1 - p0 : QK_ATT_TILE;
        /* KIVI: keys of the groups complete at the (one) token's position
         * come from the quantized copy */
        for (int k = 0; k < nk; k++)
            cache_row(c, p0 + k < kq_end ? (const void *)j->kqc : j->kc, (size_t)c->kv_dim,
                      (size_t)kvh * hd, p0 + k, hd, w->kf + (size_t)k * hd);
        ak->scores(w->qt, nqp, w->kf, nk, hd, hp->kq_scale, w->st);
        ak->softmax(w->st, nqp, nk, p0, w->pos, w->M, w->S, w->ms);
        for (int i = 0; i < nq; i++)
            if (w->ms[i] != 1.0f) {
                float *a = w->acc + (size_t)i * hdv;
                ak->scale(a, w->ms[i], hdv);
                for (int d = 0; d < hdv; d++)
                    a[d] += 0.0f; /* -0 -> +0 */
            }
        for (int k = 0; k < nk; k++)
            cache_row(c, j->vc, (size_t)c->kv_dim_v, (size_t)kvh * hdv, p0 + k, hdv,
                      w->vf + (size_t)k * hdv);
        ak->pv(w->acc, nq, hdv, w->st, nqp, w->vf, nk);
    }
    for (int i = 0; i < nq; i++) {
        const int t = t0 + i / ng, g = g0 + i % ng;
        float *out = c->att + ((size_t)t * hp->n_head + (size_t)(kvh * group + g)) * hdv;
        memcpy(out, w->acc + (size_t)i * hdv, (size_t)hdv * sizeof *out);
        ak->scale(out, w->S[i] == 0.0f ? 0.0f : 1.0f / w->S[i], hdv);
    }
}

/* Work items: (block of j->tb tokens, KV head, chunk of j->hc heads). */
static void attend_blocks(void *ctx, size_t begin, size_t end)
{
    const attn_job *j = ctx;
    const qk_hparams *hp = &j->c->m->hp;
    const int group = hp->n_head / hp->n_head_kv, nch = (group + j->hc - 1) / j->hc;
    att_scratch w;
    float *mem = att_scratch_new(&w, hp->head_dim, hp->head_dim_v);
    if (!mem) {
        atomic_store(j->oom, 1);
        return;
    }
    for (size_t i = begin; i < end; i++) {
        const int ch = (int)(i % (size_t)nch);
        const int kvh = (int)(i / (size_t)nch % (size_t)hp->n_head_kv);
        const int blk = (int)(i / (size_t)nch / (size_t)hp->n_head_kv);
        const int t0 = blk * j->tb, nt = j->n_tok - t0 < j->tb ? j->n_tok - t0 : j->tb;
        const int g0 = ch * j->hc, ng = group - g0 < j->hc ? group - g0 : j->hc;
        attend_block(j, kvh, g0, ng, t0, nt, &w);
    }
    free(mem);
}

/* ---- per-token stages ------------------------------------------------------- */

/* The elementwise work between the matrix products, token rows split over
 * the threads (each row's arithmetic is its own, so the bits do not depend
 * on the split). */
typedef enum {
    ST_ATTN_NORM, /* xb = rmsnorm(x) * attn_norm */
    ST_QKV,       /* biases, per-head norms and rope of q and k; k, v into an F16/F32 cache */
    ST_ATTN_OUT,  /* x += Wo att + bo, then xb = rmsnorm(x) * ffn_norm */
    ST_SWIGLU,    /* gate = silu(gate) * up */
    ST_FFN_OUT,   /* x += Wdown ... */
    ST_OUT_NORM,  /* xb[t - first] = rmsnorm(x[t]) * output_norm */
} stage_id;

typedef struct {
    qk_ctx *c;
    const qk_layer *L;
    stage_id st;
    int off;          /* ST_OUT_NORM: item i is row off + i (others: row i) */
    int pos0;         /* ST_QKV: the cache row of the batch's first token */
    void *kc, *vc;    /* ST_QKV: this layer's cache, or NULL when stored later */
} stage_job;

/* One token's k or v row into an F16 or F32 cache at row `row`. */
static void cache_put(const qk_ctx *c, void *cache, int row, const float *src, int n)
{
    if (c->kv_type == QK_F16)
        c->f16_enc(src, (uint16_t *)cache + (size_t)row * n, n);
    else
        memcpy((float *)cache + (size_t)row * n, src, (size_t)n * sizeof *src);
}

static void stage_rows(void *ctx, size_t begin, size_t end)
{
    const stage_job *j = ctx;
    qk_ctx *c = j->c;
    const qk_model *m = c->m;
    const qk_hparams *hp = &m->hp;
    const qk_layer *L = j->L;
    const size_t e = (size_t)hp->n_embd;
    for (size_t i = begin; i < end; i++) {
        const size_t t = i + (size_t)j->off;
        float *x = c->x + t * e, *xb = c->xb + t * e;
        switch (j->st) {
        case ST_ATTN_NORM:
            rmsnorm(xb, x, L->attn_norm, (int)e, hp->rms_eps);
            break;
        case ST_QKV: {
            const size_t nq = (size_t)hp->n_head * hp->head_dim;
            float *q = c->q + t * nq, *k = c->k + t * c->kv_dim, *v = c->v + t * c->kv_dim_v;
            add_bias(q, L->bq, 1, (int)nq);
            add_bias(k, L->bk, 1, c->kv_dim);
            add_bias(v, L->bv, 1, c->kv_dim_v);
            prepare_heads(c, q, (int)t, hp->n_head, L->q_norm);
            prepare_heads(c, k, (int)t, hp->n_head_kv, L->k_norm);
            if (j->kc) {
                cache_put(c, j->kc, j->pos0 + (int)t, k, c->kv_dim);
                cache_put(c, j->vc, j->pos0 + (int)t, v, c->kv_dim_v);
            }
            break;
        }
        case ST_ATTN_OUT: {
            float *proj = c->proj + t * e;
            add_bias(proj, L->bo, 1, (int)e);
            for (size_t d = 0; d < e; d++)
                x[d] = proj[d] + x[d];
            rmsnorm(xb, x, L->ffn_norm, (int)e, hp->rms_eps);
            break;
        }
        case ST_SWIGLU:
            swiglu(c->gate + t * (size_t)hp->n_ff, c->up + t * (size_t)hp->n_ff, (size_t)hp->n_ff);
            break;
        case ST_FFN_OUT: {
            const float *proj = c->proj + t * e;
            for (size_t d = 0; d < e; d++)
                x[d] = proj[d] + x[d];
            break;
        }
        case ST_OUT_NORM:
            rmsnorm(c->xb + i * e, x, m->output_norm, (int)e, hp->rms_eps);
            break;
        }
    }
}

/* Run a stage over n rows (from row `off` for ST_OUT_NORM); ranges of 4
 * rows, so a one-token decode step stays on the calling thread. */
static void stage(qk_ctx *c, const qk_layer *L, stage_id st, int off, int n, int pos0, void *kc,
                  void *vc)
{
    stage_job j = {.c = c, .L = L, .st = st, .off = off, .pos0 = pos0, .kc = kc, .vc = vc};
    qk_parallel_for(c->nthreads, (size_t)n, 4, stage_rows, &j);
}

/* ---- one batch --------------------------------------------------------------- */

/* The products of weights w[0..nw) with one input x, after the calibration
 * hook (qk_ctx_params.mm_hook) has seen x once per weight. */
static int products(qk_ctx *c, const qk_weight *const *w, float *const *y, int nw, const float *x,
                    int n_tok, qk_err *err)
{
    if (c->mm_hook)
        for (int i = 0; i < nw; i++)
            if (c->mm_hook(c->mm_user, w[i], x, n_tok, err))
                return err->code;
    return qk_matmul_n(w, y, nw, x, n_tok, &c->ws, c->nthreads, err);
}

static int mm(qk_ctx *c, const qk_weight *w, const float *x, int n_tok, float *y, qk_err *err)
{
    return products(c, &w, &y, 1, x, n_tok, err);
}

/* With a KV codec (F32 cache): rows of n floats into the cache at row
 * `first`, quantized and dequantized per token in place unless `raw`. */
static int kvq_store(const qk_ctx *c, float *cache, int first, const float *rows, int n_tok, int n,
                     int hd, bool raw, qk_err *err)
{
    float *dst = cache + (size_t)first * n;
    memcpy(dst, rows, (size_t)n_tok * n * sizeof *rows);
    return raw ? 0 : qk_kvq_rows(&c->kvq, dst, n_tok, n / hd, hd, err);
}

/* KIVI: copy every key group that the rows [first, first+n_tok) complete
 * from the full-precision cache kc into kqc and quantize it per channel. */
static int key_groups(const qk_ctx *c, const float *kc, float *kqc, int first, int n_tok,
                      qk_err *err)
{
    const int g = qk_kvq_group(&c->kvq);
    for (int end = (first / g + 1) * g; end <= first + n_tok; end += g) {
        const size_t off = (size_t)(end - g) * c->kv_dim, n = (size_t)g * c->kv_dim;
        memcpy(kqc + off, kc + off, n * sizeof *kqc);
        if (qk_kvq_key_group(&c->kvq, kqc + off, c->kv_dim, err))
            return err->code;
    }
    return 0;
}

static int attention_block(qk_ctx *c, int il, int n_tok, qk_err *err)
{
    const qk_model *m = c->m;
    const qk_hparams *hp = &m->hp;
    const qk_layer *L = &m->layers[il];
    const size_t elt = c->kv_type == QK_F16 ? 2 : 4;
    void *kc = (uint8_t *)c->k_cache + (size_t)il * c->n_ctx * c->kv_dim * elt;
    void *vc = (uint8_t *)c->v_cache + (size_t)il * c->n_ctx * c->kv_dim_v * elt;

    stage(c, L, ST_ATTN_NORM, 0, n_tok, 0, NULL, NULL);
    const qk_weight *qkv[3] = {&L->wq, &L->wk, &L->wv};
    float *const qkv_out[3] = {c->q, c->k, c->v};
    if (products(c, qkv, qkv_out, 3, c->xb, n_tok, err))
        return err->code;
    /* with a KV codec the rows are stored on this thread afterwards */
    stage(c, L, ST_QKV, 0, n_tok, c->n_past, c->has_kvq ? NULL : kc, c->has_kvq ? NULL : vc);
    float *kqc = c->kq_cache ? c->kq_cache + (size_t)il * c->n_ctx * c->kv_dim : NULL;
    if (c->has_kvq &&
        (kvq_store(c, kc, c->n_past, c->k, n_tok, c->kv_dim, hp->head_dim, kqc != NULL, err) ||
         kvq_store(c, vc, c->n_past, c->v, n_tok, c->kv_dim_v, hp->head_dim_v, false, err) ||
         (kqc && key_groups(c, kc, kqc, c->n_past, n_tok, err))))
        return err->code;

    attn_job j = {.c = c, .kc = kc, .vc = vc, .kqc = kqc, .pos0 = c->n_past};
    const int group = hp->n_head / hp->n_head_kv;
    if (c->f16_acc) {
        qk_parallel_for(c->nthreads, (size_t)n_tok * hp->n_head, 1, attend_range, &j);
    } else {
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
    }

    if (mm(c, &L->wo, c->att, n_tok, c->proj, err))
        return err->code;
    stage(c, L, ST_ATTN_OUT, 0, n_tok, 0, NULL, NULL); /* and the FFN's norm */
    return 0;
}

static int ffn_block(qk_ctx *c, int il, int n_tok, qk_err *err)
{
    const qk_layer *L = &c->m->layers[il];
    const qk_weight *gu[2] = {&L->w_gate, &L->w_up};
    float *const gu_out[2] = {c->gate, c->up};
    if (products(c, gu, gu_out, 2, c->xb, n_tok, err))
        return err->code;
    stage(c, L, ST_SWIGLU, 0, n_tok, 0, NULL, NULL);
    if (mm(c, &L->w_down, c->gate, n_tok, c->proj, err))
        return err->code;
    stage(c, L, ST_FFN_OUT, 0, n_tok, 0, NULL, NULL);
    return 0;
}

/* Logits of rows [first, n_tok) of the batch into out; out NULL: the final
 * norm only (the hook still sees the output product's input). */
static int output_block(qk_ctx *c, int first, int n_tok, float *out, qk_err *err)
{
    const qk_model *m = c->m;
    const int nv = m->hp.n_vocab;
    stage(c, NULL, ST_OUT_NORM, first, n_tok - first, 0, NULL, NULL);
    if (!out)
        return c->mm_hook ? c->mm_hook(c->mm_user, &m->output, c->xb, n_tok - first, err) : 0;
    if (mm(c, &m->output, c->xb, n_tok - first, out, err))
        return err->code;
    add_bias(out, m->output_bias, n_tok - first, nv);
    return 0;
}

/* The rope angles of the batch's n_tok positions from n_past on. */
static void batch_rope(qk_ctx *c, int n_tok)
{
    for (int t = 0; t < n_tok; t++)
        rope_cache(c->rope + (size_t)t * c->m->hp.n_rot, c->n_past + t, c->m);
}

/* Layers [l0, l1) on the batch's residual stream c->x. */
static int batch_layers(qk_ctx *c, int n_tok, int l0, int l1, qk_err *err)
{
    for (int il = l0; il < l1; il++) {
        if (attention_block(c, il, n_tok, err) || ffn_block(c, il, n_tok, err))
            return err->code;
        if (c->layer_hook && c->layer_hook(c->hook_user, il, c->x, n_tok, c->m->hp.n_embd, err))
            return err->code;
    }
    return 0;
}

static int forward_batch(qk_ctx *c, const int32_t *tokens, int n_tok, float *logits, bool all,
                         qk_err *err)
{
    const qk_model *m = c->m;
    if (qk_forward_embed(m, tokens, n_tok, c->x, err))
        return err->code;
    batch_rope(c, n_tok);
    if (batch_layers(c, n_tok, 0, m->hp.n_layer, err))
        return err->code;
    if (logits && output_block(c, all ? 0 : n_tok - 1, n_tok, logits, err))
        return err->code;
    c->n_past += n_tok;
    return 0;
}

/* ---- layer by layer (calibration) -------------------------------------------------- */

int qk_forward_embed(const qk_model *m, const int32_t *tokens, int n, float *x, qk_err *err)
{
    const int e = m->hp.n_embd, nv = m->hp.n_vocab;
    for (int t = 0; t < n; t++) {
        if (tokens[t] < 0 || tokens[t] >= nv)
            return qk_errf(err, QK_EINPUT, "token %d: id %d is outside the vocabulary [0, %d)", t,
                           (int)tokens[t], nv);
        if (qk_weight_row(&m->tok_embd, tokens[t], x + (size_t)t * e, err))
            return err->code;
    }
    return 0;
}

/* n rows of x into the batch buffer, checked against the batch and the cache. */
static int load_rows(qk_ctx *c, const float *x, int n, bool cache, qk_err *err)
{
    if (n <= 0 || n > c->n_batch)
        return qk_errf(err, QK_EINPUT, "%d rows: a batch holds 1 to %d", n, c->n_batch);
    if (cache && n > c->n_ctx - c->n_past)
        return qk_errf(err, QK_EINPUT, "context full: %d cached + %d new tokens > n_ctx %d",
                       c->n_past, n, c->n_ctx);
    memcpy(c->x, x, (size_t)n * c->m->hp.n_embd * sizeof *x);
    return 0;
}

int qk_forward_layers(qk_ctx *c, float *x, int n, int l0, int l1, qk_err *err)
{
    if (l0 < 0 || l1 > c->m->hp.n_layer || l0 > l1)
        return qk_errf(err, QK_EINPUT, "layers %d..%d: the model has %d", l0, l1 - 1, c->m->hp.n_layer);
    if (load_rows(c, x, n, true, err))
        return err->code;
    batch_rope(c, n);
    if (batch_layers(c, n, l0, l1, err))
        return err->code;
    memcpy(x, c->x, (size_t)n * c->m->hp.n_embd * sizeof *x);
    c->n_past += n;
    return 0;
}

int qk_forward_head(qk_ctx *c, const float *x, int n, float *logits, qk_err *err)
{
    if (load_rows(c, x, n, false, err))
        return err->code;
    return output_block(c, 0, n, logits, err);
}

int qk_forward(qk_ctx *c, const int32_t *tokens, int n, float *logits, bool all_logits,
               qk_err *err)
{
    const int nv = c->m->hp.n_vocab;
    if (n <= 0)
        return qk_errf(err, QK_EINPUT, "no tokens to evaluate");
    if (n > c->n_ctx - c->n_past)
        return qk_errf(err, QK_EINPUT, "context full: %d cached + %d new tokens > n_ctx %d",
                       c->n_past, n, c->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= nv)
            return qk_errf(err, QK_EINPUT, "token %d: id %d is outside the vocabulary [0, %d)", i,
                           (int)tokens[i], nv);
    for (int done = 0; done < n; done += c->n_batch) {
        const int b = n - done < c->n_batch ? n - done : c->n_batch;
        const bool last = done + b == n;
        float *out = NULL;
        if (logits && all_logits)
            out = logits + (size_t)done * nv;
        else if (logits && last)
            out = logits;
        if (forward_batch(c, tokens + done, b, out, all_logits, err))
            return err->code;
    }
    return 0;
}

/* ---- context ------------------------------------------------------------------ */

static void *alloc_array(uint64_t a, uint64_t b, uint64_t elt, bool *fail)
{
    uint64_t n;
    if (*fail || qk_ckd_mul(&n, a, b) || qk_ckd_mul(&n, n, elt) || n > SIZE_MAX) {
        *fail = true;
        return NULL;
    }
    void *p = calloc(1, n ? (size_t)n : 1);
    if (!p)
        *fail = true;
    return p;
}

int qk_ctx_new(qk_ctx **out, const qk_model *m, const qk_ctx_params *p, qk_err *err)
{
    const qk_hparams *hp = &m->hp;
    *out = NULL;
    if (p->n_ctx < 0 || p->n_batch < 0)
        return qk_errf(err, QK_EINPUT, "n_ctx and n_batch must not be negative");
    if (p->kv_type != QK_F32 && p->kv_type != QK_F16)
        return qk_errf(err, QK_EINPUT, "KV cache type must be f32 or f16");
    if (p->kvq && p->kv_type != QK_F32)
        return qk_errf(err, QK_EINPUT, "a KV-cache codec needs the F32 cache");
    if (p->kvq && qk_kvq_check(p->kvq, hp->n_head_kv, hp->head_dim, hp->head_dim_v, err))
        return err->code;
    if (hp->head_dim > QK_MAX_HEAD_DIM || hp->head_dim_v > QK_MAX_HEAD_DIM)
        return qk_errf(err, QK_EINPUT, "head size %d is larger than %d",
                       hp->head_dim > hp->head_dim_v ? hp->head_dim : hp->head_dim_v,
                       QK_MAX_HEAD_DIM);
    qk_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return qk_errf(err, QK_EIO, "out of memory");
    c->m = m;
    c->n_ctx = p->n_ctx ? p->n_ctx : (hp->n_ctx_train ? hp->n_ctx_train : 2048);
    c->n_batch = p->n_batch ? p->n_batch : 512;
    if (c->n_batch > c->n_ctx)
        c->n_batch = c->n_ctx;
    c->nthreads = p->nthreads;
    c->kv_type = p->kv_type;
    c->layer_hook = p->layer_hook;
    c->hook_user = p->hook_user;
    c->mm_hook = p->mm_hook;
    c->mm_user = p->mm_user;
    if (p->kvq) {
        c->has_kvq = true;
        c->kvq = *p->kvq;
    }
    /* llama.cpp (AVX-512 build) runs a prompt batch of 64 or more tokens
     * through its tiled kernel (F32 accumulator) when the value head size is
     * a multiple of 16 (GGML_F32_EPR), and everything else through the
     * generic one (F16 accumulator).  We make its prompt-batch choice for
     * every batch, so results stay independent of the batch size.  (The
     * stories260K printouts in ../shared/reference come from such a build:
     * with 8, AVX2's width, its F32 perplexity is 3.8979, not 3.8980.) */
    c->f16_acc = c->kv_type == QK_F16 && hp->head_dim_v % 16 != 0;
    c->attn = qk_attn_kernels_active();
    c->f16_enc = qk_kernels_for(QK_F16)->from_float;
    c->kv_dim = hp->n_head_kv * hp->head_dim;
    c->kv_dim_v = hp->n_head_kv * hp->head_dim_v;

    const uint64_t N = (uint64_t)c->n_ctx, B = (uint64_t)c->n_batch;
    const uint64_t LN = (uint64_t)hp->n_layer * N; /* both < 2^31 */
    const uint64_t elt = c->kv_type == QK_F16 ? 2 : 4, f = sizeof(float);
    bool fail = false;
    c->k_cache = alloc_array(LN, (uint64_t)c->kv_dim * elt, 1, &fail);
    c->v_cache = alloc_array(LN, (uint64_t)c->kv_dim_v * elt, 1, &fail);
    if (c->has_kvq && c->kvq.key_per_channel)
        c->kq_cache = alloc_array(LN, (uint64_t)c->kv_dim, f, &fail);
    c->x = alloc_array(B, (uint64_t)hp->n_embd, f, &fail);
    c->xb = alloc_array(B, (uint64_t)hp->n_embd, f, &fail);
    c->proj = alloc_array(B, (uint64_t)hp->n_embd, f, &fail);
    c->q = alloc_array(B, (uint64_t)hp->n_head * hp->head_dim, f, &fail);
    c->k = alloc_array(B, (uint64_t)c->kv_dim, f, &fail);
    c->v = alloc_array(B, (uint64_t)c->kv_dim_v, f, &fail);
    c->att = alloc_array(B, (uint64_t)hp->n_head * hp->head_dim_v, f, &fail);
    c->gate = alloc_array(B, (uint64_t)hp->n_ff, f, &fail);
    c->up = alloc_array(B, (uint64_t)hp->n_ff, f, &fail);
    c->rope = alloc_array(B, (uint64_t)(hp->n_rot ? hp->n_rot : 1), f, &fail);
    if (fail) {
        qk_ctx_free(c);
        return qk_errf(err, QK_EIO, "out of memory for a context of %d tokens", (int)N);
    }
    *out = c;
    return 0;
}

void qk_ctx_free(qk_ctx *c)
{
    if (!c)
        return;
    free(c->k_cache), free(c->v_cache), free(c->kq_cache), free(c->x), free(c->xb), free(c->proj);
    free(c->q), free(c->k), free(c->v), free(c->att), free(c->gate), free(c->up), free(c->rope);
    qk_matmul_ws_free(&c->ws);
    free(c);
}

void qk_ctx_reset(qk_ctx *c) { c->n_past = 0; }

double qk_ctx_kv_bytes(const qk_ctx *c)
{
    const qk_hparams *hp = &c->m->hp;
    double kb, vb;
    if (c->has_kvq) {
        qk_kvq_token_bytes(&c->kvq, hp->n_head_kv, hp->head_dim, hp->head_dim_v, &kb, &vb);
    } else {
        const double elt = c->kv_type == QK_F16 ? 2 : 4;
        kb = elt * c->kv_dim, vb = elt * c->kv_dim_v;
    }
    return (double)c->n_past * hp->n_layer * (kb + vb);
}
