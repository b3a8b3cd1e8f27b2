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
#include "lib/core/threads.h"

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

/* One row block: source rows (permuted) to float, then encoded, in ranges of
 * rows over the thread pool (each row's bytes depend on that row alone). */
typedef struct block_job {
    const qk_conv_tensor *t;
    const qk_hf_tensor *s;
    int64_t r0, nrows, ncols;
    size_t esize, out_row;
    float *x;
    uint8_t *y;
} block_job;

static void block_rows(void *ctx, size_t begin, size_t end)
{
    const block_job *j = ctx;
    const qk_hf_tensor *s = j->s;
    int64_t ncols = j->ncols;
    for (size_t r = begin; r < end; r++) {
        int64_t src_row = j->r0 + (int64_t)r;
        if (j->t->perm_heads > 0)
            src_row = qk_unpermute_row(src_row, j->nrows, j->t->perm_heads);
        const uint8_t *p = s->data + (uint64_t)src_row * (uint64_t)ncols * j->esize;
        float *x = j->x + r * (size_t)ncols;
        if (s->type == QK_F32) {
            memcpy(x, p, (size_t)ncols * 4);
        } else {
            for (int64_t c = 0; c < ncols; c++)
                x[c] = load_elem(p, s->type, (uint64_t)c);
        }
        encode(x, 1, ncols, j->t->type, j->y + r * j->out_row);
    }
}

/* The rows of one source, block by block, pages released behind. */
static int write_source(qk_gguf_writer *w, const qk_conv_tensor *t, const qk_hf_tensor *s, int threads, qk_err *err)
{
    int64_t ncols = s->n_dims >= 2 ? s->ne[0] : 1;
    int64_t nrows = ncols ? (int64_t)(s->nelem / (uint64_t)ncols) : 0;
    int64_t unit = t->perm_heads > 0 ? nrows / t->perm_heads : 1; /* rows moved together */
    if (unit <= 0)
        unit = 1;
    int64_t per = (int64_t)(BLOCK_BYTES / 4 / (uint64_t)(ncols ? ncols : 1));
    per = per < unit ? unit : per / unit * unit;
    size_t esize = s->type == QK_F32 ? 4 : 2;
    size_t out_row = qk_row_size(t->type, ncols); /* a vector: one-element rows */
    float *x = malloc((size_t)(per * ncols) * sizeof *x);
    uint8_t *y = malloc((size_t)per * out_row + 64);
    if (!x || !y) {
        free(x);
        free(y);
        return qk_errf(err, QK_EIO, "qk-convert: out of memory");
    }
    int rc = 0;
    for (int64_t r0 = 0; r0 < nrows && !rc; r0 += per) {
        int64_t nr = nrows - r0 < per ? nrows - r0 : per;
        block_job j = {t, s, r0, nrows, ncols, esize, out_row, x, y};
        size_t grain = (size_t)(unit > 1 ? unit : 16);
        qk_parallel_for(threads, (size_t)nr, grain, block_rows, &j);
        rc = qk_gguf_w_data(w, y, (size_t)nr * out_row, err);
        qk_map_release(s->data + (uint64_t)r0 * (uint64_t)ncols * esize, (size_t)((uint64_t)nr * (uint64_t)ncols * esize));
    }
    free(x);
    free(y);
    return rc;
}

int qk_conv_write_tensor(qk_gguf_writer *w, const qk_conv_tensor *t, int threads, qk_err *err)
{
    int rc = 0;
    for (int i = 0; i < (t->n_src > 1 ? t->n_src : 1) && !rc; i++)
        rc = write_source(w, t, t->n_src > 1 ? t->srcs[i] : t->src, threads, err);
    return rc ? rc : qk_gguf_w_end_tensor(w, err);
}
