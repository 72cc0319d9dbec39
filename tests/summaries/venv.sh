# shellcheck shell=bash
# Sourced: summaries_venv BUILD_DIR sets $venv to a virtualenv under BUILD_DIR
# holding TensorBoard (requirements.txt), made or remade when missing or when
# requirements.txt changed since. Tests that share it hold the ctest
# RESOURCE_LOCK summaries-venv.
summaries_venv() {
  local here
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  venv=$1/summaries-venv
  if ! cmp -s "$here/requirements.txt" "$venv/requirements.txt" 2>/dev/null; then
    echo "summaries: installing $(grep -v '^#' "$here/requirements.txt" | xargs) into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    if ! "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"; then
      echo "summaries: error: could not install TensorBoard from PyPI into $venv" >&2
      rm -rf "$venv"
      return 1
    fi
    cp "$here/requirements.txt" "$venv/requirements.txt"
  fi
}
