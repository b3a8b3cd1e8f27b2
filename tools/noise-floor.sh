#!/bin/sh
# The measurements of docs/noise-floor.md (issue #24) for GGUF files of one model:
#   sh tools/noise-floor.sh QK LLAMA_BIN WORK TEXT CTX CHUNKS BASE.gguf Q.gguf...
# QK: qk's binary; LLAMA_BIN: llama.cpp's build/bin (llama-perplexity, llama-quantize);
# WORK: a scratch directory (base files are large: rows x n_vocab x 2 bytes each);
# TEXT, CTX, CHUNKS: the evaluation text, -c and --chunks; BASE.gguf: the unquantized model.
# For each Q.gguf, one markdown row on stdout (Mean KLD / 99.0% KLD / same top %):
#   llama FA on/off   llama-perplexity -fa off against its own -fa on base file, same Q
#   llama Q vs deq    llama.cpp: Q against Q dequantized to F32 by llama-quantize (its activation share)
#   llama total       llama.cpp: Q against BASE
#   qk total, weights, activations, floor    qk-kld --split-error --noise-floor against llama's BASE file
#   qk vs llama       qk-kld on Q against llama's -fa on base file of Q (two engines, same file)
#   f32 gate          qk-kld --act-type f32 on Q against llama's base file of the F32-dequantized Q
# Not part of make check; everything runs with 2 threads.
set -u
[ $# -ge 8 ] || { echo "usage: $0 QK LLAMA_BIN WORK TEXT CTX CHUNKS BASE.gguf Q.gguf..." >&2; exit 2; }
QK=$1 L=$2 W=$3 TEXT=$4 CTX=$5 CH=$6 BASE=$7
shift 7
mkdir -p "$W" || exit 3

# lp LOG ARGS...: a llama-perplexity --kl-divergence run into LOG; again when its final statistics
# did not reach the file (its logger sometimes loses them at exit)
lp() {
    lp_log=$1
    shift
    for _ in 1 2 3; do
        nice "$L/llama-perplexity" -t 2 "$@" >"$lp_log" 2>&1
        grep -q "^Same top p:" "$lp_log" && return 0
    done
    echo "llama-perplexity $*: no statistics (see $lp_log)" >&2
    return 1
}
# lb LOG KLD ARGS...: llama-perplexity writing the base file KLD (kept, with KLD.done, for a rerun)
lb() {
    lb_log=$1 lb_kld=$2
    shift 2
    [ -f "$lb_kld.done" ] && return 0
    nice "$L/llama-perplexity" -t 2 "$@" --kl-divergence-base "$lb_kld" >"$lb_log" 2>&1 &&
        [ -s "$lb_kld" ] && touch "$lb_kld.done" && return 0
    echo "llama-perplexity $*: failed (see $lb_log)" >&2
    return 1
}
# lstats LOG: "mean / p99 / top" from a llama-perplexity KL-divergence printout
lstats() {
    awk '/^Mean    KLD:/ {m = $3} /^99.0%   KLD:/ {p = $3} /^Same top p:/ {t = $4}
         END {printf "%s / %s / %s", m, p, t}' "$1"
}
# qstats JSON KEY...: "mean / p99 / top" of a figure of qk-kld --json
qstats() {
    python3 - "$@" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for k in sys.argv[2:]:
    f = d
    for part in k.split("."):
        f = f[part]
    print("%.6f / %.6f / %.3f" % (f["mean"]["value"], f["p99"]["value"], f["same_top_pct"]["value"]))
EOF
}

run="-f $TEXT -c $CTX --chunks $CH"
# shellcheck disable=SC2086
lb "$W/base.log" "$W/base.kld" -m "$BASE" $run || exit 1
echo "| file | llama FA on/off | llama Q vs deq | llama total | qk total | qk weights | qk activations | qk floor | qk vs llama | f32 gate (Mean KLD) |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for q in "$@"; do
    n=$(basename "$q" .gguf)
    # shellcheck disable=SC2086
    lb "$W/$n.faon.log" "$W/$n.faon.kld" -m "$q" $run -fa on || continue
    lp "$W/$n.faoff.log" -m "$q" -fa off --kl-divergence-base "$W/$n.faon.kld" --kl-divergence || continue
    [ -f "$W/$n.deq.kld.done" ] ||
        nice "$L/llama-quantize" --allow-requantize "$q" "$W/$n.deq.gguf" F32 2 >"$W/$n.lq.log" 2>&1 ||
        { echo "| $n | llama-quantize failed |"; continue; }
    # shellcheck disable=SC2086
    lb "$W/$n.deqbase.log" "$W/$n.deq.kld" -m "$W/$n.deq.gguf" $run || continue
    lp "$W/$n.vsdeq.log" -m "$q" --kl-divergence-base "$W/$n.deq.kld" --kl-divergence || continue
    lp "$W/$n.total.log" -m "$q" --kl-divergence-base "$W/base.kld" --kl-divergence || continue
    nice "$QK" kld -q -t 2 -m "$q" --kld-base "$W/base.kld" --split-error --noise-floor --json >"$W/$n.qk.json" || continue
    nice "$QK" kld -q -t 2 -m "$q" --kld-base "$W/$n.faon.kld" --json >"$W/$n.qkvsl.json" || continue
    nice "$QK" kld -q -t 2 -m "$q" --act-type f32 --kld-base "$W/$n.deq.kld" --json >"$W/$n.gate.json" || continue
    gate=$(python3 -c 'import json,sys; print("%.2e" % json.load(open(sys.argv[1]))["kld"]["mean"])' "$W/$n.gate.json")
    vs=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.6f / %.6f / %.3f" % (d["kld"]["mean"], d["kld"]["p99"], d["same_top_p_pct"]["value"]))' "$W/$n.qkvsl.json")
    qk=$(qstats "$W/$n.qk.json" split.total split.weights split.activations noise_floor |
        tr '\n' '|' | sed 's/|$//; s/|/ | /g')
    echo "| $n | $(lstats "$W/$n.faoff.log") | $(lstats "$W/$n.vsdeq.log") | $(lstats "$W/$n.total.log") | $qk | $vs | $gate |"
    rm -f "$W/$n.faon.kld"* "$W/$n.deq.kld"* "$W/$n.deq.gguf"
done
