/* expf.h - glibc's expf, bit for bit, as a scalar reference and vector
 * kernels.
 *
 * llama-perplexity's KL-divergence and perplexity scoring call expf once or
 * twice per vocabulary entry and position; lib/eval reproduces that scoring
 * bit for bit, so it needs expf's exact values (SwiGLU and the experts'
 * softmax in lib/engine use them too).  The values are those of
 * glibc's expf since 2.28 (sysdeps/ieee754/flt-32/e_expf.c) in the build
 * glibc picks on x86-64 CPUs with FMA (__expf_fma): x as a double,
 *     k = round(x * 32/ln2) (the 0x1.8p52 shift),  r = fma(32/ln2, x, -k),
 *     s = 2^(k/32) from a 32-entry table,
 *     y = fma(fma(C0, r, C1), r*r, fma(r, C2, 1)) * s,   (float)y,
 * and its special cases for |x| >= 88 (overflow to +inf above 0x1.62e42ep6,
 * 0 below -0x1.9fe368p6, the least subnormal below -0x1.9d1d9ep6).  qk
 * computes these itself, so its scores do not depend on the C library or
 * on whether the CPU has FMA (glibc's SSE2 build differs in the last bit
 * of some values).  tests/test_expf.c compares every float against the
 * C library's expf where that is glibc's FMA build, and a digest of all
 * of them against the committed one everywhere. */
#ifndef QK_EXPF_H
#define QK_EXPF_H

#include <stddef.h>

/* The scalar reference. */
float qk_expf(float x);

/* out[i] = qk_expf(x[i] - sub) for i < n (the subtraction in float); out
 * may be x. */
typedef void (*qk_expf_fn)(const float *x, float sub, float *out, size_t n);
/* g[i] = g[i] / (1 + qk_expf(-g[i])) * u[i] for i < n: SwiGLU, silu(g) * u,
 * each operation rounded as written (ggml_vec_swiglu_f32's scalar form). */
typedef void (*qk_swiglu_fn)(float *g, const float *u, size_t n);

/* A CPU level's kernels. */
typedef struct qk_expf_ops {
    qk_expf_fn expf;
    qk_swiglu_fn swiglu;
} qk_expf_ops;

/* The kernels of the active CPU level. */
const qk_expf_ops *qk_expf_ops_active(void);
/* The kernels of a level (the scalar loops for QK_CPU_SCALAR), NULL when unsupported. */
const qk_expf_ops *qk_expf_ops_at(int level);

/* sum += (double)qk_expf(x[i] - sub) for i = 0 .. n-1 in order, from 0:
 * the sums of exponentials of llama-perplexity's log_softmax. */
double qk_expf_sum(const float *x, float sub, size_t n);

/* m = x[0], then m = x[i] > m ? x[i] : m for i = 1 .. n-1 (n >= 1): the
 * maximum of a row of logits as llama-perplexity's loops find it (a NaN
 * element is passed over, a NaN x[0] stays), the same bits, four lanes at a
 * time.  Scalar over a 49152-entry row it was 1.6 % of a qk-imatrix
 * profile. */
float qk_row_max(const float *x, size_t n);

#endif
