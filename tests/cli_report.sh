# qk-report (sourced by tests/cli.sh: uses its helpers).  Three stories260K models against
# the F32 base; the plan run through GNU parallel merges to the bytes of one process.
RM=goldens/models/stories260K/stories260K-f32.gguf
RT=goldens/stories260K-eval/eval-64k.txt
RH=goldens/tasks/hellaswag-stories.txt
"$QK" quant -q "$RM" "$T/r16.gguf" F16 >/dev/null 2>&1
"$QK" quant -q "$RM" "$T/rb16.gguf" BF16 >/dev/null 2>&1
RMODELS="$T/r16.gguf $T/rb16.gguf goldens/models/stories260K/hf-bf16"
# under ASan+UBSan (QK_SANITIZED) 2 HellaSwag tasks, not 6: the scorer's scalar F16 attention takes 0.5 s a task there
RHT=6
[ -n "${QK_SANITIZED:-}" ] && RHT=2
ROPT="--base $RM -f $RT -c 128 --chunks 3 --hellaswag $RH --hellaswag-tasks $RHT"
expect 0 "$QK" report -q $ROPT -o "$T/rep1" -t 1 -j 1 $RMODELS
for f in report.md report.json report.html kld_bpw.svg ppl_bpw.svg kld_pct.svg; do
    [ -s "$T/rep1/$f" ] && ok || bad "qk-report: no $f"
done
cmp -s "$T/out" "$T/rep1/report.md" && ok || bad "qk-report stdout is not report.md"
[ "$(grep -c '^| `' "$T/rep1/report.md")" = 3 ] && ok || bad "qk-report: 3 rows"
grep -q '^| `[^`]*r16.gguf` | GGUF | F16 | 16.0[0-9]* | ' "$T/rep1/report.md" && ok || bad "F16 row: $(grep r16 "$T/rep1/report.md")"
grep -q '^| `goldens/models/stories260K/hf-bf16` | safetensors | bfloat16 | 16.000 | ' "$T/rep1/report.md" && ok || bad "HF row"
for p in kld_bpw ppl_bpw kld_pct; do grep -q "<div id=\"$p\">" "$T/rep1/report.html" && ok || bad "html lacks $p"; done
if command -v python3 >/dev/null; then
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); m=d["models"]; assert len(m)==3 and m[0]["scheme"]=="F16" and m[0]["family"]=="float" and 0<m[0]["kld"]["mean"]<1e-3 and len(m[0]["tasks"])==1 and d["tasks"][0]["tasks"]==int(sys.argv[2])' "$T/rep1/report.json" $RHT && ok || bad "report.json"
fi
# the same bytes with models evaluated two at a time and other thread counts
expect 0 "$QK" report -q $ROPT -o "$T/rep2" -t 3 -j 2 $RMODELS
for f in report.md report.json report.html kld_bpw.svg ppl_bpw.svg kld_pct.svg; do
    cmp -s "$T/rep1/$f" "$T/rep2/$f" && ok || bad "qk-report $f depends on -j/-t"
done
# the plan: one command per shard (3 models x (3 one-chunk shards + 1 task file))
expect 0 "$QK" report $ROPT --plan --parts "$T/parts" --shard-chunks 1 $RMODELS
cp "$T/out" "$T/plan.txt"
[ "$(wc -l <"$T/plan.txt")" = 12 ] && ok || bad "plan: $(wc -l <"$T/plan.txt") lines, want 12"
grep -q -- "--chunk-range 2:3 --partial-out '[^']*/parts/m001.c000002-000003.qkpart' >/dev/null$" "$T/plan.txt" && ok || bad "plan line: $(sed -n 3p "$T/plan.txt")"
if command -v parallel >/dev/null; then
    (cd /tmp && parallel --will-cite -j 2 <"$T/plan.txt") && ok || bad "the plan failed under GNU parallel"
else
    bad "GNU parallel is not installed (make installs Debian's parallel as root)"
    sh "$T/plan.txt"
fi
expect 0 "$QK" report -q $ROPT --merge-dir "$T/parts" -o "$T/rep3" $RMODELS
for f in report.md report.json report.html kld_bpw.svg ppl_bpw.svg kld_pct.svg; do
    cmp -s "$T/rep1/$f" "$T/rep3/$f" && ok || bad "merged $f differs from one process"
done
# a Slurm array task runs line $SLURM_ARRAY_TASK_ID + 1 (docs/scale-out.md): the same command
rm -f "$T/parts/m000.c000000-000001.qkpart"
(SLURM_ARRAY_TASK_ID=0; sed -n "$((SLURM_ARRAY_TASK_ID + 1))p" "$T/plan.txt" | sh) && [ -s "$T/parts/m000.c000000-000001.qkpart" ] && ok || bad "plan line run as a Slurm task"
# bad input and atomic output
rm "$T/parts/m002.c000001-000002.qkpart"
expect 2 "$QK" report -q $ROPT --merge-dir "$T/parts" $RMODELS
grep -q "leave a gap after" "$T/err" && ok || bad "missing part message: $(cat "$T/err")"
expect 2 "$QK" report -q $ROPT -o "$T/rep1" $RMODELS
grep -q "exists and is not an empty directory" "$T/err" && ok || bad "existing output message: $(cat "$T/err")"
expect 3 "$QK" report -q $ROPT -o "$T/rep4" "$T/r16.gguf" "$T/nosuch.gguf"
ls -d "$T"/rep4* >/dev/null 2>&1 && bad "a failed qk-report left output" || ok
head -n 11 "$RH" >"$T/rhs11.txt"
expect 2 "$QK" report -q --base "$RM" -f "$RT" -c 128 --chunks 2 --hellaswag "$T/rhs11.txt" "$T/r16.gguf"
grep -q "rhs11.txt: line 11:" "$T/err" && ok || bad "qk-report task file message: $(cat "$T/err")"
expect 2 "$QK" report -q --base "$RM" "$T/r16.gguf"
expect 2 "$QK" report -q $ROPT --plan $RMODELS
expect 2 "$QK" report -q $ROPT --hellaswag-tasks 0 $RMODELS
