#!/bin/sh
# bench-calib.sh - qk-quant --to ct-w4a16 --method gptq against llm-compressor's oneshot
# (GPTQModifier, scheme W4A16) on the same model, calibration tokens and threads (part of
# `make bench`; a benchmark, not a test: run it on an idle machine).
#
#   tools/bench-calib.sh [QK_BINARY]        prints a markdown table on stdout
#
# Seconds = wall time of the whole command (model load, tokenization, calibration, writing the
# directory; for llm-compressor the Python process: imports, from_pretrained, oneshot,
# save_pretrained), the median of BENCH_REPS runs, the two tools interleaved run by run.  Both get
# qk's tokenization of the text (tools/crosscheck_calib.py --lc).  The load average before and
# after is printed: on a shared machine the ratio, not the seconds, is what carries over.
# Knobs: PYTHON (a python with llmcompressor; without one only qk runs), BENCH_THREADS (2),
# BENCH_REPS (3), BENCH_DIR (build/bench: bench250m-f16.gguf and its HF twin, made as
# tools/bench-hf.sh makes them), CALIB_MODELS ("stories4M bench250m"), CALIB_CHUNKS (16),
# CALIB_CTX (256); the text: bytes [128 KiB, +400 kB) of ../shared/models/text/tinystories-valid.txt.
# CALIB_LC_LAYERS ("bench250m:2"): MODEL:N runs llm-compressor on MODEL's first N decoder layers only
# (tools/bench_calib_lc.py: the model loaded with num_hidden_layers=N, each layer's time taken from
# the start of its calibration to the next one's) and counts its seconds as that process' wall time
# plus (layers - N) x the mean of those full intervals (N >= 2: the last interval, to the end of
# oneshot, also holds the head's pass and the wrap-up), without save_pretrained;
# "" runs it whole everywhere.  The estimate and the layer times are printed under the table.
set -eu
QK=${1:-build/qk}
export QK_BIN="$QK"
T=${BENCH_THREADS:-2}
R=${BENCH_REPS:-3}
D=${BENCH_DIR:-build/bench}
PY=${PYTHON:-python3}
N=${CALIB_CHUNKS:-16}
C=${CALIB_CTX:-256}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
tail -c +131073 ../shared/models/text/tinystories-valid.txt | head -c 400000 >"$TMP/calib.txt"
LC=no
"$PY" -c 'import llmcompressor' >/dev/null 2>&1 && LC=yes
now() { date +%s.%N; }
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
timed() { # seconds of one run of the command, its output discarded
    t0=$(now)
    "$@" >"$TMP/log" 2>&1 || { echo "bench-calib: failed: $*" >&2; tail -3 "$TMP/log" >&2; exit 3; }
    t1=$(now)
    echo "$t0 $t1" | awk '{printf "%.3f\n", $2 - $1}'
}
LCL=${CALIB_LC_LAYERS-bench250m:2}
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) online"
echo "GPTQ W4A16 (qk-quant --to ct-w4a16 --method gptq$([ $LC = yes ] && echo "; llm-compressor oneshot GPTQModifier")):"\
    "$N chunks of $C tokens, $T threads, median of $R runs; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
if [ $LC = yes ]; then
    echo "| model | qk s | llm-compressor s | ratio |"
    echo "| ----- | ---: | ---------------: | ----: |"
else
    echo "| model | qk s |"
    echo "| ----- | ---: |"
fi
for name in ${CALIB_MODELS:-stories4M bench250m}; do
    case $name in
    stories4M) src=goldens/models/stories4M/hf-f32 tok=goldens/models/stories4M/stories4M-f32.gguf;;
    bench250m)
        tok=$D/bench250m-f16.gguf src=$D/bench250m-hf
        mkdir -p "$D"
        [ -f "$tok" ] || "$PY" ../shared/tools/mkgguf.py "$tok" --preset bench250m --seed 7 >/dev/null
        [ -d "$src" ] || "$PY" tools/gguf2hf.py "$tok" "$src" >/dev/null;;
    *) src=$name tok=$name;;
    esac
    : >"$TMP/qk" && : >"$TMP/lc" && : >"$TMP/lcnote"
    nl=0
    for x in $LCL; do [ "${x%:*}" = "$name" ] && nl=${x##*:}; done
    i=0
    while [ $i -lt "$R" ]; do
        rm -rf "$TMP/q" "$TMP/l"
        timed "$QK" quant -q --to ct-w4a16 --method gptq --calib "$TMP/calib.txt" -c "$C" --calib-chunks "$N" \
            --tokenizer "$tok" -t "$T" "$src" "$TMP/q" >>"$TMP/qk"
        if [ $LC = yes ] && [ "$nl" -gt 0 ]; then
            w=$(timed "$PY" tools/bench_calib_lc.py "$src" "$tok" "$TMP/calib.txt" "$C" "$N" "$T" "$nl" "$TMP/lc.json") && [ -n "$w" ] || exit 3
            "$PY" - "$TMP/lc.json" "$w" >>"$TMP/lc" 2>>"$TMP/lcnote" <<'PY'
import json, sys
d, wall = json.load(open(sys.argv[1])), float(sys.argv[2])
ls, more = d["layer_s"], d["total_layers"] - d["layers"]
full = ls[:-1] or ls  # the last runs to the end of oneshot: it holds the head's pass and the wrap-up
est, hi = wall + more * sum(full) / len(full), wall + more * sum(ls) / len(ls)
print(f"{est:.3f}")
print(f"  llm-compressor, first {d['layers']} of {d['total_layers']} layers: process {wall:.1f} s (load {d['load_s']:.1f} s,"
      f" oneshot {d['oneshot_s']:.1f} s), layer intervals {', '.join(f'{x:.1f}' for x in ls)} s -> {est:.1f} s"
      f" estimated ({hi:.1f} s with the last interval counted as a layer)", file=sys.stderr)
PY
        elif [ $LC = yes ]; then
            timed "$PY" tools/crosscheck_calib.py --lc "$src" "$tok" "$TMP/calib.txt" "$C" "$N" "$T" "$TMP/l" >>"$TMP/lc"
        fi
        echo "  run $((i + 1)): qk $(tail -1 "$TMP/qk") s$([ $LC = yes ] && echo ", llm-compressor $(tail -1 "$TMP/lc") s"), load average $(cut -d' ' -f1-3 /proc/loadavg)" >>"$TMP/lcnote"
        i=$((i + 1))
    done
    q=$(median <"$TMP/qk")
    if [ $LC = yes ]; then
        l=$(median <"$TMP/lc")
        echo "| $name | $q | $l$([ "$nl" -gt 0 ] && echo " (est.)") | $(awk -v q="$q" -v l="$l" 'BEGIN {printf "%.1fx", l / q}') |"
    else
        echo "| $name | $q |"
    fi
    cat "$TMP/lcnote" >>"$TMP/notes"
done
echo
[ -f "$TMP/notes" ] && cat "$TMP/notes"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
