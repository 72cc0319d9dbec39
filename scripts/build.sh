#!/usr/bin/env bash
# Installs what is missing, then configures (once) and builds dtf with Ninja and
# ccache into build/ (or $DTF_BUILD_DIR). Extra arguments go to CMake's configure.
# DTF_BUILD_TARGETS (space-separated) builds only those targets and what they
# need; unset, everything (tests and the fuzz configuration included).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTF_BUILD_DIR:-$root/build}

"$root/scripts/setup.sh"

# ccache keeps its cache outside the repository.
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}

if [ ! -f "$build/build.ninja" ] || [ $# -gt 0 ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDTF_WERROR=ON "$@"
fi
targets=()
for t in ${DTF_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" "${targets[@]}"
