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

# (Re)create the venv when it is missing or requirements.txt changed since.
if ! cmp -s "$here/requirements.txt" "$venv/requirements.txt" 2>/dev/null; then
  echo "editor tests: installing $(grep -v '^#' "$here/requirements.txt" | xargs) into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  if ! "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"; then
    echo "editor tests: error: could not install the Python packages from PyPI" >&2
    rm -rf "$venv"
    exit 1
  fi
  cp "$here/requirements.txt" "$venv/requirements.txt"
fi

# The TextMate engine and pytest write caches in the working directory: not the source tree.
work=$build/editor-tests
mkdir -p "$work"
cd "$work"
export DTF_SOURCE_DIR=$root PYTHONDONTWRITEBYTECODE=1
exec "$venv/bin/python" -m pytest -p no:cacheprovider -q -rs "$here"
