# qk-bench behaviour (sourced by tests/cli.sh: uses its expect/ok/bad helpers).
# Smoke tests only: tiny repetition counts, structure and exit codes, never timings.
M=goldens/models/stories260K/stories260K-f32.gguf
B="$QK bench"
py() { command -v python3 >/dev/null || return 0; python3 - "$@"; }

expect 0 $B --help
expect 0 $B model --help
expect 0 $B kernels --help
expect 0 $B roofline --help
expect 2 $B
expect 2 $B nosuchsub
expect 2 $B model --bogus
expect 2 $B model
expect 2 $B model -m "$M" extra-argument
expect 2 $B model -m "$M" -p abc
expect 2 $B model -m "$M" -p 8,-1
expect 2 $B model -m "$M" -r 0
expect 2 $B model -m "$M" -p 0 -n 0
expect 2 $B model -m "$M" -t 1,x
expect 2 $B model -m "$M" --kv-cache q8_0
expect 2 $B model -m "$M" -o xml
expect 2 $B model -m "$M" --bandwidth 0
expect 2 $B model -m goldens/ggml/input.f32 -p 8 -n 0 -r 1
expect 3 $B model -m "$T/no-such-model.gguf"
expect 2 $B kernels --types nosuchtype
expect 2 $B kernels --levels avx9
expect 2 $B kernels --types q4_0 --shape 8x100
expect 2 $B kernels --time-ms -1
expect 2 $B roofline --size 0
expect 2 $B roofline extra

# model: markdown table with one row per test, nothing on stderr without a TTY
expect 0 $B model -m "$M" -p 16 -n 4 -r 1 -t 1 --no-roofline
[ "$(grep -c '^| llama ' "$T/out")" = 2 ] && ok || bad "model md: want 2 rows"
grep -q '^| model .*| test .*| t/s ' "$T/out" && ok || bad "model md header"
grep -q ' pp16 ' "$T/out" && grep -q ' tg4 ' "$T/out" && ok || bad "model md test names"
[ -s "$T/err" ] && bad "model: stderr not empty: $(cat "$T/err")" || ok

# model --json: the documented schema
expect 0 $B model -m "$M" -p 8,16 -n 4 -r 3 -t 1,2 --bandwidth 10 --json
py "$T/out" <<'PY' && ok || bad "model --json schema"
import json, math, statistics, sys
d = json.load(open(sys.argv[1]))
assert d["command"] == "model" and isinstance(d["meta"], dict) and isinstance(d["notes"], list)
rows = d["rows"]
assert [r["test"] for r in rows] == ["pp8", "pp8", "pp16", "pp16", "tg4", "tg4"], rows
assert [r["threads"] for r in rows] == [1, 2] * 3
for r in rows:
    ts = r["tokens_per_s"]
    assert set(ts) == {"mean", "sd", "median", "min", "max", "n", "samples"}
    assert ts["n"] == 3 and len(ts["samples"]) == 3 and ts["min"] <= ts["median"] <= ts["max"]
    s = ts["samples"]  # the statistics against Python's (sample sd, as llama-bench)
    for k, v in (("mean", statistics.mean(s)), ("sd", statistics.stdev(s)), ("median", statistics.median(s))):
        assert math.isclose(ts[k], v, rel_tol=1e-9, abs_tol=1e-9), (k, ts[k], v)
    assert r["model_params"] == 292800 and r["model_bytes"] > 0 and r["bpw"] == 32
    assert r["file"].endswith("stories260K-f32.gguf")
    gen = r["test"].startswith("tg")
    assert (r["roofline_pct"] is not None) == gen and (r["bytes_per_token"] is not None) == gen
    if gen:
        assert r["read_gbps"] == 10 and r["roofline_pct"] > 0
assert d["meta"]["repetitions"] == 3 and d["meta"]["kv_cache"] == "f16"
PY

# model -d: every test at every depth, named as llama-bench names them; the
# roofline from read bursts measured in the run (a small buffer: smoke test)
expect 2 $B model -m "$M" -p 8 -n 0 -d -1
expect 2 $B model -m "$M" -p 8 -n 0 -d x
expect 0 $B model -m "$M" -p 8 -n 4 -d 0,16 -r 2 -t 1 --size 4 --json
py "$T/out" <<'PY' && ok || bad "model -d rows"
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["rows"]
assert [r["test"] for r in rows] == ["pp8", "pp8 @ d16", "tg4", "tg4 @ d16"], rows
assert [r["n_depth"] for r in rows] == [0, 16, 0, 16]
for r in rows[2:]:
    assert r["read_gbps"] > 0 and r["roofline_pct"] > 0, r
    assert r["bytes_per_token"] > 0
assert rows[3]["bytes_per_token"] > rows[2]["bytes_per_token"]  # the 16 cached positions
assert d["meta"]["read_burst_bytes"] > 0
PY

# model -o csv: rectangular, statistics split in three columns
expect 0 $B model -m "$M" -p 8 -n 2 -r 1 -t 1 --no-roofline --kv-cache f32 -o csv
py "$T/out" <<'PY' && ok || bad "model csv structure"
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
h = rows[0]
assert len(rows) == 3 and all(len(r) == len(h) for r in rows), rows
assert h[:7] == ["model", "size_mib", "params_m", "bpw", "backend", "threads", "test"]
assert h[7:10] == ["tokens_per_s_mean", "tokens_per_s_sd", "tokens_per_s_median"]
assert [r[h.index("test")] for r in rows[1:]] == ["pp8", "tg2"]
assert rows[1][h.index("kv_cache")] == "f32"
PY

# --out: written atomically, the same structure as stdout; never over an input
expect 0 $B model -m "$M" -p 8 -n 0 -r 1 -t 1 --no-warmup -q --json --out "$T/r.json"
[ ! -s "$T/out" ] && py "$T/r.json" <<'PY' && ok || bad "--out file"
import json, sys
d = json.load(open(sys.argv[1]))
assert [r["test"] for r in d["rows"]] == ["pp8"] and d["meta"]["warmup"] == "no"
PY
cp "$M" "$T/m.gguf"
expect 2 $B model -m "$T/m.gguf" -p 8 -n 0 -r 1 --out "$T/m.gguf"
cmp -s "$M" "$T/m.gguf" && ok || bad "model overwritten by --out"

# kernels: one row per type and level, plus nothing else with --no-blas
expect 0 $B kernels --types q4_0,q8_0,f16 --shape 16x512 --tokens 4 --time-ms 0 -r 1 --no-blas --json
py "$T/out" <<'PY' && ok || bad "kernels --json schema"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["command"] == "kernels"
levels = ["scalar", "avx2", "avx512"]
n = levels.index(d["meta"]["simd_supported"]) + 1
rows = d["rows"]
assert [r["type"] for r in rows] == [t for t in ["q4_0", "q8_0", "f16"] for _ in range(n)], rows
assert [r["level"] for r in rows] == levels[:n] * 3
for i, r in enumerate(rows):
    for k in ["encode_gbps", "decode_gbps", "dot_gbps", "dot_gflops", "gemm_gflops"]:
        assert r[k] > 0, (r["type"], k)
    assert (r["quantize_gbps"] is not None) == (r["level"] == "scalar")
    # AVX2 repacks Q4_0, Q8_0 and F16 (16 rows: two groups); scalar has no packed kernel
    packed = r["level"] != "scalar"
    for k in ["packed_dot_gbps", "packed_gemm_gflops"]:
        assert (r[k] is not None and r[k] > 0) if packed else r[k] is None, (r["type"], r["level"], k)
    assert r["rows"] == 16 and r["cols"] == 512 and r["tokens"] == 4 and r["threads"] == 1
    impl = r["impl"].split("/")  # dot/encode/decode/pack levels, each no higher than the row's
    assert len(impl) == 4 and (impl[3] == "-") == (not packed), impl
    assert all(x in ("-", "none") or levels.index(x) <= levels.index(r["level"]) for x in impl), impl
PY
expect 0 $B kernels --types q4_K --levels scalar --shape 4x256 --time-ms 0 -r 1 --no-blas -o csv
[ "$(wc -l <"$T/out")" = 2 ] && ok || bad "kernels csv: want header + 1 row"
# a missing BLAS library is a note, not an error
expect 0 $B kernels --types q8_0 --levels scalar --shape 4x256 --time-ms 0 -r 1 --blas "$T/nosuchblas.so"
grep -q 'OpenBLAS reference skipped' "$T/out" && ok || bad "kernels: missing BLAS not noted"

# roofline: one row per thread count
expect 0 $B roofline -t 2 --size 4 --passes 1 --time-ms 5 --json
py "$T/out" <<'PY' && ok || bad "roofline --json schema"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["command"] == "roofline" and [r["threads"] for r in d["rows"]] == [1, 2]
for r in d["rows"]:
    assert r["read_gbps"] > 0 and r["fma_gflops"] > 0 and r["ridge_flop_per_byte"] > 0
assert d["meta"]["fma_isa"] in ("avx512f", "avx2+fma", "scalar") and d["meta"]["passes"] == 1
PY
expect 0 $B roofline -t 1 --size 4 --passes 1 --time-ms 5
grep -q '^| threads | read GB/s | FMA GFLOP/s ' "$T/out" && ok || bad "roofline md header"

# QK_CPU lowers the engine's level, and the model rows say so
QK_CPU=scalar $B model -m "$M" -p 8 -n 0 -r 1 -t 1 --no-warmup -o csv >"$T/out" 2>"$T/err" &&
    grep -q ',CPU scalar,1,pp8,' "$T/out" && ok || bad "QK_CPU=scalar not reported: $(cat "$T/out" "$T/err")"

# model on a quantized HF checkpoint: a decoded token reads every layer's stored parts (codes,
# scales, zero points), so bytes/token is at least their size in the safetensors files
for bh in W4A16 FP8_DYNAMIC; do
    expect 0 $B model -m goldens/hfq/$bh -p 4 -n 2 -r 1 -t 1 --json
    py "$T/out" goldens/hfq/$bh <<'PY' && ok || bad "model $bh: bytes/token leaves out the layers' parts"
import glob, json, struct, sys
d = json.load(open(sys.argv[1]))
layer = 0
for f in glob.glob(sys.argv[2] + "/*.safetensors"):
    with open(f, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        h = json.loads(fh.read(n))
    layer += sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in h.items() if k.startswith("model.layers."))
tg = [r for r in d["rows"] if r["test"].startswith("tg")][0]
assert layer > 0 and tg["bytes_per_token"] >= layer, (tg["bytes_per_token"], layer)
PY
done
