#!/usr/bin/env python3
"""crosscheck.py - qk's datacenter formats against the reference Python
packages (run by tools/crosscheck.sh, i.e. make crosscheck).

(a) element decoders: every code of fp8_e4m3, fp8_e5m2, e8m0, fp4_e2m1,
    fp6_e2m3, fp6_e3m2 against ml_dtypes; encoders (non-saturating mode,
    round to nearest even) on 10^6 random and special float32 values.
(b) compressed-tensors' own dequantizer (entrypoints ... CompressedTensorsDequantizer,
    which reads config.json's quantization_config) on the directories
    qk_ckpt_quantize writes for ct-fp8, ct-fp8-block, ct-w8a8, ct-w4a16
    (sym, asym), ct-nvfp4, ct-mxfp4: every tensor equal to qk's dequantization.
(c) checkpoints compressed-tensors writes itself (its presets, its
    calculate_qparams and compressors, its QuantizationConfig): qk's
    dequantization equal to compressed-tensors'.

Prints one line per check and "N passed, N failed"; exit status 1 on any failure.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import ml_dtypes

RESULTS = []


def check(name, ok, detail=""):
    RESULTS.append(ok)
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)


def tool(build, *args, **kw):
    return subprocess.run([os.path.join(build, "tools", "ckpt-tool"), *args], check=True, **kw)


# ---- (a) elements -------------------------------------------------------------

ML = {
    "fp8_e4m3": ml_dtypes.float8_e4m3fn,
    "fp8_e5m2": ml_dtypes.float8_e5m2,
    "e8m0": ml_dtypes.float8_e8m0fnu,
    "fp4_e2m1": ml_dtypes.float4_e2m1fn,
    "fp6_e2m3": ml_dtypes.float6_e2m3fn,
    "fp6_e3m2": ml_dtypes.float6_e3m2fn,
}


def same_f32(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))


def elements(build):
    out = tool(build, "--elements", capture_output=True, text=True).stdout.split("\n")
    table = {}
    for line in out:
        if line:
            n, c, h = line.split()
            table.setdefault(n, []).append(int(h, 16))
    for name, dt in ML.items():
        ours = np.array(table[name], np.uint32).view(np.float32)
        codes = np.arange(len(ours), dtype=np.uint8)
        ref = codes.view(dt).astype(np.float32)
        bad = np.flatnonzero(~same_f32(ours, ref))
        check(f"(a) decode {name}: {len(ours)} codes vs ml_dtypes.{dt.__name__}", bad.size == 0,
              "" if bad.size == 0 else f"first mismatch code {bad[0]}: qk {ours[bad[0]]} ml_dtypes {ref[bad[0]]}")
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2**32, size=1_000_000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32).copy()
    x[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 448.0, 464.0, 57344.0]
    small = rng.standard_normal(200_000).astype(np.float32) * np.float32(4.0)
    x = np.concatenate([x, small, small * np.float32(1e-3), small * np.float32(100)])
    for name, dt in ML.items():
        y = x
        if name in ("fp4_e2m1", "fp6_e2m3", "fp6_e3m2"):  # no Inf/NaN codes: in-range finite values only
            y = x[np.isfinite(x) & (np.abs(x) <= float(ml_dtypes.finfo(dt).max))]
        if name == "e8m0":  # positive normal range (qk maps <= 0 to NaN, ml_dtypes too)
            y = x[np.isfinite(x) & (x > 0)]
        ours = np.frombuffer(tool(build, "--encode", name, input=y.tobytes(), capture_output=True).stdout, np.uint8)
        with np.errstate(invalid="ignore", over="ignore"):
            ref = y.astype(dt).view(np.uint8)
        if name in ("fp4_e2m1",):
            ref = ref & 0x0F
        elif name.startswith("fp6"):
            ref = ref & 0x3F
        # NaN codes: any NaN encoding is a NaN
        dec_o = ours.view(np.uint8).astype(np.uint8)
        diff = dec_o != ref
        if diff.any():
            d = np.array(table[name], np.uint32).view(np.float32)
            both_nan = np.isnan(d[dec_o]) & np.isnan(ref.view(dt).astype(np.float32)) if name in ("fp8_e4m3", "fp8_e5m2", "e8m0") else np.zeros_like(diff)
            diff &= ~both_nan
        if name == "e8m0":  # float32 subnormals below 2^-127: ml_dtypes rounds up, qk to nearest
            sub = diff & (y < np.float32(2.0**-126))
            if sub.any():
                print(f"note (a) encode e8m0: {int(sub.sum())} float32 subnormal inputs in (0, 2^-126) differ: "
                      f"ml_dtypes gives code 1 (2^-126), qk the nearer power 2^-127 (code 0); "
                      f"not counted", flush=True)
            diff &= ~sub
        bad = np.flatnonzero(diff)
        check(f"(a) encode {name}: {len(y)} values vs ml_dtypes astype (round to nearest even)", bad.size == 0,
              "" if bad.size == 0 else f"{bad.size} differ, first x={y[bad[0]]!r}: qk {ours[bad[0]]} ml_dtypes {ref[bad[0]]}")


# ---- helpers on directories -------------------------------------------------------


def load_dir(d):
    from safetensors.torch import load_file
    t = {}
    for f in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
        t.update(load_file(f))
    return t


def ct_dequant(d):
    import torch
    from compressed_tensors.entrypoints.convert.converters.ct_dequantizer import CompressedTensorsDequantizer
    # The model-free reader takes every non-norm "*.weight" for a Linear;
    # embeddings (not Linear, so never in llm-compressor's ignore list) are
    # passed as extra ignores, which its constructor provides for.
    conv = CompressedTensorsDequantizer(d, ignore=["re:.*embed_tokens$"], dtype=torch.float32)
    return conv.validate(load_dir(d))


def compare(label, ours, theirs):
    import torch
    names = sorted(set(ours) | set(theirs))
    missing = [n for n in names if n not in ours or n not in theirs]
    if missing:
        check(label, False, f"tensor sets differ: {missing[:4]}")
        return
    exact, rounded, bad = 0, 0, []
    for n in names:
        a, b = ours[n], theirs[n]
        if a.shape != b.shape:
            bad.append(f"{n} shape {tuple(a.shape)} vs {tuple(b.shape)}")
            continue
        a32, b32 = a.to(torch.float32), b.to(torch.float32)
        if torch.equal(a32, b32):
            exact += 1
        elif torch.equal(a32.to(torch.bfloat16).to(torch.float32), b32):
            rounded += 1  # their decompressor computes in bfloat16
        else:
            bad.append(f"{n} max |diff| {float((a32 - b32).abs().max()):.3g}")
    detail = f"{exact} tensors bit-equal" + (f", {rounded} equal after rounding qk's to bf16 (CT computes in bf16)" if rounded else "")
    check(label, not bad, detail if not bad else "; ".join(bad[:3]))


# ---- (b) ct's dequantizer on qk's output ---------------------------------------------


def ours_f32(build, d, tmp, tag):
    out = os.path.join(tmp, tag + "-f32")
    tool(build, "--to", "f32", d, out)
    return load_dir(out)


def read_ours(build, src_dirs, tmp):
    cases = [
        ("ct-fp8", [], "S260"), ("ct-fp8-block", [], "S4M"), ("ct-w8a8", [], "S260"),
        ("ct-w4a16", [], "S4M"), ("ct-w4a16", ["--asym"], "S4M"), ("ct-w4a16", ["--group", "32", "--ignore", "down_proj"], "S260"),
        ("ct-nvfp4", [], "S4M"), ("ct-mxfp4", [], "S4M"), ("ct-fp8", ["--shard-size", "2000000"], "S4M"),
    ]
    for scheme, opts, src in cases:
        tag = scheme + "".join(o.strip("-") for o in opts if o.startswith("--")) + src
        d = os.path.join(tmp, tag)
        tool(build, "--to", scheme, *opts, src_dirs[src], d)
        try:
            theirs = ct_dequant(d)
        except Exception as e:  # noqa: BLE001 - report whatever the reference raises
            check(f"(b) compressed-tensors reads qk {scheme} {' '.join(opts)} ({src})", False, f"{type(e).__name__}: {e}")
            continue
        compare(f"(b) compressed-tensors reads qk {scheme} {' '.join(opts)} ({src})", ours_f32(build, d, tmp, tag), theirs)


# ---- (c) qk reads what compressed-tensors writes -------------------------------------


def minmax(w, args):
    import torch
    s = args.strategy.value if hasattr(args.strategy, "value") else args.strategy
    if s == "tensor":
        return w.amin().reshape(1), w.amax().reshape(1)
    if s == "channel":
        return w.amin(1, keepdim=True), w.amax(1, keepdim=True)
    if s in ("group", "tensor_group"):
        g = w.unflatten(-1, (w.shape[1] // args.group_size, args.group_size))
        return g.amin(-1), g.amax(-1)
    if s == "block":
        br, bc = args.block_structure
        b = w.reshape(w.shape[0] // br, br, w.shape[1] // bc, bc)
        return b.amin((1, 3)), b.amax((1, 3))
    raise ValueError(s)


def write_ct(tmp, preset):
    import torch
    from safetensors.torch import save_file
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.compressors.format import infer_module_format
    from compressed_tensors.quantization import QuantizationConfig, QuantizationScheme, preset_name_to_scheme
    from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam

    scheme = preset_name_to_scheme(preset, ["Linear"])
    fmt = infer_module_format(torch.nn.Linear, scheme)
    fmt = fmt.value if hasattr(fmt, "value") else fmt
    scheme.format = fmt
    comp = BaseCompressor.get_value_from_registry(fmt)
    torch.manual_seed(0)
    tensors = {}
    shapes = {"model.layers.0.mlp.gate_proj": (256, 128), "model.layers.0.mlp.down_proj": (128, 256),
              "model.layers.0.self_attn.q_proj": (128, 128)}
    for mod, shp in shapes.items():
        w = (torch.randn(shp) * 0.05).to(torch.bfloat16)
        args = scheme.weights
        lo, hi = minmax(w.float(), args)
        gs = None
        if args.num_bits == 4 and args.type == "float" and args.group_size == 16:
            gs = generate_gparam(w.float().amin(), w.float().amax())
        scale, zp = calculate_qparams(lo, hi, args, global_scale=gs)
        sd = {"weight": w, "weight_scale": scale.to(torch.bfloat16) if scale.dtype == torch.float32 else scale,
              "weight_zero_point": zp}
        if gs is not None:
            sd["weight_global_scale"] = gs
        for k, v in comp.compress(sd, scheme).items():
            tensors[f"{mod}.{k}"] = v.contiguous()
    tensors["model.norm.weight"] = torch.ones(128, dtype=torch.bfloat16)
    d = os.path.join(tmp, "ct-" + preset)
    os.makedirs(d)
    save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    qc = QuantizationConfig(config_groups={"group_0": scheme}, format=fmt, quantization_status="compressed", ignore=["lm_head"])
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16",
           "quantization_config": {"quant_method": "compressed-tensors", **json.loads(qc.model_dump_json())}}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    return d


def read_theirs(build, tmp):
    for preset in ["FP8_DYNAMIC", "FP8", "FP8_BLOCK", "W8A8", "W8A16", "W4A16", "W4A16_ASYM", "W3A16", "W5A16", "W6A16", "W2A16",
                   "NVFP4A16", "MXFP4A16"]:
        label = f"(c) qk reads compressed-tensors {preset}"
        try:
            d = write_ct(tmp, preset)
            theirs = ct_dequant(d)
        except Exception as e:  # noqa: BLE001
            check(label, False, f"compressed-tensors could not write/read it: {type(e).__name__}: {e}")
            continue
        try:
            ours = ours_f32(build, d, tmp, "c-" + preset)
        except subprocess.CalledProcessError as e:
            check(label, False, f"ckpt-tool failed ({e.returncode})")
            continue
        compare(label, ours, theirs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    a = ap.parse_args()
    elements(a.build)
    try:
        import torch  # noqa: F401
        import compressed_tensors
        print(f"compressed-tensors {compressed_tensors.__version__}, torch {torch.__version__}", flush=True)
    except ImportError as e:
        print(f"(b), (c) skipped: {e}")
        compressed_tensors = None
    if compressed_tensors:
        tmp = tempfile.mkdtemp(prefix="qk-crosscheck-")
        try:
            src = {"S260": "goldens/models/stories260K/hf-f32", "S4M": "goldens/models/stories4M/hf-f32"}
            read_ours(a.build, src, tmp)
            read_theirs(a.build, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    npass, nfail = sum(RESULTS), len(RESULTS) - sum(RESULTS)
    print(f"{npass} passed, {nfail} failed")
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
