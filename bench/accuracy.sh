#!/usr/bin/env bash
# Trains the seed CNN (models/mnist_cnn.dtf: Adam, batch 50, 5000 steps) on
# Fashion-MNIST with the seed's learning rate (1e-4) and with 1e-3, and prints
# each run's final line. Results and the reference figures are in
# results/accuracy.md. About 5 minutes per run on 2 cores.
#   usage: bench/accuracy.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for lr in 1e-4 1e-3; do
  sed "s/adam(learning_rate = 1e-4)/adam(learning_rate = $lr)/" \
    "$root/models/mnist_cnn.dtf" > "$work/cnn_$lr.dtf"
  "$build/bin/dtfc" "$work/cnn_$lr.dtf" -o "$work/cnn_$lr.plan"
  echo "== Adam $lr"
  "$build/bin/dtf-run" "$work/cnn_$lr.plan" --log-every 1000 | grep -E "^(eval|final)"
done
