#!/bin/sh
# make demo: the main job on the bundled tiny model.
set -e
B=${1:-build}
M=goldens/models/stories260K
echo "== qk-inspect $M/stories260K-f32.gguf"
"$B/qk-inspect" --meta 'general.*' "$M/stories260K-f32.gguf"
echo
echo "== qk-inspect --diff: the Hugging Face directory against its GGUF conversion"
"$B/qk-inspect" --diff "$M/hf-f32" "$M/stories260K-f32.gguf" | tail -n 3
echo
echo "== round trip of a tensor through Q4_K (encode, decode) and the error it costs"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$B/qk-quant" --raw-encode q4_K --shape 8x4096 goldens/ggml/input.f32 "$T/w.q4k"
"$B/qk-quant" --raw-decode q4_K --shape 8x4096 "$T/w.q4k" "$T/w.f32"
cmp -s "$T/w.q4k" goldens/ggml/q4_K.plain.q && echo "q4_K bytes identical to ggml's"
