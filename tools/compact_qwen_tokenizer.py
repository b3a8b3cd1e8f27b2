#!/usr/bin/env python3
"""A compact Qwen2 tokenizer.json for the qk-convert Qwen cases.

    python3 tools/compact_qwen_tokenizer.py GGUF OUT_DIR

GGUF is llama.cpp's models/ggml-vocab-qwen2.gguf (the Qwen2 vocabulary:
tokens, types, merges).  OUT_DIR gets tokenizer.json and tokenizer_config.json
in Qwen2's layout (NFC normalizer, Qwen2's Split regex then ByteLevel,
ByteLevel decoder) holding only what convert_hf_to_gguf.py's check text can
use: every control token, and every token and merge whose text is a
substring of the check text's byte-level form, with their original ids and
in their original order.  The tokenizer gives the check text the ids the full
Qwen2 tokenizer gives it, so the converter recognizes it as "qwen2"; ids that
are not kept become [PAD<i>] tokens in the converted file, as in any
vocabulary with holes.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.environ.get("LLAMA_CPP", "/work/peers/llama.cpp"), "gguf-py"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf  # noqa: E402
from compact_vocab import bytes_to_unicode  # noqa: E402  (GPT-2's byte <-> code point table)

REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
         "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def chktxt():
    src = open(os.path.join(os.environ.get("LLAMA_CPP", "/work/peers/llama.cpp"), "conversion", "base.py"),
               encoding="utf-8").read()
    a = src.index("def get_vocab_base_pre(")
    return eval(re.search(r"chktxt = ('(?:[^'\\]|\\.)*')", src[a:]).group(1))


def main():
    r = gguf.GGUFReader(sys.argv[1])
    f = r.fields
    tokens = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode("utf-8") for i in f["tokenizer.ggml.tokens"].data]
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
    merges = [bytes(f["tokenizer.ggml.merges"].parts[i]).decode("utf-8") for i in f["tokenizer.ggml.merges"].data]
    b2u = bytes_to_unicode()
    s = "".join(b2u[b] for b in chktxt().encode("utf-8"))
    subs = {s[i:j] for i in range(len(s)) for j in range(i + 1, min(len(s), i + 64) + 1)}
    subs |= set(b2u.values())
    vocab, added = {}, []
    for i, (t, ty) in enumerate(zip(tokens, types)):
        if ty == 3:  # CONTROL: an added special token
            added.append({"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True})
            vocab[t] = i
        elif ty == 1 and t in subs:
            vocab[t] = i
    kept = [m.split(" ", 1) for m in merges if m.replace(" ", "", 1) in subs]
    kept = [m for m in kept if m[0] in vocab and m[1] in vocab and m[0] + m[1] in vocab]
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": REGEX}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": kept},
    }
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as fp:
        json.dump(tok, fp, ensure_ascii=False)
    cfg = {"bos_token": None, "chat_template": "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
           "{{ message['content'] }}<|im_end|>\n{% endfor %}", "clean_up_tokenization_spaces": False,
           "eos_token": "<|im_end|>", "errors": "replace", "model_max_length": 32768, "pad_token": "<|endoftext|>",
           "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer", "unk_token": None}
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as fp:
        json.dump(cfg, fp, ensure_ascii=False, indent=2)
    print("%d tokens, %d merges, %d added" % (len(vocab), len(kept), len(added)), file=sys.stderr)


if __name__ == "__main__":
    main()
