/* fdot.h - THE FLOAT-DOT ORDER (private to kernels/).
 *
 * The one order in which qk sums a dot product of float values: F32 x F32,
 * F16 x F16 and BF16 x BF16 weights and activations (kernels/float.c), and
 * every float-activation product (--act-type f32, kernels/f32act.c: a
 * weight row of any type, decoded by its to_float, against float
 * activations).  It is llama.cpp's AVX2 order for prompt batches:
 * - n a multiple of 8 (llamafile_sgemm's tinyBLAS<8, __m256>):
 *     8 float lanes, all +0;  lane[i % 8] = fmaf(x[i], y[i], lane[i % 8])
 *     for i = 0 .. n-1;  result = ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7));
 * - otherwise (ggml_vec_dot_f16, GGML_F16_STEP 32 / EPR 8):
 *     np = n - n % 32;  32 lanes, lane[i % 32] = fmaf(x[i], y[i], lane[i % 32])
 *     for i < np;  lane[l] += lane[l + 16] (l < 16);  lane[l] += lane[l + 8]
 *     (l < 8);  t[l] = lane[l] + lane[l + 4] (l < 4);  s = (double)((t0+t1)
 *     + (t2+t3));  s += (double)(x[i] * y[i]) for i = np .. n-1 in order;
 *     result (float)s.
 * The SIMD kernels (kernels/x86/avx2_float.c, avx2_f32act.c) implement the
 * same operations, so every level returns the same bits (issue #10).
 *
 * qk_fdot_acc is the order as a running state: elements may be fed in
 * pieces (a decoded block at a time), always in increasing index order. */
#ifndef QK_FDOT_H
#define QK_FDOT_H

#include <math.h>
#include <stdint.h>

typedef struct qk_fdot_acc {
    float lane[32];
    double s;      /* the 32-lane path's double sum, once the lanes are reduced */
    int64_t np;    /* elements summed in lanes */
    int width;     /* 8 or 32 lanes */
    int reduced;   /* s holds the reduced lanes */
} qk_fdot_acc;

/* ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)): tinyBLAS's hsum(__m256). */
static inline float qk_fdot_hsum8(const float *l)
{
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

/* ggml_vec_dot_f16's GGML_F16_VEC_REDUCE of 32 lanes (clobbers lane). */
static inline float qk_fdot_reduce32(float *lane)
{
    for (int l = 0; l < 16; l++)
        lane[l] = lane[l] + lane[l + 16];
    for (int l = 0; l < 8; l++)
        lane[l] = lane[l] + lane[l + 8];
    const float t0 = lane[0] + lane[4], t1 = lane[1] + lane[5], t2 = lane[2] + lane[6],
                t3 = lane[3] + lane[7];
    return (t0 + t1) + (t2 + t3);
}

/* Start a dot product of n elements. */
static inline void qk_fdot_begin(qk_fdot_acc *a, int64_t n)
{
    for (int l = 0; l < 32; l++)
        a->lane[l] = 0.0f;
    a->width = n % 8 == 0 ? 8 : 32;
    a->np = n % 8 == 0 ? n : n - n % 32;
    a->s = 0.0;
    a->reduced = 0;
}

/* Elements i0 .. i0+m-1: x[k] * y[k] for k < m. */
static inline void qk_fdot_feed(qk_fdot_acc *a, int64_t i0, const float *x, const float *y, int64_t m)
{
    int64_t k = 0;
    if (a->width == 8 && i0 % 8 == 0) {
        for (; k + 8 <= m; k += 8)
            for (int l = 0; l < 8; l++)
                a->lane[l] = fmaf(x[k + l], y[k + l], a->lane[l]);
    }
    for (; k < m; k++) {
        const int64_t i = i0 + k;
        if (i < a->np) {
            const int l = (int)(i % a->width);
            a->lane[l] = fmaf(x[k], y[k], a->lane[l]);
            continue;
        }
        if (!a->reduced) {
            a->s = qk_fdot_reduce32(a->lane);
            a->reduced = 1;
        }
        a->s += (double)(x[k] * y[k]);
    }
}

static inline float qk_fdot_end(qk_fdot_acc *a)
{
    if (a->width == 8)
        return qk_fdot_hsum8(a->lane);
    return a->reduced ? (float)a->s : (float)(double)qk_fdot_reduce32(a->lane);
}

/* The reference loop of every float-activation product (kernels/f32act.c
 * for the one-array types, kernels/wq.c for the parted layouts): each of nr
 * weight rows is decoded at most QK_FDOT_ROWS_CHUNK elements at a time by
 * dec(ctx, r, k0, m, w) (k0 a multiple of chunk)
 * and summed against each of nt activation rows (token t at y + t * ys
 * floats) in the order above: out[t * ldo + r]. */
typedef void (*qk_fdot_dec_fn)(const void *ctx, int r, int64_t k0, int64_t m, float *w);
#define QK_FDOT_ROWS_CHUNK 256
#define QK_FDOT_ROWS_TOKENS 64 /* activation rows per pass over a weight row */

static inline void qk_fdot_rows(const void *ctx, qk_fdot_dec_fn dec, int64_t n, int64_t chunk, int nr,
                                const float *y, size_t ys, int nt, float *out, size_t ldo)
{
    float w[QK_FDOT_ROWS_CHUNK];
    qk_fdot_acc acc[QK_FDOT_ROWS_TOKENS];
    for (int r = 0; r < nr; r++) {
        for (int t0 = 0; t0 < nt; t0 += QK_FDOT_ROWS_TOKENS) {
            const int q = nt - t0 < QK_FDOT_ROWS_TOKENS ? nt - t0 : QK_FDOT_ROWS_TOKENS;
            for (int i = 0; i < q; i++)
                qk_fdot_begin(&acc[i], n);
            for (int64_t c0 = 0; c0 < n; c0 += chunk) {
                const int64_t m = n - c0 < chunk ? n - c0 : chunk;
                dec(ctx, r, c0, m, w);
                for (int i = 0; i < q; i++)
                    qk_fdot_feed(&acc[i], c0, w, y + (size_t)(t0 + i) * ys + (size_t)c0, m);
            }
            for (int i = 0; i < q; i++)
                out[(size_t)(t0 + i) * ldo + (size_t)r] = qk_fdot_end(&acc[i]);
        }
    }
}

#endif
