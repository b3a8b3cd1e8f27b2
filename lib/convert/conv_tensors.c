/* conv_tensors.c - one tensor of a conversion: source rows (F32, F16, BF16
 * safetensors) to float, llama.cpp's rope permutation of q/k rows
 * (LlamaModel.permute), and the output type's encoding with gguf-py's
 * numerics (quants.py: numpy's float16 and round-to-nearest-even bfloat16,
 * Q8_0 as ggml's quantize_row_q8_0_ref).  Row blocks of whole heads are
 * converted and written in turn and their source pages released, so a
 * tensor never needs more than one block in memory. */
#include "lib/convert/conv_impl.h"

#include <stdlib.h>
#include <string.h>

#include "formats/hfnames.h"
#include "kernels/cpu.h"
#include "kernels/half.h"
#include "kernels/types.h"
#include "lib/core/mapfile.h"

#define BLOCK_BYTES (4u << 20) /* f32 bytes of one row block */

static float load_elem(const uint8_t *p, int type, uint64_t i)
{
    uint16_t h;
    float f;
    switch (type) {
    case QK_F16:
        memcpy(&h, p + 2 * i, 2);
        return qk_f16_to_f32(h);
    case QK_BF16:
        memcpy(&h, p + 2 * i, 2);
        return qk_bf16_to_f32(h);
    default:
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
}

/* Encode rows x[0..nrows*ncols) as type into out; returns the bytes. */
static size_t encode(const float *x, int64_t nrows, int64_t ncols, int type, void *out)
{
    uint64_t n = (uint64_t)nrows * (uint64_t)ncols;
    switch (type) {
    case QK_F32:
        memcpy(out, x, n * 4);
        return n * 4;
    case QK_F16:
        for (uint64_t i = 0; i < n; i++) {
            uint16_t h = qk_f32_to_f16(x[i]);
            memcpy((uint8_t *)out + 2 * i, &h, 2);
        }
        return n * 2;
    case QK_BF16:
        for (uint64_t i = 0; i < n; i++) {
            uint16_t h = qk_f32_to_bf16(x[i]);
            memcpy((uint8_t *)out + 2 * i, &h, 2);
        }
        return n * 2;
    default:
        return qk_kernels_for(type)->quantize(x, out, nrows, ncols, NULL);
    }
}

int qk_conv_write_tensor(qk_gguf_writer *w, const qk_conv_tensor *t, qk_err *err)
{
    const qk_hf_tensor *s = t->src;
    int64_t ncols = s->n_dims >= 2 ? s->ne[0] : 1;
    int64_t nrows = ncols ? (int64_t)(s->nelem / (uint64_t)ncols) : 0;
    int64_t unit = t->perm_heads > 0 ? nrows / t->perm_heads : 1; /* rows moved together */
    if (unit <= 0)
        unit = 1;
    int64_t per = (int64_t)(BLOCK_BYTES / 4 / (uint64_t)(ncols ? ncols : 1));
    per = per < unit ? unit : per / unit * unit;
    size_t esize = s->type == QK_F32 ? 4 : 2;
    float *x = malloc((size_t)(per * ncols) * sizeof *x);
    void *y = malloc((size_t)(per * ncols) * 4 + 64);
    if (!x || !y) {
        free(x);
        free(y);
        return qk_errf(err, QK_EIO, "qk-convert: out of memory");
    }
    int rc = 0;
    for (int64_t r0 = 0; r0 < nrows && !rc; r0 += per) {
        int64_t nr = nrows - r0 < per ? nrows - r0 : per;
        for (int64_t r = 0; r < nr; r++) {
            int64_t src_row = r0 + r;
            if (t->perm_heads > 0)
                src_row = qk_unpermute_row(r0 + r, nrows, t->perm_heads);
            const uint8_t *p = s->data + (uint64_t)src_row * (uint64_t)ncols * esize;
            for (int64_t c = 0; c < ncols; c++)
                x[r * ncols + c] = load_elem(p, s->type, (uint64_t)c);
        }
        size_t nb = encode(x, nr, ncols, t->type, y);
        rc = qk_gguf_w_data(w, y, nb, err);
        qk_map_release(s->data + (uint64_t)r0 * (uint64_t)ncols * esize, (size_t)((uint64_t)nr * (uint64_t)ncols * esize));
    }
    free(x);
    free(y);
    return rc ? rc : qk_gguf_w_end_tensor(w, err);
}
