#!/bin/sh
# bench-convert.sh - qk-convert against llama.cpp's convert_hf_to_gguf.py on a 245M-parameter
# Llama (BF16 safetensors, GPT-2 tokenizer) made by build/tools/conv-synth from
# goldens/convert/bench250m (`make bench-convert`; a benchmark, not a test).
#
#   tools/bench-convert.sh [OUTTYPE ...]        (default: bf16 q8_0)
#
# LLAMA_CPP names a llama.cpp checkout (default ../ref/llama.cpp) and PYTHON the interpreter
# with its converter's requirements (default python3).  Each tool runs once per outtype, one
# after the other, on a warm page cache, under /usr/bin/time; the outputs must be identical.
# Prints wall seconds and peak RSS of both, the speed-up (target >= 5x) and qk's RSS against
# its bound (5% of the model's bytes + 64 MiB).
set -u
QK=${QK_BIN:-build/qk}
SYNTH=${SYNTH:-build/tools/conv-synth}
LLAMA_CPP=${LLAMA_CPP:-../ref/llama.cpp}
PY=${PYTHON:-python3}
TYPES=${*:-bf16 q8_0}
[ -x "$SYNTH" ] || { echo "bench-convert: build $SYNTH first (make build/tools/conv-synth)" >&2; exit 2; }
W=$(mktemp -d "${TMPDIR:-/tmp}/bench-convert.XXXXXX")
trap 'rm -rf "$W"' EXIT
M=$W/bench250m
"$SYNTH" goldens/convert/bench250m "$M" 7 || exit 2
cat "$M"/*.safetensors >/dev/null # warm the page cache
size=$(cat "$M"/model.safetensors | wc -c)
bound=$((size / 20 + 64 * 1024 * 1024))
printf '| outtype | qk-convert s | converter s | speed-up | qk RSS MiB | converter RSS MiB | qk bound MiB | same bytes |\n'
printf '|---|---|---|---|---|---|---|---|\n'
for t in $TYPES; do
    /usr/bin/time -f '%e %M' -o "$W/qk.time" "$QK" convert -q --outtype "$t" --outfile "$W/qk.gguf" "$M" >/dev/null || exit 1
    if [ -f "$LLAMA_CPP/convert_hf_to_gguf.py" ]; then
        /usr/bin/time -f '%e %M' -o "$W/py.time" "$PY" "$LLAMA_CPP/convert_hf_to_gguf.py" --outtype "$t" \
            --outfile "$W/py.gguf" "$M" >/dev/null 2>&1 || exit 1
        same=$(cmp -s "$W/qk.gguf" "$W/py.gguf" && echo yes || echo NO)
    else
        echo "0 0" >"$W/py.time"
        same="(no converter at $LLAMA_CPP)"
    fi
    read -r qs qm <"$W/qk.time"
    read -r ps pm <"$W/py.time"
    awk -v t="$t" -v qs="$qs" -v qm="$qm" -v ps="$ps" -v pm="$pm" -v b="$bound" -v same="$same" 'BEGIN {
        printf "| %s | %.2f | %.2f | %.1fx | %.0f | %.0f | %.0f | %s |\n", t, qs, ps, (qs > 0 ? ps / qs : 0),
               qm / 1024, pm / 1024, b / 1048576, same }'
    rm -f "$W/qk.gguf" "$W/py.gguf"
done
