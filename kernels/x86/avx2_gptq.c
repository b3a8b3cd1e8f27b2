/* avx2_gptq.c - GPTQ's loops (kernels/gptq_ops.h) with AVX2: the reference's
 * four partial sums of a dot product are the four lanes of one register, and
 * the kernels work on several independent dot products (rows of V, columns
 * of U, columns of the weight tile) at once; each multiply and add (or
 * subtract) is the reference's, in its order, so the bits are the same. */
#include "kernels/x86/simd_common.h"

#include <string.h>

#include "kernels/gptq_ops.h"

#ifdef QK_X86

/* ---- V: R rows at a time, sharing the loads of row j ---------------------------------------- */

QK_TARGET_AVX2 static inline __attribute__((always_inline)) void chol_group(double *a, int64_t n, int64_t r,
                                                                            const int R, int64_t jlo, int64_t jhi)
{
    for (int64_t j = jhi - 1; j >= jlo; j--) {
        const double *vj = a + j * n + j + 1;
        const int64_t len = n - j - 1, nm = len & ~(int64_t)3;
        __m256d acc[8];
        for (int q = 0; q < R; q++)
            acc[q] = _mm256_setzero_pd();
        for (int64_t m = 0; m < nm; m += 4) {
            const __m256d b = _mm256_loadu_pd(vj + m);
            for (int q = 0; q < R; q++)
                acc[q] = _mm256_add_pd(acc[q], _mm256_mul_pd(_mm256_loadu_pd(a + (r + q) * n + j + 1 + m), b));
        }
        for (int q = 0; q < R; q++) {
            double s[4], *vr = a + (r + q) * n;
            _mm256_storeu_pd(s, acc[q]);
            for (int64_t m = nm; m < len; m++)
                s[0] += vr[j + 1 + m] * vj[m];
            vr[j] = (vr[j] - ((s[0] + s[1]) + (s[2] + s[3]))) / vj[-1];
        }
    }
}

QK_TARGET_AVX2 void qk_x86_avx2_chol_rows(double *a, int64_t n, int64_t r0, int64_t r1, int64_t jlo, int64_t jhi)
{
    int64_t r = r0;
    for (; r + 8 <= r1; r += 8)
        chol_group(a, n, r, 8, jlo, jhi);
    for (; r + 4 <= r1; r += 4)
        chol_group(a, n, r, 4, jlo, jhi);
    for (; r < r1; r++)
        chol_group(a, n, r, 1, jlo, jhi);
}

/* ---- U: four columns per register ---------------------------------------------------------- */

/* The rest of element (i, column c) of the panel from term m0 of its dot
 * product on, given the four sums s of the terms before (m0 a multiple of 4). */
double qk_x86_gptq_inv_finish(const double *vi, const double *p, int64_t w, int64_t c, int64_t i, int64_t len, int64_t m0,
                         double s[4])
{
    int64_t m = m0;
    for (; m + 4 <= len; m += 4)
        for (int k = 0; k < 4; k++)
            s[k] += vi[i + 1 + m + k] * p[(i + 1 + m + k) * w + c];
    for (; m < len; m++)
        s[0] += vi[i + 1 + m] * p[(i + 1 + m) * w + c];
    return -((s[0] + s[1]) + (s[2] + s[3])) / vi[i];
}

/* Row i (< j0) of the panel, columns [c0, c0 + 4 G): G groups of four sharing the broadcasts of row i of v. */
QK_TARGET_AVX2 static inline __attribute__((always_inline)) void inv_groups(const double *v, int64_t n, double *p,
                                                                            int64_t j0, int64_t w, int64_t i,
                                                                            int64_t c0, const int G)
{
    const double *vi = v + i * n;
    const int64_t nm = (j0 + c0 - i) & ~(int64_t)3; /* full groups of terms common to every column */
    __m256d acc[2][4];
    for (int g = 0; g < G; g++)
        for (int k = 0; k < 4; k++)
            acc[g][k] = _mm256_setzero_pd();
    for (int64_t m = 0; m < nm; m += 4)
        for (int k = 0; k < 4; k++) {
            const __m256d x = _mm256_broadcast_sd(vi + i + 1 + m + k);
            const double *pr = p + (i + 1 + m + k) * w + c0;
            for (int g = 0; g < G; g++)
                acc[g][k] = _mm256_add_pd(acc[g][k], _mm256_mul_pd(x, _mm256_loadu_pd(pr + 4 * g)));
        }
    for (int g = 0; g < G; g++) {
        double s[4][4];
        for (int k = 0; k < 4; k++)
            _mm256_storeu_pd(s[k], acc[g][k]);
        for (int l = 0; l < 4; l++) {
            const int64_t c = c0 + 4 * g + l;
            double t[4] = {s[0][l], s[1][l], s[2][l], s[3][l]};
            p[i * w + c] = qk_x86_gptq_inv_finish(vi, p, w, c, i, j0 + c - i, nm, t);
        }
    }
}

QK_TARGET_AVX2 static void inv_cols(const double *v, int64_t n, double *p, int64_t j0, int64_t w)
{
    memset(p, 0, (size_t)(n * w) * sizeof *p);
    for (int64_t i = j0 + w - 1; i >= 0; i--) {
        const double *vi = v + i * n;
        if (i >= j0) { /* the panel's own triangle */
            p[i * w + i - j0] = 1.0 / vi[i];
            for (int64_t c = i - j0 + 1; c < w; c++) {
                double s[4] = {0, 0, 0, 0};
                p[i * w + c] = qk_x86_gptq_inv_finish(vi, p, w, c, i, j0 + c - i, 0, s);
            }
            continue;
        }
        int64_t c = 0;
        for (; c + 8 <= w; c += 8)
            inv_groups(v, n, p, j0, w, i, c, 2);
        for (; c + 4 <= w; c += 4)
            inv_groups(v, n, p, j0, w, i, c, 1);
        for (; c < w; c++) {
            double s[4] = {0, 0, 0, 0};
            p[i * w + c] = qk_x86_gptq_inv_finish(vi, p, w, c, i, j0 + c - i, 0, s);
        }
    }
}

/* ---- the weight tile: two registers per column, four columns at a time ----------------------- */

QK_TARGET_AVX2 static void sub16(float *w, const float *u, int64_t ldu, const float *e, int64_t nk, int64_t np)
{
    int64_t p = 0;
    for (; p + 4 <= np; p += 4) {
        __m256 acc[8];
        for (int q = 0; q < 8; q++)
            acc[q] = _mm256_loadu_ps(w + p * 16 + 8 * q);
        for (int64_t k = 0; k < nk; k++) {
            const __m256 e0 = _mm256_loadu_ps(e + k * 16), e1 = _mm256_loadu_ps(e + k * 16 + 8);
            for (int q = 0; q < 4; q++) {
                const __m256 x = _mm256_broadcast_ss(u + k * ldu + p + q);
                acc[2 * q] = _mm256_sub_ps(acc[2 * q], _mm256_mul_ps(x, e0));
                acc[2 * q + 1] = _mm256_sub_ps(acc[2 * q + 1], _mm256_mul_ps(x, e1));
            }
        }
        for (int q = 0; q < 8; q++)
            _mm256_storeu_ps(w + p * 16 + 8 * q, acc[q]);
    }
    for (; p < np; p++) {
        __m256 a0 = _mm256_loadu_ps(w + p * 16), a1 = _mm256_loadu_ps(w + p * 16 + 8);
        for (int64_t k = 0; k < nk; k++) {
            const __m256 x = _mm256_broadcast_ss(u + k * ldu + p);
            a0 = _mm256_sub_ps(a0, _mm256_mul_ps(x, _mm256_loadu_ps(e + k * 16)));
            a1 = _mm256_sub_ps(a1, _mm256_mul_ps(x, _mm256_loadu_ps(e + k * 16 + 8)));
        }
        _mm256_storeu_ps(w + p * 16, a0);
        _mm256_storeu_ps(w + p * 16 + 8, a1);
    }
}

const qk_gptq_ops qk_x86_avx2_gptq = {qk_x86_avx2_chol_rows, inv_cols, sub16};

#endif
