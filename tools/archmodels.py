#!/usr/bin/env python3
"""archmodels.py - tiny random-weight models of every model family qk runs beyond
the Llama ones, and their reference logits from llama.cpp and transformers.

    archmodels.py make  OUT_DIR  [--llama DIR] [--text FILE]
    archmodels.py check OUT_DIR  --qk BUILD/qk

`make` writes, per family F (see FAMILIES):
  OUT_DIR/F/hf/                   transformers' save_pretrained of
                                  AutoModelForCausalLM.from_config(config, seed
                                  20), F32 safetensors, plus a 512-token BPE
                                  tokenizer.json (the byte alphabet and the
                                  first 255 merges of GPT-2's vocabulary, and
                                  <|endoftext|>)
  OUT_DIR/F/F-f32.gguf            llama.cpp's convert_hf_to_gguf.py --outtype f32
                                  of hf/ (see convert_patched below)
  OUT_DIR/F/llamacpp.kld          llama-perplexity -m F-f32.gguf -f TEXT -c 128
                                  --chunks 2 -b 128 -t 2 --kl-divergence-base
                                  (F16 KV cache, its default)
  OUT_DIR/F/transformers.kld      transformers' logits (eager attention, F32) of
                                  the same token chunks, written in
                                  llama-perplexity's base-file layout
  (experts) OUT_DIR/F/imatrix.gguf  llama-imatrix -c 128 --chunks 2 on F-f32.gguf
  OUT_DIR/F/quant.sha256          sha256 of llama-quantize [--imatrix imatrix.gguf]
                                  F-f32.gguf OUT PRESET 2 for the TINY_Q presets
  OUT_DIR/F/llamacpp-MXFP4_MOE.kld  llama-perplexity's base file of the MXFP4_MOE one
  OUT_DIR/SUMS                    sha256 of every file above
`check` runs qk-kld on each model and base file and prints the gates (mean KLD
<= 1e-4, same top >= 99 %); exit 1 when one fails.
`quant` makes the MoE models of QFAMILIES (rows of 256) in OUT_DIR/quant/ and
compares qk-quant's output with llama-quantize's for every preset of QPRESETS,
QIMATRIX (with llama-imatrix's matrix) and the --tensor-type patterns of QTT:
whole-file sha256 (OUT_DIR/quant/SUMS); exit 1 on a difference.

The converter is run with two changes, both to the vocabulary only (tensors and
hyper-parameters are converted as the converter does it):
  - the BPE pre-tokenizer is named "gpt-2": the converter recognises
    tokenizers by hashing the token ids of a test string, and the 512-token
    vocabulary's ids are nobody's;
  - gemma2 takes its vocabulary from tokenizer.json (_set_vocab_gpt2) instead
    of the tokenizer.model a real Gemma 2 has.
"""
import argparse
import hashlib
import json
import os
import runpy
import shutil
import struct
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
N_CTX, N_CHUNKS = 128, 2
SEED = 20

COMMON = dict(vocab_size=512, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
              head_dim=16, max_position_embeddings=4096, rms_norm_eps=1e-6,
              bos_token_id=511, eos_token_id=511, pad_token_id=None)

# family -> (transformers model_type, config overrides)
FAMILIES = {
    "qwen3moe": ("qwen3_moe", dict(num_hidden_layers=2, intermediate_size=64, num_experts=8,
                                   num_experts_per_tok=2, moe_intermediate_size=32,
                                   norm_topk_prob=True, decoder_sparse_step=1,
                                   tie_word_embeddings=False, rope_theta=1000000.0)),
    # layer 0 dense (decoder_sparse_step 2): transformers only; llama.cpp's
    # qwen3moe graph has MoE in every layer
    "qwen3moe-step2": ("qwen3_moe", dict(num_hidden_layers=2, intermediate_size=64, num_experts=4,
                                         num_experts_per_tok=2, moe_intermediate_size=32,
                                         norm_topk_prob=True, decoder_sparse_step=2,
                                         tie_word_embeddings=False)),
    "qwen2moe": ("qwen2_moe", dict(num_hidden_layers=2, intermediate_size=64, num_experts=4,
                                   num_experts_per_tok=2, moe_intermediate_size=32,
                                   shared_expert_intermediate_size=64, norm_topk_prob=False,
                                   tie_word_embeddings=False)),
    "mixtral": ("mixtral", dict(num_hidden_layers=2, intermediate_size=32, num_local_experts=4,
                                num_experts_per_tok=2, sliding_window=None,
                                tie_word_embeddings=False)),
    "gpt-oss": ("gpt_oss", dict(num_hidden_layers=2, intermediate_size=32, num_local_experts=4,
                                num_experts_per_tok=2, sliding_window=16,
                                layer_types=["sliding_attention", "full_attention"],
                                tie_word_embeddings=False,
                                rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0,
                                                 "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                                 "original_max_position_embeddings": 4096,
                                                 "truncate": False})),
    "gemma2": ("gemma2", dict(num_hidden_layers=2, intermediate_size=64, sliding_window=16,
                              query_pre_attn_scalar=16, attn_logit_softcapping=20.0,
                              final_logit_softcapping=10.0, hidden_activation="gelu_pytorch_tanh",
                              layer_types=["sliding_attention", "full_attention"])),
    "gemma3": ("gemma3_text", dict(num_hidden_layers=6, intermediate_size=64, sliding_window=16,
                                   query_pre_attn_scalar=16, hidden_activation="gelu_pytorch_tanh",
                                   layer_types=["sliding_attention"] * 5 + ["full_attention"],
                                   rope_parameters={
                                       "full_attention": {"rope_type": "linear", "factor": 8.0,
                                                          "rope_theta": 1000000.0},
                                       "sliding_attention": {"rope_type": "default",
                                                             "rope_theta": 10000.0}})),
    "phi3": ("phi3", dict(num_hidden_layers=2, intermediate_size=64, max_position_embeddings=256,
                          original_max_position_embeddings=64, sliding_window=None,
                          tie_word_embeddings=False, pad_token_id=None,
                          rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                                           "original_max_position_embeddings": 64,
                                           "short_factor": [1.0, 1.1, 1.2, 1.4, 1.7, 2.1, 2.6, 3.2],
                                           "long_factor": [1.0, 1.3, 1.9, 2.8, 4.0, 5.5, 7.3, 9.4]})),
}
HF_ONLY = {"qwen3moe-step2"}
# made from another family's directory (make_mxfp4), not from a config
DERIVED = {"gpt-oss-mxfp4": "gpt-oss"}

# `quant`: MoE models whose rows are multiples of 256 (the K- and IQ-quants'
# super-block), not committed: only llama-quantize's hashes are
QCOMMON = dict(vocab_size=512, hidden_size=256, num_attention_heads=4, num_key_value_heads=2,
               head_dim=64, max_position_embeddings=4096, rms_norm_eps=1e-6,
               bos_token_id=511, eos_token_id=511, pad_token_id=None, num_hidden_layers=2,
               tie_word_embeddings=False)
QFAMILIES = {
    "qwen3moe": ("qwen3_moe", dict(intermediate_size=512, num_experts=16, num_experts_per_tok=4,
                                   moe_intermediate_size=256, norm_topk_prob=True)),
    "qwen2moe": ("qwen2_moe", dict(intermediate_size=512, num_experts=4, num_experts_per_tok=2,
                                   moe_intermediate_size=256, shared_expert_intermediate_size=512)),
    "mixtral": ("mixtral", dict(intermediate_size=256, num_local_experts=8, num_experts_per_tok=2,
                                sliding_window=None)),
    "gpt-oss": ("gpt_oss", dict(intermediate_size=256, num_local_experts=4, num_experts_per_tok=2,
                                sliding_window=16, layer_types=["sliding_attention", "full_attention"])),
}
QPRESETS = ["F16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0", "Q3_K_M", "Q2_K", "IQ4_XS", "MXFP4_MOE"]
QIMATRIX = ["IQ4_XS", "Q4_K_M", "Q2_K", "IQ2_XXS", "IQ3_XXS"]
# --tensor-type patterns on the expert tensors (with Q4_K_M)
QTT = ["--tensor-type", "ffn_up_exps=q8_0", "--tensor-type", "blk\\.1\\.ffn_down_exps=q5_k",
       "--tensor-type", "ffn_gate_exps=iq4_nl"]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


# ---- tokenizer ---------------------------------------------------------------


def write_tokenizer(d, family):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    vocab_all = json.load(open(os.path.join(ROOT, "goldens/vocab/gpt2_vocab.json"), encoding="utf-8"))
    merges_all = [l.rstrip("\n") for l in open(os.path.join(ROOT, "goldens/vocab/gpt2_merges.txt"),
                                                encoding="utf-8") if l.strip() and not l.startswith("#")]
    n_merges = 255
    inv = {i: t for t, i in vocab_all.items()}
    vocab = {inv[i]: i for i in range(256 + n_merges)}
    merges = [tuple(m.split(" ")) for m in merges_all[:n_merges]]
    for a, b in merges:
        assert a + b in vocab and vocab[a + b] < 256 + n_merges
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>"])
    assert tok.token_to_id("<|endoftext|>") == 511
    tok.save(os.path.join(d, "tokenizer.json"))
    cfg = {"tokenizer_class": "GPT2Tokenizer" if family == "phi3" else "PreTrainedTokenizerFast",
           "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": None,
           "add_bos_token": False, "add_eos_token": False, "model_max_length": 4096,
           "clean_up_tokenization_spaces": False}
    json.dump(cfg, open(os.path.join(d, "tokenizer_config.json"), "w"), indent=2)


# ---- models ------------------------------------------------------------------


def make_hf(family, d, table=None, common=None):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    mt, over = (table or FAMILIES)[family]
    kw = dict(common or COMMON)
    kw.update(over)
    cfg = AutoConfig.for_model(mt, **kw)
    torch.manual_seed(SEED)
    m = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    cfg.architectures = [type(m).__name__]
    with torch.no_grad():
        g = torch.Generator().manual_seed(SEED)
        for name, p in sorted(m.named_parameters()):
            # transformers initialises norms to 0 or 1 and biases to 0: give
            # every parameter random values so that each one matters
            if "norm" in name or name.endswith("layernorm.weight"):
                base = 0.0 if family.startswith("gemma") else 1.0
                p.copy_(base + 0.2 * torch.randn(p.shape, generator=g))
            elif "sinks" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            elif "router" in name or name.endswith("mlp.gate.weight") or "block_sparse_moe.gate" in name:
                # a router 4x the others' scale keeps the chosen experts well apart,
                # so that rounding does not flip a choice between qk and the references
                p.copy_(torch.randn(p.shape, generator=g) * (6.0 / p.shape[-1] ** 0.5))
            elif p.dim() == 1 or name.endswith("bias"):
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
            else:
                fan_in = p.shape[-1] if not (family == "gpt-oss" and "experts" in name) else p.shape[-2]
                p.copy_(torch.randn(p.shape, generator=g) * (1.5 / fan_in ** 0.5))
    m.save_pretrained(d, safe_serialization=True)
    write_tokenizer(d, family)


FP4 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], np.float32)


def mxfp4_encode(w):
    """OCP MXFP4 of w [..., rows, cols] in gpt-oss's checkpoint layout: blocks
    [..., rows, cols/32, 16] (element 2j in byte j's low nibble, 2j+1 in its
    high one) and e8m0 scales [..., rows, cols/32] (2^(s-127)): the shared
    exponent floor(log2(amax)) - 2, each element rounded to the nearest FP4
    value (ties to the even code)."""
    g = w.reshape(*w.shape[:-1], w.shape[-1] // 32, 32).astype(np.float32)
    amax = np.abs(g).max(-1)
    e = np.where(amax > 0, np.floor(np.log2(np.maximum(amax, 1e-30))) - 2, -127).astype(np.int32)
    e = np.clip(e, -127, 127)
    x = g / np.ldexp(np.float32(1), e)[..., None]
    mag = np.minimum(np.abs(x), 6.0)
    d = np.abs(mag[..., None] - FP4)              # distance to each code
    code = np.argmin(d + (np.arange(8) % 2) * 1e-7, -1)  # ties to the even code
    code = code | np.where(x < 0, 8, 0)
    blocks = (code[..., 0::2] | (code[..., 1::2] << 4)).astype(np.uint8)
    return blocks, (e + 127).astype(np.uint8)


def make_mxfp4(src, d):
    """gpt-oss's F32 directory with its experts in MXFP4, as OpenAI ships gpt-oss."""
    import torch
    from safetensors.torch import load_file, save_file
    shutil.copytree(src, d)
    t = load_file(os.path.join(src, "model.safetensors"))
    out = {}
    for name, v in t.items():
        if name.endswith("mlp.experts.gate_up_proj") or name.endswith("mlp.experts.down_proj"):
            w = v.float().numpy().swapaxes(-1, -2)  # [E, out rows, in cols]
            b, sc = mxfp4_encode(w)
            out[name + "_blocks"] = torch.from_numpy(np.ascontiguousarray(b))
            out[name + "_scales"] = torch.from_numpy(np.ascontiguousarray(sc))
        else:
            out[name] = v
    save_file(out, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    cfg = json.load(open(os.path.join(d, "config.json")))
    cfg["quantization_config"] = {"quant_method": "mxfp4",
                                  "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                             "model.embed_tokens", "lm_head"]}
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=2)


def convert_patched(llama, hf, out):
    """convert_hf_to_gguf.py with the two vocabulary changes of the module docstring."""
    sys.path.insert(0, llama)
    import conversion.base as base
    import conversion.gemma as gemma
    base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
    gemma.Gemma2Model.set_vocab = lambda self: self._set_vocab_gpt2()
    argv = sys.argv
    sys.argv = ["convert_hf_to_gguf.py", hf, "--outtype", "f32", "--outfile", out]
    try:
        runpy.run_path(os.path.join(llama, "convert_hf_to_gguf.py"), run_name="__main__")
    except SystemExit as e:
        if e.code:
            raise
    finally:
        sys.argv = argv


def llamacpp_base(llama, gguf, text, out):
    exe = os.path.join(llama, "build/bin/llama-perplexity")
    cmd = [exe, "-m", gguf, "-f", text, "-c", str(N_CTX), "--chunks", str(N_CHUNKS), "-b", str(N_CTX),
           "-t", "2", "--kl-divergence-base", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-4000:])
        raise SystemExit(f"llama-perplexity failed on {gguf}")
    return r.stderr


def read_base_tokens(path):
    with open(path, "rb") as f:
        magic = f.read(8)
        assert magic == b"_logits_", path
        n_ctx, n_vocab, n_chunk = struct.unpack("<iii", f.read(12))
        toks = np.frombuffer(f.read(4 * n_ctx * n_chunk), np.int32).reshape(n_chunk, n_ctx)
    return n_ctx, n_vocab, toks


def quantize_rows(logits):
    """llama-perplexity's process_logits / log-prob quantization (perplexity.cpp)."""
    rows = []
    f32 = np.float32
    for l in logits.astype(f32):
        n_vocab = l.shape[0]
        max_logit = f32(l.max())
        min_logit = max(f32(l.min()), f32(max_logit - f32(16)))
        sum_exp = float(np.exp(l - max_logit).astype(np.float64).sum())
        min_log_prob = f32(f32(min_logit - max_logit) - f32(np.log(sum_exp)))
        scale = f32(f32(max_logit - min_logit) / f32(65535.0))
        q = np.zeros(2 * ((n_vocab + 1) // 2), np.uint16)
        if scale != 0:
            v = np.rint(f32(f32(1) / scale) * (l - min_logit).astype(f32)).astype(np.int64)
            q[:n_vocab] = np.where(l > min_logit, v, 0).astype(np.uint16)
        rows.append(struct.pack("<ff", scale, min_log_prob) + q.tobytes())
    return b"".join(rows)


def transformers_base(hf, llbase, out):
    import torch
    from transformers import AutoModelForCausalLM
    n_ctx, n_vocab, toks = read_base_tokens(llbase)
    m = AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32, attn_implementation="eager")
    # an MXFP4 checkpoint is dequantized (to bf16, exactly: FP4 times a power of 2); compute in F32
    m = m.float().eval()
    first = n_ctx // 2
    body = []
    with torch.no_grad():
        for c in range(toks.shape[0]):
            ids = torch.tensor(toks[c:c + 1].astype(np.int64))
            lg = m(ids).logits[0].float().numpy()
            body.append(quantize_rows(lg[first:n_ctx - 1]))
    with open(llbase, "rb") as f:
        head = f.read(20 + 4 * n_ctx * toks.shape[0])
    with open(out, "wb") as f:
        f.write(head)
        f.write(b"".join(body))


MOE = {"qwen3moe", "qwen2moe", "mixtral", "gpt-oss"}
# the tiny models' rows (64, 32) are no K-quant super-block: K presets take
# llama-quantize's fallback types, which is what these check
TINY_Q = [("Q8_0", False), ("Q4_K_M", False), ("MXFP4_MOE", False), ("Q4_0", False), ("IQ4_XS", True),
          ("Q2_K", True)]


def tiny_quant(a, fd, gg):
    """llama-imatrix, then llama-quantize's hashes (quant.sha256) of the tiny MoE model."""
    bin_ = os.path.join(a.llama, "build/bin")
    run([os.path.join(bin_, "llama-imatrix"), "-m", gg, "-f", a.text, "-c", "128", "--chunks", "2",
         "-t", "2", "-o", os.path.join(fd, "imatrix.gguf")])
    lines = []
    for preset, im in TINY_Q:
        out = os.path.join(fd, "q.gguf")
        opt = ["--imatrix", "imatrix.gguf"] if im else []
        run([os.path.join(bin_, "llama-quantize")] + opt + [os.path.basename(gg), "q.gguf", preset, "2"], cwd=fd)
        lines.append(f"{sha256(out)} {preset}{' imatrix.gguf' if im else ''}")
        if preset == "MXFP4_MOE":
            # the experts in MXFP4 against llama.cpp's own MXFP4 kernels
            llamacpp_base(a.llama, out, a.text, os.path.join(fd, "llamacpp-MXFP4_MOE.kld"))
        os.unlink(out)
    with open(os.path.join(fd, "quant.sha256"), "w") as f:
        f.write("\n".join(lines) + "\n")


def write_sums(out):
    sums = []
    for root, _, files in sorted(os.walk(out)):
        for fn in sorted(files):
            p = os.path.join(root, fn)
            if fn in ("SUMS", "README.md", "quant-moe.sha256") or fn.endswith(".log") or "/quant/" in p:
                continue
            sums.append(f"{sha256(p)}  ./{os.path.relpath(p, out)}")
    with open(os.path.join(out, "SUMS"), "w") as f:
        f.write("\n".join(sorted(sums, key=lambda s: s[66:])) + "\n")


def cmd_make(a):
    os.makedirs(a.out, exist_ok=True)
    fams = [f for f in list(FAMILIES) + list(DERIVED) if not a.only or f == a.only]
    # the HF directory and GGUF of every family first, then the references
    for fam in fams:
        fd = os.path.join(a.out, fam)
        shutil.rmtree(fd, ignore_errors=True)
        os.makedirs(fd)
        if fam in DERIVED:
            make_mxfp4(os.path.join(a.out, DERIVED[fam], "hf"), os.path.join(fd, "hf"))
        else:
            os.makedirs(os.path.join(fd, "hf"))
            make_hf(fam, os.path.join(fd, "hf"))
    for fam in fams:
        fd = os.path.join(a.out, fam)
        hf = os.path.join(fd, "hf")
        gg = os.path.join(fd, fam + "-f32.gguf")
        llb = os.path.join(fd, "llamacpp.kld")
        if fam in HF_ONLY:
            # no GGUF: tokens from the first family's llama.cpp run (same text and vocabulary)
            llb = os.path.join(a.out, "qwen3moe", "llamacpp.kld")
        else:
            # run in a child so each conversion starts from a clean import state
            subprocess.run([sys.executable, __file__, "convert", hf, gg, "--llama", a.llama], check=True)
            log = llamacpp_base(a.llama, gg, a.text, llb)
            with open(os.path.join(fd, "llama-perplexity.log"), "w") as f:
                f.write(log)
        transformers_base(hf, llb, os.path.join(fd, "transformers.kld"))
        if fam in MOE and fam not in HF_ONLY:
            tiny_quant(a, fd, gg)
    write_sums(a.out)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-3000:])
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return r


def cmd_quant(a):
    """llama-quantize against qk quant on the MoE models of QFAMILIES: whole-file sha256."""
    qd = os.path.join(a.out, "quant")
    os.makedirs(qd, exist_ok=True)
    bin_ = os.path.join(a.llama, "build/bin")
    lines, fails = [], 0
    for fam in QFAMILIES:
        fd = os.path.join(qd, fam)
        hf, gg = os.path.join(fd, "hf"), os.path.join(fd, fam + "-f32.gguf")
        if not os.path.exists(gg):
            shutil.rmtree(fd, ignore_errors=True)
            os.makedirs(hf)
            make_hf(fam, hf, QFAMILIES, QCOMMON)
            subprocess.run([sys.executable, __file__, "convert", hf, gg, "--llama", a.llama], check=True)
            run([os.path.join(bin_, "llama-imatrix"), "-m", gg, "-f", a.text, "-c", "128", "--chunks", "4",
                 "-t", "2", "-o", os.path.join(fd, "imatrix.gguf")])
        jobs = [(p, None, []) for p in QPRESETS] + [(p, "imatrix.gguf", []) for p in QIMATRIX]
        jobs.append(("Q4_K_M", None, QTT))
        for preset, im, extra in jobs:
            tag = preset + (".imatrix" if im else "") + (".tensor-type" if extra else "")
            outs = {}
            for tool in ("llama", "qk"):
                out = os.path.join(fd, f"{tag}.{tool}.gguf")
                opt = (["--imatrix", im] if im else []) + extra
                exe = [os.path.join(bin_, "llama-quantize")] if tool == "llama" else [a.qk, "quant", "-q"]
                # the imatrix is passed by its bare name: llama-quantize stores the string
                run(exe + opt + [os.path.basename(gg), os.path.basename(out), preset, "2"], cwd=fd)
                outs[tool] = sha256(out)
                if tool == "qk":
                    os.unlink(out)
            ok = outs["llama"] == outs["qk"]
            fails += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {fam:9s} {tag:22s} {outs['llama'][:16]} {outs['qk'][:16]}", flush=True)
            lines.append(f"{outs['llama']}  {fam} {tag}")
    with open(os.path.join(qd, "SUMS"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return 1 if fails else 0


def kld(qk, model, base, tokenizer=None):
    cmd = [qk, "kld", "-q", "-m", model, "--kld-base", base, "--json", "-t", "2"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    d = json.loads(r.stdout)
    return (d["kld"]["mean"], d["same_top_p_pct"]["value"]), ""


# gpt-oss-mxfp4's experts are computed natively, in MXFP4 times Q8_0-rounded
# activations (ggml's MXFP4 product, as llama.cpp computes them);
# transformers dequantizes them and computes in F32; llama.cpp's own logits of
# the converted GGUF are 4.5e-4 from transformers' the same way
HF_GATE = {"gpt-oss-mxfp4": 1e-3}


def cmd_check(a):
    fails = 0
    for fam in list(FAMILIES) + list(DERIVED):
        fd = os.path.join(a.out, fam)
        runs = [("GGUF vs llama.cpp", os.path.join(fd, fam + "-f32.gguf"), os.path.join(fd, "llamacpp.kld")),
                ("HF vs transformers", os.path.join(fd, "hf"), os.path.join(fd, "transformers.kld"))]
        for what, model, base in runs:
            if not os.path.exists(model):
                continue
            res, msg = kld(a.qk, model, base)
            if res is None:
                print(f"FAIL {fam:15s} {what}: {msg}")
                fails += 1
                continue
            bound = HF_GATE.get(fam, 1e-4) if what.startswith("HF") else 1e-4
            ok = res[0] <= bound and res[1] >= (95.0 if bound > 1e-4 else 99.0)
            fails += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {fam:15s} {what}: mean KLD {res[0]:.3e}, same top {res[1]:.3f} %")
    return 1 if fails else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["make", "check", "quant", "convert"])
    ap.add_argument("out")
    ap.add_argument("gguf", nargs="?")
    ap.add_argument("--llama", default=os.environ.get("LLAMA_CPP", "/work/peers/llama.cpp"))
    # relative to the repository root, where the tools run: llama-imatrix
    # stores the name in its output, and llama-quantize copies it on
    ap.add_argument("--text", default="goldens/stories260K-eval/eval-64k.txt")
    ap.add_argument("--qk", default=os.path.join(ROOT, "build/qk"))
    ap.add_argument("--only", help="make: this family alone")
    a = ap.parse_args()
    for k in ("out", "gguf", "qk"):
        if getattr(a, k):
            setattr(a, k, os.path.abspath(getattr(a, k)))
    os.chdir(ROOT)
    if a.cmd == "convert":
        convert_patched(a.llama, a.out, a.gguf)
        return 0
    return {"make": cmd_make, "check": cmd_check, "quant": cmd_quant}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
