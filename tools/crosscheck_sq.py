#!/usr/bin/env python3
"""crosscheck_sq.py - llm-compressor's SmoothQuant W8A8 checkpoints of stories4M
against qk-quant --to ct-w8a8 --method smoothquant|smoothquant+gptq (part of
make crosscheck; issue 19, "Calibrated Hugging Face checkpoints").

    crosscheck_sq.py QK WORK [--threads N] [--keep] [--golden FILE] [--sets full,small]
    crosscheck_sq.py --norms-golden QK OUT.safetensors   (goldens/calib/sq260k-lc.safetensors)

The calibration rows are qk's own tokenization of the text (crosscheck_calib.py's
calib_rows: BOS first in each chunk), handed to oneshot as input_ids, so both tools
see the same tokens.  Sets: full (64 x 256 tokens of bytes [128 KiB, +200 kB) of
tinystories-valid.txt, qk-kld -c 256 on all of eval-64k.txt) and small (8 x 128 of
goldens/calib/calib-6k.txt, qk-kld -c 128 --chunks 8: the numbers make check gates).

Checkpoints (stories4M's HF directory, F32; oneshot's default pipeline,
"independent": each modifier calibrates on its own pass):
  lc-sqf   SmoothQuantModifier(smoothing_strength=0.5) alone: the smoothed float model
           (and lc-sqf08: smoothing_strength=0.8)
  lc-rtn   QuantizationModifier(scheme=W8A8)
  lc-sq    SmoothQuantModifier(0.5) then QuantizationModifier(scheme=W8A8)
  lc-sqg   SmoothQuantModifier(0.5) then GPTQModifier(scheme=W8A8) (block 128,
           dampening 0.01, actorder static)
  lc-gptq  GPTQModifier(scheme=W8A8)
and qk's: qk-quant --to f32 --method smoothquant (qk-sqf), --to ct-w8a8 (rtn),
--method smoothquant, smoothquant+gptq, gptq.
Checks: the smoothed floats (qk-sqf against lc-sqf, every tensor: max |qk - lc| /
max |lc| <= SMOOTH_TOL); config.json key by key (crosscheck_calib.VERSION_KEYS
apart); the int8 codes and scales of each W8A8 pair, counted (reported); Mean KLD
against the F32 base, qk <= 1.05 x llm-compressor's for smoothquant,
smoothquant+gptq and gptq.  Writes WORK/sq.md; --golden FILE writes the small
set's llm-compressor numbers (goldens/calib/w8a8-lc.txt).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crosscheck_calib as cc  # noqa: E402

ROOT = cc.ROOT
SMOOTH_TOL = 1e-5  # float32: the activation ranges come from two engines' forward passes
S260 = os.path.join(ROOT, "goldens/models/stories260K/hf-f32")
G260 = os.path.join(ROOT, "goldens/models/stories260K/stories260K-f32.gguf")
CALIB6K = os.path.join(ROOT, "goldens/calib/calib-6k.txt")


def lc_make(how, out, rows, threads, src=cc.S4M, alpha=0.5):
    import torch
    from datasets import Dataset
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import GPTQModifier, QuantizationModifier
    from llmcompressor.modifiers.transform.smoothquant import SmoothQuantModifier
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    sq = [SmoothQuantModifier(smoothing_strength=alpha)]
    w8 = dict(targets="Linear", scheme="W8A8", ignore=["lm_head"])
    rec = {"sqf": sq, "rtn": [QuantizationModifier(**w8)], "sq": sq + [QuantizationModifier(**w8)],
           "sqg": sq + [GPTQModifier(**w8)], "gptq": [GPTQModifier(**w8)]}[how]
    kw = {}
    if how != "rtn":
        ds = Dataset.from_dict({"input_ids": rows, "attention_mask": [[1] * len(r) for r in rows]})
        kw = dict(dataset=ds, num_calibration_samples=len(rows), max_seq_length=len(rows[0]),
                  processor=cc.id_processor(model.config.vocab_size))
    oneshot(model=model, recipe=rec, **kw)
    secs = time.perf_counter() - t0
    model.save_pretrained(out, save_compressed=how != "sqf")
    return secs


def load(d):
    from safetensors.numpy import load_file
    return load_file(os.path.join(d, "model.safetensors"))


def smooth_cmp(qk_dir, lc_dir, base=cc.S4M):
    """Every tensor SmoothQuant changed: the worst max |qk - lc| / max |lc|; and the count changed."""
    q, lc, b = load(qk_dir), load(lc_dir), load(base)
    worst, name, changed = 0.0, "", 0
    for k, v in lc.items():
        if not np.array_equal(v, b[k]):
            changed += 1
        e = float(np.max(np.abs(q[k].astype(np.float64) - v)) / max(float(np.max(np.abs(v))), 1e-30))
        if e > worst:
            worst, name = e, k
    return worst, name, changed


def codes_cmp(qk_dir, lc_dir):
    """The int8 weights of every quantized module: codes differing, the largest difference, the
    scales' worst relative difference."""
    q, lc = load(qk_dir), load(lc_dir)
    n = nd = dmax = n1 = rows = rows_d = 0
    sworst = 0.0
    for k, v in lc.items():
        if v.dtype == np.int8:
            d = np.abs(q[k].astype(np.int32) - v.astype(np.int32))
            n += d.size
            nd += int(np.count_nonzero(d))
            n1 += int(np.count_nonzero(d == 1))
            dmax = max(dmax, int(d.max()))
            rows += d.shape[0]
            rows_d += int(np.count_nonzero(d.max(axis=1)))
        elif k.endswith("weight_scale"):
            sworst = max(sworst, float(np.max(np.abs(q[k].astype(np.float64) - v) / np.abs(v))))
    return n, nd, dmax, sworst, n1, rows, rows_d


QK_ARGS = {"sqf": ("f32", "smoothquant"), "rtn": ("ct-w8a8", None), "sq": ("ct-w8a8", "smoothquant"),
           "sqg": ("ct-w8a8", "smoothquant+gptq"), "gptq": ("ct-w8a8", "gptq")}


def qk_make(qk, how, calib, ctx, chunks, out, threads, src=cc.S4M, tok=cc.GGUF, alpha=None):
    to, method = QK_ARGS[how]
    cmd = [qk, "quant", "-q", "--to", to, "-t", str(threads)]
    if alpha is not None:
        cmd += ["--smoothing-strength", str(alpha)]
    if method:
        cmd += ["--method", method, "--calib", calib, "-c", str(ctx), "--calib-chunks", str(chunks),
                "--tokenizer", tok]
    t0 = time.perf_counter()
    subprocess.run(cmd + [src, out], check=True)
    return time.perf_counter() - t0


def norms_golden(qk, out):
    """goldens/calib/sq260k-lc.safetensors: llm-compressor's SmoothQuant on stories260K (1 x 64
    tokens of calib-6k.txt): every norm it smoothed, and layer 0's k_proj."""
    from safetensors.numpy import save_file
    import tempfile
    cc.GGUF = G260
    rows = cc.calib_rows(qk, CALIB6K, 64, 1)
    with tempfile.TemporaryDirectory() as t:
        lc_make("sqf", t, rows, 2, S260)
        m = load(t)
    keep = {k: v for k, v in m.items() if "layernorm" in k or k == "model.layers.0.self_attn.k_proj.weight"}
    save_file(keep, out, metadata={"provenance": "tools/crosscheck_sq.py --norms-golden: llm-compressor 0.14 "
                                   "SmoothQuantModifier(smoothing_strength=0.5) on goldens/models/stories260K/"
                                   "hf-f32, 1 x 64 tokens of goldens/calib/calib-6k.txt (qk's tokenization, BOS "
                                   "first)"})


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--norms-golden":
        return norms_golden(os.path.abspath(sys.argv[2]), sys.argv[3])
    ap = argparse.ArgumentParser()
    ap.add_argument("qk")
    ap.add_argument("work")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="reuse the checkpoints already in WORK")
    ap.add_argument("--golden", help="write the small set's llm-compressor numbers to this file")
    ap.add_argument("--sets", default="full,small")
    a = ap.parse_args()
    qk, w = os.path.abspath(a.qk), os.path.abspath(a.work)
    os.makedirs(w, exist_ok=True)
    md = []
    hows = ("sqf", "rtn", "sq", "sqg", "gptq")
    for tag, cb, ctx, chunks, ec, en in (("full", 200000, 256, 64, 256, 0), ("small", 6000, 128, 8, 128, 8)):
        if tag not in a.sets.split(","):
            continue
        calib = os.path.join(w, f"calib-{tag}.txt")
        with open(cc.TEXT, "rb") as f:
            f.seek(128 * 1024)
            open(calib, "wb").write(f.read(cb).rstrip(b"\n"))
        rows = cc.calib_rows(qk, calib, ctx, chunks)
        secs = {}
        for how in hows:
            for who in ("lc", "qk"):
                d = os.path.join(w, f"{tag}-{who}-{how}")
                if a.keep and os.path.isdir(d):
                    continue
                subprocess.run(["rm", "-rf", d], check=True)
                secs[f"{who}-{how}"] = (lc_make(how, d, rows, a.threads) if who == "lc"
                                        else qk_make(qk, how, calib, ctx, chunks, d, a.threads))
        p = lambda who, how: os.path.join(w, f"{tag}-{who}-{how}")  # noqa: E731
        e, name, changed = smooth_cmp(p("qk", "sqf"), p("lc", "sqf"))
        cc.check(f"{tag}: smoothed float weights equal llm-compressor's (max |qk - lc| / max |lc| <= {SMOOTH_TOL:g})",
                 e <= SMOOTH_TOL and changed > 0, f"worst {e:.3g} ({name}); {changed} tensors smoothed")
        # another strength (powf, not sqrt): the smoothed floats again
        for who in ("lc", "qk"):
            d = os.path.join(w, f"{tag}-{who}-sqf08")
            if not (a.keep and os.path.isdir(d)):
                subprocess.run(["rm", "-rf", d], check=True)
                (lc_make("sqf", d, rows, a.threads, alpha=0.8) if who == "lc"
                 else qk_make(qk, "sqf", calib, ctx, chunks, d, a.threads, alpha=0.8))
        e, name, changed = smooth_cmp(p("qk", "sqf08"), p("lc", "sqf08"))
        cc.check(f"{tag}: --smoothing-strength 0.8: smoothed float weights equal llm-compressor's (<= {SMOOTH_TOL:g})",
                 e <= SMOOTH_TOL and changed > 0, f"worst {e:.3g} ({name}); {changed} tensors smoothed")
        for how in hows[1:]:
            lc = cc.flat(json.load(open(os.path.join(p("lc", how), "config.json"))))
            ours = cc.flat(json.load(open(os.path.join(p("qk", how), "config.json"))))
            diff = sorted(x for x in set(lc) | set(ours) if lc.get(x) != ours.get(x)
                          and not any(x.endswith(v) for v in cc.VERSION_KEYS))
            cc.check(f"{tag}: config.json {how}: qk's keys and values are llm-compressor's", not diff,
                     "; ".join(f"{x}: lc {lc.get(x)!r} qk {ours.get(x)!r}" for x in diff[:6]))
            n, nd, dmax, sw, n1, rows, rows_d = codes_cmp(p("qk", how), p("lc", how))
            cc.note(f"{tag}: int8 codes {how}", True, f"{nd} of {n} differ ({100 * nd / n:.4f} %), {n1} by 1, "
                    f"at most by {dmax}, in {rows_d} of {rows} rows; weight_scale worst relative difference {sw:.3g}")
        k = {f"{who}-{how}": cc.kld(qk, p(who, how), a.threads, ec, en) for who in ("lc", "qk") for how in hows[1:]}
        cc.check(f"{tag}: qk RTN W8A8 = llm-compressor's (Mean KLD within 0.5 %)",
                 abs(k["qk-rtn"] / k["lc-rtn"] - 1) < 0.005, f"{k['qk-rtn']:.6f} vs {k['lc-rtn']:.6f}")
        for how in ("sq", "sqg", "gptq"):
            q, lc = k["qk-" + how], k["lc-" + how]
            cc.check(f"{tag}: qk {how} W8A8 Mean KLD <= 1.05 x llm-compressor's", q <= 1.05 * lc,
                     f"{q:.6f} vs {lc:.6f} ({q / lc:.3f}x; RTN W8A8 {k['qk-rtn']:.6f})")
        md.append(f"### {tag}: {chunks} x {ctx} calibration tokens; qk-kld -c {ec}{f' --chunks {en}' if en else ''} "
                  f"on eval-64k.txt against the F32 HF directory; {a.threads} threads\n\n"
                  "| checkpoint | Mean KLD | seconds |\n|---|---|---|\n" +
                  "".join(f"| {n} | {k[n]:.6f} | {secs.get(n, float('nan')):.1f} |\n" for n in k))
        if tag == "small" and a.golden:
            with open(a.golden, "w") as f:
                f.write("# tools/crosscheck_sq.py, llm-compressor oneshot W8A8 on stories4M's HF directory calibrated "
                        "on qk's tokenization of goldens/calib/calib-6k.txt, 8 x 128 tokens: SmoothQuantModifier(0.5) "
                        "+ QuantizationModifier (lc_sq), + GPTQModifier (lc_sqg); Mean KLD by qk-kld -c 128 "
                        "--chunks 8 on eval-64k.txt against the F32 base\n")
                f.write(f"lc_rtn {k['lc-rtn']:.6f}\nlc_sq {k['lc-sq']:.6f}\nlc_sqg {k['lc-sqg']:.6f}\n"
                        f"lc_gptq {k['lc-gptq']:.6f}\n")
    with open(os.path.join(w, "sq.md"), "w") as f:
        f.write("\n".join(md))
    print("\n".join(md))
    sys.exit(1 if cc.FAILS else 0)


if __name__ == "__main__":
    main()
