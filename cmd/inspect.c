/* inspect.c - qk-inspect: look inside GGUF and safetensors checkpoints.
 *
 * Default: format, architecture and hyper-parameters, metadata, tensor
 * table, and a census by type.  --stats: per-tensor statistics through the
 * format table's decoders.  --diff A B: tensor-by-tensor comparison across
 * formats (see tensordiff.h). */
#include <fnmatch.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/cli.h"
#include "cmd/commands.h"
#include "formats/gguf.h"
#include "lib/report/inspect_print.h"
#include "lib/core/json.h"
#include "lib/report/tensordiff.h"
#include "formats/tensorset.h"
#include "lib/report/tensorstats.h"
#include "kernels/types.h"

static const char usage_text[] =
    "usage: qk-inspect [options] FILE_OR_DIR\n"
    "       qk-inspect --diff [--max-rmse X] [--min-snr DB] A B\n"
    "\n"
    "Show what a GGUF file (or split set), a .safetensors file or a Hugging Face directory holds:\n"
    "format, architecture and hyper-parameters, metadata, the tensor table and a census by type.\n"
    "\n"
    "  --tensors GLOB     only tensors whose name matches GLOB (fnmatch)\n"
    "  --meta GLOB        only metadata keys matching GLOB\n"
    "  --meta-full        print every metadata value in full (arrays included)\n"
    "  --stats            per-tensor statistics: min max mean std absmax rms kurtosis,\n"
    "                     NaN/Inf counts, zero fraction, outlier input channels\n"
    "  --diff A B         compare two checkpoints tensor by tensor (HF names and GGUF names\n"
    "                     are mapped, llama.cpp's q/k row permutation undone)\n"
    "  --max-rmse X       with --diff: exit 1 if any tensor's RMSE exceeds X\n"
    "  --min-snr DB       with --diff: exit 1 if any tensor's SNR is below DB\n"
    "  --json             one JSON document on stdout (schema in qk-inspect(1))\n"
    "  -t, --threads N    threads for --stats and --diff (0 = all CPUs)\n"
    "  -q, --quiet        no progress bar\n"
    "  -h, --help         this text\n"
    "\n"
    "Exit codes: 0 ok, 1 a --diff threshold was violated, 2 usage or input error, 3 I/O error.\n";

int cmd_inspect(int argc, char **argv)
{
    enum { O_TENSORS = 256, O_META, O_META_FULL, O_STATS, O_DIFF, O_MAX_RMSE, O_MIN_SNR, O_JSON };
    static const struct option opts[] = {
        {"tensors", required_argument, 0, O_TENSORS}, {"meta", required_argument, 0, O_META},
        {"meta-full", no_argument, 0, O_META_FULL}, {"stats", no_argument, 0, O_STATS},
        {"diff", no_argument, 0, O_DIFF}, {"max-rmse", required_argument, 0, O_MAX_RMSE},
        {"min-snr", required_argument, 0, O_MIN_SNR}, {"json", no_argument, 0, O_JSON},
        {"threads", required_argument, 0, 't'}, {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    qk_inspect_opts o = {.threads = 1};
    bool diff = false;
    double max_rmse = -1, min_snr = -INFINITY;
    qk_err err = {0};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "t:qh", opts, NULL)) != -1) {
        switch (c) {
        case O_TENSORS: o.tensor_glob = optarg; break;
        case O_META: o.meta_glob = optarg; break;
        case O_META_FULL: o.meta_full = true; break;
        case O_STATS: o.stats = true; break;
        case O_DIFF: diff = true; break;
        case O_MAX_RMSE:
            if (qk_cli_double("--max-rmse", optarg, &max_rmse, &err))
                return qk_err_report(argv[0], &err);
            break;
        case O_MIN_SNR:
            if (qk_cli_double("--min-snr", optarg, &min_snr, &err))
                return qk_err_report(argv[0], &err);
            break;
        case O_JSON: o.json = true; break;
        case 't':
            if (qk_cli_threads(optarg, &o.threads, &err))
                return qk_err_report(argv[0], &err);
            break;
        case 'q': o.quiet = true; break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: return qk_cli_bad_option(argv[0], argv, optind);
        }
    }
    int nargs = argc - optind;
    if (diff ? nargs != 2 : nargs != 1) {
        fprintf(stderr, "%s: %s; see --help\n", argv[0],
                diff ? "--diff needs two checkpoints A B" : "need one FILE_OR_DIR");
        return 2;
    }
    if (!diff && (max_rmse >= 0 || min_snr > -INFINITY)) {
        fprintf(stderr, "%s: --max-rmse and --min-snr go with --diff\n", argv[0]);
        return 2;
    }
    int rc;
    if (diff) {
        qk_diff_opts d = {.tensor_glob = o.tensor_glob, .json = o.json, .threads = o.threads,
                          .quiet = o.quiet, .max_rmse = max_rmse, .min_snr = min_snr};
        rc = qk_diff_run(argv[optind], argv[optind + 1], &d, stdout, &err);
    } else {
        rc = qk_inspect_run(argv[optind], &o, stdout, &err);
    }
    if (rc == QK_EFAIL)
        return 1; /* threshold line already printed */
    return rc ? qk_err_report(argv[0], &err) : 0;
}
