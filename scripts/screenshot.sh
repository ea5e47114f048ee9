#!/usr/bin/env bash
# Screenshot of a run's report.html with headless Chromium (used for docs/img/report.png).
#   scripts/screenshot.sh RUN_DIR [OUT.png] [WIDTHxHEIGHT]
set -euo pipefail
run_dir=${1:?usage: scripts/screenshot.sh RUN_DIR [OUT.png] [WIDTHxHEIGHT]}
out=${2:-docs/img/report.png}
size=${3:-1280x2000}
[ -f "$run_dir/report.html" ] || { echo "screenshot.sh: no report.html in $run_dir; run: python3 -m analyze report $run_dir" >&2; exit 1; }
command -v chromium >/dev/null 2>&1 || { echo "screenshot.sh: chromium missing; run: bash scripts/install-deps.sh" >&2; exit 1; }
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
mkdir -p "$(dirname "$out")"
chromium --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
	--disable-sync --no-first-run --user-data-dir="$profile" --screenshot="$(realpath -m "$out")" \
	--window-size="${size/x/,}" "file://$(realpath "$run_dir")/report.html" >/dev/null 2>&1
[ -s "$out" ] || { echo "screenshot.sh: chromium wrote no $out" >&2; exit 1; }
echo "screenshot.sh: wrote $out"
