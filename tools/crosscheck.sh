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
# transformers, and mlx-lm's when mlx is installed).
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
            llmcompressor datasets zstandard
    fi
    touch "$stamp"
fi
rc=0
"$VENV/bin/python" tools/crosscheck.py --build "$B" || rc=1
# quantized HF checkpoints run by qk against transformers (needs llmcompressor, transformers)
if [ "${QK_CROSSCHECK_NO_TORCH:-0}" != 1 ]; then
    "$VENV/bin/python" tools/crosscheck_hf.py --build "$B" || rc=1
    # qk's W8A8-INT8 decode against transformers' quantize_dynamic int8 on bench250m (a timing: no gate)
    if BENCH_PREPARE_ONLY=1 PYTHON="$VENV/bin/python" QK_BIN="$B/qk" sh tools/bench-hf.sh; then
        "$VENV/bin/python" tools/int8_peer.py "$B" "${BENCH_DIR:-$B/bench}/bench250m-hf" \
            "${BENCH_DIR:-$B/bench}/bench250m-ct-w8a8" "${BENCH_THREADS:-2}" 32 || rc=1
    fi
fi
exit $rc
