/* matmul.h - y = W x for a weight matrix of any table type, the way ggml's
 * CPU backend computes it (ggml-cpu.c, ggml_compute_forward_mul_mat): each
 * activation row is first encoded to the weight type's vec_dot_type with that
 * type's from_float (F32 weights pair with plain F32 rows, no encoding), then
 * every output element is one table vec_dot of a weight row and an encoded
 * activation row.  With QK_ACT_F32 (--act-type f32) the activations stay
 * float for every weight type and each element is the type's float-activation
 * product (kernels/cpu.h fdot_tile): the F32 product on the decoded row, so
 * the output is that of the weights dequantized to F32, bit for bit.  Rows are split across threads in fixed ranges, so the
 * output bytes do not depend on the thread count, and an element does not
 * depend on how many other activation rows were in the batch. */
#ifndef QK_MATMUL_H
#define QK_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu.h"
#include "lib/core/err.h"
#include "lib/engine/model.h"

/* How the products treat their activations (issue #24). */
enum {
    QK_ACT_DEFAULT = 0, /* encoded to each weight type's vec_dot_type (ggml's arithmetic) */
    QK_ACT_F32 = 1,     /* float activations for every weight (cpu.h's fdot_tile): the bits
                         * of the same weights dequantized to F32 */
};

/* "default" or "f32" (qk-run, qk-kld, qk-bench --act-type) into *act. */
int qk_act_type_parse(const char *s, int *act, qk_err *err);
/* "default" or "f32". */
const char *qk_act_type_name(int act);

/* Scratch for encoded activations, grown on demand, and the arithmetic of
 * the products made with it; zero-initialise it (QK_ACT_DEFAULT). */
typedef struct qk_matmul_ws {
    void *buf;
    size_t cap;
    int act;         /* QK_ACT_DEFAULT or QK_ACT_F32 */
    int act_variant; /* QK_ACTV_* of kernels/actvar.h: the activation encoders'
                      * numerically equivalent variant (qk-kld --noise-floor); 0: none */
} qk_matmul_ws;

void qk_matmul_ws_free(qk_matmul_ws *ws);

/* For t < n_tok and r < w->rows:
 *     y[t * w->rows + r] = dot(row r of w, x[t * w->cols ...])
 * x: n_tok rows of w->cols floats; y: n_tok rows of w->rows floats.
 * Returns 0, or 3 when scratch memory cannot be had. */
int qk_matmul(const qk_weight *w, const float *x, int64_t n_tok, float *y, qk_matmul_ws *ws,
              int nthreads, qk_err *err);

/* Several weights on the same input x (all with x's w[i]->cols columns), as
 * qk_matmul each into y[i], in one pass of the threads: x is encoded once
 * per activation type, and the row ranges of all the weights share one
 * parallel loop.  The same bytes as nw qk_matmul calls.  nw <= 8. */
int qk_matmul_n(const qk_weight *const *w, float *const *y, int nw, const float *x, int64_t n_tok,
                qk_matmul_ws *ws, int nthreads, qk_err *err);

/* Repack w for the active CPU level's packed kernel of its type
 * (kernels/cpu.h: pack, packed_tile) when there is one, w->rows is a
 * multiple of QK_PACK_ROWS and the kernel takes rows of w->cols columns
 * (pack_size > 0): sets w->packed, and *mem to the copy (about as many
 * bytes as the rows, up to 18 % more for Q3_K and Q6_K; the caller frees
 * it after the last product).
 * Otherwise *mem = NULL and w is unchanged.  The products give the same
 * bytes either way.  Returns 0, or 3 when memory cannot be had. */
int qk_weight_pack(qk_weight *w, void **mem, qk_err *err);

/* Rows per one-token packed_tile call (whole packed groups): the activation
 * side is prepared once per tile. */
#define QK_PACK_DECODE_TILE 64

/* Rows per packed_tile call of kernels k against n_tok activation rows:
 * QK_PACK_DECODE_TILE for one token, else the kernel's pack_tile_rows. */
static inline size_t qk_pack_tile_rows(const qk_kernels *k, int64_t n_tok)
{
    return n_tok == 1 ? QK_PACK_DECODE_TILE : (size_t)k->pack_tile_rows;
}

#endif
