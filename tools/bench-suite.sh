#!/bin/sh
# bench-suite.sh - the short fixed benchmark suite of `make bench`.
#
#   tools/bench-suite.sh [QK_BINARY [OUT.md]]     (defaults: build/qk, build/bench.md)
#
# Writes one markdown document: the machine's roofline, the kernel throughput
# table, and qk-bench model on the bundled models (plus any in BENCH_MODELS,
# space-separated paths).  With LLAMA_BENCH=/path/to/llama-bench the same
# models also go through llama-bench (same -p/-n/-r/-t, interleaved model by
# model) and a table of ours / theirs / ratio (medians need python3) is added.
# Knobs: BENCH_THREADS (default: all CPUs), BENCH_REPS (5), BENCH_PP (128),
# BENCH_TG (32), BENCH_TYPES (kernel types, default qk-bench's list),
# BENCH_BLAS (library for the OpenBLAS reference).  qk-imatrix's throughput
# (against LLAMA_IMATRIX=/path/to/llama-imatrix when set) is tools/bench-imatrix.sh's.
set -eu
QK=${1:-build/qk}
OUT=${2:-build/bench.md}
T=${BENCH_THREADS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}
R=${BENCH_REPS:-5}
PP=${BENCH_PP:-128}
TG=${BENCH_TG:-32}
MODELS="goldens/models/stories260K/stories260K-f32.gguf goldens/models/stories4M/stories4M-f32.gguf ${BENCH_MODELS:-}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
blas=""
[ -n "${BENCH_BLAS:-}" ] && blas="--blas $BENCH_BLAS"
types=""
[ -n "${BENCH_TYPES:-}" ] && types="--types $BENCH_TYPES"

run() { # echo the command into the document, then its table
    printf '\n```\n%s\n```\n\n' "$*" >>"$TMP/doc"
    "$@" >>"$TMP/doc"
}

{
    echo "# qk benchmark suite"
    echo
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -m), $T threads, qk $("$QK" --version | cut -d' ' -f2)"
} >"$TMP/doc"

printf '\n## Roofline\n' >>"$TMP/doc"
run "$QK" bench roofline -q -t "$T" --passes 5 --time-ms 200

printf '\n## Kernels (1 thread)\n' >>"$TMP/doc"
# shellcheck disable=SC2086
run "$QK" bench kernels -q -t 1 --time-ms 50 -r 3 $types $blas

printf '\n## Models\n' >>"$TMP/doc"
margs=""
for m in $MODELS; do margs="$margs -m $m"; done
# shellcheck disable=SC2086
run "$QK" bench model -q $margs -p "$PP" -n "$TG" -r "$R" -t "$T"

if [ -n "${LLAMA_BENCH:-}" ]; then
    printf '\n## Against llama-bench\n' >>"$TMP/doc"
    for m in $MODELS; do
        "$QK" bench model -q -m "$m" -p "$PP" -n "$TG" -r "$R" -t "$T" --no-roofline --json >"$TMP/qk.$$.json"
        "$LLAMA_BENCH" -m "$m" -p "$PP" -n "$TG" -r "$R" -t "$T" -o json >"$TMP/ll.$$.json" 2>/dev/null
        python3 - "$m" "$TMP/qk.$$.json" "$TMP/ll.$$.json" >>"$TMP/rows" <<'PY'
import json, statistics, sys
m, ours, theirs = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
def ll_test(t):
    return "pp%d" % t["n_prompt"] if t["n_prompt"] else "tg%d" % t["n_gen"]
ll = {ll_test(t): statistics.median(t["samples_ts"]) for t in theirs}
for r in ours["rows"]:
    q = r["tokens_per_s"]["median"]
    l = ll.get(r["test"])
    print("| %s | %s | %.2f | %s | %s |" % (m.split("/")[-1], r["test"], q,
          "%.2f" % l if l else "-", "%.2f" % (q / l) if l else "-"))
PY
    done
    {
        printf '\nmedians of %s repetitions, %s threads; `%s`\n\n' "$R" "$T" "$LLAMA_BENCH"
        echo "| model | test | qk t/s | llama.cpp t/s | ratio |"
        echo "| ----- | ---- | -----: | ------------: | ----: |"
        cat "$TMP/rows"
    } >>"$TMP/doc"
fi

printf '\n## Importance matrices\n\n' >>"$TMP/doc"
sh tools/bench-imatrix.sh "$QK" >>"$TMP/doc"

mkdir -p "$(dirname "$OUT")"
mv "$TMP/doc" "$OUT.tmp.$$" && mv "$OUT.tmp.$$" "$OUT"
echo "wrote $OUT"
