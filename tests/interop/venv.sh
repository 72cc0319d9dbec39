# Sourced by the interop tests: makes (once per build tree, again when
# requirements.txt changes) the virtualenv with TensorFlow and onnxruntime
# from PyPI, and sets $python to its interpreter.
# usage: source venv.sh BUILD_DIR
# shellcheck source=tests/support/venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/venv.sh"
ensure_venv "$1/interop-venv" "$(dirname "${BASH_SOURCE[0]}")/requirements.txt" "interop test"
python=$1/interop-venv/bin/python
export PYTHONDONTWRITEBYTECODE=1 TF_CPP_MIN_LOG_LEVEL=2
