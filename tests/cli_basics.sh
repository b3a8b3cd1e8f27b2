# The basics (sourced by tests/cli.sh: uses its expect/ok/bad helpers): qk-quant raw encode and
# decode byte-exact through the binary, bad input, links, and a man page for every option.
G=goldens/ggml
# --- qk-quant raw encode/decode: byte-exact for every type with an encoder
for q in $G/*.plain.q $G/*.imatrix.q; do
    f=${q##*/}; ty=${f%%.*}; mode=${f#*.}; mode=${mode%%.q}
    "$QK" quant --list-types --json | grep -q "\"name\": \"$ty\"" || continue
    enc=$("$QK" quant --list-types | awk -v t="$ty" '$1==t && /encode/ {print "y"}')
    [ "$enc" = y ] || continue
    im=""; [ "$mode" = imatrix ] && im="--imatrix $G/imatrix.f32"
    if "$QK" quant --raw-encode "$ty" --shape 8x4096 $im -t 2 $G/input.f32 "$T/o.bin" 2>"$T/err" && cmp -s "$T/o.bin" "$q"; then ok; else bad "raw-encode $ty $mode"; fi
    if "$QK" quant --raw-decode "$ty" --shape 8x4096 "$q" "$T/o.f32" && cmp -s "$T/o.f32" "$G/$ty.$mode.deq.f32"; then ok; else bad "raw-decode $ty $mode"; fi
done

# --- qk-quant bad input: exit 2, one line, no output left behind
expect 2 "$QK" quant --raw-encode nosuchtype --shape 8x4096 $G/input.f32 "$T/x"
expect 2 "$QK" quant --raw-encode q4_0 --shape 8x4095 $G/input.f32 "$T/x"
expect 2 "$QK" quant --raw-encode q4_0 --shape 7x4096 $G/input.f32 "$T/x"
expect 2 "$QK" quant --raw-encode q4_0 --shape 8xabc $G/input.f32 "$T/x"
expect 2 "$QK" quant --raw-decode q4_0 --shape 8x4096 $G/input.f32 "$T/x"
expect 2 "$QK" quant --raw-encode iq2_xxs --shape 8x4096 $G/input.f32 "$T/x"
expect 2 "$QK" quant --raw-encode q4_0 --shape 8x4096 --imatrix $G/input.f32 $G/input.f32 "$T/x"
expect 2 "$QK" quant --raw-encode q4_0 --shape 8x4096 $G/input.f32
expect 2 "$QK" quant --bogus-option
expect 3 "$QK" quant --raw-encode q4_0 --shape 8x4096 "$T/missing.f32" "$T/x"
if ls "$T" | grep -q '^x'; then bad "partial output left behind"; ls "$T"; else ok; fi
cp $G/input.f32 "$T/in.f32"
expect 2 "$QK" quant --raw-encode f16 --shape 8x4096 "$T/in.f32" "$T/in.f32"
if cmp -s "$T/in.f32" $G/input.f32; then ok; else bad "input overwritten"; fi
expect 2 "$QK" nosuchcommand
expect 0 "$QK" --help
expect 0 "$QK" quant --help
expect 0 "$QK" quant --list-types
if "$QK" quant --list-types --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert len(d["types"]) > 40' 2>/dev/null; then ok
elif ! command -v python3 >/dev/null; then ok; else bad "--list-types --json is not valid JSON"; fi

# --- links behave like the subcommand
ln -sf "$(cd "$(dirname "$QK")" && pwd)/qk" "$T/qk-quant"
expect 0 "$T/qk-quant" --list-types

# --- every command has a man page naming each option its --help lists
for c in $("$QK" --help | awk '/^commands:/ {f = 1; next} f && NF == 0 {f = 0} f {print $1}'); do
    m=man/qk-$c.1
    if [ ! -f "$m" ]; then bad "no man page for $c"; continue; fi
    sed 's/\\-/-/g; s/\\f[BIRP]//g' "$m" >"$T/man.txt"
    for o in $("$QK" "$c" --help | grep -oE -- '--[a-zA-Z][-a-zA-Z0-9]*' | sort -u); do
        grep -q -- "$o" "$T/man.txt" && ok || bad "man/qk-$c.1 does not document $o"
    done
done
