# shellcheck shell=bash
# Sourced by the e2e scripts with their arguments (BIN_DIR WORK_DIR): sets
# bin, work, root and data (Fashion-MNIST, which scripts/setup.sh installs;
# its absence fails the test, naming the package), fail(), wait_for(),
# chief_step(), reshard() and cluster_json(),
# and helpers below (run_stamped and prompt_exits time a launcher's run).
set -euo pipefail
bin=$1 work=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
  echo "e2e: Fashion-MNIST is not installed at $data (scripts/setup.sh installs dataset-fashion-mnist)" >&2
  exit 1
fi
fail() { echo "e2e: FAIL: $*" >&2; exit 1; }

# refused NAME TEXT COMMAND...: COMMAND exits 2 (a usage error) saying TEXT;
# its output is kept in $work/NAME.log.
refused() {
  local name=$1 text=$2
  shift 2
  set +e
  timeout 60 "$@" > "$work/$name.log" 2>&1
  local code=$?
  set -e
  if [ "$code" -ne 2 ] || ! grep -qF -- "$text" "$work/$name.log"; then
    cat "$work/$name.log" >&2
    fail "$name: exit $code, expected 2 saying '$text'"
  fi
  echo "   ok: $name: exit 2: $(grep -F -- "$text" "$work/$name.log" | head -1 | cut -c1-110)"
}

# wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds (tried every
# 20 ms); past SECONDS, fails saying WHAT after the tail of $log.
wait_for() {
  local limit=$1 what=$2; shift 2
  for _ in $(seq 1 $((limit * 50))); do "$@" && return 0; sleep 0.02; done
  tail -20 "$log" >&2
  fail "waited $limit s for $what"
}

# chief_step: the last step the chief (worker.0, under a launcher) printed
# in $log; chief_at N: whether it reached step N.
chief_step() { sed -n 's/^worker.0 *| step \([0-9]*\)\/.*/\1/p' "$log" | tail -1; }
chief_at() { local s; s=$(chief_step); [ "${s:-0}" -ge "$1" ]; }

# reshard CLUSTER FROM TO: `dtf-run ctl --cluster CLUSTER scale ps=TO`, then
# waits (60 s at most) for the launcher's "ps scaled FROM -> TO" line in $log
# (docs/elastic.md).
reshard() {
  "$bin/dtf-run" ctl --cluster "$1" scale "ps=$3" >> "$work/ctl.log" 2>&1 ||
    fail "dtf-run ctl scale ps=$3 failed: $(cat "$work/ctl.log")"
  echo "   step $(chief_step): scale ps=$3"
  wait_for 60 "the re-shard $2 -> $3" grep -q "^\[launcher\] ps scaled $2 -> $3:" "$log"
}

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

# Root only: runs the calling script again (with the same arguments) in a
# mount namespace of its own, where private_hosts can replace /etc/hosts
# without touching the machine's.
enter_private_mounts() {
  if [ -z "${DTF_E2E_PRIVATE_MOUNTS:-}" ]; then
    exec env DTF_E2E_PRIVATE_MOUNTS=1 unshare --mount --propagation private -- "$0" "$@"
  fi
}

# private_hosts FILE LINE...: FILE becomes /etc/hosts (after
# enter_private_mounts): the machine's lines and LINE... ("127.0.1.1 n1").
# Lines appended to FILE later are seen at once (glibc reads it per lookup).
private_hosts() {
  local file=$1
  shift
  { cat /etc/hosts; printf '%s\n' "$@"; } > "$file"
  mount --bind "$file" /etc/hosts || fail "cannot bind-mount $file over /etc/hosts in a private mount namespace"
}

# free_ports N FROM [HOST...]: the first of N consecutive ports from FROM up
# that are free on every HOST (default 127.0.0.1).
free_ports() {
  python3 - "$@" <<'PY'
import socket, sys
n, start, hosts = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:] or ["127.0.0.1"]
for base in range(start, 60000 - n, n + 7):
    socks = []
    try:
        for p in range(base, base + n):
            for host in hosts:
                s = socket.socket(); s.bind((host, p)); socks.append(s)
        print(base); break
    except OSError:
        pass
    finally:
        for s in socks: s.close()
else:
    raise SystemExit("no free ports")
PY
}

# mlp_plan NAME STEPS EVAL_EVERY [CHECKPOINT_EVERY]: models/mlp.dtf with async
# updates, STEPS steps, an evaluation every EVAL_EVERY steps (and a
# checkpoint every CHECKPOINT_EVERY steps), compiled to $work/NAME.plan.
mlp_plan() {
  local checkpoint=()
  [ $# -lt 4 ] || checkpoint=(-e "s/checkpoint every 5 min keep 3/checkpoint every $4 steps keep 3/")
  sed -e "s/steps = 10000/steps = $2/" -e "s/every = 2000/every = $3/" \
      -e "s/update = sync(replicas_to_aggregate = 2, total_num_replicas = 3)/update = async/" \
      "${checkpoint[@]}" "$root/models/mlp.dtf" > "$work/$1.dtf"
  "$bin/dtfc" "$work/$1.dtf" -o "$work/$1.plan"
}

# run_stamped LOG COMMAND...: runs COMMAND with its stdout and stderr in LOG
# and, in LOG.times, each line with the seconds since the start at which it
# came ("12.345 worker.1 | final: ..."); returns COMMAND's exit code. The
# launcher writes each line as it comes (its own and its tasks').
run_stamped() {
  local log=$1
  shift
  "$@" 2>&1 | python3 -c '
import sys, time
start = time.monotonic()
with open(sys.argv[1], "w") as log, open(sys.argv[1] + ".times", "w") as times:
    for line in sys.stdin:
        times.write(f"{time.monotonic() - start:.3f} {line}")
        log.write(line)
        log.flush(); times.flush()
' "$log"
  return "${PIPESTATUS[0]}"
}

# prompt_exits LOG SECONDS: every task of a launcher's run (LOG.times from
# run_stamped) exited within SECONDS of its last line: none waited for a
# timer once its work was done (gRPC's shutdown once held a task up to
# 10 s). Prints the longest wait; fails naming each task that waited longer.
prompt_exits() {
  python3 - "$1.times" "$2" <<'PY'
import re, sys
bound, last, waits = float(sys.argv[2]), {}, {}
for line in open(sys.argv[1]):
    t, _, text = line.rstrip("\n").partition(" ")
    m = re.match(r"\[launcher\] (\S+) exited \(code", text)
    if m and m.group(1) in last:
        waits[m.group(1)] = float(t) - last[m.group(1)]
    m = re.match(r"(\S+) *\| ", text)
    if m:
        last[m.group(1)] = float(t)
if not waits:
    sys.exit(f"{sys.argv[1]}: no task's exit")
slow = {k: v for k, v in waits.items() if v > bound}
if slow:
    sys.exit("exited later than %g s after their last line: %s" % (bound, ", ".join(
        f"{k} {v:.2f} s" for k, v in sorted(slow.items()))))
k = max(waits, key=waits.get)
print(f"   ok: {len(waits)} tasks exited within {waits[k]:.2f} s of their last line ({k})")
PY
}
