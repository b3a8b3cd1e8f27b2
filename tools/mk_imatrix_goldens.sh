#!/bin/sh
# Remake goldens/imatrix (see its README.md) with llama-imatrix.
# Usage: tools/mk_imatrix_goldens.sh [LLAMA_BIN_DIR]   (default /work/peers/llama.cpp/build/bin,
# llama.cpp d32676d); run from the repository root.  The files are written in goldens/imatrix,
# with paths relative to it, as they were made.
set -eu
BIN=${1:-/work/peers/llama.cpp/build/bin}
cd goldens/imatrix
T=../stories260K-eval/eval-64k.txt
L() { "$BIN/llama-imatrix" -m ../models/stories4M/stories4M-f32.gguf -t 2 "$@"; }
L -f $T -c 128 --chunks 8 -o stories4M-c128.imatrix.gguf >stories4M-c128.stdout.txt 2>/dev/null
L -f $T -c 128 --chunks 8 -b 120 -o stories4M-c128-b120.imatrix.gguf >/dev/null 2>&1
L -f $T -c 128 --chunks 8 --process-output -o stories4M-c128-output.imatrix.gguf >/dev/null 2>&1
L --in-file stories4M-c128.imatrix.gguf --output-format dat -o stories4M-c128.imatrix.dat >/dev/null 2>&1
L --in-file stories4M-c128.imatrix.dat --in-file stories4M-c128-b120.imatrix.gguf -o combined.imatrix.gguf \
    >/dev/null 2>&1
# mixture of experts (goldens/arch/qwen3moe): 16-token windows leave experts unused
M() { "$BIN/llama-imatrix" -m ../arch/qwen3moe/qwen3moe-f32.gguf -t 2 "$@"; }
M -f $T -c 16 --chunks 2 -o qwen3moe-c16.imatrix.gguf >/dev/null 2>&1
M --in-file qwen3moe-c16.imatrix.gguf --output-format dat -o qwen3moe-c16.imatrix.dat >/dev/null 2>&1
M --in-file qwen3moe-c16.imatrix.dat --in-file ../arch/qwen3moe/imatrix.gguf -o qwen3moe-combined.imatrix.gguf \
    >/dev/null 2>&1
M -f $T -c 128 --chunks 2 --in-file qwen3moe-c16.imatrix.dat -o qwen3moe-in.imatrix.gguf >/dev/null 2>&1
