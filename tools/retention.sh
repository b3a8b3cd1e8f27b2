#!/bin/sh
# retention.sh - docs/retention.md (make retention): the scorecard's schemes
# written by qk-quant --to from a float Hugging Face directory, calibrated
# where the scheme is, each scored by qk-kld against that float base, next to
# the claims the numerics scorecard makes about them (issue 19).
#
#   tools/retention.sh [BUILD [OUT.md]]      (defaults: build, docs/retention.md)
#
# Models: stories4M (goldens/models/stories4M/hf-f32, trained) and smol135m
# (SmolLM2-135M's shape with random weights, ../shared/tools/mkgguf.py
# --preset smol135m --seed 1, as an HF directory by tools/gguf2hf.py; needs
# a Python with numpy and gguf: PYTHON, default /work/venv/bin/python).
# Calibration text: tinystories-valid.txt from 128 KiB on (64 x 256 tokens;
# RET_CALIB_CHUNKS); evaluation: its first 64 KiB, disjoint (-c 256,
# RET_CHUNKS chunks).  A scheme qk-quant refuses is listed with its message,
# not left out silently.
set -eu
B=${1:-build}
OUT=${2:-docs/retention.md}
QK=$B/qk
PY=${PYTHON:-/work/venv/bin/python}
[ -x "$PY" ] || PY=python3
TV=../shared/models/text/tinystories-valid.txt
W=${RET_DIR:-$B/retention}
CHUNKS=${RET_CHUNKS:-16}
CCH=${RET_CALIB_CHUNKS:-64}
mkdir -p "$W"
head -c 65536 "$TV" >"$W/eval.txt"
tail -c +131073 "$TV" | head -c 400000 >"$W/calib.txt"
CAL="--calib $W/calib.txt --calib-chunks $CCH -c 256"
# smol135m (30 layers of 576 x 1536, 49152-token vocabulary): fewer chunks (RET_SMOL_CHUNKS, RET_SMOL_CALIB_CHUNKS)
SCHUNKS=${RET_SMOL_CHUNKS:-4}
SCCH=${RET_SMOL_CALIB_CHUNKS:-8}
SCAL="--calib $W/calib.txt --calib-chunks $SCCH -c 256"

# the models: NAME HF_DIR TOKENIZER
S4=goldens/models/stories4M
if [ ! -f "$W/smol135m/config.json" ] && echo " ${RET_MODELS:-smol135m} " | grep -q " smol135m "; then
    "$PY" ../shared/tools/mkgguf.py "$W/smol135m-f32.gguf" --preset smol135m --dtype f32 --seed 1 >/dev/null &&
        "$PY" tools/gguf2hf.py "$W/smol135m-f32.gguf" "$W/smol135m" >/dev/null ||
        echo "retention: smol135m not made (needs numpy and gguf in $PY)" >&2
fi

# the rows: LABEL|qk-quant options (SRC OUT_DIR follow; CAL: the model's calibration options)
ROWS="FP8 W8A8 (dynamic)|--to ct-fp8
FP8 W8A8 (static input scale)|--to ct-fp8-static CAL
INT8 W8A8 (RTN)|--to ct-w8a8
INT8 W8A8 SmoothQuant|--to ct-w8a8 --method smoothquant CAL
INT8 W8A8 SmoothQuant + GPTQ|--to ct-w8a8 --method smoothquant+gptq CAL
INT8 W8A8 + rotation|--to ct-w8a8 --rotate hadamard
W4A16 RTN|--to ct-w4a16
W4A16 GPTQ|--to ct-w4a16 --method gptq CAL
W4A16 AWQ|--to ct-w4a16 --method awq CAL
W4A16 RTN + rotation|--to ct-w4a16 --rotate hadamard
W4A16 GPTQ + rotation|--to ct-w4a16 --method gptq --rotate hadamard CAL
NVFP4A16|--to ct-nvfp4
NVFP4 W4A4|--to ct-nvfp4a4 CAL
NVFP4 W4A4 + rotation|--to ct-nvfp4a4 --rotate hadamard CAL
MXFP4A16|--to ct-mxfp4
W4A8 (INT4 weights, INT8 activations)|--to ct-w4a8
W4A8 + rotation|--to ct-w4a8 --rotate hadamard
rotation alone (F32)|--to f32 --rotate hadamard"

list=""
for mdl in ${RET_MODELS:-stories4M smol135m}; do
    case $mdl in
    stories4M) src=$S4/hf-f32 tok=$S4/stories4M-f32.gguf ch=$CHUNKS cal=$CAL ;;
    smol135m) src=$W/smol135m tok=$W/smol135m-f32.gguf ch=$SCHUNKS cal=$SCAL ;;
    esac
    [ -f "$src/config.json" ] || continue
    echo "$ROWS" | while IFS='|' read -r label opts; do
        id=$(printf '%s' "$mdl-$label" | tr -c 'A-Za-z0-9' '_')
        d=$W/$id
        if [ ! -f "$d/config.json" ]; then
            case $opts in *CAL) opts="${opts%CAL} $cal --tokenizer $tok" ;; esac
            # smol135m's 576 input features are no multiple of the default group of 128
            case $mdl:$opts in smol135m:*ct-w4a16*|smol135m:*ct-w4a8*) opts="$opts --group 64" ;; esac
            # shellcheck disable=SC2086
            if ! "$QK" quant -q $opts -t 2 "$src" "$d" 2>"$W/$id.err"; then
                printf '%s\t%s\t-\t%s\n' "$mdl" "$label" "$(head -n 1 "$W/$id.err")" >>"$W/rows.tsv.new"
                continue
            fi
        fi
        "$QK" kld -m "$d" --base "$src" --tokenizer "$tok" -f "$W/eval.txt" -c 256 --chunks "$ch" \
            --json -q -t 2 >"$W/$id.json" 2>"$W/$id.err" ||
            { printf '%s\t%s\t-\tqk-kld: %s\n' "$mdl" "$label" "$(head -n 1 "$W/$id.err")" >>"$W/rows.tsv.new"; continue; }
        printf '%s\t%s\t%s\t-\n' "$mdl" "$label" "$W/$id.json" >>"$W/rows.tsv.new"
    done
    # each rotated checkpoint also against the rotated float model (--rotate hadamard --to f32), which
    # tells the rotation's effect on the quantization error from its own change of the model
    rf=$W/$(printf '%s' "$mdl-rotation alone (F32)" | tr -c 'A-Za-z0-9' '_')
    [ -f "$rf/config.json" ] || continue
    echo "$ROWS" | while IFS='|' read -r label opts; do
        case $label in *"+ rotation") ;; *) continue ;; esac
        id=$(printf '%s' "$mdl-$label" | tr -c 'A-Za-z0-9' '_')
        [ -f "$W/$id/config.json" ] || continue
        "$QK" kld -m "$W/$id" --base "$rf" --tokenizer "$tok" -f "$W/eval.txt" -c 256 --chunks "$ch" \
            --json -q -t 2 >"$W/$id.vsrot.json" 2>"$W/$id.err" &&
            printf '%s\t%s (vs rotated F32)\t%s\t-\n' "$mdl" "$label" "$W/$id.vsrot.json" >>"$W/rows.tsv.new"
    done
done
mv "$W/rows.tsv.new" "$W/rows.tsv"
"$PY" tools/retention_md.py "$W/rows.tsv" "$CHUNKS" "$CCH" "$SCHUNKS" "$SCCH" >"$OUT.tmp" && mv "$OUT.tmp" "$OUT"
echo "wrote $OUT"
