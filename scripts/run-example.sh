#!/usr/bin/env bash
# The main job: installs what is missing, builds dtf, then compiles and trains the
# example model with the embedded default. Until the front end and the runtime
# exist, it shows the tools' versions.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTF_BUILD_DIR:-$root/build}

"$root/scripts/build.sh"
"$build/bin/dtfc" --version
"$build/bin/dtf-run" --version
