#!/usr/bin/env python3
"""Reference pre-tokenizer splits for the llama.cpp vocab test inputs.

    python3 tools/gen_pretok_splits.py goldens/vocab

For each suite below, reads ggml-vocab-NAME.gguf.inp (inputs separated by
"\\n__ggml_vocab_test__\\n", as llama.cpp's tests/test-tokenizer-0.cpp reads
them) and writes ggml-vocab-NAME.gguf.splits: one line per input, the UTF-8
byte lengths of the pieces the model's original pre-tokenizer regex (from its
Hugging Face tokenizer.json) cuts the input into, separated by spaces.

The regexes are matched with the third-party `regex` module (pip install
regex), which implements \\p{..} classes; the committed files were made with
regex 2026.11.19.  The Llama 3 and Qwen2 vocabularies are not available here,
so tests/test_tokenizer.c checks qk's splitting for those two against these
files instead of checking token ids; GPT-2's file checks the method itself
(its ids are checked against the .out file too).
"""
import os
import sys

import regex

PATTERNS = {
    "gpt-2": r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    "llama-bpe": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
    "qwen2": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
}
SEP = "\n__ggml_vocab_test__\n"


def read_inputs(path):
    raw = open(path, "rb").read().decode("utf-8")
    out, pos = [], 0
    while pos < len(raw):
        nxt = raw.find(SEP, pos)
        if nxt < 0:
            out.append(raw[pos:])
            break
        out.append(raw[pos:nxt])
        pos = nxt + len(SEP)
    return out


def split(pattern, text):
    pieces, pos = [], 0
    for m in regex.finditer(pattern, text):
        if m.start() > pos:
            pieces.append(text[pos:m.start()])
        pieces.append(m.group(0))
        pos = m.end()
    if pos < len(text):
        pieces.append(text[pos:])
    return pieces


def main():
    folder = sys.argv[1]
    for name, pattern in PATTERNS.items():
        base = os.path.join(folder, "ggml-vocab-%s.gguf" % name)
        with open(base + ".splits", "w") as f:
            for text in read_inputs(base + ".inp"):
                f.write(" ".join(str(len(p.encode("utf-8"))) for p in split(pattern, text)) + "\n")


if __name__ == "__main__":
    main()
