#!/usr/bin/env python3
"""gguf2hf.py - a llama GGUF (F32/F16/BF16 tensors) as a Hugging Face directory
(config.json + model.safetensors), the inverse of llama.cpp's
convert_hf_to_gguf.py for the tensors qk's engine reads: names mapped back,
q/k rows un-permuted (LlamaModel.permute undone), dtypes kept.  Used by
tools/bench-hf.sh to give the bench model an HF twin for qk-quant --to.

    gguf2hf.py IN.gguf OUT_DIR
"""
import json
import os
import sys

import numpy as np
from gguf import GGUFReader
from safetensors.numpy import save_file


def field(r, key, default=None):
    f = r.fields.get(key)
    if f is None:
        return default
    v = f.parts[f.data[0]]
    return v.tobytes().decode() if v.dtype == np.uint8 else v.item()


def unpermute(w, n_head):
    # permute: w.reshape(n_head, 2, d // n_head // 2, *rest).swapaxes(1, 2).reshape(w.shape)
    d = w.shape[0]
    return w.reshape(n_head, d // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def main():
    src, out = sys.argv[1], sys.argv[2]
    r = GGUFReader(src)
    arch = field(r, "general.architecture")
    if arch != "llama":
        sys.exit(f"gguf2hf: architecture {arch}: only llama")
    k = lambda s, d=None: field(r, f"llama.{s}", d)
    n_head, n_kv = k("attention.head_count"), k("attention.head_count_kv", k("attention.head_count"))
    names = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    per = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
           "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
           "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    tensors, dtype = {}, "float16"
    for t in r.tensors:
        name = t.name
        if name in names:
            hf = names[name]
        else:
            blk, il, part, leaf = name.split(".")
            hf = f"model.layers.{il}.{per[part]}.{leaf}"
        a = np.array(t.data).reshape([int(x) for x in reversed(t.shape)])
        if a.dtype == np.float32 and a.ndim == 1:
            pass
        elif a.dtype == np.float16:
            dtype = "float16"
        if ".attn_q." in name:
            a = unpermute(a, n_head)
        elif ".attn_k." in name:
            a = unpermute(a, n_kv)
        tensors[hf] = np.ascontiguousarray(a)
    vocab, e = tensors["model.embed_tokens.weight"].shape
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": e,
           "intermediate_size": k("feed_forward_length"), "num_hidden_layers": k("block_count"),
           "num_attention_heads": n_head, "num_key_value_heads": n_kv, "head_dim": e // n_head,
           "vocab_size": vocab, "max_position_embeddings": k("context_length", 2048),
           "rms_norm_eps": k("attention.layer_norm_rms_epsilon"), "rope_theta": k("rope.freq_base", 10000.0),
           "hidden_act": "silu", "tie_word_embeddings": "lm_head.weight" not in tensors, "torch_dtype": dtype,
           "attention_bias": False, "mlp_bias": False, "bos_token_id": 1, "eos_token_id": 2}
    os.makedirs(out, exist_ok=True)
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


if __name__ == "__main__":
    main()
