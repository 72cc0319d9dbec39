# shellcheck shell=bash
# Sourced by the e2e scripts with their arguments (BIN_DIR WORK_DIR): sets
# bin, work, root and data (Fashion-MNIST, which scripts/setup.sh installs;
# its absence fails the test, naming the package), and fail().
set -euo pipefail
bin=$1 work=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
  echo "e2e: Fashion-MNIST is not installed at $data (scripts/setup.sh installs dataset-fashion-mnist)" >&2
  exit 1
fi
fail() { echo "e2e: FAIL: $*" >&2; exit 1; }
