# qk-quant --to SCHEME --rotate hadamard and qk-run's online transforms
# (issue #19, rotations); sourced by tests/cli.sh.
#
# goldens/rot (tools/mk_rot_goldens.py): transformers + compressed-tensors'
# logits of llm-compressor's SpinQuant (R1, R2, R4 on blocks of 256) of
# stories4M, alone and before W4A16, on goldens/hfq/tokens.txt.  qk writes
# the same checkpoints (tensor for tensor: make crosscheck's QK_SPIN_* rows)
# and runs them, R4 applied online before down_proj: gate 1e-6 (float
# arithmetic in another order only).  Then a transform_config qk cannot
# apply: exit 2 naming config.json and the group.
R=goldens/rot
S4=goldens/models/stories4M/hf-f32
HG=goldens/models/stories4M/stories4M-f32.gguf
for p in "SPIN_F32 f32" "SPIN_W4A16 ct-w4a16"; do
    set -- $p
    if "$QK" quant --to "$2" --rotate hadamard -q "$S4" "$T/$1" 2>"$T/err" &&
        "$QK" run -m "$T/$1" --tokenizer "$HG" --tokens-in goldens/hfq/tokens.txt -n 0 --kv-type f32 -q -t 2 \
            --logits-out "$T/$1.logits" 2>"$T/err" &&
        "$QK" kld --logits "$T/$1.logits" --logits-base "$R/$1.logits" --max-kld-mean 1e-6 --min-same-top 99.5 -q \
            >/dev/null 2>"$T/err"; then ok; else
        bad "rotate $1: qk's --rotate hadamard checkpoint vs llm-compressor's by transformers"; sed 's/^/  /' "$T/err"; fi
done
if [ -d "$T/SPIN_W4A16" ]; then
    grep -q '"R4_input"\|R4_input' "$T/SPIN_W4A16/model.safetensors" && ok || bad "rotate: R4's matrix not stored"
    # the rotation matters: without the online R4 the logits are far off
    sed 's/"location": "input"/"location": "weight_input"/' "$T/SPIN_W4A16/config.json" >"$T/cfg"
    cp -r "$T/SPIN_W4A16" "$T/nor4" && cp "$T/cfg" "$T/nor4/config.json"
    "$QK" run -m "$T/nor4" --tokenizer "$HG" --tokens-in goldens/hfq/tokens.txt -n 0 --kv-type f32 -q \
        --logits-out "$T/nor4.logits" 2>/dev/null
    expect 1 "$QK" kld --logits "$T/nor4.logits" --logits-base "$R/SPIN_W4A16.logits" --max-kld-mean 1e-3 -q
    for e in 's/"type": "hadamard"/"type": "random-hadamard"/|transform type' \
             's/"location": "input"/"location": "q_attn"/|location q_attn' \
             's/"randomize": false/"randomize": true/|randomize'; do
        sed "${e%%|*}" "$T/SPIN_W4A16/config.json" >"$T/cfg" && cp "$T/cfg" "$T/nor4/config.json"
        expect 2 "$QK" run -m "$T/nor4" --tokenizer "$HG" -p x -n 1
        grep -q "nor4/config.json: transform_config.config_groups.R[0-9] at offset [0-9]*: ${e#*|}" "$T/err" && ok ||
            bad "rotate: a transform_config qk cannot apply names its field: $(cat "$T/err")"
    done
    # a rotated source is not rewritten (its online transforms would be lost)
    expect 2 "$QK" quant --to ct-w4a16 "$T/SPIN_W4A16" "$T/again"
    grep -q "transform_config" "$T/err" && ok || bad "rotate: a rotated source rewritten: $(cat "$T/err")"
fi
expect 2 "$QK" quant --to mlx-q4 --rotate hadamard "$S4" "$T/mlxrot"
expect 2 "$QK" quant --to ct-w4a16 --rotate givens "$S4" "$T/givens"
expect 2 "$QK" quant --rotate hadamard "$HG" "$T/x.gguf" Q4_0
# ct-w4a8 (int-quantized as llm-compressor saves W4A8: make crosscheck's QK_W4A8 row compares the
# tensors): ct-w4a16's values, int8 per-token dynamic activations in the config
if "$QK" quant --to ct-w4a8 -q "$S4" "$T/w4a8" && "$QK" quant --to ct-w4a16 -q "$S4" "$T/w4a16" &&
    "$QK" inspect --diff "$T/w4a8" "$T/w4a16" --max-rmse 0 >/dev/null 2>&1 &&
    "$QK" inspect "$T/w4a8" 2>&1 | grep -q "int-quantized: int4 w/ group 128 symmetric, act: int8"; then ok; else
    bad "ct-w4a8: W4A16's values with int8 activations"; fi
