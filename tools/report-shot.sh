#!/bin/sh
# report-shot.sh - part of make crosscheck: open qk-report's HTML (make report-demo's) in headless
# Chromium, screenshot the page into docs/report-demo.png, screenshot each SVG plot on its own
# and check that every plot drew marks (tools/report_marks.py: coloured pixels in the plot area;
# axes, grid and text are grey).  Needs Debian's chromium (installed here when run as root).
set -eu
B=${1:-build}
R=$B/report-demo/report
[ -f "$R/report.html" ] || { echo "report-shot: no $R/report.html (make report-demo)" >&2; exit 2; }
CH=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CH" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
        CH=$(command -v chromium)
    else
        echo "report-shot: missing chromium; run: sudo apt-get install -y chromium" >&2; exit 2
    fi
fi
O=$B/report-shot
rm -rf "$O"; mkdir -p "$O"
shot() { # FILE OUT.png WIDTH HEIGHT
    "$CH" --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
        --window-size="$3,$4" --screenshot="$2" "file://$(realpath "$1")" >/dev/null 2>&1
}
shot "$R/report.html" docs/report-demo.png 1400 2300
for p in kld_bpw ppl_bpw kld_pct; do
    h=$(sed -n 's/^<svg [^>]* height="\([0-9]*\)".*/\1/p' "$R/$p.svg" | head -1)
    shot "$R/$p.svg" "$O/$p.png" 720 "$h"
done
python3 tools/report_marks.py "$O/kld_bpw.png" "$O/ppl_bpw.png" "$O/kld_pct.png"
echo "report-shot: docs/report-demo.png; every plot drew marks"
