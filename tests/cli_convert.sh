# qk-convert's command line (sourced by tests/cli.sh: uses its expect/ok/bad helpers).
# Byte identity with convert_hf_to_gguf.py is tests/test_convert.c's; here: options, refusals,
# --dry-run and --json on a directory made by hand (the stories260K HF layout has no tokenizer.json).
expect 0 "$QK" convert --help
expect 2 "$QK" convert
expect 2 "$QK" convert --outtype q4_0 goldens
expect 2 "$QK" convert --split-max-size 12X goldens
expect 2 "$QK" convert "$T/no-such-dir"
# a directory without config.json, and one with an architecture the converter does not know
mkdir -p "$T/cv"
expect 2 "$QK" convert "$T/cv"
grep -q "config.json" "$T/err" && ok || bad "convert: the missing config.json is not named"
printf '{"architectures": ["FooForCausalLM"], "model_type": "llama"}\n' >"$T/cv/config.json"
printf '{}' >"$T/cv/model.safetensors.index.json"
expect 2 "$QK" convert "$T/cv"
ls "$T/cv" | grep -q '\.gguf$' && bad "convert wrote a file on refusal" || ok
# qk-quant MODEL_DIR refuses what qk-convert refuses, and leaves nothing (no output, no temporary file)
expect 2 "$QK" quant "$T/cv" "$T/cv/q.gguf" Q4_0
ls -A "$T/cv" | grep -q 'gguf' && bad "quant MODEL_DIR left a file on refusal" || ok
