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
    for sig in TERM:15 HUP:1; do
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
