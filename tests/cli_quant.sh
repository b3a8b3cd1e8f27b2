# qk-quant model quantization (sourced by tests/cli.sh: uses its expect/ok/bad helpers)
S4=goldens/models/stories4M/stories4M-f32.gguf
GQ=goldens/quant
sha() { sha256sum "$1" | cut -c1-64; }
want() { grep " stories4M-$1.gguf\$" $GQ/stories4M.sha256 | cut -c1-64; }

# byte-identical to llama-quantize, positional NTHREADS, any thread count
expect 0 "$QK" quant -q "$S4" "$T/q4.gguf" Q4_0 2
[ "$(sha "$T/q4.gguf")" = "$(want Q4_0)" ] && ok || bad "quant Q4_0 differs from llama-quantize"
expect 0 "$QK" quant -q -t 3 "$S4" "$T/q8.gguf" 7
[ "$(sha "$T/q8.gguf")" = "$(want Q8_0)" ] && ok || bad "quant 7 (Q8_0) differs from llama-quantize"
# without OUT: ggml-model-TYPE.gguf beside the input
cp "$S4" "$T/m.gguf"
expect 0 "$QK" quant -q "$T/m.gguf" q8_0 1
[ "$(sha "$T/ggml-model-Q8_0.gguf")" = "$(want Q8_0)" ] && ok || bad "default output name"
# --keep-split on a single file: OUT-00001-of-00001.gguf (".gguf" cut off OUT, as llama-quantize does)
expect 0 "$QK" quant -q --keep-split "$S4" "$T/ks.gguf" Q8_0
[ -f "$T/ks-00001-of-00001.gguf" ] && ok || bad "--keep-split shard name"
# --dry-run writes nothing; --json is one document with the schema of qk-quant(1)
expect 0 "$QK" quant --dry-run --json "$S4" Q4_K_M
[ -f "$T/ggml-model-Q4_K_M.gguf" ] && bad "--dry-run wrote a file" || ok
if command -v python3 >/dev/null; then
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); t={x["name"]:x for x in d["tensors"]}
assert d["dry_run"] and d["file_type"]==15 and d["outputs"]==[] and d["total"]["tensors"]==39
assert t["blk.3.ffn_down.weight"]["type"]=="q6_K" and t["blk.0.ffn_down.weight"]["type"]=="q4_K" and t["output_norm.weight"]["type"]=="f32"
assert t["blk.0.attn_q.weight"]["source_type"]=="f32" and t["blk.0.attn_q.weight"]["bytes"]==256*256//256*144' "$T/out" && ok || bad "quant --dry-run --json"
    expect 0 "$QK" quant --measure --json -q "$S4" "$T/m6.gguf" Q6_K
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); t={x["name"]:x for x in d["tensors"]}
q=t["blk.0.attn_q.weight"]; assert 25 < q["snr_db"] < 60 and 0 < q["nmse"] < 1e-2, q
assert d["total"]["bpw"] < 7 and d["outputs"][0].endswith("m6.gguf")' "$T/out" && ok || bad "quant --measure --json"
fi
[ "$(sha "$T/m6.gguf")" = "$(want Q6_K)" ] && ok || bad "--measure changed the output"
# the importance matrix is read in both formats; with it the file is llama-quantize's too
QKA=$(cd "$(dirname "$QK")" && pwd)/$(basename "$QK")
(cd $GQ && "$QKA" quant -q --imatrix stories4M.imatrix.gguf ../models/stories4M/stories4M-f32.gguf "$T/im.gguf" Q4_K_M 2)
[ "$(sha "$T/im.gguf")" = "$(awk '$2 == "Q4_K_M" {print $1}' $GQ/stories4M-imatrix.sha256)" ] && ok || bad "quant --imatrix Q4_K_M differs from llama-quantize"
expect 0 "$QK" quant -q --imatrix $GQ/stories4M.imatrix.dat "$S4" "$T/i.gguf" IQ4_NL
expect 0 "$QK" quant -q --imatrix $GQ/stories4M.imatrix.gguf --include-weights ffn_ "$S4" "$T/i.gguf" Q4_K_S

# bad input: exit 2, one line, nothing written
expect 2 "$QK" quant "$S4" "$T/x.gguf" Q4_K_X
expect 2 "$QK" quant "$S4" "$T/x.gguf" Q2_K_S
expect 2 "$QK" quant "$S4" "$T/x.gguf" IQ2_XXS
printf 'not an imatrix' > "$T/junk.dat"
expect 2 "$QK" quant --imatrix "$T/junk.dat" "$S4" "$T/x.gguf" Q4_K_M
expect 2 "$QK" quant --imatrix $GQ/stories4M.imatrix.gguf goldens/models/stories260K/stories260K-f32.gguf "$T/x.gguf" Q8_0
expect 2 "$QK" quant "$T/m.gguf" "$T/m.gguf" Q8_0
expect 2 "$QK" quant "$T/q8.gguf" "$T/x.gguf" Q4_0
expect 0 "$QK" quant -q --allow-requantize "$T/q8.gguf" "$T/x.gguf" Q4_0
rm -f "$T/x.gguf"
expect 2 "$QK" quant --include-weights a --exclude-weights b "$S4" "$T/x.gguf" Q8_0
expect 2 "$QK" quant --tensor-type 'attn_q=q9_9' "$S4" "$T/x.gguf" Q8_0
expect 2 "$QK" quant --override-kv 'a.b=blob:1' "$S4" "$T/x.gguf" Q8_0
expect 2 "$QK" quant --prune-layers 1,x "$S4" "$T/x.gguf" Q8_0
expect 2 "$QK" quant "$S4"
expect 3 "$QK" quant "$T/missing.gguf" "$T/x.gguf" Q8_0
if ls "$T" | grep -q '^x\|tmp\.'; then bad "quant left partial output"; ls "$T"; else ok; fi
cmp -s "$T/m.gguf" "$S4" && ok || bad "quant modified its input"
# --override-kv, --tensor-type-file, --prune-layers end up in the file
printf 'attn_q=q8_0\n  ffn_down=f16 \n' > "$T/tt.txt"
expect 0 "$QK" quant -q --override-kv general.name=str:renamed --override-kv llama.context_length=int:-512 \
    --tensor-type-file "$T/tt.txt" --prune-layers 0,2 "$S4" "$T/o.gguf" Q4_0
expect 0 "$QK" quant --dry-run --json "$T/o.gguf" COPY
if command -v python3 >/dev/null; then
    python3 -c 'import json,sys,struct
d=json.load(open(sys.argv[1])); t={x["name"]:x["type"] for x in d["tensors"]}
assert t["blk.1.attn_q.weight"]=="q8_0" and t["blk.0.ffn_down.weight"]=="f16" and not any(n.startswith("blk.2.") for n in t)
b=open(sys.argv[2],"rb").read(); o=24; kv={}
def rs():
    global o
    n=struct.unpack_from("<Q",b,o)[0]; o+=8; o+=n; return b[o-n:o].decode()
for _ in range(struct.unpack_from("<Q",b,16)[0]):
    k=rs(); ty=struct.unpack_from("<I",b,o)[0]; o+=4
    if ty==8: kv[k]=rs()
    elif ty==4: kv[k]=struct.unpack_from("<I",b,o)[0]; o+=4
    elif ty==9:
        et,n=struct.unpack_from("<IQ",b,o); o+=12
        for _ in range(n):
            if et==8: rs()
            else: o+={0:1,1:1,2:2,3:2,4:4,5:4,6:4,7:1,10:8,11:8,12:8}[et]
    else: o+={0:1,1:1,2:2,3:2,5:4,6:4,7:1,10:8,11:8,12:8}[ty]
assert kv["general.name"]=="renamed" and kv["llama.context_length"]==512 and kv["llama.block_count"]==2, kv' "$T/out" "$T/o.gguf" && ok || bad "quant overrides not in the output"
fi

# --- datacenter schemes through --raw-encode/--raw-decode (kernels/scaled.h)
G=goldens/ggml
expect 0 "$QK" quant --raw-encode fp8_e4m3 --shape 8x4096 $G/input.f32 "$T/e4m3.bin"
[ "$(wc -c <"$T/e4m3.bin")" = 32768 ] && ok || bad "fp8_e4m3: one byte per element"
expect 0 "$QK" quant --raw-encode mxfp4 --granularity group:32 --shape 8x4096 $G/input.f32 "$T/mx.bin"
expect 0 "$QK" quant --raw-decode mxfp4 --granularity group:32 --shape 8x4096 "$T/mx.bin" "$T/mx.f32"
# OCP MXFP4 and ggml's MXFP4 are the same mathematics: equal decoded values on the golden input
"$QK" quant --raw-decode mxfp4 --shape 8x4096 $G/mxfp4.plain.q "$T/gg.f32"
python3 - "$T/mx.f32" "$T/gg.f32" <<'PY' 2>/dev/null && ok || { command -v python3 >/dev/null && bad "OCP and GGUF MXFP4 decode differently beyond ties"; }
import struct, sys
a = open(sys.argv[1], 'rb').read(); b = open(sys.argv[2], 'rb').read()
x = struct.unpack('%df' % (len(a) // 4), a); y = struct.unpack('%df' % (len(b) // 4), b)
diff = sum(1 for p, q in zip(x, y) if p != q and not (p == 0 and q == 0))
assert diff < len(x) // 500, diff  # only exact E2M1 midpoints may round differently
PY
expect 0 "$QK" quant --raw-encode int4 --granularity group:128 --shape 8x4096 $G/input.f32 "$T/i4.bin"
expect 0 "$QK" quant --raw-encode nvfp4 --global-scale auto --shape 8x4096 $G/input.f32 "$T/nv.bin"
expect 2 "$QK" quant --raw-encode int4 --granularity group:100 --shape 8x4096 $G/input.f32 "$T/x.bin"
expect 2 "$QK" quant --raw-encode nosuch --granularity tensor --shape 8x4096 $G/input.f32 "$T/x.bin"
expect 2 "$QK" quant --raw-decode fp8_e4m3 --shape 8x4096 $G/input.f32 "$T/x.bin"

# --- Hugging Face checkpoints: --to
expect 0 "$QK" quant -q --to ct-fp8 goldens/models/stories260K/hf-f32 "$T/ct-fp8"
[ -f "$T/ct-fp8/config.json" ] && grep -q '"quant_method": *"compressed-tensors"' "$T/ct-fp8/config.json" && ok || bad "--to ct-fp8: config.json"
expect 0 "$QK" inspect --diff --min-snr 25 "$T/ct-fp8" goldens/models/stories260K/hf-f32
expect 2 "$QK" quant --to ct-fp8 goldens/models/stories260K/hf-f32 "$T/ct-fp8"
expect 2 "$QK" quant --to nosuch goldens/models/stories260K/hf-f32 "$T/ct-x"
[ ! -e "$T/ct-x" ] && ok || bad "--to left a partial directory"
expect 0 "$QK" quant -q --to f32 "$T/ct-fp8" "$T/deq"
expect 0 "$QK" inspect --diff --min-snr 25 "$T/deq" goldens/models/stories260K/hf-f32
