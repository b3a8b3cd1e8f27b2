# qk-quant --method gptq behaviour (sourced by tests/cli.sh: uses its expect/ok/bad helpers);
# the algorithm itself is checked in tests/test_gptq.c
GM=goldens/models/stories4M/stories4M-f32.gguf
GT=goldens/stories260K-eval/eval-64k.txt

# a tiny calibration: an ordinary GGUF file qk-run runs, the same bytes with any thread count
expect 0 "$QK" quant -q --method gptq --calib "$GT" --calib-chunks 2 --calib-ctx 64 -t 1 "$GM" "$T/g1.gguf" Q4_0
expect 0 "$QK" quant -q --method gptq --calib "$GT" --calib-chunks 2 --calib-ctx 64 -t 3 "$GM" "$T/g3.gguf" Q4_0
cmp -s "$T/g1.gguf" "$T/g3.gguf" && ok || bad "gptq bytes depend on the thread count"
expect 0 "$QK" run -q -m "$T/g1.gguf" -p "Once upon a time" -n 4
# the same types and tensor sizes as round to nearest with an importance matrix
expect 0 "$QK" quant -q --method gptq --calib "$GT" --calib-chunks 2 --calib-ctx 64 --no-act-order --damp 0.02 "$GM" "$T/g.gguf" Q3_K_M --json
if command -v python3 >/dev/null; then
    cp "$T/out" "$T/g.json"
    "$QK" quant --dry-run --json --imatrix goldens/quant/stories4M.imatrix.gguf "$GM" Q3_K_M >"$T/r.json"
    python3 -c 'import json,sys
g, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert g["method"] == "gptq" and g["calibration"]["chunks"] == 2 and not g["calibration"]["act_order"]
assert g["calibration"]["tensors_gptq"] == 29 and g["total"]["bytes"] == r["total"]["bytes"]
assert [t["type"] for t in g["tensors"]] == [t["type"] for t in r["tensors"]]
assert sum(t["gptq"] for t in g["tensors"]) == 29 and not any(t["gptq"] for t in g["tensors"] if t["name"] == "token_embd.weight")' "$T/g.json" "$T/r.json" && ok || bad "gptq --json: $(head -c 400 "$T/g.json")"
fi
expect 0 "$QK" inspect "$T/g.gguf" --meta 'quantize.gptq.*'
grep -q 'quantize.gptq.chunks_count.*2' "$T/out" && ok || bad "gptq metadata: $(cat "$T/out")"
# phi3's fused attn_qkv and ffn_up: each tensor encoded once (2 layers x 4 + output.weight)
expect 0 "$QK" quant -q --method gptq --calib "$GT" --calib-chunks 2 --calib-ctx 64 --json goldens/arch/phi3/phi3-f32.gguf "$T/p.gguf" Q4_0
grep -q '"tensors_gptq": 9[,}]' "$T/out" && ok || bad "gptq phi3: $(grep -o '"calibration": {[^}]*}' "$T/out")"
expect 0 "$QK" run -q -m "$T/p.gguf" -p "Once" -n 2
# bad input: exit 2, one line, no output left behind
head -c 60 "$GT" >"$T/short.txt"
expect 2 "$QK" quant --method gptq --calib "$T/short.txt" --calib-ctx 64 "$GM" "$T/x1.gguf" Q4_0
expect 2 "$QK" quant --method gptq --calib "$GT" --calib-chunks 100000 "$GM" "$T/x2.gguf" Q4_0
expect 2 "$QK" quant --method gptq --calib "$GT" "$GM" "$T/x3.gguf" IQ2_XXS
expect 2 "$QK" quant --method gptq --calib "$GT" "$GM" "$T/x4.gguf" F16
expect 2 "$QK" quant --method gptq "$GM" "$T/x5.gguf" Q4_0
expect 2 "$QK" quant --calib "$GT" "$GM" "$T/x6.gguf" Q4_0
expect 2 "$QK" quant --method awq --calib "$GT" "$GM" "$T/x7.gguf" Q4_0
expect 2 "$QK" quant --method gptq --calib "$GT" --imatrix goldens/quant/stories4M.imatrix.gguf "$GM" "$T/x8.gguf" Q4_0
expect 2 "$QK" quant --method gptq --calib "$GT" --damp 0 "$GM" "$T/x9.gguf" Q4_0
# a mixture-of-experts model (its experts would need their own Hessians)
expect 2 "$QK" quant --method gptq --calib "$GT" --calib-ctx 64 --calib-chunks 2 goldens/arch/mixtral/mixtral-f32.gguf "$T/xc.gguf" Q4_0
grep -q 'mixtral-f32.gguf: blk.0.ffn_gate_exps.weight' "$T/err" && ok || bad "gptq MoE message: $(cat "$T/err")"
# a GGUF without the model's tensors (an importance matrix)
expect 2 "$QK" quant --method gptq --calib "$GT" goldens/imatrix/stories4M-c128.imatrix.gguf "$T/xa.gguf" Q4_0
expect 3 "$QK" quant --method gptq --calib "$T/missing.txt" "$GM" "$T/xb.gguf" Q4_0
if ls "$T" | grep -q '^x'; then bad "gptq left output behind"; ls "$T"; else ok; fi
