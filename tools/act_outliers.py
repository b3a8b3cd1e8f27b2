#!/usr/bin/env python3
"""act_outliers.py - how heavy-tailed a float HF model's linear inputs are (the outliers Hadamard rotations
and SmoothQuant exist for), by transformers' forward on qk's tokenization of a text (docs/retention.md).

    act_outliers.py HF_DIR TOKENIZER_GGUF TEXT [--qk build/qk] [--tokens 1024] [--ctx 256]

Per linear module (lm_head aside), over every token: the largest |x| over the input's RMS, the largest
channel RMS over the median channel RMS, and the mean per-token kurtosis (3 for a Gaussian)."""
import argparse
import json
import subprocess

import torch
from transformers import AutoModelForCausalLM

ap = argparse.ArgumentParser()
ap.add_argument("hf")
ap.add_argument("tokenizer")
ap.add_argument("text")
ap.add_argument("--qk", default="build/qk")
ap.add_argument("--tokens", type=int, default=1024)
ap.add_argument("--ctx", type=int, default=256)
a = ap.parse_args()
ids = json.loads(subprocess.run([a.qk, "run", "--tokenize", "-m", a.tokenizer, "-f", a.text], capture_output=True,
                                text=True, check=True).stdout)[:a.tokens]
m = AutoModelForCausalLM.from_pretrained(a.hf, dtype=torch.float32)
st = {}


def hook(name):
    def f(mod, inp):
        x = inp[0].detach().reshape(-1, inp[0].shape[-1]).double()
        ch = x.pow(2).mean(0).sqrt()
        k = ((x - x.mean(1, keepdim=True)) ** 4).mean(1) / x.var(1, unbiased=False) ** 2
        s = st.setdefault(name, [0.0, 0.0, []])
        s[0] = max(s[0], (x.abs().max() / x.pow(2).mean().sqrt()).item())
        s[1] = max(s[1], (ch.max() / ch.median()).item())
        s[2].append(k.mean().item())
    return f


for n, mod in m.named_modules():
    if isinstance(mod, torch.nn.Linear) and not n.endswith("lm_head"):
        mod.register_forward_pre_hook(hook(n))
with torch.no_grad():
    for i in range(0, len(ids) - a.ctx + 1, a.ctx):
        m(torch.tensor([ids[i:i + a.ctx]]))
print("| module | max / RMS | max channel RMS / median | kurtosis |\n|---|---:|---:|---:|")
for n, (r, c, k) in st.items():
    print(f"| {n} | {r:.1f} | {c:.2f} | {sum(k) / len(k):.1f} |")
