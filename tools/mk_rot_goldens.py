#!/usr/bin/env python3
"""mk_rot_goldens.py - the reference logits of goldens/rot/ (read by
tests/cli_rotate.sh in make check, without Python).

llm-compressor's SpinQuantModifier (rotations R1, R2, R4, transform_type
"hadamard", R4 on blocks of 256: tools/crosscheck_hf.py make_ct "spin") on
goldens/models/stories4M/hf-f32, alone (SPIN_F32) and before W4A16 RTN
(SPIN_W4A16); each run by transformers + compressed-tensors (the online R4
attached by apply_transform_config, crosscheck_hf.py ct_model / plain_model)
on the window of goldens/hfq/tokens.txt, written as QKLOGITS files.  The test
makes qk's own rotated checkpoints with qk-quant --to ... --rotate hadamard
(tensor for tensor llm-compressor's: make crosscheck's QK_SPIN_* rows) and
runs them against these logits.

    mk_rot_goldens.py BUILD        (run from the repository root, /work/venv's python)
"""
import os
import sys
import tempfile
import shutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crosscheck_hf as X  # noqa: E402
import mk_hfq_goldens as H  # noqa: E402

OUT = os.path.join(X.ROOT, "goldens/rot")


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    qk = os.path.abspath(os.path.join(build, "qk"))
    chunk = [int(t) for t in open(os.path.join(X.ROOT, "goldens/hfq/tokens.txt")).read().split()]
    ids = X.tokens(qk)
    tmp = tempfile.mkdtemp(prefix="qk-rot-")
    try:
        os.makedirs(OUT, exist_ok=True)
        for name, preset, how, calib, act in X.CT_SCHEMES:
            if how != "spin":
                continue
            d = os.path.join(tmp, name)
            X.make_ct(name, preset, how, calib, d, ids)
            ref = X.torch_logits(X.ct_model(d), [chunk])[0]
            H.write_qklogits(os.path.join(OUT, name + ".logits"), ref, chunk)
            print(name, "written", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
