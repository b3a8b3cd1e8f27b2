/* quant.c - qk-quant: encode and decode tensors through the format table.
 *
 * Implemented now: --list-types, --raw-encode, --raw-decode.
 * Not yet implemented: GGUF model quantization (llama-quantize's
 * `IN.gguf OUT.gguf TYPE` form) -- the help text says so. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckd.h"
#include "cli.h"
#include "commands.h"
#include "json.h"
#include "mapfile.h"
#include "outfile.h"
#include "quantize.h"
#include "types.h"

static const char usage_text[] =
    "usage: qk-quant --list-types [--json]\n"
    "       qk-quant --raw-encode TYPE --shape ROWSxCOLS [--imatrix FILE.f32] [-t N] IN.f32 OUT.bin\n"
    "       qk-quant --raw-decode TYPE --shape ROWSxCOLS [-t N] IN.bin OUT.f32\n"
    "\n"
    "Encode raw little-endian float32 rows into a tensor type of the format table, or decode\n"
    "them back, byte-exact with ggml's quantizers.\n"
    "\n"
    "  --list-types        the format table: name, id, block, bytes, bits/weight, importance, activation type\n"
    "  --raw-encode TYPE   encode IN.f32 (ROWS x COLS float32) into OUT.bin\n"
    "  --raw-decode TYPE   decode IN.bin (ROWS x COLS elements of TYPE) into OUT.f32\n"
    "  --shape ROWSxCOLS   tensor shape; COLS must be a multiple of the type's block size\n"
    "  --imatrix FILE      importance weights: COLS float32 values (required by iq2_xxs, iq2_xs, iq1_s)\n"
    "  -t, --threads N     threads (0 = all CPUs; output bytes do not depend on N)\n"
    "  --json              machine-readable output (with --list-types)\n"
    "  -q, --quiet         no progress output\n"
    "  -h, --help          this text\n"
    "\n"
    "Not yet implemented: quantizing a GGUF model (llama-quantize's IN.gguf OUT.gguf TYPE form).\n"
    "Exit codes: 0 ok, 2 usage or input error, 3 I/O error.\n";

static void list_types(bool json)
{
    qk_json j;
    qk_json_init(&j, stdout, true);
    if (json) {
        qk_json_obj(&j);
        qk_json_key(&j, "types");
        qk_json_arr(&j);
    } else {
        printf("%-9s %4s %6s %6s %8s %10s %-8s %s\n", "name", "id", "block", "bytes", "bpw",
               "importance", "dot_with", "kernels");
    }
    for (int id = qk_type_next(-1); id >= 0; id = qk_type_next(id)) {
        const qk_type_traits *t = qk_type_get(id);
        const qk_type_traits *vd = t->vec_dot_type >= 0 ? qk_type_get(t->vec_dot_type) : NULL;
        if (!json) {
            printf("%-9s %4d %6d %6zu %8.4f %10s %-8s %s%s%s%s\n", t->name, t->id, t->blck,
                   t->type_size, qk_type_bpw(id), t->needs_imatrix ? "required" : "-",
                   vd ? vd->name : "-", t->to_float ? "decode " : "", t->quantize ? "encode " : "",
                   t->vec_dot ? "dot " : "", t->from_float ? "activation" : "");
            continue;
        }
        qk_json_obj(&j);
        qk_json_key(&j, "name"), qk_json_str(&j, t->name);
        qk_json_key(&j, "id"), qk_json_int(&j, t->id);
        qk_json_key(&j, "block"), qk_json_int(&j, t->blck);
        qk_json_key(&j, "bytes"), qk_json_uint(&j, t->type_size);
        qk_json_key(&j, "bpw"), qk_json_f64(&j, qk_type_bpw(id));
        qk_json_key(&j, "gguf"), qk_json_bool(&j, t->in_gguf);
        qk_json_key(&j, "needs_importance"), qk_json_bool(&j, t->needs_imatrix);
        qk_json_key(&j, "activation_type"), qk_json_str(&j, vd ? vd->name : NULL);
        qk_json_key(&j, "decode"), qk_json_bool(&j, t->to_float != NULL);
        qk_json_key(&j, "encode"), qk_json_bool(&j, t->quantize != NULL);
        qk_json_key(&j, "dot"), qk_json_bool(&j, t->vec_dot != NULL);
        qk_json_end_obj(&j);
    }
    if (json) {
        qk_json_end_arr(&j);
        qk_json_end_obj(&j);
        qk_json_done(&j);
    }
}

typedef struct {
    const char *prog;
    const qk_type_traits *t;
    int64_t rows, cols;
    const char *imatrix;
    int threads;
} raw_args;

/* Map `path` and check it holds exactly `want` bytes. */
static int map_exact(qk_map *m, const char *path, uint64_t want, const char *what, qk_err *err)
{
    int rc = qk_map_open(m, path, err);
    if (rc)
        return rc;
    if (m->size != want) {
        qk_map_close(m);
        return qk_err_at(err, path, what, 0, "size is %zu bytes, expected %llu", m->size,
                         (unsigned long long)want);
    }
    return 0;
}

static int raw(const raw_args *a, bool encode, const char *in, const char *out, qk_err *err)
{
    size_t rs = qk_row_size(a->t->id, a->cols);
    if (rs == 0)
        return qk_errf(err, QK_EINPUT, "--shape: %lld columns is not a multiple of %s's block size %d",
                       (long long)a->cols, a->t->name, a->t->blck);
    if (encode ? !a->t->quantize : !a->t->to_float)
        return qk_errf(err, QK_EINPUT, "%s: no %s for this type", a->t->name,
                       encode ? "encoder" : "decoder");
    if (encode && a->t->needs_imatrix && !a->imatrix)
        return qk_errf(err, QK_EINPUT, "%s requires an importance matrix (--imatrix FILE.f32)",
                       a->t->name);
    if (qk_same_file(in, out))
        return qk_errf(err, QK_EINPUT, "%s: output is the same file as the input", out);
    uint64_t nf, nq;
    if (qk_ckd_mul(&nf, (uint64_t)a->rows, (uint64_t)a->cols) || qk_ckd_mul(&nf, nf, 4) ||
        qk_ckd_mul(&nq, (uint64_t)a->rows, rs))
        return qk_errf(err, QK_EINPUT, "--shape: too large");

    qk_map src, im = {0};
    im.fd = -1;
    int rc = map_exact(&src, in, encode ? nf : nq, encode ? "float32 input" : "encoded input", err);
    if (rc)
        return rc;
    if (encode && a->imatrix &&
        (rc = map_exact(&im, a->imatrix, (uint64_t)a->cols * 4, "importance matrix", err))) {
        qk_map_close(&src);
        return rc;
    }
    size_t n_out = encode ? (size_t)nq : (size_t)nf;
    void *buf = malloc(n_out ? n_out : 1);
    if (!buf) {
        rc = qk_errf(err, QK_EIO, "out of memory (%zu bytes)", n_out);
        goto done;
    }
    if (encode) {
        /* the mapping is only 4-byte aligned by page alignment: fine for float */
        rc = qk_quantize_rows(a->t->id, (const float *)src.data, buf, a->rows, a->cols,
                              im.data ? (const float *)im.data : NULL, a->threads, err);
    } else {
        rc = qk_dequantize_rows(a->t->id, src.data, buf, a->rows, a->cols, a->threads, err);
    }
    if (rc)
        goto done;
    qk_out o;
    if ((rc = qk_out_open(&o, out, err)))
        goto done;
    if ((rc = qk_out_write(&o, buf, n_out, err)) || (rc = qk_out_commit(&o, err)))
        qk_out_abort(&o);
done:
    free(buf);
    qk_map_close(&src);
    if (im.data || im.fd >= 0)
        qk_map_close(&im);
    return rc;
}

int cmd_quant(int argc, char **argv)
{
    enum { O_LIST = 256, O_ENC, O_DEC, O_SHAPE, O_IMATRIX, O_JSON };
    static const struct option opts[] = {
        {"list-types", no_argument, 0, O_LIST}, {"raw-encode", required_argument, 0, O_ENC},
        {"raw-decode", required_argument, 0, O_DEC}, {"shape", required_argument, 0, O_SHAPE},
        {"imatrix", required_argument, 0, O_IMATRIX}, {"json", no_argument, 0, O_JSON},
        {"threads", required_argument, 0, 't'}, {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    raw_args a = {.prog = argv[0], .threads = 1};
    bool list = false, json = false, have_shape = false;
    const char *enc = NULL, *dec = NULL;
    qk_err err = {0};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "t:qh", opts, NULL)) != -1) {
        switch (c) {
        case O_LIST: list = true; break;
        case O_ENC: enc = optarg; break;
        case O_DEC: dec = optarg; break;
        case O_SHAPE:
            if (qk_cli_shape(optarg, &a.rows, &a.cols, &err))
                return qk_err_report(argv[0], &err);
            have_shape = true;
            break;
        case O_IMATRIX: a.imatrix = optarg; break;
        case O_JSON: json = true; break;
        case 't':
            if (qk_cli_threads(optarg, &a.threads, &err))
                return qk_err_report(argv[0], &err);
            break;
        case 'q': break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: return qk_cli_bad_option(argv[0], argv, optind);
        }
    }
    if (list) {
        list_types(json);
        return 0;
    }
    if ((enc != NULL) + (dec != NULL) != 1) {
        fprintf(stderr, "%s: give one of --list-types, --raw-encode TYPE, --raw-decode TYPE "
                        "(quantizing GGUF models is not implemented yet); see --help\n", argv[0]);
        return 2;
    }
    const char *tname = enc ? enc : dec;
    a.t = qk_type_by_name(tname);
    if (!a.t) {
        fprintf(stderr, "%s: unknown type '%s' (see --list-types)\n", argv[0], tname);
        return 2;
    }
    if (!have_shape || argc - optind != 2) {
        fprintf(stderr, "%s: need --shape ROWSxCOLS, IN and OUT; see --help\n", argv[0]);
        return 2;
    }
    int rc = raw(&a, enc != NULL, argv[optind], argv[optind + 1], &err);
    return rc ? qk_err_report(argv[0], &err) : 0;
}
