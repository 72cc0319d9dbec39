# shellcheck shell=bash
# Sourced by the e2e scripts with their arguments (BIN_DIR WORK_DIR): sets
# bin, work, root and data (Fashion-MNIST, which scripts/setup.sh installs;
# its absence fails the test, naming the package), fail() and cluster_json().
set -euo pipefail
bin=$1 work=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
  echo "e2e: Fashion-MNIST is not installed at $data (scripts/setup.sh installs dataset-fashion-mnist)" >&2
  exit 1
fi
fail() { echo "e2e: FAIL: $*" >&2; exit 1; }

# cluster_json FILE NUM_PS NUM_WORKERS: writes a cluster file whose tasks
# listen on free ports of 127.0.0.1.
cluster_json() {
  python3 - "$@" <<'PY'
import json, socket, sys
path, nps, nworkers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
socks, addr = [], []
for _ in range(nps + nworkers):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
    addr.append(f"127.0.0.1:{s.getsockname()[1]}")
json.dump({"ps": addr[:nps], "worker": addr[nps:]}, open(path, "w"))
PY
}
