#!/bin/sh
# bench-kld.sh - whole-process wall time and peak RSS of a KL-divergence run: qk-kld against
# llama.cpp's llama-perplexity and ik_llama.cpp's (issue #22's goal 3).  A measurement, not a test.
#
#   LLAMA_PERPLEXITY=/path/llama-perplexity [IK_PERPLEXITY=/path/ik/llama-perplexity] \
#       tools/bench-kld.sh BASE.gguf TEXT MODEL.gguf... [-- QK_BINARY]
#
# BASE.gguf (e.g. the F16 model) gives the base log-probs once, with llama-perplexity
# --kl-divergence-base (-c KLD_CTX, --chunks KLD_CHUNKS, defaults 512 and 8); then for KLD_ROUNDS
# rounds (default 3) each MODEL goes through qk-kld --kld-base, llama-perplexity --kl-divergence
# and ik's, one after the other (interleaved), each under /usr/bin/time.  Prints a markdown table
# of the median wall seconds and peak RSS per tool and model, and the ratios qk / llama.cpp and
# qk / ik_llama.cpp.  KLD_THREADS (default: all CPUs).  Needs python3 for the medians.
set -eu
LP=${LLAMA_PERPLEXITY:?set LLAMA_PERPLEXITY to the llama-perplexity of llama.cpp}
IK=${IK_PERPLEXITY:-}
BASE=$1 TEXT=$2
shift 2
MODELS=""
QK=build/qk
while [ $# -gt 0 ]; do
    if [ "$1" = -- ]; then QK=$2; break; fi
    MODELS="$MODELS $1"
    shift
done
C=${KLD_CTX:-512}
N=${KLD_CHUNKS:-8}
R=${KLD_ROUNDS:-3}
T=${KLD_THREADS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

"$LP" -m "$BASE" -f "$TEXT" -c "$C" --chunks "$N" -t "$T" --kl-divergence-base "$TMP/base.kld" >/dev/null 2>&1

# timed TOOL MODEL ROUND CMD...: one run under /usr/bin/time, "tool model round seconds kib" into rows
timed() {
    tool=$1 model=$2 round=$3
    shift 3
    if /usr/bin/time -f '%e %M' -o "$TMP/time" "$@" >/dev/null 2>&1; then
        echo "$tool $model $round $(cat "$TMP/time")" >>"$TMP/rows"
    else
        echo "$tool $model $round fail fail" >>"$TMP/rows"
    fi
}
: >"$TMP/rows"
round=1
while [ "$round" -le "$R" ]; do
    for m in $MODELS; do
        timed qk "$m" "$round" "$QK" kld -m "$m" --kld-base "$TMP/base.kld" -t "$T"
        timed llama.cpp "$m" "$round" "$LP" -m "$m" -f "$TEXT" -c "$C" --chunks "$N" -t "$T" \
            --kl-divergence-base "$TMP/base.kld" --kl-divergence
        [ -n "$IK" ] && timed ik_llama.cpp "$m" "$round" "$IK" -m "$m" -f "$TEXT" -c "$C" --chunks "$N" -t "$T" \
            --kl-divergence-base "$TMP/base.kld" --kl-divergence
    done
    round=$((round + 1))
done
python3 - "$TMP/rows" "$R" "$T" "$C" "$N" <<'PY'
import collections, os, statistics, sys
rows, rounds, threads, ctx, chunks = sys.argv[1:6]
t = collections.defaultdict(list)
for line in open(rows):
    tool, model, _, sec, kib = line.split()
    if sec != "fail":
        t[(tool, model)].append((float(sec), int(kib)))
models = list(dict.fromkeys(m for _, m in t))
med = lambda k, i: statistics.median(v[i] for v in t[k]) if t.get(k) else None
print("KL-divergence runs, -c %s, %s chunks, %s threads, medians of %s interleaved rounds "
      "(wall seconds and peak RSS of the whole process)\n" % (ctx, chunks, threads, rounds))
print("| model | qk s | llama.cpp s | ik s | qk / llama.cpp | qk / ik | qk MiB | llama.cpp MiB | ik MiB | RSS qk / llama.cpp | RSS qk / ik |")
print("| ----- | ---: | ----------: | ---: | -------------: | ------: | -----: | ------------: | -----: | ----------------: | ----------: |")
f = lambda v, s=1.0: "%.2f" % (v / s) if v else "-"
r = lambda a, b: "%.2f" % (a / b) if a and b else "-"
for m in models:
    q, l, i = ((med((tool, m), 0), med((tool, m), 1)) for tool in ("qk", "llama.cpp", "ik_llama.cpp"))
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        os.path.basename(m), f(q[0]), f(l[0]), f(i[0]), r(q[0], l[0]), r(q[0], i[0]),
        f(q[1], 1024), f(l[1], 1024), f(i[1], 1024), r(q[1], l[1]), r(q[1], i[1])))
PY
