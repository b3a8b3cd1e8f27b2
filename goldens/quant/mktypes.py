#!/usr/bin/env python3
"""Condense llama-quantize's per-tensor reference listings into one table per model.

Usage: mktypes.py REFDIR/MODEL OUT.tsv

REFDIR is ../shared/reference/synthetic (see goldens/quant/README.md).  Output: the model's scalar
metadata ("kv" lines, from the F16 or BF16 listing), then a header row "name dims PRESET...", then
one row per tensor in llama-quantize's output order: name, dims, and the ggml type id llama-quantize
chose for each preset (PRESET.imatrix columns: made with smol135m-seed1.imatrix.gguf).  REFUSED
presets are listed as "#refused PRESET reason" lines.
"""
import glob, os, sys

def main():
    d, out = sys.argv[1], sys.argv[2]
    files = sorted(glob.glob(os.path.join(d, "*.tensors.tsv")))
    presets = [os.path.basename(f)[:-len(".tensors.tsv")] for f in files]
    base = next(f for f in files if os.path.basename(f) in ("F16.tensors.tsv", "BF16.tensors.tsv"))
    kv, rows = [], []
    for line in open(base):
        p = line.rstrip("\n").split("\t")
        if p[0] == "kv":
            if p[1] not in ("general.file_type", "general.quantization_version"):
                kv.append(line.rstrip("\n"))
        else:
            rows.append([p[0], p[2]])
    types = {}
    for pr, f in zip(presets, files):
        t = [l.rstrip("\n").split("\t") for l in open(f) if not l.startswith("kv\t")]
        assert [x[0] for x in t] == [r[0] for r in rows], pr
        types[pr] = [x[1] for x in t]
    with open(out, "w") as o:
        for l in kv:
            o.write(l + "\n")
        ref = os.path.join(d, "REFUSED.txt")
        if os.path.exists(ref):
            for l in open(ref):
                pr, why = l.split(":", 1)
                o.write("#refused\t%s\t%s\n" % (pr, why.strip()))
        o.write("name\tdims\t" + "\t".join(presets) + "\n")
        for i, r in enumerate(rows):
            o.write("%s\t%s\t%s\n" % (r[0], r[1], "\t".join(types[p][i] for p in presets)))

if __name__ == "__main__":
    main()
