#!/usr/bin/env python3
"""crosscheck_static.py - static activation scales from calibration: qk-quant
--to ct-fp8-static / ct-nvfp4a4 --calib against llm-compressor's oneshot with
QuantizationModifier(scheme="FP8") / (scheme="NVFP4") on the same tokens, and
--to ct-w8a8-static against QuantizationModifier(config_groups: INT8 weights
per channel, static per-tensor INT8 activations, observer static_minmax)
and --to modelopt-nvfp4 --calib against ModelOpt 0.47's mtq.quantize
(NVFP4_DEFAULT_CFG) + export_hf_checkpoint, and --to ct-nvfp4a4 --rotate
hadamard --calib against [SpinQuantModifier (R1, R2, R4 hadamard, R4 on
blocks of 16, the NVFP4 group), QuantizationModifier(scheme="NVFP4")]: the
observers see the rotated model, R4 applied online (part of make crosscheck;
issue 19, "Calibrated Hugging Face checkpoints" and "Rotations").

    crosscheck_static.py QK WORK [--threads N] [--keep] [--golden FILE]

Model: stories4M's HF directory (F32).  Calibration rows: qk's tokenization
of the text cut into chunks, each starting with BOS (tools/crosscheck_calib.py
calib_rows: what qk-quant --calib feeds its engine), handed to oneshot as
input_ids.  Sets: full (bytes [128 KiB, +200 kB) of tinystories-valid.txt,
64 x 256 tokens; evaluated with -c 256 on all of eval-64k.txt) and small
(goldens/calib/calib-6k.txt, 8 x 128; -c 128 --chunks 8) and tiny (its first
2 x 128), the set whose reference scales --golden writes for make check
(tests/test_static.c).
Checks, per scheme and set:
  config.json key for key (apart from the compressed-tensors release qk's
      writer follows, crosscheck_calib.VERSION_KEYS; not for ModelOpt, whose
      config qk writes as ModelOpt 0.29 did);
  every tensor but the activation scales byte-identical (weights, weight
      scales and global scales, norms, embeddings);
  every input_scale / input_global_scale within REL of llm-compressor's:
      both are the amax of each Linear's input over the same tokens, from
      two float32 forward passes (transformers', qk's engine) whose sums
      differ in their last bits; the largest relative difference is printed;
  qk-kld of both checkpoints against the F32 base, qk's within max(2 x
      floor, 0.1 %) of llm-compressor's, the floor the largest move of
      llm-compressor's own KLD with its scales moved by the largest relative
      difference: all up, all down, and two draws of a sign per tensor.
"""
import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crosscheck_calib as C  # noqa: E402

REL = 1e-5
SCHEMES = (("FP8", "ct-fp8-static", "input_scale"), ("NVFP4", "ct-nvfp4a4", "input_global_scale"),
           ("NVFP4_SPIN", "ct-nvfp4a4", "input_global_scale"),
           ("W8A8_STATIC", "ct-w8a8-static", "input_scale"), ("MO_NVFP4", "modelopt-nvfp4", "input_scale"),
           # weights only (once, in the tiny set): ct-nvfp4's fused global scales are NVFP4A16's too
           ("NVFP4A16", "ct-nvfp4", None))
# no preset has INT8 with static activations: config_groups (the observer named: static_minmax, the
# presets' for static activations; without one compressed-tensors would pick the moving-average "minmax")
CUSTOM = {"W8A8_STATIC": {"weights": {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True,
                                      "dynamic": False},
                          "input_activations": {"num_bits": 8, "type": "int", "strategy": "tensor", "symmetric": True,
                                                "dynamic": False, "observer": "static_minmax"}}}
SETS = (("full", None, 200000, 64, 256, 256, 0), ("small", "goldens/calib/calib-6k.txt", 0, 8, 128, 128, 8),
        ("tiny", "goldens/calib/calib-6k.txt", 0, 2, 128, 128, 8))


def lc_make(preset, out, rows, threads):
    import torch
    from datasets import Dataset
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(C.S4M, dtype=torch.float32)
    ds = Dataset.from_dict({"input_ids": rows, "attention_mask": [[1] * len(r) for r in rows]})
    spin = preset.endswith("_SPIN")
    preset = preset.removesuffix("_SPIN")
    sch = ({"config_groups": {"group_0": dict(targets=["Linear"], **CUSTOM[preset])}} if preset in CUSTOM else
           {"scheme": preset})
    rec = QuantizationModifier(targets="Linear", ignore=["lm_head"], **sch)
    oneshot(model=model, recipe=[C.spin(16), rec] if spin else rec,
            dataset=ds, num_calibration_samples=len(rows), max_seq_length=len(rows[0]),
            processor=C.id_processor(model.config.vocab_size))
    model.save_pretrained(out, save_compressed=True)


def mo_make(out, rows, threads):
    """ModelOpt 0.47 on CPU: mtq.quantize(NVFP4_DEFAULT_CFG) calibrated on the rows (its NVFP4 fake
    quantization through crosscheck_hf.modelopt_cpu_nvfp4; calibration itself runs the float model),
    then export_hf_checkpoint."""
    import torch
    import modelopt.torch.quantization as mtq
    from modelopt.torch.export import export_hf_checkpoint
    from transformers import AutoModelForCausalLM
    import crosscheck_hf as X
    torch.set_num_threads(threads)
    m = AutoModelForCausalLM.from_pretrained(C.S4M, dtype=torch.float32)

    def fwd(mm):
        with torch.no_grad():
            for r in rows:
                mm(torch.tensor([r]))
    X.modelopt_cpu_nvfp4()
    mtq.quantize(m, mtq.NVFP4_DEFAULT_CFG, fwd)
    export_hf_checkpoint(m, export_dir=out)


def tensors(d):
    from safetensors.torch import load_file
    t = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            t.update(load_file(os.path.join(d, f)))
    return t


def compare(tag, preset, leaf, lc_dir, qk_dir):
    if preset == "MO_NVFP4":  # qk's config follows ModelOpt 0.29's export: compare the tensors of the linears only
        a, b = ({k: v for k, v in tensors(d).items() if ".weight" in k or "_scale" in k} for d in (lc_dir, qk_dir))
        return compare_tensors(tag, preset, leaf, a, b)
    lc = C.flat(json.load(open(os.path.join(lc_dir, "config.json"))))
    ours = C.flat(json.load(open(os.path.join(qk_dir, "config.json"))))
    diff = sorted(x for x in set(lc) | set(ours) if lc.get(x) != ours.get(x)
                  and not any(x.endswith(v) for v in C.VERSION_KEYS))
    C.check(f"{tag} {preset}: config.json: qk's keys and values are llm-compressor's", not diff,
            "; ".join(f"{x}: lc {lc.get(x)!r} qk {ours.get(x)!r}" for x in diff[:6]))
    return compare_tensors(tag, preset, leaf, tensors(lc_dir), tensors(qk_dir))


def compare_tensors(tag, preset, leaf, a, b):
    ref = "ModelOpt" if preset.startswith("MO_") else "llm-compressor"
    C.check(f"{tag} {preset}: the same tensor names", set(a) == set(b),
            f"only lc: {sorted(set(a) - set(b))[:4]}, only qk: {sorted(set(b) - set(a))[:4]}")
    same, worst, rel, n = [], "", 0.0, 0
    for k in sorted(set(a) & set(b)):
        x, y = a[k], b[k]
        if leaf and k.endswith("." + leaf):
            n += 1
            r = abs(float(y.double().reshape(-1)[0]) / float(x.double().reshape(-1)[0]) - 1)
            if r > rel:
                rel, worst = r, k
            continue
        if x.dtype != y.dtype or x.shape != y.shape or not bool((x.view(-1).view(torch_u8()) ==
                                                                 y.view(-1).view(torch_u8())).all()):
            same.append(k)
    C.check(f"{tag} {preset}: every other tensor byte-identical (weights, their scales and global scales)",
            not same, f"{len(same)} differ: {same[:4]}")
    if leaf:
        C.check(f"{tag} {preset}: {n} {leaf}s within {REL:g} relative of {ref}'s", n > 0 and rel <= REL,
                f"largest relative difference {rel:.3g} ({worst})")
    return rel


def moved(src, dst, leaf, rel, seed=None):
    """src with every activation scale times (1 + rel), or with seed each times (1 +- rel), the sign
    drawn per tensor: how far an A4/A8 model's KLD moves when its static scales move by what the two
    float passes disagree on (every code near a rounding boundary can flip, and the flips compound
    through the layers; qk's scales differ from llm-compressor's each in its own direction)."""
    import random
    rng = random.Random(seed)
    from safetensors.torch import load_file, save_file
    subprocess.run(["rm", "-rf", dst], check=True)
    shutil.copytree(src, dst)
    for f in os.listdir(dst):
        if f.endswith(".safetensors"):
            t = load_file(os.path.join(dst, f))
            for k in t:
                if leaf and k.endswith("." + leaf):
                    sg = 1 if seed is None else rng.choice((1, -1))
                    t[k] = (t[k].double() * (1 + sg * rel)).to(t[k].dtype)
            save_file(t, os.path.join(dst, f), metadata={"format": "pt"})
    return dst


def torch_u8():
    import torch
    return torch.uint8


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("qk")
    ap.add_argument("work")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="reuse the checkpoints already in WORK")
    ap.add_argument("--golden", help="write the tiny set's reference scales to this file")
    ap.add_argument("--only", help="run only this set (full, small, tiny)")
    ap.add_argument("--preset", help="run only this preset (FP8, NVFP4, NVFP4_SPIN, ...)")
    a = ap.parse_args()
    qk, w = os.path.abspath(a.qk), os.path.abspath(a.work)
    os.makedirs(w, exist_ok=True)
    md = ["| set | scheme | Mean KLD reference | Mean KLD qk | floor | largest input-scale rel. diff |",
          "|---|---|---|---|---|---|"]
    golden = []
    for tag, path, nbytes, chunks, ctx, ec, en in SETS:
        if a.only and tag != a.only:
            continue
        calib = os.path.join(C.ROOT, path) if path else os.path.join(w, f"calib-{tag}.txt")
        if not path:
            with open(C.TEXT, "rb") as f:
                f.seek(128 * 1024)
                open(calib, "wb").write(f.read(nbytes).rstrip(b"\n"))
        rows = C.calib_rows(qk, calib, ctx, chunks)
        for preset, scheme, leaf in SCHEMES:
            if (not leaf and tag != "tiny") or (a.preset and preset != a.preset):
                continue
            if preset == "MO_NVFP4" and importlib.util.find_spec("modelopt") is None:
                print(f"note: {tag} {preset}: nvidia-modelopt not installed: skipped")
                continue
            ld, qd = os.path.join(w, f"{tag}-lc-{preset}"), os.path.join(w, f"{tag}-qk-{preset}")
            if not (a.keep and os.path.isdir(ld)):
                subprocess.run(["rm", "-rf", ld], check=True)
                (mo_make(ld, rows, a.threads) if preset == "MO_NVFP4" else lc_make(preset, ld, rows, a.threads))
            subprocess.run(["rm", "-rf", qd], check=True)
            cal = ["--calib", calib, "-c", str(ctx), "--calib-chunks", str(chunks), "--tokenizer", C.GGUF] if leaf else []
            rot = ["--rotate", "hadamard"] if preset.endswith("_SPIN") else []
            subprocess.run([qk, "quant", "-q", "--to", scheme, *cal, *rot, "-t", str(a.threads), C.S4M, qd], check=True)
            rel = compare(tag, preset, leaf, ld, qd)
            if not leaf:
                continue
            kl, kq = (C.kld(qk, d, a.threads, ec, en) for d in (ld, qd))
            # the floor: llm-compressor's checkpoint with its scales moved by +-max(rel, 2^-23), all one
            # way, and each its own way (two draws)
            r = max(rel, 2.0 ** -23)
            mv = [(sg * r, None) for sg in (1, -1)] + [(r, seed) for seed in (1, 2)]
            floor = max(abs(C.kld(qk, moved(ld, os.path.join(w, "moved"), leaf, x, sd), a.threads, ec, en) - kl)
                        for x, sd in mv)
            C.check(f"{tag} {preset}: qk's Mean KLD within the reference's +- max(2 x floor, 0.1 %)",
                    abs(kq - kl) <= max(2 * floor, 1e-3 * kl),
                    f"{kq:.6f} vs {kl:.6f} ({(kq / kl - 1) * 100:+.2f} %; floor: the reference's scales x (1 +- {r:.3g}) "
                    f"move it by {floor:.6f}, {floor / kl * 100:.2f} %)")
            md.append(f"| {tag} {chunks}x{ctx} | {preset} ({scheme}) | {kl:.6f} | {kq:.6f} | {floor:.6f} | {rel:.3g} |")
            if tag == "tiny":
                t = tensors(ld)
                wl = {"FP8": "weight_scale", "NVFP4": "weight_global_scale", "NVFP4_SPIN": "weight_global_scale",
                      "MO_NVFP4": "weight_scale_2"}.get(preset)
                golden += [f"{preset} {k.rsplit('.', 1)[0]} {k.rsplit('.', 1)[1]} {float(t[k]):.9g}"
                           for k in sorted(t) if k.endswith("." + leaf) or (wl and k.endswith("." + wl))]
    if a.golden:
        with open(a.golden, "w") as f:
            f.write("# tools/crosscheck_static.py --golden: llm-compressor 0.14 oneshot, QuantizationModifier("
                    "scheme=FP8 | NVFP4, ignore lm_head) on goldens/models/stories4M/hf-f32, calibrated on qk's "
                    "tokenization of goldens/calib/calib-6k.txt, 2 chunks x 128 tokens (BOS first in each): "
                    "PRESET MODULE TENSOR VALUE (float32, %.9g), FP8: input_scale and the per-tensor "
                    "weight_scale, NVFP4: input_global_scale and weight_global_scale, W8A8_STATIC (config_groups: "
                    "INT8 channel weights, static tensor INT8 activations, observer static_minmax): input_scale; "
                    "NVFP4_SPIN: SpinQuantModifier(R1, R2, R4 hadamard, R4 on blocks of 16) before NVFP4's: "
                    "input_global_scale and weight_global_scale; "
                    "MO_NVFP4: ModelOpt 0.47 mtq.quantize(NVFP4_DEFAULT_CFG) + export_hf_checkpoint on the same "
                    "rows: input_scale and weight_scale_2\n")
            f.write("\n".join(golden) + "\n")
    open(os.path.join(w, "static.md"), "w").write("\n".join(md) + "\n")
    print("\n".join(md))
    sys.exit(1 if C.FAILS else 0)


if __name__ == "__main__":
    main()
