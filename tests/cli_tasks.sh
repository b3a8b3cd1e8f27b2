# qk-kld --hellaswag / --winogrande / --multiple-choice (sourced by tests/cli.sh: uses its helpers).
# The answers against llama-perplexity are checked in tests/test_tasks.c; this is the command line.
TM=goldens/models/stories260K/stories260K-f32.gguf
THS=goldens/tasks/hellaswag-stories.txt
TWG=goldens/tasks/winogrande-stories.csv
TMC=goldens/tasks/mc-stories.bin
"$QK" quant -q "$TM" "$T/tb16.gguf" BF16 >/dev/null 2>&1
# Task counts: under ASan+UBSan (QK_SANITIZED) fewer tasks run the same code (the scorer's F16 attention
# is llama.cpp's scalar kernel, about 0.5 s a task there; the answers are tests/test_tasks.c's)
if [ -z "${QK_SANITIZED:-}" ]; then nh=12 nw=20 nm=10 nb=8 nwb=30; else nh=4 nw=6 nm=4 nb=3 nwb=8; fi
# llama-perplexity's table and qk's summary
expect 0 "$QK" kld -q -m "$TM" --hellaswag -f "$THS" --hellaswag-tasks $nh -t 2
grep -q '^task	acc_norm	95% confidence interval$' "$T/out" && ok || bad "hellaswag header"
[ "$(grep -cP '^\d+\t[0-9.]+%\t\[' "$T/out")" = $nh ] && ok || bad "hellaswag: $nh task lines"
grep -q "^HellaSwag: [0-9]* of $nh tasks:"' [0-9.]*% \[[0-9.]*%, [0-9.]*%\] (95% interval)$' "$T/out" && ok || bad "hellaswag summary: $(tail -1 "$T/out")"
# output bytes do not depend on threads or batch size
"$QK" kld -q -m "$TM" --winogrande -f "$TWG" --winogrande-tasks $nw -t 1 >"$T/w1"
"$QK" kld -q -m "$TM" --winogrande -f "$TWG" --winogrande-tasks $nw -t 3 -b 5 >"$T/w3"
cmp -s "$T/w1" "$T/w3" && ok || bad "task scores depend on threads or batch size"
grep -q "^Final Winogrande score($nw tasks): " "$T/w1" && ok || bad "winogrande final line"
# -f drops the final newline, so llama's reader leaves the last line out; -bf keeps it
"$QK" kld -q -m "$TM" --winogrande -f "$TWG" --winogrande-tasks 1 --json >"$T/wf"
"$QK" kld -q -m "$TM" --winogrande -bf "$TWG" --winogrande-tasks 1 --json >"$T/wb"
grep -q '"tasks_in_file": 149,' "$T/wf" && grep -q '"tasks_in_file": 150,' "$T/wb" && ok || bad "winogrande -f/-bf last line"
expect 0 "$QK" kld -q -m "$TM" --multiple-choice -bf "$TMC" --multiple-choice-tasks $nm --json
if command -v python3 >/dev/null; then
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["mode"]=="multiple-choice" and d["tasks"]==int(sys.argv[2]) and len(d["answers"])==int(sys.argv[2]) and d["base"] is None and d["ok"]' "$T/out" $nm && ok || bad "multiple-choice --json"
fi
grep -q '^Random chance: ' "$T/w1" && bad "random chance in winogrande" || ok
# --base: both models in one pass; the model against itself agrees everywhere
expect 0 "$QK" kld -q -m "$TM" --base "$TM" --hellaswag -f "$THS" --hellaswag-tasks $nb --min-recovery 100 --min-agreement 100 --min-score 1
grep -q '^agreement: 100.0000% ' "$T/out" && grep -q '^recovery: 100.0000% ' "$T/out" && ok || bad "self agreement: $(tail -2 "$T/out")"
expect 0 "$QK" kld -q -m "$T/tb16.gguf" --base "$TM" --winogrande -f "$TWG" --winogrande-tasks $nwb --json --partial-out "$T/wpart.json"
cmp -s "$T/out" "$T/wpart.json" && ok || bad "--partial-out is not the --json report"
if command -v python3 >/dev/null; then
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); a=d["answers"]; dis=[x for x in a if x["pick"]!=x["base_pick"]]; assert d["agreement"]["same"]==int(sys.argv[2])-len(dis) and len(d["disagreements"])==len(dis) and "base_pick" in a[0]' "$T/out" $nwb && ok || bad "--base JSON: agreement and disagreements"
fi
# gates: exit 1 and one line naming the gate
expect 1 "$QK" kld -q -m "$TM" --hellaswag -f "$THS" --hellaswag-tasks 8 --min-score 99.5
grep -q '^qk-kld: --min-score 99.5 violated: score (%) = [0-9.]*$' "$T/err" && [ "$(wc -l <"$T/err")" = 1 ] && ok || bad "min-score message: $(cat "$T/err")"
expect 1 "$QK" kld -q -m "$T/tb16.gguf" --base "$TM" --hellaswag -f "$THS" --hellaswag-tasks 8 --min-agreement 100.5%
grep -q '^qk-kld: --min-agreement 100.5 violated: agreement (%) = ' "$T/err" && ok || bad "min-agreement message: $(cat "$T/err")"
expect 2 "$QK" kld -q -m "$TM" --hellaswag -f "$THS" --min-recovery 90
expect 2 "$QK" kld -q -m "$TM" -f "$THS" --min-score 50
expect 2 "$QK" kld -q -m "$TM" --hellaswag --winogrande -f "$THS"
expect 2 "$QK" kld -q -m "$TM" --hellaswag -f "$THS" -bf "$THS"
expect 2 "$QK" kld -q -m "$TM" --hellaswag -f "$THS" --kld-base goldens/kld/stories260K-f32-c256-4chunks.kld
# bad input: one line naming the file and the line or task
head -n 17 "$THS" >"$T/hs17.txt"
expect 2 "$QK" kld -q -m "$TM" --hellaswag -f "$T/hs17.txt"
grep -q "hs17.txt: line 17: the file ends inside task 2" "$T/err" && ok || bad "line count message: $(cat "$T/err")"
sed '8s/.*/7/' "$THS" >"$T/hs7.txt"
expect 2 "$QK" kld -q -m "$TM" --hellaswag -f "$T/hs7.txt"
grep -q "hs7.txt: line 8: gold label '7' of task 1 out of range (0..3)" "$T/err" && ok || bad "label message: $(cat "$T/err")"
sed '5s/,1$/,3/; 5s/,2$/,3/' "$TWG" >"$T/wg3.csv"
expect 2 "$QK" kld -q -m "$TM" --winogrande -f "$T/wg3.csv"
grep -q "wg3.csv: line 5: answer '3' out of range (1 or 2)" "$T/err" && ok || bad "answer message: $(cat "$T/err")"
head -c 30000 "$TMC" >"$T/mc-cut.bin"
expect 2 "$QK" kld -q -m "$TM" --multiple-choice -bf "$T/mc-cut.bin"
grep -q "mc-cut.bin: task [0-9]* at offset [0-9]*: truncated" "$T/err" && ok || bad "truncated mc message: $(cat "$T/err")"
expect 2 "$QK" kld -q -m "$TM" --hellaswag -f "$THS" -c 8
grep -q "hellaswag-stories.txt: line [0-9]*: the task needs [0-9]* tokens, more than the context of 32 (4 x -c 8)" "$T/err" && ok || bad "long task message: $(cat "$T/err")"
