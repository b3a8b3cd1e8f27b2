#!/bin/sh
# bench-suite.sh - the short fixed benchmark suite of `make bench`.
#
#   tools/bench-suite.sh [QK_BINARY [OUT.md]]     (defaults: build/qk, build/bench.md)
#
# Writes one markdown document: the machine's roofline, the kernel throughput
# table, and qk-bench model on the bundled models (plus any in BENCH_MODELS,
# space-separated paths; tools/bench-models.sh makes the issue #22 set).  With
# LLAMA_BENCH=/path/to/llama-bench and/or IK_BENCH=/path/to/ik_llama.cpp's
# llama-bench the same models also go through those (same -p/-n/-d/-r/-t,
# interleaved model by model over BENCH_ROUNDS rounds) and a table of qk /
# llama.cpp / ik_llama.cpp t/s and ratios (medians; needs python3) is added.
# Knobs: BENCH_THREADS (default: all CPUs), BENCH_REPS (5), BENCH_PP (128;
# comma list), BENCH_TG (32; comma list), BENCH_DEPTH (0; comma list, llama-
# bench's -d), BENCH_ROUNDS (3), BENCH_TYPES (kernel types, default qk-bench's
# list), BENCH_BLAS (library for the OpenBLAS reference), BENCH_SKIP_SOLO=1
# (only the side-by-side table: no roofline, kernels or qk-only model run),
# BENCH_BUNDLED=0 (only BENCH_MODELS, not the bundled tiny models), BENCH_CALIB=0
# (without the imatrix and GPTQ sections below).
# qk-imatrix's throughput (against LLAMA_IMATRIX=/path/to/llama-imatrix when
# set) is tools/bench-imatrix.sh's; GPTQ W4A16 against llm-compressor's oneshot
# (PYTHON with llmcompressor) tools/bench-calib.sh's.
set -eu
QK=${1:-build/qk}
OUT=${2:-build/bench.md}
T=${BENCH_THREADS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}
R=${BENCH_REPS:-5}
PP=${BENCH_PP:-128}
TG=${BENCH_TG:-32}
MODELS="goldens/models/stories260K/stories260K-f32.gguf goldens/models/stories4M/stories4M-f32.gguf ${BENCH_MODELS:-}"
[ "${BENCH_BUNDLED:-1}" = 0 ] && MODELS=${BENCH_MODELS:-}
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

DEPTH=${BENCH_DEPTH:-0}
if [ "${BENCH_SKIP_SOLO:-0}" != 1 ]; then
    printf '\n## Roofline\n' >>"$TMP/doc"
    run "$QK" bench roofline -q -t "$T" --passes 5 --time-ms 200

    printf '\n## Kernels (1 thread)\n' >>"$TMP/doc"
    # shellcheck disable=SC2086
    run "$QK" bench kernels -q -t 1 --time-ms 50 -r 3 $types $blas

    printf '\n## Models\n' >>"$TMP/doc"
    margs=""
    for m in $MODELS; do margs="$margs -m $m"; done
    # shellcheck disable=SC2086
    run "$QK" bench model -q $margs -p "$PP" -n "$TG" -d "$DEPTH" -r "$R" -t "$T"
fi

if [ -n "${LLAMA_BENCH:-}${IK_BENCH:-}" ]; then
    # qk / llama.cpp / ik_llama.cpp side by side: BENCH_ROUNDS rounds (default 3), each running
    # every model through every tool in turn (interleaved), -r BENCH_REPS each; the table gives
    # the median of all samples.  ik_llama.cpp runs with and without -rtr 1 and its better
    # median counts ("ik best").  Its llama-bench has no -d: tgN @ dD is its -gp D,N, and
    # ppP @ dD is P / (t(pp D+P) - t(pp D)) with -ub P (the last micro-batch of P tokens
    # after D cached ones, the same work as llama-bench -d D -p P).
    ROUNDS=${BENCH_ROUNDS:-3}
    DEPTHS=$DEPTH
    printf '\n## qk, llama.cpp and ik_llama.cpp\n' >>"$TMP/doc"
    mkdir -p "$TMP/sbs"
    : >"$TMP/sbs/models"
    n=0
    for m in $MODELS; do n=$((n + 1)); echo "$n $m" >>"$TMP/sbs/models"; done
    ll_d=""
    [ "$DEPTHS" != 0 ] && ll_d="-d $DEPTHS"
    round=1
    while [ "$round" -le "$ROUNDS" ]; do
        n=0
        for m in $MODELS; do
            n=$((n + 1))
            d="$TMP/sbs/$round.$n"
            "$QK" bench model -q -m "$m" -p "$PP" -n "$TG" -d "$DEPTHS" -r "$R" -t "$T" --no-roofline --json >"$d.qk.json"
            if [ -n "${LLAMA_BENCH:-}" ]; then
                # shellcheck disable=SC2086
                "$LLAMA_BENCH" -m "$m" -p "$PP" -n "$TG" $ll_d -r "$R" -t "$T" -o json >"$d.ll.json" 2>/dev/null ||
                    echo "[]" >"$d.ll.json"
            fi
            if [ -n "${IK_BENCH:-}" ]; then
                for rtr in 0 1; do
                    "$IK_BENCH" -m "$m" -p "$PP" -n "$TG" -r "$R" -t "$T" -rtr $rtr -o json >"$d.ik$rtr.json" 2>/dev/null ||
                        echo "[]" >"$d.ik$rtr.json"
                    for dp in $(echo "$DEPTHS" | tr ',' ' '); do
                        [ "$dp" = 0 ] && continue
                        gp=""
                        for g in $(echo "$TG" | tr ',' ' '); do [ "$g" != 0 ] && gp="$gp -gp $dp,$g"; done
                        if [ -n "$gp" ]; then
                            # shellcheck disable=SC2086
                            "$IK_BENCH" -m "$m" -p 0 -n 0 $gp -r "$R" -t "$T" -rtr $rtr -o json \
                                >"$d.ik$rtr.gp$dp.json" 2>/dev/null || echo "[]" >"$d.ik$rtr.gp$dp.json"
                        fi
                        for p in $(echo "$PP" | tr ',' ' '); do
                            [ "$p" = 0 ] && continue
                            "$IK_BENCH" -m "$m" -p "$dp,$((dp + p))" -n 0 -ub "$p" -b "$((dp + p))" -r "$R" -t "$T" \
                                -rtr $rtr -o json >"$d.ik$rtr.pd$dp.$p.json" 2>/dev/null || echo "[]" >"$d.ik$rtr.pd$dp.$p.json"
                        done
                    done
                done
            fi
        done
        round=$((round + 1))
    done
    python3 - "$TMP/sbs" "$ROUNDS" "$R" "$T" "${LLAMA_BENCH:-}" "${IK_BENCH:-}" >>"$TMP/doc" <<'PY'
import glob, json, os, re, statistics, sys
d, rounds, reps, threads, ll_bin, ik_bin = sys.argv[1:7]
models = dict(l.split(" ", 1) for l in open(os.path.join(d, "models")).read().splitlines())
def load(f):
    try:
        return json.load(open(f))
    except (OSError, ValueError):
        return []
def name(p, g, dp):
    t = "pp%d" % p if p else "tg%d" % g
    return t + (" @ d%d" % dp if dp else "")
samples = {}  # (model, tool, test) -> [t/s]
commits = {}
def add(n, tool, test, xs):
    samples.setdefault((n, tool, test), []).extend(xs)
for f in sorted(glob.glob(os.path.join(d, "*.*.qk.json"))):
    n = os.path.basename(f).split(".")[1]
    for r in load(f).get("rows", []) if isinstance(load(f), dict) else []:
        add(n, "qk", r["test"], r["tokens_per_s"]["samples"])
for f in sorted(glob.glob(os.path.join(d, "*.*.ll.json"))):
    n = os.path.basename(f).split(".")[1]
    for r in load(f):
        commits["llama.cpp"] = r.get("build_commit", "?")
        add(n, "llama.cpp", name(r["n_prompt"], r["n_gen"], r.get("n_depth", 0)), r["samples_ts"])
for f in sorted(glob.glob(os.path.join(d, "*.*.ik[01].json")) + glob.glob(os.path.join(d, "*.*.ik[01].gp*.json"))):
    b = os.path.basename(f).split(".")
    n, tool = b[1], "ik" + b[2][-1]
    for r in load(f):
        commits["ik_llama.cpp"] = r.get("build_commit", "?")
        m = re.fullmatch(r"tg(\d+)@pp(\d+)", r.get("test", ""))
        test = "tg%s @ d%s" % m.groups() if m else name(r["n_prompt"], r["n_gen"], 0)
        add(n, tool, test, r["samples_ts"])
for f in sorted(glob.glob(os.path.join(d, "*.*.ik[01].pd*.json"))):
    b = os.path.basename(f).split(".")
    n, tool, dp, p = b[1], "ik" + b[2][-1], int(b[3][2:]), int(b[4])
    ns = {r["n_prompt"]: statistics.median(r["samples_ns"]) for r in load(f)}
    if dp in ns and dp + p in ns and ns[dp + p] > ns[dp]:
        add(n, tool, "pp%d @ d%d" % (p, dp), [p * 1e9 / (ns[dp + p] - ns[dp])])
tests = []
for (n, tool, test) in samples:
    if (n, test) not in tests:
        tests.append((n, test))
def key(nt):
    n, t = nt
    m = re.match(r"(pp|tg)(\d+)(?: @ d(\d+))?", t)
    return (int(n), m.group(1) != "pp", int(m.group(3) or 0), int(m.group(2)))
med = lambda n, tool, t: statistics.median(samples[(n, tool, t)]) if samples.get((n, tool, t)) else None
fmt = lambda v: "%.2f" % v if v else "-"
ratio = lambda a, b: "%.2f" % (a / b) if a and b else "-"
print("\n%s rounds x %s repetitions, %s threads, medians of all samples; llama.cpp %s (`%s`), "
      "ik_llama.cpp %s (`%s`); ik best: the better of -rtr 0 and -rtr 1 (which in brackets)\n"
      % (rounds, reps, threads, commits.get("llama.cpp", "-"), ll_bin or "-",
         commits.get("ik_llama.cpp", "-"), ik_bin or "-"))
print("| model | test | qk t/s | llama.cpp t/s | ik best t/s | qk / llama.cpp | qk / ik best |")
print("| ----- | ---- | -----: | ------------: | ----------: | -------------: | -----------: |")
for n, t in sorted(tests, key=key):
    q, l = med(n, "qk", t), med(n, "llama.cpp", t)
    i0, i1 = med(n, "ik0", t), med(n, "ik1", t)
    ib = max([v for v in (i0, i1) if v] or [0]) or None
    which = "" if not ib else " (rtr %d)" % (1 if ib == i1 else 0)
    print("| %s | %s | %s | %s | %s%s | %s | %s |" % (os.path.basename(models[n]), t, fmt(q), fmt(l), fmt(ib),
          which, ratio(q, l), ratio(q, ib)))
PY
fi

if [ "${BENCH_CALIB:-1}" = 1 ]; then
    printf '\n## Importance matrices\n\n' >>"$TMP/doc"
    sh tools/bench-imatrix.sh "$QK" >>"$TMP/doc"
    printf '\n## GPTQ for Hugging Face checkpoints\n\n' >>"$TMP/doc"
    sh tools/bench-calib.sh "$QK" >>"$TMP/doc"
fi

mkdir -p "$(dirname "$OUT")"
mv "$TMP/doc" "$OUT.tmp.$$" && mv "$OUT.tmp.$$" "$OUT"
echo "wrote $OUT"
# the side-by-side table on stdout as well
[ -n "${LLAMA_BENCH:-}${IK_BENCH:-}" ] && sed -n '/^## qk, llama.cpp and ik_llama.cpp/,$p' "$OUT"
exit 0
