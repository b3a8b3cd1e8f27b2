#!/bin/sh
# report-demo.sh - make report-demo: qk-report on stories4M, the base (F32) against every GGUF
# preset that needs no importance matrix, quantized by qk-quant, and its Hugging Face directory,
# on 10 windows of 256 tokens of TinyStories and 40 of the TinyStories HellaSwag tasks.
#
#   tools/report-demo.sh [BUILD]      -> BUILD/report-demo/report/ (report.md, .json, .html, plots)
#
# Quantized Hugging Face checkpoints (compressed-tensors, MLX) join the table once qk can run
# them (qk-run/qk-kld read F32/F16/BF16 Hugging Face directories today).
set -eu
B=${1:-build}
QK=$B/qk
D=$B/report-demo
M=goldens/models/stories4M/stories4M-f32.gguf
PRESETS="Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K IQ3_S IQ3_M IQ4_NL IQ4_XS TQ2_0 F16 BF16"
mkdir -p "$D/models"
models=""
for p in $PRESETS; do
    f=$D/models/stories4M-$p.gguf
    [ -s "$f" ] || "$QK" quant -q "$M" "$f" "$p" >/dev/null
    models="$models $f"
done
rm -rf "$D/report"
"$QK" report --base "$M" -f goldens/stories260K-eval/eval-64k.txt -c 256 --chunks 10 \
    --hellaswag goldens/tasks/hellaswag-stories.txt --hellaswag-tasks 40 -t "$(nproc)" -j 2 -o "$D/report" \
    $models goldens/models/stories4M/hf-f32 >/dev/null
echo "report-demo: $D/report/report.html ($D/report/report.md)"
