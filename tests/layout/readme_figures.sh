#!/usr/bin/env bash
# ctest docs.readme_figures: README's "Measured here" block is exactly what
# bench/readme_figures.py writes from bench/results/ (no figure edited by
# hand), and the check does fail on a README whose figure was changed.
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
gen=$root/bench/readme_figures.py
if ! grep -q '^<!-- figures:' "$root/README.md"; then
  echo "SKIPPED: README has no generated block of figures yet: bench/readme.sh's first full run on an idle machine writes it (it replaces the hand-written 'Measured here' paragraph); until then each of its figures is from the results file it names" >&2
  exit 77
fi
python3 "$gen" --check --readme "$root/README.md"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A copy with the block's first figure bumped by one must be refused.
python3 - "$root/README.md" "$tmp/README.md" <<'PY'
import re, sys
body = open(sys.argv[1]).read()
start = body.index("<!-- figures:")
m = re.compile(r"\d").search(body, body.index("**One process:**", start))
d = str((int(m.group()) + 1) % 10)
open(sys.argv[2], "w").write(body[:m.start()] + d + body[m.end():])
PY
if python3 "$gen" --check --readme "$tmp/README.md" > "$tmp/out" 2>&1; then
  echo "FAIL: --check accepted a README whose figure was edited" >&2
  exit 1
fi
grep -q "not those of bench/results/" "$tmp/out" || { cat "$tmp/out"; echo "FAIL: no message" >&2; exit 1; }
echo "PASS: README's figures are bench/results/'s, and an edited one is refused"
