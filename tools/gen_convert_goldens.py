#!/usr/bin/env python3
"""Reference outputs of llama.cpp's convert_hf_to_gguf.py for qk-convert.

    python3 tools/gen_convert_goldens.py BUILD_DIR [CASE...]

Per case (CASES below): transformers makes the model from a config with
AutoModelForCausalLM.from_config (seed 0) and save_pretrained writes it;
its config.json, generation_config.json and the list of tensors its
safetensors files hold (tensors.txt: file, name, dtype, shape) go to
goldens/convert/CASE/.  BUILD_DIR/tools/conv-synth then writes the
directory qk's tests use (the same files and tensors with qk's
deterministic weights, lib/convert/conv_synth.h, and GPT-2's tokenizer from
goldens/vocab), convert_hf_to_gguf.py converts it with each option set, and
goldens/convert/CASE/expected.txt gets one line per output file:
"OPTIONS<TAB>FILE<TAB>SHA256" (OPTIONS as passed, FILE the name the converter
chose).  tests/test_convert.c rebuilds the directories and compares
qk-convert's files with these, without Python.

LLAMA_CPP (default /work/peers/llama.cpp) names the converter's checkout;
PYTHON the interpreter for it (default this one).
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch
from safetensors import safe_open
from transformers import AutoConfig, AutoModelForCausalLM

LLAMA_CPP = os.environ.get("LLAMA_CPP", "/work/peers/llama.cpp")
PYTHON = os.environ.get("PYTHON", sys.executable)
SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=50257, max_position_embeddings=256)

# name, model_type, dtype, extra config, max_shard_size, option sets.  The Qwen cases use
# goldens/convert/qwen2-tokenizer (tools/compact_qwen_tokenizer.py): transformers 5 gives qwen2 and
# qwen3 models Qwen2Tokenizer, which rebuilds the pre-tokenizer as Qwen2's, and GPT-2's vocabulary
# under it has a check hash the converter does not know (it refuses such a directory).
QWEN = {"vocab_size": 151936, "tie_word_embeddings": True}
CASES = [
    ("Llama-Tiny-v1.0-Chat", "llama", torch.bfloat16, {}, None,
     ["", "--outtype f16", "--outtype q8_0", "--vocab-only", "--split-max-size 4M"]),
    ("llama-f16", "llama", torch.float16, {}, None, [""]),
    ("llama-f32", "llama", torch.float32, {"tie_word_embeddings": True}, None, ["", "--outtype bf16"]),
    ("Mistral-Mini-7B", "mistral", torch.bfloat16, {}, None, [""]),
    ("Qwen2-Test-0.5B-Instruct", "qwen2", torch.bfloat16, QWEN, "12MB", ["", "--outtype q8_0"]),
    ("qwen3-tiny", "qwen3", torch.bfloat16, QWEN, None, ["--outtype f32"]),
    ("Mixtral-Tiny-v0.1", "mixtral", torch.bfloat16, {"num_local_experts": 4, "num_experts_per_tok": 2}, None,
     ["", "--outtype q8_0"]),
    ("Qwen3MoE-Tiny", "qwen3_moe", torch.bfloat16,
     {"vocab_size": 151936, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
      "norm_topk_prob": True}, None,
     ["", "--outtype q8_0"]),
    ("Qwen2MoE-Tiny", "qwen2_moe", torch.bfloat16,
     {"vocab_size": 151936, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
      "shared_expert_intermediate_size": 64}, None, ["", "--outtype q8_0"]),
    ("Gemma3-Tiny", "gemma3_text", torch.bfloat16,
     {"num_hidden_layers": 3, "head_dim": 16, "sliding_window": 16,
      "layer_types": ["sliding_attention", "sliding_attention", "full_attention"]}, None, ["", "--outtype q8_0"]),
    ("Phi3-Tiny", "phi3", torch.bfloat16,
     {"original_max_position_embeddings": 64,
      "rope_scaling": {"type": "longrope", "long_factor": [1.0, 1.3, 1.9, 2.8, 4.0, 5.5, 7.3, 9.4],
                       "short_factor": [1.0, 1.1, 1.2, 1.4, 1.7, 2.1, 2.6, 3.2]}}, None, ["", "--outtype q8_0"]),
    ("Gemma2-Tiny", "gemma2", torch.bfloat16,
     {"vocab_size": 384, "head_dim": 16, "sliding_window": 16}, None, ["", "--outtype q8_0"]),
    ("GptOss-Tiny", "gpt_oss", torch.bfloat16,
     {"num_local_experts": 4, "num_experts_per_tok": 2, "head_dim": 16, "sliding_window": 16,
      "layer_types": ["sliding_attention", "full_attention"]}, None, ["", "--outtype q8_0"]),
]
# Phi3MiniModel.set_vocab reads GPT-2's vocabulary only under this class (else it wants tokenizer.model)
TOKENIZER_CONFIG = {"Phi3-Tiny": {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                                  "model_max_length": 1024, "tokenizer_class": "GPT2Tokenizer",
                                  "unk_token": "<|endoftext|>"}}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def make_case(name, model_type, dtype, extra, shard, case_dir):
    os.makedirs(case_dir, exist_ok=True)
    cfg = AutoConfig.for_model(model_type, **{**SMALL, **extra})
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    with tempfile.TemporaryDirectory() as tmp:
        kw = {"max_shard_size": shard} if shard else {}
        model.save_pretrained(tmp, **kw)
        for f in ("config.json", "generation_config.json"):
            if os.path.exists(os.path.join(tmp, f)):
                shutil.copyfile(os.path.join(tmp, f), os.path.join(case_dir, f))
        lines = []
        for f in sorted(os.listdir(tmp)):
            if not f.endswith(".safetensors"):
                continue
            with safe_open(os.path.join(tmp, f), "pt") as st:
                for k in st.keys():
                    sl = st.get_slice(k)
                    lines.append("%s %s %s %s" % (f, k, sl.get_dtype(), " ".join(str(d) for d in sl.get_shape())))
        with open(os.path.join(case_dir, "tensors.txt"), "w") as out:
            out.write("\n".join(lines) + "\n")
    if name in TOKENIZER_CONFIG:
        with open(os.path.join(case_dir, "tokenizer_config.json"), "w") as out:
            json.dump(TOKENIZER_CONFIG[name], out, indent=2)
            out.write("\n")
    if model_type.startswith("qwen"):
        with open(os.path.join(case_dir, "tokenizer_dir"), "w") as out:
            out.write("../qwen2-tokenizer\n")
    if model_type == "gemma2":  # Gemma2Model.set_vocab reads tokenizer.model only
        with open(os.path.join(case_dir, "tokenizer_dir"), "w") as out:
            out.write("../spm-tokenizer\n")


def main():
    build = sys.argv[1]
    only = set(sys.argv[2:])
    for name, model_type, dtype, extra, shard, options in CASES:
        if only and name not in only:
            continue
        case_dir = os.path.join("goldens", "convert", name)
        make_case(name, model_type, dtype, extra, shard, case_dir)
        results = []
        with tempfile.TemporaryDirectory() as work:
            model_dir = os.path.join(work, name)
            subprocess.run([os.path.join(build, "tools", "conv-synth"), case_dir, model_dir], check=True)
            for opt in options:
                before = set(os.listdir(model_dir))
                subprocess.run([PYTHON, os.path.join(LLAMA_CPP, "convert_hf_to_gguf.py"), model_dir] + opt.split(),
                               check=True, capture_output=True)
                made = sorted(set(os.listdir(model_dir)) - before)
                for f in made:
                    results.append("%s\t%s\t%s" % (opt, f, sha256(os.path.join(model_dir, f))))
                    os.remove(os.path.join(model_dir, f))
                print(name, repr(opt), made, file=sys.stderr)
        with open(os.path.join(case_dir, "expected.txt"), "w") as out:
            out.write("\n".join(results) + "\n")


if __name__ == "__main__":
    main()
