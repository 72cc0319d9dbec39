#!/usr/bin/env bash
# End to end in float64: dtfc compiles tests/e2e/logistic_regression_f64.dtf
# (every value f64), and dtf-run trains it on Fashion-MNIST for 50 steps: the
# plan must hold f64 values, the loss must fall and the test accuracy end well
# above chance. The checkpoint it leaves must hold the variables as f64, and a
# second run must restore it. Then one ps and two workers train it in-graph on
# 127.0.0.1, so the f64 variables and gradients cross the wire.
# usage: train_f64.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
rm -rf "$work" && mkdir -p "$work"
model="$root/tests/e2e/logistic_regression_f64.dtf"
"$bin/dtfc" "$model" -o "$work/f64.plan"
"$bin/dtfc" "$model" --emit=plan-text > "$work/f64.plan.txt"
grep -q 'dtype: F64' "$work/f64.plan.txt" || fail "the plan has no F64 value"
! grep -q 'dtype: F32' "$work/f64.plan.txt" || fail "the f64 model's plan has f32 values: $(grep -m3 -B3 'dtype: F32' "$work/f64.plan.txt")"

# Training on this machine, with checkpoints.
"$bin/dtf-run" "$work/f64.plan" --log-every 10 --threads 2 --model-dir "$work/model" \
  > "$work/train.log" 2>&1 || { tail -20 "$work/train.log" >&2; fail "dtf-run failed"; }
cat "$work/train.log"
python3 "$root/tests/e2e/check_training.py" "$work/train.log" 50 0.5 f64
# The checkpoint's index names the variables with their dtype (docs/checkpoint-format.md).
index="$work/model/ckpt-50.index"
[ -f "$index" ] || fail "no ckpt-50.index (have: $(ls "$work/model"))"
grep -aq '^tensor W f64 \[784,10\]' "$index" || fail "ckpt-50 does not hold W as f64[784,10]: $(grep -a '^tensor' "$index")"
grep -aq '^tensor b f64 \[10\]' "$index" || fail "ckpt-50 does not hold b as f64[10]"
"$bin/dtf-run" "$work/f64.plan" --steps 60 --log-every 10 --threads 2 --model-dir "$work/model" \
  > "$work/restored.log" 2>&1 || { tail -20 "$work/restored.log" >&2; fail "the restored run failed"; }
grep -qx "restored checkpoint ckpt-50 from $work/model; continuing at step 50" "$work/restored.log" ||
  fail "the second run did not restore ckpt-50: $(head -5 "$work/restored.log")"
grep -q '^final: steps=60 ' "$work/restored.log" || fail "the restored run did not reach step 60"

# One ps, two in-graph towers: f64 tensors on the wire and f64 tower sums.
cluster_json "$work/cluster.json" 1 2
timeout 300 "$bin/dtf-run" "$work/f64.plan" --cluster "$work/cluster.json" --log-every 10 \
  --model-dir "$work/cluster-model" > "$work/cluster.log" 2>&1 ||
  { tail -30 "$work/cluster.log" >&2; fail "the cluster run failed"; }
cat "$work/cluster.log"
python3 - "$work/cluster.log" <<'PY'
import re, sys
log = open(sys.argv[1]).read().splitlines()
chief = [l.split("|", 1)[1].strip() for l in log if l.startswith("worker.0")]
losses = [float(m.group(1)) for l in chief if l.startswith("step ")
          for m in [re.search(r"loss ([0-9.eE+-]+)", l)] if m]
final = [l for l in chief if l.startswith("final:")]
bad = []
if len(losses) < 2 or not losses[-1] < 0.8 * losses[0]:
    bad.append("the chief's loss did not fall by 20%%: %s" % losses)
if not final:
    bad.append("the chief printed no final: line")
else:
    fields = dict(kv.split("=", 1) for kv in final[-1][len("final:"):].split())
    if not float(fields.get("accuracy", "nan")) > 0.5:
        bad.append("test accuracy %s: want > 0.5" % fields.get("accuracy"))
for b in bad:
    print("e2e: FAIL: cluster: " + b)
print("e2e: cluster f64 loss %s -> %s" % (losses[0] if losses else "?", losses[-1] if losses else "?"))
sys.exit(1 if bad else 0)
PY
echo "e2e: f64 training, checkpoint restore and cluster run passed"
