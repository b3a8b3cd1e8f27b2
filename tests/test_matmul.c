/* test_matmul.c - lib/engine/matmul.h against the format table's vec_dot:
 * - qk_matmul: every output element is the table's vec_dot of a weight row
 *   and the activation row encoded by the vec_dot_type's from_float (the
 *   active CPU level; test_simd holds the levels to the scalar bits);
 * - qk_matmul_n over weights of different types on one input (F32, F16,
 *   Q8_0, Q4_K, Q6_K, IQ4_XS: four activation encodings) gives the bytes of
 *   one qk_matmul per weight, for one token and for a batch, with 1 and 2
 *   threads;
 * - weights repacked for each level's packed kernels give the scalar
 *   reference's bytes, at every level the CPU supports. */
#include <string.h>

#include "kernels/cpu.h"
#include "lib/engine/matmul.h"
#include "tests/testutil.h" /* criterion.h first */
#include "kernels/types.h"

#define COLS 512
#define NTOK 37
#define NW 6

static const int types[NW] = {QK_F32, QK_F16, QK_Q8_0, QK_Q4_K, QK_Q6_K, QK_IQ4_XS};
static const int rows[NW] = {24, 40, 33, 17, 64, 9};

static qk_weight make_weight_cols(int type, int nrows, int cols, uint64_t *s)
{
    float *w = malloc(sizeof(float) * (size_t)cols * (size_t)nrows);
    cr_assert(w);
    for (int i = 0; i < cols * nrows; i++)
        w[i] = tu_gauss(s);
    const size_t rs = qk_row_size(type, cols);
    uint8_t *data = malloc(rs * (size_t)nrows);
    cr_assert(data);
    const qk_type_traits *t = qk_type_get(type);
    if (type == QK_F32)
        memcpy(data, w, rs * (size_t)nrows);
    else
        t->quantize(w, data, nrows, cols, NULL);
    free(w);
    return (qk_weight){.type = type, .rows = nrows, .cols = cols, .row_size = rs, .data = data};
}

static qk_weight make_weight(int type, int nrows, uint64_t *s) { return make_weight_cols(type, nrows, COLS, s); }

/* The reference: encode each activation row, then the table's vec_dot. */
static void reference(const qk_weight *w, const float *x, int ntok, float *y)
{
    const qk_type_traits *t = qk_type_get(w->type);
    const int vt = t->vec_dot_type;
    const int64_t cols = w->cols; /* x holds ntok rows of w->cols */
    const size_t ar = vt == QK_F32 ? (size_t)cols * sizeof(float) : qk_row_size(vt, cols);
    uint8_t *a = malloc(ar * (size_t)ntok);
    cr_assert(a);
    for (int k = 0; k < ntok; k++) {
        if (vt == QK_F32)
            memcpy(a + k * ar, x + (size_t)k * cols, ar);
        else
            qk_kernels_for(vt)->from_float(x + (size_t)k * cols, a + k * ar, cols);
    }
    for (int k = 0; k < ntok; k++)
        for (int64_t r = 0; r < w->rows; r++)
            y[(size_t)k * w->rows + r] = qk_kernels_for(w->type)->vec_dot(cols, w->data + r * w->row_size, a + k * ar);
    free(a);
}

Test(matmul, one_and_several_weights_equal_vec_dot)
{
    uint64_t s = 42;
    qk_weight w[NW];
    for (int i = 0; i < NW; i++)
        w[i] = make_weight(types[i], rows[i], &s);
    float *x = malloc(sizeof(float) * COLS * NTOK);
    cr_assert(x);
    for (int i = 0; i < COLS * NTOK; i++)
        x[i] = tu_gauss(&s);
    const int ntoks[2] = {1, NTOK};
    for (int c = 0; c < 2; c++) {
        const int nt = ntoks[c];
        float *want[NW], *one[NW], *many[NW];
        const qk_weight *wp[NW];
        for (int i = 0; i < NW; i++) {
            const size_t n = (size_t)rows[i] * (size_t)nt;
            want[i] = malloc(n * sizeof(float)), one[i] = malloc(n * sizeof(float));
            many[i] = malloc(n * sizeof(float));
            cr_assert(want[i] && one[i] && many[i]);
            wp[i] = &w[i];
            reference(&w[i], x, nt, want[i]);
        }
        for (int threads = 1; threads <= 2; threads++) {
            qk_matmul_ws ws = {0};
            qk_err err = {0};
            for (int i = 0; i < NW; i++) {
                cr_assert_eq(qk_matmul(&w[i], x, nt, one[i], &ws, threads, &err), 0, "%s", err.msg);
                cr_assert(!memcmp(one[i], want[i], sizeof(float) * (size_t)rows[i] * (size_t)nt),
                          "qk_matmul %s, %d tokens, %d threads", qk_type_get(types[i])->name, nt, threads);
            }
            cr_assert_eq(qk_matmul_n(wp, many, NW, x, nt, &ws, threads, &err), 0, "%s", err.msg);
            for (int i = 0; i < NW; i++)
                cr_assert(!memcmp(many[i], want[i], sizeof(float) * (size_t)rows[i] * (size_t)nt),
                          "qk_matmul_n %s, %d tokens, %d threads", qk_type_get(types[i])->name, nt, threads);
            qk_matmul_ws_free(&ws);
        }
        for (int i = 0; i < NW; i++)
            free(want[i]), free(one[i]), free(many[i]);
    }
    for (int i = 0; i < NW; i++)
        free((void *)w[i].data);
    free(x);
}

/* Repacked weights give the same bytes as the rows they came from, on rows
 * long enough to cross the kernels' internal spans of blocks:
 * - at every SIMD level the CPU supports (the ones it lacks are named in the
 *   log), each type with a packed kernel there: the level's pack and
 *   packed_tile (and packed_tile_act on pack_act's rows, where the level has
 *   them), in the engine's tiles (qk_pack_tile_rows) and in odd
 *   numbers of groups, against the scalar reference (scalar encoder,
 *   scalar vec_dot);
 * - the engine path (qk_weight_pack, qk_matmul with 1 and 2 threads) at the
 *   active level. */
#define LONG 16896 /* 528 blocks of 32, 66 of 256: each packed kernel's spans of blocks (512 and 16) end in a partial one */
#define PROWS 48

/* The scalar reference of w against nt rows of x (rows of w->cols floats). */
static void scalar_reference(const qk_weight *w, const float *x, int nt, float *y)
{
    const qk_kernels *ks = qk_kernels_at(w->type, QK_CPU_SCALAR);
    const int vt = qk_type_get(w->type)->vec_dot_type;
    const size_t ar = qk_row_size(vt, w->cols);
    uint8_t *a = malloc(ar * (size_t)nt);
    cr_assert(a);
    for (int k = 0; k < nt; k++)
        qk_kernels_at(vt, QK_CPU_SCALAR)->from_float(x + (size_t)k * w->cols, a + k * ar, w->cols);
    for (int k = 0; k < nt; k++)
        for (int64_t r = 0; r < w->rows; r++)
            y[(size_t)k * w->rows + r] = ks->vec_dot(w->cols, w->data + r * w->row_size, a + k * ar);
    free(a);
}

/* The level's packed kernel of w against nt rows of x, rows in tiles of
 * `tile` rows (whole groups); with `act`, packed_tile_act on the rows
 * pack_act made. */
static void level_packed(const qk_kernels *k, int level, const qk_weight *w, const float *x, int nt, size_t tile,
                         bool act, float *y)
{
    const int vt = qk_type_get(w->type)->vec_dot_type;
    const size_t ar = qk_row_size(vt, w->cols), gs = k->pack_size(w->cols);
    const size_t fr = act ? k->pack_act_size(w->cols) : 1;
    const size_t nrow = (size_t)w->rows;
    uint8_t *a = malloc(ar * (size_t)nt), *p = malloc(gs * (nrow / QK_PACK_ROWS)), *f = malloc(fr * (size_t)nt);
    cr_assert(a && p && f);
    for (int t = 0; t < nt; t++) {
        qk_kernels_at(vt, level)->from_float(x + (size_t)t * w->cols, a + t * ar, w->cols);
        if (act)
            k->pack_act(w->cols, a + t * ar, f + t * fr);
    }
    for (size_t g = 0; g < nrow / QK_PACK_ROWS; g++)
        k->pack(w->cols, w->data + g * QK_PACK_ROWS * w->row_size, w->row_size, p + g * gs);
    for (size_t r0 = 0; r0 < nrow; r0 += tile) {
        const size_t nr = nrow - r0 < tile ? nrow - r0 : tile;
        (act ? k->packed_tile_act : k->packed_tile)(w->cols, p + r0 / QK_PACK_ROWS * gs, (int)(nr / QK_PACK_ROWS),
                                                     act ? f : a, act ? fr : ar, nt, y + r0, nrow);
    }
    free(a), free(p), free(f);
}

/* Every level's packed kernel of type on nrows rows of cols columns. */
static void check_packed_type(int type, int nrows, int64_t cols, const float *x, uint64_t *s)
{
    /* NTOK (37): two AMX tiles of 16 tokens and 5 more; 80: two of its chunks of 64 tokens (where x holds them) */
    const int ntoks[5] = {1, 5, 9, NTOK, 80};
    qk_weight w = make_weight_cols(type, nrows, (int)cols, s);
    const size_t n = (size_t)nrows * sizeof(float);
    for (int c = 0; c < 5; c++) {
        const int nt = ntoks[c];
        if ((int64_t)nt * cols > (int64_t)LONG * NTOK)
            continue;
        float *want = malloc(n * (size_t)nt), *got = malloc(n * (size_t)nt);
        cr_assert(want && got);
        scalar_reference(&w, x, nt, want);
        for (int level = 1; level <= (int)qk_cpu_supported(); level++) {
            const qk_kernels *k = qk_kernels_at(type, level);
            if (!k->pack || !k->pack_size(cols))
                continue;
            const size_t tiles[3] = {qk_pack_tile_rows(k, nt), 3 * QK_PACK_ROWS, QK_PACK_ROWS};
            /* where the CPU has AMX, the AVX-512 tiles with it and without (QK_AMX=0) */
            const int amx = qk_cpu_has_amx();
            for (int ai = level == QK_CPU_AVX512 ? amx : 0; ai >= 0; ai--) {
                qk_cpu_set_amx(ai);
                /* and where the level has them, the activation rows made once (pack_act) */
                for (int act = 0; act <= (k->pack_act != NULL); act++)
                    for (int ti = 0; ti < 3; ti++) {
                        memset(got, 0xff, n * (size_t)nt);
                        level_packed(k, level, &w, x, nt, tiles[ti], act, got);
                        cr_assert(!memcmp(got, want, n * (size_t)nt),
                                  "packed %s at %s%s%s, %dx%lld, %d tokens, tiles of %zu rows", qk_type_get(type)->name,
                                  qk_cpu_level_name(level), ai ? " with AMX" : "", act ? " (pack_act)" : "", nrows,
                                  (long long)cols, nt, tiles[ti]);
                    }
            }
            qk_cpu_set_amx(amx);
            if (c == 0)
                cr_log_info("packed %s at %s (its kernel from %s), %dx%lld: bitwise equal to the scalar "
                            "reference", qk_type_get(type)->name, qk_cpu_level_name(level),
                            qk_cpu_level_name(k->level_pack), nrows, (long long)cols);
        }
        free(want), free(got);
    }
    free((void *)w.data);
}

Test(matmul, packed_weights_equal_vec_dot)
{
    uint64_t s = 11;
    float *x = malloc(sizeof(float) * LONG * NTOK);
    cr_assert(x);
    for (int i = 0; i < LONG * NTOK; i++)
        x[i] = tu_gauss(&s);
    if (qk_cpu_supported() >= QK_CPU_AVX2)
        cr_assert(qk_kernels_at(QK_Q4_0, QK_CPU_AVX2)->pack && qk_kernels_at(QK_Q4_K, QK_CPU_AVX2)->pack &&
                      qk_kernels_at(QK_Q5_K, QK_CPU_AVX2)->pack,
                  "AVX2 packs Q4_0, Q4_K, Q5_K");
    for (int level = QK_CPU_SCALAR + 1; level < QK_CPU_LEVELS; level++)
        if (level > (int)qk_cpu_supported())
            cr_log_info("packed kernels: level %s not supported by this CPU: skipped", qk_cpu_level_name(level));
    cr_log_info("AMX: %s", qk_cpu_has_amx() ? "used (the Q4_0, Q5_0, Q8_0 and IQ4_XS tiles run with it and without)"
                                             : "not on this CPU or not permitted by the OS: skipped");
    int npacked = 0;
    for (int type = 0; type < QK_TYPE_MAX; type++) {
        if (!qk_type_get(type) || !qk_kernels_at(type, QK_CPU_SCALAR)->vec_dot)
            continue;
        bool any = false;
        for (int level = 1; level <= (int)qk_cpu_supported(); level++)
            any |= qk_kernels_at(type, level)->pack != NULL;
        if (!any)
            continue;
        check_packed_type(type, PROWS, LONG, x, &s);
        /* 17 groups: whole tiles of the largest (128 rows), then an odd group */
        check_packed_type(type, 136, 1024, x, &s);
        /* F16, BF16: a last span of columns with an odd number of 8-element chunks */
        if (qk_row_size(type, 1000))
            check_packed_type(type, PROWS, 1000, x, &s);
        /* F16, BF16: rows of one span (the F16 prompt tile converts such a group once for every pass) */
        if (qk_row_size(type, 520))
            check_packed_type(type, PROWS, 520, x, &s);
        npacked++;
    }
    cr_log_info("%d packed types", npacked);
    free(x);
}

Test(matmul, packed_engine_path)
{
    uint64_t s = 12;
    float *x = malloc(sizeof(float) * LONG * NTOK);
    cr_assert(x);
    for (int i = 0; i < LONG * NTOK; i++)
        x[i] = tu_gauss(&s);
    for (int type = 0; type < QK_TYPE_MAX; type++) {
        const qk_kernels *k = qk_kernels_for(type);
        if (!k || !k->pack)
            continue;
        qk_weight w = make_weight_cols(type, PROWS, LONG, &s), odd = make_weight(type, 44, &s);
        void *mem, *none;
        qk_err err = {0};
        cr_assert_eq(qk_weight_pack(&w, &mem, &err), 0, "%s", err.msg);
        cr_assert(mem && w.packed == mem);
        cr_assert_eq(qk_weight_pack(&odd, &none, &err), 0, "%s", err.msg);
        cr_assert(!none && !odd.packed, "44 rows are not whole groups of %d", QK_PACK_ROWS);
        const int ntoks[3] = {1, 5, NTOK};
        for (int c = 0; c < 3; c++) {
            const int nt = ntoks[c];
            float *want = malloc(sizeof(float) * PROWS * (size_t)nt), *got = malloc(sizeof(float) * PROWS * (size_t)nt);
            cr_assert(want && got);
            scalar_reference(&w, x, nt, want);
            for (int threads = 1; threads <= 2; threads++) {
                qk_matmul_ws ws = {0};
                memset(got, 0xff, sizeof(float) * PROWS * (size_t)nt);
                cr_assert_eq(qk_matmul(&w, x, nt, got, &ws, threads, &err), 0, "%s", err.msg);
                cr_assert(!memcmp(got, want, sizeof(float) * PROWS * (size_t)nt), "packed %s, %d tokens, %d threads",
                          qk_type_get(type)->name, nt, threads);
                qk_matmul_ws_free(&ws);
            }
            free(want), free(got);
        }
        free(mem);
        free((void *)w.data), free((void *)odd.data);
    }
    /* F16 rows of a length that is no multiple of 8 keep ggml_vec_dot_f16's
     * order (kernels/float.c), which has no packed kernel: not packed */
    if (qk_kernels_for(QK_F16)->pack) {
        qk_weight f = make_weight_cols(QK_F16, 16, 100, &s);
        void *none;
        qk_err err = {0};
        cr_assert_eq(qk_weight_pack(&f, &none, &err), 0, "%s", err.msg);
        cr_assert(!none && !f.packed, "F16 rows of 100 columns are not packed");
        free((void *)f.data);
    }
    free(x);
}

Test(matmul, weights_of_one_call_must_share_columns)
{
    uint64_t s = 7;
    qk_weight a = make_weight(QK_F16, 8, &s), b = a;
    b.cols = COLS / 2;
    b.row_size = qk_row_size(QK_F16, COLS / 2);
    const qk_weight *wp[2] = {&a, &b};
    float ya[8], yb[8], x[COLS] = {0};
    float *out[2] = {ya, yb};
    qk_matmul_ws ws = {0};
    qk_err err = {0};
    cr_assert_neq(qk_matmul_n(wp, out, 2, x, 1, &ws, 1, &err), 0);
    cr_assert(strstr(err.msg, "columns"), "%s", err.msg);
    qk_matmul_ws_free(&ws);
    free((void *)a.data);
}
