# shellcheck shell=bash
# Sourced by the tests that run Python packages from PyPI (tests/editor,
# tests/summaries, tests/interop): ensure_venv VENV REQUIREMENTS LABEL
# (re)creates the virtualenv VENV when it is missing or REQUIREMENTS changed
# since, one test at a time (ctest -j may start two that share it); LABEL
# begins its messages. Exits 1, naming what failed, when pip cannot install.
ensure_venv() {
  local venv=$1 requirements=$2 label=$3 lock
  mkdir -p "$(dirname "$venv")"
  exec {lock}> "$venv.lock"
  flock "$lock"
  if ! cmp -s "$requirements" "$venv/requirements.txt" 2>/dev/null; then
    echo "$label: installing $(grep -v '^#' "$requirements" | xargs) into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    if ! "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"; then
      echo "$label: error: could not install the Python packages from PyPI into $venv" >&2
      rm -rf "$venv"
      exit 1
    fi
    cp "$requirements" "$venv/requirements.txt"
  fi
  flock -u "$lock"
  exec {lock}>&-
}
