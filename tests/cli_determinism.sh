# Bitwise-reproducible logits through qk-run --logits-out (issue #10; sourced
# by tests/cli.sh: uses its expect/ok/bad helpers).  The same model and
# tokens give the same file bytes whatever -t, -b, QK_CPU, and whether a
# position was evaluated in the prompt or by a decode step.  The engine-level
# matrix (batches of 512, three models, every level) is tests/test_determinism.c.
D_GG=goldens/models/stories260K/stories260K-f32.gguf
D_BF=goldens/models/stories260K/hf-bf16
D_Q8=goldens/llamacpp/stories4M/stories4M-Q8_0.gguf
# the first 100 (and 24) ids of eval-64k
tr -d '[]' <goldens/stories260K-eval/eval-64k.tokens.txt | tr ',' '\n' | head -n 100 >"$T/d_ids100"
head -n 24 "$T/d_ids100" >"$T/d_ids24"

# d_run OUT [QK_CPU] ARGS...: logits of the prompt only, quietly
d_run() {
    d_out=$1 d_cpu=$2
    shift 2
    if [ -n "$d_cpu" ]; then
        QK_CPU=$d_cpu "$QK" run "$@" -n 0 -q --logits-out "$d_out" >/dev/null 2>"$T/err"
    else
        "$QK" run "$@" -n 0 -q --logits-out "$d_out" >/dev/null 2>"$T/err"
    fi
}

# d_same WHAT REF OUT [QK_CPU] ARGS...: run, then compare with REF byte for byte
d_same() {
    d_what=$1 d_ref=$2
    shift 2
    if d_run "$@" && cmp -s "$d_ref" "$1"; then ok; else bad "logits differ: $d_what"; fi
}

# AVX-512 level: only where the CPU has it (cpu.h needs F, BW, VL, DQ)
d_levels="scalar avx2"
if grep -q avx512f /proc/cpuinfo 2>/dev/null && grep -q avx512bw /proc/cpuinfo &&
    grep -q avx512vl /proc/cpuinfo && grep -q avx512dq /proc/cpuinfo; then
    d_levels="$d_levels avx512"
else
    echo "cli_determinism: this CPU has no AVX-512: QK_CPU=avx512 not checked"
fi

for d_m in "$D_GG" "$D_BF"; do
    d_args="-m $d_m --tokenizer $D_GG --tokens-in $T/d_ids100"
    # shellcheck disable=SC2086
    if d_run "$T/d_ref" "" $d_args -t 1; then ok; else bad "qk-run on $d_m: $(cat "$T/err")"; continue; fi
    for d_t in 2 3 8; do
        # shellcheck disable=SC2086
        d_same "$d_m -t $d_t" "$T/d_ref" "$T/d_out" "" $d_args -t $d_t
    done
    for d_b in 1 7 64; do
        # shellcheck disable=SC2086
        d_same "$d_m -b $d_b" "$T/d_ref" "$T/d_out" "" $d_args -t 2 -b $d_b
    done
    for d_l in $d_levels; do
        # shellcheck disable=SC2086
        d_same "$d_m QK_CPU=$d_l -t 3 -b 7" "$T/d_ref" "$T/d_out" "$d_l" $d_args -t 3 -b 7
    done
done

# quantized weights (Q8_0 activations, integer dots), its own vocabulary; where
# the CPU has AMX the default run takes its first 16 tokens through the AMX
# tiles (kernels/x86/amx_packed.c; also IQ4_XS below) and -b 1 never does
d_run "$T/d_q8ref" "" -m "$D_Q8" --tokens-in "$T/d_ids24" -t 1 && ok || bad "qk-run on $D_Q8: $(cat "$T/err")"
d_same "Q8_0 -t 3 -b 7" "$T/d_q8ref" "$T/d_out" "" -m "$D_Q8" --tokens-in "$T/d_ids24" -t 3 -b 7
for d_l in $d_levels; do
    d_same "Q8_0 QK_CPU=$d_l -t 2 -b 1" "$T/d_q8ref" "$T/d_out" "$d_l" -m "$D_Q8" --tokens-in "$T/d_ids24" -t 2 -b 1
done

# K-quant and IQ4_XS weights (the packed super-block kernels of every level):
# stories4M quantized here, then every level, prompt batches and one-token
# steps, gives the bytes of the default run
for d_p in Q4_K_M Q5_K_M IQ4_XS; do
    if "$QK" quant goldens/models/stories4M/stories4M-f32.gguf "$T/d_$d_p.gguf" $d_p >/dev/null 2>"$T/err"; then ok; else
        bad "qk-quant stories4M $d_p: $(cat "$T/err")"
        continue
    fi
    d_run "$T/d_kref" "" -m "$T/d_$d_p.gguf" --tokens-in "$T/d_ids24" -t 1 && ok || bad "qk-run on $d_p: $(cat "$T/err")"
    for d_l in $d_levels; do
        d_same "$d_p QK_CPU=$d_l -t 2 -b 7" "$T/d_kref" "$T/d_out" "$d_l" -m "$T/d_$d_p.gguf" --tokens-in "$T/d_ids24" -t 2 -b 7
        d_same "$d_p QK_CPU=$d_l -t 2 -b 1" "$T/d_kref" "$T/d_out" "$d_l" -m "$T/d_$d_p.gguf" --tokens-in "$T/d_ids24" -t 2 -b 1
    done
    rm -f "$T/d_$d_p.gguf"
done
# float activations (--act-type f32): the float-activation products, their
# own order at every level; and not the default arithmetic's logits
d_run "$T/d_f32ref" "" -m "$D_Q8" --tokens-in "$T/d_ids24" -t 1 --act-type f32 && ok ||
    bad "qk-run --act-type f32 on $D_Q8: $(cat "$T/err")"
cmp -s "$T/d_f32ref" "$T/d_q8ref" && bad "--act-type f32 gave the default logits" || ok
d_same "Q8_0 f32 activations -t 3 -b 7" "$T/d_f32ref" "$T/d_out" "" -m "$D_Q8" --tokens-in "$T/d_ids24" -t 3 -b 7 --act-type f32
for d_l in $d_levels; do
    d_same "Q8_0 f32 activations QK_CPU=$d_l -t 2 -b 1" "$T/d_f32ref" "$T/d_out" "$d_l" -m "$D_Q8" --tokens-in "$T/d_ids24" -t 2 -b 1 --act-type f32
done
# F32 weights have no activation encoding: --act-type f32 changes nothing
d_run "$T/d_gg" "" -m "$D_GG" --tokens-in "$T/d_ids100" -t 2
d_same "stories260K F32 --act-type f32" "$T/d_gg" "$T/d_out" "" -m "$D_GG" --tokens-in "$T/d_ids100" -t 3 -b 7 --act-type f32

# decode vs prompt: 40 prompt ids and 16 greedy tokens (15 of them fed back)
# give the file of the same 55 ids evaluated as one prompt
head -n 40 "$T/d_ids100" >"$T/d_p40"
if "$QK" run -m "$D_GG" --tokens-in "$T/d_p40" -n 16 --temp 0 -t 3 --json -q --logits-out "$T/d_gen" >"$T/d_json" 2>"$T/err"; then
    awk '/"tokens": \[/{f=1; next} f && /\]/{f=0} f{gsub(/[ ,]/, ""); print}' "$T/d_json" | head -n 15 >"$T/d_new"
    cat "$T/d_p40" "$T/d_new" >"$T/d_p55"
    [ "$(wc -l <"$T/d_p55")" = 55 ] && ok || bad "decode test: $(wc -l <"$T/d_new") generated ids"
    d_same "prompt + decode vs one prompt" "$T/d_gen" "$T/d_out" "" -m "$D_GG" --tokens-in "$T/d_p55" -t 1
    d_same "prompt + decode vs -b 7, QK_CPU=scalar" "$T/d_gen" "$T/d_out" scalar -m "$D_GG" --tokens-in "$T/d_p55" -t 2 -b 7
else
    bad "qk-run generation for the decode test: $(cat "$T/err")"
fi

# -b: bad values are usage errors; --json reports the batch in effect
expect 2 "$QK" run -m "$D_GG" -p "Once" -b 0
expect 2 "$QK" run -m "$D_GG" -p "Once" -b x
expect 0 "$QK" run -m "$D_GG" -p "Once" -n 1 -b 3 --json -q
grep -q '"n_batch": 3,' "$T/out" && ok || bad "--json n_batch: $(grep n_batch "$T/out")"
expect 0 "$QK" run -m "$D_GG" -p "Once" -n 1 -c 16 --batch 64 --json -q
grep -q '"n_batch": 16,' "$T/out" && ok || bad "-b above -c: $(grep n_batch "$T/out")"
