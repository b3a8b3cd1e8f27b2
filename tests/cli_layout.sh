# The layout rule (README "Layout"), sourced by tests/cli.sh: uses its ok/bad helpers.
#
# Floors, top to bottom: cmd -> lib/{eval,quant,study,bench,report,convert} -> lib/engine -> formats
# -> kernels -> lib/core.  A file includes only its own folder and the floors below it; the
# task folders of lib/ do not include each other.  cmd/ holds no format or kernel logic: it
# includes no kernel or format internals and has no SIMD code.  No source file is over 900
# lines unless it is a data table.

# layout_allowed DIR: the include folders a file in DIR may name (space separated prefixes).
layout_allowed() {
    low="lib/engine/ formats/ kernels/ lib/core/"
    case $1 in
    lib/core*) echo "lib/core/" ;;
    kernels*) echo "kernels/ lib/core/" ;;
    formats*) echo "formats/ kernels/ lib/core/" ;;
    lib/engine*) echo "$low" ;;
    lib/eval* | lib/quant* | lib/study* | lib/bench* | lib/report* | lib/convert*) echo "$1/ $low" ;;
    cmd*) echo "cmd/ lib/ formats/ kernels/" ;;
    *) echo "" ;;
    esac
}

# layout_violations ROOT: one line per include that breaks the rule, for the C files below ROOT.
layout_violations() (
    cd "$1" || exit 1
    find cmd lib formats kernels -name '*.[ch]' 2>/dev/null | sort | while read -r f; do
        d=${f%/*}
        allowed=$(layout_allowed "$d")
        [ -n "$allowed" ] || { echo "$f: not in a known folder"; continue; }
        grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | while IFS= read -r line; do
            inc=${line#*\"}; inc=${inc%%\"*}
            case $inc in */*) ;; *) echo "$f:${line%%:*}: \"$inc\" is not written with its folder"; continue ;; esac
            hit=
            for a in $allowed; do case $inc in "$a"*) hit=1 ;; esac; done
            [ -n "$hit" ] || echo "$f:${line%%:*}: includes \"$inc\" (allowed: $allowed)"
            case $f:$inc in
            cmd/*:kernels/x86/* | cmd/*:*_impl.h | cmd/*:kernels/quant_common.h | cmd/*:kernels/*_grids.h)
                echo "$f:${line%%:*}: includes kernel or format internals \"$inc\"" ;;
            esac
        done
        case $f in cmd/*)
            grep -n 'immintrin\|_mm[0-9]*_' "$f" | sed "s|^|$f:|; s|\$| (SIMD code in cmd/)|" ;;
        esac
    done
)

layout_out=$(layout_violations .)
if [ -z "$layout_out" ]; then ok; else bad "layout rule broken:"; echo "$layout_out" | sed 's/^/  /'; fi

# The check catches what it is meant to: a copy of a few files with forbidden includes added.
LAY=$T/layout
mkdir -p "$LAY/kernels" "$LAY/formats" "$LAY/lib/core" "$LAY/lib/engine" "$LAY/lib/eval" "$LAY/lib/quant" "$LAY/lib/convert" "$LAY/cmd"
printf '#include "kernels/types.h"\n#include "lib/core/err.h"\n' >"$LAY/kernels/ok.c"
printf '#include "lib/engine/model.h"\n' >"$LAY/kernels/up.c"
printf '#include "lib/core/err.h"\n#include "kernels/types.h"\n#include "formats/gguf.h"\n' >"$LAY/formats/ok.c"
printf '#include "lib/eval/ppl.h"\n' >"$LAY/formats/up.c"
printf '#include "kernels/cpu.h"\n' >"$LAY/lib/core/up.c"
printf '#include "lib/eval/ppl.h"\n' >"$LAY/lib/engine/up.c"
printf '#include "lib/quant/imatrix.h"\n' >"$LAY/lib/eval/side.c"
printf '#include "cmd/commands.h"\n' >"$LAY/lib/quant/cmd.c"
printf '#include "lib/quant/imatrix.h"\n' >"$LAY/lib/convert/side.c"
printf '#include "kernels/x86/x86.h"\n' >"$LAY/cmd/internals.c"
printf '#include "err.h"\n' >"$LAY/lib/core/bare.c"
layout_out=$(layout_violations "$LAY")
for f in kernels/up.c formats/up.c lib/core/up.c lib/engine/up.c lib/eval/side.c lib/quant/cmd.c lib/convert/side.c \
         cmd/internals.c lib/core/bare.c; do
    echo "$layout_out" | grep -q "^$f:" && ok || bad "layout check misses the forbidden include in $f"
done
echo "$layout_out" | grep -q "ok\.c" && bad "layout check flags an allowed include: $layout_out" || ok

# Each folder of lib/ says what it holds and what it may include.
for d in lib/*/; do [ -f "$d/README.md" ] && ok || bad "$d has no README.md"; done

# Files small enough to read in one sitting: at most 900 lines, data tables excepted.
for f in $(find cmd lib formats kernels -name '*.[ch]' | sort); do
    case $f in lib/core/unicode_data.c | lib/core/unicode_nfd.c | kernels/*_grids.c) continue ;; esac
    n=$(wc -l <"$f")
    [ "$n" -le 900 ] && ok || bad "$f has $n lines (over 900: split it by concern)"
done
