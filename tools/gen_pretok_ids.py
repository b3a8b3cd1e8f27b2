#!/usr/bin/env python3
"""llama.cpp's token ids of every pre-tokenizer over GPT-2's vocabulary.

    python3 tools/gen_pretok_ids.py LLAMA_TOKENIZE OUT_FILE [NAME...]

For each tokenizer.ggml.pre NAME, writes a copy of
goldens/vocab/ggml-vocab-gpt-2.gguf whose tokenizer.ggml.pre is NAME (in a
temporary folder), and runs llama.cpp's llama-tokenize (--ids --no-bos
--no-parse-special --no-escape) on each whole input file: the gpt-2 suite's
.inp and goldens/vocab/pretok-extra.inp, separator lines included (one run
per file: llama-tokenize loads the vocabulary each time).  OUT_FILE gets, per
NAME, a line "## NAME" and one line of ids per input file.  The ids of one vocabulary under different
pre-tokenizers differ where their splits differ, so tests/test_tokenizer.c
checks qk's splitting of every regex list against llama.cpp's std::regex
with them.  Run by `make crosscheck` (tools/crosscheck.sh).
"""
import os
import struct
import subprocess
import sys
import tempfile

VOCAB = "goldens/vocab/ggml-vocab-gpt-2.gguf"
INPUTS = [VOCAB + ".inp", "goldens/vocab/pretok-extra.inp"]


# one tokenizer.ggml.pre name per regex list of llama.cpp's llm_tokenizer_bpe
# (plus dbrx and command-r: same lists as llama-bpe and starcoder, other flags)
NAMES = ("default gpt-2 llama-bpe dbrx qwen2 deepseek-llm falcon starcoder command-r jais-2 deepseek-v3 "
         "youtu deepseek-coder qwen35 poro-chat viking tekken chameleon gpt-4o granite-embed-multi-97m "
         "tiny_aya kimi-k2 superbpe bailingmoe seed-coder afmoe laguna exaone-moe minicpm5").split()


def read_inputs():
    return [open(path, "rb").read().decode("utf-8") for path in INPUTS]


def variant(src, dst, pre):
    """src with the string value of tokenizer.ggml.pre replaced (the file
    has no tensors, so nothing after the key/value section moves)."""
    data = open(src, "rb").read()
    key = b"tokenizer.ggml.pre"
    at = data.index(struct.pack("<Q", len(key)) + key) + 8 + len(key)
    assert struct.unpack_from("<I", data, at)[0] == 8  # GGUF string
    n = struct.unpack_from("<Q", data, at + 4)[0]
    start = at + 12
    new = pre.encode("utf-8")
    with open(dst, "wb") as f:
        f.write(data[:at + 4] + struct.pack("<Q", len(new)) + new + data[start + n:])


def main():
    tool, out_path, names = sys.argv[1], sys.argv[2], sys.argv[3:] or NAMES
    texts = read_inputs()
    with tempfile.TemporaryDirectory() as tmp, open(out_path, "w") as out:
        txt = os.path.join(tmp, "in.txt")
        for name in names:
            model = os.path.join(tmp, "v.gguf")
            variant(VOCAB, model, name)
            out.write("## %s\n" % name)
            for t in texts:
                with open(txt, "wb") as f:
                    f.write(t.encode("utf-8"))
                res = subprocess.run([tool, "-m", model, "-f", txt, "--ids", "--no-bos", "--no-parse-special",
                                      "--no-escape", "--log-disable"], capture_output=True, check=True)
                line = res.stdout.decode().strip().splitlines()[-1]
                ids = line.strip("[]").replace(",", " ").split()
                out.write(" ".join(ids) + "\n")
            out.flush()
            print(name, file=sys.stderr)


if __name__ == "__main__":
    main()
