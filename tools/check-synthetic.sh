#!/bin/sh
# check-synthetic.sh - compare qk-quant with llama-quantize's reference hashes
# on the random-weight models of ../shared/reference/synthetic (not part of
# `make check`: the models are 300-500 MB and the scalar encoders take minutes).
#
#   tools/check-synthetic.sh [-t THREADS] [-m MODELDIR] [-r REFDIR] [-o TSV] [MODEL:PRESET[.imatrix] ...]
#
# MODELDIR holds smol-f16.gguf and bench-f16.gguf, regenerated with
#   python3 ../shared/tools/mkgguf.py smol-f16.gguf --preset smol135m --seed 1
#   python3 ../shared/tools/mkgguf.py bench-f16.gguf --preset bench250m --seed 7
# Without arguments every reference (every *.file.sha256, and every preset in
# REFUSED.txt, which must be refused with exit 2 and one line) is checked.
# Prints one line per case: MODEL PRESET yes|no|refused-ok|REFUSE-MISMATCH
# [differing tensors]; exits 1 if any case fails.
set -u
QK=${QK_BIN:-build/qk}
THREADS=2
MODELS=.
REF=../shared/reference/synthetic
OUTTSV=
while getopts t:m:r:o: opt; do
    case $opt in
    t) THREADS=$OPTARG ;;
    m) MODELS=$OPTARG ;;
    r) REF=$OPTARG ;;
    o) OUTTSV=$OPTARG ;;
    *) echo "usage: $0 [-t N] [-m MODELDIR] [-r REFDIR] [-o TSV] [MODEL:PRESET[.imatrix] ...]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
QK=$(cd "$(dirname "$QK")" && pwd)/$(basename "$QK")
REF=$(cd "$REF" && pwd)
MODELS=$(cd "$MODELS" && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
# llama-quantize stores the --imatrix argument in the file: use the same bare name
ln -s "$REF/smol135m-seed1.imatrix.gguf" "$W/smol135m-seed1.imatrix.gguf"

model_file() {
    case $1 in
    smol135m-seed1) echo "$MODELS/smol-f16.gguf" ;;
    bench250m-seed7) echo "$MODELS/bench-f16.gguf" ;;
    esac
}

# per-tensor sha256 of a GGUF (name<TAB>type<TAB>sha), for the diagnosis of a mismatch
tensor_hashes() {
    python3 - "$1" <<'PY'
import hashlib, struct, sys
f = open(sys.argv[1], 'rb'); b = f.read()
o = 0
def rd(fmt):
    global o
    v = struct.unpack_from('<' + fmt, b, o); o += struct.calcsize('<' + fmt); return v[0]
def rstr():
    global o
    n = rd('Q'); s = b[o:o + n].decode('utf-8', 'replace'); o += n; return s
SZ = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def skip(t):
    global o
    if t == 8: rstr()
    elif t == 9:
        et = rd('I'); n = rd('Q')
        for _ in range(n): skip(et)
    else: o += SZ[t]
assert b[:4] == b'GGUF'; o = 4; rd('I'); nt = rd('Q'); nkv = rd('Q')
align = 32
for _ in range(nkv):
    k = rstr(); t = rd('I')
    if k == 'general.alignment': align = struct.unpack_from('<I', b, o)[0]
    skip(t)
infos = []
for _ in range(nt):
    name = rstr(); nd = rd('I'); ne = [rd('Q') for _ in range(nd)]; ty = rd('I'); off = rd('Q')
    infos.append((name, ty, off))
data = (o + align - 1) // align * align
offs = sorted(set(x[2] for x in infos)) + [len(b) - data]
for name, ty, off in infos:
    end = min(x for x in offs if x > off)
    # the padded span; padding is zeros in both files, so comparing it is harmless
    print('%s\t%d\t%s' % (name, ty, hashlib.sha256(b[data + off:data + end]).hexdigest()))
PY
}

run_case() { # MODEL PRESET IMATRIX(0/1)
    m=$1 p=$2 im=$3
    src=$(model_file "$m")
    suffix=""; opt=""
    if [ "$im" = 1 ]; then suffix=".imatrix"; opt="--imatrix smol135m-seed1.imatrix.gguf"; fi
    want=$(cut -c1-64 "$REF/$m/$p$suffix.file.sha256")
    out="$W/out.gguf"
    t0=$(date +%s)
    (cd "$W" && "$QK" quant -q $opt "$src" "$out" "$p" "$THREADS") 2>"$W/err"
    rc=$?
    t1=$(date +%s)
    if [ $rc != 0 ]; then
        echo "$m $p$suffix no (exit $rc: $(head -c 300 "$W/err"))"; return
    fi
    got=$(sha256sum "$out" | cut -c1-64)
    if [ "$got" = "$want" ]; then
        echo "$m $p$suffix yes ($((t1 - t0)) s)"
    else
        # which tensors differ: compare our per-tensor data hashes with the reference TSV's
        tensor_hashes "$out" > "$W/ours.tsv"
        diffs=$(awk -F'\t' 'NR==FNR { if ($1 != "kv") { ty[$1] = $2; h[$1] = $4 } ; next }
                 { if (!($1 in h)) print $1 "(extra)"; else if (ty[$1] != $2) print $1 "(type " $2 " vs " ty[$1] ")";
                   else if (substr($3, 1, 64) != h[$1]) print $1 }' "$REF/$m/$p$suffix.tensors.tsv" "$W/ours.tsv" | head -8 | tr '\n' ' ')
        echo "$m $p$suffix no (data differs: ${diffs:-no tensor differs: metadata/layout})"
    fi
    rm -f "$out"
}

refuse_case() { # MODEL PRESET
    m=$1 p=$2
    (cd "$W" && "$QK" quant -q "$(model_file "$m")" "$W/out.gguf" "$p" "$THREADS") >/dev/null 2>"$W/err"
    rc=$?
    if [ $rc = 2 ] && [ "$(wc -l <"$W/err")" = 1 ] && [ ! -e "$W/out.gguf" ]; then
        echo "$m $p refused-ok ($(cat "$W/err"))"
    else
        echo "$m $p REFUSE-MISMATCH (exit $rc)"
    fi
    rm -f "$W/out.gguf"
}

cases=""
if [ $# -gt 0 ]; then
    cases="$*"
else
    for m in smol135m-seed1 bench250m-seed7; do
        for f in "$REF/$m"/*.file.sha256; do
            b=${f##*/}; b=${b%.file.sha256}
            cases="$cases $m:$b"
        done
        [ -f "$REF/$m/REFUSED.txt" ] && for p in $(cut -d: -f1 "$REF/$m/REFUSED.txt"); do cases="$cases $m:refuse:$p"; done
    done
fi
for c in $cases; do
    m=${c%%:*}; rest=${c#*:}
    case $rest in
    refuse:*) refuse_case "$m" "${rest#refuse:}" ;;
    *.imatrix) run_case "$m" "${rest%.imatrix}" 1 ;;
    *) run_case "$m" "$rest" 0 ;;
    esac
done | tee "$W/results"
[ -n "$OUTTSV" ] && cp "$W/results" "$OUTTSV"
# (the loop ran in a pipe's subshell: count failures from the printed lines)
# (the third field is the verdict; a refusal message may itself contain " no ")
if awk '$3 == "no" || $3 == "REFUSE-MISMATCH" { f = 1 } END { exit !f }' "$W/results"; then exit 1; fi
exit 0
