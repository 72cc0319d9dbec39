#!/usr/bin/env bash
# End to end: models/lstm.dtf compiled with its lstm as one library op
# (dtfc's default: dtf.lstm_train and dtf.lstm_grad on oneDNN's LSTM
# primitive) and unrolled (dtfc --recurrent=unrolled: one step's ops per
# time step) trains from the same seed with the same loss curve: both
# compute the same function, so the logged losses agree to 1e-3 (relative)
# up to step 80 (equal to the 4 logged decimals here) and to 1% to step
# 100, where float rounding has begun to grow through Adam (the library
# sums the gates' products in another order; 0.6% at step 120 and 2% at
# step 130 here, so later steps are not compared). The plans
# hold what they say: the library plan its three LSTM ops and no sigmoid,
# the unrolled plan no LSTM op. Then the library plan's checkpoint restores,
# trains on and evaluates (dtf.lstm, the inference primitive) above 0.5.
# usage: lstm_library.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
rm -rf "$work" && mkdir -p "$work"
steps=100
sed -E -e "s/^( *)steps( *)= [0-9]+/\1steps\2= $steps\n\1seed = 3/" \
  -e "s/every = [0-9]+/every = $steps/" "$root/models/lstm.dtf" > "$work/lstm.dtf"
grep -Eq "^ *seed = 3" "$work/lstm.dtf" || fail "could not set the seed"
"$bin/dtfc" "$work/lstm.dtf" -o "$work/library.plan"
"$bin/dtfc" "$work/lstm.dtf" --recurrent=unrolled -o "$work/unrolled.plan"
"$bin/dtfc" "$work/lstm.dtf" --emit=plan-text > "$work/library.txt"
"$bin/dtfc" "$work/lstm.dtf" --recurrent=unrolled --emit=plan-text > "$work/unrolled.txt"
for op in dtf.lstm_train dtf.lstm_grad dtf.lstm; do
  grep -q "$op\b" "$work/library.txt" || fail "the library plan has no $op"
done
grep -q "dtf.sigmoid\b" "$work/library.txt" && fail "the library plan still has the unrolled cell's sigmoids"
grep -q "dtf.lstm" "$work/unrolled.txt" && fail "the unrolled plan has an LSTM op"
for p in library unrolled; do
  "$bin/dtf-run" "$work/$p.plan" --log-every 10 --threads 2 --model-dir "$work/$p.ckpt" \
    > "$work/$p.log" 2>&1 || { tail -20 "$work/$p.log" >&2; fail "dtf-run of the $p plan failed"; }
done
python3 - "$work/library.log" "$work/unrolled.log" "$steps" <<'PY'
import re, sys
def curve(path):
    pts = {}
    for line in open(path):
        m = re.match(r"step\s+(\d+)\S*\s+loss\s+([-0-9.e+na]+)", line)
        if m:
            pts[int(m.group(1))] = float(m.group(2))
    return pts
lib, unr = curve(sys.argv[1]), curve(sys.argv[2])
steps = int(sys.argv[3])
if len(lib) < steps // 10 or lib.keys() != unr.keys():
    sys.exit(f"e2e: the logs have different points: {sorted(lib)} vs {sorted(unr)}")
for k in sorted(lib):
    a, b = lib[k], unr[k]
    rel = abs(a - b) / max(1e-12, abs(b))
    tol = 1e-3 if k <= 80 else 1e-2
    print(f"step {k:4}  library {a:.6f}  unrolled {b:.6f}  relative difference {rel:.2g}")
    if rel > tol:
        sys.exit(f"e2e: at step {k} the library LSTM's loss {a} differs from the unrolled one's {b} by more than {tol}")
if not lib[steps] < lib[10] - 1.0:
    sys.exit(f"e2e: the library LSTM did not learn ({lib[10]} -> {lib[steps]})")
print(f"e2e: {len(lib)} points agree; loss {lib[10]:.4f} -> {lib[steps]:.4f}")
PY
# The checkpoint restores into the same plan, and evaluation runs dtf.lstm
# (the inference primitive).
"$bin/dtf-run" "$work/library.plan" --steps $((steps + 20)) --log-every 10 --threads 2 \
  --model-dir "$work/library.ckpt" > "$work/restored.log" 2>&1 ||
  { tail -20 "$work/restored.log" >&2; fail "the restored run failed"; }
grep -q "restored checkpoint ckpt-$steps" "$work/restored.log" || fail "ckpt-$steps was not restored: $(head -3 "$work/restored.log")"
grep -Eq "^eval .*accuracy 0\.[5-9]" "$work/restored.log" ||
  fail "the restored run's evaluation is not above 0.5: $(grep '^eval' "$work/restored.log")"
echo "e2e: LSTM library op matches the unrolled cell"
