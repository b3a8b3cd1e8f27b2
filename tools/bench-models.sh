#!/bin/sh
# bench-models.sh - the models of issue #22's speed table, for `make bench`'s BENCH_MODELS.
#
#   tools/bench-models.sh DIR [QK_BINARY]     (default build/qk)
#
# Writes into DIR (made if missing; files already there are kept):
#   bench250m-f16.gguf           ../shared/tools/mkgguf.py --preset bench250m --seed 7 (random
#                                weights; needs python3 with numpy: Debian python3-numpy)
#   bench250m-{BF16,Q8_0,Q4_0,Q4_K_M,Q5_K_M,Q6_K,IQ4_XS}.gguf   qk-quant from it (byte-identical
#                                to llama-quantize's files, ../shared/reference/synthetic)
#   smol135m-f16.gguf, smol135m-Q4_K_M.gguf    the KL-divergence runs' models (preset smol135m,
#                                seed 1)
# and prints the BENCH_MODELS line for the bench250m set.  Nothing here is a test.
set -eu
DIR=${1:?usage: tools/bench-models.sh DIR [QK_BINARY]}
QK=${2:-build/qk}
MK=${MKGGUF:-../shared/tools/mkgguf.py}
PY=${PYTHON:-python3}
mkdir -p "$DIR"
mk() { # mk OUT PRESET SEED
    [ -s "$1" ] && return 0
    "$PY" "$MK" "$1.tmp" --preset "$2" --seed "$3" >/dev/null && mv "$1.tmp" "$1"
}
quant() { # quant SRC OUT PRESET
    [ -s "$2" ] && return 0
    "$QK" quant "$1" "$2.tmp" "$3" 2 >/dev/null && mv "$2.tmp" "$2"
}
mk "$DIR/bench250m-f16.gguf" bench250m 7
models="$DIR/bench250m-f16.gguf"
for p in BF16 Q8_0 Q4_0 Q4_K_M Q5_K_M Q6_K IQ4_XS; do
    quant "$DIR/bench250m-f16.gguf" "$DIR/bench250m-$p.gguf" "$p"
    models="$models $DIR/bench250m-$p.gguf"
done
mk "$DIR/smol135m-f16.gguf" smol135m 1
quant "$DIR/smol135m-f16.gguf" "$DIR/smol135m-Q4_K_M.gguf" Q4_K_M
echo "BENCH_MODELS=\"$models\""
