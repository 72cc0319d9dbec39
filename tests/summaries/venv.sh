# shellcheck shell=bash
# Sourced: summaries_venv BUILD_DIR sets $venv to the virtualenv under
# BUILD_DIR that holds TensorBoard (requirements.txt). Tests that share it
# hold the ctest RESOURCE_LOCK summaries-venv.
# shellcheck source=tests/support/python_venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/python_venv.sh"
summaries_venv() {
  venv=$1/summaries-venv
  python_venv "$venv" "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/requirements.txt" summaries
}
