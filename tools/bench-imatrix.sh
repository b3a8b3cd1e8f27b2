#!/bin/sh
# bench-imatrix.sh - qk-imatrix's throughput, and llama-imatrix's on the same model, text, chunks
# and threads (part of `make bench`; a benchmark, not a test).
#
#   tools/bench-imatrix.sh [QK_BINARY]        prints a markdown table on stdout
#
# Tokens/s = chunks x chunk size / wall seconds of the whole command (model load, tokenization,
# collection, saving), the median of BENCH_REPS runs, the two tools interleaved run by run.
# Knobs: LLAMA_IMATRIX=/path/to/llama-imatrix (without it only qk runs), BENCH_THREADS (default:
# all CPUs), BENCH_REPS (3), IMATRIX_MODELS (space-separated GGUF paths; default the bundled
# stories4M (F32) and, when python3 has numpy to make it, build/bench/smol135m-f16.gguf: a random
# model of SmolLM2-135M's shape, `python3 ../shared/tools/mkgguf.py OUT --preset smol135m --seed 1`),
# IMATRIX_TEXT (default goldens/stories260K-eval/eval-64k.txt), IMATRIX_CHUNKS (8), IMATRIX_CTX (512).
set -eu
QK=${1:-build/qk}
T=${BENCH_THREADS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}
R=${BENCH_REPS:-3}
SMOL=build/bench/smol135m-f16.gguf
if [ -z "${IMATRIX_MODELS:-}" ] && [ ! -f "$SMOL" ] && python3 -c 'import numpy' 2>/dev/null; then
    mkdir -p build/bench && python3 ../shared/tools/mkgguf.py "$SMOL" --preset smol135m --seed 1 >/dev/null
fi
MODELS=${IMATRIX_MODELS:-goldens/models/stories4M/stories4M-f32.gguf $(if [ -f "$SMOL" ]; then echo "$SMOL"; fi)}
TEXT=${IMATRIX_TEXT:-goldens/stories260K-eval/eval-64k.txt}
N=${IMATRIX_CHUNKS:-8}
C=${IMATRIX_CTX:-512}
LL=${LLAMA_IMATRIX:-}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

now() { date +%s.%N; }
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
timed() { # seconds of one run of the command, its output discarded
    t0=$(now)
    "$@" >/dev/null 2>&1 || { echo "bench-imatrix: failed: $*" >&2; exit 3; }
    t1=$(now)
    echo "$t0 $t1" | awk '{printf "%.3f\n", $2 - $1}'
}

echo "qk-imatrix$([ -n "$LL" ] && echo " and llama-imatrix"): $N chunks of $C tokens of $(basename "$TEXT"), $T threads, median of $R runs"
echo
if [ -n "$LL" ]; then
    echo "| model | qk tokens/s | llama tokens/s | ratio |"
    echo "| ----- | ----------: | -------------: | ----: |"
else
    echo "| model | qk tokens/s |"
    echo "| ----- | ----------: |"
fi
for m in $MODELS; do
    : >"$TMP/qk" && : >"$TMP/ll"
    i=0
    while [ "$i" -lt "$R" ]; do
        timed "$QK" imatrix -q -m "$m" -f "$TEXT" --chunks "$N" -c "$C" -t "$T" -o "$TMP/q.gguf" >>"$TMP/qk"
        [ -n "$LL" ] && timed "$LL" -m "$m" -f "$TEXT" --chunks "$N" -c "$C" -t "$T" -o "$TMP/l.gguf" >>"$TMP/ll"
        i=$((i + 1))
    done
    tq=$(median <"$TMP/qk")
    rq=$(awk -v s="$tq" -v n="$((N * C))" 'BEGIN {printf "%.1f", n / s}')
    if [ -n "$LL" ]; then
        tl=$(median <"$TMP/ll")
        rl=$(awk -v s="$tl" -v n="$((N * C))" 'BEGIN {printf "%.1f", n / s}')
        echo "| $(basename "$m") | $rq | $rl | $(awk -v a="$tl" -v b="$tq" 'BEGIN {printf "%.2f", a / b}') |"
    else
        echo "| $(basename "$m") | $rq |"
    fi
done
