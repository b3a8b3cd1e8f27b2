#!/bin/sh
# crosscheck.sh - check qk's datacenter formats against the reference Python
# packages (make crosscheck; not part of make check: it needs PyPI).
#
#   tools/crosscheck.sh [BUILD]      (BUILD defaults to build)
#
# Creates BUILD/crosscheck-venv (or uses CROSSCHECK_VENV, e.g. /work/venv)
# with ml_dtypes, safetensors, numpy and, unless QK_CROSSCHECK_NO_TORCH=1,
# torch + compressed-tensors + transformers + llmcompressor (PyPI's torch for
# Linux x86-64 is the CUDA build: a few GB to download once), then runs
# tools/crosscheck.py (the formats against ml_dtypes and compressed-tensors,
# through BUILD/tools/ckpt-tool, which make crosscheck builds first) and
# tools/crosscheck_hf.py (qk-run on llm-compressor's checkpoints against
# transformers, and mlx-lm's when mlx is installed).  With LLAMA_CPP set, also
# the qk-convert and pre-tokenizer goldens (see below).
set -eu
B=${1:-build}
VENV=${CROSSCHECK_VENV:-$B/crosscheck-venv}
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
stamp=$VENV/.qk-installed
if [ ! -f "$stamp" ]; then
    "$VENV/bin/pip" install -q --disable-pip-version-check numpy ml_dtypes safetensors
    if [ "${QK_CROSSCHECK_NO_TORCH:-0}" != 1 ]; then
        "$VENV/bin/pip" install -q --disable-pip-version-check torch compressed-tensors transformers \
            llmcompressor datasets zstandard tokenizers sentencepiece
        # the other producers and references (crosscheck_hf.py and crosscheck_static.py skip their rows
        # without them): ModelOpt, bitsandbytes, MLX (its CPU build on Linux)
        "$VENV/bin/pip" install -q --disable-pip-version-check nvidia-modelopt bitsandbytes "mlx[cpu]" mlx-lm ||
            echo "crosscheck: nvidia-modelopt, bitsandbytes or mlx-lm did not install: their rows are skipped"
    fi
    touch "$stamp"
fi
"$VENV/bin/python" tools/crosscheck.py --build "$B" || status=1
# quantized HF checkpoints run by qk against transformers (needs llmcompressor, transformers)
if [ "${QK_CROSSCHECK_NO_TORCH:-0}" != 1 ]; then
    "$VENV/bin/python" tools/crosscheck_hf.py --build "$B" || status=1
    # qk-quant --to ct-w4a16 --method gptq against llm-compressor's GPTQModifier (issue 19; minutes)
    "$VENV/bin/python" tools/crosscheck_calib.py "$B/qk" "$B/crosscheck-calib" || status=1
    # qk-quant --to ct-w8a8 --method smoothquant|smoothquant+gptq against SmoothQuantModifier (+ GPTQModifier)
    "$VENV/bin/python" tools/crosscheck_sq.py "$B/qk" "$B/crosscheck-sq" || status=1
    # qk-quant --to ct-fp8-static / ct-nvfp4a4 --calib against QuantizationModifier(scheme=FP8 / NVFP4)
    "$VENV/bin/python" tools/crosscheck_static.py "$B/qk" "$B/crosscheck-static" || status=1
    # qk's W8A8-INT8 decode against transformers' quantize_dynamic int8 on bench250m (a timing: no gate)
    if BENCH_PREPARE_ONLY=1 PYTHON="$VENV/bin/python" QK_BIN="$B/qk" sh tools/bench-hf.sh; then
        "$VENV/bin/python" tools/int8_peer.py "$B" "${BENCH_DIR:-$B/bench}/bench250m-hf" \
            "${BENCH_DIR:-$B/bench}/bench250m-ct-w8a8" "${BENCH_THREADS:-2}" 32 || status=1
    fi
fi
LLAMA_CPP=${LLAMA_CPP:-/work/peers/llama.cpp}
# the model families (tools/archmodels.py, goldens/arch/README.md): needs
# transformers and llama.cpp (LLAMA_CPP, a built checkout of the commit in
# ../shared/README.md); ARCH_PYTHON: a Python that has transformers
AP=${ARCH_PYTHON:-$VENV/bin/python}
if [ -x "$LLAMA_CPP/build/bin/llama-perplexity" ] && "$AP" -c 'import transformers, tokenizers' 2>/dev/null; then
    "$AP" tools/archmodels.py make "$B/arch" --llama "$LLAMA_CPP" &&
        "$AP" tools/archmodels.py check "$B/arch" --qk "$B/qk" &&
        "$AP" tools/archmodels.py check goldens/arch --qk "$B/qk" &&
        "$AP" tools/archmodels.py quant "$B/arch" --llama "$LLAMA_CPP" --qk "$(pwd)/$B/qk" || status=1
    cmp -s "$B/arch/SUMS" goldens/arch/SUMS && echo "arch: regenerated models identical to goldens/arch" ||
        echo "arch: regenerated models differ from goldens/arch (other torch/transformers versions?)"
else
    echo "arch: skipped (needs llama.cpp at LLAMA_CPP=$LLAMA_CPP and transformers in $AP)"
fi
# qk-convert and the pre-tokenizers against llama.cpp (a checkout at the reference
# commit with build/bin/llama-tokenize): regenerate their goldens and fail when they change.
if [ -x "$LLAMA_CPP/build/bin/llama-tokenize" ]; then
    if [ ! -f "$VENV/.qk-convert-installed" ]; then
        "$VENV/bin/pip" install -q --disable-pip-version-check torch transformers tokenizers sentencepiece protobuf
        touch "$VENV/.qk-convert-installed"
    fi
    { PYTHON="$VENV/bin/python" "$VENV/bin/python" tools/gen_convert_goldens.py "$B" &&
        "$VENV/bin/python" tools/gen_pretok_ids.py "$LLAMA_CPP/build/bin/llama-tokenize" goldens/vocab/pretok-ids.txt &&
        "$VENV/bin/python" tools/gen_chkhsh_table.py "$LLAMA_CPP" >lib/convert/conv_prehash.c &&
        git diff --exit-code -- goldens/convert goldens/vocab/pretok-ids.txt lib/convert/conv_prehash.c; } || status=1
else
    echo "convert: skipped (needs llama.cpp with llama-tokenize at LLAMA_CPP=$LLAMA_CPP)"
fi
exit ${status:-0}
