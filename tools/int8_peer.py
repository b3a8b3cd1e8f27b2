#!/usr/bin/env python3
"""int8_peer.py - qk's W8A8-INT8 decode against the same-rung Hugging Face
peer: transformers with torch.ao.quantization.quantize_dynamic (int8
weights, dynamic int8 activations per tensor) on the Linear layers of the
same model, the same number of tokens and threads (make crosscheck; the
scorecard's "int8 SIMD decode vs the same-rung HF dynamic-int8 peer").

    int8_peer.py BUILD HF_DIR CT_W8A8_DIR [THREADS] [TOKENS]

Prints both decode rates and the ratio qk / peer (goal >= 3)."""
import json
import subprocess
import sys
import time

import torch


def main():
    build, hf, ct = sys.argv[1:4]
    threads = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    n = int(sys.argv[5]) if len(sys.argv) > 5 else 32
    torch.set_num_threads(threads)
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32).eval()
    q = torch.ao.quantization.quantize_dynamic(m, {torch.nn.Linear}, dtype=torch.qint8)
    ids = torch.tensor([[1, 500, 600, 700]])
    with torch.no_grad():
        q.generate(ids, max_new_tokens=4, min_new_tokens=4, do_sample=False)  # warm up
        best = 0.0
        for _ in range(3):
            t0 = time.perf_counter()
            q.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)
            best = max(best, n / (time.perf_counter() - t0))
    out = subprocess.run([f"{build}/qk", "bench", "model", "-q", "-m", ct, "-p", "0", "-n", str(n), "-r", "3",
                          "-t", str(threads), "--json"], capture_output=True, text=True, check=True).stdout
    qk = max(r["tokens_per_s"]["max"] for r in json.loads(out)["rows"])
    print(f"decode tg{n}, {threads} threads: qk W8A8-INT8 {qk:.1f} t/s, transformers quantize_dynamic int8 "
          f"{best:.1f} t/s (best of 3 each): {qk / best:.2f}x (goal >= 3)")


if __name__ == "__main__":
    main()
