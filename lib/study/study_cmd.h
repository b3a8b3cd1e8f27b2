/* study_cmd.h - the numerics studies of docs/studies.md as command pieces.
 *
 * 1. The wire / KV-cache options qk-run and qk-kld share (--wire FMT,
 *    --wire-every K, --wire-at L1,L2, --stages S, --wire-lossless,
 *    --kv-cache TYPE[:tensor|:head], --kv-key-per-channel): parsing, the
 *    validation rules, resolving them against a model, and the report
 *    (text line and JSON members).
 * 2. The sweeps behind qk-bench error|wire|kv (and tools/study-run): the
 *    quantization-error scorecard (lib/study/study_error.h), the pipeline-wire
 *    sweep and the KV-cache sweep (lib/study/study_run.h), written as md, csv or
 *    json through a caller's sink. */
#ifndef QK_STUDY_CMD_H
#define QK_STUDY_CMD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/core/err.h"
#include "lib/core/json.h"
#include "lib/engine/kvquant.h"
#include "lib/engine/model.h"
#include "lib/study/wire.h"

/* ---- shared options of qk-run and qk-kld ---------------------------------------- */

enum {
    QK_STUDY_O_WIRE = 1000, QK_STUDY_O_WIRE_EVERY, QK_STUDY_O_WIRE_AT, QK_STUDY_O_STAGES,
    QK_STUDY_O_WIRE_LOSSLESS, QK_STUDY_O_KV_CACHE, QK_STUDY_O_KV_KPC, QK_STUDY_O_KV_ROT
};

/* struct option entries (getopt.h) for a command's long-option table. */
#define QK_STUDY_LONG_OPTIONS                                                                 \
    {"wire", required_argument, 0, QK_STUDY_O_WIRE},                                         \
    {"wire-every", required_argument, 0, QK_STUDY_O_WIRE_EVERY},                             \
    {"wire-at", required_argument, 0, QK_STUDY_O_WIRE_AT},                                   \
    {"stages", required_argument, 0, QK_STUDY_O_STAGES},                                     \
    {"wire-lossless", no_argument, 0, QK_STUDY_O_WIRE_LOSSLESS},                             \
    {"kv-cache", required_argument, 0, QK_STUDY_O_KV_CACHE},                                 \
    {"kv-key-per-channel", no_argument, 0, QK_STUDY_O_KV_KPC},                               \
    {"kv-rotate", no_argument, 0, QK_STUDY_O_KV_ROT}

typedef struct qk_study_opts {
    qk_wire_spec wire;
    bool has_wire;
    qk_kvq kvq;
    bool has_kvq;
} qk_study_opts;

/* Handle getopt's c (arg: optarg): 1 when it was one of the options above,
 * 0 when not, -1 on a bad value (err set, code 2). */
int qk_study_opt(qk_study_opts *s, int c, const char *arg, qk_err *err);
/* The combination rules: the wire modifiers need --wire, --wire needs a
 * placement, --kv-key-per-channel needs --kv-cache, and --kv-cache runs in
 * the F32 cache (an explicit --kv-type f16 is an error; *kv_type becomes
 * QK_F32). */
int qk_study_check(qk_study_opts *s, bool kv_type_given, int *kv_type, qk_err *err);
/* Resolve against the model under test: w (initialised when has_wire, free
 * it with qk_wire_free), and the KV codec checked against its heads. */
int qk_study_prepare(const qk_study_opts *s, const qk_hparams *hp, qk_wire *w, qk_err *err);
/* KV bytes per cached token over all layers with the codec, and with bf16. */
void qk_study_kv_bytes(const qk_study_opts *s, const qk_hparams *hp, double *bytes, double *bf16);
/* The report lines ("PROG: wire: ...", "PROG: kv cache: ..."; no "PROG: "
 * when prog is NULL), nothing when neither option was given. */
void qk_study_print(FILE *f, const char *prog, const qk_study_opts *s, const qk_wire *w,
                    const qk_hparams *hp);
/* The JSON members "wire" and "kv_cache" (each only when given) of the
 * object j is in. */
void qk_study_json(qk_json *j, const qk_study_opts *s, const qk_wire *w, const qk_hparams *hp);

/* ---- sweeps (qk-bench error|wire|kv) -------------------------------------------- */

typedef struct qk_sweep_opts {
    const char *model, *text, *tensors, *synthetic, *formats, *types, *boundaries, *shape;
    int n_ctx, threads, chunks;  /* n_ctx default 256 when 0; chunks 0: all */
    uint64_t seed;               /* synthetic seed (0: 1) */
    bool per_tensor;
} qk_sweep_opts;

/* A result writer: emit(f, fmt, ud) writes the result in fmt ("md", "csv",
 * "json") to f; the sink calls it once per output it makes. */
typedef void (*qk_sweep_emit)(FILE *f, const char *fmt, void *ud);
typedef int (*qk_sweep_sink)(void *sink_ud, qk_sweep_emit emit, void *ud, qk_err *err);

/* The scorecard of -m CHECKPOINT [--tensors GLOB] or of --synthetic DIST. */
int qk_sweep_error(const qk_sweep_opts *o, qk_sweep_sink sink, void *sink_ud, qk_err *err);
/* Every wire format (or o->formats) x o->boundaries (default 1,2,4) stage
 * boundaries, and the lossless control on fp32. */
int qk_sweep_wire(const qk_sweep_opts *o, qk_sweep_sink sink, void *sink_ud, qk_err *err);
/* Every KV codec of o->types (TYPE[:SCALE][+kivi], default the 13 of
 * docs/studies.md). */
int qk_sweep_kv(const qk_sweep_opts *o, qk_sweep_sink sink, void *sink_ud, qk_err *err);

#endif
