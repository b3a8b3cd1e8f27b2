/* avx512_gram.c - the outer-product sums of kernels/gram.h with AVX-512:
 * eight rows of s at a time against 16 columns (two registers of 8 doubles
 * a row, 16 registers of sums) while the activation rows stream past; the
 * eight rows' values of every activation row converted to double once per
 * row block (so each broadcast is a load), the 16 columns converted as they
 * stream.  The first block of a row block starts at its first row's
 * diagonal and masks each row's lanes left of its own; the last masks the
 * columns past d.  The activation rows come in chunks small enough to stay
 * in L2 while all the row blocks pass over them (streamed whole for each
 * row block, they came from memory: half the speed).  One fused multiply-add per element and activation row,
 * in their order (exact products, so the bits of the scalar reference);
 * the lower triangle is neither read nor written. */
#include "kernels/x86/simd_common.h"

#include <stdlib.h>

#include "kernels/gram.h"
#include "kernels/x86/x86.h"

#ifdef QK_X86

/* s rows i .. i+R-1, columns [j, j + 16) where lanes of m are set (each
 * row r further limited to j + lane >= i + r when diag); xr holds the rows'
 * values of the n activation rows as doubles, 8 a row. */
QK_TARGET_AVX512 static inline __attribute__((always_inline)) void
block(double *s, int64_t d, const float *x, const double *xr, int64_t n, int64_t i, const int R, int64_t j, __mmask16 m,
      bool diag)
{
    __m512d a[8][2];
    __mmask8 k[8][2];
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
        const __mmask16 mr = diag ? (__mmask16)(m & (0xFFFFu << r)) : m;
        k[r][0] = (__mmask8)(mr & 0xFF), k[r][1] = (__mmask8)(mr >> 8);
        a[r][0] = _mm512_maskz_loadu_pd(k[r][0], s + (i + r) * d + j);
        a[r][1] = _mm512_maskz_loadu_pd(k[r][1], s + (i + r) * d + j + 8);
    }
    for (int64_t t = 0; t < n; t++) {
        const __m512 xf = _mm512_maskz_loadu_ps(m, x + t * d + j);
        const __m512d v0 = _mm512_cvtps_pd(_mm512_castps512_ps256(xf));
        const __m512d v1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(xf), 1)));
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
            const __m512d b = _mm512_set1_pd(xr[t * 8 + r]);
            a[r][0] = _mm512_fmadd_pd(b, v0, a[r][0]);
            a[r][1] = _mm512_fmadd_pd(b, v1, a[r][1]);
        }
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
        _mm512_mask_storeu_pd(s + (i + r) * d + j, k[r][0], a[r][0]);
        _mm512_mask_storeu_pd(s + (i + r) * d + j + 8, k[r][1], a[r][1]);
    }
}

/* Rows i .. i+R-1 (R <= 8), every column from row i's diagonal on. */
QK_TARGET_AVX512 static inline __attribute__((always_inline)) void rows(double *s, int64_t d, const float *x,
                                                                        const double *xr, int64_t n, int64_t i, const int R)
{
    for (int64_t j = i; j < d; j += 16) {
        const __mmask16 m = d - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (d - j)) - 1);
        if (j == i)
            block(s, d, x, xr, n, i, R, j, m, true);
        else
            block(s, d, x, xr, n, i, R, j, m, false);
    }
}

QK_TARGET_AVX512 void qk_x86_avx512_gram(double *s, int64_t d, const float *x, int64_t n, int64_t i0, int64_t i1)
{
    /* activation rows in chunks that stay in a core's L2 (about 1.5 MB) while every row block
     * sweeps them; each element still adds the rows in their order */
    const int64_t per = d > 0 ? (int64_t)(1536 * 1024) / (d * 4) : 1, tc = per < 16 ? 16 : per;
    double *xr = malloc((size_t)tc * 8 * sizeof *xr);
    if (!xr) { /* the AVX2 kernel needs no scratch */
        qk_x86_avx2_gram(s, d, x, n, i0, i1);
        return;
    }
    for (int64_t t0 = 0; t0 < n; t0 += tc) {
        const int64_t nt = n - t0 < tc ? n - t0 : tc;
        const float *xc = x + t0 * d;
        for (int64_t i = i0; i < i1; i += 8) {
            const int R = i1 - i < 8 ? (int)(i1 - i) : 8;
            for (int64_t t = 0; t < nt; t++)
                for (int r = 0; r < 8; r++)
                    xr[t * 8 + r] = r < R ? (double)xc[t * d + i + r] : 0.0;
            switch (R) {
            case 8: rows(s, d, xc, xr, nt, i, 8); break;
            case 7: rows(s, d, xc, xr, nt, i, 7); break;
            case 6: rows(s, d, xc, xr, nt, i, 6); break;
            case 5: rows(s, d, xc, xr, nt, i, 5); break;
            case 4: rows(s, d, xc, xr, nt, i, 4); break;
            case 3: rows(s, d, xc, xr, nt, i, 3); break;
            case 2: rows(s, d, xc, xr, nt, i, 2); break;
            default: rows(s, d, xc, xr, nt, i, 1); break;
            }
        }
    }
    free(xr);
}

#endif
