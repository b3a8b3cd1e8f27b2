"""Compare two imatrix GGUF files (qk-imatrix's and llama-imatrix's): the same tensors, counts
equal, and the largest relative in_sum2 difference.  Used by tools/calib-accept.sh; needs numpy and
gguf (the venv of make crosscheck).  Usage: calib_cmp_imatrix.py A.gguf B.gguf"""
import sys

import gguf
import numpy as np


def tensors(path):
    return {t.name: np.array(t.data, dtype=np.float64).ravel() for t in gguf.GGUFReader(path).tensors}


def main():
    a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
    if sorted(a) != sorted(b):
        print(f"different tensors: {sorted(set(a) ^ set(b))}")
        return 1
    worst, where, counts_equal = 0.0, "", True
    for name in sorted(a):
        x, y = a[name], b[name]
        if name.endswith(".counts"):
            counts_equal &= bool(np.array_equal(x, y))
            continue
        r = float((np.abs(x - y) / np.maximum(np.abs(y), 1e-30)).max())
        if r > worst:
            worst, where = r, name
    print(f"{len(a)} tensors, counts equal: {counts_equal}, largest relative in_sum2 difference "
          f"{worst:.3g} ({where})")
    return 0 if counts_equal else 1


if __name__ == "__main__":
    sys.exit(main())
