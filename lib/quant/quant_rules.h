/* quant_rules.h - llama-quantize's per-tensor type choice (internal to
 * quant_model.c; a port of llama.cpp d32676d src/llama-quant.cpp:
 * tensor_allows_quantization, llama_tensor_get_type(_impl),
 * tensor_type_fallback, tensor_requires_imatrix). */
#ifndef QK_QUANT_RULES_H
#define QK_QUANT_RULES_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/core/err.h"

/* Model facts and counters the rules read and update (quantize_state_impl). */
typedef struct qk_qrules {
    int ftype;
    bool falcon;            /* general.architecture == "falcon" */
    bool is_70b;            /* llama.cpp's LLM_TYPE_70B (see quant_model.c) */
    uint32_t n_gqa;         /* n_head / n_head_kv of layer 0 (0 when n_head_kv is 0) */
    uint32_t n_expert;
    int n_layer;            /* block_count: n_ffn_down = n_ffn_gate = n_ffn_up */
    bool has_imatrix;
    bool tied;              /* no output.weight: token_embd follows the output rules */
    bool pure, only_copy, quantize_output;
    int output_type, embd_type;   /* -1: rules */
    const regex_t *tt_re;   /* --tensor-type patterns, compiled */
    const int *tt_type;
    size_t n_tt;
    int n_attention_wv, i_attention_wv, i_ffn_down, i_ffn_gate, i_ffn_up;
    int n_fallback;
} qk_qrules;

/* Tensor categories (llama-quant.cpp's tensor_category). */
enum {
    QK_CAT_TOKEN_EMBD, QK_CAT_ATTN_Q, QK_CAT_ATTN_V, QK_CAT_ATTN_K, QK_CAT_ATTN_QKV,
    QK_CAT_ATTN_KV_B, QK_CAT_ATTN_OUTPUT, QK_CAT_FFN_UP, QK_CAT_FFN_GATE, QK_CAT_FFN_DOWN,
    QK_CAT_OUTPUT, QK_CAT_OTHER
};
int qk_qrules_category(const char *name);
bool qk_qrules_cat_is_attn_v(int cat);

/* ggml_n_dims: dimensions up to the last one larger than 1 (at least 1). */
int qk_qrules_n_dims(const int64_t ne[4]);

/* tensor_allows_quantization(); why (when not allowed) gets the reason. */
bool qk_qrules_allows(const qk_qrules *r, const char *name, const int64_t ne[4], const char **why);

/* llama_tensor_get_type() for a tensor that allows quantization: the chosen
 * type, the reason in why[whylen].  Code 2 in err when llama.cpp refuses
 * (no fallback for the type, bad layer number). */
int qk_qrules_type(qk_qrules *r, const char *name, const int64_t ne[4], int default_type, int *type,
                   char *why, size_t whylen, qk_err *err);

/* tensor_requires_imatrix(). */
bool qk_qrules_requires_imatrix(const char *name, int type, int ftype);

#endif
