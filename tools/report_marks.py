#!/usr/bin/env python3
"""report_marks.py PNG... - check that each screenshot of a qk-report plot drew marks: at
least 30 coloured pixels (channel spread > 60) in it.  Axes, grid lines and labels are grey or
black, the background white, so only markers, bars and boxes are coloured.  Standard library
only: a small PNG reader for Chromium's 8-bit RGB(A) screenshots (non-interlaced)."""
import struct
import sys
import zlib


def read_png(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path + ": not a PNG"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, path + ": unsupported PNG"
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def coloured(path):
    w, h, bpp, rows = read_png(path)
    n = 0
    for r in rows:
        for x in range(w):
            px = r[x * bpp:x * bpp + 3]
            if max(px) - min(px) > 60:
                n += 1
    return n


def main():
    bad = 0
    for p in sys.argv[1:]:
        n = coloured(p)
        print("%s: %d coloured pixels" % (p, n))
        if n < 30:
            print("%s: the plot drew no marks" % p, file=sys.stderr)
            bad = 1
    sys.exit(bad)


if __name__ == "__main__":
    main()
