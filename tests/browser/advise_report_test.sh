#!/usr/bin/env bash
# `denormd advise --report` in a real browser: the article's events replayed
# into the test PostgreSQL, the report written, and a screenshot of it taken
# by headless Chromium (Debian's; installed here when missing, as root). The
# check reads the screenshot's pixels (tests/browser/png_bars.py): the bars'
# colour must fill one horizontal band per section that has something to show
# (each field's two histograms side by side, each collection's one, each entity
# type's index rows one), as many as `advise --json` lists; and the same page
# with its bars unpainted must show none of that colour (so the check can fail).
#
# Usage: advise_report_test.sh REPO_DIR DENORMD_BINARY (ctest passes them);
# needs DENORMD_TEST_POSTGRES (scripts/test.sh exports it).
set -euo pipefail
REPO_DIR="$1"
DENORMD="$2"
: "${DENORMD_TEST_POSTGRES:?the test PostgreSQL (scripts/test.sh exports DENORMD_TEST_POSTGRES)}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
BAR_COLOUR=2f6db5  # .bar's fill in daemon/advise_report.cc

if ! command -v chromium >/dev/null 2>&1; then
  echo "installing Debian's chromium (once)" >&2
  # install-deps.sh: apt-get update first, sudo when not root, a clear error.
  DENORMD_APT_EXTRA=chromium bash "$REPO_DIR/scripts/install-deps.sh" >&2 ||
    fail "installing chromium (scripts/install-deps.sh with DENORMD_APT_EXTRA=chromium)"
  command -v chromium >/dev/null 2>&1 || fail "chromium is still not on PATH"
fi

schema=advise_browser
sed -e "s/^\(  schema: \).*/\1$schema/" "$REPO_DIR/tests/data/article/config.yaml" >"$WORK/config.yaml"
grep -q "schema: $schema" "$WORK/config.yaml" || fail "the article config has no store.schema line to rename"
export DENORMD_POSTGRES="$DENORMD_TEST_POSTGRES"
psql -X -q "$DENORMD_TEST_POSTGRES" -c "set client_min_messages = warning; drop schema if exists $schema cascade"
"$DENORMD" replay -q -c "$WORK/config.yaml" "$REPO_DIR/tests/data/article/events.jsonl" >/dev/null
"$DENORMD" advise -q -c "$WORK/config.yaml" --json --report "$WORK/advise.html" >"$WORK/advise.json"
[[ -s "$WORK/advise.html" ]] || fail "no report written"

# One band of bars per field, and per collection with documents.
expected=$(python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))
print(sum(1 for f in a["fields"] if f["members_per_document"]["keys"] or f["documents_per_member"]["keys"])
      + sum(1 for c in a["collections"] if c["bytes"]["keys"])
      + sum(1 for r in a["index_rows"] if r["rows_per_entity"]["keys"]))' "$WORK/advise.json")
(( expected >= 10 )) || fail "the article's report should have 10 or more sections with figures, has $expected"

shoot() {  # HTML PNG
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1100,9000 \
    --screenshot="$2" "file://$1" >"$WORK/chromium.log" 2>&1 || { cat "$WORK/chromium.log" >&2; fail "chromium"; }
  [[ -s "$2" ]] || { cat "$WORK/chromium.log" >&2; fail "chromium wrote no screenshot"; }
}
shoot "$WORK/advise.html" "$WORK/advise.png"
read -r pixels bands < <(python3 "$REPO_DIR/tests/browser/png_bars.py" "$WORK/advise.png" "$BAR_COLOUR")
echo "report: $pixels bar pixels in $bands bands; $expected sections with figures" >&2
(( pixels > 20 * expected * 40 )) || fail "the bars cover only $pixels pixels"
(( bands == expected )) || fail "bars in $bands bands of the screenshot, $expected sections with figures"

sed -e "s/\.bar{fill:#$BAR_COLOUR}/.bar{fill:none}/" "$WORK/advise.html" >"$WORK/bare.html"
cmp -s "$WORK/advise.html" "$WORK/bare.html" && fail "the report's .bar style was not found to unpaint"
shoot "$WORK/bare.html" "$WORK/bare.png"
read -r pixels bands < <(python3 "$REPO_DIR/tests/browser/png_bars.py" "$WORK/bare.png" "$BAR_COLOUR")
(( pixels == 0 )) || fail "the unpainted page still shows $pixels pixels of the bars' colour"
echo "ok" >&2
