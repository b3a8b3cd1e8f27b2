"""mkseeds.py - writes the seed corpora of the config, tokenizer, imatrix and
--tensor-type harnesses (tests/fuzz/mkseeds.sh runs it with the project's
virtualenv and qk built; the outputs are committed, this is not part of any
build).  Every seed is small (a few KiB) so that the fuzzers stay fast.

usage: python mkseeds.py QK_BINARY CORPUS_DIR
"""
import json, os, struct, subprocess, sys, tempfile

import numpy as np
import gguf
from safetensors.numpy import save

QK, OUT = sys.argv[1], sys.argv[2]
ROOT = os.path.dirname(os.path.abspath(__file__)) + "/../.."
rng = np.random.default_rng(7)


def put(sub, name, data):
    os.makedirs(f"{OUT}/{sub}", exist_ok=True)
    with open(f"{OUT}/{sub}/{name}", "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# ---- hfconfig: config.json \0 hf_quant_config.json \0 model.safetensors ------------
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32,
          "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
          "num_key_value_heads": 1, "head_dim": 16, "vocab_size": 16, "rms_norm_eps": 1e-5,
          "tie_word_embeddings": True, "torch_dtype": "float32"}
L = "model.layers.0."
SHAPES = {"model.embed_tokens.weight": (16, 32), L + "input_layernorm.weight": (32,),
          L + "self_attn.q_proj.weight": (32, 32), L + "self_attn.k_proj.weight": (16, 32),
          L + "self_attn.v_proj.weight": (16, 32), L + "self_attn.o_proj.weight": (32, 32),
          L + "post_attention_layernorm.weight": (32,), L + "mlp.gate_proj.weight": (32, 32),
          L + "mlp.up_proj.weight": (32, 32), L + "mlp.down_proj.weight": (32, 32), "model.norm.weight": (32,)}


def hfseed(name, config, st, hqc=b""):
    c = json.dumps(config).encode() if isinstance(config, dict) else config
    put("hfconfig", name, c + b"\0" + hqc + b"\0" + st)


dense = {k: (rng.standard_normal(s) * 0.1).astype(np.float16) for k, s in SHAPES.items()}
CONFIG["torch_dtype"] = "float16"
# two tensors only, beside a module of a layout qk does not write, or under a fixture's config
mini = {k: dense[k] for k in (L + "self_attn.q_proj.weight", "model.norm.weight")}
with tempfile.TemporaryDirectory() as t:
    os.makedirs(f"{t}/src")
    json.dump(CONFIG, open(f"{t}/src/config.json", "w"))
    open(f"{t}/src/model.safetensors", "wb").write(save(dense, metadata={"format": "pt"}))
    hfseed("dense-f16", CONFIG, save(dense))
    for scheme, extra in [("ct-fp8", []), ("ct-fp8-block", ["--group", "16"]), ("ct-w8a8", []),
                          ("ct-w4a16", ["--group", "32"]), ("ct-w4a16", ["--group", "16", "--asym"]),
                          ("ct-nvfp4", []), ("ct-mxfp4", []), ("modelopt-nvfp4", []),
                          ("mlx-q4", ["--group", "32"]), ("mlx-q3", ["--group", "32"]), ("mlx-q8", ["--group", "32"]),
                          ("ct-w4a8", ["--group", "32"]), ("ct-w4a16", ["--group", "32", "--rotate", "hadamard"]),
                          ("f32", ["--rotate", "hadamard"])]:
        d = f"{t}/{scheme}{''.join(extra)}"
        subprocess.run([QK, "quant", "-q", "--to", scheme, *extra, f"{t}/src", d], check=True)
        hqc = open(f"{d}/hf_quant_config.json", "rb").read() if os.path.exists(f"{d}/hf_quant_config.json") else b""
        hfseed(os.path.basename(d), open(f"{d}/config.json", "rb").read(), open(f"{d}/model.safetensors", "rb").read(), hqc)

# layouts qk reads but does not write: one quantized module each, beside the dense rest
M = L + "mlp.down_proj."
N = K = 32


def with_module(parts):
    return save({**mini, **parts})


i32 = lambda *s: rng.integers(-2**31, 2**31, size=s, dtype=np.int64).astype(np.int32)
f16 = lambda *s: (rng.random(s) * 0.02 + 0.001).astype(np.float16)
hfseed("awq", {**CONFIG, "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 16,
                                                  "zero_point": True, "version": "gemm"}},
       with_module({M + "qweight": i32(K, N // 8), M + "qzeros": i32(K // 16, N // 8), M + "scales": f16(K // 16, N)}))
hfseed("gptq-act-order", {**CONFIG, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 16,
                                                             "desc_act": True, "sym": True}},
       with_module({M + "qweight": i32(K // 8, N), M + "qzeros": i32(K // 16, N // 8), M + "scales": f16(K // 16, N),
                    M + "g_idx": (np.arange(K) % (K // 16)).astype(np.int32)}))
hfseed("gptq-8bit", {**CONFIG, "quantization_config": {"quant_method": "gptq", "bits": 8, "group_size": 32,
                                                        "desc_act": False, "sym": True}},
       with_module({M + "qweight": i32(K // 4, N), M + "qzeros": i32(K // 32, N // 4), M + "scales": f16(K // 32, N)}))
hfseed("bnb-int8", {**CONFIG, "quantization_config": {"quant_method": "bitsandbytes", "load_in_8bit": True}},
       with_module({M + "weight": rng.integers(-127, 128, size=(N, K)).astype(np.int8),
                    M + "SCB": (rng.random(N) * 2).astype(np.float32)}))
qs = json.dumps({"quant_type": "nf4", "blocksize": 64, "dtype": "float32", "shape": [N, K]}).encode()
hfseed("bnb-nf4", {**CONFIG, "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True,
                                                      "bnb_4bit_quant_type": "nf4"}},
       with_module({M + "weight": rng.integers(0, 256, size=(N * K // 2, 1)).astype(np.uint8),
                    M + "weight.absmax": (rng.random(N * K // 64) + 0.5).astype(np.float32),
                    M + "weight.quant_map": np.linspace(-1, 1, 16).astype(np.float32),
                    M + "weight.quant_state.bitsandbytes__nf4": np.frombuffer(qs, dtype=np.uint8).copy()}))
hfseed("fp8-block", {**CONFIG, "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                                        "weight_block_size": [16, 16]}},
       with_module({M + "weight": rng.integers(0, 0x7e, size=(N, K)).astype(np.uint8),
                    M + "weight_scale_inv": (rng.random((N // 16, K // 16)) + 0.1).astype(np.float32)}
                   ).replace(b'"U8"', b'"F8_E4M3"'))
# the fixture configs (most of them claim more than the dense weights hold: refused)
fx = f"{ROOT}/tests/fixtures/quantcfg"
for f in sorted(os.listdir(fx)):
    body = open(f"{fx}/{f}", "rb").read()
    if f.endswith(".hf_quant_config.json"):
        hfseed("fixture-" + f, CONFIG, save(mini), body)
    else:
        hfseed("fixture-" + f, {**CONFIG, **json.loads(body)}, save(mini))

# ---- tokenizer: tokenizer.json [\0 text] -------------------------------------------
vocab = json.load(open(f"{ROOT}/goldens/vocab/gpt2_vocab.json"))
keep = {k: v for k, v in vocab.items() if v < 320}
merges = []
for line in open(f"{ROOT}/goldens/vocab/gpt2_merges.txt", encoding="utf-8"):
    p = line.rstrip("\n").split(" ")
    if len(p) == 2 and p[0] in keep and p[1] in keep and p[0] + p[1] in keep:
        merges.append(line.rstrip("\n"))
endoftext = [{"id": 320, "content": "<|endoftext|>", "special": True}]
bl = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}
from_regex = lambda r: {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": r}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]}
LLAMA3 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
QWEN2 = LLAMA3.replace("\\p{N}{1,3}", "\\p{N}")
tok = lambda pre, m, added: json.dumps({"version": "1.0", "added_tokens": added, "pre_tokenizer": pre,
                                        "model": {"type": "BPE", "vocab": keep, "merges": m}}).encode()
put("tokenizer", "gpt2-bytelevel.json", tok(bl, merges, endoftext) + b"\0Hello world, it's 2024!")
put("tokenizer", "llama3-split.json", tok(from_regex(LLAMA3), [m.split(" ") for m in merges], endoftext))
put("tokenizer", "qwen2-split.json", tok(from_regex(QWEN2), merges, endoftext + [
    {"id": 321, "content": "<|im_start|>", "special": True}, {"id": 322, "content": "x y", "special": False}]))
put("tokenizer", "no-merges.json", tok(bl, [], []))

# ---- imatrix: llama-imatrix GGUF and legacy .dat --------------------------------------
def dat(entries, chunks, dataset):
    b = struct.pack("<i", len(entries))
    for name, ncall, vals in entries:
        n = name.encode()
        b += struct.pack("<i", len(n)) + n + struct.pack("<ii", ncall, len(vals)) + np.asarray(vals, "<f4").tobytes()
    return b + struct.pack("<i", chunks) + struct.pack("<i", len(dataset)) + dataset.encode()


put("imatrix", "two.dat", dat([("blk.0.attn_q.weight", 4, rng.random(8) * 4), ("output.weight", 2, rng.random(4))],
                              10, "wiki.train.raw"))
put("imatrix", "no-trailer.dat", dat([("blk.0.ffn_down.weight", 1, [1, 2, 3, 4])], 0, "")[:-8])
for name, experts in [("dense.imatrix.gguf", 1), ("experts.imatrix.gguf", 2)]:
    with tempfile.TemporaryDirectory() as t:
        w = gguf.GGUFWriter(f"{t}/m.gguf", arch="imatrix")
        w.add_array("imatrix.datasets", ["wiki.train.raw"])
        w.add_uint32("imatrix.chunk_count", 10)
        w.add_uint32("imatrix.chunk_size", 512)
        for tn in ["blk.0.attn_k.weight", "blk.0.ffn_up.weight"]:
            w.add_tensor(tn + ".in_sum2", (rng.random((experts, 8)) * 100).astype(np.float32))
            w.add_tensor(tn + ".counts", np.full((experts, 1), 10, dtype=np.float32))
        w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
        put("imatrix", name, open(f"{t}/m.gguf", "rb").read())

# ---- tensor_type: --tensor-type-file texts -----------------------------------------------
put("tensor_type", "simple.txt", "attn_q=q8_0 ffn_down=q6_k\n")
put("tensor_type", "regex.txt", "blk\\.[0-1]\\.attn_(q|k)\\.weight=Q5_K\n(?:ffn_(up|gate))=iq4_nl\n\\d+\\.ffn_down=q4_0\n")
put("tensor_type", "case.txt", "OUTPUT=F16\ttoken_embd=bf16\nblk.1.ATTN_V.weight=q8_0 ^blk\\.0\\.=Q2_K\n")
put("tensor_type", "bad.txt", "attn_q=q9_9 =q4_0\n")

# ---- tasks: one byte (kind = byte % 3: HellaSwag, Winogrande, multiple choice; count =
# byte / 3 % 8, see fuzz_tasks.c), then the task file: prefixes of goldens/tasks ------------
G = ROOT + "/goldens/tasks"
hs = open(f"{G}/hellaswag-stories.txt", "rb").read().split(b"\n")
put("tasks", "hellaswag-4.txt", bytes([0]) + b"\n".join(hs[:24]))
put("tasks", "hellaswag-4-draw-2.txt", bytes([0 + 3 * 2]) + b"\n".join(hs[:24]) + b"\n")
wg = open(f"{G}/winogrande-stories.csv", "rb").read().split(b"\n")
put("tasks", "winogrande-5.csv", bytes([1]) + b"\n".join(wg[:5]) + b"\n")
put("tasks", "winogrande-header-draw-3.csv", bytes([1 + 3 * 3]) +
    b"index,sentence,option1,option2,answer\n" + b"\n".join(wg[:6]) + b"\n" +
    b'9,"A, b and _ went home, then.",Tom,Sue,1\n')
mc = open(f"{G}/mc-stories.bin", "rb").read()
n_mc = struct.unpack_from("<I", mc, 0)[0]
offs = struct.unpack_from(f"<{n_mc}I", mc, 4) + (len(mc),)


def mcfile(tasks):
    """tasks: byte strings of whole tasks -> n, offsets, tasks"""
    head = 4 + 4 * len(tasks)
    o, out = [], b""
    for t in tasks:
        o.append(head + len(out))
        out += t
    return struct.pack(f"<I{len(tasks)}I", len(tasks), *o) + out


three = [mc[offs[i]:offs[i + 1]] for i in range(3)]
put("tasks", "mc-3.bin", bytes([2]) + mcfile(three))
put("tasks", "mc-3-draw-2.bin", bytes([2 + 3 * 2]) + mcfile(three))

# ---- hfconfig: gpt-oss's quant_method mxfp4, the experts as PROJ_blocks + PROJ_scales, and
# the same config over float experts (a lie) ---------------------------------------------------
GOSS = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
        "quantization_config": {"quant_method": "mxfp4",
                                "modules_to_not_convert": ["model.layers.*.self_attn", "lm_head"]}}
EX = L + "mlp.experts."
u8 = lambda *s: rng.integers(0, 256, size=s, dtype=np.int64).astype(np.uint8)
NW = {"model.norm.weight": dense["model.norm.weight"]}
hfseed("gpt-oss-mxfp4", GOSS, save({EX + "gate_up_proj_blocks": u8(2, 64, 1, 16), EX + "gate_up_proj_scales": u8(2, 64, 1),
                                    EX + "down_proj_blocks": u8(2, 32, 1, 16), EX + "down_proj_scales": u8(2, 32, 1), **NW}))
hfseed("gpt-oss-mxfp4-float-lie", GOSS, save({EX + "down_proj": f16(2, 32, 32), **NW}))

# ---- convert: config.json \0 tokenizer.json \0 tokenizer_config.json \0 generation_config.json \0
# model.safetensors (last: it holds NUL bytes; here one without tensors, as --vocab-only reads it),
# the qk-convert cases of goldens/convert that carry their own (compact Qwen2) tokenizer -----------
CV = ROOT + "/goldens/convert"
rd = lambda p: open(p, "rb").read() if os.path.exists(p) else b""
EMPTY_ST = struct.pack("<Q", 2) + b"{}"
for case in ["Qwen2-Test-0.5B-Instruct", "qwen3-tiny"]:
    tk = f"{CV}/qwen2-tokenizer"
    put("convert", case, b"\0".join([rd(f"{CV}/{case}/config.json"), rd(f"{tk}/tokenizer.json"),
                                     rd(f"{tk}/tokenizer_config.json"), rd(f"{CV}/{case}/generation_config.json"),
                                     EMPTY_ST]))
# the same with the ids made dense (the compact vocabulary keeps Qwen2's, added tokens at 151643) and vocab_size their count
# plus 5 (padding still exercised): the originals pad to 151936 entries, which costs the fuzzer 10x
# the executions per second
tj = json.loads(rd(f"{CV}/qwen2-tokenizer/tokenizer.json"))
vocab = tj["model"]["vocab"]
dense = {old: new for new, old in enumerate(sorted(set(vocab.values()) | {a["id"] for a in tj["added_tokens"]}))}
tj["model"]["vocab"] = {t: dense[i] for t, i in vocab.items()}
for a in tj["added_tokens"]:
    a["id"] = dense[a["id"]]
for case in ["Qwen2-Test-0.5B-Instruct", "qwen3-tiny"]:
    cf = json.loads(rd(f"{CV}/{case}/config.json"))
    cf["vocab_size"] = len(dense) + 5
    for k in ("bos_token_id", "eos_token_id"):
        if isinstance(cf.get(k), int):
            cf[k] = dense.get(cf[k], 0)
    put("convert", case + "-small-vocab", b"\0".join([json.dumps(cf).encode(), json.dumps(tj).encode(),
        rd(f"{CV}/qwen2-tokenizer/tokenizer_config.json"), b"", EMPTY_ST]))
put("convert", "llama-no-tokenizer", rd(f"{CV}/llama-f32/config.json") + b"\0\0\0\0" + EMPTY_ST)

# ---- hfconfig: the model families' config.json (goldens/arch) over two small tensors, for the
# hyper-parameter and family readers ----------------------------------------------------------
for fam in ["gemma2", "gemma3", "phi3", "gpt-oss", "qwen2moe", "qwen3moe", "mixtral"]:
    hfseed(f"arch-{fam}", rd(f"{ROOT}/goldens/arch/{fam}/hf/config.json"), save(mini))

# ---- spm: vocab_size (u16 LE; 0: the pieces' count) tokenizer_config.json \0 tokenizer.json \0
# tokenizer.model (last: protobuf, with NUL bytes); goldens/convert's Gemma-style SentencePiece model
# (vocab 0, its own count, padded, cut short) and hand-made ModelProtos with every piece type ----------
def pb_varint(v):
    out = b""
    while True:
        out += bytes([(v & 0x7F) | (0x80 if v > 0x7F else 0)])
        v >>= 7
        if not v:
            return out


def pb_len(num, payload):
    return pb_varint(num << 3 | 2) + pb_varint(len(payload)) + payload


def pb_piece(text, score, typ=None):
    b = pb_len(1, text.encode()) + pb_varint(2 << 3 | 5) + struct.pack("<f", score)
    return pb_len(1, b + (pb_varint(3 << 3) + pb_varint(typ) if typ is not None else b""))


SP = f"{CV}/spm-tokenizer"
spm_model, spm_tc = rd(f"{SP}/tokenizer.model"), rd(f"{SP}/tokenizer_config.json")
spm = lambda vs, tc, tj, model: struct.pack("<H", vs) + tc + b"\0" + tj + b"\0" + model
put("spm", "gemma-tiny", spm(0, spm_tc, b"", spm_model))
put("spm", "gemma-tiny-padded", spm(600, spm_tc, b"", spm_model))
put("spm", "gemma-tiny-cut", spm(0, b"", b"", spm_model[: len(spm_model) // 3]))
handmade = (pb_piece("<unk>", 0, 2) + pb_piece("<s>", 0, 3) + pb_piece("</s>", 0, 3) + pb_piece("<0x41>", 0, 6)
            + pb_piece("\u2581a", -1.5) + pb_piece("b", -2.0, 4) + pb_piece("<unused0>", 0, 5)
            + pb_len(2, pb_len(1, b"unigram")) + pb_varint(7 << 3) + pb_varint(300))
put("spm", "handmade", spm(0, b"", b"", handmade))
put("spm", "handmade-added", spm(12, json.dumps({"added_tokens_decoder": {
    "7": {"content": "<start_of_turn>", "special": True}, "8": {"content": "\u2581hi", "special": False},
    "40": {"content": "<far>", "special": True}}}).encode(), b"", handmade))
put("spm", "handmade-tokenizer-json", spm(0, b"", json.dumps({"added_tokens": [
    {"id": 1, "content": "<s>", "special": True}], "normalizer": {"type": "Replace"}}).encode(), handmade))
