#!/usr/bin/env python3
"""Compact copies of llama.cpp's vocabulary-only GGUFs for the tokenizer suites.

    python3 tools/compact_vocab.py SRC_DIR OUT_DIR NAME...

For each NAME, reads SRC_DIR/ggml-vocab-NAME.gguf with its .inp/.out and
writes OUT_DIR/ggml-vocab-NAME.compact.gguf (plus copies of .inp and .out):
the same tokenizer.* and general.* keys, but only the tokens and merges that
can take part in tokenizing the suite's inputs, renumbered, with
`qk.vocab.orig_ids` (uint32 per kept token: its id in the full vocabulary).

What is kept, whatever the pre-tokenizer does:
  * every token that is not NORMAL or UNUSED (control, user-defined, unknown,
    byte tokens): special-token partitioning and byte fallback use them;
  * every token whose text occurs in one of the inputs as BPE/WordPiece/SPM
    see it: the raw text, its GPT-2 byte-level encoding, its U+2581-escaped
    form (with and without a leading U+2581) and, for WordPiece, its
    lowercased, accent-stripped form; a word of any pre-tokenizer split is a
    substring of one of these, and so is every token a merge or a match makes;
  * every merge whose joined text occurs there (a merge whose result is not a
    substring can never apply), in their original order, so ranks compare the
    same way.
Special-token ids are renumbered.  tests/test_tokenizer.c maps qk's ids back
through qk.vocab.orig_ids and compares them with the .out file, so the suite
checks exactly what the full vocabulary would.
"""
import os
import shutil
import sys
import unicodedata

sys.path.insert(0, os.path.join(os.environ.get("LLAMA_CPP", "/work/peers/llama.cpp"), "gguf-py"))
import gguf  # noqa: E402

SEP = "\n__ggml_vocab_test__\n"
NORMAL, UNUSED = 1, 5


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


B2U = bytes_to_unicode()


def inputs(path):
    raw = open(path, "rb").read().decode("utf-8")
    return raw.split(SEP)


def wordpiece_words(text):
    """llm_tokenizer_wpm_session::preprocess, near enough to pick tokens."""
    words, cur = [], ""
    for c in text:
        c = "".join(d for d in unicodedata.normalize("NFD", c) if unicodedata.category(d) != "Mn").lower()
        for d in c:
            cat = unicodedata.category(d)
            if d.isspace():
                words.append(cur)
                cur = ""
            elif cat.startswith("P") or (ord(d) < 0x7F and cat.startswith("S")) or 0x4E00 <= ord(d) <= 0x9FFF:
                words += [cur, d]
                cur = ""
            else:
                cur += d
    return [w for w in words + [cur] if w]


def forms(text):
    esc = text.replace(" ", "\u2581")
    wp = "".join("\u2581" + w for w in wordpiece_words(text))
    return [text, "".join(B2U[b] for b in text.encode("utf-8")), esc, "\u2581" + esc, wp]


def substrings(strings, maxlen):
    out = set()
    for s in strings:
        for i in range(len(s)):
            for j in range(i + 1, min(len(s), i + maxlen) + 1):
                out.add(s[i:j])
    return out


def field_value(f):
    if f.types[0] == gguf.GGUFValueType.ARRAY:
        if f.types[1] == gguf.GGUFValueType.STRING:
            return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
        return [f.parts[i][0].item() for i in f.data]
    if f.types[0] == gguf.GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode("utf-8")
    return f.parts[f.data[0]][0].item()


def compact(src_dir, out_dir, name):
    base = os.path.join(src_dir, "ggml-vocab-%s.gguf" % name)
    r = gguf.GGUFReader(base)
    fields = {k: field_value(f) for k, f in r.fields.items() if not k.startswith("GGUF.")}
    tokens = fields["tokenizer.ggml.tokens"]
    types = fields.get("tokenizer.ggml.token_type", [NORMAL] * len(tokens))
    maxlen = max(len(t) for t in tokens)
    subs = substrings([f for t in inputs(base + ".inp") for f in forms(t)], maxlen)
    special_keys = [k for k in fields if k.startswith("tokenizer.ggml.") and k.endswith("_token_id")]
    must = {fields[k] for k in special_keys}
    keep = [i for i, t in enumerate(tokens) if types[i] not in (NORMAL, UNUSED) or t in subs or i in must]
    new_id = {old: new for new, old in enumerate(keep)}

    w = gguf.GGUFWriter(os.path.join(out_dir, "ggml-vocab-%s.compact.gguf" % name), fields["general.architecture"])
    for k, f in r.fields.items():
        if k.startswith("GGUF.") or k == "general.architecture":
            continue
        v = fields[k]
        t = f.types[0]
        if k in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.scores"):
            v = [v[i] for i in keep]
        elif k == "tokenizer.ggml.merges":
            v = [m for m in v if m.replace(" ", "", 1) in subs]
        elif k in special_keys:
            v = new_id[v]
        if t == gguf.GGUFValueType.ARRAY:
            sub = f.types[1]
            if sub == gguf.GGUFValueType.STRING:
                w.add_array(k, v)
            else:
                w.add_key_value(k, list(v), t, sub)
        else:
            w.add_key_value(k, v, t)
    w.add_key_value("qk.vocab.orig_ids", keep, gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.UINT32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    for ext in (".inp", ".out"):
        shutil.copyfile(base + ext, os.path.join(out_dir, "ggml-vocab-%s.gguf%s" % (name, ext)))
    print("%s: %d of %d tokens" % (name, len(keep), len(tokens)))


def main():
    src, out = sys.argv[1], sys.argv[2]
    for name in sys.argv[3:]:
        compact(src, out, name)


if __name__ == "__main__":
    main()
