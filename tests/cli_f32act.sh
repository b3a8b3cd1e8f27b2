# Float activations, the error split and the noise floor (issue #24; sourced
# by tests/cli.sh: uses its expect/ok/bad helpers).
# - For every GGUF weight type qk runs: stories4M quantized to it by qk-quant
#   (--pure, so every matrix has the type), run with --act-type f32, gives
#   the logits file of the same weights dequantized to an F32 GGUF by
#   qk-quant --allow-requantize, byte for byte.
# - qk-kld --split-error / --noise-floor: on a float model the weight-only
#   figure is the total and the activation share and the floor are zero
#   (the runs' logits are the model's own bits, and identical distributions
#   give exactly 0 for every statistic: the self-comparison of #23); a
#   float model against itself (--base) is zero in all three figures;
#   on Q8_0 the three figures and the floor are positive; the gates exit 1.
F_M=goldens/models/stories4M/stories4M-f32.gguf
F_IM=goldens/quant/stories4M.imatrix.gguf
tr -d '[]' <goldens/stories260K-eval/eval-64k.tokens.txt | tr ',' '\n' | head -n 16 >"$T/f_ids"

# f_pair TYPE [QK-QUANT-OPTIONS...]: quantize, dequantize, compare the two runs' logits
f_pair() {
    f_n=$1
    shift
    if ! "$QK" quant -q --pure "$@" "$F_M" "$T/f_q.gguf" "$f_n" >"$T/out" 2>"$T/err" ||
        ! "$QK" quant -q --allow-requantize "$T/f_q.gguf" "$T/f_d.gguf" F32 >"$T/out" 2>>"$T/err"; then
        bad "--act-type f32 $f_n: qk-quant: $(cat "$T/err")"
        return
    fi
    "$QK" run -m "$T/f_q.gguf" --act-type f32 --tokens-in "$T/f_ids" -n 0 -q -t 2 --logits-out "$T/f_a" >/dev/null 2>"$T/err" &&
        "$QK" run -m "$T/f_d.gguf" --tokens-in "$T/f_ids" -n 0 -q -t 2 --logits-out "$T/f_b" >/dev/null 2>>"$T/err" &&
        cmp -s "$T/f_a" "$T/f_b" && ok || bad "--act-type f32 $f_n: not the F32-dequantized model's logits $(cat "$T/err")"
}
# Every type in the plain pass of make check; under ASan+UBSan (QK_SANITIZED) one of each kernel
# family (the decoders and products of every type run there in test_dot and test_golden too).
f_types="Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q4_K_S Q5_K_S Q6_K IQ3_S IQ4_NL IQ4_XS TQ1_0 TQ2_0 MXFP4_MOE Q1_0 Q2_0 F16 BF16"
f_imtypes="IQ2_XXS IQ2_XS IQ2_M IQ3_XXS IQ1_S IQ1_M" # IQ2_M: the iq2_s type
if [ -n "${QK_SANITIZED:-}" ]; then f_types="Q4_0 Q5_1 Q8_0 Q3_K_S Q6_K IQ4_XS TQ2_0 MXFP4_MOE BF16"; f_imtypes="IQ2_XS IQ1_M"; fi
for f_t in $f_types; do
    f_pair "$f_t"
done
# the importance-matrix types (the model's output and embeddings have no imatrix entry)
for f_t in $f_imtypes; do
    f_pair "$f_t" --imatrix "$F_IM" --output-tensor-type q4_K --token-embedding-type q4_K
done
f_pair Q8_0 --tensor-type '.*=nvfp4' # NVFP4 (no preset)

# the split and the floor of a float model: zero
F_KM=goldens/models/stories260K/stories260K-f32.gguf
F_KB=goldens/kld/stories260K-f32-c256-4chunks.kld
expect 0 "$QK" kld -q -m "$F_KM" --kld-base "$F_KB" --chunks 1 -t 2 --split-error --noise-floor --json
if command -v python3 >/dev/null; then
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); s = d["split"]; f = d["noise_floor"]
assert s["weights"] == dict(s["total"], above_floor=None), "weights != total"
assert s["total"]["mean"]["value"] == d["kld"]["mean"]
# the activation figure and the floor compare identical runs: every statistic exactly 0
for x in (s["activations"], f):
    assert all(x[k]["value"] == 0 and x[k]["error"] == 0 for k in ("mean", "p99")), x
    assert x["same_top_pct"] == {"value": 100, "error": 0}, x
assert f["passes"] == 2 and f["tokens"] == 254
' "$T/out" && ok || bad "float model: split or floor not exactly zero: $(head -c 600 "$T/out")"
fi
# ... and a float model against itself (--base): the total and weight figures too
F_S4=goldens/models/stories4M/stories4M-f32.gguf
expect 0 "$QK" kld -q -m "$F_S4" --base "$F_S4" -f goldens/stories260K-eval/eval-64k.txt -c 128 --chunks 2 -t 2 \
    --split-error --noise-floor --json --max-kld-mean 0 --max-kld-weights 0
if command -v python3 >/dev/null; then
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
for x in list(d["split"].values()) + [d["noise_floor"]]:
    assert all(x[k]["value"] == 0 and x[k]["error"] == 0 for k in ("mean", "p99")), x
    assert x["same_top_pct"] == {"value": 100, "error": 0}, x
' "$T/out" && ok || bad "float model against itself: split or floor not exactly zero: $(head -c 600 "$T/out")"
fi
expect 0 "$QK" kld -q -m "$F_KM" --kld-base "$F_KB" --chunks 1 -t 2 --split-error --noise-floor
grep -q '^====== Error split and noise floor ======$' "$T/out" && ok || bad "split block: $(tail -6 "$T/out")"
grep -q '^weights only (f32 activations) : ' "$T/out" && grep -q '^noise floor (2 passes)  *: ' "$T/out" && ok ||
    bad "split rows: $(tail -6 "$T/out")"
# --act-type f32 has no activation rounding: its floor is zero without a pass
expect 0 "$QK" kld -q -m "$F_KM" --kld-base "$F_KB" --chunks 1 --act-type f32 --noise-floor --json
grep -q '"passes": 0,' "$T/out" && ok || bad "f32 activations: floor passes"

# Q8_0: the figures of a quantized model, the gates
F_Q8=goldens/llamacpp/stories4M/stories4M-Q8_0.gguf
F_QB=goldens/llamacpp/stories4M/f32.window1.kld
expect 0 "$QK" kld -q -m "$F_Q8" --kld-base "$F_QB" -t 2 --split-error --noise-floor --json
if command -v python3 >/dev/null; then
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); s = d["split"]; f = d["noise_floor"]
m = lambda x: x["mean"]["value"]
assert 0 < m(s["weights"]) < m(s["total"]) < 0.01 and 0 < m(s["activations"]) < m(s["total"]), s
assert 0 < m(f) < m(s["total"]) and f["tokens"] == 2 * s["total"]["tokens"] == 254, f
assert all(x["p99"]["error"] > 0 and x["mean"]["error"] > 0 for x in (s["total"], s["weights"], f))
open(sys.argv[2], "w").write("%.9g %.9g %.9g" % (m(s["weights"]), m(s["total"]), m(s["total"]) - m(f)))
' "$T/out" "$T/f_vals" && ok || bad "Q8_0 split and floor: $(head -c 800 "$T/out")"
    read -r f_w f_tot f_above <"$T/f_vals"
    f_mid=$(awk -v a="$f_above" -v b="$f_tot" 'BEGIN { printf "%.9g", (a + b) / 2 }')
    # --max-kld-weights: the weight-only figure
    expect 1 "$QK" kld -q -m "$F_Q8" --kld-base "$F_QB" -t 2 --max-kld-weights "$(awk -v w="$f_w" 'BEGIN { print w / 2 }')"
    grep -q '^qk-kld: --max-kld-weights [0-9.e-]* violated: weight-only Mean KLD = ' "$T/err" && [ "$(wc -l <"$T/err")" = 1 ] &&
        ok || bad "--max-kld-weights message: $(cat "$T/err")"
    expect 0 "$QK" kld -q -m "$F_Q8" --kld-base "$F_QB" -t 2 --max-kld-weights "$(awk -v w="$f_w" 'BEGIN { print w * 2 }')"
    # a Mean KLD bound between the total less the floor and the total: fails, passes above the floor
    expect 1 "$QK" kld -q -m "$F_Q8" --kld-base "$F_QB" -t 2 --max-kld-mean "$f_mid"
    expect 0 "$QK" kld -q -m "$F_Q8" --kld-base "$F_QB" -t 2 --max-kld-mean "$f_mid" --above-floor
    expect 1 "$QK" kld -q -m "$F_Q8" --kld-base "$F_QB" -t 2 --max-kld-mean 0 --above-floor
    grep -q '^qk-kld: --max-kld-mean 0 violated: Mean KLD above the floor = ' "$T/err" && ok ||
        bad "--above-floor message: $(cat "$T/err")"
fi
# usage: the split and the floor need a base and a run of the model
expect 2 "$QK" kld -q -m "$F_KM" -f goldens/stories260K-eval/eval-64k.txt -c 256 --chunks 1 --split-error
expect 2 "$QK" kld -q -m "$F_KM" --kld-base "$F_KB" --split-error --act-type f32
expect 2 "$QK" kld -q -m "$F_KM" --kld-base "$F_KB" --noise-floor --chunk-range 0:1 --partial-out "$T/f.qkpart"
expect 2 "$QK" kld -q -m "$F_KM" --kld-base "$F_KB" --act-type f64
expect 2 "$QK" run -m "$F_KM" -p x --act-type q8
