#!/bin/sh
# bench-quant.sh - time qk-quant against llama-quantize on the bench250m model
# (`make bench-quant`; a benchmark, not a test).
#
#   tools/bench-quant.sh [-m MODEL.gguf] [-l LLAMA_QUANTIZE] [-t THREADS] [PRESET ...]
#
# MODEL defaults to build/bench/bench250m-f16.gguf, made on first use with
#   python3 ../shared/tools/mkgguf.py build/bench/bench250m-f16.gguf --preset bench250m --seed 7
# LLAMA_QUANTIZE defaults to $LLAMA_QUANTIZE or ../ref/llama.cpp/build/bin/llama-quantize (a llama.cpp
# built beside the project; never part of it).  Presets default to Q8_0 Q4_K_M Q6_K IQ4_XS; 2 threads.
# For each preset both tools run once, one after the other, on a warm page cache; the outputs must be
# byte-identical.  Prints wall seconds and the ratio qk / llama (target: <= 0.6).
set -u
QK=${QK_BIN:-build/qk}
LQ=${LLAMA_QUANTIZE:-../ref/llama.cpp/build/bin/llama-quantize}
MODEL=build/bench/bench250m-f16.gguf
THREADS=2
while getopts m:l:t: opt; do
    case $opt in
    m) MODEL=$OPTARG ;;
    l) LQ=$OPTARG ;;
    t) THREADS=$OPTARG ;;
    *) echo "usage: $0 [-m MODEL] [-l LLAMA_QUANTIZE] [-t THREADS] [PRESET ...]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
PRESETS=${*:-Q8_0 Q4_K_M Q6_K IQ4_XS}
if [ ! -f "$MODEL" ]; then
    mkdir -p "$(dirname "$MODEL")"
    PY=${PYTHON:-python3}
    "$PY" -c 'import numpy' 2>/dev/null || PY=/usr/bin/python3
    "$PY" ../shared/tools/mkgguf.py "$MODEL" --preset bench250m --seed 7 >/dev/null || {
        echo "bench-quant: cannot make $MODEL (needs python3 with numpy)" >&2; exit 2; }
fi
[ -x "$LQ" ] || { echo "bench-quant: no llama-quantize at $LQ (set LLAMA_QUANTIZE)" >&2; exit 2; }
W=$(mktemp -d "${TMPDIR:-/tmp}/bench-quant.XXXXXX")
trap 'rm -rf "$W"' EXIT
cat "$MODEL" >/dev/null # warm the page cache

now() { date +%s.%N; }
printf '%-8s %10s %10s %7s  %s\n' preset qk_s llama_s ratio identical
status=0
for p in $PRESETS; do
    t0=$(now)
    "$QK" quant -q "$MODEL" "$W/qk.gguf" "$p" "$THREADS" || { echo "qk-quant failed on $p" >&2; status=1; continue; }
    t1=$(now)
    "$LQ" "$MODEL" "$W/ll.gguf" "$p" "$THREADS" >"$W/ll.log" 2>&1 || { echo "llama-quantize failed on $p" >&2; status=1; continue; }
    t2=$(now)
    same=no
    cmp -s "$W/qk.gguf" "$W/ll.gguf" && same=yes
    [ $same = yes ] || status=1
    awk -v p="$p" -v a="$t0" -v b="$t1" -v c="$t2" -v s="$same" \
        'BEGIN { q = b - a; l = c - b; printf "%-8s %10.2f %10.2f %7.2f  %s\n", p, q, l, q / l, s }'
    rm -f "$W/qk.gguf" "$W/ll.gguf"
done
exit $status
