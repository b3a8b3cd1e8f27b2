#!/bin/sh
# tsan.sh QK: the threaded command lines under a ThreadSanitizer build of qk (make tsan): the pool
# in matmul and attention (qk-run, qk-kld), quantization with several threads (GGUF and --to), the
# sharded KLD (--chunk-range parts merged), a factored base file read with threads.  TSan reports make the command exit 66.
QK=${1:-build-tsan/qk}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 ${TSAN_OPTIONS:-}"
M=goldens/models/stories260K/stories260K-f32.gguf
X=goldens/stories260K-eval/eval-64k.txt
fail=0
run() {
    if "$@" >"$T/out" 2>"$T/err"; then echo "tsan: ok: $*"
    else fail=1; echo "tsan: FAIL (exit $?): $*"; head -40 "$T/err"; fi
}
run "$QK" quant -q -t 4 "$M" "$T/q.gguf" Q4_K_M
run "$QK" quant -q -t 3 --imatrix goldens/quant/stories4M.imatrix.gguf goldens/models/stories4M/stories4M-f32.gguf "$T/i.gguf" IQ4_XS
run "$QK" quant -q -t 4 --to ct-w4a16 goldens/models/stories4M/hf-f32 "$T/ct"
run "$QK" run -q -t 4 -m "$T/q.gguf" -p "Once upon a time" -n 16
run "$QK" kld -q -t 4 -m "$T/q.gguf" --base "$M" -f "$X" -c 128 --chunks 3
run "$QK" kld -q -t 3 -m "$T/q.gguf" -f "$X" -c 128 --chunks 2 --kld-base-out "$T/b.qkb" --kld-base-format qk
run "$QK" kld -q -t 4 -m "$M" --kld-base "$T/b.qkb" --chunk-range 0:1 --partial-out "$T/p1.qkpart"
run "$QK" kld -q -t 4 -m "$M" --kld-base "$T/b.qkb" --chunk-range 1: --partial-out "$T/p2.qkpart"
run "$QK" kld --merge "$T/p1.qkpart" "$T/p2.qkpart"
run "$QK" kld -q -t 2 -m "$M" -f "$X" -c 256 --chunks 8 --kld-base-out "$T/f.qkb" --kld-base-format qk
run "$QK" kld -q -t 4 -m "$T/q.gguf" --kld-base "$T/f.qkb"
run "$QK" bench model -q -t 4 -m "$M" -p 16 -n 4 -r 1 --no-warmup
exit $fail
