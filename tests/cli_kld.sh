# qk-kld behaviour (sourced by tests/cli.sh: uses its expect/ok/bad helpers)
KM=goldens/models/stories260K/stories260K-f32.gguf
KT=goldens/stories260K-eval/eval-64k.txt
KB=goldens/kld/stories260K-f32-c256-4chunks.kld

# perplexity: llama-perplexity's progress line and final estimate.  llama.cpp
# prints [1]4.0448,[2]3.6452; qk's F32 products sum in kernels/fdot.h's 8
# lanes (llama.cpp's AVX-512 build in 16), which moves the last digit by one
expect 0 "$QK" kld -q -m "$KM" -f "$KT" -c 256 --chunks 2 -t 2
grep -q '^\[1\]4\.044[89],\[2\]3\.645[23],$' "$T/out" && ok || bad "kld progress line: $(head -1 "$T/out")"
grep -q '^Final estimate: PPL = [0-9.]* +/- [0-9.]*$' "$T/out" && ok || bad "kld final estimate"
# KL divergence against llama.cpp's base file, with passing thresholds
expect 0 "$QK" kld -q -m "$KM" --kld-base "$KB" --chunks 2 -t 2 --max-kld-mean 1e-5 --min-same-top 99.9 --max-ppl-ratio 1.001 --max-kld-p99 0.001
grep -q '^Same top p: 100\.000 ± 0\.000 %$' "$T/out" && ok || bad "kld same top p"
grep -q '^====== KL divergence statistics ======$' "$T/out" && ok || bad "kld statistics block"
# a violated bound: exit 1, one line naming it and the measured value
expect 1 "$QK" kld -q -m "$KM" --kld-base "$KB" --chunks 1 --max-kld-mean -1
grep -q "^qk-kld: --max-kld-mean -1 violated: Mean KLD = " "$T/err" && [ "$(wc -l <"$T/err")" = 1 ] && ok || bad "threshold message: $(cat "$T/err")"
expect 1 "$QK" kld -q -m "$KM" --kld-base "$KB" --chunks 1 --min-same-top 100.5%
# --json
expect 0 "$QK" kld -q -m "$KM" --kld-base "$KB" --chunks 1 --json --max-kld-mean 1
if command -v python3 >/dev/null; then
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["mode"]=="kld" and d["tokens_scored"]==127 and d["ok"] and d["kld"]["mean"]<1e-5 and d["same_top_p_pct"]["value"]==100 and d["chunks"]=={"first":1,"last":1,"total":1}' "$T/out" && ok || bad "kld --json"
fi
# thread count does not change the output
"$QK" kld -q -m "$KM" --kld-base "$KB" --chunks 2 -t 1 >"$T/k1"
"$QK" kld -q -m "$KM" --kld-base "$KB" --chunks 2 -t 3 -b 50 >"$T/k3"
cmp -s "$T/k1" "$T/k3" && ok || bad "kld output depends on threads or batch size"
# base files: llama.cpp's layout (size formula) and the qk format, read back
expect 0 "$QK" kld -q -m "$KM" -f "$KT" -c 256 --chunks 2 --kld-base-out "$T/b.kld"
[ "$(wc -c <"$T/b.kld")" = $((20 + 2 * 256 * 4 + 2 * 127 * 1032)) ] && ok || bad "llama base file size"
cmp -s -n 12 "$T/b.kld" "$KB" && ok || bad "llama base file header"
expect 0 "$QK" kld -q -m "$KM" -f "$KT" -c 256 --chunks 2 --kld-base-out "$T/b.qkb" --kld-base-format qk
[ "$(wc -c <"$T/b.qkb")" -lt $(( $(wc -c <"$T/b.kld") / 2 )) ] && ok || bad "qk base file not under half the llama size"
expect 0 "$QK" kld -q -m "$KM" --kld-base "$T/b.qkb" -f "$KT" --max-kld-mean 1e-6 --min-same-top 100
expect 0 "$QK" kld -q -m "$KM" --kld-base "$T/b.kld" --max-kld-mean 1e-6 --min-same-top 100
# a base row that is no log-probabilities (row 5 of chunk 1: min_log_prob +1, decoded with the
# batch's other rows on two threads): exit 2, the file, the field, the row's offset, as one row alone
cp "$KB" "$T/badrow.kld"
printf '\000\000\200\077' | dd of="$T/badrow.kld" bs=1 seek=$((20 + 4 * 1024 + 5 * 1032 + 4)) conv=notrunc 2>/dev/null
for b in 512 1; do
    expect 2 "$QK" kld -q -m "$KM" --kld-base "$T/badrow.kld" --chunks 2 -t 2 -b $b
    grep -q "badrow.kld: log-probs at offset 9276: chunk 1 row 5: token 0 has log-probability 1$" "$T/err" &&
        [ "$(wc -l <"$T/err")" = 1 ] && ok || bad "bad base row (-b $b): $(cat "$T/err")"
done
# --base: the model against itself in one pass is exactly zero (and its PPL ratio exactly 1)
expect 0 "$QK" kld -q -m "$KM" --base "$KM" -f "$KT" -c 256 --chunks 1 --max-kld-mean 0 --max-ppl-ratio 1 --min-same-top 100
# --logits/--logits-base: two qk-run --logits-out files of one token sequence
LP="Once upon a time, there was a little girl who liked to play in the park with her dog."
"$QK" run -q -m "$KM" -p "$LP" -n 0 --logits-out "$T/la.qkl" >/dev/null 2>&1
"$QK" quant -q "$KM" "$T/k8.gguf" F16 >/dev/null 2>&1
"$QK" run -q -m "$T/k8.gguf" -p "$LP" -n 0 --logits-out "$T/lq.qkl" >/dev/null 2>&1
# (identical logits: exactly 0 and a PPL ratio of exactly 1, the model's log-probabilities
# computed as the base's, lib/eval QK_KLDB_LOGPROB)
expect 0 "$QK" kld --logits "$T/la.qkl" --logits-base "$T/la.qkl" --max-kld-mean 0 --min-same-top 100 --max-ppl-ratio 1
grep -q '^Mean    KLD:   0\.000000 ±   0\.000000$' "$T/out" && ok || bad "logits against themselves: $(grep 'Mean    KLD' "$T/out")"
expect 0 "$QK" kld --logits "$T/lq.qkl" --logits-base "$T/la.qkl" --json --max-kld-mean 0.01
if command -v python3 >/dev/null; then
    n=$(( $("$QK" run --tokenize -m "$KM" -p "$LP" | tr ',' '\n' | wc -l) - 1 ))
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["tokens_scored"]==int(sys.argv[2]) and 0<d["kld"]["mean"]<0.01' "$T/out" "$n" && ok || bad "logits --json: $(head -c 300 "$T/out")"
fi
"$QK" run -q -m "$KM" -p "Once upon a time, there was a dog." -n 0 --logits-out "$T/lo.qkl" >/dev/null 2>&1
expect 2 "$QK" kld --logits "$T/lo.qkl" --logits-base "$T/la.qkl"
grep -q "la.qkl: n_tokens at offset 20: " "$T/err" && ok || bad "logits: token count mismatch not named: $(cat "$T/err")"
expect 2 "$QK" kld --logits "$T/la.qkl" -m "$KM"
# sharding: two parts merged (given in any order) print the bytes of one run
"$QK" kld -q -m "$KM" --kld-base "$KB" --chunks 3 >"$T/whole"
expect 0 "$QK" kld -q -m "$KM" --kld-base "$KB" --chunks 3 --chunk-range 1: --partial-out "$T/p2.qkpart"
expect 0 "$QK" kld -q -m "$KM" --kld-base "$KB" --chunks 3 --chunk-range 0:1 --partial-out "$T/p1.qkpart"
expect 0 "$QK" kld --merge "$T/p2.qkpart" "$T/p1.qkpart"
# (less the run's "Bits per weight" line: the parts hold statistics, not the model)
grep -v '^Bits per weight: ' "$T/whole" >"$T/whole.stats"
cmp -s "$T/out" "$T/whole.stats" && ok || bad "merged parts differ from one run"
expect 1 "$QK" kld --merge "$T/p1.qkpart" "$T/p2.qkpart" --max-kld-mean -1
expect 2 "$QK" kld --merge "$T/p1.qkpart" "$T/p1.qkpart"
grep -q 'overlap' "$T/err" && ok || bad "overlap message: $(cat "$T/err")"
expect 0 "$QK" kld -q -m "$KM" -f "$KT" -c 256 --chunks 3 --chunk-range 2:3 --partial-out "$T/q.qkpart"
expect 2 "$QK" kld --merge "$T/p1.qkpart" "$T/q.qkpart"
head -c 70 "$T/p2.qkpart" >"$T/cut.qkpart"
expect 2 "$QK" kld --merge "$T/p1.qkpart" "$T/cut.qkpart"
# bad input: exit 2 with one line
head -c 100000 "$KB" >"$T/cut.kld"
expect 2 "$QK" kld -q -m "$KM" --kld-base "$T/cut.kld"
grep -q 'truncated' "$T/err" && ok || bad "truncated base message: $(cat "$T/err")"
tail -c 30000 "$KT" >"$T/other.txt"
expect 2 "$QK" kld -q -m "$KM" --kld-base "$KB" -f "$T/other.txt"
grep -q 'another token sequence' "$T/err" && ok || bad "token sequence message: $(cat "$T/err")"
head -c 300 "$KT" >"$T/short.txt"
expect 2 "$QK" kld -q -m "$KM" -f "$T/short.txt" -c 256
grep -q 'too short' "$T/err" && ok || bad "short text message: $(cat "$T/err")"
if command -v python3 >/dev/null; then
    python3 -c 'import struct,sys; n_ctx,nv,nch=8,100,2; r=n_ctx-1-n_ctx//2; open(sys.argv[1],"wb").write(b"_logits_"+struct.pack("<iii",n_ctx,nv,nch)+bytes(4*n_ctx*nch)+bytes(nch*r*(2*((nv+1)//2)+4)*2))' "$T/v100.kld"
    expect 2 "$QK" kld -q -m "$KM" --kld-base "$T/v100.kld"
    grep -q 'vocabulary of 100 tokens' "$T/err" && ok || bad "vocabulary message: $(cat "$T/err")"
fi
expect 2 "$QK" kld -q -m "$KM" --kld-base "$KB" -c 128
expect 2 "$QK" kld -q -m "$KM" -f "$KT" -c 256 --max-kld-mean 1
expect 2 "$QK" kld -q -m "$KM" -f "$KT" --kld-base-out "$KT"
expect 2 "$QK" kld -q -m "$KM" -f "$KT" --chunk-range 3:2
expect 2 "$QK" kld -q -m "$KM" -f "$KT" --kld-base-format zip
expect 2 "$QK" kld -q -f "$KT"
expect 2 "$QK" kld --merge
expect 2 "$QK" kld --bogus
expect 3 "$QK" kld -q -m "$KM" --kld-base "$T/missing.kld"
expect 0 "$QK" kld --help
# a Hugging Face directory against its GGUF conversion: the same logits, so exactly zero
expect 0 "$QK" kld -q -m goldens/models/stories260K/hf-f32 --base "$KM" -f "$KT" -c 256 --chunks 1 --max-kld-mean 0 --max-ppl-ratio 1 --min-same-top 100
expect 2 "$QK" kld -q -m goldens/models/stories260K/hf-f32 --base goldens/models/stories260K/hf-bf16 -f "$KT"
# the F16 model qk-quant makes, against llama.cpp's F32 base (when qk-quant writes GGUF models)
if "$QK" quant "$KM" "$T/f16.gguf" F16 >/dev/null 2>&1; then
    expect 0 "$QK" kld -q -m "$T/f16.gguf" --kld-base "$KB" --chunks 2 --max-kld-mean 1e-5 --min-same-top 99.5
fi
