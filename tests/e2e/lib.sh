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

# A cluster file of PS ps and WORKERS worker tasks on free loopback ports:
# loopback_cluster FILE PS WORKERS
loopback_cluster() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, socket, sys
path, ps, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
socks, ports = [], []
for _ in range(ps + workers):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s); ports.append(s.getsockname()[1])
addr = [f"127.0.0.1:{p}" for p in ports]
json.dump({"ps": addr[:ps], "worker": addr[ps:]}, open(path, "w"))
PY
}
