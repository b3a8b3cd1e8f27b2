#!/usr/bin/env python3
"""Generate the malformed .safetensors corpus in tests/bad/safetensors/ and
its EXPECTED.tsv (file, expected error offset, expected message substring).

Each file breaks one rule of the format (huggingface/safetensors README
"Format" and safetensors/src/tensor.rs Metadata::validate).  The expected
offset is the file offset of the offending JSON value (the header starts at
offset 8), found here by searching the header for a marker.

Run from the repository root: python3 tests/bad/make_bad_safetensors.py
"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "safetensors")
rows = []


def emit(name, blob, offset, what):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(blob)
    rows.append((name, offset, what))


def st(header, data=b"", hlen=None):
    h = header.encode() if isinstance(header, str) else header
    n = len(h) if hlen is None else hlen
    return struct.pack("<Q", n) + h + data


def at(header, marker, nth=0):
    """File offset of the nth occurrence of marker in the header."""
    pos = -1
    for _ in range(nth + 1):
        pos = header.index(marker, pos + 1)
    return 8 + pos


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".safetensors"):
            os.remove(os.path.join(OUT, f))
    ok = '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    d8 = bytes(range(8))

    emit("short_file.safetensors", b"\x10\x00\x00", 0, "header length at offset 0: file is 3 bytes")
    emit("hlen_past_eof.safetensors", st(ok, d8, hlen=1000), 0, "runs past the end of the file")
    emit("hlen_too_large.safetensors", st(ok, d8, hlen=100000001), 0, "exceeds the limit of 100000000")
    emit("hlen_huge.safetensors", st(ok, d8, hlen=2**64 - 1), 0, "exceeds the limit")
    emit("hlen_too_small.safetensors", st("{", b"}" + d8, hlen=1), 0, "too small for a JSON object")
    emit("hlen_zero.safetensors", st("", b"", hlen=0), 0, "header length at offset 0: 0 is too small")
    emit("truncated_header.safetensors", st(ok[:30]), 8 + 30, "invalid JSON: expected")
    emit("not_object.safetensors", st('["a", "b"]'), 8, "header at offset 8: does not begin with '{'")
    emit("leading_space.safetensors", st(' {}'), 8, "does not begin with '{'")
    h = '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},}'
    emit("trailing_comma.safetensors", st(h, d8), at(h, "}", 1), "invalid JSON: expected a string key")
    h = '{"a":{"dtype":"F32" "shape":[2],"data_offsets":[0,8]}}'
    emit("missing_comma.safetensors", st(h, d8), at(h, '"shape"'), "expected ',' or '}'")
    h = "{'a':{}}"
    emit("single_quotes.safetensors", st(h), 9, "invalid JSON: expected a string key")
    h = '{"a\x01":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    emit("control_char.safetensors", st(h, d8), 11, "raw control character")
    hb = b'{"a\xff":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    emit("bad_utf8.safetensors", st(hb, d8), 11, "invalid UTF-8")
    h = '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} x'
    emit("trailing_garbage.safetensors", st(h, d8), at(h, "x"), "end of input after the JSON value")
    h = '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,08]}}'
    emit("leading_zero.safetensors", st(h, d8), at(h, "08"), "leading zero")
    h = '{"a":{"dtype":"F\\ud800","shape":[2],"data_offsets":[0,8]}}'
    emit("lone_surrogate.safetensors", st(h, d8), at(h, "\\ud800"), "high surrogate")
    h = '{"a":' + '[' * 70 + ']' * 70 + '}'
    emit("too_deep.safetensors", st(h), at(h, "[", 63), "nesting deeper than 64")
    h = '{"a":"F32"}'
    emit("tensor_not_object.safetensors", st(h), at(h, '"F32"'), "tensor 'a' at offset 13: is a string")
    h = '{"a":{"shape":[2],"data_offsets":[0,8]}}'
    emit("missing_dtype.safetensors", st(h, d8), at(h, '{"shape'), "missing \"dtype\"")
    h = '{"a":{"dtype":"F32","data_offsets":[0,8]}}'
    emit("missing_shape.safetensors", st(h, d8), at(h, '{"dtype'), "missing \"shape\"")
    h = '{"a":{"dtype":"F32","shape":[2]}}'
    emit("missing_offsets.safetensors", st(h, d8), at(h, '{"dtype'), "missing \"data_offsets\"")
    h = '{"a":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}}'
    emit("unknown_dtype.safetensors", st(h, d8), at(h, '"F12"'), "tensor 'a' dtype at offset 22: unknown dtype 'F12'")
    h = '{"a":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}}'
    emit("lowercase_dtype.safetensors", st(h, d8), at(h, '"f32"'), "unknown dtype 'f32'")
    h = '{"a":{"dtype":32,"shape":[2],"data_offsets":[0,8]}}'
    emit("dtype_number.safetensors", st(h, d8), at(h, '32'), "tensor 'a' dtype at offset 22: is a number")
    h = '{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}'
    emit("negative_shape.safetensors", st(h, d8), at(h, "-2"), "tensor 'a' shape[0]")
    h = '{"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}}'
    emit("float_shape.safetensors", st(h, d8), at(h, "2.0"), "must be a non-negative integer")
    h = '{"a":{"dtype":"F32","shape":2,"data_offsets":[0,8]}}'
    emit("shape_not_array.safetensors", st(h, d8), at(h, "2,"), "tensor 'a' shape at offset")
    h = '{"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}}'
    emit("too_many_dims.safetensors", st(h, d8[:4]), at(h, "[1,"), "9 dimensions")
    h = '{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}'
    emit("shape_overflow.safetensors", st(h, d8), at(h, "[4294967296"), "overflows 64 bits")
    h = '{"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,8]}}'
    emit("nbytes_overflow.safetensors", st(h, d8), at(h, "[46"), "overflows 64 bits")
    h = '{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,1]}}'
    emit("subbyte_partial.safetensors", st(h, d8[:1]), at(h, "[3]"), "not a whole number of bytes")
    h = '{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}'
    emit("size_mismatch.safetensors", st(h, d8), at(h, "[0,8]"), "span of 8 bytes, but shape and dtype F32 need 12")
    h = '{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}'
    emit("begin_after_end.safetensors", st(h, d8), at(h, "[8,0]"), "begin 8 is past end 0")
    h = '{"a":{"dtype":"F32","shape":[25],"data_offsets":[0,100]}}'
    emit("offsets_past_eof.safetensors", st(h, bytes(80)), at(h, "[0,100]"), "end 100 exceeds data size 80")
    h = '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}}'
    emit("offsets_one.safetensors", st(h, d8), at(h, "[0]"), "array of two integers")
    h = '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,-8]}}'
    emit("offsets_negative.safetensors", st(h, d8), at(h, "[0,-8]"), "two non-negative integers")
    h = ('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
         '"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}}')
    emit("hole.safetensors", st(h, bytes(20)), at(h, "[12,20]"),
         "tensor 'b' data_offsets at offset %d: begins at 12, leaving a hole of 4 bytes after 'a'" % at(h, "[12,20]"))
    h = ('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
         '"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}')
    emit("overlap.safetensors", st(h, bytes(12)), at(h, "[4,12]"), "overlapping tensor 'a'")
    h = ('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
         '"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}')
    emit("same_offsets.safetensors", st(h, bytes(8)), at(h, "[0,8]", 1), "overlapping tensor")
    h = '{"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}'
    emit("hole_at_start.safetensors", st(h, bytes(12)), at(h, "[4,12]"), "after the start of the data")
    h = '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    emit("trailing_data.safetensors", st(h, bytes(12)), 8 + len(h) + 8, "data at offset %d: 4 bytes after the last tensor" % (8 + len(h) + 8))
    h = ('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
         '"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}')
    emit("duplicate_key.safetensors", st(h, d8), at(h, '"a"', 1), "duplicate key \"a\"")
    h = '{"__metadata__":{"format":"pt"},"__metadata__":{},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    emit("duplicate_metadata.safetensors", st(h, d8), at(h, '"__metadata__"', 1), "duplicate key")
    h = '{"__metadata__":{"format":"pt","n":1},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    emit("metadata_non_string.safetensors", st(h, d8), at(h, "1}"), "__metadata__ 'n' at offset")
    h = '{"__metadata__":["pt"],"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    emit("metadata_not_object.safetensors", st(h, d8), at(h, '["pt"]'), "__metadata__ at offset 24: is an array")
    h = '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,1e400]}}'
    emit("number_out_of_range.safetensors", st(h, d8), at(h, "1e400"), "number out of range")

    with open(os.path.join(OUT, "EXPECTED.tsv"), "w") as f:
        f.write("# file\toffset\tmessage substring (the message is \"<path>: <field> at offset <offset>: <what>\")\n")
        for name, off, what in rows:
            f.write("%s\t%d\t%s\n" % (name, off, what))
    print("wrote %d files to %s" % (len(rows), OUT))


if __name__ == "__main__":
    main()
