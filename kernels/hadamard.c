/* hadamard.c - the fast Walsh-Hadamard transform (see hadamard.h): the
 * scalar reference.  The butterfly (a, b) -> (a + b, a - b) over strides
 * 1, 2, 4, ... is x @ H for Sylvester's H, whose row r, column c is
 * (-1)^popcount(r & c). */
#include "kernels/hadamard.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* In place on v[0..n): the butterflies in T's arithmetic. */
#define FWHT(name, T)                                                                              \
    static void name(T *v, int n)                                                                  \
    {                                                                                              \
        for (int h = 1; h < n; h *= 2)                                                             \
            for (int i = 0; i < n; i += 2 * h)                                                     \
                for (int j = i; j < i + h; j++) {                                                  \
                    const T a = v[j], b = v[j + h];                                                \
                    v[j] = a + b;                                                                  \
                    v[j + h] = a - b;                                                              \
                }                                                                                  \
    }
FWHT(fwht_d, double)
FWHT(fwht_f, float)

int qk_hadamard_rows_f64(float *x, int64_t n_rows, int64_t cols, int64_t stride, int n)
{
    double buf[1024], *v = n <= 1024 ? buf : malloc((size_t)n * sizeof *v);
    if (!v)
        return -1;
    const double s = sqrt((double)n);
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t b = 0; b + n <= cols; b += n) {
            float *p = x + r * stride + b;
            for (int i = 0; i < n; i++)
                v[i] = p[i];
            fwht_d(v, n);
            for (int i = 0; i < n; i++)
                p[i] = (float)(v[i] / s);
        }
    if (v != buf)
        free(v);
    return 0;
}

void qk_hadamard_rows_f32(float *x, int64_t n_rows, int64_t cols, int64_t stride, int n)
{
    const float s = (float)sqrt((double)n);
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t b = 0; b + n <= cols; b += n) {
            float *p = x + r * stride + b;
            fwht_f(p, n);
            for (int i = 0; i < n; i++)
                p[i] /= s;
        }
}

int qk_hadamard_cols_f64(float *x, int64_t rows, int64_t cols, int n)
{
    double *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return -1;
    const double s = sqrt((double)n);
    for (int64_t b = 0; b + n <= rows; b += n)
        for (int64_t c = 0; c < cols; c++) {
            for (int i = 0; i < n; i++)
                v[i] = x[(b + i) * cols + c];
            fwht_d(v, n);
            for (int i = 0; i < n; i++)
                x[(b + i) * cols + c] = (float)(v[i] / s);
        }
    free(v);
    return 0;
}

void qk_hadamard_matrix(double *h, int n)
{
    for (int r = 0; r < n; r++)
        for (int c = 0; c < n; c++)
            h[(size_t)r * n + c] = __builtin_popcount((unsigned)(r & c)) & 1 ? -1.0 : 1.0;
}

bool qk_hadamard_is_sylvester(const double *h, int n)
{
    for (int r = 0; r < n; r++)
        for (int c = 0; c < n; c++)
            if (h[(size_t)r * n + c] != (__builtin_popcount((unsigned)(r & c)) & 1 ? -1.0 : 1.0))
                return false;
    return true;
}
