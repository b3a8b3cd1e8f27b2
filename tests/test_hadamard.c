/* The Walsh-Hadamard transform (kernels/hadamard.h) against its definition:
 * x @ H / sqrt(n) with Sylvester's matrix built as compressed-tensors'
 * deterministic_hadamard_matrix does (H_2n = [[H, H], [H, -H]]), summed in
 * long double and rounded once. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/hadamard.h"

/* Sylvester's construction, literally. */
static double *sylvester(int n)
{
    double *h = malloc((size_t)n * n * sizeof *h);
    h[0] = 1;
    for (int m = 1; m < n; m *= 2)
        for (int r = 0; r < m; r++)
            for (int c = 0; c < m; c++) {
                const double v = h[r * n + c];
                h[r * n + c + m] = v;
                h[(r + m) * n + c] = v;
                h[(r + m) * n + c + m] = -v;
            }
    return h;
}

static float rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return ((float)(*s >> 8) / 16777216.0f - 0.5f) * 8.0f;
}

Test(hadamard, matrix_is_sylvesters)
{
    for (int n = 1; n <= 256; n *= 2) {
        double *h = sylvester(n), *q = malloc((size_t)n * n * sizeof *q);
        qk_hadamard_matrix(q, n);
        cr_assert(memcmp(h, q, (size_t)n * n * sizeof *q) == 0, "n %d", n);
        cr_assert(qk_hadamard_is_sylvester(q, n));
        if (n > 1) {
            q[1] = -q[1];
            cr_assert(!qk_hadamard_is_sylvester(q, n));
        }
        free(h), free(q);
    }
}

/* rows and columns, float64 rule: each result the definition rounded once */
Test(hadamard, rows_and_cols_equal_the_matrix_product)
{
    unsigned s = 1;
    for (int n = 1; n <= 256; n *= 2) {
        const int blocks = 3, cols = n * blocks, rows = 2;
        double *h = sylvester(n);
        float *x = malloc((size_t)rows * cols * sizeof *x), *y = malloc((size_t)rows * cols * sizeof *y);
        for (int i = 0; i < rows * cols; i++)
            x[i] = y[i] = rnd(&s);
        cr_assert_eq(qk_hadamard_rows_f64(y, rows, cols, cols, n), 0);
        for (int r = 0; r < rows; r++)
            for (int b = 0; b < blocks; b++)
                for (int j = 0; j < n; j++) {
                    long double acc = 0;
                    for (int i = 0; i < n; i++)
                        acc += (long double)x[r * cols + b * n + i] * h[i * n + j];
                    const float want = (float)(double)(acc / sqrtl((long double)n));
                    cr_assert_eq(y[r * cols + b * n + j], want, "n %d row %d block %d col %d", n, r, b, j);
                }
        /* the column transform is the row transform of the transpose */
        float *xt = malloc((size_t)rows * cols * sizeof *xt);
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++)
                xt[c * rows + r] = x[r * cols + c];
        cr_assert_eq(qk_hadamard_cols_f64(xt, cols, rows, n), 0);
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++)
                cr_assert_eq(xt[c * rows + r], y[r * cols + c]);
        /* float32 rule: within a few ulp of the definition */
        memcpy(y, x, (size_t)rows * cols * sizeof *y);
        qk_hadamard_rows_f32(y, rows, cols, cols, n);
        for (int r = 0; r < rows; r++)
            for (int j = 0; j < n; j++) {
                long double acc = 0;
                for (int i = 0; i < n; i++)
                    acc += (long double)x[r * cols + i] * h[i * n + j];
                const double want = (double)(acc / sqrtl((long double)n));
                cr_assert(fabs(y[r * cols + j] - want) <= 1e-5 * (1 + fabs(want)) * log2(2.0 * n), "n %d", n);
            }
        free(h), free(x), free(y), free(xt);
    }
}

/* orthonormal: applying it twice gives the input back (H H = n I) */
Test(hadamard, involution)
{
    unsigned s = 7;
    float x[512], y[512];
    for (int i = 0; i < 512; i++)
        x[i] = y[i] = rnd(&s);
    qk_hadamard_rows_f64(y, 1, 512, 512, 512);
    qk_hadamard_rows_f64(y, 1, 512, 512, 512);
    for (int i = 0; i < 512; i++)
        cr_assert(fabsf(y[i] - x[i]) <= 1e-6f * (1 + fabsf(x[i])));
}
