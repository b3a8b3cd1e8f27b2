#!/bin/sh
# The GGUF acceptance measurements of issue #19 on stories4M (not part of make check):
#   sh tools/calib-accept.sh QK LLAMA_BIN WORK [TYPES]
# QK: qk's binary; LLAMA_BIN: llama.cpp's build/bin (llama-imatrix, llama-perplexity,
# llama-quantize); WORK: a scratch directory.  TYPES default: Q4_K_M Q3_K_M Q2_K Q4_0 IQ4_XS.
# Evaluation text: goldens/stories260K-eval/eval-64k.txt = bytes [0, 64 KiB) of
# ../shared/models/text/tinystories-valid.txt; calibration text: bytes [128 KiB, 128 KiB + 200 kB)
# of the same file (disjoint); 64 chunks of 256 tokens for both qk-imatrix/llama-imatrix and GPTQ.
# Base: llama-perplexity's F32 base file ../shared/reference/stories4M/f32.kld (-c 256, 122 windows).
# Prints: qk-imatrix against llama-imatrix (tools/calib_cmp_imatrix.py, needs numpy and gguf),
# then one markdown row per type: Mean KLD (qk-kld) of round-to-nearest with llama-imatrix's and with
# qk-imatrix's matrix, of --method gptq, GPTQ's change, llama-perplexity's Mean KLD and PPL of the
# RTN and GPTQ files, and the file sizes.  Everything runs with 2 threads.
set -eu
[ $# -ge 3 ] || { echo "usage: $0 QK LLAMA_BIN WORK [TYPES]" >&2; exit 2; }
QK=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") L=$(cd "$2" && pwd) W=$3
TYPES=${4:-Q4_K_M Q3_K_M Q2_K Q4_0 IQ4_XS}
R=$(cd "$(dirname "$0")/.." && pwd)
M=$R/../shared/models/stories4M/stories4M-f32.gguf
E=$R/goldens/stories260K-eval/eval-64k.txt
B=$R/../shared/reference/stories4M/f32.kld
TV=$R/../shared/models/text/tinystories-valid.txt
PY=${PYTHON:-python3}
mkdir -p "$W"
cd "$W"
cmp -s -n 65536 "$E" "$TV" || { echo "calib-accept: $E is not the start of $TV" >&2; exit 2; }
tail -c +131073 "$TV" | head -c 200000 >calib.txt
"$L/llama-imatrix" -m "$M" -f calib.txt -c 256 --chunks 64 -t 2 -o llama.imatrix.gguf >llama-imatrix.log 2>&1
"$QK" imatrix -m "$M" -f calib.txt -c 256 --chunks 64 -t 2 -o qk.imatrix.gguf >qk-imatrix.log 2>&1
echo "qk-imatrix vs llama-imatrix (64 x 256 tokens): $("$PY" "$R/tools/calib_cmp_imatrix.py" qk.imatrix.gguf llama.imatrix.gguf)"
echo
echo "| type | RTN, llama-imatrix | RTN, qk-imatrix | GPTQ | GPTQ vs RTN | llama-perplexity KLD RTN / GPTQ | llama PPL RTN / GPTQ | bytes RTN / GPTQ |"
echo "|---|---|---|---|---|---|---|---|"
kq() { awk '/^Mean    KLD:/ {print $3; exit}' "$1"; }
pq() { awk '/^Mean PPL\(Q\) / {print $4; exit}' "$1"; }
for T in $TYPES; do
    "$QK" quant -q --imatrix llama.imatrix.gguf "$M" "rtn-$T.gguf" "$T" 2
    "$QK" quant -q --imatrix qk.imatrix.gguf "$M" "rtnqk-$T.gguf" "$T" 2
    "$QK" quant -q --method gptq --calib calib.txt --calib-ctx 256 --calib-chunks 64 -t 2 "$M" "gptq-$T.gguf" "$T" 2
    for f in "rtn-$T" "rtnqk-$T" "gptq-$T"; do
        "$QK" kld -m "$f.gguf" --kld-base "$B" -f "$E" -c 256 -t 2 >"$f.qk.txt" 2>&1
    done
    for f in "rtn-$T" "gptq-$T"; do
        # llama-perplexity sometimes exits before its statistics reach a pipe (../shared's README)
        for try in 1 2 3; do
            "$L/llama-perplexity" -m "$f.gguf" --kl-divergence-base "$B" --kl-divergence -t 2 >"$f.ll.txt" 2>&1 || true
            grep -q '^Mean    KLD:' "$f.ll.txt" && break
        done
    done
    a=$(kq "rtn-$T.qk.txt") g=$(kq "gptq-$T.qk.txt")
    echo "| $T | $a | $(kq "rtnqk-$T.qk.txt") | $g | $(awk -v a="$a" -v g="$g" 'BEGIN {printf "%+.1f %%", (g / a - 1) * 100}') |" \
        "$(kq "rtn-$T.ll.txt") / $(kq "gptq-$T.ll.txt") | $(pq "rtn-$T.ll.txt") / $(pq "gptq-$T.ll.txt") |" \
        "$(wc -c <"rtn-$T.gguf") / $(wc -c <"gptq-$T.gguf") |"
done
