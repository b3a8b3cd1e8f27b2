/* study-run - the numerics studies of docs/studies.md as plain tables
 * (make studies runs it through tools/studies.sh); the sweeps themselves are
 * lib/study/study_cmd.h's, the same as qk-bench error|wire|kv:
 *
 *   study-run error (-m CHECKPOINT [--tensors GLOB] | --synthetic DIST
 *                   [--shape RxC] [--seed N]) [--formats LIST] [--per-tensor]
 *   study-run wire  -m MODEL.gguf -f TEXT [-c N] [--formats LIST]
 *                   [--boundaries 1,2,4] [--chunks N]
 *   study-run kv    -m MODEL.gguf -f TEXT [-c N] [--types LIST] [--chunks N]
 *
 * common: --format md|csv|json (default md) to stdout, or -o PREFIX for
 * PREFIX.md, PREFIX.csv and PREFIX.json at once; -t N threads (default 1).
 * The output bytes do not depend on -t. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/err.h"
#include "lib/core/outfile.h"
#include "lib/study/study_cmd.h"

typedef struct {
    const char *prefix;    /* -o PREFIX: write PREFIX.md, .csv and .json */
    const char *out_fmt;   /* else this format on stdout */
} sink_opts;

/* Call emit(f, fmt, ud) for stdout in out_fmt, or for the three files of -o. */
static int emit_all(void *p, qk_sweep_emit emit, void *ud, qk_err *err)
{
    const sink_opts *s = p;
    if (!s->prefix) {
        emit(stdout, s->out_fmt, ud);
        return 0;
    }
    static const char *const exts[] = {"md", "csv", "json"};
    for (int i = 0; i < 3; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s.%s", s->prefix, exts[i]);
        qk_out o;
        int rc = qk_out_open(&o, path, err);
        if (rc)
            return rc;
        emit(o.f, exts[i], ud);
        if ((rc = qk_out_commit(&o, err)))
            return rc;
    }
    return 0;
}

static int usage(void)
{
    fputs("usage: study-run error|wire|kv [options]; see the comment at the top of "
          "tools/study-run.c\n",
          stderr);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    const char *what = argv[1];
    qk_sweep_opts o = {.n_ctx = 256, .threads = 1, .seed = 1};
    sink_opts so = {.out_fmt = "md"};
    enum { O_TENSORS = 256, O_SYN, O_FORMATS, O_TYPES, O_FORMAT, O_BOUND, O_PER, O_SHAPE, O_SEED,
           O_CHUNKS };
    static const struct option lo[] = {
        {"model", required_argument, 0, 'm'}, {"file", required_argument, 0, 'f'},
        {"ctx-size", required_argument, 0, 'c'}, {"threads", required_argument, 0, 't'},
        {"tensors", required_argument, 0, O_TENSORS}, {"synthetic", required_argument, 0, O_SYN},
        {"formats", required_argument, 0, O_FORMATS}, {"types", required_argument, 0, O_TYPES},
        {"format", required_argument, 0, O_FORMAT}, {"boundaries", required_argument, 0, O_BOUND},
        {"per-tensor", no_argument, 0, O_PER}, {"shape", required_argument, 0, O_SHAPE},
        {"seed", required_argument, 0, O_SEED}, {"chunks", required_argument, 0, O_CHUNKS},
        {"out", required_argument, 0, 'o'},
        {0, 0, 0, 0}};
    int c;
    optind = 2;
    while ((c = getopt_long(argc, argv, "m:f:c:t:o:", lo, NULL)) != -1) {
        switch (c) {
        case 'm': o.model = optarg; break;
        case 'o': so.prefix = optarg; break;
        case 'f': o.text = optarg; break;
        case 'c': o.n_ctx = atoi(optarg); break;
        case 't': o.threads = atoi(optarg); break;
        case O_TENSORS: o.tensors = optarg; break;
        case O_SYN: o.synthetic = optarg; break;
        case O_FORMATS: o.formats = optarg; break;
        case O_TYPES: o.types = optarg; break;
        case O_FORMAT: so.out_fmt = optarg; break;
        case O_BOUND: o.boundaries = optarg; break;
        case O_PER: o.per_tensor = true; break;
        case O_SHAPE: o.shape = optarg; break;
        case O_SEED: o.seed = strtoull(optarg, NULL, 10); break;
        case O_CHUNKS: o.chunks = atoi(optarg); break;
        default: return usage();
        }
    }
    qk_err err = {0};
    int rc;
    if (strcmp(what, "error") == 0)
        rc = qk_sweep_error(&o, emit_all, &so, &err);
    else if (strcmp(what, "wire") == 0)
        rc = qk_sweep_wire(&o, emit_all, &so, &err);
    else if (strcmp(what, "kv") == 0)
        rc = qk_sweep_kv(&o, emit_all, &so, &err);
    else
        return usage();
    return rc ? qk_err_report("study-run", &err) : 0;
}
