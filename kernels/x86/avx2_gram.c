/* avx2_gram.c - the outer-product sums of kernels/gram.h with AVX2: four
 * rows of s at a time, 4 x 4 doubles of them in registers while the
 * activation rows stream past, one fused multiply-add per element and row
 * (exact products, so the bits of the scalar reference). */
#include "kernels/x86/simd_common.h"

#include "kernels/gram.h"

#ifdef QK_X86

/* s rows i .. i+3 (all < d), columns [j0, j0 + 16) (all >= i+3 are used; those
 * left of a row's diagonal are computed but belong to the unused triangle) */
QK_TARGET_AVX2 static void block4x16(double *s, int64_t d, const float *x, int64_t n, int64_t i, int64_t j0)
{
    __m256d a[4][4];
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++)
            a[r][c] = _mm256_loadu_pd(s + (i + r) * d + j0 + 4 * c);
    for (int64_t t = 0; t < n; t++) {
        const float *xt = x + t * d;
        const __m256d v0 = _mm256_cvtps_pd(_mm_loadu_ps(xt + j0)), v1 = _mm256_cvtps_pd(_mm_loadu_ps(xt + j0 + 4));
        const __m256d v2 = _mm256_cvtps_pd(_mm_loadu_ps(xt + j0 + 8)), v3 = _mm256_cvtps_pd(_mm_loadu_ps(xt + j0 + 12));
        for (int r = 0; r < 4; r++) {
            const __m256d b = _mm256_set1_pd((double)xt[i + r]);
            a[r][0] = _mm256_fmadd_pd(b, v0, a[r][0]);
            a[r][1] = _mm256_fmadd_pd(b, v1, a[r][1]);
            a[r][2] = _mm256_fmadd_pd(b, v2, a[r][2]);
            a[r][3] = _mm256_fmadd_pd(b, v3, a[r][3]);
        }
    }
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++)
            _mm256_storeu_pd(s + (i + r) * d + j0 + 4 * c, a[r][c]);
}

/* One row of s, columns [j0, d), the scalar way (edges). */
static void row_tail(double *s, int64_t d, const float *x, int64_t n, int64_t i, int64_t j0)
{
    for (int64_t t = 0; t < n; t++) {
        const float *xt = x + t * d;
        const double xi = xt[i];
        for (int64_t j = j0; j < d; j++)
            s[i * d + j] += xi * (double)xt[j];
    }
}

QK_TARGET_AVX2 void qk_x86_avx2_gram(double *s, int64_t d, const float *x, int64_t n, int64_t i0, int64_t i1)
{
    int64_t i = i0;
    for (; i + 4 <= i1; i += 4) {
        /* the 4 rows' diagonal corner first, one row at a time, up to a multiple of 16 past i+3 */
        int64_t j = i + 4 + ((16 - (i + 4) % 16) % 16);
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
        for (; j + 16 <= d; j += 16)
            block4x16(s, d, x, n, i, j);
        for (int r = 0; r < 4 && j < d; r++)
            row_tail(s, d, x, n, i + r, j);
    }
    for (; i < i1; i++)
        row_tail(s, d, x, n, i, i);
}

#endif
