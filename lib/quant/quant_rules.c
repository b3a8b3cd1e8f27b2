/* quant_rules.c - which type each tensor gets: a port of llama.cpp d32676d
 * src/llama-quant.cpp (tensor_allows_quantization, tensor_type_fallback,
 * llama_tensor_get_type_impl, llama_tensor_get_type,
 * tensor_requires_imatrix).  The branch structure follows the original so
 * that the layer counters advance exactly as there. */
#include "lib/quant/quant_rules.h"

#include <stdio.h>
#include <string.h>

#include "kernels/types.h"

/* llama_ftype values (llama.h). */
enum {
    FT_F32 = 0, FT_F16 = 1, FT_Q4_0 = 2, FT_Q4_1 = 3, FT_Q8_0 = 7, FT_Q5_0 = 8, FT_Q5_1 = 9,
    FT_Q2_K = 10, FT_Q3_K_S = 11, FT_Q3_K_M = 12, FT_Q3_K_L = 13, FT_Q4_K_S = 14, FT_Q4_K_M = 15,
    FT_Q5_K_S = 16, FT_Q5_K_M = 17, FT_Q6_K = 18, FT_IQ2_XXS = 19, FT_IQ2_XS = 20, FT_Q2_K_S = 21,
    FT_IQ3_XS = 22, FT_IQ3_XXS = 23, FT_IQ1_S = 24, FT_IQ4_NL = 25, FT_IQ3_S = 26, FT_IQ3_M = 27,
    FT_IQ2_S = 28, FT_IQ2_M = 29, FT_IQ4_XS = 30, FT_IQ1_M = 31, FT_BF16 = 32, FT_TQ1_0 = 36,
    FT_TQ2_0 = 37, FT_MXFP4_MOE = 38, FT_Q1_0 = 40, FT_Q2_0 = 41
};

static bool has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

static bool is_token_embd(const char *name)
{
    return !strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight");
}

int qk_qrules_category(const char *name)
{
    if (!strcmp(name, "output.weight"))
        return QK_CAT_OUTPUT;
    if (is_token_embd(name))
        return QK_CAT_TOKEN_EMBD;
    static const struct { const char *sub; int cat; } subs[] = {
        {"attn_qkv.weight", QK_CAT_ATTN_QKV}, {"attn_kv_b.weight", QK_CAT_ATTN_KV_B},
        {"attn_v.weight", QK_CAT_ATTN_V}, {"attn_k.weight", QK_CAT_ATTN_K},
        {"attn_q.weight", QK_CAT_ATTN_Q}, {"attn_output.weight", QK_CAT_ATTN_OUTPUT},
        {"ffn_up", QK_CAT_FFN_UP}, {"ffn_gate", QK_CAT_FFN_GATE}, {"ffn_down", QK_CAT_FFN_DOWN},
    };
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (has(name, subs[i].sub))
            return subs[i].cat;
    return QK_CAT_OTHER;
}

bool qk_qrules_cat_is_attn_v(int cat)
{
    return cat == QK_CAT_ATTN_V || cat == QK_CAT_ATTN_QKV || cat == QK_CAT_ATTN_KV_B;
}

int qk_qrules_n_dims(const int64_t ne[4])
{
    for (int i = 3; i >= 1; i--)
        if (ne[i] > 1)
            return i + 1;
    return 1;
}

/* Substrings that keep a tensor in its source type (small or special
 * tensors: expert routers, conv1d, RWKV mixers, multimodal parts, ...). */
static const char *const keep_subs[] = {
    "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
    "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
    "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",
    "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight",
    "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight",
    "time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
    "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd", "sam.pos_embd",
    "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook",
    "mm.a.code_embd",
};

bool qk_qrules_allows(const qk_qrules *r, const char *name, const int64_t ne[4], const char **why)
{
    *why = NULL;
    if (r->only_copy) {
        *why = "COPY: tensors are copied";
        return false;
    }
    if (qk_qrules_n_dims(ne) < 2) {
        *why = "kept: 1-D";
        return false;
    }
    size_t n = strlen(name);
    /* llama.cpp: name.rfind("weight") == name.size() - 6, which a 5-byte name
     * also passes (npos == 5 - 6 in size_t arithmetic) */
    if (n != 5 && (n < 6 || strcmp(name + n - 6, "weight") != 0)) {
        *why = "kept: name does not end in 'weight'";
        return false;
    }
    if (!r->quantize_output && !strcmp(name, "output.weight")) {
        *why = "kept: --leave-output-tensor";
        return false;
    }
    if (!strcmp(name, "position_embd.weight") || !strcmp(name, "token_types.weight")) {
        *why = "kept: positional / token-type embedding";
        return false;
    }
    for (size_t i = 0; i < sizeof keep_subs / sizeof keep_subs[0]; i++) {
        if (has(name, keep_subs[i])) {
            *why = !strcmp(keep_subs[i], "_norm.weight") ? "kept: norm" : "kept: llama.cpp never quantizes it";
            return false;
        }
    }
    return true;
}

static bool use_more_bits(int i_layer, int n_layers)
{
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

/* layer_info(): with experts the layer comes from the name "blk.N." */
static int layer_of(const qk_qrules *r, int counter, const char *name, int *layer, qk_err *err)
{
    *layer = counter;
    if (r->n_expert > 1) {
        if (sscanf(name, "blk.%d.", layer) != 1)
            return qk_errf(err, QK_EINPUT, "%s: failed to determine the layer of the tensor", name);
        if (*layer < 0 || *layer >= r->n_layer)
            return qk_errf(err, QK_EINPUT, "%s: bad layer %d, must be in [0, %d)", name, *layer, r->n_layer);
    }
    return 0;
}

static bool ft_in(int ft, const int *set, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (set[i] == ft)
            return true;
    return false;
}
#define FT_IN(ft, ...) ft_in((ft), (const int[]){__VA_ARGS__}, sizeof((const int[]){__VA_ARGS__}) / sizeof(int))

/* The output tensor (and a tied token embedding). */
static int output_rule(const qk_qrules *r, int t, int64_t nx)
{
    int ft = r->ftype;
    if (r->output_type >= 0)
        return r->output_type;
    if (ft == FT_MXFP4_MOE)
        return QK_Q8_0;
    if (r->falcon || nx % qk_type_get(t)->blck != 0)
        return QK_Q8_0;
    if (FT_IN(ft, FT_IQ2_XXS, FT_IQ2_XS, FT_IQ3_XXS, FT_IQ1_S, FT_IQ2_S, FT_IQ2_M, FT_IQ1_M))
        return QK_Q5_K;
    if (t != QK_Q8_0)
        return QK_Q6_K;
    return t;
}

static int embd_rule(const qk_qrules *r, int t)
{
    int ft = r->ftype;
    if (r->embd_type >= 0)
        return r->embd_type;
    if (FT_IN(ft, FT_IQ2_XXS, FT_IQ2_XS, FT_IQ1_S, FT_IQ1_M))
        return QK_Q2_K;
    if (FT_IN(ft, FT_IQ2_S, FT_IQ2_M, FT_IQ3_XXS))
        return QK_IQ3_S;
    if (FT_IN(ft, FT_TQ1_0, FT_TQ2_0, FT_Q2_0))
        return QK_Q4_K;
    return t;
}

/* The very-low-bit IQ1/IQ2 presets. */
static int iq12_rule(qk_qrules *r, int t, int cat)
{
    int ft = r->ftype;
    bool s_or_m = ft == FT_IQ2_S || ft == FT_IQ2_M;
    if (qk_qrules_cat_is_attn_v(cat)) {
        if (r->n_gqa >= 4 || r->n_expert >= 4)
            t = QK_Q4_K;
        else
            t = s_or_m ? QK_IQ3_S : QK_Q2_K;
        ++r->i_attention_wv;
    } else if (r->n_expert == 8 && cat == QK_CAT_ATTN_K) {
        t = QK_Q4_K;
    } else if (cat == QK_CAT_FFN_DOWN) {
        if (r->i_ffn_down < r->n_layer / 8)
            t = s_or_m ? QK_IQ3_S : QK_Q2_K;
        ++r->i_ffn_down;
    } else if (cat == QK_CAT_ATTN_OUTPUT) {
        if (r->n_expert == 8)
            t = QK_Q5_K;
        else if (ft == FT_IQ1_S || ft == FT_IQ1_M)
            t = QK_IQ2_XXS;
        else if (s_or_m)
            t = QK_IQ3_S;
    }
    return t;
}

static int attn_v_rule(qk_qrules *r, int t)
{
    int ft = r->ftype;
    if (ft == FT_Q2_K)
        t = r->n_gqa >= 4 ? QK_Q4_K : QK_Q3_K;
    else if (ft == FT_Q2_K_S && r->n_gqa >= 4)
        t = QK_Q4_K;
    else if (ft == FT_IQ3_XXS)
        t = r->n_gqa >= 4 ? QK_Q4_K : !r->has_imatrix ? QK_IQ3_S : QK_IQ3_XXS;
    else if ((ft == FT_IQ3_XS || ft == FT_IQ3_S) && r->n_gqa >= 4)
        t = QK_Q4_K;
    else if (ft == FT_IQ3_M)
        t = QK_Q4_K;
    else if (ft == FT_Q3_K_M)
        t = r->i_attention_wv < 2 ? QK_Q5_K : QK_Q4_K;
    else if (ft == FT_Q3_K_L)
        t = QK_Q5_K;
    else if ((ft == FT_IQ4_NL || ft == FT_IQ4_XS) && r->n_gqa >= 4)
        t = QK_Q5_K;
    else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) && use_more_bits(r->i_attention_wv, r->n_attention_wv))
        t = QK_Q6_K;
    else if (ft == FT_Q4_K_S && r->i_attention_wv < 4)
        t = QK_Q5_K;
    /* 70B: 8 heads share attn_v, which is 8x smaller than attn_q: more bits are cheap */
    if (r->is_70b && (t == QK_Q3_K || t == QK_Q4_K))
        t = QK_Q5_K;
    if (r->n_expert == 8)
        t = QK_Q8_0;
    ++r->i_attention_wv;
    return t;
}

static int ffn_down_rule(qk_qrules *r, int t, const char *name, qk_err *err, int *rc)
{
    int ft = r->ftype, i_layer, n_layer = r->n_layer;
    if ((*rc = layer_of(r, r->i_ffn_down, name, &i_layer, err)))
        return t;
    if (ft == FT_Q2_K) {
        t = QK_Q3_K;
    } else if (ft == FT_Q2_K_S) {
        if (i_layer < n_layer / 8)
            t = QK_Q4_K;
    } else if (ft == FT_IQ3_XXS && !r->has_imatrix) {
        t = i_layer < n_layer / 8 ? QK_Q4_K : QK_Q3_K;
    } else if (ft == FT_Q3_K_M) {
        t = i_layer < n_layer / 16 ? QK_Q5_K
            : !r->falcon || use_more_bits(i_layer, n_layer) ? QK_Q4_K : QK_Q3_K;
    } else if (ft == FT_IQ3_M && (i_layer < n_layer / 8 ||
                                   (r->n_expert == 8 && use_more_bits(i_layer, n_layer)))) {
        t = QK_Q4_K;
    } else if (ft == FT_Q3_K_L) {
        t = r->falcon ? QK_Q4_K : QK_Q5_K;
    } else if (ft == FT_Q4_K_M) {
        if (r->falcon)
            t = i_layer < n_layer / 16 ? QK_Q6_K : use_more_bits(i_layer, n_layer) ? QK_Q5_K : QK_Q4_K;
        else if (use_more_bits(i_layer, n_layer))
            t = QK_Q6_K;
    } else if (i_layer < n_layer / 8 && (ft == FT_IQ4_NL || ft == FT_IQ4_XS) && !r->has_imatrix) {
        t = QK_Q5_K;
    } else if (ft == FT_Q5_K_M && use_more_bits(i_layer, n_layer)) {
        t = QK_Q6_K;
    } else if (ft == FT_Q4_K_S && !r->falcon && i_layer < n_layer / 8) {
        t = QK_Q5_K;
    } else if ((ft == FT_Q4_0 || ft == FT_Q5_0) && r->has_imatrix && i_layer < n_layer / 8) {
        /* guard the first ffn_down layers of Q4_0/Q5_0, only with an imatrix */
        t = ft == FT_Q4_0 ? QK_Q4_1 : QK_Q5_1;
    }
    ++r->i_ffn_down;
    return t;
}

static int attn_output_rule(const qk_qrules *r, int t)
{
    int ft = r->ftype;
    if (r->falcon)
        return ft == FT_Q3_K_L ? QK_Q4_K : t;
    if (r->n_expert == 8) {
        if (FT_IN(ft, FT_Q2_K, FT_IQ3_XS, FT_IQ3_XXS, FT_Q3_K_S, FT_Q3_K_M, FT_IQ4_NL, FT_Q4_K_S,
                  FT_Q4_K_M, FT_IQ3_S, FT_IQ3_M, FT_IQ4_XS))
            t = QK_Q5_K;
        return t;
    }
    if (ft == FT_Q2_K) t = QK_Q3_K;
    else if (ft == FT_IQ3_XXS) t = QK_IQ3_S;
    else if (ft == FT_Q3_K_M) t = QK_Q4_K;
    else if (ft == FT_Q3_K_L) t = QK_Q5_K;
    else if (ft == FT_IQ3_M) t = QK_Q4_K;
    return t;
}

/* ffn_gate / ffn_up: IQ3_XS uses IQ3_XXS in the middle layers. */
static int ffn_gate_up_rule(qk_qrules *r, int t, int *counter, const char *name, qk_err *err, int *rc)
{
    int i_layer, n_layer = r->n_layer;
    if ((*rc = layer_of(r, *counter, name, &i_layer, err)))
        return t;
    if (r->ftype == FT_IQ3_XS && i_layer >= n_layer / 8 && i_layer < 7 * n_layer / 8)
        t = QK_IQ3_XXS;
    ++*counter;
    return t;
}

/* llama_tensor_get_type_impl(). */
static int mix_rule(qk_qrules *r, int t, const char *name, const int64_t ne[4], int cat, qk_err *err,
                    int *rc)
{
    int ft = r->ftype;
    *rc = 0;
    if (cat == QK_CAT_OUTPUT || (r->tied && cat == QK_CAT_TOKEN_EMBD))
        return output_rule(r, t, ne[0]);
    if (ft == FT_MXFP4_MOE)
        return ne[2] > 1 ? QK_MXFP4 : QK_Q8_0; /* experts MXFP4, the rest Q8_0 */
    if (cat == QK_CAT_TOKEN_EMBD)
        return embd_rule(r, t);
    if (FT_IN(ft, FT_IQ2_XXS, FT_IQ2_XS, FT_IQ1_S, FT_IQ2_S, FT_IQ2_M, FT_IQ1_M))
        return iq12_rule(r, t, cat);
    if (qk_qrules_cat_is_attn_v(cat))
        return attn_v_rule(r, t);
    switch (cat) {
    case QK_CAT_ATTN_K:
        if (r->n_expert == 8)
            t = QK_Q8_0;
        else if (ft == FT_IQ3_XS)
            t = QK_IQ3_XXS;
        else if (ft == FT_IQ3_XXS)
            t = QK_IQ2_S;
        return t;
    case QK_CAT_ATTN_Q:
        if (ft == FT_IQ3_XS)
            t = QK_IQ3_XXS;
        else if (ft == FT_IQ3_XXS)
            t = QK_IQ2_S;
        return t;
    case QK_CAT_FFN_DOWN:
        return ffn_down_rule(r, t, name, err, rc);
    case QK_CAT_ATTN_OUTPUT:
        return attn_output_rule(r, t);
    case QK_CAT_ATTN_QKV: /* not reached: attn_qkv is attn_v-like above (as in llama.cpp) */
        return t;
    case QK_CAT_FFN_GATE:
        return ffn_gate_up_rule(r, t, &r->i_ffn_gate, name, err, rc);
    case QK_CAT_FFN_UP:
        return ffn_gate_up_rule(r, t, &r->i_ffn_up, name, err, rc);
    default:
        return t;
    }
}

/* tensor_type_fallback(): a row length that is not a multiple of the block. */
static int fallback(qk_qrules *r, const char *name, int64_t ncols, int t, char *why, size_t whylen,
                    qk_err *err)
{
    const qk_type_traits *tt = qk_type_get(t);
    if (ncols % tt->blck == 0)
        return t;
    ++r->n_fallback;
    int f;
    switch (t) {
    case QK_IQ1_S: case QK_IQ1_M: case QK_IQ2_XXS: case QK_IQ2_XS: case QK_IQ2_S:
    case QK_IQ3_XXS: case QK_IQ3_S: case QK_IQ4_XS: f = QK_IQ4_NL; break;
    case QK_Q2_0: case QK_Q2_K: case QK_Q3_K: case QK_TQ1_0: case QK_TQ2_0: f = QK_Q4_0; break;
    case QK_Q4_K: f = QK_Q5_0; break;
    case QK_Q5_K: f = QK_Q5_1; break;
    case QK_Q6_K: f = QK_Q8_0; break;
    default:
        return -1 - qk_errf(err, QK_EINPUT,
                            "%s: %lld columns are not a multiple of %d (required for %s) and llama.cpp "
                            "defines no fallback for %s", name, (long long)ncols, tt->blck, tt->name,
                            tt->name);
    }
    if (ncols % qk_type_get(f)->blck != 0)
        f = QK_F16; /* unusual shape: not even a multiple of 32 */
    size_t n = strlen(why);
    snprintf(why + n, whylen - n, "; fallback %s -> %s: %lld columns not a multiple of %d", tt->name,
             qk_type_get(f)->name, (long long)ncols, tt->blck);
    return f;
}

int qk_qrules_type(qk_qrules *r, const char *name, const int64_t ne[4], int default_type, int *type,
                   char *why, size_t whylen, qk_err *err)
{
    int cat = qk_qrules_category(name);
    if (r->embd_type >= 0 && cat == QK_CAT_TOKEN_EMBD) {
        *type = r->embd_type;
        snprintf(why, whylen, "--token-embedding-type");
        return 0;
    }
    if (r->output_type >= 0 && cat == QK_CAT_OUTPUT) {
        *type = r->output_type;
        snprintf(why, whylen, "--output-tensor-type");
        return 0;
    }
    int t = default_type;
    snprintf(why, whylen, "preset default");
    if (!qk_type_get(default_type)->is_quantized) {
        *type = t;
        return 0;
    }
    bool manual = false;
    for (size_t i = 0; i < r->n_tt; i++) {
        if (regexec(&r->tt_re[i], name, 0, NULL, 0) == 0) {
            t = r->tt_type[i];
            manual = true;
            snprintf(why, whylen, "--tensor-type pattern %zu", i + 1);
            break;
        }
    }
    if (!manual && r->pure) {
        snprintf(why, whylen, "--pure");
    } else if (!manual) {
        int rc, m = mix_rule(r, t, name, ne, cat, err, &rc);
        if (rc)
            return rc;
        static const char *const cat_name[] = {
            [QK_CAT_TOKEN_EMBD] = "token_embd", [QK_CAT_ATTN_Q] = "attn_q", [QK_CAT_ATTN_V] = "attn_v",
            [QK_CAT_ATTN_K] = "attn_k", [QK_CAT_ATTN_QKV] = "attn_qkv", [QK_CAT_ATTN_KV_B] = "attn_kv_b",
            [QK_CAT_ATTN_OUTPUT] = "attn_output", [QK_CAT_FFN_UP] = "ffn_up", [QK_CAT_FFN_GATE] = "ffn_gate",
            [QK_CAT_FFN_DOWN] = "ffn_down", [QK_CAT_OUTPUT] = "output", [QK_CAT_OTHER] = "other"};
        if (m != t)
            snprintf(why, whylen, "mix rule for %s%s", cat_name[cat],
                     r->tied && cat == QK_CAT_TOKEN_EMBD ? " (tied: output rule)" : "");
        t = m;
    }
    int f = fallback(r, name, ne[0], t, why, whylen, err);
    if (f < 0)
        return -1 - f;
    *type = f;
    return 0;
}

bool qk_qrules_requires_imatrix(const char *name, int type, int ftype)
{
    if (is_token_embd(name) || !strcmp(name, "output.weight"))
        return false;
    switch (type) {
    case QK_IQ3_XXS: case QK_IQ2_XXS: case QK_IQ2_XS: case QK_IQ2_S: case QK_IQ1_M: case QK_IQ1_S:
        return true;
    case QK_Q2_K:
        return ftype == FT_Q2_K_S; /* only Q2_K tensors of a Q2_K_S file */
    default:
        return false;
    }
}
