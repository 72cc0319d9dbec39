#!/usr/bin/env bash
# The main job: installs what is missing, builds dtf, compiles the classic
# distributed-MNIST CNN (models/mnist_cnn.dtf) and trains it on Fashion-MNIST on
# this machine (dtf-run's embedded default). Extra arguments go to dtf-run,
# e.g. --steps 500 for a short run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTF_BUILD_DIR:-$root/build}

# Only what the main job runs: dtfc and dtf-run (not the tests or the fuzz
# configuration, which ./scripts/test.sh builds).
DTF_BUILD_TARGETS="dtfc dtf-run" "$root/scripts/build.sh"
mkdir -p "$build/runs"
"$build/bin/dtfc" "$root/models/mnist_cnn.dtf" -o "$build/runs/mnist_cnn.plan"
echo "dtfc: wrote $build/runs/mnist_cnn.plan"
exec "$build/bin/dtf-run" "$build/runs/mnist_cnn.plan" "$@"
