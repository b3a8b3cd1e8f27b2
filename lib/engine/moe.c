/* moe.c - the feed-forward block of a layer with experts, as llama.cpp's
 * build_moe_ffn (src/llama-graph.cpp at d32676d) builds it for qwen2moe,
 * qwen3moe, llama (Mixtral) and gpt-oss, and ggml's CPU ops compute it;
 * transformers' Qwen2MoeSparseMoeBlock, Qwen3MoeSparseMoeBlock,
 * MixtralSparseMoeBlock and GptOssMLP compute the same:
 *
 *   l = Wr h + br                    router logits (ffn_gate_inp)
 *   SOFTMAX:       p = softmax(l); the k largest p; w = p[sel]
 *                  (expert_norm: w /= max(sum w, 2^-14), the clamp of ggml's graph)
 *   TOPK_SOFTMAX:  the k largest l; w = softmax(l[sel])          (gpt-oss)
 *   per chosen expert j:  y_j = Wdown_j act(Wgate_j h + bg_j, Wup_j h + bu_j) + bd_j
 *   out = w_0 y_0 + w_1 y_1 + ...    in the order of the choice (best first)
 *   shared expert (qwen2moe): out += sigmoid(Wsg h) * Wsd act(Wsgate h, Wsup h),
 *                  the sigmoid written as silu(x) / x like the graph
 *
 * Determinism: routing is per token and fixed-order: the softmax is max, then
 * expf(l - max) summed in double in expert order, then times (float)(1/sum)
 * (ggml_vec_soft_max_f32 and its scalar expf, which ggml takes for rows of
 * fewer than 16 experts; wider rows get ggml's vector expf there, glibc's
 * here, kernels/expf.h); the top k are chosen by value, ties to the lower expert
 * index; the weights' sum is a double sum in choice order cast to float
 * (ggml_vec_sum_f32).  The experts' products go through qk_matmul, reading
 * only the chosen experts' rows, and each output row depends on its own
 * input row alone, so how many tokens share an expert, the batch size and
 * the thread count do not change a bit.  Tokens are taken QK_MOE_CHUNK at a
 * time to bound the scratch.
 *
 * Calibration: the router and the shared expert are dense products
 * (qk_ctx_params.mm_hook, on the chunk's rows); each expert's products pass
 * exp_hook with the rows routed to it, in token order, as llama.cpp's
 * MUL_MAT_ID hands llama-imatrix the rows of (token, slot) pairs that chose
 * the expert.  Without hooks nothing more is done. */
#include "lib/engine/forward_impl.h"

#include <math.h>
#include <string.h>

#include "kernels/expf.h"

/* ggml_soft_max over n values in place. */
static void softmax(float *v, int n)
{
    float max = -INFINITY;
    for (int i = 0; i < n; i++)
        max = v[i] > max ? v[i] : max;
    qk_expf_ops_active()->expf(v, max, v, (size_t)n);
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)v[i];
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++)
        v[i] *= inv;
}

/* The k largest of v[0..n) into sel, best first; ties to the lower index. */
static void top_k(const float *v, int n, int k, int32_t *sel)
{
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            bool taken = false;
            for (int q = 0; q < j && !taken; q++)
                taken = sel[q] == i;
            if (!taken && (best < 0 || v[i] > v[best]))
                best = i;
        }
        sel[j] = best;
    }
}

/* One token's choice: sel[0..k) and w[0..k) from its router logits l (n_expert). */
static void route(const qk_hparams *hp, float *l, int32_t *sel, float *w)
{
    const int n = hp->n_expert, k = hp->n_expert_used;
    if (hp->gating == QK_GATE_TOPK_SOFTMAX) {
        top_k(l, n, k, sel);
        for (int j = 0; j < k; j++)
            w[j] = l[sel[j]];
        softmax(w, k);
        return;
    }
    softmax(l, n);
    top_k(l, n, k, sel);
    for (int j = 0; j < k; j++)
        w[j] = l[sel[j]];
    if (hp->expert_norm) {
        double sum = 0.0;
        for (int j = 0; j < k; j++)
            sum += (double)w[j];
        float s = (float)sum;
        s = s < 6.103515625e-5f ? 6.103515625e-5f : s;
        for (int j = 0; j < k; j++)
            w[j] = w[j] / s;
    }
}

/* Expert e on the chunk's rows that chose it: gathered, its three products,
 * and each result times its weight into its (token, slot) place. */
static int run_expert(qk_ctx *c, const qk_layer *L, int e, const float *xb, int nt, qk_err *err)
{
    const qk_hparams *hp = &c->m->hp;
    qk_moe_ws *w = &c->moe;
    const int k = hp->n_expert_used, ne = hp->n_embd, nf = hp->n_ff_exp;
    int n = 0;
    for (int t = 0; t < nt; t++)
        for (int j = 0; j < k; j++)
            if (w->sel[t * k + j] == e) {
                memcpy(w->x + (size_t)n * ne, xb + (size_t)t * ne, (size_t)ne * sizeof *w->x);
                w->rows[n++] = t * k + j;
            }
    if (n == 0)
        return 0;
    const qk_weight *gu[2] = {&L->exps.gate[e], &L->exps.up[e]};
    float *const gu_out[2] = {w->g, w->u};
    if (c->exp_hook && (c->exp_hook(c->mm_user, gu[0], e, w->x, n, err) ||
                        c->exp_hook(c->mm_user, gu[1], e, w->x, n, err)))
        return err->code;
    if (qk_matmul_n(gu, gu_out, 2, w->x, n, &c->ws, c->nthreads, err))
        return err->code;
    qk_add_rows(w->g, L->exps.gate_b ? L->exps.gate_b + (size_t)e * nf : NULL, n, nf);
    qk_add_rows(w->u, L->exps.up_b ? L->exps.up_b + (size_t)e * nf : NULL, n, nf);
    qk_ffn_act_rows(hp, w->g, w->u, (size_t)n * nf);
    if (c->exp_hook && c->exp_hook(c->mm_user, &L->exps.down[e], e, w->g, n, err))
        return err->code;
    if (qk_matmul(&L->exps.down[e], w->g, n, w->d, &c->ws, c->nthreads, err))
        return err->code;
    qk_add_rows(w->d, L->exps.down_b ? L->exps.down_b + (size_t)e * ne : NULL, n, ne);
    for (int r = 0; r < n; r++) {
        const float wt = w->w[w->rows[r]];
        float *dst = w->slots + (size_t)w->rows[r] * ne;
        const float *src = w->d + (size_t)r * ne;
        for (int i = 0; i < ne; i++)
            dst[i] = src[i] * wt;
    }
    return 0;
}

/* qwen2moe's shared expert on the chunk: c->moe.sh = its output times its gate. */
static int shared_expert(qk_ctx *c, const qk_layer *L, const float *xb, int nt, qk_err *err)
{
    const qk_hparams *hp = &c->m->hp;
    qk_moe_ws *w = &c->moe;
    const int ne = hp->n_embd, nf = hp->n_ff_shexp;
    const qk_weight *gu[3] = {&L->gate_shexp, &L->up_shexp, &L->gate_inp_shexp};
    float *const gu_out[3] = {c->gate, c->up, w->sg};
    if (qk_ctx_products(c, gu, gu_out, 3, xb, nt, err))
        return err->code;
    qk_hparams silu = *hp; /* the shared expert is a plain SwiGLU FFN */
    silu.ffn_act = QK_ACT_SILU;
    qk_ffn_act_rows(&silu, c->gate, c->up, (size_t)nt * nf);
    const qk_weight *dn = &L->down_shexp;
    if (qk_ctx_products(c, &dn, &w->sh, 1, c->gate, nt, err))
        return err->code;
    for (int t = 0; t < nt; t++) {
        const float g = w->sg[t], gate = g / (1.0f + qk_expf(-g)) / g;
        for (int i = 0; i < ne; i++)
            w->sh[(size_t)t * ne + i] *= gate;
    }
    return 0;
}

int qk_moe_block(qk_ctx *c, const qk_layer *L, int n_tok, qk_err *err)
{
    const qk_hparams *hp = &c->m->hp;
    qk_moe_ws *w = &c->moe;
    const int k = hp->n_expert_used, ne = hp->n_embd, nx = hp->n_expert;
    for (int t0 = 0; t0 < n_tok; t0 += QK_MOE_CHUNK) {
        const int nt = n_tok - t0 < QK_MOE_CHUNK ? n_tok - t0 : QK_MOE_CHUNK;
        const float *xb = c->xb + (size_t)t0 * ne;
        const qk_weight *router = &L->gate_inp;
        if (qk_ctx_products(c, &router, &w->logits, 1, xb, nt, err))
            return err->code;
        qk_add_rows(w->logits, L->gate_inp_b, nt, nx);
        for (int t = 0; t < nt; t++)
            route(hp, w->logits + (size_t)t * nx, w->sel + (size_t)t * k, w->w + (size_t)t * k);
        for (int e = 0; e < nx; e++)
            if (run_expert(c, L, e, xb, nt, err))
                return err->code;
        if (L->shexp && shared_expert(c, L, xb, nt, err))
            return err->code;
        for (int t = 0; t < nt; t++) {
            float *out = c->proj + (size_t)(t0 + t) * ne;
            const float *s = w->slots + (size_t)t * k * ne;
            memcpy(out, s, (size_t)ne * sizeof *out);
            for (int j = 1; j < k; j++)
                for (int i = 0; i < ne; i++)
                    out[i] = out[i] + s[(size_t)j * ne + i];
            if (L->shexp)
                for (int i = 0; i < ne; i++)
                    out[i] = out[i] + w->sh[(size_t)t * ne + i];
        }
    }
    return 0;
}
