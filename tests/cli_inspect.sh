# qk-inspect behaviour (sourced by tests/cli.sh: uses its expect/ok/bad helpers)
M=goldens/models/stories260K
expect 0 "$QK" inspect "$M/stories260K-f32.gguf"
grep -q '^  f32 *48 *292800 ' "$T/out" && ok || bad "census of stories260K"
expect 0 "$QK" inspect --json "$M/stories260K-f32.gguf"
if command -v python3 >/dev/null; then
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["format"]=="gguf" and d["total"]["tensors"]==48 and d["architecture"]=="llama" and d["hyperparameters"]["block_count"]==5' "$T/out" && ok || bad "inspect --json"
fi
expect 0 "$QK" inspect --json "$M/hf-bf16"
expect 0 "$QK" inspect --stats --tensors 'blk.0.*' "$M/stories260K-f32.gguf"
expect 0 "$QK" inspect --stats --json "$M/hf-bf16"
# cross-format diff: the HF directory against its GGUF conversion is all-identical
expect 0 "$QK" inspect --diff "$M/hf-f32" "$M/stories260K-f32.gguf"
grep -q '^48 tensors compared: 48 identical, 0 differ, 0 only in B' "$T/out" && ok || bad "hf-f32 vs gguf not all identical"
expect 0 "$QK" inspect --diff --max-rmse 0 "$M/stories260K-f32.gguf" "$M/hf-f32"
# thresholds: bf16 rounding is ~ -50 dB; demanding 80 dB fails with exit 1
expect 1 "$QK" inspect --diff --min-snr 80 "$M/hf-bf16" "$M/stories260K-f32.gguf"
expect 0 "$QK" inspect --diff --min-snr 30 "$M/hf-bf16" "$M/stories260K-f32.gguf"
# thread-count independence of the output
"$QK" inspect --stats -t 1 --json "$M/stories260K-f32.gguf" >"$T/s1"
"$QK" inspect --stats -t 2 --json "$M/stories260K-f32.gguf" >"$T/s2"
cmp -s "$T/s1" "$T/s2" && ok || bad "inspect --stats output depends on threads"
# bad input: exit 2, one line naming the file, the field and the offset
for f in tests/bad/gguf/*.gguf tests/bad/safetensors/*.safetensors; do
    [ -f "$f" ] || continue
    case "${f##*/}" in valid*) continue;; esac
    expect 2 "$QK" inspect "$f"
    grep -q "^qk-inspect: $f: .* at offset [0-9]*: " "$T/err" || bad "error line format for $f: $(cat "$T/err")"
done
expect 2 "$QK" inspect
expect 2 "$QK" inspect --diff "$M/hf-f32"
expect 2 "$QK" inspect --max-rmse 1 "$M/hf-f32"
expect 3 "$QK" inspect "$T/does-not-exist.gguf"
# a quantized HF directory: the scheme of every layer is reported (a config over float weights
# is refused: tests/cli_reliability.sh)
"$QK" quant -q --to ct-w4a16 goldens/models/stories4M/hf-f32 "$T/ctq" >/dev/null 2>&1
expect 0 "$QK" inspect "$T/ctq"
grep -q 'model.layers.0.self_attn.q_proj.weight .*compressed-tensors pack-quantized: int4 w/ group 128 symmetric' "$T/out" && ok || bad "per-layer scheme not reported"
grep -q 'model.norm.weight .*not quantized' "$T/out" && ok || bad "norm reported as quantized"
expect 0 "$QK" inspect --json "$T/ctq"
grep -q '"scheme": "compressed-tensors pack-quantized' "$T/out" && ok || bad "scheme missing from --json"
