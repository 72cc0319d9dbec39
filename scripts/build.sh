#!/usr/bin/env bash
# Installs what is missing, then configures (once) and builds dtf with Ninja and
# ccache into build/ (or $DTF_BUILD_DIR). Extra arguments go to CMake's configure.
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
cmake --build "$build"
