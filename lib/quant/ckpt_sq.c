/* ckpt_sq.c - SmoothQuant (Xiao et al. 2022, "SmoothQuant: accurate and
 * efficient post-training quantization for large language models") for
 * Hugging Face checkpoints, as llm-compressor's SmoothQuantModifier
 * (llm-compressor 0.14, modifiers/transform/smoothquant/base.py) runs it
 * before the W8A8 quantization (see ckpt_calib.h).
 *
 * Its default mappings for Llama (utils.py DEFAULT_SMOOTHQUANT_MAPPINGS),
 * smooth layer -> balance layers:
 *   input_layernorm          -> q_proj, k_proj, v_proj
 *   post_attention_layernorm -> gate_proj, up_proj
 * (no v_proj -> o_proj or up_proj -> down_proj, unlike AWQ).  Per decoder
 * layer, over every calibration token of the pass (a forward hook on the
 * norm: its output, the balance layers' input), the per-channel minimum and
 * maximum; the activation scale of channel j is the dynamic range
 * a_j = max_j - min_j (not max |x_j|), the weight scale
 * w_j = 2 * max over the balance layers and their rows of |W[r][j]|, and
 *   s_j = a_j^A / w_j^(1-A)   (w_j = 0: a_j),   s_j = max(s_j, 1e-5)
 * (MINIMUM_SMOOTHING_SCALE), all in float32.  Each balance weight's column
 * j is multiplied by s_j, the norm's weight divided by it.  The smoothing
 * is applied at the end of the layer's calibration pass and the layer runs
 * again smoothed (float: the same function) for the next one.  oneshot's
 * default "independent" pipeline gives each modifier its own pass over the
 * whole model: SmoothQuant first on the float model, then GPTQ (or the
 * round to nearest) on the smoothed one. */
#include "lib/quant/ckpt_sq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/types.h"

#define SQ_MIN_SCALE 1e-5f

static int oom(qk_err *err) { return qk_errf(err, QK_EIO, "SmoothQuant: out of memory"); }

qk_weight *qk_sq_balance(qk_layer *L, int b)
{
    qk_weight *ws[QK_SQ_NB] = {&L->wq, &L->wk, &L->wv, &L->w_gate, &L->w_up};
    return ws[b];
}

int qk_sq_init(qk_sq *q, const qk_model *m, double alpha, const char *path, qk_err *err)
{
    memset(q, 0, sizeof *q);
    /* the Llama mappings hold where a layer is norm -> q/k/v, norm -> gate/up, plain RMSNorm weights:
     * not gemma's (1 + w) norms, whose post_attention_layernorm follows attention, nor phi3's fused
     * qkv_proj / gate_up_proj */
    if (m->hp.arch != QK_ARCH_LLAMA && m->hp.arch != QK_ARCH_QWEN2 && m->hp.arch != QK_ARCH_QWEN3)
        return qk_errf(err, QK_EINPUT, "%s: --method smoothquant: architecture not supported (llama, mistral, "
                       "qwen2, qwen3: the norm -> q/k/v, norm -> gate/up layers of its mappings)", path);
    q->alpha = (float)alpha, q->n_layer = m->hp.n_layer, q->e = m->hp.n_embd;
    const size_t nl = (size_t)(q->n_layer ? q->n_layer : 1);
    q->layers = calloc(nl, sizeof *q->layers);
    q->w = calloc(nl * QK_SQ_NB, sizeof *q->w);
    q->norm = calloc(nl * 2, sizeof *q->norm);
    for (int k = 0; k < 2; k++) {
        q->mn[k] = malloc((size_t)q->e * sizeof(float));
        q->mx[k] = malloc((size_t)q->e * sizeof(float));
        if (!q->mn[k] || !q->mx[k])
            return oom(err);
    }
    return q->layers && q->w && q->norm ? 0 : oom(err);
}

void qk_sq_free(qk_sq *q)
{
    for (size_t i = 0; q->w && i < (size_t)q->n_layer * QK_SQ_NB; i++)
        free(q->w[i]);
    for (size_t i = 0; q->norm && i < (size_t)q->n_layer * 2; i++)
        free(q->norm[i]);
    for (int k = 0; k < 2; k++)
        free(q->mn[k]), free(q->mx[k]);
    free(q->w), free(q->norm), free(q->layers);
    memset(q, 0, sizeof *q);
}

int qk_sq_on_input(qk_sq *q, int slot, const float *x, int n, int64_t cols, qk_err *err)
{
    const int k = slot == QK_GS_QKV ? 0 : slot == QK_GS_GU ? 1 : -1;
    if (k < 0)
        return 0;
    if (cols != q->e)
        return qk_errf(err, QK_EINPUT, "SmoothQuant: a norm output of %lld channels, not n_embd %lld",
                       (long long)cols, (long long)q->e);
    float *mn = q->mn[k], *mx = q->mx[k];
    for (int t = 0; t < n; t++) {
        const float *r = x + (size_t)t * (size_t)cols;
        if (!q->seen[k] && t == 0) {
            memcpy(mn, r, (size_t)cols * sizeof *r);
            memcpy(mx, r, (size_t)cols * sizeof *r);
            continue;
        }
        for (int64_t c = 0; c < cols; c++) {
            mn[c] = fminf(mn[c], r[c]);
            mx[c] = fmaxf(mx[c], r[c]);
        }
    }
    q->seen[k] += n;
    return 0;
}

/* torch's pow(float tensor, scalar): 0.5 is sqrt, 1 the identity, 0 one */
static float tpow(float x, float p)
{
    return p == 0.5f ? sqrtf(x) : p == 1.0f ? x : p == 0.0f ? 1.0f : powf(x, p);
}

/* Smooth the norm `norm` and the balance weights w[0..nb) (rows[b] x e each) on stats k. */
static void smooth(qk_sq *q, int k, float *norm, float *const *w, const int64_t *rows, int nb)
{
    const int64_t e = q->e;
    for (int64_t j = 0; j < e; j++) {
        float wm = 0;
        for (int b = 0; b < nb; b++)
            for (int64_t r = 0; r < rows[b]; r++)
                wm = fmaxf(wm, fabsf(w[b][r * e + j]));
        wm *= 2.0f;
        const float a = q->mx[k][j] - q->mn[k][j];
        float s = wm > 0.0f ? tpow(a, q->alpha) / tpow(wm, 1.0f - q->alpha) : a;
        s = fmaxf(s, SQ_MIN_SCALE);
        for (int b = 0; b < nb; b++)
            for (int64_t r = 0; r < rows[b]; r++)
                w[b][r * e + j] *= s;
        norm[j] /= s;
    }
}

int qk_sq_layer(qk_sq *q, qk_gptq_seq *s, int l, qk_err *err)
{
    qk_layer *L = &s->layers[l];
    const int64_t e = q->e;
    if (!q->seen[0] || !q->seen[1])
        return qk_errf(err, QK_EINPUT, "SmoothQuant: layer %d: the calibration pass saw no norm output", l);
    float **w = q->w + (size_t)l * QK_SQ_NB, **nm = q->norm + (size_t)l * 2;
    int64_t rows[QK_SQ_NB];
    for (int b = 0; b < QK_SQ_NB; b++) {
        qk_weight *x = qk_sq_balance(L, b);
        const qk_type_traits *tt = qk_type_get(x->type);
        if (x->cols != e || x->wq || !tt || !tt->to_float)
            return qk_errf(err, QK_EINPUT, "SmoothQuant: layer %d: a balance weight that is not a float "
                           "matrix of n_embd columns", l);
        rows[b] = x->rows;
        if (!(w[b] = malloc((size_t)x->rows * (size_t)e * sizeof(float))))
            return oom(err);
        for (int64_t r = 0; r < x->rows; r++)
            tt->to_float(x->data + (size_t)r * x->row_size, w[b] + r * e, e);
    }
    for (int i = 0; i < 2; i++) {
        if (!(nm[i] = malloc((size_t)e * sizeof(float))))
            return oom(err);
        memcpy(nm[i], i ? L->ffn_norm : L->attn_norm, (size_t)e * sizeof(float));
    }
    smooth(q, 0, nm[0], w, rows, 3);
    smooth(q, 1, nm[1], w + 3, rows + 3, 2);
    for (int b = 0; b < QK_SQ_NB; b++)
        qk_gptq_point_f32(qk_sq_balance(L, b), w[b]);
    L->attn_norm = nm[0], L->ffn_norm = nm[1];
    q->layers[l] = *L;
    q->seen[0] = q->seen[1] = 0;
    return 0;
}
