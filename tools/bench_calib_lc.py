#!/usr/bin/env python3
"""bench_calib_lc.py - llm-compressor's oneshot GPTQ W4A16 on the first LAYERS decoder layers of a
model, timed layer by layer, for tools/bench-calib.sh on a model too slow to run whole.

    bench_calib_lc.py SRC TOKENIZER TEXT CTX CHUNKS THREADS LAYERS OUT.json

The model is loaded with num_hidden_layers=LAYERS (its first LAYERS layers, embeddings, norm and
lm_head; lm_head is ignored as in tools/crosscheck_calib.py) and quantized by the same recipe on qk's
tokenization of TEXT (crosscheck_calib.calib_rows).  llm-compressor's sequential pipeline
calibrates and compresses one layer after another; the moment each layer's q_proj first runs is
recorded, so layer i's time (calibration forward, GPTQ of its seven linears, propagation) is
start[i + 1] - start[i], the last one's the end of oneshot minus its start.  OUT.json gets
{"layers", "total_layers", "load_s", "oneshot_s", "layer_s": [...]}; bench-calib.sh adds
(total_layers - LAYERS) x the mean of the full intervals (all but the last, which also holds the
head's pass and oneshot's wrap-up; the last when LAYERS is 1) to the process' wall time.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crosscheck_calib as cc  # noqa: E402


def main():
    src, tok, text, ctx, chunks, threads, layers, out = sys.argv[1:9]
    import torch
    from datasets import Dataset
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import GPTQModifier
    from transformers import AutoConfig, AutoModelForCausalLM
    torch.set_num_threads(int(threads))
    cc.GGUF = tok
    rows = cc.calib_rows(os.environ.get("QK_BIN", "build/qk"), text, int(ctx), int(chunks))
    total = AutoConfig.from_pretrained(src).num_hidden_layers
    n = min(int(layers), total)
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32, num_hidden_layers=n)
    t1 = time.perf_counter()
    start = {}

    def stamp(i):
        def hook(module, args):
            start.setdefault(i, time.perf_counter())  # returns None: the input is left as it is
        return hook
    for i, layer in enumerate(model.model.layers):
        layer.self_attn.q_proj.register_forward_pre_hook(stamp(i))
    ds = Dataset.from_dict({"input_ids": rows, "attention_mask": [[1] * len(r) for r in rows]})
    oneshot(model=model, recipe=GPTQModifier(targets="Linear", scheme="W4A16", ignore=["lm_head"]), dataset=ds,
            num_calibration_samples=len(rows), max_seq_length=len(rows[0]),
            processor=cc.id_processor(model.config.vocab_size))
    t2 = time.perf_counter()
    marks = [start[i] for i in range(n)] + [t2]
    with open(out, "w") as f:
        json.dump({"layers": n, "total_layers": total, "load_s": t1 - t0, "oneshot_s": t2 - t1,
                   "layer_s": [marks[i + 1] - marks[i] for i in range(n)]}, f)


if __name__ == "__main__":
    main()
