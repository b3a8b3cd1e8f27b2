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
    "after one warm-up run; for tg also the share of the read-bandwidth roofline.\n"
    "\n"
    "  -m, --model FILE       a GGUF model (repeat for several)\n"
    "  -p, --n-prompt LIST    prompt lengths, comma-separated (default 512; 0: none)\n"
    "  -n, --n-gen LIST       generation lengths (default 128; 0: none)\n"
    "  -r, --repetitions N    timed repetitions (default 5)\n"
    "  -t, --threads LIST     thread counts (default: all CPUs; 0 = all CPUs)\n"
    "  -b, --batch-size N     tokens per prompt batch (default 512)\n"
    "  --kv-cache TYPE        f16 (default, as llama.cpp) or f32\n"
    "  --no-warmup            skip the warm-up run\n"
    "  --bandwidth GBPS       read bandwidth for the roofline instead of measuring it\n"
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
    "Read bandwidth (best of several passes over a large buffer) and peak FMA rate (independent\n"
    "fused multiply-add chains on the widest vector unit) for 1..N threads.\n"
    "\n"
    "  -t, --threads N        measure 1..N threads (default: all CPUs)\n"
    "  --size MIB             bandwidth buffer in MiB (default 256)\n"
    "  --passes N             bandwidth passes, the best counts (default 10)\n"
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

/* Options every subcommand shares. */
enum { O_JSON = 256, O_OUT, O_KV, O_NO_WARMUP, O_BW, O_NO_ROOF, O_TYPES, O_LEVELS, O_SHAPE,
       O_TOKENS, O_TIME, O_BLAS, O_NO_BLAS, O_SIZE, O_PASSES, O_TENSORS, O_SYN, O_SEED, O_FORMATS,
       O_PER, O_BOUND, O_CHUNKS };

typedef struct {
    qk_report_fmt fmt;
    const char *out;
    bool quiet;
} common;

/* Handle a shared option; returns 1 when c was one, 0 when not, -1 on error. */
static int common_opt(common *cm, int c, qk_err *err)
{
    switch (c) {
    case 'o': return qk_report_fmt_parse(optarg, &cm->fmt, err) ? -1 : 1;
    case O_JSON: cm->fmt = QK_REPORT_JSON; return 1;
    case O_OUT: cm->out = optarg; return 1;
    case 'q': cm->quiet = true; return 1;
    default: return 0;
    }
}

/* Render r to stdout or --out. */
static int emit(const common *cm, const qk_report *r, const char *const *inputs, int n_inputs,
                qk_err *err)
{
    if (!cm->out) {
        int rc = qk_report_write(r, cm->fmt, stdout, err);
        if (!rc && (fflush(stdout) || ferror(stdout)))
            rc = qk_err_sys(err, "stdout", "cannot write the report");
        return rc;
    }
    for (int i = 0; i < n_inputs; i++)
        if (qk_same_file(inputs[i], cm->out))
            return qk_errf(err, QK_EINPUT, "%s: output is the same file as an input", cm->out);
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem)
        return qk_errf(err, QK_EIO, "out of memory");
    int rc = qk_report_write(r, cm->fmt, mem, err);
    if (fclose(mem) && !rc)
        rc = qk_errf(err, QK_EIO, "out of memory");
    qk_out o;
    if (!rc && !(rc = qk_out_open(&o, cm->out, err)))
        if ((rc = qk_out_write(&o, buf, len, err)) || (rc = qk_out_commit(&o, err)))
            qk_out_abort(&o);
    free(buf);
    return rc;
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

/* ---- model ------------------------------------------------------------------------------ */

static int sub_model(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"n-prompt", required_argument, 0, 'p'},
        {"n-gen", required_argument, 0, 'n'}, {"repetitions", required_argument, 0, 'r'},
        {"threads", required_argument, 0, 't'}, {"batch-size", required_argument, 0, 'b'},
        {"kv-cache", required_argument, 0, O_KV}, {"no-warmup", no_argument, 0, O_NO_WARMUP},
        {"bandwidth", required_argument, 0, O_BW}, {"no-roofline", no_argument, 0, O_NO_ROOF},
        {"output-format", required_argument, 0, 'o'}, {"json", no_argument, 0, O_JSON},
        {"out", required_argument, 0, O_OUT}, {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    qk_model_bench_opts o = {.prompts = {512}, .n_prompts = 1, .gens = {128}, .n_gens = 1,
                             .threads = {qk_cpu_count()}, .n_threads = 1, .reps = 5,
                             .warmup = true, .n_batch = 512, .kv_type = QK_F16,
                             .bw_bytes = (size_t)256 << 20, .bw_passes = 5, .seed = 1234};
    common cm = {0};
    const char **models = NULL;
    int n_models = 0, c, rc = 0;
    qk_err err = {0};
    int64_t v;
    double d;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "m:p:n:r:t:b:o:qh", opts, NULL)) != -1) {
        int k = common_opt(&cm, c, &err);
        if (k < 0)
            goto fail;
        if (k)
            continue;
        switch (c) {
        case 'm': {
            const char **p = realloc(models, (size_t)(n_models + 1) * sizeof *p);
            if (!p) {
                qk_errf(&err, QK_EIO, "out of memory");
                goto fail;
            }
            models = p;
            models[n_models++] = optarg;
            break;
        }
        case 'p':
            if (int_list("-p", optarg, 0, 1 << 20, o.prompts, &o.n_prompts, &err))
                goto fail;
            break;
        case 'n':
            if (int_list("-n", optarg, 0, 1 << 20, o.gens, &o.n_gens, &err))
                goto fail;
            break;
        case 'r':
            if (qk_cli_int("-r", optarg, 1, 1000, &v, &err))
                goto fail;
            o.reps = (int)v;
            break;
        case 't':
            if (int_list("-t", optarg, 0, 1024, o.threads, &o.n_threads, &err))
                goto fail;
            for (int i = 0; i < o.n_threads; i++)
                o.threads[i] = o.threads[i] ? o.threads[i] : qk_cpu_count();
            break;
        case 'b':
            if (qk_cli_int("-b", optarg, 1, 1 << 20, &v, &err))
                goto fail;
            o.n_batch = (int)v;
            break;
        case O_KV:
            if (strcmp(optarg, "f16") && strcmp(optarg, "f32")) {
                qk_errf(&err, QK_EINPUT, "--kv-cache: '%s' is not f16 or f32", optarg);
                goto fail;
            }
            o.kv_type = optarg[1] == '1' ? QK_F16 : QK_F32;
            break;
        case O_NO_WARMUP: o.warmup = false; break;
        case O_BW:
            if (qk_cli_double("--bandwidth", optarg, &d, &err))
                goto fail;
            if (d <= 0) {
                qk_errf(&err, QK_EINPUT, "--bandwidth: must be positive (GB/s)");
                goto fail;
            }
            o.bandwidth = d * 1e9;
            break;
        case O_NO_ROOF: o.bandwidth = -1; break;
        case 'h': fputs(model_usage, stdout); free(models); return 0;
        default: free(models); return qk_cli_bad_option(argv[0], argv, optind);
        }
    }
    if (optind < argc) {
        qk_errf(&err, QK_EINPUT, "unexpected argument '%s' (models go with -m)", argv[optind]);
        goto fail;
    }
    if (n_models == 0) {
        qk_errf(&err, QK_EINPUT, "need a model: -m MODEL.gguf; see --help");
        goto fail;
    }
    int tests = 0;
    for (int i = 0; i < o.n_prompts; i++)
        tests += o.prompts[i] > 0;
    for (int i = 0; i < o.n_gens; i++)
        tests += o.gens[i] > 0;
    if (tests == 0) {
        qk_errf(&err, QK_EINPUT, "nothing to measure: every -p and -n value is 0");
        goto fail;
    }
    o.models = models;
    o.n_models = n_models;
    o.quiet = cm.quiet;
    qk_report r;
    rc = qk_bench_model(&o, &r, &err);
    if (!rc)
        rc = emit(&cm, &r, models, n_models, &err);
    qk_report_free(&r);
    free(models);
    return rc ? qk_err_report(argv[0], &err) : 0;
fail:
    free(models);
    return qk_err_report(argv[0], &err);
}

/* ---- kernels ------------------------------------------------------------------------ */

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

static int sub_kernels(int argc, char **argv)
{
    static const struct option opts[] = {
        {"types", required_argument, 0, O_TYPES}, {"levels", required_argument, 0, O_LEVELS},
        {"shape", required_argument, 0, O_SHAPE}, {"tokens", required_argument, 0, O_TOKENS},
        {"time-ms", required_argument, 0, O_TIME}, {"repetitions", required_argument, 0, 'r'},
        {"threads", required_argument, 0, 't'}, {"blas", required_argument, 0, O_BLAS},
        {"no-blas", no_argument, 0, O_NO_BLAS},
        {"output-format", required_argument, 0, 'o'}, {"json", no_argument, 0, O_JSON},
        {"out", required_argument, 0, O_OUT}, {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    qk_kernels_bench_opts o = {.threads = 1, .rows = 1024, .cols = 4096, .tokens = 16,
                               .seconds = 0.1, .reps = 3};
    common cm = {0};
    qk_err err = {0};
    int c;
    int64_t v;
    if (type_list(qk_bench_default_types, &o, &err))
        return qk_err_report(argv[0], &err);
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "r:t:o:qh", opts, NULL)) != -1) {
        int k = common_opt(&cm, c, &err);
        if (k < 0)
            return qk_err_report(argv[0], &err);
        if (k)
            continue;
        switch (c) {
        case O_TYPES:
            if (type_list(optarg, &o, &err))
                return qk_err_report(argv[0], &err);
            break;
        case O_LEVELS:
            if (level_list(optarg, &o, &err))
                return qk_err_report(argv[0], &err);
            break;
        case O_SHAPE:
            if (qk_cli_shape(optarg, &o.rows, &o.cols, &err))
                return qk_err_report(argv[0], &err);
            break;
        case O_TOKENS:
            if (qk_cli_int("--tokens", optarg, 1, 4096, &v, &err))
                return qk_err_report(argv[0], &err);
            o.tokens = (int)v;
            break;
        case O_TIME:
            if (qk_cli_int("--time-ms", optarg, 0, 600000, &v, &err))
                return qk_err_report(argv[0], &err);
            o.seconds = (double)v / 1000;
            break;
        case 'r':
            if (qk_cli_int("-r", optarg, 1, 1000, &v, &err))
                return qk_err_report(argv[0], &err);
            o.reps = (int)v;
            break;
        case 't':
            if (qk_cli_threads(optarg, &o.threads, &err))
                return qk_err_report(argv[0], &err);
            break;
        case O_BLAS: o.blas = optarg; break;
        case O_NO_BLAS: o.blas = ""; break;
        case 'h': fputs(kernels_usage, stdout); return 0;
        default: return qk_cli_bad_option(argv[0], argv, optind);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'; see --help\n", argv[0], argv[optind]);
        return 2;
    }
    o.quiet = cm.quiet;
    qk_report r;
    int rc = qk_bench_kernels(&o, &r, &err);
    if (!rc)
        rc = emit(&cm, &r, NULL, 0, &err);
    qk_report_free(&r);
    return rc ? qk_err_report(argv[0], &err) : 0;
}

/* ---- roofline ------------------------------------------------------------------------ */

static int sub_roofline(int argc, char **argv)
{
    static const struct option opts[] = {
        {"threads", required_argument, 0, 't'}, {"size", required_argument, 0, O_SIZE},
        {"passes", required_argument, 0, O_PASSES}, {"time-ms", required_argument, 0, O_TIME},
        {"output-format", required_argument, 0, 'o'}, {"json", no_argument, 0, O_JSON},
        {"out", required_argument, 0, O_OUT}, {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    qk_roofline_opts o = {.threads = qk_cpu_count(), .bytes = (size_t)256 << 20, .passes = 10,
                          .fma_seconds = 0.3};
    common cm = {0};
    qk_err err = {0};
    int c;
    int64_t v;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "t:o:qh", opts, NULL)) != -1) {
        int k = common_opt(&cm, c, &err);
        if (k < 0)
            return qk_err_report(argv[0], &err);
        if (k)
            continue;
        switch (c) {
        case 't':
            if (qk_cli_threads(optarg, &o.threads, &err))
                return qk_err_report(argv[0], &err);
            break;
        case O_SIZE:
            if (qk_cli_int("--size", optarg, 1, 1 << 16, &v, &err))
                return qk_err_report(argv[0], &err);
            o.bytes = (size_t)v << 20;
            break;
        case O_PASSES:
            if (qk_cli_int("--passes", optarg, 1, 10000, &v, &err))
                return qk_err_report(argv[0], &err);
            o.passes = (int)v;
            break;
        case O_TIME:
            if (qk_cli_int("--time-ms", optarg, 1, 600000, &v, &err))
                return qk_err_report(argv[0], &err);
            o.fma_seconds = (double)v / 1000;
            break;
        case 'h': fputs(roofline_usage, stdout); return 0;
        default: return qk_cli_bad_option(argv[0], argv, optind);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'; see --help\n", argv[0], argv[optind]);
        return 2;
    }
    o.quiet = cm.quiet;
    qk_report r;
    int rc = qk_bench_roofline(&o, &r, &err);
    if (!rc)
        rc = emit(&cm, &r, NULL, 0, &err);
    qk_report_free(&r);
    return rc ? qk_err_report(argv[0], &err) : 0;
}

/* ---- error, wire, kv: the numerics studies (lib/study/study_cmd.h) ------------------------- */

typedef struct {
    const common *cm;
} study_sink;

static const char *const fmt_names[] = {"md", "csv", "json"};

/* qk_sweep_sink: the report in --output-format on stdout or atomically into --out. */
static int study_emit(void *p, qk_sweep_emit write_fn, void *ud, qk_err *err)
{
    const study_sink *s = p;
    const char *fmt = fmt_names[s->cm->fmt];
    if (!s->cm->out) {
        write_fn(stdout, fmt, ud);
        if (fflush(stdout) || ferror(stdout))
            return qk_err_sys(err, "stdout", "cannot write the report");
        return 0;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem)
        return qk_errf(err, QK_EIO, "out of memory");
    write_fn(mem, fmt, ud);
    int rc = fclose(mem) ? qk_errf(err, QK_EIO, "out of memory") : 0;
    qk_out o;
    if (!rc && !(rc = qk_out_open(&o, s->cm->out, err)))
        if ((rc = qk_out_write(&o, buf, len, err)) || (rc = qk_out_commit(&o, err)))
            qk_out_abort(&o);
    free(buf);
    return rc;
}

enum { STUDY_ERROR, STUDY_WIRE, STUDY_KV };

static int sub_study(int argc, char **argv, int kind)
{
    static const struct option error_opts[] = {
        {"model", required_argument, 0, 'm'}, {"tensors", required_argument, 0, O_TENSORS},
        {"synthetic", required_argument, 0, O_SYN}, {"shape", required_argument, 0, O_SHAPE},
        {"seed", required_argument, 0, O_SEED}, {"formats", required_argument, 0, O_FORMATS},
        {"per-tensor", no_argument, 0, O_PER}, {"threads", required_argument, 0, 't'},
        {"output-format", required_argument, 0, 'o'}, {"json", no_argument, 0, O_JSON},
        {"out", required_argument, 0, O_OUT}, {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    static const struct option wire_opts[] = {
        {"model", required_argument, 0, 'm'}, {"file", required_argument, 0, 'f'},
        {"ctx-size", required_argument, 0, 'c'}, {"chunks", required_argument, 0, O_CHUNKS},
        {"formats", required_argument, 0, O_FORMATS}, {"boundaries", required_argument, 0, O_BOUND},
        {"threads", required_argument, 0, 't'}, {"output-format", required_argument, 0, 'o'},
        {"json", no_argument, 0, O_JSON}, {"out", required_argument, 0, O_OUT},
        {"quiet", no_argument, 0, 'q'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    static const struct option kv_opts[] = {
        {"model", required_argument, 0, 'm'}, {"file", required_argument, 0, 'f'},
        {"ctx-size", required_argument, 0, 'c'}, {"chunks", required_argument, 0, O_CHUNKS},
        {"types", required_argument, 0, O_TYPES}, {"threads", required_argument, 0, 't'},
        {"output-format", required_argument, 0, 'o'}, {"json", no_argument, 0, O_JSON},
        {"out", required_argument, 0, O_OUT}, {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const struct option *opts = kind == STUDY_ERROR ? error_opts : kind == STUDY_WIRE ? wire_opts
                                                                                      : kv_opts;
    const char *usage = kind == STUDY_ERROR ? error_usage : kind == STUDY_WIRE ? wire_usage
                                                                               : kv_usage;
    const char *shortopts = kind == STUDY_ERROR ? "m:t:o:qh" : "m:f:c:t:o:qh";
    qk_sweep_opts o = {.n_ctx = 256, .threads = 1, .seed = 1};
    common cm = {0};
    qk_err err = {0};
    int c;
    int64_t v;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
        int k = common_opt(&cm, c, &err);
        if (k < 0)
            return qk_err_report(argv[0], &err);
        if (k)
            continue;
        int rc = 0;
        switch (c) {
        case 'm': o.model = optarg; break;
        case 'f': o.text = optarg; break;
        case 'c':
            if (!(rc = qk_cli_int("-c", optarg, 4, 1 << 20, &v, &err)))
                o.n_ctx = (int)v;
            if (!rc && v % 2)
                rc = qk_errf(&err, QK_EINPUT, "-c %lld: want an even window", (long long)v);
            break;
        case O_CHUNKS:
            if (!(rc = qk_cli_int("--chunks", optarg, 1, 1 << 28, &v, &err)))
                o.chunks = (int)v;
            break;
        case 't':
            if (!(rc = qk_cli_threads(optarg, &o.threads, &err)) && o.threads == 0)
                o.threads = qk_cpu_count();
            break;
        case O_TENSORS: o.tensors = optarg; break;
        case O_SYN: o.synthetic = optarg; break;
        case O_SHAPE: {
            int64_t r, cc;
            if (!(rc = qk_cli_shape(optarg, &r, &cc, &err)))
                o.shape = optarg;
            break;
        }
        case O_SEED:
            if (!(rc = qk_cli_int("--seed", optarg, 1, INT64_MAX, &v, &err)))
                o.seed = (uint64_t)v;
            break;
        case O_FORMATS: o.formats = optarg; break;
        case O_PER: o.per_tensor = true; break;
        case O_BOUND: o.boundaries = optarg; break;
        case O_TYPES: o.types = optarg; break;
        case 'h': fputs(usage, stdout); return 0;
        default: return qk_cli_bad_option(argv[0], argv, optind);
        }
        if (rc)
            return qk_err_report(argv[0], &err);
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'; see --help\n", argv[0], argv[optind]);
        return 2;
    }
    if (kind != STUDY_ERROR && (!o.model || !o.text)) {
        fprintf(stderr, "%s: need -m MODEL.gguf and -f TEXT; see --help\n", argv[0]);
        return 2;
    }
    const char *inputs[2] = {o.model, o.text};
    for (int i = 0; i < 2 && cm.out; i++)
        if (inputs[i] && qk_same_file(inputs[i], cm.out)) {
            fprintf(stderr, "%s: %s: output is the same file as an input\n", argv[0], cm.out);
            return 2;
        }
    study_sink sink = {&cm};
    int rc = kind == STUDY_ERROR  ? qk_sweep_error(&o, study_emit, &sink, &err)
             : kind == STUDY_WIRE ? qk_sweep_wire(&o, study_emit, &sink, &err)
                                  : qk_sweep_kv(&o, study_emit, &sink, &err);
    return rc ? qk_err_report(argv[0], &err) : 0;
}

static int sub_error(int argc, char **argv) { return sub_study(argc, argv, STUDY_ERROR); }
static int sub_wire(int argc, char **argv) { return sub_study(argc, argv, STUDY_WIRE); }
static int sub_kv(int argc, char **argv) { return sub_study(argc, argv, STUDY_KV); }

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
