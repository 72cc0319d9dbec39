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
if ! cmp -s "$here/requirements.txt" "$venv/requirements.txt" 2>/dev/null; then
  echo "deploy test: installing $(grep -v '^#' "$here/requirements.txt" | xargs) into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  if ! "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"; then
    echo "deploy test: error: could not install kubernetes-validate from PyPI into $venv" >&2
    rm -rf "$venv"
    exit 1
  fi
  cp "$here/requirements.txt" "$venv/requirements.txt"
fi
bash -n "$root/deploy/slurm/train.sbatch"
"$2" --help > "$venv/dtf-run-help.txt"
exec "$venv/bin/python" "$here/check_manifests.py" "$root/deploy/kubernetes" "$venv/dtf-run-help.txt"
