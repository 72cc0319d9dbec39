#!/usr/bin/env bash
# End to end, in real processes: dtfc compiles the MLP of models/mlp.dtf, dtf-run
# trains it for a few hundred steps on Fashion-MNIST, and the run must show the
# loss falling and a test accuracy well above chance (0.1).
# usage: train_mlp.sh BIN_DIR WORK_DIR
set -euo pipefail
bin=$1 work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
  echo "e2e: Fashion-MNIST is not installed at $data (scripts/setup.sh installs dataset-fashion-mnist)" >&2
  exit 1
fi
mkdir -p "$work"
# Fewer steps and a closer eval than the model file's, for CI.
sed -e 's/steps = 10000/steps = 300/' -e 's/every = 2000/every = 300/' \
  "$root/models/mlp.dtf" > "$work/mlp.dtf"
"$bin/dtfc" "$work/mlp.dtf" -o "$work/mlp.plan"
"$bin/dtf-run" "$work/mlp.plan" --log-every 50 > "$work/train.log" 2>&1 || {
  echo "e2e: dtf-run failed:" >&2; tail -20 "$work/train.log" >&2; exit 1; }
cat "$work/train.log"
python3 - "$work/train.log" <<'PY'
import re, sys
log = open(sys.argv[1]).read().splitlines()
losses = [float(m.group(1)) for line in log if line.startswith("step ")
          for m in [re.search(r"loss ([0-9.eE+-]+)", line)] if m]
final = [l for l in log if l.startswith("final:")]
failures = []
if len(losses) < 2:
    failures.append("fewer than two progress lines with a loss")
elif not losses[-1] < 0.8 * losses[0]:
    failures.append("the loss did not fall by 20%%: %s" % losses)
if not final:
    failures.append("no final: line")
else:
    fields = dict(kv.split("=", 1) for kv in final[-1][len("final:"):].split())
    acc = float(fields.get("accuracy", "nan"))
    if not acc > 0.7:
        failures.append("test accuracy %s is not well above chance (0.1): want > 0.7" % acc)
    if int(fields.get("steps", 0)) != 300:
        failures.append("ran %s steps, not 300" % fields.get("steps"))
for f in failures:
    print("e2e: FAIL: " + f)
print("e2e: loss %s -> %s; %s" % (losses[0] if losses else "?", losses[-1] if losses else "?",
                                  final[-1] if final else "no final line"))
sys.exit(1 if failures else 0)
PY
