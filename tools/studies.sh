#!/bin/sh
# tools/studies.sh BUILD - `make studies`: regenerate the tables of
# docs/studies.md (and their CSV/JSON in docs/studies/) with
# BUILD/tools/study-run on the bundled stories260K and the first 64 KiB of
# ../shared/models/text/tinystories-valid.txt (goldens/stories260K-eval/eval-64k.txt,
# the same bytes), -c 256.  Output bytes do not depend on STUDY_THREADS.
set -eu
B=${1:-build}
RUN="$B/tools/study-run"
THREADS=${STUDY_THREADS:-2}
MODEL=goldens/models/stories260K/stories260K-f32.gguf
TEXT=goldens/stories260K-eval/eval-64k.txt
OUT=docs/studies
DOC=docs/studies.md
mkdir -p "$OUT"

echo "studies: scorecard (stories260K, all formats x granularities)" >&2
"$RUN" error -m "$MODEL" -t "$THREADS" -o "$OUT/scorecard"
echo "studies: scorecard (synthetic outlier-channels 256x4096, element formats)" >&2
"$RUN" error --synthetic outlier-channels -t "$THREADS" \
    --formats int8,int4,fp8_e4m3,fp6_e2m3,fp4_e2m1 -o "$OUT/scorecard-outliers"
echo "studies: wire sweep (12 formats x 1, 2, 4 boundaries)" >&2
"$RUN" wire -m "$MODEL" -f "$TEXT" -c 256 -t "$THREADS" -o "$OUT/wire"
echo "studies: KV-cache sweep" >&2
"$RUN" kv -m "$MODEL" -f "$TEXT" -c 256 -t "$THREADS" -o "$OUT/kv"

# Splice each table between its <!-- NAME:begin --> and <!-- NAME:end --> markers.
tmp=$(mktemp "$DOC.XXXXXX")
trap 'rm -f "$tmp"' EXIT
awk -v dir="$OUT" '
    /^<!-- [a-z-]+:begin -->$/ {
        print; name = $2; sub(/:begin$/, "", name)
        while ((getline line < (dir "/" name ".md")) > 0) print line
        close(dir "/" name ".md"); skip = 1; next
    }
    /^<!-- [a-z-]+:end -->$/ { skip = 0 }
    !skip { print }
' "$DOC" > "$tmp"
mv "$tmp" "$DOC"
trap - EXIT
echo "studies: wrote $DOC and $OUT/" >&2
