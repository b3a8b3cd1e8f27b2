# Write failures and kills (sourced by tests/cli.sh: uses its expect/ok/bad helpers and $T).
# Every writer goes through lib/core/outfile: a failed write is exit 3 and one line naming the
# output and the errno text, and no file is left; a killed writer leaves nothing either.
RM=goldens/models/stories260K/stories260K-f32.gguf
RH=goldens/models/stories260K/hf-f32
RT=goldens/stories260K-eval/eval-64k.txt
RB=goldens/kld/stories260K-f32-c256-4chunks.kld
W="$T/w"

# wfail BLOCKS NAME CMD...: run CMD under `ulimit -f BLOCKS` (0: every byte to a regular file
# fails) with stdout to /dev/null and stderr through a pipe (so the limit cannot eat the
# message); want exit 3, one line naming $W/NAME and "File too large", and $W empty after.
wfail() {
    blocks=$1 name=$2; shift 2
    rm -rf "$W"; mkdir "$W"
    { (ulimit -f "$blocks"; exec "$@") 2>&1 >/dev/null; echo "rc=$?"; } | cat >"$T/wf"
    rc=$(tail -n 1 "$T/wf"); sed '$d' "$T/wf" >"$T/err"
    if [ "$rc" != rc=3 ]; then bad "ulimit -f $blocks: $rc (want 3): $*"; sed 's/^/  /' "$T/err"
    elif [ "$(wc -l <"$T/err")" != 1 ] || ! grep -q "$W/$name: .*File too large$" "$T/err"; then
        bad "ulimit -f $blocks: not one line naming $W/$name and the errno: $(cat "$T/err")"
    elif [ -n "$(ls -A "$W")" ]; then bad "ulimit -f $blocks: left behind: $(ls -A "$W"): $*"
    else ok; fi
}
# GGUF (qk-quant), past the first write and at the first byte
wfail 8 o.gguf "$QK" quant -q "$RM" "$W/o.gguf" F16
wfail 0 o.gguf "$QK" quant -q "$RM" "$W/o.gguf" Q4_K_M
# raw encode
wfail 4 o.bin "$QK" quant --raw-encode q4_0 --shape 8x4096 goldens/ggml/input.f32 "$W/o.bin"
# Hugging Face directories: the message names the output's file, not the temporary directory
wfail 8 d/model.safetensors "$QK" quant -q --to ct-fp8 "$RH" "$W/d"
wfail 0 d/model.safetensors "$QK" quant -q --to mlx-q4 "$RH" "$W/d"
# base files (both formats), logits, partial results, reports
wfail 8 b.kld "$QK" kld -q -m "$RM" -f "$RT" -c 256 --chunks 1 --kld-base-out "$W/b.kld"
wfail 8 b.qkb "$QK" kld -q -m "$RM" -f "$RT" -c 256 --chunks 1 --kld-base-out "$W/b.qkb" --kld-base-format qk
wfail 2 l.qkl "$QK" run -q -m "$RM" -p "Once upon a time, there was a little girl" -n 0 --logits-out "$W/l.qkl"
wfail 0 p.qkpart "$QK" kld -q -m "$RM" --kld-base "$RB" --chunks 1 --chunk-range 0:1 --partial-out "$W/p.qkpart"
wfail 0 r.json "$QK" bench model -m "$RM" -p 8 -n 0 -r 1 -t 1 --no-warmup -q --json --out "$W/r.json"

# qk-convert (a synthetic Llama directory from tools/conv-synth): a write failure; a kill -9
# while a split set is being written (its shards stay temporaries until all are written:
# two of them open at once) leaves no file of the set; an --outfile naming an input is refused
CS=$(dirname "$QK")/tools/conv-synth
if [ -x "$CS" ] && "$CS" goldens/convert/llama-f16 "$T/cvsrc" >/dev/null 2>&1; then
    wfail 8 c.gguf "$QK" convert -q --outfile "$W/c.gguf" "$T/cvsrc"
    wfail 0 "c-00001-of-[0-9]*\.gguf" "$QK" convert -q --split-max-size 1M --outfile "$W/c.gguf" "$T/cvsrc"
    if [ -d /proc/self/fd ]; then
        # the window with two shards open is a few milliseconds: under load the polling can miss
        # it, and then the run completes, which must leave the whole set (complete or absent); try
        # again, up to 30 times
        try=0 n=0
        while [ $try -lt 30 ] && [ "$n" -lt 2 ]; do
            rm -rf "$W"; mkdir "$W"
            "$QK" convert -q -t 1 --split-max-size 1M --outfile "$W/c.gguf" "$T/cvsrc" >/dev/null 2>&1 &
            pid=$! i=0 n=0
            while [ $i -lt 20000 ] && kill -0 $pid 2>/dev/null; do
                n=$(ls -l /proc/$pid/fd 2>/dev/null | grep -c -F -- "-> $W/")
                [ "$n" -ge 2 ] && break
                i=$((i + 1))
            done
            kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
            if [ "$n" -lt 2 ] && [ "$(ls -A "$W" | tr '\n' ' ')" != "c-00001-of-00003.gguf c-00002-of-00003.gguf c-00003-of-00003.gguf " ]; then
                bad "qk-convert --split-max-size finished without two shards open, leaving: $(ls -A "$W")"; n=-1; break
            fi
            try=$((try + 1))
        done
        if [ "$n" -ge 2 ]; then [ -z "$(ls -A "$W")" ] && ok || bad "kill -9 during a split qk-convert left $(ls -A "$W")"
        elif [ "$n" = 0 ]; then bad "qk-convert --split-max-size: 30 runs, two shards open never seen (committed one by one?)"; fi
    fi
    sum=$(cksum <"$T/cvsrc/model.safetensors")
    for f in model.safetensors tokenizer.json config.json; do
        expect 2 "$QK" convert -q --outfile "$T/cvsrc/$f" "$T/cvsrc"
        grep -q "$T/cvsrc/$f: output would overwrite an input" "$T/err" && ok || bad "convert over $f: $(cat "$T/err")"
    done
    [ "$(cksum <"$T/cvsrc/model.safetensors")" = "$sum" ] && ok || bad "qk-convert overwrote its input"
else
    bad "tools/conv-synth did not make the qk-convert test directory"
fi
# qk-report's directory and a task run's JSON report
"$QK" quant -q "$RM" "$T/r16w.gguf" F16 >/dev/null 2>&1
wfail 0 rep/report.md "$QK" report -q --base "$RM" -f "$RT" -c 128 --chunks 1 -o "$W/rep" "$T/r16w.gguf"
wfail 0 h.json "$QK" kld -q -m "$RM" --hellaswag -f goldens/tasks/hellaswag-stories.txt --hellaswag-tasks 4 --partial-out "$W/h.json"

# an existing output is replaced whole, by a rename: no temporary beside it afterwards
rm -rf "$W"; mkdir "$W"
"$QK" quant -q "$RM" "$W/o.gguf" F16 && "$QK" quant -q "$RM" "$W/ref.gguf" Q4_K_M &&
    "$QK" quant -q "$RM" "$W/o.gguf" Q4_K_M && cmp -s "$W/o.gguf" "$W/ref.gguf" &&
    [ "$(ls -A "$W" | tr '\n' ' ')" = "o.gguf ref.gguf " ] && ok || bad "replacing an output: $(ls -A "$W")"
[ "$(stat -c %a "$W/o.gguf")" = "$(umask 0022; touch "$W/m"; stat -c %a "$W/m"; rm -f "$W/m")" ] && ok ||
    bad "output mode $(stat -c %a "$W/o.gguf") is not 0666 & ~umask"

# started KIND CMD...: run CMD in the background ($pid) until it has its output open in $W
# (an fd under $W in /proc/PID/fd); sets $how to "unnamed" (O_TMPFILE) or "named"
started() {
    rm -rf "$W"; mkdir "$W"
    "$@" >/dev/null 2>"$T/err" &
    pid=$!
    how="" i=0
    while [ $i -lt 3000 ] && kill -0 $pid 2>/dev/null; do
        l=$(ls -l /proc/$pid/fd 2>/dev/null | grep -F -- "-> $W/")
        case $l in *"(deleted)"*) how=unnamed; break ;; ?*) how=named; break ;; esac
        i=$((i + 1))
    done
}
RQ="$QK quant -q -t 1 --imatrix goldens/quant/stories4M.imatrix.gguf goldens/models/stories4M/stories4M-f32.gguf"
if [ -d /proc/self/fd ]; then
    # kill -9 mid-write: an unnamed temporary (O_TMPFILE) vanishes with the process
    started $RQ "$W/k.gguf" IQ1_S
    kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
    if [ "$how" = unnamed ]; then [ -z "$(ls -A "$W")" ] && ok || bad "kill -9 left $(ls -A "$W")"
    elif [ "$how" = named ]; then echo "cli: O_TMPFILE unsupported in $W: kill -9 test skipped"
    else bad "kill -9 test: qk-quant never had its output open"; fi
    # ... and a killed replacement leaves the old file as it was
    cp "$RM" "$T/old.gguf"
    started $RQ "$W/k.gguf" IQ1_S
    cp "$T/old.gguf" "$W/k.gguf"
    kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
    [ "$how" != unnamed ] || { cmp -s "$W/k.gguf" "$T/old.gguf" && [ "$(ls -A "$W")" = k.gguf ]; } && ok ||
        bad "kill -9 during a replacement: $(ls -A "$W")"
    # the named temporary (QK_OUT_NAMED=1, as where O_TMPFILE is refused): SIGTERM and SIGHUP
    # remove it, and the exit status still tells the signal
    # (SIGHUP only where it is not ignored on entry, as under nohup: qk keeps an ignored signal
    # ignored, so the quantization then completes)
    sigs=TERM:15
    ign=$(sed -n 's/^SigIgn:[[:space:]]*//p' /proc/$$/status 2>/dev/null)
    if [ -n "$ign" ] && [ $((0x$ign & 1)) = 1 ]; then echo "cli: SIGHUP ignored here (nohup): its test skipped"
    else sigs="$sigs HUP:1"; fi
    for sig in $sigs; do
        QK_OUT_NAMED=1 started $RQ "$W/k.gguf" IQ1_S
        kill -${sig%:*} $pid 2>/dev/null; wait $pid 2>/dev/null; st=$?
        [ "$how" = named ] && [ -z "$(ls -A "$W")" ] && [ $st = $((128 + ${sig#*:})) ] && ok ||
            bad "SIG${sig%:*} with a named temporary ($how, exit $st): left $(ls -A "$W")"
    done
    # a directory (always named), held mid-write by a FIFO among the files --to copies after
    # config.json; SIGTERM removes it
    rm -rf "$W" "$T/fsrc"; mkdir "$W" "$T/fsrc"; cp "$RH"/* "$T/fsrc/"; mkfifo "$T/fsrc/merges.txt"
    "$QK" quant -q --to ct-fp8 "$T/fsrc" "$W/d" >/dev/null 2>&1 &
    pid=$! i=0
    while [ $i -lt 20000 ] && kill -0 $pid 2>/dev/null && ! ls "$W"/d.tmp.*/config.json >/dev/null 2>&1; do i=$((i + 1)); done
    kill -TERM $pid 2>/dev/null
    i=0; while [ $i -lt 50 ] && kill -0 $pid 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
    kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null; st=$?
    [ $st = 143 ] && [ -z "$(ls -A "$W")" ] && ok || bad "SIGTERM during --to (exit $st): left $(ls -A "$W")"
fi

# --- config lies: a quantization config is checked against the tensors it describes; a
# directory whose config claims a scheme its tensors do not hold is refused (exit 2, one line
# naming the layer, the claimed scheme and the missing or extra tensor) by every reader
LH=goldens/models/stories4M/hf-f32
# lie NAME FRAGMENT [HQC]: $T/lie/NAME = stories4M's float weights, config.json with FRAGMENT
# ('"key": value') added (none when empty), and hf_quant_config.json = HQC when given
lie() {
    d="$T/lie/$1"; mkdir -p "$d"
    ln -sf "$(pwd)/$LH/model.safetensors" "$d/model.safetensors"
    if [ -n "$2" ]; then { sed '$d' "$LH/config.json"; printf ',\n  %s\n}\n' "$2"; } >"$d/config.json"
    else cp "$LH/config.json" "$d/config.json"; fi
    [ -z "$3" ] || printf '%s\n' "$3" >"$d/hf_quant_config.json"
}
# refused PATTERN DIR: qk-inspect, qk-quant --to and qk-run (which reads the tensors by name)
# refuse DIR with one line matching PATTERN
LT=goldens/models/stories4M/stories4M-f32.gguf
refused() {
    for c in "inspect" "quant -q --to ct-fp8" "run -q -n 1 -p Once --tokenizer $LT -m"; do
        rm -rf "$T/lie-out"
        expect 2 "$QK" $c "$2" $([ "${c%% *}" != quant ] || echo "$T/lie-out")
        grep -q -- "$1" "$T/err" && ok || bad "qk $c $2: not refused as '$1': $(cat "$T/err")"
        [ ! -e "$T/lie-out" ] && ok || bad "qk $c $2 wrote an output"
    done
}
CT='"quantization_config": {"quant_method": "compressed-tensors", "format": "%s", "ignore": ["lm_head"], "config_groups": {"group_0": {"targets": ["Linear"], "weights": %s}}}'
W4='{"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": true}'
F8='{"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true}'
L0=model.layers.0.mlp.down_proj
lie ct-pack "$(printf "$CT" pack-quantized "$W4")"
refused "config.json: quantization_config at offset [0-9]*: claims pack-quantized for $L0 (.*), but $L0 has a float weight (F32) and no weight_packed$" "$T/lie/ct-pack"
lie ct-fp8 "$(printf "$CT" float-quantized "$F8")"
refused "claims float-quantized for $L0 .* no weight_scale$" "$T/lie/ct-fp8"
lie ct-nvfp4 "$(printf "$CT" nvfp4-pack-quantized '{"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}')"
refused "claims nvfp4-pack-quantized for $L0 .* no weight_packed$" "$T/lie/ct-nvfp4"
lie fp8 '"quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128], "activation_scheme": "dynamic"}'
refused "claims fp8 e4m3 for $L0 .* no weight_scale_inv$" "$T/lie/fp8"
lie awq '"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": true, "version": "gemm"}'
refused "claims awq gemm for $L0 .* no qweight$" "$T/lie/awq"
lie gptq '"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": false, "sym": true}'
refused "claims gptq for $L0 .* no qweight$" "$T/lie/gptq"
lie bnb4 '"quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": true, "bnb_4bit_quant_type": "nf4"}'
refused "claims bitsandbytes nf4 for $L0 .* no weight.absmax$" "$T/lie/bnb4"
lie bnb8 '"quantization_config": {"quant_method": "bitsandbytes", "load_in_8bit": true}'
refused "claims bitsandbytes llm.int8 for $L0 .* no SCB$" "$T/lie/bnb8"
lie mo-nvfp4 "" '{"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}}'
refused "hf_quant_config.json: quantization at offset [0-9]*: claims modelopt NVFP4 for $L0 .* no weight_scale_2$" "$T/lie/mo-nvfp4"
lie mo-fp8 '"quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8"}'
refused "claims modelopt FP8 for $L0 .* no weight_scale$" "$T/lie/mo-fp8"
# MLX: the defaults claim nothing (mlx_lm quantizes what has scales); a per-module entry does
lie mlx '"quantization": {"group_size": 64, "bits": 4, "model.layers.1.self_attn.q_proj": {"group_size": 32, "bits": 8}}'
refused "config.json: quantization at offset [0-9]*: claims mlx affine for model.layers.1.self_attn.q_proj .* no scales$" "$T/lie/mlx"
lie mlx-ok '"quantization": {"group_size": 64, "bits": 4}'
expect 0 "$QK" inspect "$T/lie/mlx-ok"
# extra: a quantized module the config says it leaves alone
"$QK" quant -q --to ct-w4a16 "$LH" "$T/lie/ct-extra" >/dev/null 2>&1
sed -i 's/"lm_head"/"lm_head", "model.layers.0.self_attn.q_proj"/' "$T/lie/ct-extra/config.json"
refused "quantization_config at offset [0-9]*: leaves model.layers.0.self_attn.q_proj unquantized (ignored), but model.layers.0.self_attn.q_proj has weight_packed (stored as pack)$" "$T/lie/ct-extra"

# gpt-oss's {"quant_method": "mxfp4"} (transformers' Mxfp4HfQuantizer: the experts as
# PROJ_blocks + PROJ_scales unless modules_to_not_convert names them): over float experts, and
# over MXFP4 experts it says it leaves alone
GO=goldens/arch/gpt-oss/hf GM=goldens/arch/gpt-oss-mxfp4/hf
mxlie() { # NAME SRC CONFIG-SED
    d="$T/lie/$1"; mkdir -p "$d"
    for f in "$2"/*; do ln -sf "$(pwd)/$f" "$d/"; done
    rm -f "$d/config.json"; sed "$3" "$2/config.json" >"$d/config.json"
}
MX='"quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "lm_head"]},'
mxlie mx-float "$GO" "s/^  \"use_cache\"/  $MX\n&/"
grep -q mxfp4 "$T/lie/mx-float/config.json" && ok || bad "mxlie: no quantization_config written"
refused "config.json: quantization_config at offset [0-9]*: claims mxfp4 for model.layers.0.mlp.experts (gpt-oss experts), but model.layers.0.mlp.experts has a float down_proj (F32) and no down_proj_blocks$" "$T/lie/mx-float"
mxlie mx-left "$GM" 's/"lm_head"/"lm_head", "mlp.experts"/'
refused "quantization_config at offset [0-9]*: leaves model.layers.0.mlp.experts unquantized (modules_to_not_convert 'mlp.experts'), but model.layers.0.mlp.experts has down_proj_blocks$" "$T/lie/mx-left"
mxlie mx-regex "$GM" 's/"lm_head"/"lm_head", "model\\\\.layers\\\\.1\\\\.mlp"/'
refused "leaves model.layers.1.mlp.experts unquantized (modules_to_not_convert 'model\\\\.layers\\\\.1\\\\.mlp'), but" "$T/lie/mx-regex"
expect 0 "$QK" run -q -m "$GM" -p Once -n 1

# --- self-comparison is exactly zero: the model's log-probabilities are computed as the base's
# (lib/eval: QK_KLDB_LOGPROB), so a model against itself gives 0 for every KLD and Δp statistic
# and 100 % same top, in every mode whose base is exact (not llama.cpp's 16-bit base file)
# allzero WHAT: the --json report in $T/out has the 30 statistics of kld, delta_p_pct and
# rms_delta_p_pct all exactly 0, and same_top_p_pct 100
allzero() {
    r=$(awk '/"(kld|delta_p_pct|rms_delta_p_pct)": \{/ {f = 1; next} f && /}/ {f = 0}
             f {n++; if ($2 != "0," && $2 != "0") nz++} /"same_top_p_pct"/ {s = 1}
             s && /"value"/ {top = $2; s = 0} END {print n + 0, nz + 0, top}' "$T/out")
    [ "$r" = "30 0 100," ] && ok || bad "self-comparison $1 not exactly zero (statistics, non-zero, same top: $r)"
}
S4=goldens/models/stories4M/stories4M-f32.gguf
"$QK" quant -q "$S4" "$T/s4q.gguf" Q4_K_M >/dev/null 2>&1
"$QK" quant -q "$RM" "$T/s260q.gguf" Q4_K_M >/dev/null 2>&1
for m in "$S4" "$T/s4q.gguf"; do
    expect 0 "$QK" kld -q -m "$m" --base "$m" -f "$RT" -c 128 --chunks 2 --json --max-kld-mean 0 --min-same-top 100
    allzero "--base ($m)"
    expect 0 "$QK" kld -q -m "$m" --base "$m" -f "$RT" -c 128 --chunks 2 --json --wire fp32 --stages 2
    allzero "--wire fp32 ($m)"
    "$QK" run -q -m "$m" -p "Once upon a time, there was a little girl who liked to play" -n 0 --logits-out "$T/self.qkl" >/dev/null 2>&1
    expect 0 "$QK" kld --logits "$T/self.qkl" --logits-base "$T/self.qkl" --json
    allzero "--logits ($m)"
done
# a base file qk wrote and reads back: exact in qk's factored encoding (chosen when it is the
# smaller from 5 chunks of stories260K on (qk_kldb_factored_pays): 8 chunks, 5 under ASan+UBSan)
sc=8
[ -n "${QK_SANITIZED:-}" ] && sc=5
for m in "$RM" "$T/s260q.gguf"; do
    "$QK" kld -q -m "$m" -f "$RT" -c 256 --chunks $sc --kld-base-out "$T/self.qkb" --kld-base-format qk >/dev/null 2>&1
    expect 0 "$QK" kld -q -m "$m" --kld-base "$T/self.qkb" --json
    allzero "--kld-base factored qk file ($m)"
done
# the text report of one: zeros without a sign, no nan
expect 0 "$QK" kld -q -m "$S4" --base "$S4" -f "$RT" -c 128 --chunks 2
! grep -q -e '-0\.0*\( \|%\|$\)' -e 'nan' "$T/out" && grep -q '^Mean    KLD:   0\.000000 ±   0\.000000$' "$T/out" &&
    grep -q '^Same top p: 100\.000 ± 0\.000 %$' "$T/out" && ok || bad "self-comparison text report: $(grep -e nan -e '-0\.0' "$T/out" | head -3)"
