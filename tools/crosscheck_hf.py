#!/usr/bin/env python3
"""crosscheck_hf.py - qk-run on quantized Hugging Face checkpoints against
the reference implementations (part of make crosscheck; tools/crosscheck.sh).

The checkpoints are made by the producers themselves from stories4M's HF
directory: llm-compressor's oneshot (compressed-tensors: FP8_DYNAMIC, FP8
static, FP8_BLOCK, W8A8, W8A16, W4A16, W4A16_ASYM, W4A8, W4AFP8, NVFP4A16,
NVFP4, MXFP4A16, GPTQ W4A16 with and without act order; calibrated on
TinyStories text; SpinQuant R1/R2/R4 Hadamard rotations alone and before
W4A16), mlx-lm's convert (MLX affine q4 / q8) when mlx is installed.
qk-quant --to's own rotated and W4A8 checkpoints are compared with
llm-compressor's tensor for tensor (SPIN_* and W4A8 rows).

For every checkpoint, over CHUNKS windows of 256 tokens of TinyStories text:
  reference logits: transformers with CompressedTensorsConfig(run_compressed
      =False) (weights dequantized by compressed-tensors, activations fake-
      quantized by compressed-tensors' forward_quantize; a transform_config's
      online transforms attached by compressed-tensors' apply_transform_config,
      which this transformers release does not call on load), for MLX
      mlx-lm's own model;
  qk logits: qk-run --tokens-in --logits-out --kv-type f32 (the stored bytes
      computed through the format table);
  mean KLD (base: the reference), same top-1.
Gates:
  weight-only schemes: mean KLD <= 1e-6.
  activation-quantized schemes, two checks:
   (1) layer exactness: every quantized Linear's product on the reference's
       own input (ckpt-tool --matmul) against the reference's output, max
       |diff| / max |y| <= 1e-5 (float summation order only);
   (2) the whole model within the reference's own noise floor: an A8
       scheme re-rounds every activation, so a 1-ulp change anywhere flips
       codes and the flips compound through the layers; the floor is the
       larger of the reference against itself with the token embeddings
       scaled by (1 +- 2^-23) and against itself with every F.linear summed
       in float64 (float64_linears: another summation order, as qk's).
       Gate: mean KLD <= max(1e-5, 4 x floor) and same top-1 >= min(99.5 %,
       floor's - 1 point).
  ModelOpt (FP8, NVFP4, MIXED_PRECISION: NVFP4 with FP8 down_proj and one
  float attention, see mixed_cfg): mtq.quantize + export_hf_checkpoint on
  CPU (NVFP4's fake quantization through modelopt_cpu_nvfp4); the reference
  is the exported checkpoint computed by ModelOpt's own quantize/dequantize
  functions (mo_model); gates as the A8 rows, the floor also taken with
  every input_scale moved by 1 ulp (see main).
  INT8 activations: qk follows vLLM's dynamic_scaled_int8_quant (scale
  amax / 127, codes in [-127, 127]); compressed-tensors' fake quantization
  uses amax / 127.5 (calculate_qparams: bit_range / 2) and codes down to
  -128.  The gates then use the reference with vLLM's rule in place of
  compressed-tensors' for the activations (weights still dequantized by
  compressed-tensors); the KLD against compressed-tensors' own rule is
  reported beside it.  Asymmetric INT8 activations (W8A8_ASYM): vLLM's
  dynamic_scaled_int8_azp_quant (csrc/quantization/compressed_tensors/
  int8_quant_kernels.cu: the token's own min and max, scale = (max - min) /
  255, azp = nearbyint(-128 - min / scale), code = sat8(rn(x / scale) + azp);
  its cutlass_scaled_mm_azp subtracts azp x the weight's column sums, so the
  product is that of (code - azp) x scale); compressed-tensors'
  calculate_qparams widens the range to include 0 (min <= 0 <= max) and its
  _quantize rounds x / scale + zero_point (a tie then goes to the even sum,
  not to the even quotient plus the zero point).

Prints one line per check and writes BUILD/crosscheck-hf.md (the table).
"""
import argparse
import contextlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
S4M = os.path.join(ROOT, "goldens/models/stories4M/hf-f32")
GGUF = os.path.join(ROOT, "goldens/models/stories4M/stories4M-f32.gguf")
TEXT = os.path.join(ROOT, "../shared/models/text/tinystories-valid.txt")
CTX = 256
RESULTS = []


def check(name, ok, detail=""):
    RESULTS.append(ok)
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)


# ---- tokens and logits -------------------------------------------------------


def tokens(qk):
    out = subprocess.run([qk, "run", "--tokenize", "-m", GGUF, "--no-bos", "-f", TEXT], capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out)


def windows(ids, n, offset=0):
    return [[1] + ids[offset + c * (CTX - 1):offset + (c + 1) * (CTX - 1)] for c in range(n)]


def read_qklogits(path):
    import zstandard
    b = open(path, "rb").read()
    assert b[:8] == b"QKLOGITS"
    _, dt, nv, nt = struct.unpack("<IIII", b[8:24])
    ds, = struct.unpack("<Q", b[24:32])
    raw = zstandard.ZstdDecompressor().decompressobj().decompress(b[32:32 + ds])
    return np.frombuffer(raw, np.float32 if dt == 0 else np.float16).reshape(nt, nv).astype(np.float32)


def qk_logits(qk, model, chunk, tmp, extra=()):
    tf, lf = os.path.join(tmp, "t.txt"), os.path.join(tmp, "l.bin")
    with open(tf, "w") as f:
        f.write(" ".join(map(str, chunk)))
    subprocess.run([qk, "run", "-m", model, "--tokenizer", GGUF, "--tokens-in", tf, "-n", "0", "--kv-type", "f32",
                    "--logits-out", lf, "-q", *extra], check=True, capture_output=True)
    return read_qklogits(lf)


def lsm(x):
    x = x.astype(np.float64)
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def compare(refs, ours):
    """Mean KLD(ref || ours) and same top-1 over every row but each window's last."""
    ks, ts = [], []
    for r, o in zip(refs, ours):
        lp, lq = lsm(r[:-1]), lsm(o[:-1])
        ks.append((np.exp(lp) * (lp - lq)).sum(-1))
        ts.append(r[:-1].argmax(-1) == o[:-1].argmax(-1))
    k, t = np.concatenate(ks), np.concatenate(ts)
    return float(k.mean()), 100.0 * float(t.mean()), int(k.size)


# ---- the producers ---------------------------------------------------------------


def id_processor(vocab):
    """A tokenizer that only names the ids: the calibration rows are token
    ids already (qk's tokenization of the text), but oneshot wants one."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast
    tk = Tokenizer(WordLevel({f"<{i}>": i for i in range(vocab)}, unk_token="<0>"))
    return PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<0>", pad_token="<0>", bos_token="<1>",
                                   eos_token="<2>")


def calib_dataset(ids, n=32, seq=128):
    from datasets import Dataset
    half = len(ids) // 2  # calibrate on the second half; evaluate on the first
    rows = [[1] + ids[half + i * seq:half + (i + 1) * seq - 1] for i in range(n)]
    return Dataset.from_dict({"input_ids": rows, "attention_mask": [[1] * len(r) for r in rows]})


CT_SCHEMES = [
    # name, preset, modifier, needs calibration, activation-quantized
    ("FP8_DYNAMIC", "FP8_DYNAMIC", "rtn", False, True),
    ("FP8", "FP8", "rtn", True, True),
    ("FP8_BLOCK", "FP8_BLOCK", "rtn", False, True),
    ("FP8_DYNAMIC_KV8", "FP8_DYNAMIC", "rtn", True, True),  # kv_cache_scheme FP8 (k_scale, v_scale)
    ("W8A8", "W8A8", "rtn", False, True),
    ("W8A16", "W8A16", "rtn", False, False),
    ("W4A16", "W4A16", "rtn", False, False),
    ("W4A16_ASYM", "W4A16_ASYM", "rtn", False, False),
    ("W4A8", "W4A8", "rtn", False, True),
    ("W4AFP8", "W4AFP8", "rtn", False, True),
    ("NVFP4A16", "NVFP4A16", "rtn", False, False),
    ("NVFP4", "NVFP4", "rtn", True, True),
    ("MXFP4A16", "MXFP4A16", "rtn", False, False),
    ("MXFP4", "MXFP4", "rtn", False, True),
    ("MXFP8A16", "MXFP8A16", "rtn", False, False),
    ("MXFP8", "MXFP8", "rtn", False, True),
    ("GPTQ_W4A16", "W4A16", "gptq", True, False),
    ("GPTQ_W4A16_GIDX", "W4A16", "gptq", True, False),  # GPTQ_W4A16 plus a weight_g_idx (see add_gidx)
    ("GPTQ_W8A16", "W8A16", "gptq", True, False),
    # SpinQuantModifier(R1, R2, R4, hadamard), R4's block 256 (intermediate_size 768 is not a power of two:
    # its largest power-of-two divisor, qk-quant --rotate's rule); "none": the rotations alone
    ("SPIN_F32", "none", "spin", False, False),
    ("SPIN_W4A16", "W4A16", "spin", False, False),
    # schemes no preset names: config_groups of CUSTOM (llm-compressor's QuantizationModifier takes them as they are)
    ("FP8_WONLY", "FP8_WONLY", "rtn", False, False),
    ("W8A8_ASYM", "W8A8_ASYM", "rtn", False, True),
    ("W4A16_G32", "W4A16_G32", "rtn", False, False),
    ("W4A16_G64", "W4A16_G64", "rtn", False, False),
    ("W4A16_ASYM_G32", "W4A16_ASYM_G32", "rtn", False, False),
    ("W4A16_ASYM_G64", "W4A16_ASYM_G64", "rtn", False, False),
    ("AWQ_W8A16", "W8A16_ASYM", "awq", True, False),  # llm-compressor's AWQ, 8-bit (pack-quantized; see make_ct)
]
SPIN_R4 = 256
# qk-quant --to's output compared with llm-compressor's checkpoint of the same name, tensor for tensor
QK_TWINS = {"SPIN_F32": ("f32", True), "SPIN_W4A16": ("ct-w4a16", True), "W4A8": ("ct-w4a8", False),
            "W4A16": ("ct-w4a16", False)}


def _w(bits, typ, strategy, sym=True, group=None):
    d = {"num_bits": bits, "type": typ, "strategy": strategy, "symmetric": sym, "dynamic": False}
    if group:
        d["group_size"] = group
    return d


CUSTOM = {
    # FP8 E4M3 weights per output channel, float activations (no input_activations)
    "FP8_WONLY": {"weights": _w(8, "float", "channel")},
    # INT8 W8A8 with asymmetric dynamic per-token activations (a zero point per token)
    "W8A8_ASYM": {"weights": _w(8, "int", "channel"),
                  "input_activations": {"num_bits": 8, "type": "int", "strategy": "token", "symmetric": False,
                                        "dynamic": True}},
    "W4A16_G32": {"weights": _w(4, "int", "group", True, 32)},
    "W4A16_G64": {"weights": _w(4, "int", "group", True, 64)},
    "W4A16_ASYM_G32": {"weights": _w(4, "int", "group", False, 32)},
    "W4A16_ASYM_G64": {"weights": _w(4, "int", "group", False, 64)},
    # AWQ's 8-bit: asymmetric int8 per group of 128, as llm-compressor's AWQ examples' W4A16_ASYM at 8 bits
    "W8A16_ASYM": {"weights": _w(8, "int", "group", False, 128)},
}


def add_gidx(d):
    """A weight_g_idx on every pack-quantized module of d (in place): input
    feature k in group g_idx[k], a fixed shuffle that keeps every group
    group_size features, and actorder "group" in the config, as act-order
    checkpoints store it (llm-compressor's GPTQ here takes only the static and
    weight orders, which store no g_idx).  The codes stay as quantized, so
    the model is another (worse) one, the same for compressed-tensors and qk:
    both apply scale[n, g_idx[k]] to column k."""
    import torch
    from safetensors.torch import load_file, save_file
    f = os.path.join(d, "model.safetensors")
    t = load_file(f)
    cfg = json.load(open(os.path.join(d, "config.json")))
    wa = cfg["quantization_config"]["config_groups"]["group_0"]["weights"]
    g = wa["group_size"]
    rng = np.random.default_rng(18)
    for name in [k for k in t if k.endswith(".weight_shape")]:
        k = int(t[name][1])
        gi = rng.permutation(np.arange(k) // g).astype(np.int32)
        t[name[:-len("weight_shape")] + "weight_g_idx"] = torch.from_numpy(gi)
    save_file(t, f, metadata={"format": "pt"})
    wa["actorder"] = "group"
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=2)


def gidx_model(d):
    """The reference of an act-order (weight_g_idx) pack-quantized checkpoint.
    compressed-tensors 0.19 no longer reads weight_g_idx (its actorder
    "group" was removed; the config does not even validate), so the reference
    is the float model with each quantized module's weight dequantized as
    vLLM's GPTQ/Marlin act-order kernels and compressed-tensors <= 0.9's
    dequantize(..., g_idx) did: W[n, k] = q[n, k] * scale[n, g_idx[k]]
    (symmetric), the codes unpacked by compressed-tensors' own
    unpack_from_int32.  On a checkpoint whose g_idx is k // group_size this
    gives ct_model's weights bit for bit (checked below)."""
    import glob
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM
    from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32
    t = {}
    for f in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
        t.update(load_file(f))
    wa = json.load(open(os.path.join(d, "config.json")))["quantization_config"]["config_groups"]["group_0"]["weights"]
    assert wa["symmetric"] and wa["strategy"] == "group", wa
    m = AutoModelForCausalLM.from_pretrained(S4M, dtype=torch.float32)
    mods = dict(m.named_modules())
    n = 0
    for k in [k for k in t if k.endswith(".weight_packed")]:
        p = k[:-len(".weight_packed")]
        shape = torch.Size([int(v) for v in t[p + ".weight_shape"]])
        q = unpack_from_int32(t[k], wa["num_bits"], shape).to(torch.float32)
        s = t[p + ".weight_scale"].to(torch.float32)
        gi = t[p + ".weight_g_idx"].long() if p + ".weight_g_idx" in t else torch.arange(shape[1]) // wa["group_size"]
        with torch.no_grad():
            mods[p].weight.copy_(q * s[:, gi])
        n += 1
    assert n, f"{d}: no pack-quantized module"
    m.eval()
    return m


def gidx_self_check(d):
    """gidx_model's rule on a checkpoint without g_idx equals compressed-tensors' weights."""
    import torch
    a, b = dict(ct_model(d).named_parameters()), dict(gidx_model(d).named_parameters())
    return all(torch.equal(a[k], b[k]) for k in b)


def make_ct(name, preset, how, calib, out, ids):
    import torch
    from transformers import AutoModelForCausalLM
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import GPTQModifier, QuantizationModifier
    model = AutoModelForCausalLM.from_pretrained(S4M, dtype=torch.float32)
    sch = ({"config_groups": {"group_0": dict(targets=["Linear"], **CUSTOM[preset])}} if preset in CUSTOM else
           {"scheme": preset})
    if how == "spin":
        from llmcompressor.modifiers.transform import SpinQuantModifier

        class Spin(SpinQuantModifier):  # R4 on blocks of SPIN_R4 (transform_block_size would also set R1's)
            def _create_r4_scheme(self):
                sc = super()._create_r4_scheme()
                sc.head_dim = SPIN_R4
                return sc
        rec = [Spin(rotations=["R1", "R2", "R4"], transform_type="hadamard")]
        if preset != "none":
            rec.append(QuantizationModifier(targets="Linear", scheme=preset, ignore=["lm_head"]))
    elif how == "rtn":
        kv = ({"kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False,
                                   "symmetric": True}} if name.endswith("_KV8") else {})
        rec = QuantizationModifier(targets="Linear", ignore=["lm_head"], **sch, **kv)
    elif how == "awq":
        # llm-compressor's AWQ (the activation-aware scales folded into the norms and the preceding
        # projections, its grid search on the calibration text), then its quantization: pack-quantized
        # tensors (AutoAWQ's own GEMM packing is 4-bit only, so this is the 8-bit AWQ layout there is)
        from llmcompressor.modifiers.transform.awq import AWQModifier
        from llmcompressor.pipelines.cache import IntermediatesCache
        if not torch.cuda.is_available():  # its grid search pins the cached inputs (CUDA only): a speed-up alone
            IntermediatesCache.pin_memory = lambda self, *a, **k: None
        rec = [AWQModifier(), QuantizationModifier(targets="Linear", ignore=["lm_head"], **sch)]
    else:
        rec = GPTQModifier(targets="Linear", scheme=preset, ignore=["lm_head"])
    kw = dict(dataset=calib_dataset(ids), num_calibration_samples=32, max_seq_length=128,
              processor=id_processor(model.config.vocab_size)) if calib else {}
    oneshot(model=model, recipe=rec, **kw)
    model.save_pretrained(out, save_compressed=True)
    if name.endswith("_GIDX"):
        add_gidx(out)


def _load(d):
    from safetensors.numpy import load_file
    t = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            t.update(load_file(os.path.join(d, f)))
    return t


def _pack_n(vals, order=None, bits=4):
    """[R, N] bits-wide values -> [R, N/per] int32 words (per = 32 / bits), field f of word p = column
    per * p + order[f]."""
    per = 32 // bits
    r, n = vals.shape
    order = order or list(range(per))
    v = vals.reshape(r, n // per, per)[:, :, order].astype(np.uint32)
    w = np.zeros((r, n // per), np.uint32)
    for f in range(per):
        w |= v[:, :, f] << np.uint32(bits * f)
    return w.view(np.int32)


def _unpack_k(words, k, bits=4):
    """CT weight_packed [N, K/per] int32 -> unsigned codes [N, K] (LSB first)."""
    per, mask = 32 // bits, np.uint32((1 << bits) - 1)
    w = words.view(np.uint32)
    out = np.stack([(w >> np.uint32(bits * j)) & mask for j in range(per)], -1)
    return out.reshape(w.shape[0], -1)[:, :k].astype(np.uint8)


def repack(src, out, kind, v2=False):
    """The weights of a compressed-tensors pack-quantized checkpoint (group
    g; symmetric 4 or 8 bits for GPTQ, its weight_g_idx as g_idx with
    desc_act; asymmetric 4 bits for AWQ) in AutoGPTQ (v1, or v2 with
    checkpoint_format gptq_v2) or AutoAWQ GEMM tensors: the same codes,
    scales and zero points, so the reference is the source's (no GPTQ/AWQ
    runtime on CPU)."""
    from safetensors.numpy import save_file
    t = _load(src)
    cfg = json.load(open(os.path.join(src, "config.json")))
    wa = cfg["quantization_config"]["config_groups"]["group_0"]["weights"]
    g, bits = wa["group_size"], wa["num_bits"]
    assert kind == "gptq" or bits == 4, "AutoAWQ GEMM is 4-bit"
    per = 32 // bits
    res, gidx = {}, False
    for name, v in t.items():
        if not name.endswith(".weight_packed"):
            if not any(name.endswith(x) for x in (".weight_scale", ".weight_shape", ".weight_zero_point",
                                                  ".weight_g_idx")):
                res[name] = v
            continue
        mod = name[:-len(".weight_packed")]
        n, k = (int(x) for x in t[mod + ".weight_shape"])
        q = _unpack_k(v, k, bits)                            # [N, K] unsigned (value + 2^(bits-1))
        sc = t[mod + ".weight_scale"].astype(np.float32)     # [N, K/g]
        if kind == "gptq":
            words = np.zeros((k // per, n), np.uint32)
            for j in range(per):
                words |= q[:, j::per].T.astype(np.uint32) << np.uint32(bits * j)
            res[mod + ".qweight"] = words.view(np.int32)
            zero = 1 << (bits - 1)                           # v1 stores zero - 1, v2 the zero itself
            res[mod + ".qzeros"] = _pack_n(np.full((k // g, n), zero if v2 else zero - 1, np.uint8), bits=bits)
            res[mod + ".scales"] = np.ascontiguousarray(sc.T)
            if mod + ".weight_g_idx" in t:
                res[mod + ".g_idx"] = np.ascontiguousarray(t[mod + ".weight_g_idx"].astype(np.int32))
                gidx = True
        else:
            zp = t[mod + ".weight_zero_point"].view(np.uint32)  # [N/8, K/g], field n % 8 of word n / 8
            z = np.stack([(zp >> np.uint32(4 * j)) & np.uint32(15) for j in range(8)], 1).reshape(-1, zp.shape[1])[:n]
            order = [0, 2, 4, 6, 1, 3, 5, 7]
            res[mod + ".qweight"] = _pack_n(np.ascontiguousarray(q.T), order)         # [K, N/8]
            res[mod + ".qzeros"] = _pack_n(np.ascontiguousarray(z.T.astype(np.uint8)), order)  # [K/g, N/8]
            res[mod + ".scales"] = np.ascontiguousarray(sc.T)
    os.makedirs(out)
    save_file(res, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    del cfg["quantization_config"]
    cfg["quantization_config"] = ({"quant_method": "gptq", "bits": bits, "group_size": g, "desc_act": gidx, "sym": True,
                                   "checkpoint_format": "gptq_v2" if v2 else "gptq"} if kind == "gptq" else
                                  {"quant_method": "awq", "bits": 4, "group_size": g, "zero_point": True,
                                   "version": "gemm"})
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)


def modelopt_cpu_nvfp4():
    """ModelOpt's NVFP4 fake quantization on CPU.  Its dynamic block
    quantizer (tensor_quant.py _dynamic_block_quantize_impl) runs only on
    CUDA (the Triton fp4_fake_quant_block or the cuda_ext_mx extension; on CPU
    it asserts "amax must be a CUDA tensor").  On CPU tensors the same two-level
    rule is run here by ModelOpt's own export functions instead:
    NVFP4QTensor.quantize(x, block_size, weights_scaling_factor_2 = amax /
    (6 * 448)) (qtensor/nvfp4_tensor.py: per-block scale = block amax / (6 x
    that), E4M3 (clamped to [2^-9, 448]), codes by _cast_fp4, round half to
    even), then NVFP4QTensor.dequantize (code x block scale x global scale):
    the functions that write the exported checkpoint's weights.  The CUDA
    kernel (kernels/quantization/gemm/fp4_kernel_hopper.py) differs only for
    blocks whose E4M3 scale would fall under 2^-9 (it takes 1.0 below 1e-5)."""
    import torch
    import modelopt.torch.quantization.tensor_quant as tq
    from modelopt.torch.quantization.qtensor.nvfp4_tensor import NVFP4QTensor
    orig = getattr(tq, "_qk_orig_dbq", tq.dynamic_block_quantize_op)
    tq._qk_orig_dbq = orig

    def dbq(inputs, block_size, amax, num_bits, exponent_bits, scale_num_bits, scale_exponent_bits):
        if inputs.is_cuda or (num_bits, exponent_bits, scale_num_bits, scale_exponent_bits) != (4, 2, 8, 4):
            return orig(inputs, block_size, amax, num_bits, exponent_bits, scale_num_bits, scale_exponent_bits)
        shape = inputs.shape
        x = inputs.float().reshape(-1, shape[-1])
        q, sf, sf2 = NVFP4QTensor.quantize(x, block_size, weights_scaling_factor_2=amax.float().amax() / (6.0 * 448.0))
        y = q.dequantize(dtype=torch.float32, scale=sf, double_scale=sf2, block_sizes={-1: block_size})
        return y.reshape(shape).to(inputs.dtype)
    tq.dynamic_block_quantize_op = dbq


def mixed_cfg(float_pat="*layers.1.self_attn.*"):
    """A ModelOpt MIXED_PRECISION recipe: NVFP4_DEFAULT_CFG, with every
    down_proj FP8 per tensor (FP8_DEFAULT_CFG's quantizers) and the modules
    of float_pat (layer 1's attention) left in float (later entries of quant_cfg override earlier
    ones); export_hf_checkpoint writes it as quant_algo MIXED_PRECISION with
    a quantized_layers map."""
    import copy
    import modelopt.torch.quantization as mtq
    cfg = copy.deepcopy(mtq.NVFP4_DEFAULT_CFG)
    fp8 = {"num_bits": (4, 3), "axis": None}
    cfg["quant_cfg"] += [{"quantizer_name": "*mlp.down_proj.weight_quantizer", "cfg": fp8},
                         {"quantizer_name": "*mlp.down_proj.input_quantizer", "cfg": fp8},
                         {"quantizer_name": float_pat, "enable": False}]
    return cfg


def make_modelopt(cfg, out, ids):
    """NVIDIA ModelOpt on CPU: mtq.quantize (calibrated on the text; NVFP4's
    fake quantization through modelopt_cpu_nvfp4), then export_hf_checkpoint.
    The export is not the calibrated model: it gives q/k/v (and gate/up) one
    input scale and one weight global scale, as the fused serving kernels
    need, and re-quantizes their weights with it; the reference is therefore
    built from the exported checkpoint (mo_model)."""
    import torch
    import modelopt.torch.quantization as mtq
    from modelopt.torch.export import export_hf_checkpoint
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_pretrained(S4M, dtype=torch.float32)
    half = len(ids) // 2
    calib = [[1] + ids[half + i * 127:half + (i + 1) * 127] for i in range(16)]

    def fwd(mm):
        with torch.no_grad():
            for c in calib:
                mm(torch.tensor([c]))
    modelopt_cpu_nvfp4()
    mtq.quantize(m, getattr(mtq, cfg) if isinstance(cfg, str) else cfg, fwd)
    export_hf_checkpoint(m, export_dir=out)


def mo_model(d, iscale=1.0):
    """The reference of a ModelOpt checkpoint d: the float model with every
    exported tensor, each quantized Linear's weight dequantized and its input
    fake-quantized by ModelOpt's own functions on CPU: NVFP4 (uint8 weight,
    weight_scale E4M3, weight_scale_2): NVFP4QTensor.dequantize for the
    weight; for the input NVFP4QTensor.quantize(x, 16, block scales,
    weights_scaling_factor_2 = input_scale) then .dequantize, the block scales
    as ModelOpt's CUDA fake quantization takes them (fp4_kernel_hopper.py
    fp8_quantize_scale: E4M3 of block amax / (6 x input_scale), saturated at
    448, no 2^-9 floor; a block whose scale rounds to 0 gives zeros, as vLLM's
    cvt_warp_fp16_to_fp4 does); FP8 (float8_e4m3fn weight,
    weight_scale): weight x weight_scale, the input by tensor_quant's
    scaled_e4m3_impl with amax = input_scale x 448 (its per-tensor FP8 fake
    quantization, eager on CPU).  A module with float weights stays float.
    iscale: every input_scale multiplied by it (the noise floor's 1-ulp change
    of the scale, see main)."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM
    from modelopt.torch.quantization.qtensor.nvfp4_tensor import NVFP4QTensor
    from modelopt.torch.quantization.tensor_quant import scaled_e4m3_impl
    t = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            t.update(load_file(os.path.join(d, f)))
    m = AutoModelForCausalLM.from_pretrained(S4M, dtype=torch.float32)
    mods = dict(m.named_modules())
    sd = m.state_dict()
    nq = 0
    for k, v in t.items():
        if k.endswith((".weight_scale", ".weight_scale_2", ".input_scale")):
            continue
        p = k[:-len(".weight")] if k.endswith(".weight") else None
        if p and p + ".weight_scale_2" in t:  # NVFP4
            w = mods[p].weight
            q = NVFP4QTensor(tuple(w.shape), torch.float32, v)
            wd = q.dequantize(dtype=torch.float32, scale=t[p + ".weight_scale"], double_scale=t[p + ".weight_scale_2"],
                              block_sizes={-1: 16})
            isc = t[p + ".input_scale"].float() * iscale

            def pre(mod, args, isc=isc):
                x = args[0]
                xf = x.reshape(-1, x.shape[-1]).float()
                sf = torch.clamp(xf.abs().view(xf.shape[0], -1, 16).amax(-1) / (6.0 * isc), max=448.0)
                sf = sf.to(torch.float8_e4m3fn)  # fp8_quantize_scale: E4M3 of amax / (6 x input_scale), no 2^-9 floor
                zero = sf.float() == 0
                q, sf, sf2 = NVFP4QTensor.quantize(xf, 16, torch.where(zero, 1.0, sf.float()).to(torch.float8_e4m3fn), isc)
                y = q.dequantize(dtype=torch.float32, scale=sf, double_scale=sf2, block_sizes={-1: 16})
                return ((y.view(xf.shape[0], -1, 16) * ~zero.unsqueeze(-1)).reshape(x.shape),)
        elif p and v.dtype == torch.float8_e4m3fn:  # FP8 per tensor
            wd = v.float() * t[p + ".weight_scale"].float()
            amax = t[p + ".input_scale"].float() * iscale * 448.0

            def pre(mod, args, amax=amax):
                return (scaled_e4m3_impl(args[0], amax),)
        else:
            assert k in sd, f"{d}: {k} is not a tensor of the model"
            with torch.no_grad():
                sd[k].copy_(v.float())
            continue
        with torch.no_grad():
            mods[p].weight.copy_(wd)
        mods[p].register_forward_pre_hook(pre)
        nq += 1
    assert nq, f"{d}: no quantized module"
    m.eval()
    return m


def mo_layer_check(tool, d, m, chunk):
    """Each quantized Linear's product (qk, ckpt-tool --matmul) on the reference's
    own input: the largest difference relative to max |ref| and the fraction of
    outputs off by more than 1e-5 of it."""
    import torch
    caps, hooks = {}, []
    for n, mod in m.named_modules():
        if isinstance(mod, torch.nn.Linear) and "layers." in n and mod._forward_pre_hooks:
            hooks.append(mod.register_forward_hook(
                lambda mod, inp, o, n=n: caps.__setitem__(n, (inp[0].detach().reshape(-1, inp[0].shape[-1]).numpy().copy(),
                                                              o.detach().reshape(-1, o.shape[-1]).numpy().copy()))))
    with torch.no_grad():
        m(torch.tensor([chunk[:64]]))
    for h in hooks:
        h.remove()
    worst, off, total = 0.0, 0, 0
    for n, (x, y) in caps.items():
        o = subprocess.run([tool, "--matmul", d, n + ".weight", str(x.shape[0])],
                           input=np.ascontiguousarray(x, np.float32).tobytes(), capture_output=True, check=True).stdout
        o = np.frombuffer(o, np.float32).reshape(y.shape)
        rel = np.abs(o - y) / max(np.abs(y).max(), 1e-30)
        worst, off, total = max(worst, float(rel.max())), off + int((rel > 1e-5).sum()), total + rel.size
    return worst, len(caps), off / max(total, 1)


def make_bnb(mode, out):
    """bitsandbytes through transformers on CPU: BitsAndBytesConfig NF4 / FP4
    (double quantization) or LLM.int8, then save_pretrained."""
    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig
    q = (BitsAndBytesConfig(load_in_8bit=True) if mode == "int8" else
         BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=mode, bnb_4bit_use_double_quant=True,
                            bnb_4bit_compute_dtype=torch.float32))
    m = AutoModelForCausalLM.from_pretrained(S4M, dtype=torch.float32, quantization_config=q, device_map="cpu")
    m.save_pretrained(out)


def bnb_logits(d, chunks, mode):
    """The reference: the bitsandbytes model.  4-bit: its Linear4bit layers
    computed as F.linear(x, dequantize_4bit(W)) in float32 (bitsandbytes' own
    dequantization; its CPU kernels compute in lower precision).  LLM.int8:
    bitsandbytes' MatMul8bitLt itself, one token at a time, so that the
    outlier columns are each token's own as qk takes them (bitsandbytes
    takes the batch's)."""
    import torch
    import bitsandbytes as bnb
    import bitsandbytes.functional as BF
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, device_map="cpu").eval()
    out = []
    with torch.no_grad():
        if mode != "int8":
            for mod in m.modules():
                if isinstance(mod, bnb.nn.Linear4bit):
                    w = BF.dequantize_4bit(mod.weight.data, mod.weight.quant_state).float()
                    mod.forward = lambda x, w=w, b=mod.bias: torch.nn.functional.linear(x, w, b)
            return torch_logits(m, chunks)
        for c in chunks:
            past, rows = None, []
            for tok in c:
                o = m(torch.tensor([[tok]]), past_key_values=past, use_cache=True)
                past = o.past_key_values
                rows.append(o.logits[0, -1].float().numpy())
            out.append(np.stack(rows))
    return out


def make_mlx(bits, out, mode="affine", group=64):
    """mlx-lm's convert (affine with group 64, or mode mxfp4/mxfp8/nvfp4 with
    their own groups).  It loads a tokenizer, which the
    HF directory has none of (qk tokenizes with the GGUF file's vocabulary),
    so it reads a copy with a placeholder word-level tokenizer of the same
    size; the placeholder's files are not kept in out."""
    from mlx_lm import convert
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast
    with tempfile.TemporaryDirectory(prefix="qk-mlx-src-") as src:
        for f in os.listdir(S4M):
            os.symlink(os.path.abspath(os.path.join(S4M, f)), os.path.join(src, f))
        n = json.load(open(os.path.join(S4M, "config.json")))["vocab_size"]
        tk = Tokenizer(WordLevel({f"<{i}>": i for i in range(n)}, unk_token="<0>"))
        PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<0>").save_pretrained(src)
        placeholder = set(os.listdir(src)) - set(os.listdir(S4M))
        convert(src, mlx_path=out, quantize=True, q_bits=bits, q_group_size=group, q_mode=mode)
    for f in placeholder:
        if os.path.exists(os.path.join(out, f)):
            os.remove(os.path.join(out, f))


# ---- the references ------------------------------------------------------------------


def vllm_int8_hooks(model):
    """Replace compressed-tensors' INT8 input fake quantization by vLLM's rule
    (dynamic_scaled_int8_quant / dynamic_scaled_int8_azp_quant), in float32."""
    import torch

    def pre(mod, args):
        x = args[0]
        if mod._qk_sym:
            amax = x.abs().amax(-1, keepdim=True)
            q = torch.where(amax > 0, torch.round(torch.clamp(x * (127.0 / amax), -128, 127)), torch.zeros_like(x))
            return (q * (amax / 127.0),)
        mx = torch.clamp(x.amax(-1, keepdim=True), min=torch.finfo(torch.float32).tiny)
        mn = torch.clamp(x.amin(-1, keepdim=True), max=torch.finfo(torch.float32).max)
        s = (mx - mn) / 255.0
        z = torch.round(-128.0 - mn / s)
        q = torch.clamp(torch.round(x / s) + z, -128, 127)
        return ((q - z) * s,)

    return swap_input_quant(model, lambda mod, ia: ia.type == "int" and ia.num_bits == 8 and ia.dynamic, pre,
                            lambda mod, ia: setattr(mod, "_qk_sym", ia.symmetric))


def swap_input_quant(model, takes, pre, note=None):
    """For every module whose compressed-tensors scheme quantizes its input as
    takes(mod, input_activations) says: that fake quantization turned off and
    the forward pre-hook pre in its place (note(mod, input_activations) first,
    where given).  The number of modules."""
    mods = []
    for mod in model.modules():
        sc = getattr(mod, "quantization_scheme", None)
        ia = sc.input_activations if sc is not None else None
        if ia is not None and takes(mod, ia):
            mods.append((mod, sc, ia))
    for mod, sc, ia in mods:  # the modules may share one scheme object: change it after the walk
        if note:
            note(mod, ia)
        sc.input_activations = None
        mod.register_forward_pre_hook(pre)
    return len(mods)


def vllm_nvfp4_hooks(model):
    """Replace compressed-tensors' NVFP4 input fake quantization (per block of
    16: scale = e4m3(global * (amax / 6)), code = e2m1(x / (scale / global)))
    by vLLM's rule, which qk follows (kernels/wq_act.c qk_wq_act_nv4; vLLM
    cvt_warp_fp16_to_fp4: SF = global * (amax * (1/6)), sf = e4m3(SF), code =
    e2m1(x * (1 / (sf * (1/global))))), in float32: the two round the same
    real numbers through different reciprocals, so a code now and then sits
    on the other side of a rounding boundary.  The E2M1 rounding (to nearest,
    ties to even, saturating at 6) is the same in both."""
    import torch

    def e2m1(v):
        a = torch.clamp(v.abs(), max=6.0)
        step = torch.where(a < 2.0, 0.5, torch.where(a < 4.0, 1.0, 2.0))
        return torch.sign(v) * torch.round(a / step) * step  # torch.round: half to even

    def pre(mod, args):
        x = args[0]
        g = mod.input_global_scale.detach().float().reshape(())
        xb = x.float().reshape(*x.shape[:-1], x.shape[-1] // 16, 16)
        amax = xb.abs().amax(-1, keepdim=True)
        sf = torch.clamp(g * (amax * torch.tensor(1.0 / 6.0, dtype=torch.float32)), -448.0, 448.0)
        sf = sf.to(torch.float8_e4m3fn).float()
        rg = torch.tensor(1.0, dtype=torch.float32) / g
        os_ = torch.where(sf != 0, 1.0 / (sf * rg), torch.zeros_like(sf))
        return ((e2m1(xb * os_) * (sf / g)).reshape(x.shape).to(x.dtype),)

    return swap_input_quant(model, lambda mod, ia: ia.type == "float" and ia.num_bits == 4 and ia.group_size == 16
                            and hasattr(mod, "input_global_scale"), pre)


def exact_fp4_unpack(on):
    """compressed-tensors' NVFP4 decompressor unpacks the codes to bfloat16
    (nvfp4/helpers.py unpack_fp4_from_uint8's default dtype), so its
    dequantized weight, value * (scale / global_scale), is rounded to
    bfloat16: a 2^-9 relative error qk does not make.  on: unpack to float32
    instead (the same formula, exact)."""
    import torch
    import compressed_tensors.compressors.nvfp4.base as nb
    from compressed_tensors.compressors.nvfp4.helpers import unpack_fp4_from_uint8
    nb.unpack_fp4_from_uint8 = ((lambda a, m, n, dtype=None: unpack_fp4_from_uint8(a, m, n, dtype=torch.float32))
                                if on else unpack_fp4_from_uint8)


def online_transforms(m, d):
    """The online part of d's transform_config (R4's pre-hook on down_proj's input) attached by
    compressed-tensors; the fused parts are in the stored weights already."""
    from compressed_tensors.transform import TransformConfig, apply_transform_config
    tc = json.load(open(os.path.join(d, "config.json"))).get("quantization_config", {}).get("transform_config")
    if not tc:
        return
    tc = TransformConfig.model_validate(tc)
    for sc in tc.config_groups.values():
        sc.apply = [a for a in sc.apply if a.is_online()]
    apply_transform_config(m, tc)


def plain_model(d):
    """A rotated float checkpoint (a quantization_config holding only transform_config, which transformers
    cannot load as a quantized model): the Llama model with d's weights."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, LlamaConfig
    cfg = json.load(open(os.path.join(d, "config.json")))
    cfg.pop("quantization_config")
    m = AutoModelForCausalLM.from_config(LlamaConfig(**cfg), dtype=torch.float32)
    sd = {k: v for k, v in load_file(os.path.join(d, "model.safetensors")).items() if "_input." not in k}
    m.load_state_dict(sd, strict=True)
    m.eval()
    online_transforms(m, d)
    return m


def tensor_twins(a, b):
    """(tensors compared, names differing) between two checkpoints' safetensors."""
    ta, tb = _load(a), _load(b)
    if set(ta) != set(tb):
        return len(set(ta) | set(tb)), sorted(set(ta) ^ set(tb))
    return len(ta), [k for k in ta if ta[k].dtype != tb[k].dtype or not np.array_equal(ta[k], tb[k])]


def ct_model(d, vllm_int8=False, exact_fp4=True, vllm_fp4=False):
    import torch
    from transformers import AutoModelForCausalLM, CompressedTensorsConfig
    if json.load(open(os.path.join(d, "config.json")))["quantization_config"].get("format") is None:
        return plain_model(d)
    exact_fp4_unpack(exact_fp4)
    m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32,
                                             quantization_config=CompressedTensorsConfig(run_compressed=False))
    online_transforms(m, d)
    # some decompressors (NVFP4) hand back bfloat16 weights: compute in float32 as the model's dtype says
    m.float()
    m.eval()
    if vllm_int8:
        vllm_int8_hooks(m)
    if vllm_fp4:
        vllm_nvfp4_hooks(m)
    return m


def torch_logits(m, chunks, scale=None):
    """The logits of m on each chunk; scale: the token embeddings multiplied by
    it (a float), or for scale = ("ulp", seed) each element by 1 +- 2^-23 with
    a random sign (seeded): a 1-ulp change that RMSNorm does not divide out."""
    import torch
    out = []
    with torch.no_grad():
        for i, c in enumerate(chunks):
            ids = torch.tensor([c])
            if scale is None:
                out.append(m(ids).logits[0].float().numpy())
            else:
                e = m.model.embed_tokens(ids)
                if isinstance(scale, tuple):
                    g = torch.Generator().manual_seed(scale[1] * 1000 + i)
                    e = e * (1.0 + (torch.randint(0, 2, e.shape, generator=g) * 2 - 1).float() * 2.0**-23)
                else:
                    e = e * scale
                out.append(m(inputs_embeds=e).logits[0].float().numpy())
    return out


@contextlib.contextmanager
def float64_linears():
    """Every F.linear of the reference (its Linear layers, whatever fake
    quantization wraps them, and the lm_head) summed in float64 and rounded
    to float32 once: the same products in another summation order, the one
    way qk's products differ from the reference's.  The float-order half of
    the A8 noise floor: NVFP4's coarse grid hardly moves under a 1-ulp
    change of the embeddings (floor 3e-14 on stories4M), but a code on a
    rounding boundary inside a layer flips with the order of a sum."""
    import torch
    f = torch.nn.functional
    orig = f.linear

    def lin(x, w, b=None):
        return orig(x.double(), w.double(), None if b is None else b.double()).to(x.dtype)

    f.linear = lin
    try:
        yield
    finally:
        f.linear = orig


def mlx_logits(d, chunks):
    import mlx.core as mx
    from pathlib import Path
    from mlx_lm.utils import load_model  # the model alone: make_mlx keeps no tokenizer
    model = load_model(Path(d))[0]
    return [np.array(model(mx.array([c]))[0].astype(mx.float32)) for c in chunks]


def layer_check(tool, d, m, chunk):
    """Every quantized Linear's product on the reference's own input."""
    import torch
    ins, caps, hooks = {}, {}, []
    for n, mod in m.named_modules():
        if isinstance(mod, torch.nn.Linear) and "layers." in n:
            # the input as the layer gets it, before any pre-hook of the reference's (vllm_*_hooks) quantizes it
            hooks.append(mod.register_forward_pre_hook(
                lambda mod, inp, n=n: ins.__setitem__(n, inp[0].detach().reshape(-1, inp[0].shape[-1]).numpy()),
                prepend=True))
            hooks.append(mod.register_forward_hook(
                lambda mod, inp, out, n=n: caps.__setitem__(n, (ins[n], out.detach().reshape(-1, out.shape[-1]).numpy()))))
    with torch.no_grad():
        m(torch.tensor([chunk[:64]]))
    for h in hooks:
        h.remove()
    worst = 0.0
    for n, (x, y) in caps.items():
        o = subprocess.run([tool, "--matmul", d, n + ".weight", str(x.shape[0])],
                           input=np.ascontiguousarray(x, np.float32).tobytes(), capture_output=True, check=True).stdout
        o = np.frombuffer(o, np.float32).reshape(y.shape)
        worst = max(worst, float(np.abs(o - y).max() / max(np.abs(y).max(), 1e-30)))
    return worst, len(caps)


# ---- the run ---------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--chunks", type=int, default=3)
    ap.add_argument("--keep", help="keep the checkpoints in this directory")
    ap.add_argument("--only", help="comma-separated scheme names")
    ap.add_argument("--make-only", action="store_true", help="only write the checkpoints (into --keep)")
    a = ap.parse_args()
    qk = os.path.abspath(os.path.join(a.build, "qk"))
    tool = os.path.abspath(os.path.join(a.build, "tools", "ckpt-tool"))
    ids = tokens(qk)
    chunks = windows(ids, a.chunks)
    work = a.keep or tempfile.mkdtemp(prefix="qk-crosscheck-hf-")
    os.makedirs(work, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="qk-xhf-")
    only = set(a.only.split(",")) if a.only else None
    rows = []
    try:
        for name, preset, how, calib, act in CT_SCHEMES:
            if only and name not in only:
                continue
            d = os.path.join(work, name)
            if not os.path.isdir(d):
                try:
                    make_ct(name, preset, how, calib, d, ids)
                except Exception as e:  # noqa: BLE001 - report what the producer raised
                    check(f"{name}: llm-compressor writes it", False, f"{type(e).__name__}: {e}")
                    continue
            if a.make_only:
                continue
            ours = [qk_logits(qk, d, c, tmp) for c in chunks]
            int8 = name in ("W8A8", "W8A8_ASYM", "W4A8")
            if name.endswith("_GIDX"):  # compressed-tensors no longer reads g_idx: see gidx_model
                src = os.path.join(work, name[:-len("_GIDX")])
                if os.path.isdir(src):
                    check(f"{name}: the reference's g_idx rule on {os.path.basename(src)} (no g_idx) equals "
                          "compressed-tensors' weights", gidx_self_check(src))
                m = gidx_model(d)
            else:
                m = ct_model(d, vllm_int8=int8, vllm_fp4=act and "NVFP4" in name)
            ref = torch_logits(m, chunks)
            kld, top, npos = compare(ref, ours)
            row = {"scheme": name, "kld": kld, "top": top, "n": npos, "act": act}
            if int8 or (act and "NVFP4" in name):
                row["kld_ct_rule"] = compare(torch_logits(ct_model(d), chunks), ours)[0]
            fp4 = "NVFP4" in name
            if fp4:
                row["kld_ct_bf16"] = compare(torch_logits(ct_model(d, vllm_int8=int8, exact_fp4=False), chunks), ours)[0]
            if not act:
                extra = (f"; against compressed-tensors' bfloat16 decompression {row['kld_ct_bf16']:.3g}" if fp4 else "")
                check(f"{name}: weight-only, qk vs transformers+compressed-tensors", kld <= 1e-6,
                      f"mean KLD {kld:.3g} over {npos} positions (gate 1e-6), same top-1 {top:.3f} %{extra}")
            else:
                worst, nl = layer_check(tool, d, m, chunks[0])
                check(f"{name}: each of {nl} quantized products on the reference's inputs", worst <= 1e-5,
                      f"max |qk - ref| / max |ref| = {worst:.3g} (gate 1e-5)")
                fl = [compare(ref, torch_logits(m, chunks, 1.0 + s * 2.0**-23)) for s in (1, -1)]
                with float64_linears():
                    fl.append(compare(ref, torch_logits(m, chunks)))
                floor, ftop = max(f[0] for f in fl), min(f[1] for f in fl)
                row.update(floor=floor, ftop=ftop, layer=worst)
                gate_k, gate_t = max(1e-5, 4 * floor), min(99.5, ftop - 1.0)
                rule = ("range widened to 0, rounding after the zero point" if name.endswith("_ASYM") else
                        "x / (scale / global)" if fp4 else "amax/127.5")
                extra = f", vs compressed-tensors' own {rule} rule {row['kld_ct_rule']:.3g}" if "kld_ct_rule" in row else ""
                if fp4:
                    extra += f", vs compressed-tensors' bfloat16 weights {row['kld_ct_bf16']:.3g}"
                check(f"{name}: A8 whole model within the reference's noise floor", kld <= gate_k and top >= gate_t,
                      f"mean KLD {kld:.3g} (floor {floor:.3g}, gate {gate_k:.3g}), same top-1 {top:.3f} % "
                      f"(floor {ftop:.3f} %, gate {gate_t:.3f} %) over {npos} positions{extra}")
            rows.append(row)
            if name in QK_TWINS:
                scheme, rot = QK_TWINS[name]
                qd = os.path.join(work, "QK_" + name)
                shutil.rmtree(qd, ignore_errors=True)
                subprocess.run([qk, "quant", "--to", scheme, *(["--rotate", "hadamard"] if rot else []), S4M, qd, "-q"],
                               check=True)
                n, diff = tensor_twins(qd, d)
                check(f"QK_{name}: qk-quant --to {scheme}{' --rotate hadamard' if rot else ''} vs llm-compressor's "
                      f"{name}, tensor for tensor", not diff, f"{n - len(diff)} of {n} identical"
                      + (f"; differ: {', '.join(diff[:4])}" if diff else ""))
        for name, src, kind, v2 in (("GPTQ_V1", "W4A16", "gptq", False), ("AWQ_GEMM", "W4A16_ASYM", "awq", False),
                                    ("GPTQ_V2", "W4A16", "gptq", True),
                                    ("GPTQ_V1_ACTORDER", "GPTQ_W4A16_GIDX", "gptq", False),
                                    ("GPTQ_V2_ACTORDER", "GPTQ_W4A16_GIDX", "gptq", True),
                                    ("GPTQ_V1_8BIT", "GPTQ_W8A16", "gptq", False),
                                    ("GPTQ_V2_8BIT", "GPTQ_W8A16", "gptq", True)):
            if only and name not in only:
                continue
            sd, d = os.path.join(work, src), os.path.join(work, name)
            if not os.path.isdir(sd):
                print(f"note: {name} repacks {src}, which was not made in this run")
                continue
            if not os.path.isdir(d):
                repack(sd, d, kind, v2)
            if a.make_only:
                continue
            ours = [qk_logits(qk, d, c, tmp) for c in chunks]
            kld, top, npos = compare(torch_logits(gidx_model(sd) if src.endswith("_GIDX") else ct_model(sd), chunks), ours)
            check(f"{name}: {src}'s codes as {kind.upper()} tensors, qk vs transformers+compressed-tensors on {src}",
                  kld <= 1e-6, f"mean KLD {kld:.3g} over {npos} positions (gate 1e-6), same top-1 {top:.3f} %")
            rows.append({"scheme": name, "kld": kld, "top": top, "n": npos, "act": False})
        try:
            import bitsandbytes  # noqa: F401
            have_bnb = True
        except ImportError:
            have_bnb = False
            print("note: bitsandbytes not installed: its checkpoints are covered by tests/test_ckpt.c's fixtures")
        for name, mode in (("BNB_NF4", "nf4"), ("BNB_FP4", "fp4"), ("BNB_INT8", "int8")) if have_bnb else ():
            if only and name not in only:
                continue
            d = os.path.join(work, name)
            if not os.path.isdir(d):
                make_bnb(mode, d)
            if a.make_only:
                continue
            ours = [qk_logits(qk, d, c, tmp) for c in chunks]
            kld, top, npos = compare(bnb_logits(d, chunks, mode), ours)
            if mode != "int8":
                check(f"{name}: weight-only, qk vs bitsandbytes' dequantization", kld <= 1e-6,
                      f"mean KLD {kld:.3g} over {npos} positions (gate 1e-6), same top-1 {top:.3f} %")
            else:  # int8 activations: the A8 gates of the compressed-tensors rows (W8A8's floor: 6e-5)
                check(f"{name}: LLM.int8 (threshold 6.0), qk vs bitsandbytes token by token", kld <= 4e-4 and top >= 98.5,
                      f"mean KLD {kld:.3g}, same top-1 {top:.3f} % over {npos} positions (gate 4e-4 = 4 x W8A8's "
                      f"floor, 98.5 %)")
            rows.append({"scheme": name, "kld": kld, "top": top, "n": npos, "act": mode == "int8"})
        try:
            import modelopt  # noqa: F401
            have_mo = True
        except ImportError:
            have_mo = False
            print("note: nvidia-modelopt not installed: ModelOpt checkpoints are covered by tests/test_ckpt.c's fixtures")
        for name, cfg in ((("MO_FP8", "FP8_DEFAULT_CFG"), ("MO_NVFP4", "NVFP4_DEFAULT_CFG"), ("MO_MIXED", "mixed"))
                          if have_mo else ()):
            if only and name not in only:
                continue
            d = os.path.join(work, name)
            if not os.path.isdir(d):
                make_modelopt(mixed_cfg() if cfg == "mixed" else cfg, d, ids)
            if a.make_only:
                continue
            m = mo_model(d)
            ref = torch_logits(m, chunks)
            ours = [qk_logits(qk, d, c, tmp) for c in chunks]
            kld, top, npos = compare(ref, ours)
            # qk quantizes the inputs by vLLM's rules (x * (1 / input_scale), the NVFP4 block scale from
            # input_scale's inverse); ModelOpt's fake quantization multiplies by 448 / amax (FP8) or divides
            # by the block scale times input_scale (NVFP4) and multiplies back, so an element now and then
            # lands on the other side of a rounding boundary: one step of that element in its output.
            # Gate: at most 1 % of the outputs off by more than 1e-5 x max |ref|.
            worst, nl, frac = mo_layer_check(tool, d, m, chunks[0])
            check(f"{name}: each of {nl} quantized products on ModelOpt's inputs", frac <= 0.01,
                  f"{100 * frac:.3f} % of the outputs off by more than 1e-5 x max |ref| (max {worst:.3g})")
            # The floor: the reference against itself with the embeddings scaled by 1 +- 2^-23 (as the
            # compressed-tensors rows), and with every input_scale moved by 1 ulp.  The second is the size of
            # the rule's difference: vLLM (qk) multiplies by the reciprocal of the scale (1 / input_scale, the
            # NVFP4 block's 1 / (sf x (1 / g))), ModelOpt divides by sf x input_scale (FP8: multiplies by
            # 448 / amax), so the effective scale of every element differs by about an ulp and the codes within
            # an ulp of a rounding boundary flip.  NVFP4's grid is so coarse that the embedding scaling alone
            # flips no code at all here (floor ~1e-14), while qk's products on the reference's own inputs
            # agree to 5e-7 (the check above).
            fl = [compare(ref, torch_logits(m, chunks, 1.0 + sg * 2.0**-23)) for sg in (1, -1)]
            fl += [compare(ref, torch_logits(mo_model(d, 1.0 + sg * 2.0**-23), chunks)) for sg in (1, -1)]
            floor, ftop = max(f[0] for f in fl), min(f[1] for f in fl)
            gate_k, gate_t = max(1e-5, 4 * floor), min(99.5, ftop - 1.0)
            check(f"{name}: qk vs ModelOpt's functions on the exported checkpoint, within the reference's noise floor",
                  kld <= gate_k and top >= gate_t,
                  f"mean KLD {kld:.3g} (floor {floor:.3g}, gate {gate_k:.3g}), same top-1 {top:.3f} % "
                  f"(floor {ftop:.3f} %, gate {gate_t:.3f} %) over {npos} positions")
            rows.append({"scheme": name, "kld": kld, "top": top, "n": npos, "act": True, "floor": floor, "ftop": ftop,
                         "layer": worst})
        try:
            import mlx_lm  # noqa: F401
            have_mlx = True
        except ImportError:
            have_mlx = False
            print("note: mlx-lm not installed: the MLX checkpoints are covered by tests/test_ckpt.c's fixtures")
        mlx_modes = [(f"MLX_Q{b}", b, "affine", 64) for b in (2, 3, 4, 5, 6, 8)] + [
            ("MLX_MXFP4", 4, "mxfp4", 32), ("MLX_MXFP8", 8, "mxfp8", 32), ("MLX_NVFP4", 4, "nvfp4", 16)]
        for name, bits, mode, group in (mlx_modes if have_mlx else ()):
            if only and name not in only:
                continue
            d = os.path.join(work, name)
            if not os.path.isdir(d):
                try:
                    make_mlx(bits, d, mode, group)
                except Exception as e:  # noqa: BLE001 - report what the producer raised
                    check(f"{name}: mlx-lm writes it", False, f"{type(e).__name__}: {e}")
                    continue
            if a.make_only:
                continue
            ours = [qk_logits(qk, d, c, tmp) for c in chunks]
            kld, top, npos = compare(mlx_logits(d, chunks), ours)
            # mlx computes in the checkpoint's float32 with its own kernels (quantized_matmul)
            check(f"{name}: weight-only, qk vs mlx-lm", kld <= 1e-6,
                  f"mean KLD {kld:.3g} over {npos} positions (gate 1e-6), same top-1 {top:.3f} %")
            rows.append({"scheme": name, "kld": kld, "top": top, "n": npos, "act": False})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    with open(os.path.join(a.build, "crosscheck-hf.md"), "w") as f:
        f.write("| scheme | mean KLD vs reference | same top-1 % | positions | A8 noise floor | layer max rel |\n")
        f.write("|---|---|---|---|---|---|\n")
        for r in rows:
            fl = f"{r['floor']:.3g} ({r['ftop']:.2f} %)" if r.get("floor") is not None else "-"
            la = f"{r['layer']:.2g}" if r.get("layer") is not None else "-"
            f.write(f"| {r['scheme']} | {r['kld']:.3g} | {r['top']:.3f} | {r['n']} | {fl} | {la} |\n")
    npass, nfail = sum(RESULTS), len(RESULTS) - sum(RESULTS)
    print(f"{npass} passed, {nfail} failed")
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
