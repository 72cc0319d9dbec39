#!/usr/bin/env bash
# Runs the editor-support tests (TextMate grammar scopes, the .vsix package, the Vim
# files) in a Python virtual environment kept in the build folder.
# usage: tests/editor/run.sh BUILD_DIR
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
mkdir -p "$1"
build=$(cd "$1" && pwd)
venv=$build/editor-venv

# shellcheck source=tests/support/venv.sh
source "$here/../support/venv.sh"
ensure_venv "$venv" "$here/requirements.txt" "editor tests"

# The TextMate engine and pytest write caches in the working directory: not the source tree.
work=$build/editor-tests
mkdir -p "$work"
cd "$work"
export DTF_SOURCE_DIR=$root PYTHONDONTWRITEBYTECODE=1
exec "$venv/bin/python" -m pytest -p no:cacheprovider -q -rs "$here"
