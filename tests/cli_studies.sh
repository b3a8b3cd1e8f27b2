# numerics studies through the commands (docs/studies.md): qk-run / qk-kld
# --wire and --kv-cache, qk-bench error|wire|kv (sourced by tests/cli.sh:
# uses its expect/ok/bad helpers).  stories260K: 5 layers, n_embd 64,
# 4 KV heads of head_dim 8.
SM=goldens/models/stories260K/stories260K-f32.gguf
ST=goldens/stories260K-eval/eval-64k.txt

# --- the fp32 wire is the control: logits bit-identical to the plain run
"$QK" run -m "$SM" -p "Once upon a time" -n 8 --temp 0 -c 64 -q --logits-out "$T/plain.logits" >/dev/null &&
    "$QK" run -m "$SM" -p "Once upon a time" -n 8 --temp 0 -c 64 -q --wire fp32 --wire-every 1 \
        --logits-out "$T/wire.logits" >/dev/null &&
    cmp -s "$T/plain.logits" "$T/wire.logits" && ok || bad "qk-run --wire fp32 changed the logits"
# ... and so is an f32 KV codec against the F32 cache
"$QK" run -m "$SM" -p "Once upon a time" -n 8 --temp 0 -c 64 -q --kv-type f32 --logits-out "$T/plain32.logits" >/dev/null &&
    "$QK" run -m "$SM" -p "Once upon a time" -n 8 --temp 0 -c 64 -q --kv-cache f32 --logits-out "$T/kv32.logits" >/dev/null &&
    cmp -s "$T/plain32.logits" "$T/kv32.logits" && ok || bad "qk-run --kv-cache f32 changed the logits"
# a lossy wire changes them
"$QK" run -m "$SM" -p "Once upon a time" -n 8 --temp 0 -c 64 -q --wire int4-token --stages 2 \
    --logits-out "$T/int4.logits" >/dev/null && ! cmp -s "$T/plain.logits" "$T/int4.logits" &&
    ok || bad "qk-run --wire int4-token left the logits as they were"
# the stderr report: every layer boundary (after layers 1..4), 4 bytes/element
expect 0 "$QK" run -m "$SM" -p "Once upon a time" -n 4 --temp 0 -c 64 --wire fp32 --wire-every 1
grep -q '^qk-run: wire: fp32 at 4 boundaries, 4\.0000 bytes/element (0\.50x vs bf16)$' "$T/err" &&
    ok || bad "qk-run wire line: $(cat "$T/err")"

# --- KV bytes per token over the 5 layers: bf16 2*5*4*(8+8) = 640;
# fp8 per tensor 1 byte/element, exactly half = 320; fp8 per head adds an F16
# scale per head and token: 5*2*4*(8+2) = 400
kv_bytes() { # TYPE -> bytes_per_token from qk-run --json
    "$QK" run -m "$SM" -p "Once upon a time" -n 4 --temp 0 -c 64 -q --json --kv-cache "$1" |
        sed -n 's/^ *"bytes_per_token": \([0-9.]*\),*$/\1/p'
}
[ "$(kv_bytes bf16)" = 640 ] && ok || bad "bf16 KV bytes/token: $(kv_bytes bf16)"
[ "$(kv_bytes fp8-e4m3)" = 320 ] && ok || bad "fp8-e4m3 KV bytes/token: $(kv_bytes fp8-e4m3)"
[ "$(kv_bytes fp8-e4m3:head)" = 400 ] && ok || bad "fp8-e4m3:head KV bytes/token: $(kv_bytes fp8-e4m3:head)"
expect 0 "$QK" run -m "$SM" -p "Once upon a time" -n 4 --temp 0 -c 64 --kv-cache fp8-e4m3:head
grep -q '^qk-run: kv cache: fp8-e4m3:head, 400\.0 bytes/token (0\.625 of bf16)$' "$T/err" &&
    ok || bad "qk-run kv line: $(cat "$T/err")"

# --- qk-kld: the wire on the model under test only; int8-token sends 64 codes
# and an F32 scale per token: 68/64 = 1.0625 bytes/element, after layers 2 and 4
expect 0 "$QK" kld -q -m "$SM" --base "$SM" -f "$ST" -c 64 --chunks 2 -t 2 --wire int8-token --wire-every 2
grep -q '^wire: int8-token at 2 boundaries, 1\.0625 bytes/element (1\.88x vs bf16)$' "$T/out" &&
    ok || bad "qk-kld wire line: $(tail -2 "$T/out")"
grep -q '^Mean    KLD: *0\.0*[1-9]' "$T/out" && ok || bad "qk-kld --wire int8-token: no KL divergence"
cp "$T/out" "$T/kld2"
expect 0 "$QK" kld -q -m "$SM" --base "$SM" -f "$ST" -c 64 --chunks 2 -t 1 --wire int8-token --wire-every 2
cmp -s "$T/out" "$T/kld2" && ok || bad "qk-kld --wire depends on -t"
# the fp32 wire: the plain run's report, byte for byte, plus the wire line
expect 0 "$QK" kld -q -m "$SM" --base "$SM" -f "$ST" -c 64 --chunks 2
cp "$T/out" "$T/kld0"
expect 0 "$QK" kld -q -m "$SM" --base "$SM" -f "$ST" -c 64 --chunks 2 --wire fp32 --stages 3
head -n "$(wc -l <"$T/kld0")" "$T/out" | cmp -s - "$T/kld0" &&
    [ "$(tail -1 "$T/out")" = "wire: fp32 at 2 boundaries, 4.0000 bytes/element (0.50x vs bf16)" ] &&
    ok || bad "qk-kld --wire fp32 changed the report: $(tail -1 "$T/out")"
expect 0 "$QK" kld -q -m "$SM" --base "$SM" -f "$ST" -c 64 --chunks 2 --json --kv-cache int4 --kv-key-per-channel --wire bf16 --wire-at 1,3 --wire-lossless
if command -v python3 >/dev/null; then
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
w, k = d["wire"], d["kv_cache"]
assert w["format"] == "bf16" and w["boundaries"] == 2 and w["bytes_per_elem"] == 2, w
assert all(w["lossless_bf16"][x] > 1 for x in ("zstd1", "zstd1_shuffled", "zstd3", "zstd3_shuffled")), w
assert k["type"] == "int4+kivi" and 0 < k["ratio_vs_bf16"] < 0.5, k
assert d["kld"]["mean"] > 0, d["kld"]
' "$T/out" && ok || bad "qk-kld --json wire/kv_cache"
fi

# --- bad combinations: exit 2, one line
expect 2 "$QK" run -m "$SM" -p x --wire int8-token
expect 2 "$QK" run -m "$SM" -p x --wire-every 2
expect 2 "$QK" run -m "$SM" -p x --wire-lossless
expect 2 "$QK" run -m "$SM" -p x --wire nosuch --wire-every 1
expect 2 "$QK" run -m "$SM" -p x --wire int8-token --wire-at 3,2
expect 2 "$QK" run -m "$SM" -p x --wire int8-token --wire-at 5
expect 2 "$QK" run -m "$SM" -p x --wire int8-token --wire-every 0
expect 2 "$QK" run -m "$SM" -p x --kv-key-per-channel
expect 2 "$QK" run -m "$SM" -p x --kv-cache bf16 --kv-key-per-channel
expect 2 "$QK" run -m "$SM" -p x --kv-cache int4 --kv-type f16
expect 2 "$QK" run -m "$SM" -p x --kv-cache int3
expect 2 "$QK" kld -m "$SM" -f "$ST" --wire mxfp4
expect 2 "$QK" kld -m "$SM" -f "$ST" --kv-cache fp8-e4m3 --kv-type f16
expect 2 "$QK" kld --merge "$T/none.qkpart" --wire fp32 --wire-every 1

# --- qk-bench error|wire|kv
expect 0 "$QK" bench error --synthetic gaussian --shape 64x256 --json
if command -v python3 >/dev/null; then
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["source"] == "synthetic gaussian 64x256 seed 1", d["source"]
assert len(d["formats"]) > 20 and len(d["tensors"]) == 1, (len(d["formats"]), len(d["tensors"]))
' "$T/out" && ok || bad "qk-bench error --json"
fi
cp "$T/out" "$T/err1"
expect 0 "$QK" bench error --synthetic gaussian --shape 64x256 -o json -t 2
cmp -s "$T/out" "$T/err1" && ok || bad "qk-bench error depends on -t"
expect 0 "$QK" bench wire -m "$SM" -f "$ST" -c 64 --chunks 2 --formats fp32,int8-token --boundaries 1,2 -o csv
[ "$(grep -c '^fp32,[12],4,0\.5,62,0,0,0,0,' "$T/out")" = 2 ] && ok || bad "qk-bench wire fp32 rows: $(cat "$T/out")"
[ "$(grep -c '^int8-token,[12],1\.0625,' "$T/out")" = 2 ] && ok || bad "qk-bench wire int8 rows"
expect 0 "$QK" bench kv -m "$SM" -f "$ST" -c 64 --chunks 2 --types bf16,fp8-e4m3,fp8-e4m3:head -o csv --out "$T/kv.csv"
grep -q '^bf16,640,1,62,' "$T/kv.csv" && grep -q '^fp8-e4m3,320,0\.5,62,' "$T/kv.csv" &&
    grep -q '^fp8-e4m3:head,400,0\.625,62,' "$T/kv.csv" && ok || bad "qk-bench kv rows: $(cat "$T/kv.csv")"
expect 2 "$QK" bench error
expect 2 "$QK" bench error --synthetic nosuch
expect 2 "$QK" bench wire -m "$SM"
expect 2 "$QK" bench wire -m "$SM" -f "$ST" -c 64 --boundaries 5
expect 2 "$QK" bench kv -m "$SM" -f "$ST" -c 64 --types int3
expect 2 "$QK" bench kv -m "$SM" -f "$ST" -c 63
expect 2 "$QK" bench kv -m "$SM" -f "$ST" --out "$ST"
