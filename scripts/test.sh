#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds everything, then runs
# every unit and lit test through ctest, whose summary line closes the output.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTF_BUILD_DIR:-$root/build}

"$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure -j "$(nproc)"
