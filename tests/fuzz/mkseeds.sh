#!/bin/sh
# mkseeds.sh: regenerate the committed seed corpora of tests/fuzz/ that are generated (gguf and
# safetensors seeds are hand-made, in tests/bad/ style).  Needs build/qk (make) and the
# virtualenv of make crosscheck (numpy, safetensors, gguf); run from the repository root.
set -e
V=${VENV:-/work/venv}
C=tests/fuzz/corpus
for d in hfconfig tokenizer imatrix tensor_type kldbase logits qkpart tasks convert spm; do rm -rf "$C/$d"; mkdir -p "$C/$d"; done
cc -std=c17 -D_GNU_SOURCE -O1 -I. -o build/mkseeds tests/fuzz/mkseeds.c build/libqk.a -lzstd -lm -pthread
build/mkseeds "$C"
"$V/bin/python" tests/fuzz/mkseeds.py build/qk "$C"
du -sh "$C"/*
