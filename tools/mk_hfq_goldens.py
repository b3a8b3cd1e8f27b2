#!/usr/bin/env python3
"""mk_hfq_goldens.py - the quantized checkpoints and reference logits of
goldens/hfq/ (read by tests/cli_hfq.sh in make check, without Python).

The model is stories4M cut to its first layer (stories4M-L1: the embeddings,
layer 0 and the final norm of goldens/models/stories4M/hf-f32, config.json
num_hidden_layers 1), small enough that a dozen checkpoints fit in a few MB.
Each checkpoint is written by llm-compressor's oneshot (the schemes of
tools/crosscheck_hf.py), its float tensors (embeddings, norms) stored once in
goldens/hfq/common.safetensors, which every directory's index names through
a symlink.  The reference logits are transformers with
CompressedTensorsConfig(run_compressed=False) (INT8 activations: vLLM's
rule, see crosscheck_hf.py) on one window of TinyStories text
(goldens/hfq/tokens.txt), written as QKLOGITS files (lib/eval/logits_file.h).
Each scheme's gate goes to goldens/hfq/gates.txt: weight-only 1e-6; with
quantized activations the larger of 1e-5 and 4 x the reference's own noise
floor (its KLD against itself with the embeddings scaled by 1 +- 2^-23).

    mk_hfq_goldens.py BUILD [SCHEME...]   (run from the repository root, /work/venv's python;
                                           SCHEMEs: rebuild only those, keep the others)
"""
import hashlib
import json
import os
import shutil
import struct
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crosscheck_hf as X  # noqa: E402

OUT = os.path.join(X.ROOT, "goldens/hfq")
SCHEMES = ["FP8_DYNAMIC", "FP8", "FP8_BLOCK", "FP8_DYNAMIC_KV8", "W8A8", "W8A16", "W4A16", "W4A16_ASYM", "W4A8",
           "W4AFP8", "NVFP4A16", "NVFP4", "MXFP4A16", "MXFP8", "GPTQ_W4A16_GIDX", "FP8_WONLY", "W8A8_ASYM",
           "W4A16_G32", "W4A16_ASYM_G64", "AWQ_W8A16"]
# ModelOpt's own export on CPU (crosscheck_hf.py make_modelopt): NVFP4, and MIXED_PRECISION with layer 0's
# o_proj left in float (the cut model has no layer 1)
MO = [("MO_NVFP4", "NVFP4_DEFAULT_CFG"), ("MO_MIXED", "mixed")]
NTOK = 64


def write_qklogits(path, logits, tokens):
    import zstandard
    rows = np.ascontiguousarray(logits, np.float32)
    frame = zstandard.ZstdCompressor(level=19, write_checksum=True, write_content_size=True).compress(rows.tobytes())
    with open(path, "wb") as f:
        f.write(b"QKLOGITS" + struct.pack("<IIIIQ", 1, 0, rows.shape[1], rows.shape[0], len(frame)))
        f.write(frame)
        f.write(np.asarray(tokens, np.int32).tobytes())


def cut_model(dst):
    from safetensors.numpy import load_file, save_file
    t = load_file(os.path.join(X.S4M, "model.safetensors"))
    keep = {k: v for k, v in t.items() if not k.startswith("model.layers.") or k.startswith("model.layers.0.")}
    os.makedirs(dst)
    save_file(keep, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    cfg = json.load(open(os.path.join(X.S4M, "config.json")))
    cfg["num_hidden_layers"] = 1
    json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=2)


def digest(v):
    import torch
    return hashlib.sha256(v.contiguous().view(torch.uint8).numpy().tobytes()).digest()


def split(src, name, common):
    """src's tensors into OUT/name (its own) and the common float ones; a
    producer that changes float tensors (AWQ folds its scales into the norms)
    keeps all of them in one file of its own."""
    from safetensors.torch import load_file, save_file
    t = load_file(os.path.join(src, "model.safetensors"))
    own = {k: v for k, v in t.items() if k not in common}
    changed = [k for k in common if k in t and digest(t[k]) != common[k]]
    assert bool(changed) == name.startswith("AWQ"), f"{name}: float tensors changed: {changed}"
    d = os.path.join(OUT, name)
    os.makedirs(d)
    if changed:
        save_file(t, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        os.chmod(os.path.join(d, "model.safetensors"), 0o644)
        cfg = json.load(open(os.path.join(src, "config.json")))
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1, sort_keys=True)
        return d
    save_file(own, os.path.join(d, "model-00001-of-00002.safetensors"), metadata={"format": "pt"})
    os.chmod(os.path.join(d, "model-00001-of-00002.safetensors"), 0o644)
    os.symlink("../common.safetensors", os.path.join(d, "model-00002-of-00002.safetensors"))
    wm = {k: "model-00001-of-00002.safetensors" for k in own}
    wm.update({k: "model-00002-of-00002.safetensors" for k in common if k in t})
    json.dump({"metadata": {}, "weight_map": dict(sorted(wm.items()))},
              open(os.path.join(d, "model.safetensors.index.json"), "w"), indent=1)
    cfg = json.load(open(os.path.join(src, "config.json")))
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1, sort_keys=True)
    if os.path.isfile(os.path.join(src, "hf_quant_config.json")):  # ModelOpt's
        shutil.copy(os.path.join(src, "hf_quant_config.json"), os.path.join(d, "hf_quant_config.json"))
    return d


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    only = set(sys.argv[2:])
    qk = os.path.abspath(os.path.join(build, "qk"))
    from safetensors.torch import load_file, save_file
    ids = X.tokens(qk)
    chunk = [1] + ids[:NTOK - 1]
    tmp = tempfile.mkdtemp(prefix="qk-hfq-")
    try:
        base = os.path.join(tmp, "L1")
        cut_model(base)
        X.S4M = base  # the producers read it
        os.makedirs(OUT, exist_ok=True)
        for f in os.listdir(OUT):  # all but the README (the provenance), or only the schemes named
            if f != "README.md" and (not only or f in only):
                p = os.path.join(OUT, f)
                shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)
        bt = load_file(os.path.join(base, "model.safetensors"))
        common = {k: v for k, v in bt.items() if v.ndim == 1 or "embed_tokens" in k}
        digests = {k: digest(v) for k, v in common.items()}
        if only:  # the kept checkpoints name the committed common tensors and window: they must be these
            old = load_file(os.path.join(OUT, "common.safetensors"))
            assert {k: digest(v) for k, v in old.items()} == digests, "common.safetensors is not this base's"
            assert open(os.path.join(OUT, "tokens.txt")).read().split() == [str(i) for i in chunk]
        else:
            save_file(common, os.path.join(OUT, "common.safetensors"), metadata={"format": "pt"})
            with open(os.path.join(OUT, "tokens.txt"), "w") as f:
                f.write(" ".join(map(str, chunk)) + "\n")
        gates = []
        for name, preset, how, calib, act in X.CT_SCHEMES:
            if name not in SCHEMES or (only and name not in only):
                continue
            src = os.path.join(tmp, name)
            X.make_ct(name, preset, how, calib, src, ids)
            d = split(src, name, digests)
            int8 = name in ("W8A8", "W8A8_ASYM", "W4A8")
            m = X.gidx_model(d) if name.endswith("_GIDX") else X.ct_model(d, vllm_int8=int8)
            ref = X.torch_logits(m, [chunk])[0]
            write_qklogits(os.path.join(d, "reference.logits"), ref, chunk)
            if act:
                fl = [X.compare([ref], X.torch_logits(m, [chunk], 1.0 + s * 2.0**-23)) for s in (1, -1)]
                gk, gt = max(1e-5, 4 * max(f[0] for f in fl)), min(99.5, min(f[1] for f in fl) - 1.0)
            else:
                gk, gt = 1e-6, 99.5
            gates.append(f"{name} {gk:.3g} {gt:.2f}")
            print(name, "gate", gates[-1], flush=True)
        for name, cfg in MO:
            if only and name not in only:
                continue
            src = os.path.join(tmp, name)
            X.make_modelopt(X.mixed_cfg("*layers.0.self_attn.o_proj*") if cfg == "mixed" else cfg, src, ids)
            d = split(src, name, digests)
            m = X.mo_model(d)
            ref = X.torch_logits(m, [chunk])[0]
            write_qklogits(os.path.join(d, "reference.logits"), ref, chunk)
            # the floor as crosscheck_hf.py's ModelOpt rows: embeddings scaled and input_scale moved by 1 ulp
            fl = [X.compare([ref], X.torch_logits(m, [chunk], 1.0 + s * 2.0**-23)) for s in (1, -1)]
            fl += [X.compare([ref], X.torch_logits(X.mo_model(d, 1.0 + s * 2.0**-23), [chunk])) for s in (1, -1)]
            gk, gt = max(1e-5, 4 * max(f[0] for f in fl)), min(99.5, min(f[1] for f in fl) - 1.0)
            gates.append(f"{name} {gk:.3g} {gt:.2f}")
            print(name, "gate", gates[-1], "floors", fl, flush=True)
        # the same codes as AutoGPTQ v1 and AutoAWQ GEMM tensors, against their source's reference
        for name, src, kind in (("GPTQ_V1", "W4A16", "gptq"), ("AWQ_GEMM", "W4A16_ASYM", "awq")) if not only else ():
            rd = os.path.join(tmp, name)
            X.repack(os.path.join(tmp, src), rd, kind)
            d = split(rd, name, digests)
            shutil.copy(os.path.join(OUT, src, "reference.logits"), os.path.join(d, "reference.logits"))
            gates.append(f"{name} 1e-06 99.50")
        try:
            if only:
                raise ImportError
            import mlx_lm  # noqa: F401
            rd = os.path.join(tmp, "MLX_Q4")
            X.make_mlx(4, rd)
            ref = X.mlx_logits(rd, [chunk])[0]
            d = os.path.join(OUT, "MLX_Q4")
            shutil.copytree(rd, d)  # MLX keeps its own float tensors (bf16/f32 as mlx-lm writes them)
            write_qklogits(os.path.join(d, "reference.logits"), ref, chunk)
            gates.append("MLX_Q4 1e-06 99.50")
        except ImportError:
            print("note: mlx-lm not installed or not asked for: no MLX golden")
        if only:  # the kept schemes' lines, then these
            new = {g.split()[0] for g in gates}
            kept = [ln.strip() for ln in open(os.path.join(OUT, "gates.txt")) if ln.strip() and not ln.startswith("#")]
            gates = [g for g in kept if g.split()[0] not in new] + gates
        with open(os.path.join(OUT, "gates.txt"), "w") as f:
            f.write("# scheme max-kld-mean min-same-top (tools/mk_hfq_goldens.py)\n" + "\n".join(gates) + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
