/* hfnames.h - Hugging Face <-> GGUF tensor names for Llama-family models,
 * as llama.cpp's convert_hf_to_gguf.py maps them, and the q/k row
 * permutation its Llama converter applies. */
#ifndef QK_HFNAMES_H
#define QK_HFNAMES_H

#include <stddef.h>
#include <stdint.h>

enum { QK_PERM_NONE = 0, QK_PERM_Q = 1, QK_PERM_K = 2 };

/* Map an HF name (model.layers.3.self_attn.q_proj.weight) to its GGUF name
 * (blk.3.attn_q.weight).  Returns 0 and fills out (and *perm, which says
 * whether llama.cpp permutes the rows of this tensor for rope), or -1 when
 * the name has no GGUF counterpart. */
int qk_hf_to_gguf_name(const char *hf, char *out, size_t n, int *perm);

/* Row of the HF tensor that llama.cpp's permutation puts at GGUF row `row`,
 * for a tensor of n_head heads (rows = n_head * head_dim). */
int64_t qk_unpermute_row(int64_t row, int64_t n_rows, int64_t n_head);

#endif
