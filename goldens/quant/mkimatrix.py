#!/usr/bin/env python3
"""Write a synthetic importance matrix for stories4M in both formats llama-quantize reads.

Usage: mkimatrix.py OUT.imatrix.gguf OUT.imatrix.dat

The values are random (seeded): mean squared activations with a few loud channels, as real
imatrices have.  Both files describe the same normalized matrix (GGUF: in_sum2 / counts;
legacy: values / ncall), except that blk.2.attn_output.weight has count 0 in the GGUF file
(llama-quantize then uses 1.0 for every column) and the GGUF file also holds an entry for a
tensor the model lacks (ignored).  Needs numpy.
"""
import struct, sys
import numpy as np

def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b

def main():
    out_gguf, out_dat = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(4)
    names = []
    for i in range(4):
        for w, n in (("attn_q", 256), ("attn_k", 256), ("attn_v", 256), ("attn_output", 256),
                     ("ffn_gate", 256), ("ffn_up", 256), ("ffn_down", 768)):
            names.append(("blk.%d.%s.weight" % (i, w), n))
    chunks, chunk_size = 3, 256
    count = chunks * chunk_size
    entries = []
    for name, n in names:
        msq = (rng.standard_normal(n, dtype=np.float32) ** 2) * 0.5 + 0.05
        loud = rng.choice(n, size=max(1, n // 64), replace=False)
        msq[loud] *= 40.0
        c = 0.0 if name == "blk.2.attn_output.weight" else float(count)
        entries.append((name, (msq * np.float32(count)).astype(np.float32), c))
    # GGUF (what llama-imatrix writes today)
    tensors = []
    for name, sums, c in entries + [("blk.9.attn_q.weight", np.ones(256, np.float32), float(count))]:
        tensors.append((name + ".in_sum2", sums))
        tensors.append((name + ".counts", np.array([c], np.float32)))
    meta = s("general.type") + struct.pack("<I", 8) + s("imatrix")
    meta += s("imatrix.datasets") + struct.pack("<I", 9) + struct.pack("<I", 8) + struct.pack("<Q", 1) + s("synthetic.txt")
    meta += s("imatrix.chunk_count") + struct.pack("<I", 4) + struct.pack("<I", chunks)
    meta += s("imatrix.chunk_size") + struct.pack("<I", 4) + struct.pack("<I", chunk_size)
    head = b"GGUF" + struct.pack("<I", 3) + struct.pack("<QQ", len(tensors), 4) + meta
    off, body = 0, b""
    for name, a in tensors:
        head += s(name) + struct.pack("<I", 1) + struct.pack("<Q", a.size) + struct.pack("<I", 0) + struct.pack("<Q", off)
        b = a.tobytes() + b"\0" * ((-a.nbytes) % 32)
        body += b
        off += len(b)
    head += b"\0" * ((-len(head)) % 32)
    open(out_gguf, "wb").write(head + body)
    # legacy .dat: per entry values * ncall with ncall = chunks (the old tool's convention)
    d = struct.pack("<i", len(entries))
    for name, sums, c in entries:
        vals = (sums / np.float32(count)) if c > 0 else np.ones(sums.size, np.float32)
        ncall = chunks
        d += struct.pack("<i", len(name)) + name.encode() + struct.pack("<ii", ncall, sums.size)
        d += (vals * np.float32(ncall)).astype(np.float32).tobytes()
    d += struct.pack("<i", chunks) + struct.pack("<i", len("synthetic.txt")) + b"synthetic.txt"
    open(out_dat, "wb").write(d)

if __name__ == "__main__":
    main()
