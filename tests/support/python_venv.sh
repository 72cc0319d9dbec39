# shellcheck shell=bash
# Sourced by the tests that run Python packages from PyPI (tests/editor,
# tests/summaries, tests/deploy, tests/interop, the Kubeflow e2e test):
#   python_venv VENV REQUIREMENTS WHAT
# makes the virtualenv VENV (under the build tree) with REQUIREMENTS
# installed, or makes it again when it is missing or REQUIREMENTS changed
# since, one test at a time (ctest -j may start two that share it); WHAT
# names the test in its messages. Returns 1 when pip fails.
python_venv() {
  local venv=$1 requirements=$2 what=$3 lock status=0
  mkdir -p "$(dirname "$venv")"
  exec {lock}> "$venv.lock"
  flock "$lock"
  if ! cmp -s "$requirements" "$venv/requirements.txt" 2>/dev/null; then
    echo "$what: installing $(grep -v '^#' "$requirements" | xargs) into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    if "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"; then
      cp "$requirements" "$venv/requirements.txt"
    else
      echo "$what: error: could not install the Python packages from PyPI into $venv" >&2
      rm -rf "$venv"
      status=1
    fi
  fi
  flock -u "$lock"
  exec {lock}>&-
  return $status
}
