/* forward.c - the transformer forward pass, one layer at a time, as
 * llama.cpp builds it (src/models/llama.cpp, qwen2.cpp, qwen3.cpp,
 * qwen2moe.cpp, qwen3moe.cpp, openai-moe.cpp, gemma2.cpp, gemma3.cpp,
 * phi3.cpp, and src/llama-graph.cpp's build_qkv, build_ffn, build_moe_ffn,
 * build_attn at d32676d) and as ggml's CPU backend computes each op
 * (ggml-cpu/ops.cpp, vec.h).  For Hugging Face directories the same graph is
 * what transformers' modeling files compute (models/{llama,mistral,mixtral,
 * qwen2,qwen3,qwen2_moe,qwen3_moe,gpt_oss,gemma2,gemma3,phi3}/modeling_*.py).
 * The architectures differ by the traits of qk_hparams (lib/engine/arch.c),
 * not by copies of this loop:
 *
 *   x = embed(token)                        (* sqrt(n_embd): gemma)
 *   per layer:  h  = qk_rmsnorm(x) * attn_norm
 *               q, k, v = Wq h + bq, Wk h + bk, Wv h + bv   (phi3: one fused Wqkv)
 *               (qk_norm: q, k = rmsnorm per head * q_norm, k_norm)
 *               q, k = rope(q, k, pos)     (the sliding-window layers' own base;
 *                                           YaRN, LongRoPE factors)
 *               (q_prescale: q *= kq_scale, the scores' scale then 1)
 *               k, v -> cache
 *               a  = Wo attention(q, cache) + bo   (attention.c: window,
 *                                                   soft-cap, sinks)
 *               x += a                      (post_norms: qk_rmsnorm(a) * attn_post_norm)
 *               h  = qk_rmsnorm(x) * ffn_norm
 *               f  = Wdown act(Wgate h, Wup h)     (silu, GeGLU; phi3: fused gate/up)
 *                  or the experts' sum (moe.c)
 *               x += f                      (post_norms: qk_rmsnorm(f) * ffn_post_norm)
 *   logits = Wout (qk_rmsnorm(x) * output_norm) + bout   (final soft-cap: gemma)
 *
 * Reduction orders (issue #10; the REPRODUCIBILITY section of qk-run(1)
 * states them for users).  Every value below is computed by one thread, in
 * an order that depends on nothing but the model and the token's position,
 * so the logits are bit-identical for any thread count, any batch size,
 * prompt or one-token decode, and any SIMD level:
 * - y = W x (matmul.c): each y[t][r] is one dot product over the whole
 *   row, never split along K; its order is the weight type's (types.h,
 *   kernels/float.c: F32, F16 and BF16 the float-dot order of
 *   kernels/fdot.h (llama.cpp's AVX2 one), quantized types integer block
 *   sums then float over blocks in block order; with act_type QK_ACT_F32
 *   every type the float-dot order over its decoded row), the same bits at
 *   every level (cpu.h).  Threads take
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
#include "lib/engine/forward_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/ckd.h"
#include "kernels/attn.h"
#include "kernels/cpu.h"
#include "kernels/expf.h"
#include "kernels/half.h"
#include "kernels/hadamard.h"
#include "kernels/wq.h"
#include "lib/core/threads.h"

/* ---- elementwise ops ------------------------------------------------------ */

void qk_rmsnorm(float *y, const float *x, const float *w, int n, float eps)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int i = 0; i < n; i++)
        y[i] = x[i] * scale * w[i];
}

void qk_add_rows(float *y, const float *b, int n_rows, int n)
{
    if (!b)
        return;
    for (int t = 0; t < n_rows; t++)
        for (int i = 0; i < n; i++)
            y[(size_t)t * n + i] += b[i];
}

/* ggml_gelu_f32, the tanh approximation */
static float gelu_f32(float x)
{
    return 0.5f * x * (1.0f + tanhf(0.79788456080286535587989211986876f * x * (1.0f + 0.044715f * x * x)));
}

/* ggml_vec_swiglu_f32: silu(g) * u with silu(x) = x / (1 + expf(-x))
 * (kernels/expf.h: glibc's expf, in vector lanes);
 * ggml_vec_geglu_f32 with GGML_GELU_FP16: gelu of g rounded to F16 through
 * ggml's F16 table (its entries are F16 roundings of ggml_gelu_f32), 0 below
 * -10, g itself above 10; ggml_compute_forward_swiglu_oai_f32's clamped form. */
void qk_ffn_act_rows(const qk_hparams *hp, float *g, const float *u, size_t n)
{
    switch (hp->ffn_act) {
    case QK_ACT_SILU:
        qk_expf_ops_active()->swiglu(g, u, n);
        break;
    case QK_ACT_GELU:
        for (size_t i = 0; i < n; i++) {
            const float x = g[i];
            float y;
            if (x <= -10.0f)
                y = 0.0f;
            else if (x >= 10.0f)
                y = x;
            else
                y = qk_f16_to_f32(qk_f32_to_f16(gelu_f32(qk_f16_to_f32(qk_f32_to_f16(x)))));
            g[i] = y * u[i];
        }
        break;
    case QK_ACT_SWIGLU_OAI: {
        const float alpha = hp->swiglu_alpha, limit = hp->swiglu_limit;
        enum { CHUNK = 256 };
        float e[CHUNK];
        const qk_expf_fn ex = qk_expf_ops_active()->expf;
        for (size_t i0 = 0; i0 < n; i0 += CHUNK) {
            const size_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
            for (size_t j = 0; j < m; j++) {
                const float x = g[i0 + j] < limit ? g[i0 + j] : limit;
                e[j] = alpha * (-x);
            }
            ex(e, 0.0f, e, m);
            for (size_t j = 0; j < m; j++) {
                const float x = g[i0 + j] < limit ? g[i0 + j] : limit;
                const float y = u[i0 + j] < -limit ? -limit : u[i0 + j] > limit ? limit : u[i0 + j];
                g[i0 + j] = x / (1.0f + e[j]) * (y + 1.0f);
            }
        }
        break;
    }
    }
}

/* ---- rope ------------------------------------------------------------------ */

/* ggml_rope_cache_init and rope_yarn: theta_i = pos * base^(-2i/n_rot) /
 * factor_i, the power built by repeated multiplication in float like ggml;
 * interpolated theta freq_scale * theta, and with YaRN (ext_factor != 0)
 * mixed with the extrapolated one by the ramp between the correction
 * dimensions, the cos/sin magnitude scaled by 1 + 0.1 ln(1/freq_scale);
 * cos and sin times mscale (rope_attn_factor). */
static void rope_cache(float *cs, int pos, const qk_rope_params *rp, int n_rot)
{
    float theta = (float)pos;
    for (int i0 = 0; i0 < n_rot; i0 += 2) {
        const float ff = rp->factors ? rp->factors[i0 / 2] : 1.0f;
        const float extrap = theta / ff, interp = rp->freq_scale * extrap;
        float t = interp, mscale = rp->mscale;
        if (rp->ext_factor != 0.0f) {
            const float low = rp->corr[0], high = rp->corr[1];
            const float y = ((float)(i0 / 2) - low) / fmaxf(0.001f, high - low);
            const float mix = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * rp->ext_factor;
            t = interp * (1.0f - mix) + extrap * mix;
            mscale *= 1.0f + 0.1f * logf(1.0f / rp->freq_scale);
        }
        cs[i0] = cosf(t) * mscale;
        cs[i0 + 1] = sinf(t) * mscale;
        theta *= rp->theta_scale;
    }
}

/* ggml_rope_yarn_corr_dims; untruncated (transformers' "truncate": false)
 * the dimensions keep their fractions. */
static void yarn_corr_dims(const qk_hparams *hp, float base, float corr[2])
{
    const float n = (float)hp->n_rot, ctx = (float)hp->n_ctx_orig;
    const float pi2 = 2.0f * 3.14159265358979323846f;
    float lo = n * logf(ctx / (hp->yarn_beta_fast * pi2)) / (2.0f * logf(base));
    float hi = n * logf(ctx / (hp->yarn_beta_slow * pi2)) / (2.0f * logf(base));
    if (hp->yarn_truncate)
        lo = floorf(lo), hi = ceilf(hi);
    corr[0] = fmaxf(0.0f, lo);
    corr[1] = fminf(n - 1.0f, hi);
}

/* The rope of the other layers (swa false) or of the sliding-window ones:
 * their base and scale, llama3's factors or LongRoPE's long ones when the
 * context is longer than the original one (llama_model::get_rope_factors). */
static void rope_params(const qk_ctx *c, bool swa, qk_rope_params *rp)
{
    const qk_model *m = c->m;
    const qk_hparams *hp = &m->hp;
    const float base = swa ? hp->rope_freq_base_swa : hp->rope_freq_base;
    rp->theta_scale = powf(base, -2.0f / (float)hp->n_rot);
    rp->freq_scale = swa ? hp->rope_freq_scale_swa : hp->rope_freq_scale;
    rp->ext_factor = hp->rope_scaling == QK_ROPE_YARN ? hp->yarn_ext_factor : 0.0f;
    rp->mscale = hp->rope_attn_factor;
    rp->corr[0] = rp->corr[1] = 0.0f;
    if (rp->ext_factor != 0.0f)
        yarn_corr_dims(hp, base, rp->corr);
    const int orig = hp->n_ctx_orig ? hp->n_ctx_orig : hp->n_ctx_train;
    rp->factors = m->rope_freqs ? m->rope_freqs : c->n_ctx > orig ? m->rope_long : m->rope_short;
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

/* Per-head RMSNorm (qk_norm), then rope, then (q of q_prescale) the
 * attention scale, for the n_heads heads of token t's row. */
static void prepare_heads(const qk_ctx *c, const qk_layer *L, float *row, int t, int n_heads,
                          const float *norm, float scale)
{
    const qk_hparams *hp = &c->m->hp;
    const int hd = hp->head_dim;
    const float *cs = (L->swa && c->rope_swa ? c->rope_swa : c->rope) + (size_t)t * hp->n_rot;
    for (int h = 0; h < n_heads; h++) {
        float *v = row + (size_t)h * hd;
        if (norm)
            qk_rmsnorm(v, v, norm, hd, hp->rms_eps);
        rope_head(v, cs, hp->n_rot, hp->rope_mode);
        if (scale != 0.0f)
            for (int i = 0; i < hd; i++)
                v[i] *= scale;
    }
}

/* ---- per-token stages ------------------------------------------------------- */

/* The elementwise work between the matrix products, token rows split over
 * the threads (each row's arithmetic is its own, so the bits do not depend
 * on the split). */
typedef enum {
    ST_EMBD,      /* x *= embd_scale */
    ST_ATTN_NORM, /* xb = rmsnorm(x) * attn_norm */
    ST_QKV,       /* biases, per-head norms and rope of q and k; k, v into an F16/F32 cache */
    ST_ATTN_OUT,  /* x += (post-norm of) Wo att + bo, then xb = rmsnorm(x) * ffn_norm */
    ST_ACT,       /* gate = act(gate, up) */
    ST_FFN_OUT,   /* x += (post-norm of) the FFN's output */
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

/* One token's k or v row (n_head_kv heads of len) into an F16 or F32 cache
 * at position pos. */
static void cache_put(const qk_ctx *c, void *cache, int pos, const float *src, int len)
{
    for (int h = 0; h < c->m->hp.n_head_kv; h++) {
        const size_t o = qk_kv_off(c, h, pos, len);
        if (c->kv_type == QK_F16)
            c->f16_enc(src + (size_t)h * len, (uint16_t *)cache + o, len);
        else
            memcpy((float *)cache + o, src + (size_t)h * len, (size_t)len * sizeof *src);
    }
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
        case ST_EMBD:
            for (size_t d = 0; d < e; d++)
                x[d] *= hp->embd_scale;
            break;
        case ST_ATTN_NORM:
            qk_rmsnorm(xb, x, L->attn_norm, (int)e, hp->rms_eps);
            break;
        case ST_QKV: {
            const size_t nq = (size_t)hp->n_head * hp->head_dim;
            float *q = c->q + t * nq, *k = c->k + t * c->kv_dim, *v = c->v + t * c->kv_dim_v;
            qk_add_rows(q, L->bq, 1, (int)nq);
            qk_add_rows(k, L->bk, 1, c->kv_dim);
            qk_add_rows(v, L->bv, 1, c->kv_dim_v);
            prepare_heads(c, L, q, (int)t, hp->n_head, L->q_norm, hp->q_prescale ? hp->kq_scale : 0.0f);
            prepare_heads(c, L, k, (int)t, hp->n_head_kv, L->k_norm, 0.0f);
            if (L->kv_scale[0] > 0.0f) /* the checkpoint's FP8 KV cache (model.h) */
                qk_wq_kv_fp8(k, c->kv_dim, L->kv_scale[0]);
            if (L->kv_scale[1] > 0.0f)
                qk_wq_kv_fp8(v, c->kv_dim_v, L->kv_scale[1]);
            if (j->kc) {
                cache_put(c, j->kc, j->pos0 + (int)t, k, hp->head_dim);
                cache_put(c, j->vc, j->pos0 + (int)t, v, hp->head_dim_v);
            }
            break;
        }
        case ST_ATTN_OUT: {
            float *proj = c->proj + t * e;
            qk_add_rows(proj, L->bo, 1, (int)e);
            if (L->attn_post_norm)
                qk_rmsnorm(proj, proj, L->attn_post_norm, (int)e, hp->rms_eps);
            for (size_t d = 0; d < e; d++)
                x[d] = proj[d] + x[d];
            qk_rmsnorm(xb, x, L->ffn_norm, (int)e, hp->rms_eps);
            break;
        }
        case ST_ACT:
            qk_ffn_act_rows(hp, c->gate + t * (size_t)hp->n_ff, c->up + t * (size_t)hp->n_ff,
                            (size_t)hp->n_ff);
            break;
        case ST_FFN_OUT: {
            float *proj = c->proj + t * e;
            if (L->ffn_post_norm)
                qk_rmsnorm(proj, proj, L->ffn_post_norm, (int)e, hp->rms_eps);
            for (size_t d = 0; d < e; d++)
                x[d] = proj[d] + x[d];
            break;
        }
        case ST_OUT_NORM:
            qk_rmsnorm(c->xb + i * e, x, m->output_norm, (int)e, hp->rms_eps);
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

int qk_ctx_products(qk_ctx *c, const qk_weight *const *w, float *const *y, int nw, const float *x,
                    int n_tok, qk_err *err)
{
    if (c->mm_hook)
        for (int i = 0; i < nw; i++)
            if (c->mm_hook(c->mm_user, w[i], x, n_tok, err))
                return err->code;
    return qk_matmul_n(w, y, nw, x, n_tok, &c->ws, c->nthreads, err);
}

/* A weight's online input transform (qk_weight.in_had) on its input rows,
 * in place: the buffers it is applied to feed only the products of weights
 * that share it (hfxform.c checks q/k/v and gate/up agree). */
static int in_transform(const qk_weight *w, float *x, int n_tok, qk_err *err)
{
    if (!w->in_had)
        return 0;
    if (!w->in_had_f64) {
        qk_hadamard_rows_f32(x, n_tok, w->cols, w->cols, w->in_had);
        return 0;
    }
    return qk_hadamard_rows_f64(x, n_tok, w->cols, w->cols, w->in_had) ? qk_errf(err, QK_EIO, "out of memory") : 0;
}

static int mm(qk_ctx *c, const qk_weight *w, const float *x, int n_tok, float *y, qk_err *err)
{
    return qk_ctx_products(c, &w, &y, 1, x, n_tok, err);
}

/* With a KV codec (F32 cache): token rows of n_head_kv heads of hd,
 * quantized and dequantized per token in place unless `raw`, into the
 * cache at positions first .. first + n_tok - 1. */
static int kvq_store(const qk_ctx *c, float *cache, int first, float *rows, int n_tok, int hd, bool raw,
                     qk_err *err)
{
    const int nh = c->m->hp.n_head_kv;
    if (!raw && qk_kvq_rows(&c->kvq, rows, n_tok, nh, hd, err))
        return err->code;
    for (int t = 0; t < n_tok; t++)
        for (int h = 0; h < nh; h++)
            memcpy(cache + qk_kv_off(c, h, first + t, hd), rows + ((size_t)t * nh + (size_t)h) * hd,
                   (size_t)hd * sizeof *rows);
    return 0;
}

/* KIVI: copy every key group that the rows [first, first+n_tok) complete
 * from the full-precision cache kc into kqc and quantize it per channel. */
static int key_groups(const qk_ctx *c, const float *kc, float *kqc, int first, int n_tok,
                      qk_err *err)
{
    const int g = qk_kvq_group(&c->kvq);
    const int hd = c->m->hp.head_dim;
    for (int end = (first / g + 1) * g; end <= first + n_tok; end += g) {
        const size_t off = (size_t)(end - g) * c->kv_dim;
        for (int t = end - g; t < end; t++)
            for (int h = 0; h < c->m->hp.n_head_kv; h++)
                memcpy(kqc + (size_t)t * c->kv_dim + (size_t)h * hd, kc + qk_kv_off(c, h, t, hd),
                       (size_t)hd * sizeof *kqc);
        if (qk_kvq_key_group(&c->kvq, kqc + off, c->kv_dim, hd, err))
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
    if (in_transform(&L->wq, c->xb, n_tok, err) ||
        qk_ctx_products(c, qkv, qkv_out, 3, c->xb, n_tok, err))
        return err->code;
    /* with a KV codec the rows are stored on this thread afterwards */
    stage(c, L, ST_QKV, 0, n_tok, c->n_past, c->has_kvq ? NULL : kc, c->has_kvq ? NULL : vc);
    float *kqc = c->kq_cache ? c->kq_cache + (size_t)il * c->n_ctx * c->kv_dim : NULL;
    if (c->has_kvq &&
        (kvq_store(c, kc, c->n_past, c->k, n_tok, hp->head_dim, kqc != NULL, err) ||
         kvq_store(c, vc, c->n_past, c->v, n_tok, hp->head_dim_v, false, err) ||
         (kqc && key_groups(c, kc, kqc, c->n_past, n_tok, err))))
        return err->code;

    if (qk_attend(c, il, kc, vc, kqc, n_tok, err))
        return err->code;
    if (in_transform(&L->wo, c->att, n_tok, err) || mm(c, &L->wo, c->att, n_tok, c->proj, err))
        return err->code;
    stage(c, L, ST_ATTN_OUT, 0, n_tok, 0, NULL, NULL); /* and the FFN's norm */
    return 0;
}

static int ffn_block(qk_ctx *c, int il, int n_tok, qk_err *err)
{
    const qk_layer *L = &c->m->layers[il];
    if (L->moe) {
        if (qk_moe_block(c, L, n_tok, err))
            return err->code;
    } else {
        const qk_weight *gu[2] = {&L->w_gate, &L->w_up};
        float *const gu_out[2] = {c->gate, c->up};
        if (in_transform(&L->w_gate, c->xb, n_tok, err) ||
            qk_ctx_products(c, gu, gu_out, 2, c->xb, n_tok, err))
            return err->code;
        stage(c, L, ST_ACT, 0, n_tok, 0, NULL, NULL);
        if (in_transform(&L->w_down, c->gate, n_tok, err) || mm(c, &L->w_down, c->gate, n_tok, c->proj, err))
            return err->code;
    }
    stage(c, L, ST_FFN_OUT, 0, n_tok, 0, NULL, NULL);
    return 0;
}

/* Logits of rows [first, n_tok) of the batch into out; out NULL: the final
 * norm only (the hook still sees the output product's input). */
static int output_block(qk_ctx *c, int first, int n_tok, float *out, qk_err *err)
{
    const qk_model *m = c->m;
    stage(c, NULL, ST_OUT_NORM, first, n_tok - first, 0, NULL, NULL);
    if (c->mm_hook && c->mm_hook(c->mm_user, &m->output, c->xb, n_tok - first, err))
        return err->code;
    if (!out)
        return 0;
    return qk_output_logits(m, c->xb, n_tok - first, out, &c->ws, c->nthreads, err);
}

int qk_output_logits(const qk_model *m, const float *h, int n, float *out, qk_matmul_ws *ws,
                     int nthreads, qk_err *err)
{
    const int nv = m->hp.n_vocab;
    if (qk_matmul(&m->output, h, n, out, ws, nthreads, err))
        return err->code;
    qk_add_rows(out, m->output_bias, n, nv);
    /* final soft-capping: ggml_scale by 1/cap, ggml_tanh, ggml_scale by cap */
    const float cap = m->hp.final_softcap;
    if (cap != 0.0f)
        for (size_t i = 0; i < (size_t)n * nv; i++)
            out[i] = tanhf(out[i] * (1.0f / cap)) * cap;
    return 0;
}

/* The rope angles of the batch's n_tok positions from n_past on. */
static void batch_rope(qk_ctx *c, int n_tok)
{
    const int nr = c->m->hp.n_rot;
    for (int t = 0; t < n_tok; t++) {
        rope_cache(c->rope + (size_t)t * nr, c->n_past + t, &c->rope_p[0], nr);
        if (c->rope_swa)
            rope_cache(c->rope_swa + (size_t)t * nr, c->n_past + t, &c->rope_p[1], nr);
    }
}

/* The embedding scale (Gemma) on the batch's first n_tok rows of c->x. */
static void batch_embd_scale(qk_ctx *c, int n_tok)
{
    if (c->m->hp.embd_scale != 0.0f)
        stage(c, NULL, ST_EMBD, 0, n_tok, 0, NULL, NULL);
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
    batch_embd_scale(c, n_tok);
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
    if (l0 == 0)
        batch_embd_scale(c, n);
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
    if (p->act_type != QK_ACT_DEFAULT && p->act_type != QK_ACT_F32)
        return qk_errf(err, QK_EINPUT, "activation type must be default or f32");
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
    c->ws.act = p->act_type;
    c->ws.act_variant = p->act_variant;
    c->layer_hook = p->layer_hook;
    c->hook_user = p->hook_user;
    c->mm_hook = p->mm_hook;
    c->exp_hook = p->exp_hook;
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
    const uint64_t ff = (uint64_t)(hp->n_ff > hp->n_ff_shexp ? hp->n_ff : hp->n_ff_shexp);
    c->gate = alloc_array(B, ff, f, &fail);
    c->up = alloc_array(B, ff, f, &fail);
    c->rope = alloc_array(B, (uint64_t)(hp->n_rot ? hp->n_rot : 1), f, &fail);
    rope_params(c, false, &c->rope_p[0]);
    rope_params(c, true, &c->rope_p[1]);
    if (hp->n_swa > 0 && memcmp(&c->rope_p[0], &c->rope_p[1], sizeof c->rope_p[0]) != 0)
        c->rope_swa = alloc_array(B, (uint64_t)(hp->n_rot ? hp->n_rot : 1), f, &fail);
    if (hp->n_expert > 0) {
        const uint64_t ch = B < QK_MOE_CHUNK ? B : QK_MOE_CHUNK, k = (uint64_t)hp->n_expert_used;
        const uint64_t fe = (uint64_t)hp->n_ff_exp, e = (uint64_t)hp->n_embd;
        qk_moe_ws *w = &c->moe;
        w->logits = alloc_array(ch, (uint64_t)hp->n_expert, f, &fail);
        w->sel = alloc_array(ch, k, sizeof(int32_t), &fail);
        w->w = alloc_array(ch, k, f, &fail);
        w->rows = alloc_array(ch, k, sizeof(int32_t), &fail);
        w->x = alloc_array(ch, e, f, &fail);
        w->g = alloc_array(ch, fe, f, &fail);
        w->u = alloc_array(ch, fe, f, &fail);
        w->d = alloc_array(ch, e, f, &fail);
        w->slots = alloc_array(ch * k, e, f, &fail);
        w->sg = alloc_array(ch, 1, f, &fail);
        w->sh = alloc_array(ch, e, f, &fail);
    }
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
    free(c->rope_swa);
    const qk_moe_ws *w = &c->moe;
    free(w->logits), free(w->sel), free(w->w), free(w->rows), free(w->x), free(w->g), free(w->u);
    free(w->d), free(w->slots), free(w->sg), free(w->sh);
    qk_matmul_ws_free(&c->ws);
    free(c);
}

void qk_ctx_reset(qk_ctx *c) { c->n_past = 0; }

int qk_ctx_rewind(qk_ctx *c, int n, qk_err *err)
{
    if (n < 0 || n > c->n_past)
        return qk_errf(err, QK_EINPUT, "rewind to %d: the cache holds %d tokens", n, c->n_past);
    if (n < c->n_past && c->has_kvq && c->kvq.key_per_channel)
        return qk_errf(err, QK_EINPUT, "a per-channel key cache cannot be rewound");
    c->n_past = n;
    return 0;
}

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
