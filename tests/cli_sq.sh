# qk-quant --method smoothquant|smoothquant+gptq (sourced by tests/cli.sh: uses its expect/ok/bad helpers).
# The acceptance against llm-compressor's oneshot is tools/crosscheck_sq.py (make crosscheck, Python);
# here its goldens (goldens/calib/README.md).
SH=goldens/models/stories260K/hf-f32
SG=goldens/models/stories260K/stories260K-f32.gguf
SC=goldens/calib/calib-6k.txt
# The smoothed float model (--to f32) of stories260K on 1 x 64 calibration tokens against
# llm-compressor's SmoothQuantModifier(0.5) on the same tokens (goldens/calib/sq260k-lc.safetensors:
# every smoothed norm and layer 0's k_proj; qk is within 137 dB there, float32 rounding); the
# unsmoothed model is not (the gate means something)
expect 0 "$QK" quant -q --to f32 --method smoothquant --calib "$SC" -c 64 --calib-chunks 1 --tokenizer "$SG" -t 2 \
    "$SH" "$T/sf"
expect 0 "$QK" inspect -q --diff goldens/calib/sq260k-lc.safetensors "$T/sf" --min-snr 120
expect 1 "$QK" inspect -q --diff goldens/calib/sq260k-lc.safetensors "$SH" --min-snr 120
# --smoothing-strength 0: s_j = 1 / (2 max |W_j|)^1, not the default's scales
expect 0 "$QK" quant -q --to f32 --method smoothquant --smoothing-strength 0 --calib "$SC" -c 64 --calib-chunks 1 \
    --tokenizer "$SG" -t 2 "$SH" "$T/s0"
cmp -s "$T/s0/model.safetensors" "$T/sf/model.safetensors" && bad "smoothquant: --smoothing-strength 0 = 0.5" || ok
# SmoothQuant + GPTQ W8A8: the bytes do not depend on the thread count, qk-run runs it, actorder recorded
# (the sanitized pass runs it once: GPTQ is 30x slower there)
expect 0 "$QK" quant -q --to ct-w8a8 --method smoothquant+gptq --calib "$SC" -c 64 --calib-chunks 2 --tokenizer "$SG" \
    -t 3 "$SH" "$T/sg1"
if [ -z "${QK_SANITIZED:-}" ]; then
    expect 0 "$QK" quant -q --to ct-w8a8 --method smoothquant+gptq --calib "$SC" -c 64 --calib-chunks 2 \
        --tokenizer "$SG" -t 1 "$SH" "$T/sg3"
    cmp -s "$T/sg1/model.safetensors" "$T/sg3/model.safetensors" && ok || bad "smoothquant+gptq bytes depend on threads"
fi
expect 0 "$QK" run -q -m "$T/sg1" --tokenizer "$SG" -p "Once upon a time" -n 4
grep -q '"actorder": "static"' "$T/sg1/config.json" && ok || bad "smoothquant+gptq: config.json actorder"
# stories4M W8A8 on 8 x 128 calibration tokens, Mean KLD against the F32 base on 8 x 128 evaluation
# tokens: at most 1.05x llm-compressor's on the same tokens (goldens/calib/w8a8-lc.txt; qk measured
# 0.98x (SmoothQuant) and 0.94x (SmoothQuant + GPTQ) when it was written).  Plain pass only (the
# sanitized build runs the same code above).
if [ -z "${QK_SANITIZED:-}" ]; then
    CH=goldens/models/stories4M/hf-f32
    CG=goldens/models/stories4M/stories4M-f32.gguf
    skld() { "$QK" kld -m "$1" --base "$CH" --tokenizer "$CG" -f goldens/stories260K-eval/eval-64k.txt -c 128 \
        --chunks 8 -t 2 2>/dev/null | awk '/^Mean +KLD:/ {print $3}'; }
    for mt in smoothquant:lc_sq smoothquant+gptq:lc_sqg; do
        expect 0 "$QK" quant -q --to ct-w8a8 --method "${mt%%:*}" --calib "$SC" -c 128 --calib-chunks 8 \
            --tokenizer "$CG" -t 2 "$CH" "$T/s4"
        kq=$(skld "$T/s4") kl=$(awk -v k="${mt#*:}" '$1 == k {print $2}' goldens/calib/w8a8-lc.txt)
        awk -v q="$kq" -v l="$kl" 'BEGIN {exit !(q > 0 && q <= 1.05 * l)}' && ok ||
            bad "ct-w8a8 ${mt%%:*}: Mean KLD $kq, llm-compressor's $kl (bound 1.05x)"
        rm -rf "$T/s4"
    done
fi
# bad input: exit 2, one line, no output left behind
expect 2 "$QK" quant --to ct-w8a8 --method smoothquant --smoothing-strength 1.5 --calib "$SC" --tokenizer "$SG" \
    "$SH" "$T/z1"
expect 2 "$QK" quant --to ct-w8a8 --method smoothquant --smoothing-strength -0.1 --calib "$SC" --tokenizer "$SG" \
    "$SH" "$T/z2"
expect 2 "$QK" quant --to ct-w8a8 --method smoothquant --smoothing-strength x --calib "$SC" --tokenizer "$SG" \
    "$SH" "$T/z3"
expect 2 "$QK" quant --to ct-fp8 --method smoothquant --calib "$SC" -c 64 --tokenizer "$SG" "$SH" "$T/z4"
grep -q 'applies to --to ct-w8a8' "$T/err" && ok || bad "smoothquant --to ct-fp8 message: $(cat "$T/err")"
expect 2 "$QK" quant --to ct-fp8 --method smoothquant+gptq --calib "$SC" -c 64 --tokenizer "$SG" "$SH" "$T/z5"
expect 2 "$QK" quant --to f32 --method smoothquant+gptq --calib "$SC" -c 64 --tokenizer "$SG" "$SH" "$T/z6"
expect 2 "$QK" quant --to ct-w8a8 --smoothing-strength 0.5 "$SH" "$T/z7"
expect 2 "$QK" quant --to ct-w8a8 --method gptq --smoothing-strength 0.5 --calib "$SC" --tokenizer "$SG" "$SH" "$T/z8"
expect 2 "$QK" quant --to ct-w8a8 --method smoothquant "$SH" "$T/z9"
expect 2 "$QK" quant --method smoothquant --calib "$SC" "$SG" "$T/za.gguf" Q4_0
expect 2 "$QK" quant --to ct-w8a8 --method smoothquant --calib "$SC" -c 64 --tokenizer "$SG" goldens/hfq/W4A16 "$T/zb"
# gemma's norms are (1 + w) and its post_attention_layernorm follows attention: not the Llama mappings
expect 2 "$QK" quant --to ct-w8a8 --method smoothquant --calib "$SC" -c 32 --tokenizer "$SG" goldens/arch/gemma2/hf "$T/zc"
if ls "$T" | grep -q '^z'; then bad "smoothquant left output behind"; ls "$T"; else ok; fi
