/* quant.c - qk-quant: quantize GGUF models as llama-quantize does (same
 * command line, byte-identical files), and encode/decode raw tensors through
 * the format table (--list-types, --raw-encode, --raw-decode).
 *
 * The model path: options -> imatrix (lib/quant/imatrix.h) -> plan (per-tensor
 * types and every input check, lib/quant/quant_model.h) -> streamed output ->
 * report (text, or --json). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/ckd.h"
#include "formats/ckpt.h"
#include "lib/quant/ckpt_write.h"
#include "lib/quant/gptq_model.h"
#include "lib/core/cli.h"
#include "lib/core/files.h"
#include "cmd/commands.h"
#include "formats/gguf.h"
#include "lib/quant/imatrix.h"
#include "lib/core/json.h"
#include "lib/core/mapfile.h"
#include "lib/core/outfile.h"
#include "lib/core/progress.h"
#include "lib/quant/quant_model.h"
#include "lib/quant/quant_raw.h"
#include "lib/convert/convert.h"
#include "kernels/quantize.h"
#include "lib/core/threads.h"
#include "kernels/types.h"

static const char usage_text[] =
    "usage: qk-quant [options] IN.gguf|MODEL_DIR [OUT.gguf] TYPE [NTHREADS]\n"
    "       qk-quant --list-types [--json]\n"
    "       qk-quant --raw-encode TYPE --shape ROWSxCOLS [--imatrix FILE.f32] [-t N] IN.f32 OUT.bin\n"
    "       qk-quant --raw-decode TYPE --shape ROWSxCOLS [-t N] IN.bin OUT.f32\n"
    "       qk-quant --to SCHEME [--asym] [--group N] [--ignore REGEX] [--shard-size BYTES]\n"
    "                [--rotate hadamard] SRC OUT_DIR\n"
    "       qk-quant --to ct-w4a16 --method gptq|awq --calib TEXT [--calib-chunks N] [-c N] SRC OUT_DIR\n"
    "       qk-quant --to ct-w8a8 --method gptq|smoothquant|smoothquant+gptq [--smoothing-strength A]\n"
    "                --calib TEXT [--calib-chunks N] [-c N] SRC OUT_DIR\n"
    "       qk-quant --to ct-fp8-static|ct-w8a8-static|ct-nvfp4a4 --calib TEXT [--calib-chunks N] [-c N]\n"
    "                SRC OUT_DIR\n"
    "\n"
    "Quantize a GGUF model the way llama-quantize (llama.cpp d32676d) does: the same presets,\n"
    "per-tensor type rules, options and metadata, and a byte-identical output file.  Without\n"
    "OUT.gguf the output is ggml-model-TYPE.gguf beside the input.  A Hugging Face MODEL_DIR is\n"
    "first converted as qk-convert --outtype f32 (f16 for F16 safetensors) does, into a temporary\n"
    "file beside OUT (removed afterwards; default OUT: MODEL_DIR/ggml-model-TYPE.gguf): the output\n"
    "equals qk-convert then qk-quant.\n"
    "\n"
    "llama-quantize options:\n"
    "  --allow-requantize         allow re-encoding tensors that are already quantized\n"
    "  --leave-output-tensor      leave output.weight in its type\n"
    "  --pure                     no k-quant mixture: every quantized tensor gets TYPE's type\n"
    "  --imatrix FILE             importance matrix (llama-imatrix's GGUF or legacy .dat)\n"
    "  --include-weights NAME     use the imatrix only for tensors whose name contains NAME\n"
    "  --exclude-weights NAME     do not use the imatrix for tensors whose name contains NAME\n"
    "  --output-tensor-type T     ggml type for output.weight\n"
    "  --token-embedding-type T   ggml type for token_embd.weight\n"
    "  --tensor-type REGEX=T      type for tensors whose name matches REGEX (repeatable)\n"
    "  --tensor-type-file FILE    REGEX=T entries separated by spaces or newlines\n"
    "  --prune-layers L0,L1,...   drop these blocks and renumber the rest\n"
    "  --keep-split               one output shard per input shard (OUT-0000i-of-0000n.gguf)\n"
    "  --override-kv KEY=TYPE:V   set metadata in the output (TYPE int, float, bool, str)\n"
    "  --dry-run                  show the types and sizes, write nothing\n"
    "Hugging Face checkpoints (--to):\n"
    "  --to SCHEME SRC OUT_DIR    write a quantized HF directory as the producing tool would: ct-fp8\n"
    "                             ct-fp8-block ct-w8a8 ct-w4a16 ct-w4a8 ct-nvfp4 ct-mxfp4 modelopt-nvfp4\n"
    "                             mlx-q2..mlx-q8; or dequantize any recognised scheme: bf16 f16 f32;\n"
    "                             with static activation scales from --calib (llm-compressor's presets\n"
    "                             FP8 and NVFP4, and INT8 W8A8 per tensor): ct-fp8-static, ct-nvfp4a4,\n"
    "                             ct-w8a8-static\n"
    "  --asym                     ct-w4a16 with zero points\n"
    "  --group N                  group (block) size instead of the scheme's default\n"
    "  --ignore REGEX             leave modules matching REGEX (POSIX ERE) unquantized\n"
    "  --shard-size BYTES         shard the weights past BYTES (default 5 GB)\n"
    "  --rotate hadamard          SpinQuant's Hadamard rotations (R1 residual, R2 per head, R4 online\n"
    "                             before down_proj: block 16 nvfp4, 32 mxfp4, else the largest power\n"
    "                             of two dividing intermediate_size), written as transform_config\n"
    "                             (with --method or static scales: calibrated on the rotated model)\n"
    "raw encode/decode of datacenter schemes (see --list-types):\n"
    "  --granularity G            tensor|channel|token|group:G|block:RxC|none (int8, int4, fp8, ...)\n"
    "  --global-scale S|auto      NVFP4 global scale (mxfp4/nvfp4 then mean the OCP/NVIDIA schemes)\n"
    "  --ct                       NVFP4 in compressed-tensors' convention (global scale 2688/amax)\n"
    "calibration (GPTQ, AWQ, SmoothQuant, described in qk-quant(1)):\n"
    "  --method M                 rtn (default: round to nearest), gptq (GGUF types; --to ct-w4a16\n"
    "                             and ct-w8a8 as llm-compressor's GPTQModifier), awq (--to ct-w4a16,\n"
    "                             as its AWQModifier), smoothquant (--to ct-w8a8, as its\n"
    "                             SmoothQuantModifier; --to f32|f16|bf16: the smoothed float model)\n"
    "                             or smoothquant+gptq (--to ct-w8a8: SmoothQuant, then GPTQ)\n"
    "  --smoothing-strength A     SmoothQuant's alpha in [0, 1] (default 0.5)\n"
    "  --calib TEXT               calibration text for --method gptq, awq, smoothquant, and for the\n"
    "                             input scales of ct-fp8-static, ct-w8a8-static and ct-nvfp4a4\n"
    "                             (required there)\n"
    "  --calib-chunks N           use the first N chunks (default: all the text has)\n"
    "  -c, --calib-ctx N          tokens per chunk (default 512)\n"
    "  --tokenizer FILE           --to: the calibration text's tokenizer (GGUF, tokenizer.json or\n"
    "                             HF directory; default SRC's tokenizer.json)\n"
    "  --damp X                   GPTQ dampening, a fraction of the mean Hessian diagonal (0.01)\n"
    "  --no-act-order             GPTQ columns in their order, not by decreasing input energy\n"
    "qk options:\n"
    "  --measure                  per-tensor SNR and NMSE of the encoded data against its source\n"
    "  --json                     one JSON report on stdout (schema in qk-quant(1))\n"
    "  -t, --threads N            threads (0 = all CPUs, the default; same as NTHREADS)\n"
    "  -q, --quiet                no progress bar and no per-tensor report\n"
    "  -h, --help                 this text\n"
    "raw tensors:\n"
    "  --list-types               the format table: name, id, block, bytes, bits/weight, importance,\n"
    "                             activation type\n"
    "  --raw-encode TYPE          encode IN.f32 (ROWS x COLS float32) into OUT.bin\n"
    "  --raw-decode TYPE          decode IN.bin (ROWS x COLS elements of TYPE) into OUT.f32\n"
    "  --shape ROWSxCOLS          tensor shape; COLS must be a multiple of the type's block size\n"
    "  --imatrix FILE.f32         with --raw-encode: COLS float32 importance weights\n"
    "\n"
    "Exit codes: 0 ok, 2 usage or input error, 3 I/O error.\n"
    "\n"
    "TYPE (name or number):\n";

static void print_usage(void)
{
    fputs(usage_text, stdout);
    size_t n;
    const qk_quant_preset *p = qk_quant_presets(&n);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(p[i].name, "COPY") != 0)
            printf("  %2d  or  %-9s :%s\n", p[i].ftype, p[i].name, p[i].desc);
        else
            printf("          %-9s : %s\n", p[i].name, p[i].desc);
    }
}

/* ---- GGUF model quantization ------------------------------------------------ */

typedef struct model_args {
    qk_quant_opts o;
    const char *imatrix_path;
    const char **include, **exclude;
    size_t n_include, n_exclude;
    qk_quant_tt *tt;
    qk_quant_kvo *kvo;
    int *prune;
    bool json, quiet, threads_set;
    bool gptq;                  /* --method gptq */
    bool awq;                   /* --method awq (--to ct-w4a16 only) */
    int sq;                     /* --method smoothquant or smoothquant+gptq (--to only): its QK_CALIB_* */
    double alpha;               /* --smoothing-strength (-1: not given) */
    qk_gptq_calib calib;
} model_args;

static void free_args(model_args *a)
{
    for (size_t i = 0; i < a->o.n_tt; i++)
        free(a->tt[i].pattern);
    free(a->tt);
    free(a->kvo);
    free(a->prune);
    free(a->include);
    free(a->exclude);
}

static int push_str(const char ***v, size_t *n, const char *s, qk_err *err)
{
    const char **p = realloc(*v, (*n + 1) * sizeof *p);
    if (!p)
        return qk_errf(err, QK_EIO, "out of memory");
    p[(*n)++] = s;
    *v = p;
    return 0;
}

static int push_tt(model_args *a, const char *s, qk_err *err)
{
    qk_quant_tt *p = realloc(a->tt, (a->o.n_tt + 1) * sizeof *p);
    if (!p)
        return qk_errf(err, QK_EIO, "out of memory");
    a->tt = p;
    int rc = qk_quant_parse_tt(s, &p[a->o.n_tt], err);
    if (!rc)
        a->o.n_tt++;
    return rc;
}

static int read_tt_file(model_args *a, const char *path, qk_err *err)
{
    char *text;
    size_t n;
    int rc = qk_read_file(path, false, &text, &n, err);
    if (!rc)
        rc = qk_quant_parse_tt_list(text, n, &a->tt, &a->o.n_tt, err);
    free(text);
    return rc;
}

static int cmp_int(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

/* --prune-layers L0,L1,...: sorted, duplicates removed. */
static int parse_prune(model_args *a, const char *s, qk_err *err)
{
    size_t n = 0;
    for (const char *p = s; *p; p++)
        n += *p == ',';
    int *v = realloc(a->prune, (a->o.n_prune + n + 1) * sizeof *v);
    if (!v)
        return qk_errf(err, QK_EIO, "out of memory");
    a->prune = v;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        long id = strtol(p, &end, 10);
        if (end == p || errno || id < 0 || id > 1023 || (*end && *end != ','))
            return qk_errf(err, QK_EINPUT, "--prune-layers: invalid layer id in '%s'", s);
        v[a->o.n_prune++] = (int)id;
        if (!*end)
            break;
        p = end + 1;
    }
    qsort(v, a->o.n_prune, sizeof *v, cmp_int);
    size_t k = 0;
    for (size_t i = 0; i < a->o.n_prune; i++)
        if (k == 0 || v[k - 1] != v[i])
            v[k++] = v[i];
    a->o.n_prune = k;
    return 0;
}

static int parse_ggml_type(const char *opt, const char *s, int *out, qk_err *err)
{
    const qk_type_traits *t = qk_type_by_name(s);
    if (!t || !t->in_gguf || t->id >= QK_GGML_TYPE_COUNT)
        return qk_errf(err, QK_EINPUT, "%s: invalid ggml type '%s' (see --list-types)", opt, s);
    *out = t->id;
    return 0;
}

/* llama-quantize's default output: ggml-model-TYPE.gguf beside the input
 * (no .gguf with --keep-split, whose shard names add it). */
static char *default_output(const char *in, const char *preset, bool keep_split)
{
    const char *slash = strrchr(in, '/');
    size_t dir = slash ? (size_t)(slash - in) + 1 : 0;
    size_t n = dir + strlen(preset) + 32;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%.*sggml-model-%s%s", (int)dir, in, preset, keep_split ? "" : ".gguf");
    return s;
}

static double bpw(uint64_t bytes, uint64_t elems) { return elems ? (double)bytes * 8.0 / (double)elems : 0.0; }

static double snr_db(const qk_quant_item *it)
{
    return it->err2 > 0 ? 10.0 * log10(it->ref2 / it->err2) : INFINITY;
}

static void shape_str(const qk_gguf_tensor *t, char *buf, size_t n)
{
    int nd = 1;
    for (int i = 3; i >= 1; i--)
        if (t->ne[i] > 1) {
            nd = i + 1;
            break;
        }
    size_t k = 0;
    for (int i = 0; i < nd && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "x" : "", (long long)t->ne[i]);
}

static void report_text(const qk_quant_plan *p, const char *preset)
{
    for (size_t i = 0; i < p->n; i++) {
        const qk_quant_item *it = &p->t[i];
        char shape[96];
        shape_str(it->src, shape, sizeof shape);
        printf("[%4zu/%4zu] %-36s %-16s %-7s -> %-7s %10llu -> %10llu bytes  (%s%s)", i + 1, p->n,
               it->name, shape, qk_type_get(it->src->type)->name, qk_type_get(it->type)->name,
               (unsigned long long)it->src->nbytes, (unsigned long long)it->bytes, it->why,
               it->imatrix ? ", imatrix" : it->gptq ? ", gptq" : "");
        if (it->measured)
            printf("  snr %.2f dB nmse %.3g", snr_db(it), it->ref2 > 0 ? it->err2 / it->ref2 : 0.0);
        putchar('\n');
    }
    printf("%s: %zu tensors, %.2f MiB (%.2f bpw) -> %.2f MiB (%.2f bpw)%s\n", preset, p->n,
           (double)p->bytes_in / 1048576.0, bpw(p->bytes_in, p->n_elements),
           (double)p->bytes_out / 1048576.0, bpw(p->bytes_out, p->n_elements),
           p->o.dry_run ? " (dry run: nothing written)" : "");
    if (p->n_fallback)
        printf("%d of %zu tensors needed a fallback type\n", p->n_fallback, p->n);
    if (p->would_need_imatrix)
        printf("note: the real run of this quantization requires an importance matrix (--imatrix)\n");
}

static void json_calib(qk_json *j, const model_args *a, const qk_quant_plan *p)
{
    qk_json_key(j, "method"), qk_json_str(j, a->gptq ? "gptq" : "rtn");
    qk_json_key(j, "calibration");
    if (!a->gptq) {
        qk_json_null(j);
        return;
    }
    const qk_gptq_calib *c = &a->calib;
    qk_json_obj(j);
    qk_json_key(j, "file"), qk_json_str(j, c->text);
    qk_json_key(j, "chunks"), qk_json_int(j, p->o.dry_run ? c->n_chunks : c->chunks_used);
    qk_json_key(j, "ctx"), qk_json_int(j, c->n_ctx);
    qk_json_key(j, "damp"), qk_json_f64(j, c->o.damp);
    qk_json_key(j, "act_order"), qk_json_bool(j, c->o.act_order);
    qk_json_key(j, "tensors_gptq"), qk_json_int(j, c->n_gptq);
    qk_json_key(j, "proxy_loss"), qk_json_f64(j, c->loss);
    qk_json_end_obj(j);
}

static void report_json(const qk_quant_plan *p, const model_args *a, const char *in, const char *out,
                        const char *preset)
{
    qk_json j;
    qk_json_init(&j, stdout, true);
    qk_json_obj(&j);
    qk_json_key(&j, "input"), qk_json_str(&j, in);
    qk_json_key(&j, "outputs");
    qk_json_arr(&j);
    for (int s = 0; out && s < p->n_shards; s++) {
        char *path = qk_quant_shard_path(p, out, s);
        qk_json_str(&j, path);
        free(path);
    }
    qk_json_end_arr(&j);
    qk_json_key(&j, "preset"), qk_json_str(&j, preset);
    qk_json_key(&j, "file_type"), qk_json_uint(&j, p->file_type);
    qk_json_key(&j, "dry_run"), qk_json_bool(&j, p->o.dry_run);
    json_calib(&j, a, p);
    qk_json_key(&j, "imatrix");
    if (p->o.imatrix) {
        const qk_imatrix *im = p->o.imatrix;
        qk_json_obj(&j);
        qk_json_key(&j, "file"), qk_json_str(&j, p->o.imatrix_file);
        qk_json_key(&j, "format"), qk_json_str(&j, im->legacy ? "legacy" : "gguf");
        qk_json_key(&j, "entries"), qk_json_uint(&j, im->n);
        qk_json_key(&j, "chunks"), qk_json_int(&j, im->chunk_count);
        qk_json_key(&j, "datasets");
        qk_json_arr(&j);
        for (size_t i = 0; i < im->n_datasets; i++)
            qk_json_str(&j, im->datasets[i]);
        qk_json_end_arr(&j);
        qk_json_key(&j, "tensors_using_it"), qk_json_int(&j, p->n_imatrix_used);
        qk_json_end_obj(&j);
    } else {
        qk_json_null(&j);
    }
    qk_json_key(&j, "tensors");
    qk_json_arr(&j);
    double e2 = 0, r2 = 0;
    bool measured = false;
    for (size_t i = 0; i < p->n; i++) {
        const qk_quant_item *it = &p->t[i];
        qk_json_obj(&j);
        qk_json_key(&j, "name"), qk_json_str(&j, it->name);
        qk_json_key(&j, "shape");
        qk_json_arr(&j);
        for (int d = 0; d < (int)it->src->n_dims; d++)
            qk_json_int(&j, it->src->ne[d]);
        qk_json_end_arr(&j);
        qk_json_key(&j, "source_type"), qk_json_str(&j, qk_type_get(it->src->type)->name);
        qk_json_key(&j, "type"), qk_json_str(&j, qk_type_get(it->type)->name);
        qk_json_key(&j, "reason"), qk_json_str(&j, it->why);
        qk_json_key(&j, "imatrix"), qk_json_bool(&j, it->imatrix != NULL);
        qk_json_key(&j, "gptq"), qk_json_bool(&j, it->gptq);
        qk_json_key(&j, "shard"), qk_json_int(&j, it->shard);
        qk_json_key(&j, "bytes_in"), qk_json_uint(&j, it->src->nbytes);
        qk_json_key(&j, "bytes"), qk_json_uint(&j, it->bytes);
        if (it->measured) {
            qk_json_key(&j, "snr_db"), qk_json_f64(&j, snr_db(it));
            qk_json_key(&j, "nmse"), qk_json_f64(&j, it->ref2 > 0 ? it->err2 / it->ref2 : 0.0);
            e2 += it->err2;
            r2 += it->ref2;
            measured = true;
        }
        qk_json_end_obj(&j);
    }
    qk_json_end_arr(&j);
    qk_json_key(&j, "total");
    qk_json_obj(&j);
    qk_json_key(&j, "tensors"), qk_json_uint(&j, p->n);
    qk_json_key(&j, "elements"), qk_json_uint(&j, p->n_elements);
    qk_json_key(&j, "bytes_in"), qk_json_uint(&j, p->bytes_in);
    qk_json_key(&j, "bytes"), qk_json_uint(&j, p->bytes_out);
    qk_json_key(&j, "bpw_in"), qk_json_f64(&j, bpw(p->bytes_in, p->n_elements));
    qk_json_key(&j, "bpw"), qk_json_f64(&j, bpw(p->bytes_out, p->n_elements));
    qk_json_key(&j, "fallbacks"), qk_json_int(&j, p->n_fallback);
    qk_json_key(&j, "needs_imatrix"), qk_json_bool(&j, p->would_need_imatrix);
    if (measured) {
        qk_json_key(&j, "snr_db"), qk_json_f64(&j, e2 > 0 ? 10.0 * log10(r2 / e2) : INFINITY);
        qk_json_key(&j, "nmse"), qk_json_f64(&j, r2 > 0 ? e2 / r2 : 0.0);
    }
    qk_json_end_obj(&j);
    qk_json_end_obj(&j);
    qk_json_done(&j);
}

static void on_progress(void *ctx, uint64_t n) { qk_progress_add(ctx, n); }

/* --method gptq and its options against the rest of the command line. */
static int check_calib(model_args *a, const qk_quant_preset *pr, qk_err *err)
{
    if (a->awq)
        return qk_errf(err, QK_EINPUT, "--method awq applies to --to ct-w4a16 only (GGUF types: rtn or gptq)");
    if (a->sq)
        return qk_errf(err, QK_EINPUT, "--method %s applies to --to ct-w8a8 only (GGUF types: rtn or gptq)",
                       qk_calib_method_name(a->sq));
    if (a->alpha >= 0)
        return qk_errf(err, QK_EINPUT, "--smoothing-strength needs --method smoothquant or smoothquant+gptq");
    if (!a->gptq)
        return a->calib.text ? qk_errf(err, QK_EINPUT, "--calib needs --method gptq") : 0;
    const int t = qk_ftype_default_type(pr->ftype);
    if (!a->calib.text)
        return qk_errf(err, QK_EINPUT, "--method gptq needs --calib TEXT");
    if (a->imatrix_path)
        return qk_errf(err, QK_EINPUT, "--method gptq makes its own statistics from --calib; --imatrix is "
                       "for --method rtn");
    if (a->o.n_prune)
        return qk_errf(err, QK_EINPUT, "--method gptq calibrates the whole model: not with --prune-layers");
    if (a->o.only_copy || t < 0 || !qk_gptq_supports(t))
        return qk_errf(err, QK_EINPUT, "--method gptq does not support %s (%s): it needs a legacy type, "
                       "a K-quant, IQ4_NL or IQ4_XS", pr->name, t >= 0 ? qk_type_get(t)->name : "no type");
    a->o.calibrated = true;
    a->o.calib_file = a->calib.text;
    return 0;
}

/* qk-quant MODEL_DIR: qk-convert the directory to its lossless float GGUF
 * (F16 when the first matrix is stored as F16, else F32) in a temporary
 * file beside OUT (in $TMPDIR for --dry-run), which the caller maps and
 * removes before quantizing: the output equals qk-convert --outtype f32 (or f16) and then
 * qk-quant. */
static int convert_input(const model_args *a, const char *in, const char *out, char **tmp, qk_err *err)
{
    const char *slash = out ? strrchr(out, '/') : NULL;
    const char *tdir = getenv("TMPDIR");
    int dlen = out ? (slash ? (int)(slash - out) : 1) : -1;
    size_t n = (out ? strlen(out) : strlen(tdir && *tdir ? tdir : "/tmp")) + 64;
    if (!(*tmp = malloc(n)))
        return qk_errf(err, QK_EIO, "out of memory");
    if (out)
        snprintf(*tmp, n, "%.*s/.qk-quant-%ld-f.gguf", dlen, slash ? out : ".", (long)getpid());
    else
        snprintf(*tmp, n, "%s/.qk-quant-%ld-f.gguf", tdir && *tdir ? tdir : "/tmp", (long)getpid());
    qk_conv_opts co = {.model_dir = in, .outfile = *tmp, .outtype = QK_CONV_SOURCE,
                       .threads = a->o.nthreads > 0 ? a->o.nthreads : qk_cpu_count(),
                       .progress = !a->quiet && !a->json};
    qk_conv_result r;
    int rc = qk_convert(&co, &r, err);
    qk_conv_result_free(&r);
    if (rc) {
        free(*tmp);
        *tmp = NULL;
    }
    return rc;
}

static int quantize_model(model_args *a, char **pos, int npos, const char *prog)
{
    qk_err err = {0};
    if (npos < 2) {
        fprintf(stderr, "%s: need IN.gguf [OUT.gguf] TYPE [NTHREADS]; see --help\n", prog);
        return 2;
    }
    if (a->n_include && a->n_exclude) {
        fprintf(stderr, "%s: --include-weights and --exclude-weights cannot be used together\n", prog);
        return 2;
    }
    const char *in = pos[0], *out_arg = NULL;
    const qk_quant_preset *pr = qk_quant_preset_find(pos[1]);
    int k = 2;
    if (!pr) {
        out_arg = pos[1];
        if (npos < 3) {
            fprintf(stderr, "%s: unknown quantization type '%s' (or missing TYPE); see --help\n", prog, pos[1]);
            return 2;
        }
        pr = qk_quant_preset_find(pos[2]);
        if (!pr) {
            fprintf(stderr, "%s: unknown quantization type '%s'; see --help for the list\n", prog, pos[2]);
            return 2;
        }
        k = 3;
    }
    if (npos > k + 1) {
        fprintf(stderr, "%s: unexpected argument '%s'; see --help\n", prog, pos[k + 1]);
        return 2;
    }
    if (npos == k + 1) {
        int64_t nt;
        if (qk_cli_int("NTHREADS", pos[k], -1024, 1024, &nt, &err))
            return qk_err_report(prog, &err);
        if (!a->threads_set)
            a->o.nthreads = nt <= 0 ? qk_cpu_count() : (int)nt;
    }
    a->o.ftype = pr->ftype;
    a->o.only_copy = !strcmp(pr->name, "COPY");
    if (check_calib(a, pr, &err))
        return qk_err_report(prog, &err);

    struct stat in_st;
    bool in_dir = stat(in, &in_st) == 0 && S_ISDIR(in_st.st_mode);
    char *out = NULL;
    if (!a->o.dry_run) {
        if (out_arg) {
            out = strdup(out_arg);
            /* llama-quantize: with --keep-split a ".gguf" is cut off the output name */
            if (out && a->o.keep_split && strstr(out, ".gguf") && strlen(out) >= 5)
                out[strlen(out) - 5] = 0;
        } else if (in_dir) {
            out = qk_path_join(in, "");
            char *o2 = out ? default_output(out, pr->name, a->o.keep_split) : NULL;
            free(out);
            out = o2;
        } else {
            out = default_output(in, pr->name, a->o.keep_split);
        }
        if (!out)
            return qk_err_report(prog, &(qk_err){QK_EIO, "out of memory"});
        if (!a->o.keep_split && qk_same_file(in, out)) {
            fprintf(stderr, "%s: %s: output is the same file as the input\n", prog, out);
            free(out);
            return 2;
        }
    }

    qk_imatrix *im = NULL;
    char *tmp = NULL;
    qk_gguf *g = NULL;
    qk_quant_plan *plan = NULL;
    int rc = 0;
    if (a->imatrix_path) {
        if ((rc = qk_imatrix_load(&im, a->imatrix_path, &err)))
            goto done;
        qk_imatrix_filter(im, a->include, a->n_include, a->exclude, a->n_exclude);
        a->o.imatrix = im;
        a->o.imatrix_file = a->imatrix_path;
    }
    a->o.tt = a->tt;
    a->o.kvo = a->kvo;
    a->o.prune = a->prune;
    if (in_dir && (rc = convert_input(a, in, out, &tmp, &err)))
        goto done;
    rc = qk_gguf_open(&g, tmp ? tmp : in, 0, &err);
    if (tmp) {
        /* the mapping keeps the converted file's data: nothing is left behind even if quantizing stops */
        unlink(tmp);
        free(tmp);
        tmp = NULL;
    }
    if (rc || (rc = qk_quant_plan_make(&plan, g, &a->o, &err)))
        goto done;
    a->calib.o.nthreads = a->o.nthreads;
    a->calib.model = in;
    if (!a->o.dry_run && a->gptq && (rc = qk_gptq_plan_run(plan, &a->calib, a->quiet || a->json, &err)))
        goto done;
    if (!a->o.dry_run) {
        qk_progress pg;
        qk_progress_init(&pg, "quantizing", plan->n_elements, a->quiet || a->json);
        rc = qk_quant_run(plan, out, on_progress, &pg, &err);
        qk_progress_end(&pg);
        if (rc)
            goto done;
    }
    if (a->json)
        report_json(plan, a, in, out, pr->name);
    else if (!a->quiet)
        report_text(plan, pr->name);
done:
    if (rc)
        qk_err_report(prog, &err);
    qk_quant_plan_free(plan);
    qk_gguf_close(g);
    if (tmp)
        unlink(tmp);
    free(tmp);
    qk_imatrix_free(im);
    free(out);
    return rc;
}

int cmd_quant(int argc, char **argv)
{
    enum {
        O_LIST = 256, O_ENC, O_DEC, O_SHAPE, O_IMATRIX, O_JSON, O_REQUANT, O_LEAVE_OUT, O_PURE,
        O_INCLUDE, O_EXCLUDE, O_OUT_TYPE, O_EMB_TYPE, O_TT, O_TT_FILE, O_PRUNE, O_KEEP_SPLIT,
        O_KVO, O_DRY, O_MEASURE, O_GRAN, O_GSCALE, O_CT, O_TO, O_ASYM, O_IGNORE, O_GROUP, O_SHARD, O_ROTATE,
        O_METHOD, O_CALIB, O_CCHUNKS, O_CCTX, O_DAMP, O_NOACT, O_TOKENIZER, O_SQA
    };
    static const struct option opts[] = {
        {"list-types", no_argument, 0, O_LIST}, {"raw-encode", required_argument, 0, O_ENC},
        {"raw-decode", required_argument, 0, O_DEC}, {"shape", required_argument, 0, O_SHAPE},
        {"imatrix", required_argument, 0, O_IMATRIX}, {"json", no_argument, 0, O_JSON},
        {"allow-requantize", no_argument, 0, O_REQUANT},
        {"leave-output-tensor", no_argument, 0, O_LEAVE_OUT}, {"pure", no_argument, 0, O_PURE},
        {"include-weights", required_argument, 0, O_INCLUDE},
        {"exclude-weights", required_argument, 0, O_EXCLUDE},
        {"output-tensor-type", required_argument, 0, O_OUT_TYPE},
        {"token-embedding-type", required_argument, 0, O_EMB_TYPE},
        {"tensor-type", required_argument, 0, O_TT}, {"tensor-type-file", required_argument, 0, O_TT_FILE},
        {"prune-layers", required_argument, 0, O_PRUNE}, {"keep-split", no_argument, 0, O_KEEP_SPLIT},
        {"override-kv", required_argument, 0, O_KVO}, {"dry-run", no_argument, 0, O_DRY},
        {"measure", no_argument, 0, O_MEASURE},
        {"granularity", required_argument, 0, O_GRAN}, {"global-scale", required_argument, 0, O_GSCALE},
        {"ct", no_argument, 0, O_CT}, {"to", required_argument, 0, O_TO},
        {"asym", no_argument, 0, O_ASYM}, {"ignore", required_argument, 0, O_IGNORE},
        {"group", required_argument, 0, O_GROUP}, {"shard-size", required_argument, 0, O_SHARD},
        {"rotate", required_argument, 0, O_ROTATE},
        {"method", required_argument, 0, O_METHOD}, {"calib", required_argument, 0, O_CALIB},
        {"calib-chunks", required_argument, 0, O_CCHUNKS}, {"calib-ctx", required_argument, 0, O_CCTX},
        {"damp", required_argument, 0, O_DAMP}, {"no-act-order", no_argument, 0, O_NOACT},
        {"tokenizer", required_argument, 0, O_TOKENIZER}, {"smoothing-strength", required_argument, 0, O_SQA},
        {"threads", required_argument, 0, 't'}, {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    qk_raw_req a = {.threads = 1};
    model_args m = {.o = {.output_tensor_type = -1, .token_embedding_type = -1, .nthreads = qk_cpu_count()},
                    .alpha = -1, .calib = {.n_ctx = 512, .o = {.damp = 0.01, .act_order = true}}};
    bool list = false, have_shape = false;
    const char *enc = NULL, *dec = NULL, *to = NULL, *tokenizer = NULL;
    qk_ckpt_opts co = {0};
    int64_t v;
    qk_err err = {0};
    int c, rc = 0;
    optind = 1;
    opterr = 0;
    while (!rc && (c = getopt_long(argc, argv, "c:t:qh", opts, NULL)) != -1) {
        switch (c) {
        case O_LIST: list = true; break;
        case O_ENC: enc = optarg; break;
        case O_DEC: dec = optarg; break;
        case O_SHAPE:
            rc = qk_cli_shape(optarg, &a.rows, &a.cols, &err);
            have_shape = true;
            break;
        case O_IMATRIX: a.imatrix = m.imatrix_path = optarg; break;
        case O_JSON: m.json = true; break;
        case O_REQUANT: m.o.allow_requantize = true; break;
        case O_LEAVE_OUT: m.o.leave_output = true; break;
        case O_PURE: m.o.pure = true; break;
        case O_INCLUDE: rc = push_str(&m.include, &m.n_include, optarg, &err); break;
        case O_EXCLUDE: rc = push_str(&m.exclude, &m.n_exclude, optarg, &err); break;
        case O_OUT_TYPE: rc = parse_ggml_type("--output-tensor-type", optarg, &m.o.output_tensor_type, &err); break;
        case O_EMB_TYPE: rc = parse_ggml_type("--token-embedding-type", optarg, &m.o.token_embedding_type, &err); break;
        case O_TT: rc = push_tt(&m, optarg, &err); break;
        case O_TT_FILE: rc = read_tt_file(&m, optarg, &err); break;
        case O_PRUNE: rc = parse_prune(&m, optarg, &err); break;
        case O_KEEP_SPLIT: m.o.keep_split = true; break;
        case O_KVO: {
            qk_quant_kvo *p = realloc(m.kvo, (m.o.n_kvo + 1) * sizeof *p);
            if (!p) {
                rc = qk_errf(&err, QK_EIO, "out of memory");
                break;
            }
            m.kvo = p;
            if (!(rc = qk_quant_parse_kvo(optarg, &p[m.o.n_kvo], &err)))
                m.o.n_kvo++;
            break;
        }
        case O_DRY: m.o.dry_run = true; break;
        case O_MEASURE: m.o.measure = true; break;
        case O_GRAN: rc = qk_gran_parse(optarg, &a.so, &err), a.scheme = true; break;
        case O_GSCALE:
            a.scheme = true;
            if (strcmp(optarg, "auto") != 0) {
                double g;
                if (!(rc = qk_cli_double("--global-scale", optarg, &g, &err)) && !(g > 0 && g < 3.4e38))
                    rc = qk_errf(&err, QK_EINPUT, "--global-scale: '%s' is not a positive float or auto", optarg);
                a.so.global_scale = (float)g;
                a.so.has_global_scale = true;
            }
            break;
        case O_CT: a.so.nvfp4_ct = a.scheme = true; break;
        case O_TO: to = optarg; break;
        case O_ASYM: co.asym = true; break;
        case O_ROTATE:
            if (strcmp(optarg, "hadamard"))
                rc = qk_errf(&err, QK_EINPUT, "--rotate: unknown rotation '%s' (hadamard)", optarg);
            co.rotate = true;
            break;
        case O_IGNORE: co.ignore = optarg; break;
        case O_GROUP:
            if (!(rc = qk_cli_int("--group", optarg, 1, 1 << 20, &v, &err)))
                co.group = (int)v;
            break;
        case O_SHARD:
            if (!(rc = qk_cli_int("--shard-size", optarg, 1, INT64_MAX, &v, &err)))
                co.shard_size = (uint64_t)v;
            break;
        case O_METHOD: {
            const int mt = qk_calib_method_by_name(optarg);
            if (mt < 0)
                rc = qk_errf(&err, QK_EINPUT, "--method '%s': expected rtn, gptq, awq, smoothquant or "
                             "smoothquant+gptq", optarg);
            m.gptq = mt == QK_CALIB_GPTQ, m.awq = mt == QK_CALIB_AWQ;
            m.sq = mt == QK_CALIB_SQ || mt == QK_CALIB_SQ_GPTQ ? mt : 0;
            break;
        }
        case O_SQA:
            if (!(rc = qk_cli_double("--smoothing-strength", optarg, &m.alpha, &err)) && !(m.alpha >= 0 && m.alpha <= 1))
                rc = qk_errf(&err, QK_EINPUT, "--smoothing-strength %s: expected a number in [0, 1]", optarg);
            break;
        case O_CALIB: m.calib.text = optarg; break;
        case O_CCHUNKS:
            if (!(rc = qk_cli_int("--calib-chunks", optarg, 1, 1 << 24, &v, &err)))
                m.calib.n_chunks = (int)v;
            break;
        case 'c':
        case O_CCTX:
            if (!(rc = qk_cli_int("--calib-ctx", optarg, 1, 1 << 20, &v, &err)))
                m.calib.n_ctx = (int)v;
            break;
        case O_DAMP:
            if (!(rc = qk_cli_double("--damp", optarg, &m.calib.o.damp, &err)) &&
                !(m.calib.o.damp > 0 && m.calib.o.damp <= 1))
                rc = qk_errf(&err, QK_EINPUT, "--damp %s: expected a fraction in (0, 1]", optarg);
            break;
        case O_NOACT: m.calib.o.act_order = false; break;
        case O_TOKENIZER: tokenizer = optarg; break;
        case 't':
            if (!(rc = qk_cli_threads(optarg, &a.threads, &err))) {
                m.o.nthreads = a.threads;
                m.threads_set = true;
            }
            break;
        case 'q': m.quiet = true; break;
        case 'h': print_usage(); free_args(&m); return 0;
        default: free_args(&m); return qk_cli_bad_option(argv[0], argv, optind);
        }
    }
    if (rc) {
        free_args(&m);
        return qk_err_report(argv[0], &err);
    }
    if (list) {
        qk_raw_list(stdout, m.json);
        free_args(&m);
        return 0;
    }
    if (co.rotate && !to) {
        free_args(&m);
        fprintf(stderr, "%s: --rotate applies to --to SCHEME SRC OUT_DIR\n", argv[0]);
        return 2;
    }
    if (to) {
        free_args(&m);
        if (enc || dec || argc - optind != 2) {
            fprintf(stderr, "%s: usage: qk-quant --to SCHEME SRC OUT_DIR; see --help\n", argv[0]);
            return 2;
        }
        co.quiet = m.quiet;
        qk_ckpt_calib cal = {.method = m.gptq ? QK_CALIB_GPTQ : m.awq ? QK_CALIB_AWQ : m.sq ? m.sq : QK_CALIB_RTN,
                             .text = m.calib.text, .tokenizer = tokenizer, .n_ctx = m.calib.n_ctx,
                             .n_chunks = m.calib.n_chunks, .o = m.calib.o, .alpha = m.alpha >= 0 ? m.alpha : 0.5,
                             .quiet = m.quiet};
        cal.o.nthreads = m.o.nthreads;
        /* --calib: for a --method, or static activation scales (ct-*-static, ct-nvfp4a4, modelopt-nvfp4) */
        const bool st = qk_ckpt_scheme_static(to);
        const bool calibrated = cal.method != QK_CALIB_RTN;
        if (calibrated ? !m.calib.text : m.calib.text && !st) {
            if (m.calib.text)
                fprintf(stderr, "%s: --calib needs --method gptq, awq, smoothquant or smoothquant+gptq, or a scheme "
                        "with static activation scales (ct-fp8-static, ct-w8a8-static, ct-nvfp4a4, modelopt-nvfp4)\n",
                        argv[0]);
            else
                fprintf(stderr, "%s: --method %s needs --calib TEXT\n", argv[0], qk_calib_method_name(cal.method));
            return 2;
        }
        if (m.alpha >= 0 && !m.sq) {
            fprintf(stderr, "%s: --smoothing-strength needs --method smoothquant or smoothquant+gptq\n", argv[0]);
            return 2;
        }
        co.calib = calibrated || st ? &cal : NULL;
        rc = qk_ckpt_quantize(argv[optind], argv[optind + 1], to, &co, &err);
        return rc ? qk_err_report(argv[0], &err) : 0;
    }
    if (!enc && !dec) {
        rc = quantize_model(&m, argv + optind, argc - optind, argv[0]);
        free_args(&m);
        return rc;
    }
    free_args(&m);
    if (enc && dec) {
        fprintf(stderr, "%s: give one of --raw-encode TYPE and --raw-decode TYPE; see --help\n", argv[0]);
        return 2;
    }
    a.type = enc ? enc : dec;
    a.encode = enc != NULL;
    if (!have_shape || argc - optind != 2) {
        fprintf(stderr, "%s: need --shape ROWSxCOLS, IN and OUT; see --help\n", argv[0]);
        return 2;
    }
    rc = qk_raw_convert(&a, argv[optind], argv[optind + 1], &err);
    return rc ? qk_err_report(argv[0], &err) : 0;
}
