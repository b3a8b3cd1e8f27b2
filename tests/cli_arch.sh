# The model families beyond llama (issue #20; sourced by tests/cli.sh: uses its
# expect/ok/bad helpers), on the tiny random-weight models of goldens/arch
# (tools/archmodels.py, see goldens/arch/README.md):
# - each GGUF against llama.cpp's logits (llama-perplexity, F16 KV cache) and
#   each Hugging Face directory against transformers' (F32, eager attention):
#   mean KL divergence <= 1e-4 and the same top token for >= 99 % of the
#   tokens.  Measured: 1e-7 to 3e-6 mean KLD (the base files' 16-bit
#   log-probabilities alone are worth about 1e-7), so the bound leaves room
#   for rounding and none for a wrong graph: dropping one trait (the sliding
#   window, a soft-cap, the sinks, YaRN, the (1 + w) norms, the expert-weight
#   normalisation, ...) costs 5e-4 to 2 (measured with each one left out);
# - qk-quant of the MoE models: llama-quantize's bytes (its fallback types,
#   the tiny rows being no K super-block; per-expert imatrix slices);
# - their MXFP4_MOE files, experts computed by the MXFP4 kernels, against
#   llama.cpp's logits of the same file: mean KLD <= 1e-4 (its Q8_0 products
#   are not ours bit for bit: dense stories4M Q8_0 gives 4e-5 the same way);
# - logits independent of -t, -b and QK_CPU for every family, GGUF and HF.
A=goldens/arch
a_families="qwen3moe qwen2moe mixtral gpt-oss gemma2 gemma3 phi3"
# 80 tokens of the text the base files were made from
"$QK" run --tokenize -m "$A/qwen3moe/qwen3moe-f32.gguf" -f goldens/stories260K-eval/eval-64k.txt 2>/dev/null |
    tr -d '[] ' | tr ',' '\n' | head -n 80 >"$T/a_ids"
[ "$(wc -l <"$T/a_ids")" = 80 ] && ok || bad "arch: tokenizing the text"

# a_gate WHAT MODEL BASE: qk-kld's gates against a base file
a_gate() {
    if "$QK" kld -q -m "$2" --kld-base "$3" -t 2 --max-kld-mean 1e-4 --min-same-top 99 >"$T/out" 2>"$T/err"; then
        ok
    else
        bad "$1: $(grep -E 'Mean    KLD|Same top' "$T/out" | tr -s ' ' | tr '\n' ' ') $(cat "$T/err")"
    fi
}

for a_f in $a_families; do
    a_gate "$a_f GGUF vs llama.cpp" "$A/$a_f/$a_f-f32.gguf" "$A/$a_f/llamacpp.kld"
    a_gate "$a_f HF vs transformers" "$A/$a_f/hf" "$A/$a_f/transformers.kld"
done
# qwen3moe with decoder_sparse_step 2 (a dense layer 0): transformers only
a_gate "qwen3moe-step2 HF vs transformers" "$A/qwen3moe-step2/hf" "$A/qwen3moe-step2/transformers.kld"

# gpt-oss with MXFP4 experts as OpenAI ships it (*_blocks, *_scales), and its
# conversion (MXFP4 experts in GGUF): the experts computed natively, MXFP4
# times Q8_0-rounded activations, as llama.cpp computes them.  Against
# llama.cpp the usual gate; against transformers (which dequantizes and
# computes in F32) mean KLD <= 1e-3 and same top >= 95 %: llama.cpp's own
# logits of the converted file are 4.5e-4 / 98.4 % from transformers', ours
# 4.2e-4 / 97.6 %.  With YaRN truncated as llama.cpp does it, the directory's
# logits are the GGUF's bit for bit.
M=$A/gpt-oss-mxfp4
a_gate "gpt-oss-mxfp4 GGUF vs llama.cpp" "$M/gpt-oss-mxfp4-f32.gguf" "$M/llamacpp.kld"
if "$QK" kld -q -m "$M/hf" --kld-base "$M/transformers.kld" -t 2 --max-kld-mean 1e-3 --min-same-top 95 >"$T/out" 2>"$T/err"; then
    ok
else
    bad "gpt-oss-mxfp4 HF vs transformers: $(grep -E 'Mean    KLD|Same top' "$T/out" | tr '\n' ' ') $(cat "$T/err")"
fi
rm -rf "$T/a_mxhf" && cp -r "$M/hf" "$T/a_mxhf" && sed -i 's/"truncate": false/"truncate": true/' "$T/a_mxhf/config.json"
"$QK" run -m "$T/a_mxhf" --tokens-in "$T/a_ids" -n 0 -q --logits-out "$T/a_l1" >/dev/null 2>&1
"$QK" run -m "$M/gpt-oss-mxfp4-f32.gguf" --tokens-in "$T/a_ids" -n 0 -q --logits-out "$T/a_l2" >/dev/null 2>&1
cmp -s "$T/a_l1" "$T/a_l2" && ok || bad "gpt-oss MXFP4 directory (YaRN truncated) and its GGUF give other logits"

# (run in the model's folder: llama-quantize stores the imatrix name as given)
a_qk=$(cd "$(dirname "$QK")" && pwd)/$(basename "$QK")
for a_f in qwen3moe qwen2moe mixtral gpt-oss; do
    while read -r a_h a_p a_im; do
        a_opt=""
        [ -n "$a_im" ] && a_opt="--imatrix $a_im"
        # shellcheck disable=SC2086
        if (cd "$A/$a_f" && "$a_qk" quant -q $a_opt "$a_f-f32.gguf" "$T/a_q.gguf" "$a_p" 2) >/dev/null 2>"$T/err" &&
            [ "$(sha256sum "$T/a_q.gguf" | cut -c1-64)" = "$a_h" ]; then
            ok
        else
            bad "qk-quant $a_f $a_p${a_im:+ with $a_im}: not llama-quantize's bytes $(cat "$T/err")"
        fi
        if [ "$a_p" = MXFP4_MOE ]; then
            if "$QK" kld -q -m "$T/a_q.gguf" --kld-base "$A/$a_f/llamacpp-MXFP4_MOE.kld" -t 2 \
                --max-kld-mean 1e-4 >"$T/out" 2>"$T/err"; then ok; else bad "$a_f MXFP4_MOE vs llama.cpp: $(grep 'Mean    KLD' "$T/out") $(cat "$T/err")"; fi
        fi
    done <"$A/$a_f/quant.sha256"
done

# determinism: logits at -t 1 against -t 3, -b 7 and each SIMD level
a_levels="scalar avx2"
grep -q avx512bw /proc/cpuinfo 2>/dev/null && grep -q avx512dq /proc/cpuinfo && a_levels="$a_levels avx512"
for a_f in $a_families gpt-oss-mxfp4; do
    for a_m in "$A/$a_f/$a_f-f32.gguf" "$A/$a_f/hf"; do
        if ! "$QK" run -m "$a_m" --tokens-in "$T/a_ids" -n 0 -q -t 1 --logits-out "$T/a_ref" >/dev/null 2>"$T/err"; then
            bad "qk-run $a_m: $(cat "$T/err")"
            continue
        fi
        ok
        for a_cfg in "-t 3" "-t 2 -b 7" "-t 2 -b 1"; do
            # shellcheck disable=SC2086
            "$QK" run -m "$a_m" --tokens-in "$T/a_ids" -n 0 -q $a_cfg --logits-out "$T/a_out" >/dev/null 2>&1
            cmp -s "$T/a_ref" "$T/a_out" && ok || bad "logits differ: $a_m $a_cfg"
        done
        for a_l in $a_levels; do
            QK_CPU=$a_l "$QK" run -m "$a_m" --tokens-in "$T/a_ids" -n 0 -q -t 3 -b 7 --logits-out "$T/a_out" >/dev/null 2>&1
            cmp -s "$T/a_ref" "$T/a_out" && ok || bad "logits differ: $a_m QK_CPU=$a_l"
        done
    done
done
# a quantized MoE model (MXFP4 experts, Q8_0 activations) too
"$QK" quant -q "$A/gpt-oss/gpt-oss-f32.gguf" "$T/a_mx.gguf" MXFP4_MOE 2 >/dev/null 2>&1
"$QK" run -m "$T/a_mx.gguf" --tokens-in "$T/a_ids" -n 0 -q -t 1 --logits-out "$T/a_ref" >/dev/null 2>&1
for a_l in $a_levels; do
    QK_CPU=$a_l "$QK" run -m "$T/a_mx.gguf" --tokens-in "$T/a_ids" -n 0 -q -t 3 -b 5 --logits-out "$T/a_out" >/dev/null 2>&1
    cmp -s "$T/a_ref" "$T/a_out" && ok || bad "logits differ: gpt-oss MXFP4_MOE QK_CPU=$a_l -b 5"
done

# bad Hugging Face configs: exit 2, one line naming the key
a_bad() { # FAMILY SED-SCRIPT NEEDLE
    rm -rf "$T/a_hf" && cp -r "$A/$1/hf" "$T/a_hf" && sed -i "$2" "$T/a_hf/config.json"
    expect 2 "$QK" run -m "$T/a_hf" -p "Once" -n 1
    grep -q "$3" "$T/err" && ok || bad "$1 config: '$(cat "$T/err")' does not name $3"
}
a_bad gemma2 's/"gelu_pytorch_tanh"/"gelu"/' "hidden_activation"
a_bad gemma3 '0,/"sliding_attention",/s//"full_attention",/' "layer_types"
a_bad qwen3moe '/"num_experts_per_tok"/d' "num_experts_per_tok"
a_bad phi3 's/"short_factor"/"short_factors"/' "short_factor"
