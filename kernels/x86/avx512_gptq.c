/* avx512_gptq.c - GPTQ's loops (kernels/gptq_ops.h) with AVX-512: eight
 * columns of U per register, four such groups sharing the broadcasts of a
 * row of V (four registers per group hold the four partial sums),
 * and one column of the 16-row weight tile per register; the rows of V stay
 * AVX2's (their four partial sums are one AVX2 register).  The reference's
 * operations in its order, so its bits. */
#include "kernels/x86/simd_common.h"

#include <string.h>

#include "kernels/gptq_ops.h"

#ifdef QK_X86

/* Row i (< j0) of the panel, columns [c0, c0 + 8 G), G <= 4. */
QK_TARGET_AVX512 static inline __attribute__((always_inline)) void inv_groups(const double *v, int64_t n, double *p,
                                                                              int64_t j0, int64_t w, int64_t i,
                                                                              int64_t c0, const int G)
{
    const double *vi = v + i * n;
    const int64_t nm = (j0 + c0 - i) & ~(int64_t)3;
    __m512d acc[4][4];
    for (int g = 0; g < G; g++)
        for (int k = 0; k < 4; k++)
            acc[g][k] = _mm512_setzero_pd();
    for (int64_t m = 0; m < nm; m += 4)
        for (int k = 0; k < 4; k++) {
            const __m512d x = _mm512_set1_pd(vi[i + 1 + m + k]);
            const double *pr = p + (i + 1 + m + k) * w + c0;
            for (int g = 0; g < G; g++)
                acc[g][k] = _mm512_add_pd(acc[g][k], _mm512_mul_pd(x, _mm512_loadu_pd(pr + 8 * g)));
        }
    for (int g = 0; g < G; g++) {
        double s[4][8];
        for (int k = 0; k < 4; k++)
            _mm512_storeu_pd(s[k], acc[g][k]);
        for (int l = 0; l < 8; l++) {
            const int64_t c = c0 + 8 * g + l;
            double t[4] = {s[0][l], s[1][l], s[2][l], s[3][l]};
            p[i * w + c] = qk_x86_gptq_inv_finish(vi, p, w, c, i, j0 + c - i, nm, t);
        }
    }
}

QK_TARGET_AVX512 static void inv_cols(const double *v, int64_t n, double *p, int64_t j0, int64_t w)
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
        for (; c + 32 <= w; c += 32)
            inv_groups(v, n, p, j0, w, i, c, 4);
        for (; c + 16 <= w; c += 16)
            inv_groups(v, n, p, j0, w, i, c, 2);
        for (; c + 8 <= w; c += 8)
            inv_groups(v, n, p, j0, w, i, c, 1);
        for (; c < w; c++) {
            double s[4] = {0, 0, 0, 0};
            p[i * w + c] = qk_x86_gptq_inv_finish(vi, p, w, c, i, j0 + c - i, 0, s);
        }
    }
}

QK_TARGET_AVX512 static void sub16(float *w, const float *u, int64_t ldu, const float *e, int64_t nk, int64_t np)
{
    int64_t p = 0;
    for (; p + 8 <= np; p += 8) {
        __m512 acc[8];
        for (int q = 0; q < 8; q++)
            acc[q] = _mm512_loadu_ps(w + (p + q) * 16);
        for (int64_t k = 0; k < nk; k++) {
            const __m512 ek = _mm512_loadu_ps(e + k * 16);
            for (int q = 0; q < 8; q++)
                acc[q] = _mm512_sub_ps(acc[q], _mm512_mul_ps(_mm512_set1_ps(u[k * ldu + p + q]), ek));
        }
        for (int q = 0; q < 8; q++)
            _mm512_storeu_ps(w + (p + q) * 16, acc[q]);
    }
    for (; p < np; p++) {
        __m512 a = _mm512_loadu_ps(w + p * 16);
        for (int64_t k = 0; k < nk; k++)
            a = _mm512_sub_ps(a, _mm512_mul_ps(_mm512_set1_ps(u[k * ldu + p]), _mm512_loadu_ps(e + k * 16)));
        _mm512_storeu_ps(w + p * 16, a);
    }
}

const qk_gptq_ops qk_x86_avx512_gptq = {qk_x86_avx2_chol_rows, inv_cols, sub16};

#endif
