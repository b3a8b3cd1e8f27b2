/* bench.c - qk-bench: speed benchmarks of the engine and the kernels.
 *
 *   qk-bench model     prompt processing and generation tokens/s (llama-bench's semantics)
 *   qk-bench kernels   per-type encode/decode/dot throughput at each SIMD level, vs OpenBLAS
 *   qk-bench roofline  read bandwidth and FMA peak for 1..N threads
 *   qk-bench error     quantization-error scorecard (docs/studies.md)
 *   qk-bench wire      pipeline-wire activation compression sweep (docs/studies.md)
 *   qk-bench kv        KV-cache quantization sweep (docs/studies.md)
 *
 * Each subcommand builds a qk_report (lib/bench/bench_report.h) and prints it as a
 * markdown table (default), CSV or JSON, on stdout or atomically into --out. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/bench/bench_kernels.h"
#include "lib/bench/bench_model.h"
#include "lib/bench/bench_report.h"
#include "lib/bench/bench_roofline.h"
#include "lib/engine/matmul.h"
#include "lib/core/cli.h"
#include "cmd/commands.h"
#include "kernels/cpu.h"
#include "lib/core/mapfile.h"
#include "lib/core/outfile.h"
#include "lib/study/study_cmd.h"
#include "lib/core/threads.h"
#include "kernels/types.h"

static const char usage_text[] =
    "usage: qk-bench SUBCOMMAND [options]\n"
    "\n"
    "Speed benchmarks.  Subcommands:\n"
    "  model      prompt processing (pp) and generation (tg) tokens/s of a GGUF model, as\n"
    "             llama-bench measures them, and the fraction of the bandwidth roofline\n"
    "  kernels    encode / decode / dot / gemm throughput of each type at each SIMD level,\n"
    "             against OpenBLAS sgemm\n"
    "  roofline   read bandwidth and peak FMA rate for 1..N threads\n"
    "  error      quantization error (SNR, NMSE, bytes/element) of every format x granularity\n"
    "             on a checkpoint's weights or a synthetic matrix\n"
    "  wire       KL divergence and bytes of pipeline-wire codecs on the hidden state\n"
    "  kv         KL divergence and bytes per token of KV-cache codecs\n"
    "\n"
    "'qk-bench SUBCOMMAND --help' lists its options; man qk-bench has the details.\n"
    "Exit codes: 0 ok, 2 usage or input error, 3 I/O or system error.\n";

static const char model_usage[] =
    "usage: qk-bench model -m MODEL.gguf [-m MODEL2.gguf ...] [options]\n"
    "\n"
    "Prompt processing (ppP: one batch of P tokens from an empty cache) and generation (tgN:\n"
    "N single-token steps from an empty cache) in tokens/s, mean +- sd over the repetitions\n"
    "after one warm-up run; for tg also the share of the read-bandwidth roofline (the median\n"
    "of read bursts run between the repetitions).  With -d D the same after a cache of D\n"
    "tokens (ppP @ dD, tgN @ dD).\n"
    "\n"
    "  -m, --model FILE       a GGUF model (repeat for several)\n"
    "  -p, --n-prompt LIST    prompt lengths, comma-separated (default 512; 0: none)\n"
    "  -n, --n-gen LIST       generation lengths (default 128; 0: none)\n"
    "  -d, --n-depth LIST     tokens in the cache before each test (default 0)\n"
    "  -r, --repetitions N    timed repetitions (default 5)\n"
    "  -t, --threads LIST     thread counts (default: all CPUs; 0 = all CPUs)\n"
    "  -b, --batch-size N     tokens per prompt batch (default 512)\n"
    "  --kv-cache TYPE        f16 (default, as llama.cpp) or f32\n"
    "  --act-type T           default (activations encoded as llama.cpp does) or f32 (float\n"
    "                         activations for every weight, as qk-run --act-type f32)\n"
    "  --no-warmup            skip the warm-up run\n"
    "  --bandwidth GBPS       read bandwidth for the roofline instead of measuring it\n"
    "  --size MIB             read-burst buffer in MiB (default 256)\n"
    "  --no-roofline          do not compute the roofline share\n"
    "  -o, --output-format F  md (default), csv or json\n"
    "  --json                 same as -o json (schema in qk-bench(1))\n"
    "  --out FILE             write the report to FILE (atomically) instead of stdout\n"
    "  -q, --quiet            no progress bar\n"
    "  -h, --help             this text\n";

static const char kernels_usage[] =
    "usage: qk-bench kernels [options]\n"
    "\n"
    "Throughput of each type's kernels at each SIMD level (GB/s of encoded bytes, GFLOP/s):\n"
    "quantize (weights), encode (activations), decode, dot (matrix-vector), gemm (TOKENS rows),\n"
    "and OpenBLAS cblas_sgemm on the same shapes as the float reference (loaded at run time).\n"
    "\n"
    "  --types LIST           comma-separated types (default: the SIMD set of issue #7:\n"
    "                         f16,bf16,q4_0,q4_1,q5_0,q5_1,q8_0,q2_K,...,mxfp4,nvfp4); 'all'\n"
    "  --levels LIST          scalar,avx2,avx512 (default: every level this CPU has)\n"
    "  --shape ROWSxCOLS      weight matrix (default 1024x4096)\n"
    "  --tokens N             activation rows of the gemm test (default 16)\n"
    "  --time-ms MS           least time per measurement (default 100)\n"
    "  -r, --repetitions N    measurements per figure, the median is reported (default 3)\n"
    "  -t, --threads N        threads (default 1; 0 = all CPUs)\n"
    "  --blas LIB             the BLAS library to dlopen (default libopenblas.so.0)\n"
    "  --no-blas              leave out the OpenBLAS reference\n"
    "  -o, --output-format F  md (default), csv or json\n"
    "  --json                 same as -o json\n"
    "  --out FILE             write the report to FILE (atomically)\n"
    "  -q, --quiet            no progress bar\n"
    "  -h, --help             this text\n";

static const char roofline_usage[] =
    "usage: qk-bench roofline [options]\n"
    "\n"
    "Read bandwidth (median of several passes over a large buffer) and peak FMA rate (independent\n"
    "fused multiply-add chains on the widest vector unit) for 1..N threads.\n"
    "\n"
    "  -t, --threads N        measure 1..N threads (default: all CPUs)\n"
    "  --size MIB             bandwidth buffer in MiB (default 256)\n"
    "  --passes N             bandwidth passes, the median counts (default 10)\n"
    "  --time-ms MS           FMA run time per thread count (default 300)\n"
    "  -o, --output-format F  md (default), csv or json\n"
    "  --json                 same as -o json\n"
    "  --out FILE             write the report to FILE (atomically)\n"
    "  -q, --quiet            no progress bar\n"
    "  -h, --help             this text\n";

static const char error_usage[] =
    "usage: qk-bench error (-m CHECKPOINT [--tensors GLOB] | --synthetic DIST [--shape RxC]\n"
    "                      [--seed N]) [options]\n"
    "\n"
    "Quantize and dequantize every 2-D weight (or one synthetic matrix) with each format x\n"
    "granularity; report SNR, NMSE, max error and bytes/element per format (docs/studies.md).\n"
    "\n"
    "  -m, --model CKPT       GGUF file, split set, .safetensors or Hugging Face directory\n"
    "      --tensors GLOB     only the tensors whose names match (fnmatch)\n"
    "      --synthetic DIST   gaussian, laplace, student-t:NU or outlier-channels\n"
    "      --shape RxC        synthetic matrix shape (default 256x4096)\n"
    "      --seed N           synthetic seed (default 1)\n"
    "      --formats LIST     only these labels or families (int4,mxfp4,nvfp4,q4_K,gguf,...)\n"
    "      --per-tensor       md: a table per tensor too\n"
    "  -t, --threads N        threads (default 1; 0 = all CPUs); output does not depend on it\n"
    "  -o, --output-format F  md (default), csv or json\n"
    "  --json                 same as -o json (schema in docs/studies.md)\n"
    "  --out FILE             write the report to FILE (atomically) instead of stdout\n"
    "  -q, --quiet            accepted for symmetry (the sweeps print no progress)\n"
    "  -h, --help             this text\n";

static const char wire_usage[] =
    "usage: qk-bench wire -m MODEL.gguf -f TEXT [options]\n"
    "\n"
    "KL divergence against the unmodified model of every pipeline-wire format at 1, 2 and 4\n"
    "stage boundaries, llama-perplexity's windows (docs/studies.md); the lossless zstd\n"
    "control rides on fp32.\n"
    "\n"
    "  -m, --model FILE       a GGUF model\n"
    "  -f, --file TEXT        evaluation text\n"
    "  -c, --ctx-size N       window in tokens (default 256)\n"
    "      --chunks N         at most N windows\n"
    "      --formats LIST     wire formats (default all: fp32,bf16,...,nvfp4)\n"
    "      --boundaries LIST  boundary counts (default 1,2,4)\n"
    "  -t, --threads N        threads (default 1; 0 = all CPUs); output does not depend on it\n"
    "  -o, --output-format F  md (default), csv or json\n"
    "  --json                 same as -o json (schema in docs/studies.md)\n"
    "  --out FILE             write the report to FILE (atomically) instead of stdout\n"
    "  -q, --quiet            accepted for symmetry (the sweeps print no progress)\n"
    "  -h, --help             this text\n";

static const char kv_usage[] =
    "usage: qk-bench kv -m MODEL.gguf -f TEXT [options]\n"
    "\n"
    "KL divergence against the F32 cache and bytes per cached token of KV-cache codecs,\n"
    "llama-perplexity's windows (docs/studies.md).\n"
    "\n"
    "  -m, --model FILE       a GGUF model\n"
    "  -f, --file TEXT        evaluation text\n"
    "  -c, --ctx-size N       window in tokens (default 256)\n"
    "      --chunks N         at most N windows\n"
    "      --types LIST       TYPE[:tensor|:head][+kivi], comma-separated (default: f32, f16,\n"
    "                         bf16, fp8 per tensor and per head, int8, int4, nvfp4, and KIVI keys)\n"
    "  -t, --threads N        threads (default 1; 0 = all CPUs); output does not depend on it\n"
    "  -o, --output-format F  md (default), csv or json\n"
    "  --json                 same as -o json (schema in docs/studies.md)\n"
    "  --out FILE             write the report to FILE (atomically) instead of stdout\n"
    "  -q, --quiet            accepted for symmetry (the sweeps print no progress)\n"
    "  -h, --help             this text\n";

/* ---- one option table for every subcommand ------------------------------------------- */

enum { S_MODEL = 1, S_KERNELS = 2, S_ROOF = 4, S_ERROR = 8, S_WIRE = 16, S_KV = 32 };
#define S_RUNS (S_WIRE | S_KV)                    /* the sweeps that run a model on a text */
#define S_ALL (S_MODEL | S_KERNELS | S_ROOF | S_ERROR | S_RUNS)

enum { O_JSON = 256, O_OUT, O_KV, O_ACT, O_NO_WARMUP, O_BW, O_NO_ROOF, O_TYPES, O_LEVELS, O_SHAPE,
       O_TOKENS, O_TIME, O_BLAS, O_NO_BLAS, O_SIZE, O_PASSES, O_TENSORS, O_SYN, O_SEED, O_FORMATS,
       O_PER, O_BOUND, O_CHUNKS };

/* Each option once: its name, short letter (0: none), argument, and the subcommands taking it. */
static const struct bopt {
    const char *name;
    int id;            /* the short letter, or an O_ value */
    int has_arg;
    unsigned subs;
} bopts[] = {
    {"model", 'm', 1, S_MODEL | S_ERROR | S_RUNS},
    {"file", 'f', 1, S_RUNS},
    {"ctx-size", 'c', 1, S_RUNS},
    {"chunks", O_CHUNKS, 1, S_RUNS},
    {"n-prompt", 'p', 1, S_MODEL},
    {"n-gen", 'n', 1, S_MODEL},
    {"n-depth", 'd', 1, S_MODEL},
    {"batch-size", 'b', 1, S_MODEL},
    {"kv-cache", O_KV, 1, S_MODEL},
    {"act-type", O_ACT, 1, S_MODEL},
    {"no-warmup", O_NO_WARMUP, 0, S_MODEL},
    {"bandwidth", O_BW, 1, S_MODEL},
    {"no-roofline", O_NO_ROOF, 0, S_MODEL},
    {"types", O_TYPES, 1, S_KERNELS | S_KV},
    {"levels", O_LEVELS, 1, S_KERNELS},
    {"shape", O_SHAPE, 1, S_KERNELS | S_ERROR},
    {"tokens", O_TOKENS, 1, S_KERNELS},
    {"time-ms", O_TIME, 1, S_KERNELS | S_ROOF},
    {"blas", O_BLAS, 1, S_KERNELS},
    {"no-blas", O_NO_BLAS, 0, S_KERNELS},
    {"size", O_SIZE, 1, S_ROOF | S_MODEL},
    {"passes", O_PASSES, 1, S_ROOF},
    {"tensors", O_TENSORS, 1, S_ERROR},
    {"synthetic", O_SYN, 1, S_ERROR},
    {"seed", O_SEED, 1, S_ERROR},
    {"formats", O_FORMATS, 1, S_ERROR | S_WIRE},
    {"per-tensor", O_PER, 0, S_ERROR},
    {"boundaries", O_BOUND, 1, S_WIRE},
    {"repetitions", 'r', 1, S_MODEL | S_KERNELS},
    {"threads", 't', 1, S_ALL},
    {"output-format", 'o', 1, S_ALL},
    {"json", O_JSON, 0, S_ALL},
    {"out", O_OUT, 1, S_ALL},
    {"quiet", 'q', 0, S_ALL},
    {"help", 'h', 0, S_ALL},
};
#define N_BOPTS (sizeof bopts / sizeof bopts[0])

/* Everything a subcommand's command line can set, with the defaults. */
typedef struct bargs {
    unsigned sub;
    qk_report_fmt fmt;
    const char *out;
    bool quiet;
    const char **models;
    int n_models;
    qk_model_bench_opts model;
    qk_kernels_bench_opts kern;
    qk_roofline_opts roof;
    qk_sweep_opts sweep;
} bargs;

static void bargs_init(bargs *a, unsigned sub)
{
    *a = (bargs){.sub = sub};
    a->model = (qk_model_bench_opts){.prompts = {512}, .n_prompts = 1, .gens = {128}, .n_gens = 1,
                                     .threads = {qk_cpu_count()}, .n_threads = 1, .reps = 5,
                                     .warmup = true, .n_batch = 512, .kv_type = QK_F16,
                                     .depths = {0}, .n_depths = 1, .bw_bytes = (size_t)256 << 20,
                                     .seed = 1234};
    a->kern = (qk_kernels_bench_opts){.threads = 1, .rows = 1024, .cols = 4096, .tokens = 16,
                                      .seconds = 0.1, .reps = 3};
    a->roof = (qk_roofline_opts){.threads = qk_cpu_count(), .bytes = (size_t)256 << 20, .passes = 10,
                                 .fma_seconds = 0.3};
    a->sweep = (qk_sweep_opts){.n_ctx = 256, .threads = 1, .seed = 1};
}

/* "512,128" -> v[]; each in [lo, hi]. */
static int int_list(const char *opt, const char *s, int64_t lo, int64_t hi, int *v, int *n,
                    qk_err *err)
{
    char buf[256];
    if (strlen(s) >= sizeof buf)
        return qk_errf(err, QK_EINPUT, "%s: list too long", opt);
    strcpy(buf, s);
    *n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int64_t x;
        if (*n == QK_BENCH_LIST_MAX)
            return qk_errf(err, QK_EINPUT, "%s: at most %d values", opt, QK_BENCH_LIST_MAX);
        if (qk_cli_int(opt, tok, lo, hi, &x, err))
            return QK_EINPUT;
        v[(*n)++] = (int)x;
    }
    if (*n == 0)
        return qk_errf(err, QK_EINPUT, "%s: empty list", opt);
    return 0;
}

static int type_list(const char *s, qk_kernels_bench_opts *o, qk_err *err)
{
    if (strcmp(s, "all") == 0) {
        o->n_types = 0;
        for (int id = qk_type_next(-1); id >= 0; id = qk_type_next(id))
            o->types[o->n_types++] = id;
        return 0;
    }
    char buf[1024];
    if (strlen(s) >= sizeof buf)
        return qk_errf(err, QK_EINPUT, "--types: list too long");
    strcpy(buf, s);
    o->n_types = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const qk_type_traits *t = qk_type_by_name(tok);
        if (!t)
            return qk_errf(err, QK_EINPUT, "--types: unknown type '%s' (see qk-quant --list-types)", tok);
        if (o->n_types == QK_TYPE_MAX)
            return qk_errf(err, QK_EINPUT, "--types: too many");
        o->types[o->n_types++] = t->id;
    }
    if (o->n_types == 0)
        return qk_errf(err, QK_EINPUT, "--types: empty list");
    return 0;
}

static int level_list(const char *s, qk_kernels_bench_opts *o, qk_err *err)
{
    char buf[256];
    if (strlen(s) >= sizeof buf)
        return qk_errf(err, QK_EINPUT, "--levels: list too long");
    strcpy(buf, s);
    memset(o->level_on, 0, sizeof o->level_on);
    char *save = NULL;
    bool any = false;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int l = 0;
        while (l < QK_CPU_LEVELS && strcmp(tok, qk_cpu_level_name(l)))
            l++;
        if (l == QK_CPU_LEVELS)
            return qk_errf(err, QK_EINPUT, "--levels: unknown level '%s' (scalar, avx2, avx512)", tok);
        o->level_on[l] = any = true;
    }
    return any ? 0 : qk_errf(err, QK_EINPUT, "--levels: empty list");
}

/* -t: a list for model (0 = all CPUs each), 1..N for roofline, one count elsewhere. */
static int threads_opt(bargs *a, const char *s, qk_err *err)
{
    switch (a->sub) {
    case S_MODEL:
        if (int_list("-t", s, 0, 1024, a->model.threads, &a->model.n_threads, err))
            return QK_EINPUT;
        for (int i = 0; i < a->model.n_threads; i++)
            a->model.threads[i] = a->model.threads[i] ? a->model.threads[i] : qk_cpu_count();
        return 0;
    case S_KERNELS: return qk_cli_threads(s, &a->kern.threads, err);
    case S_ROOF: return qk_cli_threads(s, &a->roof.threads, err);
    default:
        if (qk_cli_threads(s, &a->sweep.threads, err))
            return QK_EINPUT;
        if (a->sweep.threads == 0)
            a->sweep.threads = qk_cpu_count();
        return 0;
    }
}

/* Apply option id (with its argument s) to a; 0 or the error's code. */
static int apply(bargs *a, int id, const char *s, qk_err *err)
{
    int64_t v;
    double d;
    switch (id) {
    case 'o': return qk_report_fmt_parse(s, &a->fmt, err);
    case O_JSON: a->fmt = QK_REPORT_JSON; return 0;
    case O_OUT: a->out = s; return 0;
    case 'q': a->quiet = true; return 0;
    case 't': return threads_opt(a, s, err);
    case 'm':
        if (a->sub != S_MODEL) {
            a->sweep.model = s;
            return 0;
        } else {
            const char **p = realloc(a->models, (size_t)(a->n_models + 1) * sizeof *p);
            if (!p)
                return qk_errf(err, QK_EIO, "out of memory");
            a->models = p;
            a->models[a->n_models++] = s;
            return 0;
        }
    case 'f': a->sweep.text = s; return 0;
    case 'c':
        if (qk_cli_int("-c", s, 4, 1 << 20, &v, err))
            return QK_EINPUT;
        if (v % 2)
            return qk_errf(err, QK_EINPUT, "-c %lld: want an even window", (long long)v);
        a->sweep.n_ctx = (int)v;
        return 0;
    case O_CHUNKS:
        if (qk_cli_int("--chunks", s, 1, 1 << 28, &v, err))
            return QK_EINPUT;
        a->sweep.chunks = (int)v;
        return 0;
    case 'p': return int_list("-p", s, 0, 1 << 20, a->model.prompts, &a->model.n_prompts, err);
    case 'n': return int_list("-n", s, 0, 1 << 20, a->model.gens, &a->model.n_gens, err);
    case 'd': return int_list("-d", s, 0, 1 << 20, a->model.depths, &a->model.n_depths, err);
    case 'r':
        if (qk_cli_int("-r", s, 1, 1000, &v, err))
            return QK_EINPUT;
        a->model.reps = a->kern.reps = (int)v;
        return 0;
    case 'b':
        if (qk_cli_int("-b", s, 1, 1 << 20, &v, err))
            return QK_EINPUT;
        a->model.n_batch = (int)v;
        return 0;
    case O_KV:
        if (strcmp(s, "f16") && strcmp(s, "f32"))
            return qk_errf(err, QK_EINPUT, "--kv-cache: '%s' is not f16 or f32", s);
        a->model.kv_type = s[1] == '1' ? QK_F16 : QK_F32;
        return 0;
    case O_ACT: return qk_act_type_parse(s, &a->model.act_type, err);
    case O_NO_WARMUP: a->model.warmup = false; return 0;
    case O_BW:
        if (qk_cli_double("--bandwidth", s, &d, err))
            return QK_EINPUT;
        if (d <= 0)
            return qk_errf(err, QK_EINPUT, "--bandwidth: must be positive (GB/s)");
        a->model.bandwidth = d * 1e9;
        return 0;
    case O_NO_ROOF: a->model.bandwidth = -1; return 0;
    case O_TYPES:
        if (a->sub == S_KV) {
            a->sweep.types = s;
            return 0;
        }
        return type_list(s, &a->kern, err);
    case O_LEVELS: return level_list(s, &a->kern, err);
    case O_SHAPE:
        if (a->sub == S_KERNELS)
            return qk_cli_shape(s, &a->kern.rows, &a->kern.cols, err);
        a->sweep.shape = s;
        return qk_cli_shape(s, &(int64_t){0}, &(int64_t){0}, err);
    case O_TOKENS:
        if (qk_cli_int("--tokens", s, 1, 4096, &v, err))
            return QK_EINPUT;
        a->kern.tokens = (int)v;
        return 0;
    case O_TIME:
        if (qk_cli_int("--time-ms", s, a->sub == S_ROOF, 600000, &v, err))
            return QK_EINPUT;
        a->kern.seconds = a->roof.fma_seconds = (double)v / 1000;
        return 0;
    case O_BLAS: a->kern.blas = s; return 0;
    case O_NO_BLAS: a->kern.blas = ""; return 0;
    case O_SIZE:
        if (qk_cli_int("--size", s, 1, 1 << 16, &v, err))
            return QK_EINPUT;
        a->roof.bytes = a->model.bw_bytes = (size_t)v << 20;
        return 0;
    case O_PASSES:
        if (qk_cli_int("--passes", s, 1, 10000, &v, err))
            return QK_EINPUT;
        a->roof.passes = (int)v;
        return 0;
    case O_TENSORS: a->sweep.tensors = s; return 0;
    case O_SYN: a->sweep.synthetic = s; return 0;
    case O_SEED:
        if (qk_cli_int("--seed", s, 1, INT64_MAX, &v, err))
            return QK_EINPUT;
        a->sweep.seed = (uint64_t)v;
        return 0;
    case O_FORMATS: a->sweep.formats = s; return 0;
    case O_PER: a->sweep.per_tensor = true; return 0;
    case O_BOUND: a->sweep.boundaries = s; return 0;
    default: return qk_errf(err, QK_EINPUT, "internal: option %d has no handler", id);
    }
}

/* Parse argv for subcommand sub from the table: 0 to run, 1 after --help (printed), or 2
 * with the error printed. */
static int parse(bargs *a, unsigned sub, const char *usage, int argc, char **argv)
{
    struct option lopts[N_BOPTS + 1];
    char shortopts[2 * N_BOPTS + 1];
    size_t nl = 0, ns = 0;
    for (size_t i = 0; i < N_BOPTS; i++) {
        if (!(bopts[i].subs & sub))
            continue;
        lopts[nl++] = (struct option){bopts[i].name, bopts[i].has_arg ? required_argument : no_argument, 0,
                                      bopts[i].id};
        if (bopts[i].id < 256) {
            shortopts[ns++] = (char)bopts[i].id;
            if (bopts[i].has_arg)
                shortopts[ns++] = ':';
        }
    }
    lopts[nl] = (struct option){0, 0, 0, 0};
    shortopts[ns] = 0;
    bargs_init(a, sub);
    if (sub == S_KERNELS) {
        qk_err e0 = {0};
        type_list(qk_bench_default_types, &a->kern, &e0);
    }
    qk_err err = {0};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, shortopts, lopts, NULL)) != -1) {
        if (c == 'h') {
            fputs(usage, stdout);
            return 1;
        }
        if (c == '?' || c == ':')
            return qk_cli_bad_option(argv[0], argv, optind);
        if (apply(a, c, optarg, &err))
            return qk_err_report(argv[0], &err);
    }
    if (optind < argc) {
        if (sub == S_MODEL) {
            qk_errf(&err, QK_EINPUT, "unexpected argument '%s' (models go with -m)", argv[optind]);
            return qk_err_report(argv[0], &err);
        }
        fprintf(stderr, "%s: unexpected argument '%s'; see --help\n", argv[0], argv[optind]);
        return 2;
    }
    return 0;
}

/* The report in --output-format on stdout or atomically into --out, built by
 * write_fn (a table, or a study's own printer). */
static int emit_with(const bargs *a, void (*write_fn)(FILE *, void *), void *ud, qk_err *err)
{
    if (!a->out) {
        write_fn(stdout, ud);
        if (fflush(stdout) || ferror(stdout))
            return qk_err_sys(err, "stdout", "cannot write the report");
        return 0;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem)
        return qk_errf(err, QK_EIO, "out of memory");
    write_fn(mem, ud);
    int rc = fclose(mem) ? qk_errf(err, QK_EIO, "out of memory") : 0;
    if (!rc)
        rc = qk_out_write_file(a->out, buf, len, err);
    free(buf);
    return rc;
}

typedef struct table_job {
    const qk_report *r;
    qk_report_fmt fmt;
    int rc;
    qk_err *err;
} table_job;

static void write_table(FILE *f, void *ud)
{
    table_job *j = ud;
    j->rc = qk_report_write(j->r, j->fmt, f, j->err);
}

/* A qk_report to stdout or --out, refusing an --out that is one of the inputs. */
static int emit(const bargs *a, const qk_report *r, const char *const *inputs, int n_inputs, qk_err *err)
{
    for (int i = 0; a->out && i < n_inputs; i++)
        if (qk_same_file(inputs[i], a->out))
            return qk_errf(err, QK_EINPUT, "%s: output is the same file as an input", a->out);
    table_job j = {r, a->fmt, 0, err};
    int rc = emit_with(a, write_table, &j, err);
    return j.rc ? j.rc : rc;
}

/* ---- model, kernels, roofline ------------------------------------------------------------ */

static int sub_model(int argc, char **argv)
{
    bargs a;
    int rc = parse(&a, S_MODEL, model_usage, argc, argv);
    qk_err err = {0};
    if (rc == 0 && a.n_models == 0)
        rc = qk_errf(&err, QK_EINPUT, "need a model: -m MODEL.gguf; see --help");
    int tests = 0;
    for (int i = 0; i < a.model.n_prompts; i++)
        tests += a.model.prompts[i] > 0;
    for (int i = 0; i < a.model.n_gens; i++)
        tests += a.model.gens[i] > 0;
    if (rc == 0 && tests == 0)
        rc = qk_errf(&err, QK_EINPUT, "nothing to measure: every -p and -n value is 0");
    if (rc == 0) {
        a.model.models = a.models;
        a.model.n_models = a.n_models;
        a.model.quiet = a.quiet;
        qk_report r;
        rc = qk_bench_model(&a.model, &r, &err);
        if (!rc)
            rc = emit(&a, &r, a.models, a.n_models, &err);
        qk_report_free(&r);
    }
    free(a.models);
    return rc == 1 ? 0 : err.code ? qk_err_report(argv[0], &err) : rc;
}

static int sub_kernels(int argc, char **argv)
{
    bargs a;
    int rc = parse(&a, S_KERNELS, kernels_usage, argc, argv);
    if (rc)
        return rc == 1 ? 0 : rc;
    qk_err err = {0};
    a.kern.quiet = a.quiet;
    qk_report r;
    rc = qk_bench_kernels(&a.kern, &r, &err);
    if (!rc)
        rc = emit(&a, &r, NULL, 0, &err);
    qk_report_free(&r);
    return rc ? qk_err_report(argv[0], &err) : 0;
}

static int sub_roofline(int argc, char **argv)
{
    bargs a;
    int rc = parse(&a, S_ROOF, roofline_usage, argc, argv);
    if (rc)
        return rc == 1 ? 0 : rc;
    qk_err err = {0};
    a.roof.quiet = a.quiet;
    qk_report r;
    rc = qk_bench_roofline(&a.roof, &r, &err);
    if (!rc)
        rc = emit(&a, &r, NULL, 0, &err);
    qk_report_free(&r);
    return rc ? qk_err_report(argv[0], &err) : 0;
}

/* ---- error, wire, kv: the numerics studies (lib/study/study_cmd.h) ------------------------- */

static const char *const fmt_names[] = {"md", "csv", "json"};

typedef struct study_job {
    qk_sweep_emit write_fn;
    void *ud;
    const char *fmt;
} study_job;

static void write_study(FILE *f, void *ud)
{
    const study_job *j = ud;
    j->write_fn(f, j->fmt, j->ud);
}

/* qk_sweep_sink: the study's report on stdout or atomically into --out. */
static int study_emit(void *p, qk_sweep_emit write_fn, void *ud, qk_err *err)
{
    const bargs *a = p;
    study_job j = {write_fn, ud, fmt_names[a->fmt]};
    return emit_with(a, write_study, &j, err);
}

static int sub_study(int argc, char **argv, unsigned sub, const char *usage)
{
    bargs a;
    int rc = parse(&a, sub, usage, argc, argv);
    if (rc)
        return rc == 1 ? 0 : rc;
    const qk_sweep_opts *o = &a.sweep;
    if (sub != S_ERROR && (!o->model || !o->text)) {
        fprintf(stderr, "%s: need -m MODEL.gguf and -f TEXT; see --help\n", argv[0]);
        return 2;
    }
    const char *inputs[2] = {o->model, o->text};
    for (int i = 0; i < 2 && a.out; i++)
        if (inputs[i] && qk_same_file(inputs[i], a.out)) {
            fprintf(stderr, "%s: %s: output is the same file as an input\n", argv[0], a.out);
            return 2;
        }
    qk_err err = {0};
    rc = sub == S_ERROR  ? qk_sweep_error(o, study_emit, &a, &err)
         : sub == S_WIRE ? qk_sweep_wire(o, study_emit, &a, &err)
                         : qk_sweep_kv(o, study_emit, &a, &err);
    return rc ? qk_err_report(argv[0], &err) : 0;
}

static int sub_error(int argc, char **argv) { return sub_study(argc, argv, S_ERROR, error_usage); }
static int sub_wire(int argc, char **argv) { return sub_study(argc, argv, S_WIRE, wire_usage); }
static int sub_kv(int argc, char **argv) { return sub_study(argc, argv, S_KV, kv_usage); }

/* ---- dispatch --------------------------------------------------------------------------- */

static const struct {
    const char *name;
    int (*fn)(int, char **);
} subs[] = {
    {"model", sub_model},
    {"kernels", sub_kernels},
    {"roofline", sub_roofline},
    {"error", sub_error},
    {"wire", sub_wire},
    {"kv", sub_kv},
};

int cmd_bench(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "%s: need a subcommand (model, kernels, roofline, error, wire, kv); see --help\n", argv[0]);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(usage_text, stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        if (strcmp(argv[1], subs[i].name))
            continue;
        char display[64];
        snprintf(display, sizeof display, "%s %s", argv[0], subs[i].name);
        argv[1] = display;
        return subs[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "%s: '%s' is not a subcommand (model, kernels, roofline, error, wire, kv); see --help\n",
            argv[0], argv[1]);
    return 2;
}
