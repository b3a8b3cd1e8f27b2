/* bench-kernels.c - a measurement, not a test: throughput of the dot
 * products and activation encoders at every SIMD level this CPU has, and
 * optionally prompt (pp) and generation (tg) speed of the engine on a model.
 *
 *   build/tools/bench-kernels [-r ROWS] [-c COLS] [-s SECONDS]
 *   build/tools/bench-kernels -m MODEL.gguf [-t THREADS] [-p 256] [-n 32] [-r REPS]
 *
 * Kernels: one thread; a ROWS x COLS weight matrix (default 2048 x 4096,
 * Gaussian, encoded with the table's encoder) against one activation row
 * ("dot": decode, GB/s of weight bytes) and against 32 activation rows in
 * tiles ("tile32": prompt processing, GMAC/s); encoders in GB/s of float
 * input.  Model: pp = one batch of P tokens into an empty cache, tg = N
 * single-token steps after it; medians of REPS runs, at the level QK_CPU
 * selects (run it once per level to compare).  Token ids are fixed
 * pseudo-random ids. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu.h"
#include "lib/core/err.h"
#include "lib/engine/forward.h"
#include "formats/gguf.h"
#include "lib/engine/model.h"
#include "kernels/types.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float gauss(void)
{
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    double u1 = (double)((rng * 2685821657736338717ull) >> 11) * 0x1p-53 + 1e-300;
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    double u2 = (double)((rng * 2685821657736338717ull) >> 11) * 0x1p-53;
    return (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
}

static volatile float sink;

static void bench_type(const qk_type_traits *t, int64_t rows, int64_t cols, double secs)
{
    const qk_type_traits *a = qk_type_get(t->vec_dot_type);
    const size_t wrow = qk_row_size(t->id, cols), arow = qk_row_size(a->id, cols);
    if (!wrow || !arow || !t->quantize || !a->from_float)
        return;
    enum { NT = 32 };
    float *w = malloc(sizeof(float) * (size_t)(rows * cols)), *x = malloc(sizeof(float) * (size_t)cols * NT);
    uint8_t *wq = malloc(wrow * (size_t)rows), *yq = malloc(arow * NT);
    float *out = malloc(sizeof(float) * (size_t)rows * NT);
    for (int64_t i = 0; i < rows * cols; i++)
        w[i] = gauss();
    for (int64_t i = 0; i < cols * NT; i++)
        x[i] = gauss();
    t->quantize(w, wq, rows, cols, NULL);
    for (int k = 0; k < NT; k++)
        a->from_float(x + k * cols, yq + k * arow, cols);
    for (int l = 0; l <= (int)qk_cpu_supported(); l++) {
        const qk_kernels *k = qk_kernels_at(t->id, l);
        if (l > 0 && k->level_dot != l)
            continue;
        int it = 0;
        double t0 = now(), t1;
        do {
            qk_dot_tile(k, cols, wq, wrow, (int)rows, yq, arow, 1, out, (size_t)rows);
            it++;
        } while ((t1 = now()) - t0 < secs);
        const double gbs = (double)wrow * (double)rows * it / (t1 - t0) * 1e-9;
        int it2 = 0;
        t0 = now();
        do {
            for (int64_t r0 = 0; r0 < rows; r0 += 16)
                qk_dot_tile(k, cols, wq + (size_t)r0 * wrow, wrow, 16, yq, arow, NT, out + r0, (size_t)rows);
            it2++;
        } while ((t1 = now()) - t0 < secs);
        const double gmac = (double)rows * (double)cols * NT * it2 / (t1 - t0) * 1e-9;
        printf("| %-7s | %-6s | %8.2f GB/s | %8.2f GMAC/s |\n", t->name, qk_cpu_level_name(l), gbs, gmac);
        sink = out[0];
    }
    free(w), free(x), free(wq), free(yq), free(out);
}

static void bench_encoder(int id, int64_t cols, double secs)
{
    const size_t rs = qk_row_size(id, cols);
    float *x = malloc(sizeof(float) * (size_t)cols);
    uint8_t *q = malloc(rs);
    for (int64_t i = 0; i < cols; i++)
        x[i] = gauss();
    for (int l = 0; l <= (int)qk_cpu_supported(); l++) {
        const qk_kernels *k = qk_kernels_at(id, l);
        if (l > 0 && k->level_from != l)
            continue;
        int it = 0;
        double t0 = now(), t1;
        do {
            k->from_float(x, q, cols);
            it++;
        } while ((t1 = now()) - t0 < secs);
        printf("| %-7s | %-6s | %8.2f GB/s of f32 in |\n", qk_type_get(id)->name, qk_cpu_level_name(l),
               4.0 * (double)cols * it / (t1 - t0) * 1e-9);
        sink = (float)q[0];
    }
    free(x), free(q);
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int bench_model(const char *path, int threads, int p, int n, int reps)
{
    qk_err err = {0};
    qk_gguf *g = NULL;
    qk_model m = {0};
    qk_ctx *c = NULL;
    if (qk_gguf_open(&g, path, 0, &err) || qk_model_load(&m, g, &err)) {
        fprintf(stderr, "bench-kernels: %s: cannot load\n", path);
        return 2;
    }
    qk_ctx_params cp = {.n_ctx = p + n + 8, .n_batch = p, .nthreads = threads};
    if (qk_ctx_new(&c, &m, &cp, &err)) {
        fprintf(stderr, "bench-kernels: cannot make a context\n");
        return 3;
    }
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(p + n));
    for (int i = 0; i < p + n; i++)
        tok[i] = 1 + (int32_t)((uint32_t)(i * 2654435761u) % (uint32_t)(m.hp.n_vocab - 1));
    float *logits = malloc(sizeof(float) * (size_t)m.hp.n_vocab);
    double *pp = malloc(sizeof(double) * (size_t)reps), *tg = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        qk_ctx_reset(c);
        double t0 = now();
        if (p > 0 && qk_forward(c, tok, p, logits, false, &err))
            return 3;
        pp[r] = p / (now() - t0);
        qk_ctx_reset(c);
        t0 = now();
        for (int i = 0; i < n; i++)
            if (qk_forward(c, tok + p + i, 1, logits, false, &err))
                return 3;
        tg[r] = n / (now() - t0);
    }
    qsort(pp, (size_t)reps, sizeof *pp, cmp_double);
    qsort(tg, (size_t)reps, sizeof *tg, cmp_double);
    printf("| %s | %s | t=%d | pp%d %.2f tok/s | tg%d %.2f tok/s | (median of %d; min..max pp %.2f..%.2f tg %.2f..%.2f)\n",
           path, qk_cpu_level_name(qk_cpu_level_active()), threads, p, pp[reps / 2], n, tg[reps / 2],
           reps, pp[0], pp[reps - 1], tg[0], tg[reps - 1]);
    free(tok), free(logits), free(pp), free(tg);
    qk_ctx_free(c);
    qk_model_free(&m);
    qk_gguf_close(g);
    return 0;
}

int main(int argc, char **argv)
{
    int64_t rows = 2048, cols = 4096;
    double secs = 0.3;
    const char *model = NULL;
    int threads = 2, p = 256, n = 32, reps = 3;
    int opt;
    while ((opt = getopt(argc, argv, "r:c:s:m:t:p:n:")) != -1) {
        switch (opt) {
        case 'r': rows = atoll(optarg), reps = atoi(optarg); break;
        case 'c': cols = atoll(optarg); break;
        case 's': secs = atof(optarg); break;
        case 'm': model = optarg; break;
        case 't': threads = atoi(optarg); break;
        case 'p': p = atoi(optarg); break;
        case 'n': n = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: bench-kernels [-r ROWS] [-c COLS] [-s SECS] | -m MODEL [-t T] [-p P] [-n N] [-r REPS]\n");
            return 2;
        }
    }
    if (model)
        return bench_model(model, threads, p, n, reps < 1 ? 1 : reps);
    printf("cpu: %s (vnni %d); %lld x %lld weights, 1 thread\n\n", qk_cpu_level_name(qk_cpu_supported()),
           qk_cpu_has_vnni(), (long long)rows, (long long)cols);
    printf("| type    | level  | dot (1 row)   | tile32          |\n|---|---|---|---|\n");
    static const int types[] = {QK_F16, QK_BF16, QK_Q8_0, QK_Q4_0, QK_Q5_0, QK_IQ4_NL, QK_Q4_K,
                                QK_Q6_K, QK_Q5_K, QK_Q3_K, QK_Q2_K, QK_Q4_1};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        bench_type(qk_type_get(types[i]), rows, cols, secs);
    printf("\n| encoder | level  | throughput |\n|---|---|---|\n");
    bench_encoder(QK_Q8_0, cols, secs);
    bench_encoder(QK_Q8_K, cols, secs);
    bench_encoder(QK_F16, cols, secs);
    return 0;
}
