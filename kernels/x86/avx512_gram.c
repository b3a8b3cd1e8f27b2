/* avx512_gram.c - the outer-product sums of kernels/gram.h with AVX-512:
 * four rows of s at a time, 4 x 32 doubles of them in registers while the
 * activation rows stream past, one fused multiply-add per element and row
 * (exact products, so the bits of the scalar reference). */
#include "kernels/x86/simd_common.h"

#include "kernels/gram.h"

#ifdef QK_X86

/* s rows i .. i+3, columns [j0, j0 + 8 C) (as avx2_gram.c's block4x16) */
QK_TARGET_AVX512 static inline __attribute__((always_inline)) void block4(double *s, int64_t d, const float *x,
                                                                          int64_t n, int64_t i, int64_t j0,
                                                                          const int C)
{
    __m512d a[4][4];
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < C; c++)
            a[r][c] = _mm512_loadu_pd(s + (i + r) * d + j0 + 8 * c);
    for (int64_t t = 0; t < n; t++) {
        const float *xt = x + t * d;
        __m512d v[4];
        for (int c = 0; c < C; c++)
            v[c] = _mm512_cvtps_pd(_mm256_loadu_ps(xt + j0 + 8 * c));
        for (int r = 0; r < 4; r++) {
            const __m512d b = _mm512_set1_pd((double)xt[i + r]);
            for (int c = 0; c < C; c++)
                a[r][c] = _mm512_fmadd_pd(b, v[c], a[r][c]);
        }
    }
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < C; c++)
            _mm512_storeu_pd(s + (i + r) * d + j0 + 8 * c, a[r][c]);
}

QK_TARGET_AVX512 void qk_x86_avx512_gram(double *s, int64_t d, const float *x, int64_t n, int64_t i0, int64_t i1)
{
    int64_t i = i0;
    for (; i + 4 <= i1; i += 4) {
        /* the 4 rows' diagonal corner first, one row at a time, up to a multiple of 8 past i+3 */
        int64_t j = i + 4 + ((8 - (i + 4) % 8) % 8);
        if (j > d)
            j = d;
        for (int r = 0; r < 4; r++) {
            const int64_t row = i + r;
            for (int64_t t = 0; t < n; t++) {
                const float *xt = x + t * d;
                const double xr = xt[row];
                for (int64_t k = row; k < j; k++)
                    s[row * d + k] += xr * (double)xt[k];
            }
        }
        for (; j + 32 <= d; j += 32)
            block4(s, d, x, n, i, j, 4);
        for (; j + 8 <= d; j += 8)
            block4(s, d, x, n, i, j, 1);
        for (int r = 0; r < 4; r++)
            for (int64_t t = 0; t < n; t++) {
                const float *xt = x + t * d;
                const double xr = xt[i + r];
                for (int64_t k = j; k < d; k++)
                    s[(i + r) * d + k] += xr * (double)xt[k];
            }
    }
    for (; i < i1; i++)
        for (int64_t t = 0; t < n; t++) {
            const float *xt = x + t * d;
            const double xi = xt[i];
            for (int64_t k = i; k < d; k++)
                s[i * d + k] += xi * (double)xt[k];
        }
}

#endif
