#!/usr/bin/env bash
# End to end, in real processes: dtfc compiles the MLP of models/mlp.dtf, dtf-run
# trains it for a few hundred steps on Fashion-MNIST, and the run must show the
# loss falling and a test accuracy well above chance (0.1).
# usage: train_mlp.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
mkdir -p "$work"
# Fewer steps and a closer eval than the model file's, for CI.
sed -e 's/steps = 10000/steps = 300/' -e 's/every = 2000/every = 300/' \
  "$root/models/mlp.dtf" > "$work/mlp.dtf"
"$bin/dtfc" "$work/mlp.dtf" -o "$work/mlp.plan"
"$bin/dtf-run" "$work/mlp.plan" --log-every 50 > "$work/train.log" 2>&1 || {
  echo "e2e: dtf-run failed:" >&2; tail -20 "$work/train.log" >&2; exit 1; }
cat "$work/train.log"
python3 "$root/tests/e2e/check_training.py" "$work/train.log" 300 0.7
