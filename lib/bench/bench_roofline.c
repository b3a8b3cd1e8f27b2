/* bench_roofline.c - read bandwidth and FMA peak (see bench_roofline.h). */
#include "lib/bench/bench_roofline.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/bench/bench_stats.h"
#include "lib/core/progress.h"

#if defined(__x86_64__) || defined(__i386__)
#define RL_X86 1
#include <immintrin.h>
#endif

/* ---- a team of threads that start together -------------------------------- */

typedef struct team team;
struct team {
    int n;
    pthread_barrier_t bar;
    void (*fn)(team *t, int tid);
    void *ctx;
    /* start gate: members wait until every thread exists (go = 1) or the
     * team could not be formed (go = -1) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int go;
};

typedef struct {
    team *t;
    int tid;
} member;

static void *member_main(void *arg)
{
    member *m = arg;
    team *t = m->t;
    pthread_mutex_lock(&t->mu);
    while (t->go == 0)
        pthread_cond_wait(&t->cv, &t->mu);
    const int go = t->go;
    pthread_mutex_unlock(&t->mu);
    if (go > 0)
        t->fn(t, m->tid);
    return NULL;
}

static void team_open_gate(team *t, int go)
{
    pthread_mutex_lock(&t->mu);
    t->go = go;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

/* Run t->fn(t, tid) for tid in [0, n) at once (tid 0 on the calling thread). */
static int team_run(team *t, qk_err *err)
{
    if (pthread_barrier_init(&t->bar, NULL, (unsigned)t->n))
        return qk_errf(err, QK_EIO, "cannot create a thread barrier");
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->go = 0;
    pthread_t *th = calloc((size_t)t->n, sizeof *th);
    member *mem = calloc((size_t)t->n, sizeof *mem);
    int started = 1;
    if (th && mem)
        for (; started < t->n; started++) {
            mem[started] = (member){t, started};
            if (pthread_create(&th[started], NULL, member_main, &mem[started]))
                break;
        }
    const bool ok = th && mem && started == t->n;
    team_open_gate(t, ok ? 1 : -1);
    if (ok)
        t->fn(t, 0);
    for (int i = 1; i < started; i++)
        pthread_join(th[i], NULL);
    free(th);
    free(mem);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    pthread_barrier_destroy(&t->bar);
    return ok ? 0 : qk_errf(err, QK_EIO, "cannot start %d threads", t->n);
}

/* ---- read bandwidth ---------------------------------------------------------- */

typedef uint64_t (*read_fn)(const uint8_t *p, size_t n);

/* XOR of every 64-bit word: a use of every byte the compiler cannot drop. */
static uint64_t read_scalar(const uint8_t *p, size_t n)
{
    const uint64_t *w = (const uint64_t *)p;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i + 4 <= n / 8; i += 4) {
        a ^= w[i];
        b ^= w[i + 1];
        c ^= w[i + 2];
        d ^= w[i + 3];
    }
    return a ^ b ^ c ^ d;
}

#ifdef RL_X86
__attribute__((target("avx2"))) static uint64_t read_avx2(const uint8_t *p, size_t n)
{
    const __m256i *v = (const __m256i *)p;
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    for (size_t i = 0; i + 4 <= n / 32; i += 4) {
        a = _mm256_xor_si256(a, _mm256_load_si256(v + i));
        b = _mm256_xor_si256(b, _mm256_load_si256(v + i + 1));
        c = _mm256_xor_si256(c, _mm256_load_si256(v + i + 2));
        d = _mm256_xor_si256(d, _mm256_load_si256(v + i + 3));
    }
    a = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
    return (uint64_t)_mm256_extract_epi64(a, 0) ^ (uint64_t)_mm256_extract_epi64(a, 1) ^
           (uint64_t)_mm256_extract_epi64(a, 2) ^ (uint64_t)_mm256_extract_epi64(a, 3);
}
#endif

static read_fn pick_read(void)
{
#ifdef RL_X86
    if (__builtin_cpu_supports("avx2"))
        return read_avx2;
#endif
    return read_scalar;
}

/* The buffer of a series of read bursts: one slice per thread, each first
 * touched by the thread that reads it in the first burst. */
struct qk_bw_burst {
    uint8_t *buf;
    size_t slice;      /* bytes per thread, a multiple of 128 */
    int nthreads;
    int passes;        /* passes of the current run */
    bool touched;
    read_fn rd;
    double sec[QK_STATS_MAX]; /* seconds of each pass of the current run */
    uint64_t sink[64]; /* per-thread results, so the reads are used */
};

static void bw_member(team *t, int tid)
{
    qk_bw_burst *j = t->ctx;
    uint8_t *s = j->buf + (size_t)tid * j->slice;
    if (!j->touched)
        memset(s, 0x5a ^ tid, j->slice); /* first touch by the reading thread */
    uint64_t acc = 0;
    for (int p = 0; p < j->passes; p++) {
        pthread_barrier_wait(&t->bar);
        double t0 = qk_bench_now();
        acc ^= j->rd(s, j->slice);
        pthread_barrier_wait(&t->bar);
        if (tid == 0)
            j->sec[p] = qk_bench_now() - t0;
    }
    j->sink[tid % 64] ^= acc;
}

int qk_bw_burst_new(qk_bw_burst **out, int nthreads, size_t bytes, qk_err *err)
{
    *out = NULL;
    if (nthreads < 1)
        nthreads = 1;
    size_t slice = bytes / (size_t)nthreads / 128 * 128;
    if (slice == 0)
        return qk_errf(err, QK_EINPUT, "bandwidth buffer of %zu bytes is too small for %d threads",
                       bytes, nthreads);
    qk_bw_burst *b = calloc(1, sizeof *b);
    if (!b || !(b->buf = aligned_alloc(4096, (slice * (size_t)nthreads + 4095) / 4096 * 4096))) {
        free(b);
        return qk_errf(err, QK_EIO, "out of memory (%zu bytes for the bandwidth buffer)", bytes);
    }
    b->slice = slice;
    b->nthreads = nthreads;
    b->rd = pick_read();
    *out = b;
    return 0;
}

/* passes passes of all the threads at once; sec[p] their times. */
static int bw_run(qk_bw_burst *b, int passes, qk_err *err)
{
    b->passes = passes < 1 ? 1 : passes > QK_STATS_MAX ? QK_STATS_MAX : passes;
    team t = {.n = b->nthreads, .fn = bw_member, .ctx = b};
    int rc = team_run(&t, err);
    b->touched = b->touched || rc == 0;
    return rc;
}

int qk_bw_burst_run(qk_bw_burst *b, double *bytes_per_s, qk_err *err)
{
    int rc = bw_run(b, 1, err);
    if (!rc)
        *bytes_per_s = (double)b->slice * b->nthreads / b->sec[0];
    return rc;
}

void qk_bw_burst_free(qk_bw_burst *b)
{
    if (b)
        free(b->buf);
    free(b);
}

int qk_roofline_bandwidth(int nthreads, size_t bytes, int passes, double *bytes_per_s,
                          qk_err *err)
{
    qk_bw_burst *b;
    int rc = qk_bw_burst_new(&b, nthreads, bytes, err);
    if (!rc)
        rc = bw_run(b, passes, err);
    if (!rc) {
        double bw[QK_STATS_MAX];
        for (int p = 0; p < b->passes; p++)
            bw[p] = (double)b->slice * b->nthreads / b->sec[p];
        *bytes_per_s = qk_stats_of(bw, b->passes).median;
    }
    qk_bw_burst_free(b);
    return rc;
}

/* ---- FMA peak ------------------------------------------------------------------ */

/* Each kernel runs `iters` rounds of CHAINS independent multiply-adds
 * x = x * m + c (which converge: no overflow, no denormals) and returns the
 * FLOPs done; the result goes to *sink.  The chain loop is unrolled so the
 * chains live in registers (an array kept in memory measures store
 * forwarding, not the FMA units). */
#define CHAINS 12

static double fma_scalar(uint64_t iters, float *sink)
{
    float x[CHAINS];
    for (int k = 0; k < CHAINS; k++)
        x[k] = 1.0f + (float)k / 64;
    const float m = 0.9999f, c = 0.0001f;
    for (uint64_t i = 0; i < iters; i++)
        _Pragma("GCC unroll 12") for (int k = 0; k < CHAINS; k++)
            x[k] = x[k] * m + c;
    float s = 0;
    for (int k = 0; k < CHAINS; k++)
        s += x[k];
    *sink = s;
    return (double)iters * CHAINS * 2;
}

#ifdef RL_X86
__attribute__((target("avx2,fma"))) static double fma_avx2(uint64_t iters, float *sink)
{
    __m256 x[CHAINS];
    for (int k = 0; k < CHAINS; k++)
        x[k] = _mm256_set1_ps(1.0f + (float)k / 64);
    const __m256 m = _mm256_set1_ps(0.9999f), c = _mm256_set1_ps(0.0001f);
    for (uint64_t i = 0; i < iters; i++)
        _Pragma("GCC unroll 12") for (int k = 0; k < CHAINS; k++)
            x[k] = _mm256_fmadd_ps(x[k], m, c);
    __m256 s = x[0];
    for (int k = 1; k < CHAINS; k++)
        s = _mm256_add_ps(s, x[k]);
    *sink = _mm256_cvtss_f32(s);
    return (double)iters * CHAINS * 8 * 2;
}

__attribute__((target("avx512f"))) static double fma_avx512(uint64_t iters, float *sink)
{
    __m512 x[CHAINS];
    for (int k = 0; k < CHAINS; k++)
        x[k] = _mm512_set1_ps(1.0f + (float)k / 64);
    const __m512 m = _mm512_set1_ps(0.9999f), c = _mm512_set1_ps(0.0001f);
    for (uint64_t i = 0; i < iters; i++)
        _Pragma("GCC unroll 12") for (int k = 0; k < CHAINS; k++)
            x[k] = _mm512_fmadd_ps(x[k], m, c);
    __m512 s = x[0];
    for (int k = 1; k < CHAINS; k++)
        s = _mm512_add_ps(s, x[k]);
    *sink = _mm512_reduce_add_ps(s);
    return (double)iters * CHAINS * 16 * 2;
}
#endif

typedef double (*fma_fn)(uint64_t iters, float *sink);

static fma_fn pick_fma(const char **isa)
{
#ifdef RL_X86
    if (__builtin_cpu_supports("avx512f")) {
        *isa = "avx512f";
        return fma_avx512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        *isa = "avx2+fma";
        return fma_avx2;
    }
#endif
    *isa = "scalar";
    return fma_scalar;
}

typedef struct {
    fma_fn fn;
    uint64_t iters;
    double flops;      /* per thread per round */
    double best;       /* seconds of the fastest round */
    float sink[64];
} fma_job;

static void fma_member(team *t, int tid)
{
    fma_job *j = t->ctx;
    for (int round = 0; round < 3; round++) {
        pthread_barrier_wait(&t->bar);
        double t0 = qk_bench_now();
        float s;
        double f = j->fn(j->iters, &s);
        j->sink[tid % 64] += s;
        pthread_barrier_wait(&t->bar);
        double dt = qk_bench_now() - t0;
        if (tid == 0) {
            j->flops = f;
            if (dt < j->best)
                j->best = dt;
        }
    }
}

int qk_roofline_fma(int nthreads, double seconds, double *flops_per_s, const char **isa,
                    qk_err *err)
{
    if (nthreads < 1)
        nthreads = 1;
    fma_job j = {.fn = pick_fma(isa), .best = 1e300};
    /* calibrate the round length on this thread */
    uint64_t iters = 1u << 12;
    float s;
    for (;;) {
        double t0 = qk_bench_now();
        j.fn(iters, &s);
        double dt = qk_bench_now() - t0;
        if (dt >= seconds / 8 || iters >= (uint64_t)1 << 40) {
            double want = dt > 0 ? (double)iters * (seconds / 3) / dt : (double)iters;
            j.iters = want < 1 ? 1 : (uint64_t)want;
            break;
        }
        iters *= 2;
    }
    j.sink[0] = s;
    team t = {.n = nthreads, .fn = fma_member, .ctx = &j};
    int rc = team_run(&t, err);
    if (rc)
        return rc;
    *flops_per_s = j.flops * nthreads / j.best;
    return 0;
}

/* ---- qk-bench roofline ----------------------------------------------------------- */

void qk_bench_cpu_name(char *buf, size_t n)
{
    snprintf(buf, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        const char *v = strchr(line, ':');
        if (!v)
            break;
        v++;
        while (*v == ' ' || *v == '\t')
            v++;
        snprintf(buf, n, "%.*s", (int)strcspn(v, "\n"), v);
        break;
    }
    fclose(f);
}

size_t qk_bench_llc_bytes(void)
{
    size_t best = 0;
    for (int i = 0; i < 8; i++) {
        char path[96], line[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(line, sizeof line, f)) {
            char *end;
            unsigned long long v = strtoull(line, &end, 10);
            v <<= *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
            best = v > best ? (size_t)v : best;
        }
        fclose(f);
    }
    return best;
}

enum { C_THREADS, C_BW, C_FMA, C_RIDGE, C_NCOLS };
static const qk_col roofline_cols[C_NCOLS] = {
    {"threads", "threads", NULL, false},
    {"read_gbps", "read GB/s", "%.2f", false},
    {"fma_gflops", "FMA GFLOP/s", "%.1f", false},
    {"ridge_flop_per_byte", "ridge FLOP/byte", "%.2f", false},
};

int qk_bench_roofline(const qk_roofline_opts *o, qk_report *r, qk_err *err)
{
    qk_report_init(r, "roofline", roofline_cols, C_NCOLS);
    char cpu[256];
    qk_bench_cpu_name(cpu, sizeof cpu);
    qk_progress pr;
    qk_progress_init(&pr, "roofline", (uint64_t)o->threads * 2, o->quiet);
    const char *isa = "scalar";
    for (int t = 1; t <= o->threads; t++) {
        double bw, fl;
        int rc = qk_roofline_bandwidth(t, o->bytes, o->passes, &bw, err);
        qk_progress_add(&pr, 1);
        if (!rc)
            rc = qk_roofline_fma(t, o->fma_seconds, &fl, &isa, err);
        qk_progress_add(&pr, 1);
        if (rc) {
            qk_progress_end(&pr);
            return rc;
        }
        qk_report_row(r);
        qk_report_int(r, C_THREADS, t);
        qk_report_num(r, C_BW, bw / 1e9);
        qk_report_num(r, C_FMA, fl / 1e9);
        qk_report_num(r, C_RIDGE, fl / bw);
    }
    qk_progress_end(&pr);
    qk_report_meta_str(r, "cpu", cpu);
    qk_report_meta_str(r, "fma_isa", isa);
    qk_report_meta_int(r, "llc_bytes", (int64_t)qk_bench_llc_bytes());
    qk_report_meta_int(r, "buffer_bytes", (int64_t)o->bytes);
    qk_report_meta_int(r, "passes", o->passes);
    qk_report_meta_num(r, "fma_seconds", o->fma_seconds, "%g");
    if (o->bytes < 4 * qk_bench_llc_bytes())
        qk_report_note(r, "the buffer is less than 4x the %zu MiB last-level cache: the read figures "
                          "include cache hits", qk_bench_llc_bytes() >> 20);
    qk_report_note(r, "read: median of %d passes over a %zu MiB buffer split across the threads; "
                      "FMA: %d independent %s multiply-add chains per thread, best of 3 rounds",
                   o->passes, o->bytes >> 20, CHAINS, isa);
    return 0;
}
