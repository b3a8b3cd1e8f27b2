#!/usr/bin/env python3
"""Cut the smol135m-seed1 tensors and importance-matrix entries the imatrix test needs.

Usage: mkslice.py SMOL-F16.gguf SMOL.imatrix.gguf REFDIR OUTDIR

SMOL-F16.gguf: `python3 ../shared/tools/mkgguf.py smol-f16.gguf --preset smol135m --seed 1`
(sha256 90d5abd3...); SMOL.imatrix.gguf and REFDIR: ../shared/reference/synthetic/ and its
smol135m-seed1/ listings.  Writes OUTDIR/smol-slice.gguf (the tensors' F16 bytes, unchanged),
OUTDIR/smol-slice.imatrix.gguf (their .in_sum2/.counts entries and the imatrix.* metadata, bytes
unchanged) and OUTDIR/smol-slice.expect: "PRESET TENSOR TYPE SHA256" for every imatrix preset, the
type and data hash llama-quantize produced for that tensor.
"""
import os, struct, sys

TENSORS = ["blk.0.attn_v.weight", "blk.15.ffn_down.weight"]

def parse(path):
    b = open(path, "rb").read()
    o = [4]
    def rd(f):
        v = struct.unpack_from("<" + f, b, o[0]); o[0] += struct.calcsize("<" + f); return v[0]
    def rs():
        n = rd("Q"); s = b[o[0]:o[0] + n]; o[0] += n; return s.decode()
    SZ = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    def skip(t):
        if t == 8: rs()
        elif t == 9:
            et = rd("I"); n = rd("Q")
            for _ in range(n): skip(et)
        else: o[0] += SZ[t]
    rd("I"); nt = rd("Q"); nkv = rd("Q")
    kvs = []
    for _ in range(nkv):
        s0 = o[0]; k = rs(); skip(rd("I")); kvs.append((k, b[s0:o[0]]))
    infos = {}
    for _ in range(nt):
        name = rs(); nd = rd("I"); ne = [rd("Q") for _ in range(nd)]; ty = rd("I"); off = rd("Q")
        infos[name] = (ne, ty, off)
    data = (o[0] + 31) // 32 * 32
    def tbytes(name):
        ne, ty, off = infos[name]
        n = 1
        for x in ne: n *= x
        es = {0: 4, 1: 2}[ty]
        return b[data + off:data + off + n * es]
    return kvs, infos, tbytes

def s(x):
    e = x.encode(); return struct.pack("<Q", len(e)) + e

def write(path, raw_kvs, tensors):
    head = b"GGUF" + struct.pack("<I", 3) + struct.pack("<QQ", len(tensors), len(raw_kvs)) + b"".join(raw_kvs)
    off, body = 0, b""
    for name, ne, ty, data in tensors:
        head += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        head += struct.pack("<I", ty) + struct.pack("<Q", off)
        pad = data + b"\0" * ((-len(data)) % 32)
        body += pad; off += len(pad)
    head += b"\0" * ((-len(head)) % 32)
    open(path, "wb").write(head + body)

def main():
    model, imat, ref, out = sys.argv[1:5]
    _, mi, mt = parse(model)
    write(os.path.join(out, "smol-slice.gguf"), [s("general.architecture") + struct.pack("<I", 8) + s("llama")],
          [(n, mi[n][0], mi[n][1], mt(n)) for n in TENSORS])
    ikv, ii, it = parse(imat)
    keep = [raw for k, raw in ikv if k.startswith("imatrix.") or k == "general.type"]
    ts = []
    for n in TENSORS:
        for suf in (".in_sum2", ".counts"):
            ts.append((n + suf, ii[n + suf][0], ii[n + suf][1], it(n + suf)))
    write(os.path.join(out, "smol-slice.imatrix.gguf"), keep, ts)
    d = os.path.join(ref, "smol135m-seed1")
    lines = []
    for f in sorted(os.listdir(d)):
        if not f.endswith(".imatrix.tensors.tsv"): continue
        preset = f[:-len(".imatrix.tensors.tsv")]
        for l in open(os.path.join(d, f)):
            p = l.rstrip("\n").split("\t")
            if p[0] in TENSORS:
                lines.append("%s %s %s %s" % (preset, p[0], p[1], p[3]))
    open(os.path.join(out, "smol-slice.expect"), "w").write("\n".join(lines) + "\n")

if __name__ == "__main__":
    main()
