# Quantized Hugging Face checkpoints run on their stored parts (issue #18);
# sourced by tests/cli.sh.
#
# goldens/hfq (tools/mk_hfq_goldens.py): llm-compressor's own checkpoints of
# stories4M-L1 in every compressed-tensors scheme, with transformers'
# logits (CompressedTensorsConfig(run_compressed=False)) on one window, and
# ModelOpt's NVFP4 and MIXED_PRECISION exports with ModelOpt's own
# quantize/dequantize functions' logits (crosscheck_hf.py mo_model).  For
# each: qk-run's logits against them within the gate of gates.txt (1e-6
# weight-only; activation-quantized schemes the larger of 1e-5 and 4x the
# reference's own noise floor, see crosscheck_hf.py), and the same bytes
# whatever the threads, the batch and the SIMD level.  Then checkpoints
# qk-quant --to writes (ct-*, mlx-q*): native products equal to their
# dequantized twin where the activations are float, and the bad input of
# issue #18 (a scheme qk cannot compute: exit 2 naming the config key).
H=goldens/hfq
HG=goldens/models/stories4M/stories4M-f32.gguf
if [ -f "$H/gates.txt" ]; then
    while read -r s k t; do
        case $s in '#'*|'') continue ;; esac
        if "$QK" run -m "$H/$s" --tokenizer "$HG" --tokens-in "$H/tokens.txt" -n 0 --kv-type f32 -q -t 2 \
            --logits-out "$T/$s.logits" 2>"$T/err" &&
            "$QK" kld --logits "$T/$s.logits" --logits-base "$H/$s/reference.logits" --max-kld-mean "$k" \
                --min-same-top "$t" -q >"$T/kld.txt" 2>"$T/err"; then ok; else
            bad "hfq $s: qk vs transformers over the gate (mean KLD <= $k, same top >= $t)"; sed 's/^/  /' "$T/err"; fi
        if "$QK" run -m "$H/$s" --tokenizer "$HG" --tokens-in "$H/tokens.txt" -n 0 --kv-type f32 -q -t 1 -b 7 \
            --logits-out "$T/$s.b7.logits" && cmp -s "$T/$s.logits" "$T/$s.b7.logits" &&
            QK_CPU=scalar "$QK" run -m "$H/$s" --tokenizer "$HG" --tokens-in "$H/tokens.txt" -n 0 --kv-type f32 -q \
                -t 2 --logits-out "$T/$s.sc.logits" && cmp -s "$T/$s.logits" "$T/$s.sc.logits"; then ok; else
            bad "hfq $s: logits depend on threads, batch or SIMD level"; fi
    done <"$H/gates.txt"
fi

# qk's own writers: float activations give the dequantized twin's logits
# (the native product is the float-dot order over the decoded rows, the twin's
# --act-type f32 product the same order over the same floats; only the q/k
# rows differ in order: the twin permutes them for rope, the native does not;
# 1e-6: qk-kld's own resolution on equal logits, which gives +-1e-6 per token)
S4=goldens/models/stories4M/hf-f32
"$QK" run --tokenize -m "$HG" -p "Once upon a time, there was a little girl named Lily who loved to play" |
    tr -d '[],' >"$T/ids.txt"
for s in ct-w4a16 ct-nvfp4 ct-mxfp4 mlx-q4 mlx-q3; do
    if "$QK" quant --to "$s" "$S4" "$T/$s" >/dev/null 2>&1 && "$QK" quant --to f32 "$T/$s" "$T/$s-f32" >/dev/null 2>&1 &&
        "$QK" run -m "$T/$s" --tokenizer "$HG" --tokens-in "$T/ids.txt" -n 0 --kv-type f32 -q --logits-out "$T/a.logits" &&
        "$QK" run -m "$T/$s-f32" --tokenizer "$HG" --tokens-in "$T/ids.txt" -n 0 --kv-type f32 -q --act-type f32 \
            --logits-out "$T/b.logits" &&
        "$QK" kld --logits "$T/a.logits" --logits-base "$T/b.logits" --max-kld-mean 1e-6 --min-same-top 100 -q \
            >/dev/null 2>"$T/err"; then ok; else
        bad "$s: native products vs the dequantized twin"; sed 's/^/  /' "$T/err"; fi
done

# a scheme qk cannot compute: named with its config key, exit 2, never "missing tensor"
"$QK" quant --to ct-w8a8 "$S4" "$T/w8a8" >/dev/null 2>&1
if [ -d "$T/w8a8" ]; then
    # the first num_bits is input_activations' (keys sorted): int4 activations
    sed '0,/"num_bits": 8/s//"num_bits": 4/' "$T/w8a8/config.json" >"$T/cfg" && cp "$T/cfg" "$T/w8a8/config.json"
    expect 2 "$QK" run -m "$T/w8a8" --tokenizer "$HG" -p x -n 1
    grep -q "quantization_config.config_groups.group_0.input_activations" "$T/err" && ok ||
        bad "a scheme qk cannot compute names its config key: $(cat "$T/err")"
    grep -q "missing" "$T/err" && bad "a quantized tensor reported missing: $(cat "$T/err")" || ok
fi
