/* SIMD kernels (kernels/x86/, chosen by kernels/cpu.c) against the scalar
 * reference kernels of the format table.
 *
 * For every type and every SIMD level this CPU supports, where the level has
 * its own kernel (qk_kernels.level_* > 0):
 * - dot products on the golden rows (goldens/ggml/input.f32, 8 x 4096,
 *   scales 1e-4 .. 1e3) and Gaussian rows of 1, 3, 7, 33 and 88 blocks and of
 *   33024 columns (longer than the K-quant tiles shuffle on the stack), each
 *   through vec_dot and through dot_tile with several
 *   tile shapes (1 .. 13 rows x 1 .. 3 activation rows): bitwise equal to
 *   the scalar vec_dot (memcmp) for EVERY type, the float types included
 *   (issue #10: F16 and BF16 follow the float-dot order of kernels/float.c
 *   at every level).  Float types are also held to the accuracy that order
 *   promises, (n/16 + 4) * 2^-24 * sum|x_i y_i| from the exact dot, and
 *   checked bitwise on rows with extreme values (products that overflow,
 *   underflow into subnormals or cancel, infinities; NaN only as NaN);
 * - activation encoders (from_float): bytes equal to the scalar encoder on
 *   the golden rows, Gaussian rows, and blocks with zeros, ties (x.5 after
 *   scaling), infinities and NaNs;
 * - weight encoders a level has its own of (quantize, e.g. AVX2 Q8_0): bytes
 *   equal to the table's on the golden rows and those special blocks;
 * - decoders (to_float): bitwise equal floats.
 * A line "TYPE LEVEL: ..." is logged per type and level. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu.h"
#include "tests/testutil.h" /* criterion.h first */
#include "kernels/types.h"
#include <criterion/parameterized.h>

#define G "goldens/ggml/"
#define GROWS 8
#define GCOLS 4096

static int is_float_type(int id) { return id == QK_F16 || id == QK_BF16 || id == QK_F32; }

static float *golden_input(void)
{
    size_t n;
    float *in = tu_read(G "input.f32", &n);
    cr_assert_eq(n, (size_t)GROWS * GCOLS * sizeof(float));
    return in;
}

static float *golden_imatrix(void)
{
    size_t n;
    float *im = tu_read(G "imatrix.f32", &n);
    cr_assert_eq(n, (size_t)GCOLS * sizeof(float));
    return im;
}

/* ---- dot products ------------------------------------------------------------ */

typedef struct {
    const qk_type_traits *t, *a;
    int level;
    const qk_kernels *ks, *kl; /* scalar and level kernels of the weight type */
    double max_rel;            /* float types: max |simd - scalar| / sum|x y| / bound */
    int rows;
} dctx;

/* Check nrows encoded weight rows wq against nt activation rows yq. */
static void check_dots(dctx *c, const uint8_t *wq, int nrows, int64_t ncols, const uint8_t *yq, int nt,
                       const float *wd, const float *yd)
{
    const size_t wrow = qk_row_size(c->t->id, ncols), arow = qk_row_size(c->a->id, ncols);
    float *ref = malloc(sizeof(float) * (size_t)nrows * (size_t)nt);
    float *got = malloc(sizeof(float) * (size_t)nrows * (size_t)nt);
    cr_assert(ref && got);
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < nrows; r++)
            ref[t * nrows + r] = c->ks->vec_dot(ncols, wq + (size_t)r * wrow, yq + (size_t)t * arow);

    /* vec_dot of the level */
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < nrows; r++)
            got[t * nrows + r] = c->kl->vec_dot(ncols, wq + (size_t)r * wrow, yq + (size_t)t * arow);

    for (int i = 0; i < nrows * nt; i++) {
        const bool both_nan = isnan(ref[i]) && isnan(got[i]);
        cr_assert(both_nan || memcmp(&ref[i], &got[i], sizeof(float)) == 0,
                  "%s %s: %lld cols, out %d: simd %a != scalar %a", c->t->name,
                  qk_cpu_level_name(c->level), (long long)ncols, i, got[i], ref[i]);
    }
    if (is_float_type(c->t->id) && wd) {
        /* the float-dot order's error bound, from the exact dot */
        const double u = 0x1p-24, bound = ((double)ncols / 16 + 4) * u;
        for (int t = 0; t < nt; t++)
            for (int r = 0; r < nrows; r++) {
                double exact = 0, abs = 0;
                for (int64_t i = 0; i < ncols; i++) {
                    const double p = (double)wd[(size_t)r * ncols + i] * yd[(size_t)t * ncols + i];
                    exact += p; /* products exact in double, sum within 1e-16 */
                    abs += fabs(p);
                }
                const double err = fabs((double)got[t * nrows + r] - exact);
                const double rel = abs > 0 ? err / abs : err;
                cr_assert(rel <= bound, "%s %s: %lld cols: rel err %g > %g", c->t->name,
                          qk_cpu_level_name(c->level), (long long)ncols, rel, bound);
                if (rel / bound > c->max_rel)
                    c->max_rel = rel / bound;
            }
    }

    /* dot_tile in several shapes gives vec_dot's bits */
    static const int shapes[][2] = {{1, 1}, {3, 1}, {8, 1}, {13, 2}, {5, 3}, {16, 3}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int tr = shapes[s][0], tt = shapes[s][1];
        for (int r0 = 0; r0 < nrows; r0 += tr)
            for (int t0 = 0; t0 < nt; t0 += tt) {
                const int mr = nrows - r0 < tr ? nrows - r0 : tr, mt = nt - t0 < tt ? nt - t0 : tt;
                float out[16 * 3];
                qk_dot_tile(c->kl, ncols, wq + (size_t)r0 * wrow, wrow, mr, yq + (size_t)t0 * arow, arow,
                            mt, out, (size_t)tr);
                for (int t = 0; t < mt; t++)
                    for (int r = 0; r < mr; r++)
                        cr_assert(memcmp(&out[t * tr + r], &got[(t0 + t) * nrows + r0 + r], 4) == 0,
                                  "%s %s: tile %dx%d at (%d,%d) differs from vec_dot", c->t->name,
                                  qk_cpu_level_name(c->level), tr, tt, r0 + r, t0 + t);
            }
    }
    c->rows += nrows * nt;
    free(ref), free(got);
}

/* Encode w (nrows x ncols) and nt Gaussian activation rows, check. */
static void dot_case(dctx *c, const float *w, int nrows, int64_t ncols, const float *imatrix, uint64_t *rng)
{
    const int nt = 3;
    const size_t wrow = qk_row_size(c->t->id, ncols), arow = qk_row_size(c->a->id, ncols);
    cr_assert(wrow && arow);
    uint8_t *wq = malloc(wrow * (size_t)nrows), *yq = malloc(arow * nt);
    float *y = malloc(sizeof(float) * (size_t)ncols * nt);
    float *wd = malloc(sizeof(float) * (size_t)ncols * (size_t)nrows);
    float *yd = malloc(sizeof(float) * (size_t)ncols * nt);
    cr_assert(wq && yq && y && wd && yd);
    cr_assert_eq(c->t->quantize(w, wq, nrows, ncols, imatrix), wrow * (size_t)nrows);
    for (int64_t i = 0; i < ncols * nt; i++)
        y[i] = tu_gauss(rng);
    for (int t = 0; t < nt; t++) {
        c->a->from_float(y + t * ncols, yq + t * arow, ncols);
        c->a->to_float(yq + t * arow, yd + t * ncols, ncols);
    }
    for (int r = 0; r < nrows; r++)
        c->t->to_float(wq + (size_t)r * wrow, wd + (size_t)r * ncols, ncols);
    check_dots(c, wq, nrows, ncols, yq, nt, wd, yd);
    free(wq), free(yq), free(y), free(wd), free(yd);
}

/* Float rows with extreme values, encoded by the type's own encoder:
 * row 0 puts 2^-125 into lane 0 (element 0) and adds a product that falls
 * between subnormals, 2^-149 (1 + 2^-7) (element 32, lane 0 again in the
 * 32-lane order that n = 67, no multiple of 8, takes): fused, the sum rounds
 * up to 2^-125 + 2^-148; unfused it would be the tie 2^-125 + 2^-149,
 * rounded to even, 2^-125 (BF16; F16 cannot reach those exponents and gets
 * its smallest subnormals instead); rows 1 and 2 have a wide exponent range
 * (products that overflow to infinity or underflow), row 3 exact
 * cancellation in every lane, row 4 infinities of both signs and a NaN. */
static void float_extremes(dctx *c, uint64_t *rng)
{
    enum { NR = 5, NC = 67, NT = 2 };
    const bool bf = c->t->id == QK_BF16;
    const int emin = bf ? -75 : -26, emax = bf ? 64 : 12; /* F16: finite */
    float w[NR * NC] = {0}, y[NT * NC];
    for (int i = 0; i < NT * NC; i++)
        y[i] = ldexpf(tu_gauss(rng), emin + (int)(tu_rand(rng) % (uint64_t)(emax - emin + 1)));
    for (int i = 16; i < NC; i++) /* activation row 0 repeats every other 16 columns */
        if ((i / 16) % 2)
            y[i] = y[i - 16];
    for (int i = 0; i < NC; i++) {
        w[1 * NC + i] = ldexpf(tu_gauss(rng), emin + (int)(tu_rand(rng) % (uint64_t)(emax - emin + 1)));
        w[2 * NC + i] = i % 2 ? -(bf ? 3e38f : 65504.0f) : tu_gauss(rng) * (bf ? 1e30f : 1e4f);
        w[3 * NC + i] = (i / 16) % 2 ? -w[3 * NC + i - 16] : tu_gauss(rng); /* cancels with y row 0 */
        w[4 * NC + i] = i == 5    ? __builtin_inff()
                        : i == 9  ? -__builtin_inff()
                        : i == 40 ? __builtin_nanf("")
                                  : tu_gauss(rng);
    }
    /* row 0 x activation row 0: two products, the rest zeros */
    w[0] = bf ? ldexpf(1, -62) : ldexpf(1, -24);
    y[0] = bf ? ldexpf(1, -63) : ldexpf(1, -24);
    w[32] = bf ? ldexpf(1, -80) : ldexpf(5, -24);
    y[32] = bf ? ldexpf(1 + 1.0f / 128, -69) : ldexpf(3, -24);
    const size_t wrow = qk_row_size(c->t->id, NC), arow = qk_row_size(c->a->id, NC);
    uint8_t *wq = malloc(wrow * NR), *yq = malloc(arow * NT);
    cr_assert(wq && yq);
    cr_assert_eq(c->t->quantize(w, wq, NR, NC, NULL), wrow * NR);
    for (int t = 0; t < NT; t++)
        c->a->from_float(y + t * NC, yq + t * arow, NC);
    { /* the designed row gives the fused result */
        const float d = c->ks->vec_dot(NC, wq, yq);
        const float want = bf ? ldexpf(1, -125) + ldexpf(1, -148) : ldexpf(16, -48);
        cr_assert(d == want, "%s scalar row 0: %a, want %a", c->t->name, d, want);
    }
    check_dots(c, wq, NR, NC, yq, NT, NULL, NULL);
    free(wq), free(yq);
}

ParameterizedTestParameters(simd, dots)
{
    static int ids[QK_TYPE_MAX];
    size_t n = 0;
    for (int id = qk_type_next(-1); id >= 0; id = qk_type_next(id)) {
        const qk_type_traits *t = qk_type_get(id);
        if (t->vec_dot && t->quantize && t->to_float)
            ids[n++] = id;
    }
    return cr_make_param_array(int, ids, n);
}

ParameterizedTest(int *id, simd, dots)
{
    const qk_type_traits *t = qk_type_get(*id);
    int tested = 0;
    for (int level = 1; level <= (int)qk_cpu_supported(); level++) {
        const qk_kernels *kl = qk_kernels_at(*id, level);
        if (kl->level_dot < 1)
            continue;
        dctx c = {.t = t, .a = qk_type_get(t->vec_dot_type), .level = level,
                  .ks = qk_kernels_at(*id, QK_CPU_SCALAR), .kl = kl};
        uint64_t rng = 0x5EED0000ull + (uint64_t)*id;
        float *in = golden_input(), *im = golden_imatrix();
        dot_case(&c, in, GROWS, GCOLS, t->needs_imatrix ? im : NULL, &rng);
        free(in);

        const int64_t unit = t->blck > 1 ? t->blck : 32;
        static const int64_t blocks[] = {1, 3, 7, 33, 88};
        for (size_t k = 0; k < sizeof blocks / sizeof blocks[0]; k++) {
            const int nrows = 11;
            const int64_t ncols = blocks[k] * unit;
            float *w = malloc(sizeof(float) * (size_t)(nrows * ncols));
            float *qw = malloc(sizeof(float) * (size_t)ncols);
            cr_assert(w && qw);
            for (int64_t i = 0; i < nrows * ncols; i++)
                w[i] = tu_gauss(&rng);
            for (int64_t i = 0; i < ncols; i++)
                qw[i] = (float)(0.25 + 1.5 * tu_uniform(&rng));
            dot_case(&c, w, nrows, ncols, t->needs_imatrix ? qw : NULL, &rng);
            free(w), free(qw);
        }
        if (is_float_type(*id)) /* element types: odd lengths too */
            for (int64_t ncols = 1; ncols <= 40; ncols += 3) {
                float w[5 * 40];
                for (int i = 0; i < 5 * ncols; i++)
                    w[i] = tu_gauss(&rng);
                dot_case(&c, w, 5, ncols, NULL, &rng);
            }
        { /* one long row */
            const int64_t ncols = 33024; /* past the K-quant kernels' SHUF_MAX (32768) */
            float *w = malloc(sizeof(float) * (size_t)ncols * 2);
            float *qw = malloc(sizeof(float) * (size_t)ncols);
            cr_assert(w && qw);
            for (int64_t i = 0; i < 2 * ncols; i++)
                w[i] = tu_gauss(&rng);
            for (int64_t i = 0; i < ncols; i++)
                qw[i] = 1.0f;
            dot_case(&c, w, 2, ncols, t->needs_imatrix ? qw : NULL, &rng);
            free(w), free(qw);
        }
        free(im);
        if (*id == QK_F16 || *id == QK_BF16)
            float_extremes(&c, &rng);
        if (is_float_type(*id))
            cr_log_info("%s %s: %d dots bitwise equal to scalar, max error %.3f of the bound",
                        t->name, qk_cpu_level_name(level), c.rows, c.max_rel);
        else
            cr_log_info("%s %s: %d dots bitwise equal to scalar", t->name, qk_cpu_level_name(level),
                        c.rows);
        tested++;
    }
    if (!tested)
        cr_skip_test("%s: no SIMD dot on this CPU", t->name);
}

/* ---- activation encoders and decoders ---------------------------------------- */

/* Rows that stress the encoders: zeros, ties after scaling, huge and tiny
 * values, infinities, NaNs, equal +max and -max, and blocks of subnormals
 * (127 / amax overflows to infinity). */
static void special_row(float *x, int64_t n, uint64_t *rng)
{
    for (int64_t i = 0; i < n; i++) {
        const int64_t blk = i / 32, j = i % 32;
        switch (blk % 9) {
        case 0: x[i] = 0.0f; break;
        case 1: x[i] = (float)(j - 16) * 0.5f + (j == 0 ? 127.0f * 0.5f : 0); break; /* ties */
        case 2: x[i] = j == 5 ? __builtin_inff() : tu_gauss(rng); break;
        case 3: x[i] = j == 9 ? __builtin_nanf("") : tu_gauss(rng); break;
        case 4: x[i] = j == 3 ? -2.0f : j == 7 ? 2.0f : tu_gauss(rng) * 0.1f; break;
        case 5: x[i] = tu_gauss(rng) * 1e-30f; break;
        case 6: x[i] = tu_gauss(rng) * 1e30f; break;
        case 7: x[i] = (float)(int)(tu_gauss(rng) * 64) / 2; break; /* many exact halves */
        default: x[i] = tu_gauss(rng) * 1e-40f; break;                /* subnormals */
        }
    }
}

/* The activation encoder (from_float), or with weights the weight encoder
 * (quantize, one row, no importance matrix), of `level` against scalar. */
static void check_encoder_as(int id, int level, bool weights, const float *x, int64_t n,
                             const char *what)
{
    const qk_kernels *ks = qk_kernels_at(id, QK_CPU_SCALAR), *kl = qk_kernels_at(id, level);
    const size_t rs = qk_row_size(id, n);
    cr_assert(rs);
    uint8_t *a = malloc(rs), *b = malloc(rs);
    cr_assert(a && b);
    memset(a, 0xAA, rs);
    memset(b, 0x55, rs);
    if (weights) {
        ks->quantize(x, a, 1, n, NULL);
        kl->quantize(x, b, 1, n, NULL);
    } else {
        ks->from_float(x, a, n);
        kl->from_float(x, b, n);
    }
    for (size_t i = 0; i < rs; i++)
        cr_assert_eq(a[i], b[i], "%s %s %s encoder, %s: byte %zu: simd %02x scalar %02x",
                     qk_type_get(id)->name, qk_cpu_level_name(level),
                     weights ? "weight" : "activation", what, i, b[i], a[i]);
    free(a), free(b);
}

static void check_encoder(int id, int level, const float *x, int64_t n, const char *what)
{
    check_encoder_as(id, level, false, x, n, what);
}

static void check_decoder(int id, int level, const uint8_t *q, int64_t n)
{
    const qk_kernels *ks = qk_kernels_at(id, QK_CPU_SCALAR), *kl = qk_kernels_at(id, level);
    float *a = malloc(sizeof(float) * (size_t)n), *b = malloc(sizeof(float) * (size_t)n);
    cr_assert(a && b);
    ks->to_float(q, a, n);
    kl->to_float(q, b, n);
    cr_assert(memcmp(a, b, sizeof(float) * (size_t)n) == 0, "%s %s decoder differs",
              qk_type_get(id)->name, qk_cpu_level_name(level));
    free(a), free(b);
}

ParameterizedTestParameters(simd, codecs)
{
    static int ids[QK_TYPE_MAX];
    size_t n = 0;
    for (int id = qk_type_next(-1); id >= 0; id = qk_type_next(id))
        if (qk_type_get(id)->to_float)
            ids[n++] = id;
    return cr_make_param_array(int, ids, n);
}

ParameterizedTest(int *id, simd, codecs)
{
    const qk_type_traits *t = qk_type_get(*id);
    int tested = 0;
    uint64_t rng = 0xC0DEC000ull + (uint64_t)*id;
    const int64_t n = 8192; /* a multiple of every block size in the table */
    for (int level = 1; level <= (int)qk_cpu_supported(); level++) {
        const qk_kernels *kl = qk_kernels_at(*id, level);
        if (kl->level_from >= 1 && t->from_float) {
            float *in = golden_input();
            for (int r = 0; r < GROWS; r++)
                check_encoder(*id, level, in + (size_t)r * GCOLS, GCOLS, "golden row");
            free(in);
            float *x = malloc(sizeof(float) * n);
            cr_assert(x);
            for (int64_t i = 0; i < n; i++)
                x[i] = tu_gauss(&rng);
            check_encoder(*id, level, x, n, "gaussian");
            special_row(x, n, &rng);
            check_encoder(*id, level, x, n, "special values");
            if (t->blck == 1) /* element types: a length that is no multiple of 8 */
                check_encoder(*id, level, x, 13, "13 elements");
            free(x);
            tested++;
        }
        if (kl->level_quantize >= 1) {
            float *in = golden_input();
            for (int r = 0; r < GROWS; r++)
                check_encoder_as(*id, level, true, in + (size_t)r * GCOLS, GCOLS, "golden row");
            free(in);
            float *x = malloc(sizeof(float) * n);
            cr_assert(x);
            special_row(x, n, &rng);
            check_encoder_as(*id, level, true, x, n, "special values");
            free(x);
            tested++;
        }
        if (kl->level_to >= 1) {
            const size_t rs = qk_row_size(*id, n);
            uint8_t *q = malloc(rs);
            cr_assert(q);
            for (size_t i = 0; i < rs; i++)
                q[i] = (uint8_t)tu_rand(&rng);
            check_decoder(*id, level, q, n);
            if (t->blck == 1)
                check_decoder(*id, level, q, 13);
            free(q);
            tested++;
        }
        if (kl->level_from == level || kl->level_quantize == level || kl->level_to == level)
            cr_log_info("%s %s: its own codecs bytewise equal to scalar", t->name, qk_cpu_level_name(level));
    }
    if (!tested)
        cr_skip_test("%s: no SIMD codec on this CPU", t->name);
}

/* ---- dispatch -------------------------------------------------------------------- */

/* Criterion runs each test in its own process: the override is read at the
 * first call. */
Test(simd, override_scalar)
{
    setenv("QK_CPU", "scalar", 1);
    cr_assert_eq(qk_cpu_level_active(), QK_CPU_SCALAR);
    const qk_kernels *k = qk_kernels_for(QK_Q8_0);
    cr_assert(k->vec_dot == qk_type_get(QK_Q8_0)->vec_dot);
    cr_assert(k->from_float == qk_type_get(QK_Q8_0)->from_float);
    cr_assert_eq(k->level_dot, 0);
}

Test(simd, override_unknown_is_ignored)
{
    setenv("QK_CPU", "avx9000", 1);
    cr_assert_eq(qk_cpu_level_active(), qk_cpu_supported());
    cr_assert_str_eq(qk_cpu_level_name(qk_cpu_supported()),
                     qk_cpu_level_name(qk_cpu_level_active()));
}

Test(simd, levels)
{
    cr_assert_null(qk_kernels_at(QK_Q8_0, QK_CPU_LEVELS));
    cr_assert_null(qk_kernels_at(-1, QK_CPU_SCALAR));
    cr_assert_not_null(qk_kernels_at(QK_Q8_0, QK_CPU_SCALAR));
    for (int l = 0; l <= (int)qk_cpu_supported(); l++) {
        const qk_kernels *k = qk_kernels_at(QK_Q4_K, l);
        cr_assert(k && k->vec_dot && k->level_dot <= l);
    }
    cr_log_info("cpu: supported %s, active %s, vnni %d", qk_cpu_level_name(qk_cpu_supported()),
                qk_cpu_level_name(qk_cpu_level_active()), qk_cpu_has_vnni());
    for (int l = (int)qk_cpu_supported() + 1; l < QK_CPU_LEVELS; l++)
        cr_log_info("level %s not supported by this CPU: its kernels are not tested here", qk_cpu_level_name(l));
}

/* Prompt-sized tiles (up to 16 weight rows x 40 tokens, several K blocks):
 * the float tile kernels convert each block once and reuse it across tokens;
 * every output must still carry vec_dot's bits at every level. */
Test(simd, float_tiles_prompt_sized)
{
    enum { NR = 21, NT = 40 };
    static const int64_t ncols_list[] = {16, 300, 4099};
    static const int shapes[][2] = {{16, 32}, {16, 40}, {16, 7}, {5, 33}, {4, 3}};
    static const int types[] = {QK_F16, QK_BF16};
    uint64_t rng = 0x5eedf00dULL;
    for (size_t ti = 0; ti < 2; ti++)
        for (int level = 0; level < 3; level++) {
            if (level > (int)qk_cpu_supported())
                continue;
            const qk_kernels *k = qk_kernels_at(types[ti], level);
            for (size_t ci = 0; ci < sizeof ncols_list / sizeof ncols_list[0]; ci++) {
                const int64_t nc = ncols_list[ci];
                const size_t row = qk_row_size(types[ti], nc);
                uint8_t *w = malloc(row * NR), *y = malloc(row * NT);
                float *tmp = malloc(sizeof(float) * (size_t)nc * NT), *out = malloc(sizeof(float) * 16 * NT);
                for (int64_t i = 0; i < nc * NT; i++)
                    tmp[i] = tu_gauss(&rng);
                qk_type_get(types[ti])->quantize(tmp, w, NR, nc, NULL);
                qk_type_get(types[ti])->quantize(tmp, y, NT, nc, NULL);
                for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                    const int tr = shapes[s][0], tt = shapes[s][1];
                    for (int r0 = 0; r0 < NR; r0 += tr)
                        for (int t0 = 0; t0 < NT; t0 += tt) {
                            const int mr = NR - r0 < tr ? NR - r0 : tr, mt = NT - t0 < tt ? NT - t0 : tt;
                            qk_dot_tile(k, nc, w + (size_t)r0 * row, row, mr, y + (size_t)t0 * row, row, mt,
                                        out, (size_t)tr);
                            for (int t = 0; t < mt; t++)
                                for (int r = 0; r < mr; r++) {
                                    float want = k->vec_dot(nc, w + (size_t)(r0 + r) * row,
                                                            y + (size_t)(t0 + t) * row);
                                    cr_assert(memcmp(&out[t * tr + r], &want, 4) == 0,
                                              "%s level %d: %lld cols, tile %dx%d at (%d,%d)",
                                              qk_type_get(types[ti])->name, level, (long long)nc, tr, tt,
                                              r0 + r, t0 + t);
                                }
                        }
                }
                free(w), free(y), free(tmp), free(out);
            }
        }
}
