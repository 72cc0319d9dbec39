#!/usr/bin/env bash
# Checks deploy/: the TFJob manifests' pod templates (and the other objects)
# against Kubernetes' schemas with kubernetes-validate (PyPI, in a virtualenv
# under the build tree), their dtf-run flags against dtf-run --help, and the
# sbatch script's syntax. The sbatch script runs for real in e2e.slurm_srun.
# usage: manifests.sh BUILD_DIR DTF_RUN
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_DIR DTF_RUN" >&2
  exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
mkdir -p "$1"
venv=$(cd "$1" && pwd)/deploy-venv
# shellcheck source=tests/support/python_venv.sh
source "$root/tests/support/python_venv.sh"
python_venv "$venv" "$here/requirements.txt" "deploy test" || exit 1
bash -n "$root/deploy/slurm/train.sbatch"
"$2" --help > "$venv/dtf-run-help.txt"
exec "$venv/bin/python" "$here/check_manifests.py" "$root/deploy/kubernetes" "$venv/dtf-run-help.txt"
