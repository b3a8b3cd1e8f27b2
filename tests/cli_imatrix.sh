# qk-imatrix behaviour (sourced by tests/cli.sh: uses its expect/ok/bad helpers);
# the statistics themselves are checked against llama-imatrix in tests/test_imatrix.c
IM=goldens/models/stories4M/stories4M-f32.gguf
IT=goldens/stories260K-eval/eval-64k.txt
IG=goldens/imatrix

# a run: llama-imatrix's printout, a GGUF imatrix qk-quant reads
expect 0 "$QK" imatrix -q -m "$IM" -f "$IT" -c 64 --chunks 3 -o "$T/a.gguf" -t 2
grep -q '^\[1\][0-9.]*,\[2\][0-9.]*,\[3\][0-9.]*,$' "$T/out" && ok || bad "imatrix progress line: $(head -1 "$T/out")"
grep -q '^Final estimate: PPL = [0-9.]* +/- [0-9.]*$' "$T/out" && ok || bad "imatrix final estimate"
cp "$T/out" "$T/im.out"
expect 0 "$QK" quant -q --imatrix "$T/a.gguf" "$IM" "$T/a-q4.gguf" Q4_K_M 2
# the same chunks' perplexity as qk-kld's
"$QK" kld -q -m "$IM" -f "$IT" -c 64 --chunks 3 -t 2 >"$T/kld.out" 2>/dev/null
# (qk-kld prints its bits-per-weight line after it)
grep -q '^Final estimate' "$T/im.out" && [ "$(grep '^Final estimate' "$T/kld.out")" = "$(grep '^Final estimate' "$T/im.out")" ] && ok ||
    bad "imatrix PPL differs from qk-kld's"
# the bytes do not depend on threads or batch size; --no-ppl changes nothing in them
expect 0 "$QK" imatrix -q -m "$IM" -f "$IT" -c 64 --chunks 3 -o "$T/b.gguf" -t 1 -b 32 --no-ppl
cmp -s "$T/a.gguf" "$T/b.gguf" && ok || bad "imatrix bytes depend on -t/-b/--no-ppl"
# --json
expect 0 "$QK" imatrix -q -m "$IM" -f "$IT" -c 64 --chunks 2 --chunk 1 -o "$T/c.dat" --output-format dat --process-output --json
if command -v python3 >/dev/null; then
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["format"]=="dat" and d["chunks"]=={"skipped":1,"processed":2} and d["entries"]==29 and d["chunk_count"]==2 and d["ppl"]["tokens_scored"]==2*31' "$T/out" && ok || bad "imatrix --json: $(head -c 300 "$T/out")"
fi
# a mixture-of-experts model: per-expert sums and counts (compared with llama-imatrix's in
# tests/test_imatrix.c), read back by qk-quant; llama-imatrix's MoE file combines back to its bytes
expect 0 "$QK" imatrix -q -m goldens/arch/mixtral/mixtral-f32.gguf -f "$IT" -c 128 --chunks 2 --no-ppl -o "$T/moe.gguf" --json
if command -v python3 >/dev/null; then
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["entries"]==16 and d["chunk_count"]==2' "$T/out" && ok ||
        bad "imatrix MoE --json: $(head -c 300 "$T/out")"
fi
expect 0 "$QK" quant -q --imatrix "$T/moe.gguf" goldens/arch/mixtral/mixtral-f32.gguf "$T/moe-q.gguf" IQ4_XS 2
expect 0 "$QK" imatrix -q --in-file goldens/arch/mixtral/imatrix.gguf -c 128 -o "$T/moe-r.gguf"
cmp -s "$T/moe-r.gguf" goldens/arch/mixtral/imatrix.gguf && ok || bad "imatrix MoE --in-file round trip"
# combining: one llama-imatrix file gives back its bytes; periodic saves
expect 0 "$QK" imatrix -q --in-file "$IG/stories4M-c128.imatrix.gguf" -c 128 -o "$T/r.gguf"
cmp -s "$T/r.gguf" "$IG/stories4M-c128.imatrix.gguf" && ok || bad "imatrix --in-file round trip"
expect 0 "$QK" imatrix -q -m "$IM" -f "$IT" -c 64 --chunks 4 --no-ppl --save-frequency 2 -o "$T/s.gguf"
[ -f "$T/s.gguf.at_2" ] && [ -f "$T/s.gguf.at_4" ] && ok || bad "imatrix --save-frequency copies"
# a GGUF file named otherwise gets llama's warning, and stays GGUF
"$QK" imatrix --in-file "$IG/stories4M-c128.imatrix.gguf" -o "$T/w.dat" >/dev/null 2>"$T/err"
grep -q "warning" "$T/err" && head -c 4 "$T/w.dat" | grep -q GGUF && ok || bad "imatrix suffix warning"
# bad input: exit 2, one line, no output left behind
expect 2 "$QK" imatrix -m "$IM" -f "$IT" -c 64 --chunks 100000 -o "$T/x1.gguf"
expect 2 "$QK" imatrix -m "$IM" -f "$IG/../stories260K-eval/README.md" -o "$T/x2.gguf"
expect 2 "$QK" imatrix -m "$IM" -f "$IT" --output-format xml -o "$T/x3.gguf"
expect 2 "$QK" imatrix -f "$IT" -o "$T/x4.gguf"
expect 2 "$QK" imatrix -o "$T/x5.gguf"
expect 2 "$QK" imatrix -m "$IG/stories4M-c128.imatrix.gguf" -f "$IT" -o "$T/x6.gguf"
expect 2 "$QK" imatrix --in-file "$IM" -o "$T/x7.gguf"
expect 2 "$QK" imatrix -m "$IM" -f "$IT" -c 64 -b 100 -o "$T/x8.gguf"
expect 2 "$QK" imatrix --bogus
expect 2 "$QK" imatrix --in-file "$IG/stories4M-c128.imatrix.gguf" -o "$IG/stories4M-c128.imatrix.gguf"
expect 3 "$QK" imatrix --in-file "$T/missing.gguf" -o "$T/x9.gguf"
if ls "$T" | grep -q '^x'; then bad "imatrix left output behind"; ls "$T"; else ok; fi
expect 0 "$QK" imatrix --help
