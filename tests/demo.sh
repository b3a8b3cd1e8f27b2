#!/bin/sh
# make demo: the main job on the bundled tiny model stories4M:
# inspect -> quantize (byte-identical to llama-quantize) -> run -> KL-divergence report.
set -e
B=${1:-build}
M=goldens/models/stories4M/stories4M-f32.gguf
TEXT=goldens/stories260K-eval/eval-64k.txt
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

echo "== 1. qk-inspect: what is in the file"
"$B/qk-inspect" --meta 'general.*' "$M" | sed -n '1,12p;/^census/,$p'

echo
echo "== 2. qk-quant: Q4_K_M, as llama-quantize would write it"
"$B/qk-quant" -q "$M" "$T/stories4M-Q4_K_M.gguf" Q4_K_M 2
want=$(awk '$2 == "stories4M-Q4_K_M.gguf" {print $1}' goldens/quant/stories4M.sha256)
got=$(sha256sum "$T/stories4M-Q4_K_M.gguf" | cut -d' ' -f1)
if [ "$got" = "$want" ]; then echo "sha256 $got: identical to llama.cpp's file"; else echo "sha256 differs from llama.cpp's file" >&2; exit 1; fi

echo
echo "== 3. qk-run: greedy continuation from the quantized model"
"$B/qk-run" -m "$T/stories4M-Q4_K_M.gguf" -p "Once upon a time" -n 40 --temp 0 -q
echo

echo
echo "== 4. qk-kld: is the quantized model still the model? (8 windows of 256 tokens)"
"$B/qk-kld" -q -m "$T/stories4M-Q4_K_M.gguf" --base "$M" -f "$TEXT" -c 256 --chunks 8 \
    --max-kld-mean 0.05 --min-same-top 85 | grep -E '^Mean PPL\(Q\)/PPL|^Mean +KLD|^99.0% +KLD|^Same top p'
echo "thresholds (--max-kld-mean 0.05 --min-same-top 85): passed"
