# Sourced by the interop tests: makes (once per build tree, again when
# requirements.txt changes) the virtualenv with TensorFlow and onnxruntime
# from PyPI, and sets $python to its interpreter.
# usage: source venv.sh BUILD_DIR
interop_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv=$1/interop-venv
# One test makes the venv while any other waits (ctest -j runs them at once).
exec {interop_lock}> "$1/interop-venv.lock"
flock "$interop_lock"
if ! cmp -s "$interop_here/requirements.txt" "$venv/requirements.txt" 2>/dev/null; then
  echo "interop test: installing $(grep -v '^#' "$interop_here/requirements.txt" | xargs) into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  if ! "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$interop_here/requirements.txt"; then
    echo "interop test: error: could not install the packages from PyPI into $venv" >&2
    rm -rf "$venv"
    exit 1
  fi
  cp "$interop_here/requirements.txt" "$venv/requirements.txt"
fi
flock -u "$interop_lock"
python=$venv/bin/python
export PYTHONDONTWRITEBYTECODE=1 TF_CPP_MIN_LOG_LEVEL=2
