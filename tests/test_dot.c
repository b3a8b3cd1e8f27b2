/* Dot products of every type in the format table that has one.
 *
 * For each type T with a vec_dot (activation type A = T's vec_dot_type):
 * weight rows are the 8 golden input rows (goldens/ggml/input.f32, encoded
 * with imatrix.f32 when T requires an importance matrix) plus Gaussian rows
 * of 1, 3, 7 and 33 blocks and of 16384 columns; activation rows are
 * Gaussian, encoded with A's from_float.  Two checks:
 *
 * (a) kernel accuracy: vec_dot(Wq, Yq) against the f64 dot of the decoded
 *     weight row and the decoded activation row, relative to sum |w_i*y_i|
 *     (see the tolerances below);
 * (b) end-to-end accuracy: NMSE of vec_dot against the f64 dot of the
 *     decoded weight row and the ORIGINAL float activation, over all rows of
 *     the type, each row scaled by 1/(|w| |y|) so that the golden rows of
 *     scale 1e-4 .. 1e3 weigh alike.  Bound 5e-4: ggml's own bound for
 *     whole matrix products in tests/test-quantize-fns.cpp
 *     (MAX_DOT_PRODUCT_ERROR); it measures how much the activation encoding
 *     loses (Q8_x: about 1/127 of the block max per element).
 *
 * A line "TYPE dot nmse=... max_rel=..." is logged per type.  Types are
 * taken from the table, so kernels of other families are checked as they
 * land; a type with a vec_dot but without its encoders is reported skipped.
 */
#include <math.h>
#include <string.h>

#include "tests/testutil.h" /* criterion.h first: parameterized.h after it */
#include "kernels/types.h"
#include <criterion/parameterized.h>

#define G "goldens/ggml/"
#define GROWS 8
#define GCOLS 4096
#define NMSE_MAX 5e-4

/* ---- tolerances of check (a) ------------------------------------------------
 *
 * u = 2^-24 (float rounding).  Measured maxima are over all rows of the
 * test (golden rows and Gaussian rows up to 16384 columns), on x86-64.
 *
 * - F16, BF16: the products of two f16/bf16 values are exact in float and
 *   are summed in float.c's fixed float-dot order (8 lanes, or 32 with a
 *   double tail): one rounding per addition in each lane, n/8 deep plus a
 *   3-level tree, so <= (n/8 + 3) u sum|w y| in the worst case; typical
 *   errors are far smaller.  Bound 1e-7.
 * - F32: one rounding per product too: <= 2u.  Measured 2.5e-8; bound 1.5e-7.
 * - Block types whose kernels sum exact integer products per block (Q4_0,
 *   Q5_0, Q8_0, the K-quants, and by default every other family): only the
 *   per-block float scale products and the running float sum over nb blocks
 *   round.  Worst case about (nb + 16) u (3e-5 for 512 blocks), but the
 *   errors are random and the sum of |w y| is far larger than |sum w y|;
 *   where an affine type subtracts a min term (Q2_K, Q4_K, Q5_K) the two
 *   partial sums may each exceed sum|w y|, multiplying the rounding by a few.
 *   Measured at most 7e-8 over all families; bound 1e-6.
 * - Q4_1 and Q5_1 against Q8_1: the activation block sum s = d*sum(q) is
 *   stored as fp16 (relative error up to 2^-11 = 4.9e-4) and enters as m*s;
 *   |m| sum|y| can exceed sum|(d q + m) y| of the block when w partly
 *   cancels the min.  Measured 6.1e-4; bound 2e-3. */
typedef struct {
    const char *name;
    double tol;
} tolerance;

static const tolerance tolerances[] = {
    {"f32", 1.5e-7}, {"f16", 1e-7}, {"bf16", 1e-7}, {"q4_1", 2e-3}, {"q5_1", 2e-3},
};
#define TOL_DEFAULT 1e-6

static double tolerance_of(const char *name)
{
    for (size_t i = 0; i < sizeof tolerances / sizeof tolerances[0]; i++)
        if (strcmp(tolerances[i].name, name) == 0)
            return tolerances[i].tol;
    return TOL_DEFAULT;
}

/* ---- running statistics of one type --------------------------------------- */

typedef struct {
    double max_rel;    /* check (a): max |dot - ref| / sum|w y| */
    double err2, ref2; /* check (b): sums of squared scaled errors and refs */
    int rows;
} stats;

typedef struct {
    const qk_type_traits *t, *a; /* weight type and activation type */
    uint64_t rng;
    stats st;
} ctx;

/* Why type t cannot be tested here, or NULL. */
static const char *missing_kernel(const qk_type_traits *t)
{
    const qk_type_traits *a = qk_type_get(t->vec_dot_type);
    if (!a)
        return "no activation type";
    if (!t->quantize)
        return "no encoder";
    if (!t->to_float)
        return "no decoder";
    if (!a->from_float)
        return "activation type has no from_float";
    if (!a->to_float)
        return "activation type has no decoder";
    return NULL;
}

/* Encode nrows x ncols weights w, then dot each row with a fresh Gaussian
 * activation row and accumulate the two checks. */
static void dot_rows(ctx *c, const float *w, int64_t nrows, int64_t ncols, const float *imatrix)
{
    const qk_type_traits *t = c->t, *a = c->a;
    const size_t wrow = qk_row_size(t->id, ncols), arow = qk_row_size(a->id, ncols);
    cr_assert(wrow > 0 && arow > 0, "%s: %lld columns", t->name, (long long)ncols);
    uint8_t *wq = malloc(wrow * (size_t)nrows), *yq = malloc(arow);
    float *wd = malloc((size_t)ncols * sizeof(float)), *y = malloc((size_t)ncols * sizeof(float));
    float *yd = malloc((size_t)ncols * sizeof(float));
    cr_assert(wq && yq && wd && y && yd);
    cr_assert_eq(t->quantize(w, wq, nrows, ncols, imatrix), wrow * (size_t)nrows);

    for (int64_t r = 0; r < nrows; r++) {
        const uint8_t *wr = wq + (size_t)r * wrow;
        t->to_float(wr, wd, ncols);
        for (int64_t i = 0; i < ncols; i++)
            y[i] = tu_gauss(&c->rng);
        a->from_float(y, yq, ncols);
        a->to_float(yq, yd, ncols);
        const float dot = t->vec_dot(ncols, wr, yq);

        double ref_a = 0, abs_a = 0, ref_b = 0, ww = 0, yy = 0;
        for (int64_t i = 0; i < ncols; i++) {
            ref_a += (double)wd[i] * yd[i];
            abs_a += fabs((double)wd[i] * yd[i]);
            ref_b += (double)wd[i] * y[i];
            ww += (double)wd[i] * wd[i];
            yy += (double)y[i] * y[i];
        }
        cr_assert(isfinite(dot), "%s row %lld x %lld: dot %g", t->name, (long long)r,
                  (long long)ncols, dot);
        const double err = fabs(dot - ref_a);
        const double rel = abs_a > 0 ? err / abs_a : err;
        if (rel > c->st.max_rel)
            c->st.max_rel = rel;
        if (ww > 0) {
            const double s = 1.0 / sqrt(ww * yy);
            c->st.err2 += (dot - ref_b) * s * (dot - ref_b) * s;
            c->st.ref2 += ref_b * s * ref_b * s;
        }
        c->st.rows++;
    }
    free(wq), free(yq), free(wd), free(y), free(yd);
}

static void gaussian_rows(ctx *c, int64_t nrows, int64_t ncols)
{
    float *w = malloc((size_t)(nrows * ncols) * sizeof(float));
    float *im = malloc((size_t)ncols * sizeof(float));
    cr_assert(w && im);
    for (int64_t i = 0; i < nrows * ncols; i++)
        w[i] = tu_gauss(&c->rng);
    for (int64_t i = 0; i < ncols; i++) /* positive importances around 1 */
        im[i] = (float)(0.25 + 1.5 * tu_uniform(&c->rng));
    dot_rows(c, w, nrows, ncols, c->t->needs_imatrix ? im : NULL);
    free(w), free(im);
}

/* ---- the tests -------------------------------------------------------------- */

/* Every type with a dot product. */
ParameterizedTestParameters(dot, types)
{
    static int ids[QK_TYPE_MAX];
    size_t n = 0;
    for (int id = qk_type_next(-1); id >= 0; id = qk_type_next(id))
        if (qk_type_get(id)->vec_dot)
            ids[n++] = id;
    return cr_make_param_array(int, ids, n);
}

ParameterizedTest(int *id, dot, types)
{
    const qk_type_traits *t = qk_type_get(*id);
    const char *why = missing_kernel(t);
    if (why)
        cr_skip_test("%s: %s", t->name, why);
    ctx c = {.t = t, .a = qk_type_get(t->vec_dot_type), .rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)*id};

    /* the golden rows: scales 1e-4 .. 1e3, zero and constant columns */
    size_t in_n, im_n;
    float *in = tu_read(G "input.f32", &in_n);
    float *im = tu_read(G "imatrix.f32", &im_n);
    cr_assert_eq(in_n, (size_t)GROWS * GCOLS * sizeof(float));
    cr_assert_eq(im_n, (size_t)GCOLS * sizeof(float));
    dot_rows(&c, in, GROWS, GCOLS, t->needs_imatrix ? im : NULL);
    free(in), free(im);

    /* random shapes, in blocks of the type (32 elements for element types) */
    const int64_t unit = t->blck > 1 ? t->blck : 32;
    static const int nblocks[] = {1, 3, 7, 33};
    for (size_t k = 0; k < sizeof nblocks / sizeof nblocks[0]; k++)
        gaussian_rows(&c, 3, nblocks[k] * unit);
    cr_assert_eq(16384 % unit, 0);
    gaussian_rows(&c, 2, 16384);

    const double nmse = c.st.err2 / c.st.ref2;
    cr_log_info("%s dot nmse=%.3g max_rel=%.3g (%d rows)", t->name, nmse, c.st.max_rel, c.st.rows);
    const double tol = tolerance_of(t->name);
    cr_expect(c.st.max_rel <= tol, "%s: vec_dot vs f64 dot of the decoded rows: max rel %.3g > %.3g",
              t->name, c.st.max_rel, tol);
    cr_expect(nmse <= NMSE_MAX, "%s: NMSE vs the float activation %.3g > %.3g", t->name, nmse,
              NMSE_MAX);
}

/* The activation encoders this family provides exist for every activation
 * type in use; types whose dot product cannot be tested yet are listed. */
Test(dot, coverage)
{
    char skipped[1024] = "";
    int tested = 0;
    for (int id = qk_type_next(-1); id >= 0; id = qk_type_next(id)) {
        const qk_type_traits *t = qk_type_get(id);
        if (!t->vec_dot)
            continue;
        const char *why = missing_kernel(t);
        if (why) {
            size_t len = strlen(skipped);
            snprintf(skipped + len, sizeof skipped - len, " %s(%s)", t->name, why);
        } else {
            tested++;
        }
    }
    static const int activations[] = {QK_F32, QK_F16, QK_BF16, QK_Q8_0, QK_Q8_1, QK_Q8_K};
    for (size_t i = 0; i < sizeof activations / sizeof activations[0]; i++) {
        const qk_type_traits *a = qk_type_get(activations[i]);
        cr_expect(a && a->from_float && a->to_float, "activation type %d lacks kernels",
                  activations[i]);
    }
    cr_log_info("dot: %d types tested; skipped:%s", tested, skipped[0] ? skipped : " none");
    cr_expect_geq(tested, 13, "the float, legacy and K-quant dots are all present");
}

/* ---- hand-computed cases, following ggml's generic kernels ------------------ */

static float dot_of(int type, int64_t n, const void *x, const void *y)
{
    const qk_type_traits *t = qk_type_get(type);
    cr_assert(t && t->vec_dot, "type %d has no vec_dot", type);
    return t->vec_dot(n, x, y);
}

/* Q4_0 x Q8_0: w = d*(q-8) with d = 1, low nibbles 10 (w=2), high 9 (w=1);
 * y = 0.5*(j-16).  sum = 0.5*(2*sum_{j<16}(j-16) + sum_{j>=16}(j-16))
 * = 0.5*(2*(-136) + 120) = -76. */
Test(dot, hand_q4_0_q8_0)
{
    uint8_t x[18], y[34];
    x[0] = 0x00, x[1] = 0x3C; /* fp16 1.0 */
    memset(x + 2, 0x9A, 16);
    y[0] = 0x00, y[1] = 0x38; /* fp16 0.5 */
    for (int j = 0; j < 32; j++)
        y[2 + j] = (uint8_t)(int8_t)(j - 16);
    cr_expect_eq(dot_of(QK_Q4_0, 32, x, y), -76.0f);
}

/* Q4_1 x Q8_1: ggml uses the activation's stored block sum s, not the sum of
 * its quants: (dx*dy)*sumi + m*s.  With every level 0, d = 0.5, m = -1 and
 * an activation of quants 1 (sum 32) but s stored as 10, the dot is -10. */
Test(dot, hand_q4_1_uses_stored_s)
{
    uint8_t x[20] = {0x00, 0x38, 0x00, 0xBC}, y[36] = {0x00, 0x3C, 0x00, 0x49}; /* 0.5 -1 | 1 10 */
    memset(y + 4, 1, 32);
    cr_expect_eq(dot_of(QK_Q4_1, 32, x, y), -10.0f);
}

/* Q2_K x Q8_K: the min term comes from the activation's bsums.  Scales
 * 0x21 (scale 1, min 2), d = 1, dmin = 0.5, all levels 0; activation
 * d = 0.25, quants 0 but bsums 16: 0 - (0.25*0.5) * (16*16*2) = -64. */
Test(dot, hand_q2_K_uses_bsums)
{
    uint8_t x[84] = {0}, y[292] = {0};
    memset(x, 0x21, 16);
    x[80] = 0x00, x[81] = 0x3C, x[82] = 0x00, x[83] = 0x38; /* d 1.0, dmin 0.5 */
    const float d = 0.25f;
    memcpy(y, &d, 4);
    for (int j = 0; j < 16; j++)
        y[260 + 2 * j] = 16;
    cr_expect_eq(dot_of(QK_Q2_K, 256, x, y), -64.0f);
}

/* Activation rounding: x = j - 0.5 (j = 1..31) next to a block max of 127
 * (so the step is exactly 1).  All three activation encoders round half to
 * even, q = 2*(j/2): Q8_0 and Q8_1 as llama.cpp's x86 quantize_row_q8_0/
 * q8_1 do (id = 127/amax, _mm256_round_ps), Q8_K as nearest_int does, with
 * d = 1/iscale, iscale = -127/max, and bsums the sums of 16 quants. */
Test(dot, hand_activation_rounding)
{
    float x[256] = {0};
    x[0] = -127.0f;
    for (int j = 1; j < 32; j++)
        x[j] = (float)j - 0.5f;

    uint8_t q80[34], q81[36], q8k[292];
    qk_type_get(QK_Q8_0)->from_float(x, q80, 32);
    qk_type_get(QK_Q8_1)->from_float(x, q81, 32);
    qk_type_get(QK_Q8_K)->from_float(x, q8k, 256);
    cr_expect(q80[0] == 0x00 && q80[1] == 0x3C, "q8_0 d = 1.0");
    cr_expect_eq((int8_t)q80[2], -127);
    int sum = -127;
    for (int j = 1; j < 32; j++) {
        cr_expect_eq((int8_t)q80[2 + j], 2 * (j / 2), "q8_0 element %d", j);
        cr_expect_eq((int8_t)q81[4 + j], 2 * (j / 2), "q8_1 element %d", j);
        sum += 2 * (j / 2);
    }
    /* q8_1 s = fp16(sum * d) = fp16(353) = 0x5D84 */
    cr_expect_eq(sum, 353);
    cr_expect(q81[2] == 0x84 && q81[3] == 0x5D, "q8_1 s = %d", sum);

    float d8k;
    memcpy(&d8k, q8k, 4);
    cr_expect_eq(d8k, 1.0f);
    int bsum[2] = {-127, 0};
    for (int j = 1; j < 32; j++) {
        cr_expect_eq((int8_t)q8k[4 + j], 2 * (j / 2), "q8_K element %d", j);
        bsum[j / 16] += 2 * (j / 2);
    }
    for (int g = 0; g < 2; g++)
        cr_expect_eq((int16_t)(q8k[260 + 2 * g] | q8k[261 + 2 * g] << 8), bsum[g], "bsums[%d]", g);
}

/* ---- encoders of this family on extreme input ---------------------------------
 *
 * All-zero rows decode to zeros; rows of huge (1e30..3e38), subnormal and
 * below-GROUP_MAX_EPS values, and rows holding NaN and infinities, encode
 * without undefined behaviour (this runs under UBSan too) and write every
 * output byte: the result does not depend on what the buffer held. */
#define EDGE_COLS 512
#define EDGE_ROWS 6

static void edge_rows(float *x)
{
    uint64_t rng = 12345;
    for (int i = 0; i < EDGE_COLS; i++) {
        const float g = tu_gauss(&rng);
        x[0 * EDGE_COLS + i] = 0.0f;
        x[1 * EDGE_COLS + i] = i % 7 == 0 ? (i % 2 ? 3e38f : -3e38f) : g * 1e30f;
        x[2 * EDGE_COLS + i] = g * 1e-40f;                 /* subnormal */
        x[3 * EDGE_COLS + i] = i == 100 ? 1e-20f : 0.0f;  /* below GROUP_MAX_EPS */
        x[4 * EDGE_COLS + i] = i % 64 == 3 ? 1e-14f : 0.0f;
        x[5 * EDGE_COLS + i] = i % 61 == 0 ? NAN : i % 67 == 0 ? INFINITY : i % 71 == 0 ? -INFINITY : g;
    }
}

Test(dot, encoders_extreme_input)
{
    static const int types[] = {QK_F32, QK_F16, QK_BF16, QK_Q4_0, QK_Q4_1, QK_Q5_0, QK_Q5_1,
                                QK_Q8_0, QK_Q2_K, QK_Q3_K, QK_Q4_K, QK_Q5_K, QK_Q6_K};
    float *x = malloc(EDGE_ROWS * EDGE_COLS * sizeof(float)), im[EDGE_COLS];
    float *dec = malloc(EDGE_COLS * sizeof(float));
    cr_assert(x && dec);
    edge_rows(x);
    for (int i = 0; i < EDGE_COLS; i++)
        im[i] = 1.0f + (float)(i % 5);
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const qk_type_traits *t = qk_type_get(types[k]);
        const size_t rs = qk_row_size(t->id, EDGE_COLS);
        uint8_t *a = malloc(rs * EDGE_ROWS), *b = malloc(rs * EDGE_ROWS);
        cr_assert(a && b);
        for (int with_im = 0; with_im < 2; with_im++) {
            memset(a, 0x00, rs * EDGE_ROWS);
            memset(b, 0xFF, rs * EDGE_ROWS);
            cr_assert_eq(t->quantize(x, a, EDGE_ROWS, EDGE_COLS, with_im ? im : NULL), rs * EDGE_ROWS);
            cr_assert_eq(t->quantize(x, b, EDGE_ROWS, EDGE_COLS, with_im ? im : NULL), rs * EDGE_ROWS);
            cr_expect(memcmp(a, b, rs * EDGE_ROWS) == 0, "%s: output depends on the buffer", t->name);
            for (int r = 0; r < EDGE_ROWS; r++) {
                t->to_float(a + (size_t)r * rs, dec, EDGE_COLS);
                bool zeros = true, finite = true;
                for (int i = 0; i < EDGE_COLS; i++) {
                    zeros &= dec[i] == 0.0f;
                    finite &= isfinite(dec[i]) != 0;
                }
                if (r == 0 || (r == 3 && t->is_quantized))
                    cr_expect(zeros, "%s: row %d should decode to zeros", t->name, r);
                if (r == 2 || r == 4)
                    cr_expect(finite, "%s: row %d decodes to non-finite values", t->name, r);
            }
        }
        free(a), free(b);
    }
    /* the activation encoders, likewise */
    static const int acts[] = {QK_Q8_0, QK_Q8_1, QK_Q8_K};
    for (size_t k = 0; k < sizeof acts / sizeof acts[0]; k++) {
        const qk_type_traits *t = qk_type_get(acts[k]);
        const size_t rs = qk_row_size(t->id, EDGE_COLS);
        uint8_t *a = malloc(rs), *b = malloc(rs);
        cr_assert(a && b);
        for (int r = 0; r < EDGE_ROWS; r++) {
            memset(a, 0x00, rs);
            memset(b, 0xFF, rs);
            t->from_float(x + r * EDGE_COLS, a, EDGE_COLS);
            t->from_float(x + r * EDGE_COLS, b, EDGE_COLS);
            cr_expect(memcmp(a, b, rs) == 0, "%s from_float row %d: output depends on the buffer",
                      t->name, r);
        }
        free(a), free(b);
    }
    free(x), free(dec);
}
