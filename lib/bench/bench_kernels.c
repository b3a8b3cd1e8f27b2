/* bench_kernels.c - kernel throughput per type and SIMD level (see bench_kernels.h). */
#include "lib/bench/bench_kernels.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/bench/bench_stats.h"
#include "lib/core/ckd.h"
#include "lib/engine/matmul.h"
#include "lib/core/progress.h"
#include "kernels/quantize.h"
#include "lib/core/threads.h"

const char *const qk_bench_default_types =
    "f16,bf16,q4_0,q4_1,q5_0,q5_1,q8_0,q2_K,q3_K,q4_K,q5_K,q6_K,iq4_nl,iq4_xs,mxfp4,nvfp4";

enum {
    C_TYPE, C_BPW, C_LEVEL, C_IMPL, C_QUANT, C_ENC, C_DEC, C_DOT, C_DOTF, C_GEMM, C_PDOT, C_PGEMM,
    C_ROWS, C_COLS, C_TOKENS, C_THREADS, C_NCOLS
};
static const qk_col kernel_cols[C_NCOLS] = {
    {"type", "type", NULL, false},
    {"bpw", "bpw", "%.2f", false},
    {"level", "level", NULL, false},
    {"impl", "dot/enc/dec/pack from", NULL, false},
    {"quantize_gbps", "quantize GB/s", "%.3g", false},
    {"encode_gbps", "encode GB/s", "%.2f", false},
    {"decode_gbps", "decode GB/s", "%.2f", false},
    {"dot_gbps", "dot GB/s", "%.2f", false},
    {"dot_gflops", "dot GFLOP/s", "%.2f", false},
    {"gemm_gflops", "gemm GFLOP/s", "%.2f", false},
    {"packed_dot_gbps", "packed dot GB/s", "%.2f", false},
    {"packed_gemm_gflops", "packed gemm GFLOP/s", "%.2f", false},
    {"rows", "rows", NULL, true},
    {"cols", "cols", NULL, true},
    {"tokens", "tokens", NULL, true},
    {"threads", "threads", NULL, true},
};

#define GRAIN 16   /* weight rows per parallel range */
#define QUANT_ROWS 64 /* rows the (slow, reference) weight encoder is timed on */

/* ---- timing ---------------------------------------------------------------------- */

typedef void (*op_fn)(void *ctx);

/* Median over reps of the seconds one op(ctx) takes, each measurement
 * repeating it for at least `seconds` (and at least once). */
static double time_op(op_fn op, void *ctx, double seconds, int reps)
{
    double v[QK_STATS_MAX];
    for (int r = 0; r < reps; r++) {
        long n = 0;
        const double t0 = qk_bench_now();
        double dt;
        do {
            op(ctx);
            n++;
            dt = qk_bench_now() - t0;
        } while (dt < seconds);
        v[r] = dt / (double)n;
    }
    return qk_stats_of(v, reps).median;
}

/* ---- the operations ---------------------------------------------------------------- */

typedef struct {
    const qk_kernels_bench_opts *o;
    const qk_type_traits *t;
    const qk_kernels *k;       /* weight type at the level */
    const qk_kernels *ka;      /* activation type at the level */
    const float *src;          /* rows x cols floats */
    const float *imatrix;      /* cols weights (given only to types that need one) */
    uint8_t *w;                /* encoded weights */
    size_t wrow;               /* bytes per weight row */
    uint8_t *act;              /* rows encoded activation rows (encode's output) */
    size_t arow;               /* bytes per activation row */
    float *dec;                /* decode's output / dot outputs */
    uint8_t *packed;           /* the weights repacked by k->pack (rows a multiple of 8) */
    size_t pgroup;             /* bytes per packed group of QK_PACK_ROWS rows */
    int64_t pnt;               /* tokens of the packed op: 1 (dot) or tokens (gemm) */
    int rc;                    /* quantize's result */
    qk_err err;
} kjob;

static int64_t quant_rows(const kjob *j) { return j->o->rows < QUANT_ROWS ? j->o->rows : QUANT_ROWS; }

static void quantize_op(void *ctx)
{
    kjob *j = ctx;
    if (!j->rc)
        j->rc = qk_quantize_rows(j->t->id, j->src, j->w, quant_rows(j), j->o->cols,
                                 j->t->needs_imatrix ? j->imatrix : NULL, j->o->threads, &j->err);
}

static void encode_range(void *ctx, size_t b, size_t e)
{
    kjob *j = ctx;
    for (size_t i = b; i < e; i++)
        j->ka->from_float(j->src + i * (size_t)j->o->cols, j->act + i * j->arow, j->o->cols);
}
static void encode_op(void *ctx)
{
    kjob *j = ctx;
    qk_parallel_for(j->o->threads, (size_t)j->o->rows, GRAIN, encode_range, j);
}

static void decode_range(void *ctx, size_t b, size_t e)
{
    kjob *j = ctx;
    for (size_t i = b; i < e; i++)
        j->k->to_float(j->w + i * j->wrow, j->dec + i * (size_t)j->o->cols, j->o->cols);
}
static void decode_op(void *ctx)
{
    kjob *j = ctx;
    qk_parallel_for(j->o->threads, (size_t)j->o->rows, GRAIN, decode_range, j);
}

static void dot_range(void *ctx, size_t b, size_t e)
{
    kjob *j = ctx;
    for (size_t i = b; i < e; i++)
        j->dec[i] = j->k->vec_dot(j->o->cols, j->w + i * j->wrow, j->act);
}
static void dot_op(void *ctx)
{
    kjob *j = ctx;
    qk_parallel_for(j->o->threads, (size_t)j->o->rows, GRAIN, dot_range, j);
}

static void gemm_range(void *ctx, size_t b, size_t e)
{
    kjob *j = ctx;
    qk_dot_tile(j->k, j->o->cols, j->w + b * j->wrow, j->wrow, (int)(e - b), j->act, j->arow,
                j->o->tokens, j->dec + b, (size_t)j->o->rows);
}
static void gemm_op(void *ctx)
{
    kjob *j = ctx;
    qk_parallel_for(j->o->threads, (size_t)j->o->rows, GRAIN, gemm_range, j);
}

/* The packed kernel over rows [b, e) (whole groups) in the engine's tiles
 * (qk_pack_tile_rows). */
static void packed_range(void *ctx, size_t b, size_t e)
{
    kjob *j = ctx;
    const size_t rt = qk_pack_tile_rows(j->k, j->pnt);
    for (size_t r0 = b; r0 < e; r0 += rt) {
        const int nr = (int)(e - r0 < rt ? e - r0 : rt);
        j->k->packed_tile(j->o->cols, j->packed + r0 / QK_PACK_ROWS * j->pgroup, nr / QK_PACK_ROWS, j->act,
                          j->arow, (int)j->pnt, j->dec + r0, (size_t)j->o->rows);
    }
}
static void packed_op(void *ctx)
{
    kjob *j = ctx;
    qk_parallel_for(j->o->threads, (size_t)j->o->rows, qk_pack_tile_rows(j->k, j->pnt), packed_range, j);
}

/* ---- OpenBLAS, loaded at run time ------------------------------------------------- */

/* cblas_sgemm with CBLAS_ORDER / CBLAS_TRANSPOSE as the ints they are. */
typedef void (*sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc);
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

typedef struct {
    sgemm_fn sgemm;
    const float *x, *w;
    float *out;
    int m, n, k;
} blas_job;

static void blas_op(void *ctx)
{
    blas_job *b = ctx;
    /* out[m][n] = x[m][k] * w[n][k]^T */
    b->sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_TRANS, b->m, b->n, b->k, 1.0f, b->x, b->k,
             b->w, b->k, 0.0f, b->out, b->n);
}

static void bench_blas(const qk_kernels_bench_opts *o, const float *src, float *out, qk_report *r)
{
    const char *lib = o->blas ? o->blas : "libopenblas.so.0";
    if (!*lib)
        return;
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    sgemm_fn sgemm = h ? (sgemm_fn)(uintptr_t)dlsym(h, "cblas_sgemm") : NULL;
    if (!sgemm) {
        qk_report_note(r, "OpenBLAS reference skipped: %s (install libopenblas0, or name the "
                          "library with --blas)", h ? "no cblas_sgemm in it" : dlerror());
        if (h)
            dlclose(h);
        return;
    }
    void (*set_threads)(int) = (void (*)(int))(uintptr_t)dlsym(h, "openblas_set_num_threads");
    char *(*config)(void) = (char *(*)(void))(uintptr_t)dlsym(h, "openblas_get_config");
    if (set_threads)
        set_threads(o->threads);
    const double wbytes = (double)o->rows * (double)o->cols * 4, flops = 2.0 * (double)o->rows * (double)o->cols;
    blas_job b = {.sgemm = sgemm, .x = src, .w = src, .out = out, .m = 1, .n = (int)o->rows,
                  .k = (int)o->cols};
    const double t1 = time_op(blas_op, &b, o->seconds, o->reps);
    b.m = o->tokens;
    const double tm = time_op(blas_op, &b, o->seconds, o->reps);
    qk_report_row(r);
    qk_report_str(r, C_TYPE, "f32");
    qk_report_num(r, C_BPW, 32);
    qk_report_str(r, C_LEVEL, "openblas");
    qk_report_str(r, C_IMPL, "cblas_sgemm");
    qk_report_num(r, C_DOT, wbytes / t1 / 1e9);
    qk_report_num(r, C_DOTF, flops / t1 / 1e9);
    qk_report_num(r, C_GEMM, flops * o->tokens / tm / 1e9);
    qk_report_int(r, C_ROWS, o->rows);
    qk_report_int(r, C_COLS, o->cols);
    qk_report_int(r, C_TOKENS, o->tokens);
    qk_report_int(r, C_THREADS, o->threads);
    qk_report_note(r, "openblas: %s (%s), threads set to %d%s", lib,
                   config ? config() : "no openblas_get_config", o->threads,
                   set_threads ? "" : " (no openblas_set_num_threads: its own default)");
    dlclose(h);
}

/* ---- per type -------------------------------------------------------------------------- */

static uint64_t next_rand(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Roughly N(0, 1): the sum of 4 uniforms, centred and scaled (Irwin-Hall). */
static void fill_gaussian(float *v, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        double s = 0;
        for (int k = 0; k < 4; k++)
            s += (double)(next_rand(&seed) >> 11) * 0x1p-53;
        v[i] = (float)((s - 2.0) * 1.7320508075688772);
    }
}

/* The packed columns, when the level has a packed kernel for the type and
 * the rows are whole groups: weights repacked as qk_weight_pack does. */
static int bench_packed(const qk_kernels_bench_opts *o, kjob *j, qk_report *r, qk_err *err)
{
    const qk_kernels *k = j->k;
    if (!k->pack || o->rows % QK_PACK_ROWS || k->pack_size(o->cols) == 0)
        return 0;
    const double welts = (double)o->rows * (double)o->cols;
    j->pgroup = k->pack_size(o->cols);
    const size_t groups = (size_t)(o->rows / QK_PACK_ROWS), bytes = groups * j->pgroup;
    j->packed = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!j->packed)
        return qk_errf(err, QK_EIO, "out of memory for the packed %lldx%lld weights", (long long)o->rows,
                       (long long)o->cols);
    for (size_t g = 0; g < groups; g++)
        k->pack(o->cols, j->w + g * QK_PACK_ROWS * j->wrow, j->wrow, j->packed + g * j->pgroup);
    j->pnt = 1;
    qk_report_num(r, C_PDOT, (double)bytes / time_op(packed_op, j, o->seconds, o->reps) / 1e9);
    j->pnt = o->tokens;
    qk_report_num(r, C_PGEMM, 2 * welts * o->tokens / time_op(packed_op, j, o->seconds, o->reps) / 1e9);
    free(j->packed);
    j->packed = NULL;
    return 0;
}

static const char *lvl(int l) { return l < 0 ? "none" : qk_cpu_level_name(l); }

static int bench_type(const qk_kernels_bench_opts *o, kjob *j, const qk_type_traits *t,
                      qk_progress *pr, qk_report *r, qk_err *err)
{
    const int64_t R = o->rows, C = o->cols;
    j->t = t;
    j->wrow = qk_row_size(t->id, C);
    if (j->wrow == 0)
        return qk_errf(err, QK_EINPUT, "--shape: %lld columns is not a multiple of %s's block size %d",
                       (long long)C, t->name, t->blck);
    const double welts = (double)R * (double)C, wbytes = (double)j->wrow * (double)R;

    /* quantize (the table's encoder, level-independent), timed on the first
     * QUANT_ROWS rows, which are then repeated to fill the weight matrix (the
     * kernels' speed does not depend on the values) */
    double quant_s = 0;
    const int64_t qr = quant_rows(j);
    if (t->quantize && t->id != QK_F32) {
        j->rc = 0;
        quant_s = time_op(quantize_op, j, o->seconds, o->reps);
        if (j->rc) {
            *err = j->err;
            return j->rc;
        }
        for (int64_t i = qr; i < R; i++)
            memcpy(j->w + (size_t)i * j->wrow, j->w + (size_t)(i % qr) * j->wrow, j->wrow);
    } else if (t->id == QK_F32) {
        memcpy(j->w, j->src, (size_t)(welts * 4));
    } else {
        /* no encoder (element types like i8): decode arbitrary bytes */
        for (size_t i = 0; i < (size_t)wbytes; i++)
            j->w[i] = (uint8_t)(i * 131 + 7);
    }
    qk_progress_add(pr, 1);

    bool first = true;
    for (int l = 0; l <= (int)qk_cpu_supported(); l++) {
        if (!o->level_on[l])
            continue;
        const qk_kernels *k = qk_kernels_at(t->id, l);
        const qk_kernels *ka = t->vec_dot_type >= 0 ? qk_kernels_at(t->vec_dot_type, l) : NULL;
        j->k = k;
        j->ka = ka;
        qk_report_row(r);
        qk_report_str(r, C_TYPE, t->name);
        qk_report_num(r, C_BPW, qk_type_bpw(t->id));
        qk_report_str(r, C_LEVEL, qk_cpu_level_name(l));
        if (first && quant_s > 0)
            qk_report_num(r, C_QUANT, (double)j->wrow * (double)qr / quant_s / 1e9);
        first = false;
        if (ka && ka->from_float) {
            j->arow = qk_row_size(ka->id, C);
            qk_report_num(r, C_ENC, (double)j->arow * (double)R / time_op(encode_op, j, o->seconds, o->reps) / 1e9);
        }
        if (k->to_float)
            qk_report_num(r, C_DEC, wbytes / time_op(decode_op, j, o->seconds, o->reps) / 1e9);
        if (k->vec_dot && ka && ka->from_float) {
            const double d = time_op(dot_op, j, o->seconds, o->reps);
            qk_report_num(r, C_DOT, wbytes / d / 1e9);
            qk_report_num(r, C_DOTF, 2 * welts / d / 1e9);
            const double g = time_op(gemm_op, j, o->seconds, o->reps);
            qk_report_num(r, C_GEMM, 2 * welts * o->tokens / g / 1e9);
            int rc = bench_packed(o, j, r, err);
            if (rc)
                return rc;
        }
        char impl[64];
        snprintf(impl, sizeof impl, "%s/%s/%s/%s", k->vec_dot ? lvl(k->level_dot) : "-",
                 ka && ka->from_float ? lvl(ka->level_from) : "-",
                 k->to_float ? lvl(k->level_to) : "-", k->packed_tile ? lvl(k->level_pack) : "-");
        qk_report_str(r, C_IMPL, impl);
        qk_report_int(r, C_ROWS, R);
        qk_report_int(r, C_COLS, C);
        qk_report_int(r, C_TOKENS, o->tokens);
        qk_report_int(r, C_THREADS, o->threads);
        qk_progress_add(pr, 1);
    }
    return 0;
}

int qk_bench_kernels(const qk_kernels_bench_opts *o, qk_report *r, qk_err *err)
{
    qk_report_init(r, "kernels", kernel_cols, C_NCOLS);
    if (o->reps < 1 || o->reps > QK_STATS_MAX || o->tokens < 1 || o->rows < 1 || o->cols < 1)
        return qk_errf(err, QK_EINPUT, "repetitions must be in [1, %d]; tokens, rows, cols >= 1",
                       QK_STATS_MAX);
    qk_kernels_bench_opts oo = *o;
    bool any = false;
    for (int l = 0; l < QK_CPU_LEVELS; l++)
        any |= oo.level_on[l];
    for (int l = 0; l < QK_CPU_LEVELS; l++) {
        if (!any)
            oo.level_on[l] = l <= (int)qk_cpu_supported();
        else if (oo.level_on[l] && l > (int)qk_cpu_supported())
            return qk_errf(err, QK_EINPUT, "--levels: this CPU does not support %s (it has up to %s)",
                           qk_cpu_level_name(l), qk_cpu_level_name(qk_cpu_supported()));
    }
    int nlevels = 0;
    for (int l = 0; l < QK_CPU_LEVELS; l++)
        nlevels += oo.level_on[l];

    uint64_t elts, fbytes, abytes;
    const int64_t act_rows = oo.rows > oo.tokens ? oo.rows : oo.tokens;
    if (qk_ckd_mul(&elts, (uint64_t)oo.rows, (uint64_t)oo.cols) || qk_ckd_mul(&fbytes, elts, 8) ||
        qk_ckd_mul(&abytes, (uint64_t)act_rows, (uint64_t)oo.cols) || qk_ckd_mul(&abytes, abytes, 8) ||
        fbytes > ((uint64_t)1 << 34) || oo.cols > INT32_MAX || oo.rows > INT32_MAX)
        return qk_errf(err, QK_EINPUT, "--shape: too large");
    /* buffers: src (floats, act_rows rows), weights (<= 8 bytes per element for
     * the widest element type), activations (generous: 8 bytes per element),
     * outputs (floats, also the gemm's tokens x rows) */
    uint64_t outn = elts > (uint64_t)oo.tokens * (uint64_t)oo.rows ? elts : (uint64_t)oo.tokens * (uint64_t)oo.rows;
    kjob j = {.o = &oo};
    float *src = malloc((size_t)abytes / 2);
    j.w = malloc((size_t)fbytes);
    j.act = malloc((size_t)abytes);
    j.dec = malloc((size_t)outn * sizeof(float));
    float *im = malloc((size_t)oo.cols * sizeof(float));
    int rc = 0;
    if (!src || !j.w || !j.act || !j.dec || !im) {
        rc = qk_errf(err, QK_EIO, "out of memory for a %lldx%lld benchmark", (long long)oo.rows,
                     (long long)oo.cols);
        goto done;
    }
    fill_gaussian(src, (size_t)act_rows * (size_t)oo.cols, 42);
    for (int64_t i = 0; i < oo.cols; i++)
        im[i] = 1.0f + (float)(i % 7) / 7.0f;
    j.src = src;
    j.imatrix = im;

    qk_progress pr;
    qk_progress_init(&pr, "kernels", (uint64_t)oo.n_types * (uint64_t)(nlevels + 1) + 1, oo.quiet);
    for (int i = 0; !rc && i < oo.n_types; i++)
        rc = bench_type(&oo, &j, qk_type_get(oo.types[i]), &pr, r, err);
    if (!rc)
        bench_blas(&oo, src, j.dec, r);
    qk_progress_end(&pr);
    if (rc)
        goto done;
    qk_report_meta_str(r, "simd_supported", qk_cpu_level_name(qk_cpu_supported()));
    qk_report_meta_str(r, "simd_active", qk_cpu_level_name(qk_cpu_level_active()));
    qk_report_meta_str(r, "amx", qk_cpu_has_amx() ? "yes" : "no");
    qk_report_meta_int(r, "rows", oo.rows);
    qk_report_meta_int(r, "cols", oo.cols);
    qk_report_meta_int(r, "tokens", oo.tokens);
    qk_report_meta_int(r, "threads", oo.threads);
    qk_report_meta_int(r, "repetitions", oo.reps);
    qk_report_meta_num(r, "seconds_per_measurement", oo.seconds, "%g");
    qk_report_note(r, "GB/s: bytes of the encoded type (quantize and encode write them, decode, dot "
                      "and gemm read the weights); GFLOP/s: 2 per multiply-add; median of %d; "
                      "'dot/enc/dec/pack from': the level each kernel really comes from; packed: the "
                      "weights repacked at load as the engine does (qk-run(1)), one token in tiles "
                      "of %d rows (the engine's one-token product only for types whose packed "
                      "kernel is the faster there), gemm in the kernel's own tiles",
                   oo.reps, QK_PACK_DECODE_TILE);
done:
    free(src);
    free(j.w);
    free(j.act);
    free(j.dec);
    free(im);
    return rc;
}
