# qk-quant --to ct-w4a16 --method gptq (sourced by tests/cli.sh: uses its expect/ok/bad helpers).
# The acceptance against llm-compressor's oneshot is tools/crosscheck_calib.py (make crosscheck,
# Python); here its small calibration set, gated by the numbers it wrote to goldens/calib/.
CH=goldens/models/stories4M/hf-f32
CG=goldens/models/stories4M/stories4M-f32.gguf
CE=goldens/stories260K-eval/eval-64k.txt
CC=goldens/calib/calib-6k.txt
# GPTQ W4A16 of stories4M on 8 x 128 calibration tokens (disjoint from the evaluation text), Mean KLD
# against the F32 base on 8 x 128 evaluation tokens.  The bound: llm-compressor's GPTQModifier on
# the same tokens, evaluated the same way (goldens/calib/w4a16-lc.txt), times 1.05 (issue 19's
# criterion; qk measured 1.0x there when the file was written); and at least 15 % below RTN W4A16.
# The acceptance gates run in the plain pass of make check; under ASan+UBSan (QK_SANITIZED, set by
# make asan-test) the same code runs on fewer tokens (the sanitized build is 5-10x slower and the gates'
# numbers are the plain build's, bit for bit), so that make check stays within its time budget.
if [ -z "${QK_SANITIZED:-}" ]; then
    expect 0 "$QK" quant -q --to ct-w4a16 --method gptq --calib "$CC" -c 128 --calib-chunks 8 --tokenizer "$CG" -t 2 \
        "$CH" "$T/cg"
    expect 0 "$QK" quant -q --to ct-w4a16 -t 2 "$CH" "$T/cr"
    ckld() { "$QK" kld -m "$1" --base "$CH" --tokenizer "$CG" -f "$CE" -c 128 --chunks 8 -t 2 2>/dev/null |
        awk '/^Mean +KLD:/ {print $3}'; }
    kg=$(ckld "$T/cg") kr=$(ckld "$T/cr") lc=$(awk '$1 == "lc_gptq" {print $2}' goldens/calib/w4a16-lc.txt)
    awk -v g="$kg" -v l="$lc" 'BEGIN {exit !(g > 0 && g <= 1.05 * l)}' && ok ||
        bad "ct-w4a16 gptq: Mean KLD $kg, llm-compressor's $lc (bound 1.05x)"
    awk -v g="$kg" -v r="$kr" 'BEGIN {exit !(g > 0 && g <= 0.85 * r)}' && ok ||
        bad "ct-w4a16 gptq: Mean KLD $kg, not 15 % below RTN's $kr"
    grep -q '"actorder": "static"' "$T/cg/config.json" && ok || bad "ct-w4a16 gptq: config.json actorder"
    # GPTQ on the rotated model (--rotate hadamard: llm-compressor's [SpinQuantModifier, GPTQModifier]), bounded
    # the same way by its number on the same tokens (lc_gptq_spin)
    expect 0 "$QK" quant -q --to ct-w4a16 --method gptq --rotate hadamard --calib "$CC" -c 128 --calib-chunks 8 \
        --tokenizer "$CG" -t 2 "$CH" "$T/cgs"
    ks=$(ckld "$T/cgs") lcs=$(awk '$1 == "lc_gptq_spin" {print $2}' goldens/calib/w4a16-lc.txt)
    awk -v g="$ks" -v l="$lcs" 'BEGIN {exit !(g > 0 && g <= 1.05 * l)}' && ok ||
        bad "ct-w4a16 gptq --rotate: Mean KLD $ks, llm-compressor's $lcs (bound 1.05x)"
    grep -q '"actorder": null' "$T/cr/config.json" && ok || bad "ct-w4a16 rtn: config.json actorder"
    # AWQ W4A16 (its grid search reruns each layer 40 times: 2 x 64 calibration tokens here), bounded
    # the same way by llm-compressor's AWQModifier + QuantizationModifier on those tokens; its scales are
    # folded into the norms (input_layernorm differs from round to nearest's) and qk-run runs it
    expect 0 "$QK" quant -q --to ct-w4a16 --method awq --calib "$CC" -c 64 --calib-chunks 2 --tokenizer "$CG" -t 2 \
        "$CH" "$T/ca"
    ka=$(ckld "$T/ca") la=$(awk '$1 == "lc_awq" {print $2}' goldens/calib/w4a16-lc.txt)
    awk -v g="$ka" -v l="$la" 'BEGIN {exit !(g > 0 && g <= 1.05 * l)}' && ok ||
        bad "ct-w4a16 awq: Mean KLD $ka, llm-compressor's $la (bound 1.05x)"
    cmp -s "$T/ca/model.safetensors" "$T/cr/model.safetensors" && bad "ct-w4a16 awq: the bytes of RTN" || ok
    grep -q '"actorder": null' "$T/ca/config.json" && ok || bad "ct-w4a16 awq: config.json actorder"
    expect 0 "$QK" run -q -m "$T/ca" --tokenizer "$CG" -p "Once upon a time" -n 4
    # AWQ on the rotated model: up_proj -> down_proj is skipped (R4 runs online between them, so a
    # per-channel scale cannot move across it), so down_proj is round to nearest's, bit for bit
    expect 0 "$QK" quant -q --to ct-w4a16 --method awq --rotate hadamard --calib "$CC" -c 64 --calib-chunks 2 \
        --tokenizer "$CG" -t 2 "$CH" "$T/car"
    expect 0 "$QK" quant -q --to ct-w4a16 --rotate hadamard -t 2 "$CH" "$T/crr"
    expect 0 "$QK" inspect -q --diff --tensors '*down_proj*' --max-rmse 0 "$T/car" "$T/crr"
    expect 1 "$QK" inspect -q --diff --tensors '*up_proj*' --max-rmse 0 "$T/car" "$T/crr"
else
    expect 0 "$QK" quant -q --to ct-w4a16 --method awq --calib "$CC" -c 32 --calib-chunks 1 --tokenizer "$CG" -t 2 \
        "$CH" "$T/ca"
    expect 0 "$QK" run -q -m "$T/ca" --tokenizer "$CG" -p "Once upon a time" -n 4
fi
# qk-run runs it; the bytes do not depend on the thread count; --no-act-order is recorded
expect 0 "$QK" quant -q --to ct-w4a16 --method gptq --calib "$CC" -c 64 --calib-chunks 2 --tokenizer "$CG" -t 1 \
    --no-act-order "$CH" "$T/c1"
expect 0 "$QK" quant -q --to ct-w4a16 --method gptq --calib "$CC" -c 64 --calib-chunks 2 --tokenizer "$CG" -t 3 \
    --no-act-order "$CH" "$T/c3"
cmp -s "$T/c1/model.safetensors" "$T/c3/model.safetensors" && ok || bad "ct-w4a16 gptq bytes depend on threads"
expect 0 "$QK" run -q -m "$T/c1" --tokenizer "$CG" -p "Once upon a time" -n 4
grep -q '"actorder": null' "$T/c1/config.json" && ok || bad "ct-w4a16 gptq --no-act-order: config.json actorder"
# bad input: exit 2, one line, no output left behind
head -c 100 "$CC" >"$T/cshort.txt"
expect 2 "$QK" quant --to ct-w4a16 --method gptq --calib "$T/cshort.txt" -c 128 --tokenizer "$CG" "$CH" "$T/y1"
expect 2 "$QK" quant --to ct-w4a16 --method gptq --calib "$CC" -c 128 --calib-chunks 100 --tokenizer "$CG" "$CH" "$T/y2"
expect 2 "$QK" quant --to ct-fp8 --method gptq --calib "$CC" -c 128 --tokenizer "$CG" "$CH" "$T/y3"
grep -q 'applies to --to ct-w4a16 or ct-w8a8 only' "$T/err" && ok || bad "gptq --to ct-fp8 message: $(cat "$T/err")"
expect 2 "$QK" quant --to ct-w4a16 --method gptq "$CH" "$T/y4"
expect 2 "$QK" quant --to ct-w4a16 --calib "$CC" "$CH" "$T/y5"
expect 2 "$QK" quant --to ct-w4a16 --method awq --calib "$CC" --tokenizer "$CG" goldens/hfq/W4A16 "$T/y6"
expect 2 "$QK" quant --to ct-fp8 --method awq --calib "$CC" -c 64 --tokenizer "$CG" "$CH" "$T/yb"
expect 2 "$QK" quant --method awq --calib "$CC" "$CG" "$T/yc.gguf" Q4_0
expect 2 "$QK" quant --to ct-w4a16 --method awq --calib "$CC" -c 64 --tokenizer "$CG" --ignore down_proj "$CH" "$T/yd"
# no tokenizer.json beside the weights and no --tokenizer
expect 2 "$QK" quant --to ct-w4a16 --method gptq --calib "$CC" -c 128 "$CH" "$T/y7"
# a quantized source (its weights are no longer the model's)
expect 2 "$QK" quant --to ct-w4a16 --method gptq --calib "$CC" -c 64 --tokenizer "$CG" goldens/hfq/W4A16 "$T/y8"
# a mixture-of-experts model (its experts would need their own Hessians)
expect 2 "$QK" quant --to ct-w4a16 --group 32 --method gptq --calib "$CC" -c 64 --tokenizer "$CG" \
    goldens/arch/mixtral/hf "$T/ya"
expect 3 "$QK" quant --to ct-w4a16 --method gptq --calib "$T/missing.txt" --tokenizer "$CG" "$CH" "$T/y9"
if ls "$T" | grep -q '^y'; then bad "ct-w4a16 gptq left output behind"; ls "$T"; else ok; fi
# static activation scales (--to ct-fp8-static / ct-w8a8-static / ct-nvfp4a4 --calib; their values against
# llm-compressor's are tests/test_static.c's): qk-run runs them, the bytes do not depend on the thread count.
# Under ASan+UBSan (QK_SANITIZED) one scheme on 32 tokens (test_static.c runs the four in-process there).
if [ -z "${QK_SANITIZED:-}" ]; then sl="ct-fp8-static ct-w8a8-static ct-nvfp4a4" sc="-c 64 --calib-chunks 2"
else sl=ct-nvfp4a4 sc="-c 32 --calib-chunks 1"; fi
for s in $sl; do
    expect 0 "$QK" quant -q --to $s --calib "$CC" $sc --tokenizer "$CG" -t 1 "$CH" "$T/s1-$s"
    expect 0 "$QK" run -q -m "$T/s1-$s" --tokenizer "$CG" -p "Once upon a time" -n 4
    expect 2 "$QK" quant --to $s "$CH" "$T/ys1-$s"
    grep -q -- "--calib TEXT is missing" "$T/err" && ok || bad "$s without --calib: $(cat "$T/err")"
    [ -n "${QK_SANITIZED:-}" ] && continue
    expect 0 "$QK" quant -q --to $s --calib "$CC" $sc --tokenizer "$CG" -t 3 "$CH" "$T/s3-$s"
    cmp -s "$T/s1-$s/model.safetensors" "$T/s3-$s/model.safetensors" && ok || bad "$s bytes depend on threads"
    # bad input: a GPTQ/AWQ method, a text too short
    expect 2 "$QK" quant --to $s --method gptq --calib "$CC" -c 64 --tokenizer "$CG" "$CH" "$T/ys2-$s"
    expect 2 "$QK" quant --to $s --calib "$T/cshort.txt" -c 128 --tokenizer "$CG" "$CH" "$T/ys4-$s"
done
if [ -z "${QK_SANITIZED:-}" ]; then
    grep -q '"observer": "static_minmax"' "$T/s1-ct-fp8-static/config.json" && ok || bad "ct-fp8-static: config observer"
    grep -q '"dynamic": "local"' "$T/s1-ct-nvfp4a4/config.json" && ok || bad "ct-nvfp4a4: config dynamic local"
    # modelopt-nvfp4: without --calib no input_scale, which its W4A4 config needs (qk-run refuses it, naming
    # quant_algo); with --calib it has them and runs
    expect 0 "$QK" quant -q --to modelopt-nvfp4 "$CH" "$T/sm0"
    expect 2 "$QK" run -q -m "$T/sm0" --tokenizer "$CG" -p "Once upon a time" -n 4
    grep -q 'quant_algo' "$T/err" && ok || bad "modelopt-nvfp4 without --calib: $(cat "$T/err")"
    expect 0 "$QK" quant -q --to modelopt-nvfp4 --calib "$CC" -c 64 --calib-chunks 2 --tokenizer "$CG" "$CH" "$T/sm1"
    expect 0 "$QK" run -q -m "$T/sm1" --tokenizer "$CG" -p "Once upon a time" -n 4
    # --rotate with static scales: the observers see the rotated model, R4 applied online, as in
    # llm-compressor's [SpinQuantModifier, QuantizationModifier] (the scales against its own are
    # tests/test_static.c's); it runs, its bytes do not depend on the thread count, and nothing but the
    # output is left (the rotated F32 copy it calibrates on is a temporary beside the output)
    mkdir "$T/rot"
    for t in 1 3; do
        expect 0 "$QK" quant -q --to ct-nvfp4a4 --rotate hadamard --calib "$CC" -c 64 --calib-chunks 2 \
            --tokenizer "$CG" -t $t "$CH" "$T/rot/s$t"
    done
    cmp -s "$T/rot/s1/model.safetensors" "$T/rot/s3/model.safetensors" && ok || bad "ct-nvfp4a4 --rotate: bytes depend on threads"
    [ "$(ls "$T/rot" | tr '\n' ' ')" = "s1 s3 " ] && ok || bad "ct-nvfp4a4 --rotate left: $(ls "$T/rot")"
    grep -q '"transform_config"' "$T/rot/s1/config.json" && grep -q '"input_global_scale"\|input_global_scale' \
        "$T/rot/s1/model.safetensors" && ok || bad "ct-nvfp4a4 --rotate: no transform_config or input_global_scale"
    expect 0 "$QK" run -q -m "$T/rot/s1" --tokenizer "$CG" -p "Once upon a time" -n 4
fi
# --calib without a method on a scheme with dynamic activations: nothing to calibrate
expect 2 "$QK" quant --to ct-fp8 --calib "$CC" --tokenizer "$CG" "$CH" "$T/ys5"
if ls "$T" | grep -q '^ys'; then bad "static schemes left output behind"; ls "$T"; else ok; fi
