/* avx2_f32.c - F32 x F32 products at the AVX2 level with the scalar
 * reference's arithmetic (kernels/float.c, f32_vec_dot: each product rounded
 * to float, added to a double sum in element order, the sum rounded to
 * float), so they return its bits.  The lanes run across rows, not along a
 * row: a packed group holds 8 rows' element j side by side (32 bytes per j);
 * for each activation row the 8 products of element j are one
 * _mm256_mul_ps, their doubles two _mm256_cvtps_pd added to two 4-lane
 * double sums, lane k being row k's sum in element order.  Three activation
 * rows share each load of the weights.  (Rows are not summed in pieces, so
 * no reduction order changes: the speed comes from 8 to 24 independent sums
 * in flight instead of one.) */
#include "kernels/x86/simd_common.h"

#include <string.h>

#ifdef QK_X86

static size_t f32_pack_size(int64_t n) { return (size_t)n * 32; }

static void f32_pack(int64_t n, const void *x, size_t xs, void *dst)
{
    for (int64_t j = 0; j < n; j++)
        for (int r = 0; r < 8; r++)
            memcpy((uint8_t *)dst + 32 * j + 4 * r, (const uint8_t *)x + (size_t)r * xs + 4 * j, 4);
}

#define TOKS 3 /* activation rows per pass over a group */

/* One packed group of 8 rows against q <= 3 activation rows y[k]: o[k][r]. */
QK_TARGET_AVX2 static void group_pass(int64_t n, const float *g, const float *const y[TOKS], int q,
                                      float o[TOKS][8])
{
    __m256d lo0 = _mm256_setzero_pd(), hi0 = lo0, lo1 = lo0, hi1 = lo0, lo2 = lo0, hi2 = lo0;
    for (int64_t j = 0; j < n; j++) {
        const __m256 w = _mm256_loadu_ps(g + 8 * j);
        __m256 p = _mm256_mul_ps(w, _mm256_set1_ps(y[0][j]));
        lo0 = _mm256_add_pd(lo0, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
        hi0 = _mm256_add_pd(hi0, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
        if (q > 1) {
            p = _mm256_mul_ps(w, _mm256_set1_ps(y[1][j]));
            lo1 = _mm256_add_pd(lo1, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
            hi1 = _mm256_add_pd(hi1, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
        }
        if (q > 2) {
            p = _mm256_mul_ps(w, _mm256_set1_ps(y[2][j]));
            lo2 = _mm256_add_pd(lo2, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
            hi2 = _mm256_add_pd(hi2, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
        }
    }
    const __m256d sum[TOKS][2] = {{lo0, hi0}, {lo1, hi1}, {lo2, hi2}};
    for (int k = 0; k < q; k++) {
        _mm_storeu_ps(o[k], _mm256_cvtpd_ps(sum[k][0]));
        _mm_storeu_ps(o[k] + 4, _mm256_cvtpd_ps(sum[k][1]));
    }
}

static void f32_packed_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys, int nt, float *out,
                            size_t ldo)
{
    for (int gi = 0; gi < ng; gi++) {
        const float *g = (const float *)((const uint8_t *)xp + (size_t)gi * f32_pack_size(n));
        for (int t0 = 0; t0 < nt; t0 += TOKS) {
            const int q = nt - t0 < TOKS ? nt - t0 : TOKS;
            const float *yr[TOKS];
            float o[TOKS][8];
            for (int k = 0; k < TOKS; k++)
                yr[k] = (const float *)((const uint8_t *)y + (size_t)(t0 + (k < q ? k : 0)) * ys);
            group_pass(n, g, yr, q, o);
            for (int k = 0; k < q; k++)
                memcpy(out + (size_t)(t0 + k) * ldo + 8 * (size_t)gi, o[k], sizeof o[k]);
        }
    }
}

const qk_pack_ops qk_x86_avx2_packed_f32[] = {
    {.id = QK_F32, .pack_size = f32_pack_size, .pack = f32_pack, .packed_tile = f32_packed_tile,
     .tile_rows = 16, .decode = 1},
    {.id = -1},
};

#endif
