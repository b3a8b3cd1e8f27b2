/* test_gptq.c - lib/quant/gptq.h on a synthetic layer whose inputs are
 * correlated (as a transformer's are):
 * - for every type with a grid, GPTQ's output error ||(W - Q) X^T||^2 is
 *   well below that of the type's own round-to-nearest encoder given the
 *   same importance (diag H: what an imatrix holds), with and without
 *   act-order;
 * - the Hessian sums do not depend on how the rows are batched, nor on the
 *   CPU level (kernels/gram.h), nor do the factors' and the feedback's loops
 *   (kernels/gptq_ops.h) on the level or how the work is cut; the bytes do
 *   not depend on the thread count;
 * - a column whose input is always zero, and a type without a grid. */
#include <math.h>
#include <string.h>

#include "kernels/cpu.h"
#include "kernels/gptq_ops.h"
#include "kernels/gram.h"
#include "kernels/scaled.h"
#include "kernels/types.h"
#include "lib/quant/gptq.h"
#include "tests/testutil.h"

#define R 48
#define C 512
#define N 1024

static float X[N * C], W[R * C];

static void make_layer(void)
{
    static float mix[16 * C];
    uint64_t s = 12345;
    for (int i = 0; i < 16 * C; i++)
        mix[i] = tu_gauss(&s);
    /* x = 16 latent factors mixed into C columns, plus noise, a few loud channels */
    for (int t = 0; t < N; t++) {
        float z[16];
        for (int k = 0; k < 16; k++)
            z[k] = tu_gauss(&s);
        for (int c = 0; c < C; c++) {
            float v = 0.3f * tu_gauss(&s);
            for (int k = 0; k < 16; k++)
                v += z[k] * mix[k * C + c] * 0.25f;
            X[t * C + c] = c % 61 == 0 ? 6.0f * v : c == 7 ? 0.0f : v;
        }
    }
    for (int i = 0; i < R * C; i++)
        W[i] = 0.05f * tu_gauss(&s);
}

/* ||(W - Q) X^T||^2 for the decoded Q: sum over rows of d S d^T, d = w - q. */
static double out_err(const uint8_t *q, int type, const qk_hess *h)
{
    static float dq[R * C];
    qk_type_get(type)->to_float(q, dq, R * C);
    double e = 0;
    for (int r = 0; r < R; r++) {
        double d[C];
        for (int c = 0; c < C; c++)
            d[c] = (double)W[r * C + c] - dq[r * C + c];
        for (int i = 0; i < C; i++) {
            double s = 0;
            for (int j = i + 1; j < C; j++)
                s += d[j] * h->s[i * C + j];
            e += d[i] * (d[i] * h->s[i * C + i] + 2 * s);
        }
    }
    return e;
}

Test(gptq, beats_round_to_nearest_on_every_grid_type, .timeout = 120)
{
    make_layer();
    qk_hess h;
    qk_err err = {0};
    cr_assert_eq(qk_hess_init(&h, C, &err), 0);
    qk_hess_add(&h, X, N, 2);
    float imp[C];
    for (int c = 0; c < C; c++)
        imp[c] = (float)(h.s[c * C + c] / N);
    qk_gptq_factor f[2];
    for (int act = 0; act < 2; act++) {
        const qk_gptq_opts o = {.damp = 0.01, .act_order = act, .nthreads = 2};
        cr_assert_eq(qk_gptq_factor_make(&f[act], &h, &o, &err), 0, "%s", err.msg);
        cr_assert_eq(f[act].imp[11], imp[11]);
    }
    static const int types[] = {QK_Q4_0, QK_Q4_1, QK_Q5_0, QK_Q5_1, QK_Q8_0, QK_Q2_K,
                                QK_Q3_K, QK_Q4_K, QK_Q5_K, QK_Q6_K, QK_IQ4_NL, QK_IQ4_XS};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const int t = types[i];
        const size_t bytes = qk_row_size(t, C) * R;
        uint8_t *rtn = malloc(bytes), *g = malloc(bytes), *g2 = malloc(bytes);
        qk_type_get(t)->quantize(W, rtn, R, C, imp);
        const double e_rtn = out_err(rtn, t, &h);
        for (int act = 0; act < 2; act++) {
            double loss;
            cr_assert_eq(qk_gptq_quantize(W, R, C, t, &f[act], 2, g, &loss, &err), 0, "%s", err.msg);
            const double e = out_err(g, t, &h);
            cr_log_info("%-7s act_order %d: output error %.4g, round to nearest %.4g (%.2f)",
                        qk_type_get(t)->name, act, e, e_rtn, e / e_rtn);
            cr_assert_lt(e, 0.8 * e_rtn, "%s act_order %d: %g vs %g", qk_type_get(t)->name, act, e, e_rtn);
            cr_assert(loss > 0 && isfinite(loss));
            /* the same bytes with another thread count */
            cr_assert_eq(qk_gptq_quantize(W, R, C, t, &f[act], 3, g2, NULL, &err), 0);
            cr_assert(!memcmp(g, g2, bytes), "%s: bytes depend on the threads", qk_type_get(t)->name);
        }
        free(rtn), free(g), free(g2);
    }
    qk_gptq_factor_free(&f[0]);
    qk_gptq_factor_free(&f[1]);
    qk_hess_free(&h);
}

Test(gptq, hessian_sums_do_not_depend_on_batching)
{
    make_layer();
    qk_hess a, b;
    qk_err err = {0};
    cr_assert_eq(qk_hess_init(&a, C, &err), 0);
    cr_assert_eq(qk_hess_init(&b, C, &err), 0);
    qk_hess_add(&a, X, N, 1);
    for (int t = 0; t < N; t += 100)
        qk_hess_add(&b, X + (size_t)t * C, t + 100 < N ? 100 : N - t, 3);
    cr_assert_eq(a.n, b.n);
    for (int i = 0; i < C; i++)
        cr_assert(!memcmp(a.s + i * C + i, b.s + i * C + i, (size_t)(C - i) * sizeof(double)), "row %d", i);
    qk_hess_free(&a);
    qk_hess_free(&b);
}

Test(gptq, dead_inputs_and_unsupported_types)
{
    make_layer();
    qk_hess h;
    qk_err err = {0};
    cr_assert_eq(qk_hess_init(&h, C, &err), 0);
    qk_hess_add(&h, X, N, 1);
    const size_t bytes = qk_row_size(QK_Q4_K, C) * R;
    uint8_t *q = malloc(bytes);
    const qk_gptq_opts o = {.damp = 0.01, .act_order = true, .nthreads = 1};
    qk_gptq_factor f;
    cr_assert_eq(qk_gptq_factor_make(&f, &h, &o, &err), 0, "%s", err.msg);
    cr_assert(f.dead[7] && !f.dead[8]);
    cr_assert_eq(qk_gptq_quantize(W, R, C, QK_Q4_K, &f, 1, q, NULL, &err), 0, "%s", err.msg);
    static float d[R * C];
    qk_type_get(QK_Q4_K)->to_float(q, d, R * C);
    for (int i = 0; i < R * C; i++)
        cr_assert(isfinite(d[i]));
    /* column 7 never sees an input: its weights go to the grid value nearest 0 */
    for (int r = 0; r < R; r++)
        cr_assert_lt(fabsf(d[r * C + 7]), 0.05f);
    cr_assert_eq(qk_gptq_quantize(W, R, C, QK_IQ2_XXS, &f, 1, q, NULL, &err), 2);
    cr_assert_eq(qk_gptq_quantize(W, R, C - 32, QK_Q4_K, &f, 1, q, NULL, &err), 2);
    qk_gptq_factor_free(&f);
    qk_hess empty;
    cr_assert_eq(qk_hess_init(&empty, C, &err), 0);
    cr_assert_eq(qk_gptq_factor_make(&f, &empty, &o, &err), 2);
    qk_hess_free(&empty);
    free(q);
    qk_hess_free(&h);
}

Test(gptq, outer_product_sums_equal_at_every_level)
{
    uint64_t sd = 5;
    static float x[40 * 133];
    for (int i = 0; i < 40 * 133; i++)
        x[i] = tu_gauss(&sd) * (i % 29 == 0 ? 1e4f : 1.0f);
    const int dims[] = {133, 64, 7};
    for (int di = 0; di < 3; di++) {
        const int64_t d = dims[di];
        double *ref = calloc((size_t)(d * d), sizeof *ref), *got = calloc((size_t)(d * d), sizeof *got);
        qk_gram_kernel_at(QK_CPU_SCALAR)(ref, d, x, 40, 0, d);
        /* in row ranges of 5 and of 19 (not the kernels' 4 or 8) and two batches of rows */
        for (int level = 1; level <= (int)qk_cpu_supported(); level++)
            for (int64_t step = 5; step <= 19; step += 14) {
                memset(got, 0, (size_t)(d * d) * sizeof *got);
                for (int64_t i0 = 0; i0 < d; i0 += step) {
                    const int64_t i1 = i0 + step < d ? i0 + step : d;
                    qk_gram_kernel_at(level)(got, d, x, 17, i0, i1);
                    qk_gram_kernel_at(level)(got, d, x + 17 * d, 23, i0, i1);
                }
                for (int64_t i = 0; i < d; i++)
                    cr_assert(!memcmp(ref + i * d + i, got + i * d + i, (size_t)(d - i) * sizeof *ref),
                              "level %s, d %lld, rows by %lld, row %lld", qk_cpu_level_name(level), (long long)d,
                              (long long)step, (long long)i);
            }
        free(ref), free(got);
    }
}

/* The static integer grid (qk-quant --to ct-w4a16 --method gptq): with the int4 group-128 scales of
 * the scheme's own round to nearest fixed beforehand, as llm-compressor's observer fixes them,
 * GPTQ's levels stay on that grid (value (q - z) s with q in -8..7), its output error is well below
 * round to nearest's on the same scales, and a diagonal Hessian (no correlation to exploit) gives
 * round to nearest's levels exactly. */
Test(gptq, static_int_grid, .timeout = 120)
{
    make_layer();
    const qk_scheme *sch = qk_scheme_by_name("int4");
    const qk_scheme_opts so = {.gran = QK_GRAN_GROUP, .group = 128};
    qk_scheme_layout l;
    qk_err err = {0};
    cr_assert_eq(qk_scheme_layout_of(sch, R, C, &so, &l, &err), 0);
    uint8_t *enc = malloc(l.total);
    cr_assert_eq(qk_scheme_encode(sch, W, R, C, &so, enc, &err), 0);
    static float sc[R * C / 128], rtn[R * C], dq[R * C];
    memcpy(sc, enc + l.scales_off, sizeof sc);
    cr_assert_eq(qk_scheme_decode(sch, enc, R, C, &so, rtn, &err), 0);
    const qk_gptq_igrid g = {.group = 128, .lo = -8, .hi = 7, .scale = sc};
    qk_hess h, d;
    cr_assert_eq(qk_hess_init(&h, C, &err), 0);
    cr_assert_eq(qk_hess_init(&d, C, &err), 0);
    qk_hess_add(&h, X, N, 2);
    for (int c = 0; c < C; c++)
        d.s[c * C + c] = 1.0 + c % 5;
    d.n = 1;
    static int8_t q[R * C], q3[R * C];
    for (int act = 0; act < 2; act++) {
        const qk_gptq_opts o = {.damp = 0.01, .act_order = act, .nthreads = 2};
        qk_gptq_factor f, fd;
        cr_assert_eq(qk_gptq_factor_make(&f, &h, &o, &err), 0, "%s", err.msg);
        double loss;
        cr_assert_eq(qk_gptq_quantize_int(W, R, C, &g, &f, 2, q, dq, &loss, &err), 0, "%s", err.msg);
        double e = 0, e_rtn = 0;
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) {
                const float s = sc[r * (C / 128) + c / 128];
                cr_assert(q[r * C + c] >= -8 && q[r * C + c] <= 7);
                cr_assert_eq(dq[r * C + c], (float)q[r * C + c] * s);
            }
        /* output errors through the sums S = sum x x^T (upper triangle) */
        for (int pass = 0; pass < 2; pass++)
            for (int r = 0; r < R; r++) {
                double dd[C], t = 0;
                for (int c = 0; c < C; c++)
                    dd[c] = (double)W[r * C + c] - (pass ? rtn : dq)[r * C + c];
                for (int i = 0; i < C; i++) {
                    double s = 0;
                    for (int j = i + 1; j < C; j++)
                        s += dd[j] * h.s[i * C + j];
                    t += dd[i] * (dd[i] * h.s[i * C + i] + 2 * s);
                }
                *(pass ? &e_rtn : &e) += t;
            }
        cr_log_info("int4 g128 static grid, act_order %d: output error %.4g, round to nearest %.4g (%.2f)", act, e,
                    e_rtn, e / e_rtn);
        cr_assert_lt(e, 0.8 * e_rtn);
        cr_assert_eq(qk_gptq_quantize_int(W, R, C, &g, &f, 3, q3, NULL, NULL, &err), 0);
        cr_assert(!memcmp(q, q3, sizeof q), "levels depend on the threads");
        cr_assert_eq(qk_gptq_factor_make(&fd, &d, &o, &err), 0, "%s", err.msg);
        cr_assert_eq(qk_gptq_quantize_int(W, R, C, &g, &fd, 2, q, dq, NULL, &err), 0);
        cr_assert(!memcmp(dq, rtn, sizeof rtn), "a diagonal Hessian is not round to nearest");
        qk_gptq_factor_free(&f);
        qk_gptq_factor_free(&fd);
    }
    qk_hess_free(&h);
    qk_hess_free(&d);
    free(enc);
}

/* V (rows from the bottom up, each row's diagonal after its columns) with the rows cut into
 * blocks of `blk` and the block's columns right of it done `item` rows per call */
static void chol_by(const qk_gptq_ops *ops, double *a, int64_t n, int64_t blk, int64_t item)
{
    for (int64_t r1 = n; r1 > 0; r1 -= blk) {
        const int64_t r0 = r1 > blk ? r1 - blk : 0;
        for (int64_t r = r0; r < r1 && r1 < n; r += item)
            ops->chol_rows(a, n, r, r + item < r1 ? r + item : r1, r1, n);
        for (int64_t r = r1 - 1; r >= r0; r--) {
            ops->chol_rows(a, n, r, r + 1, r + 1, r1);
            double *vr = a + r * n;
            vr[r] = sqrt(vr[r] - qk_gptq_dot4(vr + r + 1, vr + r + 1, n - r - 1));
        }
    }
}

Test(gptq, factor_and_feedback_loops_equal_at_every_level)
{
    enum { n = 75, T = 200 };
    uint64_t sd = 9;
    static float x[T * n];
    static double h[n * n], ref[n * n], got[n * n], uref[n * n], p[n * 32];
    for (int i = 0; i < T * n; i++)
        x[i] = tu_gauss(&sd) + (i % n == 3 ? 2.0f * x[i - 3] : 0.0f);
    memset(h, 0, sizeof h);
    qk_gram_kernel_at(QK_CPU_SCALAR)(h, n, x, T, 0, n);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            h[i * n + j] = h[j * n + i];
    for (int i = 0; i < n; i++)
        h[i * n + i] += 1.0;
    const qk_gptq_ops *r = qk_gptq_ops_at(QK_CPU_SCALAR);
    memcpy(ref, h, sizeof h);
    chol_by(r, ref, n, 1, 1);
    /* V V^T = H: the loops make a Cholesky factor */
    for (int i = 0; i < n; i += 7)
        for (int j = i; j < n; j += 5) {
            double s = 0;
            for (int m = j; m < n; m++)
                s += ref[i * n + m] * ref[j * n + m];
            cr_assert(fabs(s - h[i * n + j]) < 1e-9 * h[j * n + j], "V V^T at %d %d", i, j);
        }
    r->inv_cols(ref, n, uref, 0, n);
    for (int i = 0; i < n; i += 3) /* U V = I */
        for (int j = i; j < n; j++) {
            double s = 0;
            for (int m = i; m <= j; m++)
                s += uref[i * n + m] * ref[m * n + j];
            cr_assert(fabs(s - (i == j)) < 1e-9, "U V at %d %d: %g", i, j, s);
        }
    static float w[40 * 16], wref[40 * 16], u[50 * 60], e[37 * 16];
    for (int i = 0; i < 50 * 60; i++)
        u[i] = tu_gauss(&sd);
    for (int i = 0; i < 37 * 16; i++)
        e[i] = tu_gauss(&sd);
    for (int i = 0; i < 40 * 16; i++)
        wref[i] = tu_gauss(&sd);
    memcpy(w, wref, sizeof w);
    r->sub16(wref, u + 3, 60, e, 37, 29);
    for (int level = 1; level <= (int)qk_cpu_supported(); level++) {
        const qk_gptq_ops *o = qk_gptq_ops_at(level);
        const char *name = qk_cpu_level_name(level);
        static const int64_t cuts[][2] = {{16, 8}, {16, 5}, {75, 13}, {4, 4}};
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
            memcpy(got, h, sizeof h);
            chol_by(o, got, n, cuts[c][0], cuts[c][1]);
            for (int i = 0; i < n; i++)
                cr_assert(!memcmp(ref + i * n + i, got + i * n + i, (size_t)(n - i) * sizeof *ref),
                          "V, level %s, blocks %lld of %lld, row %d", name, (long long)cuts[c][0],
                          (long long)cuts[c][1], i);
        }
        static const int64_t widths[] = {32, 13, 8, 4, 1};
        for (size_t k = 0; k < sizeof widths / sizeof widths[0]; k++)
            for (int64_t j0 = 0; j0 < n; j0 += widths[k]) {
                const int64_t wd = n - j0 < widths[k] ? n - j0 : widths[k];
                o->inv_cols(ref, n, p, j0, wd);
                for (int64_t i = 0; i < n; i++)
                    for (int64_t c = 0; c < wd; c++)
                        cr_assert(!memcmp(&p[i * wd + c], &uref[i * n + j0 + c], sizeof *p),
                                  "U, level %s, panel %lld + %lld, element %lld %lld", name, (long long)j0,
                                  (long long)wd, (long long)i, (long long)(j0 + c));
            }
        static float wg[40 * 16];
        memcpy(wg, w, sizeof w);
        o->sub16(wg, u + 3, 60, e, 37, 29);
        cr_assert(!memcmp(wg, wref, sizeof w), "feedback, level %s", name);
    }
}
