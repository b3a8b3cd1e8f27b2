#include "formats/hfnames.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *hf, *gguf;
    int perm;
} global_names[] = {
    {"model.embed_tokens.weight", "token_embd.weight", QK_PERM_NONE},
    {"model.norm.weight", "output_norm.weight", QK_PERM_NONE},
    {"lm_head.weight", "output.weight", QK_PERM_NONE},
};

/* model.layers.N.<suffix> -> blk.N.<gguf> */
static const struct {
    const char *hf, *gguf;
    int perm;
} layer_names[] = {
    {"input_layernorm.weight", "attn_norm.weight", QK_PERM_NONE},
    {"self_attn.q_proj.weight", "attn_q.weight", QK_PERM_Q},
    {"self_attn.k_proj.weight", "attn_k.weight", QK_PERM_K},
    {"self_attn.v_proj.weight", "attn_v.weight", QK_PERM_NONE},
    {"self_attn.o_proj.weight", "attn_output.weight", QK_PERM_NONE},
    {"self_attn.q_proj.bias", "attn_q.bias", QK_PERM_Q},
    {"self_attn.k_proj.bias", "attn_k.bias", QK_PERM_K},
    {"self_attn.v_proj.bias", "attn_v.bias", QK_PERM_NONE},
    {"self_attn.q_norm.weight", "attn_q_norm.weight", QK_PERM_NONE},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", QK_PERM_NONE},
    {"post_attention_layernorm.weight", "ffn_norm.weight", QK_PERM_NONE},
    {"mlp.gate_proj.weight", "ffn_gate.weight", QK_PERM_NONE},
    {"mlp.up_proj.weight", "ffn_up.weight", QK_PERM_NONE},
    {"mlp.down_proj.weight", "ffn_down.weight", QK_PERM_NONE},
    {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight", QK_PERM_NONE},
};

int qk_hf_to_gguf_name(const char *hf, char *out, size_t n, int *perm)
{
    *perm = QK_PERM_NONE;
    for (size_t i = 0; i < sizeof global_names / sizeof global_names[0]; i++) {
        if (strcmp(hf, global_names[i].hf) == 0) {
            snprintf(out, n, "%s", global_names[i].gguf);
            *perm = global_names[i].perm;
            return 0;
        }
    }
    static const char prefix[] = "model.layers.";
    if (strncmp(hf, prefix, sizeof prefix - 1) != 0)
        return -1;
    const char *p = hf + sizeof prefix - 1;
    char *end;
    unsigned long layer = strtoul(p, &end, 10);
    if (end == p || *end != '.')
        return -1;
    for (size_t i = 0; i < sizeof layer_names / sizeof layer_names[0]; i++) {
        if (strcmp(end + 1, layer_names[i].hf) == 0) {
            snprintf(out, n, "blk.%lu.%s", layer, layer_names[i].gguf);
            *perm = layer_names[i].perm;
            return 0;
        }
    }
    return -1;
}

/* llama.cpp: w.reshape(n_head, 2, rows/n_head/2, ...).swapaxes(1, 2): GGUF row
 * h*hd + 2*i + s holds HF row h*hd + s*hd/2 + i. */
int64_t qk_unpermute_row(int64_t row, int64_t n_rows, int64_t n_head)
{
    int64_t hd = n_rows / n_head, h = row / hd, r = row % hd;
    return h * hd + (r % 2) * (hd / 2) + r / 2;
}
