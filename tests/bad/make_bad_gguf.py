#!/usr/bin/env python3
"""Generate tests/bad/gguf/: malformed GGUF files, each one defect away from a
small valid base, and EXPECTED.tsv (file, the field its error must name, and
"split" for files whose defect only opening by path can see).

Layout written here (ggml/src/gguf.cpp, llama.cpp d32676d): "GGUF", u32
version, u64 n_tensors, u64 n_kv, key/values (string key, u32 type, value),
tensor infos (string name, u32 n_dims, i64 ne[n_dims], u32 type, u64 offset),
zero padding to the alignment, tensor data.  Strings: u64 length + bytes.
Arrays: u32 element type, u64 count, elements.

Usage: python3 tests/bad/make_bad_gguf.py [OUTDIR]   (default: beside this file)
       python3 tests/bad/make_bad_gguf.py --seeds tests/fuzz/corpus/gguf   (the fuzzer's seeds)
The tests read the committed output; python is not needed to run them.
"""
import os
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
T_F32, T_F16, T_Q4_0 = 0, 1, 2


def u32(v): return struct.pack("<I", v)
def u64(v): return struct.pack("<Q", v)
def i64(v): return struct.pack("<q", v)


def s(x):
    b = x.encode() if isinstance(x, str) else x
    return u64(len(b)) + b


def kv(key, vtype, payload):
    return s(key) + u32(vtype) + payload


def arr(elem, items_payload, n):
    return u32(elem) + u64(n) + items_payload


def info(name, dims, ttype, offset, n_dims=None):
    nd = len(dims) if n_dims is None else n_dims
    return s(name) + u32(nd) + b"".join(i64(d) for d in dims) + u32(ttype) + u64(offset)


def pad(b, align):
    return b + b"\0" * (-len(b) % align)


# The base: three key/values and three tensors (f32 4x2, q4_0 32x2, f16 8).
BASE_KVS = [
    kv("general.architecture", STR, s("llama")),
    kv("tokenizer.ggml.tokens", ARR, arr(STR, s("a") + s("bc") + s("d"), 3)),
    kv("llama.block_count", U32, u32(1)),
]
BASE_TENSORS = [("a", [4, 2], T_F32, 0, 32), ("b", [32, 2], T_Q4_0, 32, 36), ("c", [8], T_F16, 96, 16)]


def gguf(kvs=None, infos=None, data=None, version=3, magic=b"GGUF", n_tensors=None, n_kv=None,
         align=32):
    kvs = BASE_KVS if kvs is None else kvs
    if infos is None:
        infos = [info(n, d, t, o) for n, d, t, o, _ in BASE_TENSORS]
    if data is None:
        data = b""
        for _, _, _, o, nb in BASE_TENSORS:
            data = data.ljust(o, b"\0") + bytes((o + k) % 251 for k in range(nb))
        data = pad(data, align)
    head = magic + u32(version) + u64(len(infos) if n_tensors is None else n_tensors) \
        + u64(len(kvs) if n_kv is None else n_kv) + b"".join(kvs) + b"".join(infos)
    return pad(head, align) + data if infos else head + data


def offset_of(blob, needle, nth=0):
    """File offset of the nth occurrence of needle (for cut points)."""
    at = -1
    for _ in range(nth + 1):
        at = blob.index(needle, at + 1)
    return at


def cases():
    base = gguf()
    c = []  # (file name, bytes, expected field substring, flag)

    def add(name, blob, field, flag=""):
        c.append((name, blob, field, flag))

    # truncation at many points
    add("empty.gguf", b"", "magic")
    add("trunc_magic.gguf", base[:2], "magic")
    add("trunc_version.gguf", base[:6], "version")
    add("trunc_n_tensors.gguf", base[:12], "n_tensors")
    add("trunc_n_kv.gguf", base[:20], "n_kv")
    add("trunc_kv_key.gguf", base[:offset_of(base, b"tokenizer") + 4], "kv[1].key")
    add("trunc_kv_type.gguf", base[:offset_of(base, b"tokenizer.ggml.tokens") + 23], "kv[1] 'tokenizer.ggml.tokens' type")
    add("trunc_kv_value.gguf", base[:offset_of(base, b"llama") + 2], "kv[0] 'general.architecture' value")
    add("trunc_string_array.gguf", base[:offset_of(base, b"bc") + 1], "kv[1] 'tokenizer.ggml.tokens' value")
    # a cut in an early info leaves too few bytes for the rest: n_tensors is blamed
    add("trunc_tensor_info_1.gguf", base[:offset_of(base, b"\x01\x00\x00\x00\x00\x00\x00\x00b") + 9 + 4 + 3],
        "n_tensors")
    add("trunc_tensor_info_2.gguf", base[:offset_of(base, b"\x01\x00\x00\x00\x00\x00\x00\x00c") + 9 + 4 + 3],
        "tensor_info[2].ne[0]")
    add("trunc_tensor_offset.gguf", base[:offset_of(base, b"\x01\x00\x00\x00\x00\x00\x00\x00c") + 9 + 4 + 8 + 4 + 5],
        "tensor_info[2].offset")
    add("trunc_data.gguf", base[:len(base) - 20], "tensor 'c' data")
    hlen = 24 + sum(map(len, BASE_KVS)) + sum(len(info(n, d, t, o)) for n, d, t, o, _ in BASE_TENSORS)
    assert hlen % 32 != 0
    add("data_section_past_eof.gguf", base[:hlen], "data section")

    # header fields
    add("bad_magic.gguf", gguf(magic=b"GGML"), "magic")
    add("version1.gguf", gguf(version=1), "version")
    add("version4.gguf", gguf(version=4), "version")
    add("version_big_endian.gguf", gguf(version=0x03000000), "version")
    add("n_tensors_2e62.gguf", gguf(n_tensors=1 << 62), "n_tensors")
    add("n_kv_2e62.gguf", gguf(n_kv=1 << 62), "n_kv")
    add("n_kv_too_many.gguf", gguf(n_kv=4, infos=[], data=b""), "kv[3].key")

    # strings and keys
    add("string_past_eof.gguf", gguf(kvs=[kv("general.architecture", STR, u64(1000) + b"llama")] + BASE_KVS[1:]),
        "kv[0] 'general.architecture' value")
    add("string_len_2e63.gguf", gguf(kvs=[kv("general.architecture", STR, u64(1 << 63) + b"llama")] + BASE_KVS[1:]),
        "kv[0] 'general.architecture' value")
    add("key_len_2e63.gguf", gguf(kvs=[u64(1 << 63) + b"general.architecture" + u32(STR) + s("llama")] + BASE_KVS[1:]),
        "kv[0].key")
    add("key_empty.gguf", gguf(kvs=BASE_KVS[:1] + [kv("", U32, u32(1))] + BASE_KVS[2:]), "kv[1].key")
    add("duplicate_key.gguf", gguf(kvs=BASE_KVS + [kv("general.architecture", STR, s("gpt2"))]), "kv[3].key")

    # value types and arrays
    add("value_type_13.gguf", gguf(kvs=BASE_KVS + [kv("x.bad", 13, u32(0))]), "kv[3] 'x.bad' type")
    add("value_type_2e31.gguf", gguf(kvs=BASE_KVS + [kv("x.bad", 0x80000000, u32(0))]), "kv[3] 'x.bad' type")
    add("array_elem_type_99.gguf", gguf(kvs=BASE_KVS + [kv("x.arr", ARR, arr(99, u32(0), 1))]), "kv[3] 'x.arr' value")
    add("array_count_huge.gguf", gguf(kvs=BASE_KVS + [kv("x.arr", ARR, arr(U32, u32(7), 1 << 61))]),
        "kv[3] 'x.arr' value")
    add("array_count_overflow.gguf", gguf(kvs=BASE_KVS + [kv("x.arr", ARR, arr(U64, u64(7), 1 << 61))]),
        "kv[3] 'x.arr' value")
    add("string_array_count_huge.gguf", gguf(kvs=BASE_KVS + [kv("x.arr", ARR, arr(STR, s("q"), 1 << 60))]),
        "kv[3] 'x.arr' value")
    add("string_array_item_past_eof.gguf",
        gguf(kvs=BASE_KVS + [kv("x.arr", ARR, arr(STR, s("q") + u64(1 << 40) + b"zz", 2))]),
        "kv[3] 'x.arr' value[1]")
    inner_ok = arr(U8, b"\1\2", 2)
    inner_bad = u32(U32) + u64(100) + u32(5)
    add("array_of_arrays_past_eof.gguf",
        gguf(kvs=BASE_KVS + [kv("x.nested", ARR, arr(ARR, inner_ok + inner_bad + inner_ok, 3))]),
        "kv[3] 'x.nested' value[1]")
    add("array_of_arrays_count_huge.gguf",
        gguf(kvs=BASE_KVS + [kv("x.nested", ARR, arr(ARR, inner_ok, 1 << 59))]), "kv[3] 'x.nested' value")
    deep = arr(U8, b"\1", 1)
    for _ in range(9):
        deep = arr(ARR, deep, 1)
    add("array_nested_too_deep.gguf", gguf(kvs=BASE_KVS + [kv("x.deep", ARR, deep)]), "kv[3] 'x.deep' value")
    add("array_elem_type_bad_nested.gguf",
        gguf(kvs=BASE_KVS + [kv("x.nested", ARR, arr(ARR, inner_ok + arr(42, b"", 0), 2))]),
        "kv[3] 'x.nested' value[1]")

    # general.alignment
    add("alignment_0.gguf", gguf(kvs=BASE_KVS + [kv("general.alignment", U32, u32(0))]),
        "kv[3] 'general.alignment' value")
    add("alignment_3.gguf", gguf(kvs=BASE_KVS + [kv("general.alignment", U32, u32(3))]),
        "kv[3] 'general.alignment' value")
    add("alignment_u64.gguf", gguf(kvs=BASE_KVS + [kv("general.alignment", U64, u64(32))]),
        "kv[3] 'general.alignment' value")
    add("alignment_string.gguf", gguf(kvs=[kv("general.alignment", STR, s("32"))] + BASE_KVS),
        "kv[0] 'general.alignment' value")

    # tensor infos
    add("tensor_type_99.gguf",
        gguf(infos=[info("a", [4, 2], T_F32, 0), info("b", [32, 2], 99, 32), info("c", [8], T_F16, 96)]),
        "tensor_info[1].type")
    for removed in (4, 5, 31, 33, 36, 38):
        add("tensor_type_removed_%d.gguf" % removed,
            gguf(infos=[info("a", [4, 2], T_F32, 0), info("b", [32, 2], removed, 32), info("c", [8], T_F16, 96)]),
            "tensor_info[1].type")
    add("tensor_type_ext_64.gguf",
        gguf(infos=[info("a", [4, 2], T_F32, 0), info("b", [32, 2], 64, 32), info("c", [8], T_F16, 96)]),
        "tensor_info[1].type")
    add("tensor_n_dims_0.gguf", gguf(infos=[info("a", [], T_F32, 0)], data=bytes(32)), "tensor_info[0].n_dims")
    add("tensor_n_dims_5.gguf", gguf(infos=[info("a", [4, 2, 1, 1, 1], T_F32, 0)], data=bytes(32)),
        "tensor_info[0].n_dims")
    add("tensor_negative_dim.gguf", gguf(infos=[info("a", [4, -2], T_F32, 0)], data=bytes(32)),
        "tensor_info[0].ne[1]")
    add("tensor_dims_overflow.gguf", gguf(infos=[info("a", [1 << 32, 1 << 32, 4], T_F32, 0)], data=bytes(32)),
        "tensor_info[0].ne")
    add("tensor_dims_overflow_zero.gguf", gguf(infos=[info("a", [0, 1 << 40, 1 << 40], T_F32, 0)], data=bytes(32)),
        "tensor_info[0].ne")
    add("tensor_bytes_overflow.gguf", gguf(infos=[info("a", [1 << 61, 2], T_F32, 0)], data=bytes(32)),
        "tensor_info[0].ne")
    add("tensor_q4_0_33_columns.gguf",
        gguf(infos=[info("a", [4, 2], T_F32, 0), info("b", [33, 2], T_Q4_0, 32), info("c", [8], T_F16, 96)]),
        "tensor_info[1].ne[0]")
    add("tensor_name_too_long.gguf", gguf(infos=[info("x" * 70, [4, 2], T_F32, 0)], data=bytes(32)),
        "tensor_info[0].name")
    add("tensor_name_len_2e63.gguf", gguf(infos=[u64(1 << 63) + b"a" + u32(1) + i64(4) + u32(0) + u64(0)],
                                          data=bytes(32)), "tensor_info[0].name")
    add("tensor_duplicate_name.gguf",
        gguf(infos=[info("a", [4, 2], T_F32, 0), info("a", [32, 2], T_Q4_0, 32), info("c", [8], T_F16, 96)]),
        "tensor_info[1].name")
    add("tensor_misaligned_offset.gguf",
        gguf(infos=[info("a", [4, 2], T_F32, 0), info("b", [32, 2], T_Q4_0, 36), info("c", [8], T_F16, 96)]),
        "tensor_info[1].offset")
    add("tensor_overlap.gguf",
        gguf(infos=[info("a", [4, 2], T_F32, 0), info("b", [32, 2], T_Q4_0, 32), info("c", [8], T_F16, 64)]),
        "tensor 'c' data")
    add("tensor_overlap_same_offset.gguf",
        gguf(infos=[info("a", [4, 2], T_F32, 0), info("b", [32, 2], T_Q4_0, 0), info("c", [8], T_F16, 96)]),
        "tensor 'b' data")
    add("tensor_data_past_eof.gguf",
        gguf(infos=[info("a", [4, 2], T_F32, 0), info("b", [32, 2], T_Q4_0, 32), info("c", [8], T_F16, 1 << 20)]),
        "tensor 'c' data")
    add("tensor_offset_huge.gguf",
        gguf(infos=[info("a", [4, 2], T_F32, 0), info("b", [32, 2], T_Q4_0, 32),
                    info("c", [8], T_F16, (1 << 64) - 32)]), "tensor 'c' data")

    # split keys (only opening by path follows them)
    split_kvs = BASE_KVS + [kv("split.no", U16, struct.pack("<H", 0)), kv("split.count", U16, struct.pack("<H", 2)),
                            kv("split.tensors.count", I32, struct.pack("<i", 3))]
    add("split_bad_name.gguf", gguf(kvs=split_kvs), "kv[4] 'split.count' value", "split")
    bad_no = BASE_KVS + [kv("split.no", U16, struct.pack("<H", 2)), kv("split.count", U16, struct.pack("<H", 2))]
    add("split_no_past_count.gguf", gguf(kvs=bad_no), "kv[3] 'split.no' value", "split")
    add("split-00001-of-00002.gguf", gguf(kvs=split_kvs), "kv[4] 'split.count' value", "split")
    return c


def seeds():
    """Small valid files for the fuzzer's seed corpus."""
    nested = arr(ARR, arr(U16, struct.pack("<3H", 1, 2, 3), 3) + arr(STR, s("x") + s(""), 2) + arr(ARR, b"", 0), 3)
    every = [kv("t.%d" % t, t, struct.pack(f, 1)) for t, f in
             ((U8, "<B"), (I8, "<b"), (U16, "<H"), (I16, "<h"), (U32, "<I"), (I32, "<i"), (F32, "<f"),
              (BOOL, "<B"), (U64, "<Q"), (I64, "<q"), (F64, "<d"))]
    every += [kv("t.arr%d" % t, ARR, arr(t, b"\1" * 16, 16 // n)) for t, n in
              ((U8, 1), (I16, 2), (F32, 4), (F64, 8), (BOOL, 1))]
    align64 = BASE_KVS + [kv("general.alignment", U32, u32(64))]
    return [
        ("valid_v3.gguf", gguf()),
        ("valid_v2.gguf", gguf(version=2)),
        ("valid_no_tensors.gguf", gguf(infos=[], data=b"")),
        ("valid_every_type.gguf", gguf(kvs=BASE_KVS + every + [kv("t.nested", ARR, nested)])),
        ("valid_align64.gguf", gguf(kvs=align64, infos=[info("a", [4, 2], T_F32, 0), info("b", [32, 2], T_Q4_0, 64),
                                                         info("c", [8], T_F16, 128)], data=bytes(192), align=64)),
        ("valid_4d_zero.gguf", gguf(infos=[info("z", [0, 3], T_Q4_0, 0), info("w", [2, 2, 2, 2], T_F32, 0)],
                                    data=bytes(64))),
    ]


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--seeds":
        bad = dict((n, b) for n, b, _, _ in cases())
        for name, blob in seeds() + [(n, bad[n]) for n in (
                "array_of_arrays_past_eof.gguf", "tensor_overlap.gguf", "alignment_3.gguf",
                "string_array_item_past_eof.gguf", "tensor_q4_0_33_columns.gguf")]:
            with open(os.path.join(sys.argv[2], name), "wb") as f:
                f.write(blob)
        return
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "gguf")
    os.makedirs(out, exist_ok=True)
    rows = []
    for name, blob, field, flag in cases():
        assert len(blob) < 4096, name
        with open(os.path.join(out, name), "wb") as f:
            f.write(blob)
        rows.append("%s\t%s%s" % (name, field, "\t" + flag if flag else ""))
    with open(os.path.join(out, "valid_base.gguf"), "wb") as f:
        f.write(gguf())
    with open(os.path.join(out, "EXPECTED.tsv"), "w") as f:
        f.write("# file\tfield named by the error\t[split: only opening by path detects it]\n")
        f.write("\n".join(rows) + "\n")
    print("%d files in %s" % (len(rows), out))


main()
