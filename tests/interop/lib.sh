# shellcheck shell=bash
# Sourced by the interop tests with NAME BUILD_DIR: sets here, root, build,
# bin, data (Fashion-MNIST, whose absence fails the test), work (a fresh
# BUILD_DIR/interop-NAME), fail(), and python: the interpreter of the
# virtualenv with TensorFlow and onnxruntime from PyPI (requirements.txt),
# made once per build tree.
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
interop_name=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "$2" && pwd)
bin=$build/bin
data=/usr/share/datasets/fashion-mnist
fail() { echo "interop $interop_name test: FAIL: $*" >&2; exit 1; }
[ -f "$data/train-images-idx3-ubyte.gz" ] ||
  fail "Fashion-MNIST is not installed at $data (scripts/setup.sh installs dataset-fashion-mnist)"
# shellcheck source=tests/support/python_venv.sh
source "$here/../support/python_venv.sh"
python_venv "$build/interop-venv" "$here/requirements.txt" "interop $interop_name test" ||
  fail "no virtualenv with TensorFlow and onnxruntime"
python=$build/interop-venv/bin/python
export PYTHONDONTWRITEBYTECODE=1 TF_CPP_MIN_LOG_LEVEL=2
work=$build/interop-$interop_name
rm -rf "$work"
mkdir -p "$work"
