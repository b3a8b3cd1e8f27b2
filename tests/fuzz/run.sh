#!/bin/sh
# run.sh NAME SECONDS [libFuzzer options...]: run build-fuzz/NAME for SECONDS on the committed
# seeds (tests/fuzz/corpus/NAME less its fuzz_ prefix, never written to) plus a scratch corpus
# that grows between runs (build-fuzz/corpus/...), with tests/fuzz/NAME.dict when there is one.
# Crash inputs go to build-fuzz/artifacts/; the log, with -print_final_stats, to build-fuzz/NAME.log.
h=$1 t=$2
shift 2
c=${h#fuzz_}
mkdir -p "build-fuzz/corpus/$c" build-fuzz/artifacts
set -- -max_total_time="$t" -print_final_stats=1 -timeout=20 -rss_limit_mb=2048 \
    -artifact_prefix="build-fuzz/artifacts/$h-" "$@"
[ -f "tests/fuzz/$c.dict" ] && set -- -dict="tests/fuzz/$c.dict" "$@"
"build-fuzz/$h" "$@" "build-fuzz/corpus/$c" "tests/fuzz/corpus/$c" >"build-fuzz/$h.log" 2>&1
rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "build-fuzz/$h.log")
cov=$(grep -o 'cov: [0-9]*' "build-fuzz/$h.log" | tail -1)
if [ $rc = 0 ]; then
    echo "fuzz: $h ${t}s: $execs executions, $cov, no findings"
else
    grep -A30 -E '^==[0-9]+==ERROR|runtime error|ERROR: libFuzzer|bad refusal' "build-fuzz/$h.log" | head -40
    echo "fuzz: $h FAILED (exit $rc); input in build-fuzz/artifacts/, log build-fuzz/$h.log"
fi
exit $rc
