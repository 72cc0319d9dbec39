#!/usr/bin/env bash
# End to end, in real processes: the seed CNN (models/mnist_cnn.dtf) compiled
# with fusion (dtfc's default: generated kernels) and with --fusion=off
# trains on Fashion-MNIST from the same seed; the two runs must log the same
# loss curve (the generated kernels give the op-by-op kernels' results bit
# for bit, so the curves are equal; the check allows float rounding, 1e-5
# relative, on the logged losses), and the fused plan must run its generated
# kernels, not fall back. The two checkpoints must be equal byte for byte,
# or within 1e-4 of the largest value (tests/e2e/ckpt_diff.py).
# With MODEL (default mnist_cnn) and STEPS (default 150), another model of
# models/: resnet's batch normalization runs reduced kernels (batch
# statistics, the gamma and beta gradients) in both directions.
# DTFC_FLAGS: more dtfc flags for the fused plan (--fuse-reductions=all).
# usage: fusion_loss_curve.sh BIN_DIR WORK_DIR [MODEL [STEPS [DTFC_FLAGS]]]
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
model=${3:-mnist_cnn}
steps=${4:-150}
flags=${5:-}
work=$work/$model
mkdir -p "$work"
sed -E -e "s/^( *)steps( *)= [0-9]+/\1steps\2= $steps\n\1seed = 3/" \
  -e "s/every = [0-9]+/every = $steps/" \
  "$root/models/$model.dtf" > "$work/cnn.dtf"
grep -Eq "^ *seed = 3" "$work/cnn.dtf" || { echo "e2e: could not set the seed" >&2; exit 1; }
# shellcheck disable=SC2086  # the flags are words
"$bin/dtfc" "$work/cnn.dtf" $flags -o "$work/fused.plan"
"$bin/dtfc" "$work/cnn.dtf" --fusion=off -o "$work/plain.plan"
# shellcheck disable=SC2086
"$bin/dtfc" "$work/cnn.dtf" $flags --emit=kernels | tee "$work/kernels.txt"
grep -q "^dtf_fused_0:" "$work/kernels.txt" || { echo "e2e: no fused kernels" >&2; exit 1; }
rm -rf "$work/fused.ckpt" "$work/plain.ckpt"
for p in fused plain; do
  "$bin/dtf-run" "$work/$p.plan" --log-every 10 --threads 2 --model-dir "$work/$p.ckpt" \
    > "$work/$p.log" 2>&1 || {
    echo "e2e: dtf-run $p failed:" >&2; tail -20 "$work/$p.log" >&2; exit 1; }
done
if grep -q "op by op" "$work/fused.log"; then
  echo "e2e: the fused plan fell back to the op-by-op kernels:" >&2
  grep "op by op" "$work/fused.log" >&2
  exit 1
fi
# DTF_GENERATED_KERNELS=off runs the same plan's regions op by op, and says so.
DTF_GENERATED_KERNELS=off "$bin/dtf-run" "$work/fused.plan" --steps 2 --log-every 1 \
  > "$work/off.log" 2>&1 || { tail -20 "$work/off.log" >&2; fail "DTF_GENERATED_KERNELS=off run failed"; }
grep -q "running the plan's [0-9]* fused regions op by op (DTF_GENERATED_KERNELS=off)" "$work/off.log" ||
  { cat "$work/off.log" >&2; fail "no note that the regions ran op by op"; }
# The strongest check: the trained variables, byte for byte, or else
# within float rounding (1e-4 of the largest value's magnitude).
a=$work/fused.ckpt/ckpt-$steps.data-0-of-1 b=$work/plain.ckpt/ckpt-$steps.data-0-of-1
if cmp -s "$a" "$b"; then
  echo "e2e: the checkpoints after $steps steps are identical, byte for byte"
else
  diff=$(python3 "$root/tests/e2e/ckpt_diff.py" "$a" "$b") || fail "the checkpoints hold different tensors: $diff"
  python3 -c "import sys; sys.exit(float(sys.argv[1]) > 1e-4)" "$(awk '{print $4}' <<<"$diff")" ||
    fail "the checkpoints after $steps steps differ beyond float rounding: $diff"
  echo "e2e: the checkpoints after $steps steps differ within float rounding: $diff"
fi
python3 - "$work/fused.log" "$work/plain.log" "$steps" <<'PY'
import re, sys
def curve(path):
    pts = {}
    for line in open(path):
        m = re.match(r"(step|eval)\s+(?:step\s+)?(\d+)\S*\s+loss\s+([-0-9.e+na]+)", line)
        if m:
            pts[(m.group(1), int(m.group(2)))] = float(m.group(3))
    return pts
fused, plain = curve(sys.argv[1]), curve(sys.argv[2])
steps = int(sys.argv[3])
if len(fused) < steps // 10 or fused.keys() != plain.keys():
    sys.exit(f"e2e: the logs have different points: {sorted(fused)} vs {sorted(plain)}")
worst = 0.0
for k in sorted(fused):
    a, b = fused[k], plain[k]
    rel = abs(a - b) / max(1e-12, abs(b))
    worst = max(worst, rel)
    print(f"{k[0]:5} {k[1]:4}  fused {a:.6f}  op-by-op {b:.6f}")
    if rel > 1e-5:
        sys.exit(f"e2e: at {k} the fused run's loss {a} differs from the op-by-op run's {b}")
first, last = fused[("step", 10)], fused[("step", steps)]
if not last < first:
    sys.exit(f"e2e: the loss did not fall ({first} -> {last})")
print(f"e2e: {len(fused)} points agree (largest relative difference {worst:.2g}); "
      f"loss {first:.4f} -> {last:.4f}")
PY
