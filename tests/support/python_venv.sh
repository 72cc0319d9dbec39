# shellcheck shell=bash
# Sourced by the tests that run Python packages from PyPI:
#   python_venv VENV REQUIREMENTS WHAT
# makes the virtualenv VENV (under the build tree) with REQUIREMENTS
# installed, or makes it again when it is missing or REQUIREMENTS changed
# since; WHAT names the test in its messages. Returns 1 when pip fails.
python_venv() {
  local venv=$1 requirements=$2 what=$3
  if cmp -s "$requirements" "$venv/requirements.txt" 2>/dev/null; then
    return 0
  fi
  echo "$what: installing $(grep -v '^#' "$requirements" | xargs) into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  if ! "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"; then
    echo "$what: error: could not install the Python packages from PyPI into $venv" >&2
    rm -rf "$venv"
    return 1
  fi
  cp "$requirements" "$venv/requirements.txt"
}
