/* conv_tensors.c - the rows of one output tensor of a conversion: source
 * rows (F32, F16, BF16 safetensors) to float, the class's rearrangement
 * (llama.cpp's rope permutation of q/k rows, LlamaModel.permute; gpt-oss's
 * transposed experts and interleaved gate/up, GptOssModel.modify_tensors;
 * stacked experts; gemma's norm + 1), then the output type's encoding with
 * gguf-py's numerics (quants.py: numpy's float16 and round-to-nearest-even
 * bfloat16, Q8_0 as ggml's quantize_row_q8_0_ref).  The converter turns
 * BF16 into F32 before modify_tensors and keeps F16 as F16, so gemma's + 1
 * is rounded to F16 for F16 sources.  Row blocks are converted and written
 * in turn and their source pages released, so a tensor never needs more
 * than one block in memory. */
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

/* Encode one row x[0..ncols) as type into out. */
static void encode(const float *x, int64_t ncols, int type, void *out)
{
    switch (type) {
    case QK_F32:
        memcpy(out, x, (size_t)ncols * 4);
        break;
    case QK_F16:
        for (int64_t i = 0; i < ncols; i++) {
            uint16_t h = qk_f32_to_f16(x[i]);
            memcpy((uint8_t *)out + 2 * i, &h, 2);
        }
        break;
    case QK_BF16:
        for (int64_t i = 0; i < ncols; i++) {
            uint16_t h = qk_f32_to_bf16(x[i]);
            memcpy((uint8_t *)out + 2 * i, &h, 2);
        }
        break;
    default:
        qk_kernels_for(type)->quantize(x, out, 1, ncols, NULL);
        break;
    }
}

uint64_t qk_conv_tensor_nrows(const qk_conv_tensor *t)
{
    uint64_t rows = 1;
    for (uint32_t d = 1; d < t->n_dims; d++)
        rows *= (uint64_t)t->ne[d];
    return rows;
}

/* The source matrix of output matrix m, and its row length. */
static const uint8_t *source_matrix(const qk_conv_tensor *t, int64_t m, const qk_hf_tensor **s_out)
{
    const qk_hf_tensor *s = t->n_src > 1 ? t->srcs[m] : t->src;
    *s_out = s;
    if (t->n_src > 1)
        return s->data;
    uint64_t mat = s->n_dims >= 2 ? (uint64_t)s->ne[0] * (uint64_t)s->ne[1] : (uint64_t)s->nelem;
    size_t es = s->type == QK_F32 ? 4 : 2;
    return s->data + (uint64_t)m * mat * es;
}

typedef struct rows_job {
    const qk_conv_tensor *t;
    uint64_t row0;
    int64_t ncols, rows_per_mat;
    size_t out_row;
    float *x;
    uint8_t *y;
} rows_job;

static void rows_range(void *ctx, size_t begin, size_t end)
{
    const rows_job *j = ctx;
    const qk_conv_tensor *t = j->t;
    int64_t ncols = j->ncols;
    for (size_t i = begin; i < end; i++) {
        uint64_t R = j->row0 + i;
        int64_t m = (int64_t)(R / (uint64_t)j->rows_per_mat), r = (int64_t)(R % (uint64_t)j->rows_per_mat);
        float *x = j->x + i * (size_t)ncols;
        if (!t->src) {
            memcpy(x, t->gen + (size_t)R * (size_t)ncols, (size_t)ncols * 4);
        } else {
            const qk_hf_tensor *s;
            const uint8_t *S = source_matrix(t, m, &s);
            int64_t sc = s->n_dims >= 2 ? s->ne[0] : (int64_t)s->nelem; /* source row length */
            switch (t->xform) {
            case QK_CX_T:
            case QK_CX_T_EVEN:
            case QK_CX_T_ODD: {
                int64_t col = t->xform == QK_CX_T ? r : 2 * r + (t->xform == QK_CX_T_ODD);
                for (int64_t c = 0; c < ncols; c++)
                    x[c] = load_elem(S, s->type, (uint64_t)(c * sc + col));
                break;
            }
            case QK_CX_EVEN:
            case QK_CX_ODD:
                for (int64_t c = 0; c < ncols; c++)
                    x[c] = load_elem(S, s->type, (uint64_t)(r * sc + 2 * c + (t->xform == QK_CX_ODD)));
                break;
            default: {
                int64_t sr = t->perm_heads > 0 ? qk_unpermute_row(r, j->rows_per_mat, t->perm_heads) : r;
                for (int64_t c = 0; c < ncols; c++)
                    x[c] = load_elem(S, s->type, (uint64_t)(sr * sc + c));
                break;
            }
            }
            if (t->plus_one) {
                for (int64_t c = 0; c < ncols; c++)
                    x[c] = s->type == QK_F16 ? qk_f16_to_f32(qk_f32_to_f16(x[c] + 1.0f)) : x[c] + 1.0f;
            }
        }
        encode(x, ncols, t->type, j->y + i * j->out_row);
    }
}

int qk_conv_tensor_rows(const qk_conv_tensor *t, uint64_t row0, uint64_t n, void *dst, int threads, qk_err *err)
{
    int64_t ncols = t->ne[0];
    float *x = malloc((size_t)(n * (uint64_t)ncols) * sizeof *x + 1);
    if (!x)
        return qk_errf(err, QK_EIO, "qk-convert: out of memory");
    rows_job j = {t, row0, ncols, t->n_dims >= 2 ? t->ne[1] : 1, qk_row_size(t->type, ncols), x, dst};
    int64_t unit = t->perm_heads > 0 ? j.rows_per_mat / t->perm_heads : 16;
    qk_parallel_for(threads, (size_t)n, (size_t)(unit > 0 ? unit : 1), rows_range, &j);
    free(x);
    return 0;
}

/* The source bytes of output matrix m, rows [r0, r0 + nr) (NONE, permuted
 * within whole heads) or all of it, dropped from memory once written. */
static void release(const qk_conv_tensor *t, int64_t m, int64_t r0, int64_t nr, bool whole)
{
    if (!t->src)
        return;
    const qk_hf_tensor *s;
    const uint8_t *S = source_matrix(t, m, &s);
    size_t es = s->type == QK_F32 ? 4 : 2;
    uint64_t sc = s->n_dims >= 2 ? (uint64_t)s->ne[0] : s->nelem;
    if (whole) {
        uint64_t rows = s->n_dims >= 2 ? (uint64_t)s->ne[1] : 1;
        qk_map_release(S, (size_t)(rows * sc * es));
    } else {
        qk_map_release(S + (uint64_t)r0 * sc * es, (size_t)((uint64_t)nr * sc * es));
    }
}

int qk_conv_write_tensor(qk_gguf_writer *w, const qk_conv_tensor *t, int threads, qk_err *err)
{
    int64_t ncols = t->ne[0];
    int64_t rows_per_mat = t->n_dims >= 2 ? t->ne[1] : 1;
    int64_t n_mat = (int64_t)(qk_conv_tensor_nrows(t) / (uint64_t)rows_per_mat);
    int64_t unit = t->perm_heads > 0 ? rows_per_mat / t->perm_heads : 1; /* rows moved together */
    if (unit <= 0)
        unit = 1;
    int64_t per = (int64_t)(BLOCK_BYTES / 4 / (uint64_t)(ncols ? ncols : 1));
    per = per < unit ? unit : per / unit * unit;
    size_t out_row = qk_row_size(t->type, ncols);
    uint8_t *y = malloc((size_t)per * out_row + 64);
    if (!y)
        return qk_errf(err, QK_EIO, "qk-convert: out of memory");
    int rc = 0;
    bool rowwise = t->xform == QK_CX_NONE;
    for (int64_t m = 0; m < n_mat && !rc; m++) {
        for (int64_t r0 = 0; r0 < rows_per_mat && !rc; r0 += per) {
            int64_t nr = rows_per_mat - r0 < per ? rows_per_mat - r0 : per;
            rc = qk_conv_tensor_rows(t, (uint64_t)(m * rows_per_mat + r0), (uint64_t)nr, y, threads, err);
            if (!rc)
                rc = qk_gguf_w_data(w, y, (size_t)nr * out_row, err);
            if (rowwise)
                release(t, m, r0, nr, false);
        }
        if (!rowwise)
            release(t, m, 0, 0, true);
    }
    free(y);
    return rc ? rc : qk_gguf_w_end_tensor(w, err);
}
