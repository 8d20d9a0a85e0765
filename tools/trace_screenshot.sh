#!/usr/bin/env bash
# Renders a Cohort trace file (cohortctl trace) to a PNG with headless
# Chromium, through tools/trace_view.html.
#
#   tools/trace_screenshot.sh TRACE.json OUT.png [WIDTHxHEIGHT]
#
# Needs chromium (apt-get install chromium). Exit 2 on bad usage, 1 when
# the screenshot could not be made.
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
  echo "usage: $0 TRACE.json OUT.png [WIDTHxHEIGHT]" >&2
  exit 2
fi
trace=$1
out=$2
size=${3:-1600x900}
[[ -r $trace ]] || { echo "$0: cannot read $trace" >&2; exit 2; }
browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $browser ]]; then
  echo "$0: chromium is not installed (apt-get install chromium)" >&2
  exit 1
fi

page_dir=$(mktemp -d "${TMPDIR:-/tmp}/cohort-trace-view.XXXXXX")
trap 'rm -rf "$page_dir"' EXIT
viewer="$(dirname "$0")/trace_view.html"
# The trace goes in before the viewer's script, which renders it on load.
{
  printf '<script>window.COHORT_TRACE = '
  cat "$trace"
  printf ';</script>\n'
  cat "$viewer"
} >"$page_dir/view.html"

out_dir=$(dirname "$out")
[[ -d $out_dir ]] || { echo "$0: no directory $out_dir for $out" >&2; exit 2; }
out_abs=$(cd "$out_dir" && pwd)/$(basename "$out")
# A file left by an earlier run must not pass for this one's screenshot.
rm -f "$out_abs"
# --no-sandbox: run as root in a container; the page is our own file. The
# file written, not chromium's exit code, is the verdict.
timeout 120 "$browser" --headless --no-sandbox --disable-gpu \
  --hide-scrollbars --window-size="${size/x/,}" \
  --screenshot="$out_abs" "file://$page_dir/view.html" \
  >"$page_dir/chromium.log" 2>&1 || true
if [[ ! -s $out_abs ]]; then
  echo "$0: chromium made no screenshot; its output:" >&2
  tail -5 "$page_dir/chromium.log" >&2
  exit 1
fi
echo "wrote $out_abs"
