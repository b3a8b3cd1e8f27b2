#!/bin/sh
# Command-line behaviour: exit codes, one-line errors, no partial output,
# byte-exact raw encoding through the binary.  Run by `make test`.
# Prints "N passed, N failed" and exits non-zero on any failure.
#
# The checks are sections, tests/cli_*.sh, sourced with the helpers below.  QK_CLI_JOBS lanes
# (default 2) share them: copies of this script, each sourcing the next section no other lane
# has claimed (a claim is a mkdir, which only one lane can win), so the commands, most of them
# single-threaded, keep two cores busy.  A section must not depend on another's variables or
# files (each lane has its own $T); QK_CLI_JOBS=1 runs them all in order in one shell.
QK=${QK_BIN:-build/qk}
if [ -z "$QK_CLI_CLAIMS" ]; then
    C=$(mktemp -d)
    trap 'rm -rf "$C"' EXIT
    lanes=${QK_CLI_JOBS:-2} i=0
    while [ "$i" -lt "$lanes" ]; do
        QK_CLI_CLAIMS=$C QK_CLI_LANE=$i sh "$0" &
        i=$((i + 1))
    done
    wait
    i=0 pass=0 fail=0
    while [ "$i" -lt "$lanes" ]; do
        if [ -f "$C/count.$i" ]; then
            read -r p f <"$C/count.$i"
            pass=$((pass + p)) fail=$((fail + f))
        else
            fail=$((fail + 1)); echo "FAIL: cli lane $i ended before its count"
        fi
        i=$((i + 1))
    done
    echo "cli: $pass passed, $fail failed"
    [ "$fail" = 0 ]
    exit
fi

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# expect CODE CMD...: run, compare exit code, stderr must be one line when CODE is 2
expect() {
    want=$1; shift
    "$@" >"$T/out" 2>"$T/err"
    got=$?
    if [ "$got" != "$want" ]; then bad "exit $got (want $want): $*"; sed 's/^/  /' "$T/err"; return; fi
    if [ "$want" = 2 ] && [ "$(wc -l <"$T/err")" != 1 ]; then bad "stderr not one line: $*"; cat "$T/err"; return; fi
    ok
}

for cli_sec in tests/cli_*.sh; do
    mkdir "$QK_CLI_CLAIMS/${cli_sec##*/}" 2>/dev/null || continue
    [ -n "$QK_CLI_TIMES" ] && cli_t0=$(date +%s)
    . "./$cli_sec"
    [ -n "$QK_CLI_TIMES" ] && echo "cli: $cli_sec $(($(date +%s) - cli_t0)) s (lane $QK_CLI_LANE)"
done
echo "$pass $fail" >"$QK_CLI_CLAIMS/count.$QK_CLI_LANE"
