# qk-run behaviour (sourced by tests/cli.sh: uses its expect/ok/bad helpers)
M=goldens/models/stories260K
RG=goldens/llamacpp/stories260K/greedy.txt
GG="$M/stories260K-f32.gguf"

# --- greedy continuations: llama.cpp's text exactly, from the GGUF and both
# HF directories (which have no tokenizer.json: the GGUF lends its own)
nprompts=$(grep -c '^### prompt: ' "$RG")
[ "$nprompts" = 3 ] && ok || bad "greedy.txt has $nprompts prompts"
i=1
while [ $i -le "$nprompts" ]; do
    prompt=$(grep '^### prompt: ' "$RG" | sed -n "${i}p" | sed 's/^### prompt: //')
    # block i: the lines after its tag up to the next tag, trailing blank lines dropped
    awk -v k="$i" '/^### prompt: /{n++; next} n==k' "$RG" | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' >"$T/want"
    for model in "$GG" "$M/hf-f32" "$M/hf-bf16"; do
        if "$QK" run -m "$model" --tokenizer "$GG" -p "$prompt" -n 64 --temp 0 -t 2 -q >"$T/got" 2>"$T/err" &&
            cmp -s "$T/got" "$T/want"; then ok; else bad "greedy '$prompt' on $model"; diff "$T/got" "$T/want" | head -5; fi
    done
    i=$((i + 1))
done
# the F32 cache gives the same text here
"$QK" run -m "$GG" -p "Once upon a time" -n 64 --temp 0 --kv-type f32 -q >"$T/got" &&
    awk '/^### prompt: /{n++; next} n==1' "$RG" | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' | cmp -s - "$T/got" && ok || bad "greedy with --kv-type f32"

# --- tokenizing: llama.cpp's ids of eval-64k.txt, byte for byte
expect 0 "$QK" run --tokenize -m "$GG" -f goldens/stories260K-eval/eval-64k.txt
cmp -s "$T/out" goldens/stories260K-eval/eval-64k.tokens.txt && ok || bad "--tokenize eval-64k.txt"
# a vocabulary-only GGUF (no tensors): the first case of llama.cpp's llama-spm suite
V=goldens/vocab/ggml-vocab-llama-spm.gguf
expect 0 "$QK" run --tokenize --no-bos -m "$V" -p "$(sed -n 1p "$V.inp")"
[ "$(cat "$T/out")" = "[$(sed -n 1p "$V.out" | sed 's/^ //; s/ /, /g')]" ] && ok || bad "--tokenize on a vocabulary-only GGUF: $(cat "$T/out")"
# --detokenize: back to the text (llama_detokenize drops the space prefix when
# no BOS comes first)
"$QK" run --tokenize --no-bos -m "$GG" -p "Tom and Sue went to the beach." >"$T/ids" &&
    "$QK" run --detokenize -m "$GG" -f "$T/ids" >"$T/text" &&
    [ "$(cat "$T/text")" = "Tom and Sue went to the beach." ] && ok || bad "--detokenize round trip: '$(cat "$T/text")'"
expect 2 "$QK" run --detokenize -m "$GG" -p "[1, 99999]"
expect 2 "$QK" run --detokenize -m "$GG" -p "1 two 3"

# --- --json: tokens, text and timings; the text is what streaming printed
expect 0 "$QK" run -m "$GG" -p "The little dog" -n 16 --temp 0 --json
if command -v python3 >/dev/null; then
    "$QK" run -m "$GG" -p "The little dog" -n 16 --temp 0 -q --no-echo >"$T/plain"
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
plain = open(sys.argv[2]).read()
assert len(d["tokens"]) == 16 and d["prompt_tokens"][0] == 1 and d["stop"] == "length"
assert d["text"] + "\n" == plain, (d["text"], plain)
t = d["timings"]
assert t["prompt_n"] == len(d["prompt_tokens"]) and t["decode_n"] == 15
assert t["prompt_tokens_per_s"] > 0 and t["decode_tokens_per_s"] > 0
' "$T/out" "$T/plain" && ok || bad "run --json"
    # a full context stops generation: 5 prompt tokens, -c 7: two fed back, a third sampled
    "$QK" run -m "$GG" -p "Once upon a time" -c 7 -n -1 --temp 0 --json -q >"$T/ctx" &&
        python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["prompt_tokens"]) == 5 and len(d["tokens"]) == 3 and d["stop"] == "context", d
' "$T/ctx" && ok || bad "generation at a full context"
fi

# --- sampling: the same seed gives the same text, greedy ignores it
"$QK" run -m "$GG" -p "Once" -n 24 --temp 0.9 --seed 5 -q >"$T/s1"
"$QK" run -m "$GG" -p "Once" -n 24 --temp 0.9 --seed 5 -q -t 1 >"$T/s2"
cmp -s "$T/s1" "$T/s2" && ok || bad "seeded sampling is not reproducible"

# --- --logits-out: the same bytes with 1 and 2 threads, from GGUF and HF
for model in "$GG" "$M/hf-bf16"; do
    "$QK" run -m "$model" --tokenizer "$GG" -p "Lily and Tom played" -n 8 --temp 0 -q -t 1 --logits-out "$T/l1" >/dev/null &&
        "$QK" run -m "$model" --tokenizer "$GG" -p "Lily and Tom played" -n 8 --temp 0 -q -t 2 --logits-out "$T/l2" >/dev/null &&
        cmp -s "$T/l1" "$T/l2" && ok || bad "--logits-out depends on the thread count ($model)"
done
head -c 8 "$T/l1" | grep -q QKLOGITS && ok || bad "--logits-out magic"
"$QK" run -m "$GG" -p "Lily and Tom played" -n 8 --temp 0 -q --logits-out "$T/l3" --logits-dtype f16 >/dev/null &&
    [ "$(wc -c <"$T/l3")" -lt "$(wc -c <"$T/l1")" ] && ok || bad "--logits-dtype f16"
# --tokens-in, teacher forcing: the first 100 eval ids, prompt only
head -c 600 goldens/stories260K-eval/eval-64k.tokens.txt | sed 's/, [0-9]*$/]/' >"$T/ids"
expect 0 "$QK" run -m "$GG" --tokens-in "$T/ids" -n 0 -c 256 --logits-out "$T/l4"
[ -s "$T/l4" ] && [ ! -s "$T/out" ] && ok || bad "--tokens-in -n 0 --logits-out"

# --- bad input: exit 2 with one line; nothing left behind
mkdir -p "$T/gpt2"
sed 's/LlamaForCausalLM/GPT2LMHeadModel/' "$M/hf-f32/config.json" >"$T/gpt2/config.json"
cp "$M/hf-f32/model.safetensors" "$T/gpt2/"
expect 2 "$QK" run -m "$T/gpt2" --tokenizer "$GG" -p "Once"
grep -q "unsupported architecture 'GPT2LMHeadModel'" "$T/err" && ok || bad "unsupported architecture not named: $(cat "$T/err")"
expect 2 "$QK" run -m "$V" -p "Once"
grep -q "token_embd.weight.*missing" "$T/err" && ok || bad "missing tensor not named: $(cat "$T/err")"
expect 2 "$QK" run -m "$GG" -p "Once upon a time there was a dog" -c 4 --logits-out "$T/never"
grep -q "longer than the context" "$T/err" && ok || bad "long prompt message: $(cat "$T/err")"
[ ! -e "$T/never" ] && ! ls "$T" | grep -q '^never' && ok || bad "--logits-out left a file after an error"
expect 2 "$QK" run -m "$M/hf-f32" -p "Once"
grep -q -- "--tokenizer" "$T/err" && ok || bad "HF dir without tokenizer.json: $(cat "$T/err")"
cp "$GG" "$T/model.gguf"
expect 2 "$QK" run -m "$T/model.gguf" -p "Once" --logits-out "$T/model.gguf"
cmp -s "$T/model.gguf" "$GG" && ok || bad "--logits-out overwrote the model"
expect 2 "$QK" run -m "$GG"
expect 2 "$QK" run -p "Once"
expect 2 "$QK" run -m "$GG" -p "Once" -f "$T/ids"
expect 2 "$QK" run -m "$GG" -p "Once" --kv-type q8_0
expect 2 "$QK" run -m "$GG" -p "Once" --top-p 0
expect 2 "$QK" run -m "$GG" -p "Once" --bogus
expect 2 "$QK" run -m "$GG" --tokens-in "$T/text"
echo "[1, 600]" >"$T/badids"
expect 2 "$QK" run -m "$GG" --tokens-in "$T/badids" -n 1
expect 3 "$QK" run -m "$T/does-not-exist.gguf" -p "Once"
expect 3 "$QK" run -m "$GG" -f "$T/does-not-exist.txt"
expect 0 "$QK" run --help
