#!/usr/bin/env bash
# Three hosts on one machine: each task in its own network namespace with its
# own address (10.213.0.1-3/24, on veth links to a bridge that lives in a
# fourth namespace, so no packet reaches the machine's own network), every
# link shaped to 1 Gbit/s with tc tbf (this kernel has no netem: no delay).
# Each "host" runs dtf-run's launcher with the same cluster file (every task
# on port 2222 of its own host), which starts only the task whose address is
# its own. 1 ps + 2 workers train async with a checkpoint every 100 steps;
# the ps is killed with SIGKILL mid-run: its host's launcher restarts it, the
# chief restores the last checkpoint, and the job finishes every step with
# every launcher exiting 0. The namespaces are deleted at exit.
# usage: netns.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"

skip() { echo "e2e: netns: SKIPPED: $*" >&2; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root; run the suite as root"
for tool in ip tc; do
  command -v "$tool" > /dev/null || fail "netns: '$tool' is missing: scripts/setup.sh installs iproute2"
done

rm -rf "$work" && mkdir -p "$work/model"
tag=dtf$$ # names unique to this run; interface names stay under 16 bytes
hub=$tag-hub
hosts=(ps w0 w1)
declare -A addr=([ps]=10.213.0.1 [w0]=10.213.0.2 [w1]=10.213.0.3)
launchers=()
cleanup() {
  local p ns
  for p in "${launchers[@]}"; do kill -- "-$p" 2> /dev/null || kill "$p" 2> /dev/null || true; done
  for ns in "${hosts[@]/#/$tag-}" "$hub"; do
    for p in $(ip netns pids "$ns" 2> /dev/null); do kill -9 "$p" 2> /dev/null || true; done
    ip netns del "$ns" 2> /dev/null || true
  done
  wait 2> /dev/null || true
}
trap cleanup EXIT

if ! ip netns add "$hub" 2> "$work/netns.err"; then
  skip "this machine refuses to create a network namespace ($(cat "$work/netns.err"))"
fi
ip -n "$hub" link add br0 type bridge
ip -n "$hub" link set br0 up
ip -n "$hub" link set lo up
for h in "${hosts[@]}"; do
  ns=$tag-$h
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  # The veth pair is made inside the host's namespace with its peer in the
  # hub's: neither end ever exists in the machine's own namespace.
  ip -n "$ns" link add eth0 type veth peer name "v$h" netns "$hub"
  ip -n "$hub" link set "v$h" master br0
  ip -n "$hub" link set "v$h" up
  ip -n "$ns" addr add "${addr[$h]}/24" dev eth0
  ip -n "$ns" link set eth0 up
  # 1 Gbit/s each way: the host's egress and the bridge port's egress.
  ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate 1gbit burst 256kb latency 20ms ||
    fail "netns: tc tbf is not available on this kernel"
  ip netns exec "$hub" tc qdisc add dev "v$h" root tbf rate 1gbit burst 256kb latency 20ms
done
# The hosts reach each other across the bridge (a refused connection is an
# answer from the ps host; the kernel takes a moment to bring the ports to
# forwarding).
reach() {
  ip netns exec "$tag-w0" python3 - "${addr[ps]}" <<'PY'
import socket, sys
s = socket.socket(); s.settimeout(1)
try:
    s.connect((sys.argv[1], 9))
except ConnectionRefusedError:
    pass
except OSError:
    sys.exit(1)
PY
}
for _ in $(seq 20); do reach && break; sleep 0.2; done
reach || fail "netns: w0 cannot reach the ps host ${addr[ps]} across the bridge"
echo "netns: hosts ps ${addr[ps]}, w0 ${addr[w0]}, w1 ${addr[w1]} on a 1 Gbit/s bridge"

printf '{"ps": ["%s:2222"], "worker": ["%s:2222", "%s:2222"]}\n' \
  "${addr[ps]}" "${addr[w0]}" "${addr[w1]}" > "$work/cluster.json"
steps=2400
mlp_plan mlp "$steps" "$steps" 100
# One CA for the three hosts (each launcher would otherwise make its own).
"$bin/dtf-run" certs --cluster "$work/cluster.json" --out "$work/tls" > /dev/null ||
  fail "netns: dtf-run certs failed"

for h in "${hosts[@]}"; do
  setsid ip netns exec "$tag-$h" timeout 600 "$bin/dtf-run" "$work/mlp.plan" \
    --cluster "$work/cluster.json" --tls-dir "$work/tls" --model-dir "$work/model" --log-every 100 \
    --connect-timeout 60 > "$work/$h.log" 2>&1 &
  launchers+=($!)
done
# Kill the ps once the chief is at step 1000.
killed=""
for _ in $(seq 1500); do
  s=$(sed -n 's/^worker.0 *| step \([0-9]*\)\/.*/\1/p' "$work/w0.log" | tail -1)
  if [ -n "$s" ] && [ "$s" -ge 1000 ]; then
    pid=$(sed -n 's/^\[launcher\] ps.0 started (pid \([0-9]*\).*/\1/p' "$work/ps.log" | tail -1)
    kill -9 "$pid" && killed=$pid
    break
  fi
  sleep 0.1
done
[ -n "$killed" ] || { tail -20 "$work"/*.log >&2; fail "netns: the chief never reached step 1000, so the ps was not killed"; }
echo "   chief at step >= 1000: kill -9 ps.0 (pid $killed)"
codes=()
for p in "${launchers[@]}"; do
  set +e
  wait "$p"
  codes+=($?)
  set -e
done
sent=$(ip netns exec "$tag-ps" tc -s qdisc show dev eth0 | sed -n 's/^ *Sent \([0-9]*\) bytes.*/\1/p' | head -1)
python3 - "$work" "${codes[*]}" "$steps" "${sent:-0}" "${addr[ps]}" <<'PY' || fail "netns: the job"
import re, sys
work, codes, steps, sent, ps_addr = sys.argv[1], sys.argv[2].split(), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
read = lambda h: open(f"{work}/{h}.log").read().splitlines()
ps, w0, w1 = read("ps"), read("w0"), read("w1")
bad = []
if codes != ["0", "0", "0"]:
    bad.append(f"the launchers of ps, w0 and w1 exited {codes}")
for name, log, task in (("ps", ps, "ps.0"), ("w0", w0, "worker.0"), ("w1", w1, "worker.1")):
    started = [l for l in log if l.startswith("[launcher] ") and " started " in l]
    if not started or any(task not in l for l in started):
        bad.append(f"host {name}'s launcher did not start exactly its own task {task}: {started}")
if not any(re.match(r"\[launcher\] ps.0 killed by signal 9", l) for l in ps):
    bad.append("the ps host's launcher did not see ps.0 killed")
if not any("restarting ps.0" in l for l in ps):
    bad.append("the ps host's launcher did not restart ps.0")
if sum(1 for l in ps if f"serving on {ps_addr}:2222" in l) < 2:
    bad.append(f"ps.0 did not serve on {ps_addr}:2222 twice")
if not any(re.search(r"restored checkpoint ckpt-\d+", l) for l in w0 + ps):
    bad.append("nothing restored the last checkpoint after the ps was lost")
evals = [l for l in w0 if re.match(r"worker.0 *\| eval  step (\d+)", l)]
m = re.search(r"eval  step (\d+) .*accuracy ([0-9.]+)", evals[-1]) if evals else None
if not m or int(m.group(1)) < steps or float(m.group(2)) < 0.7:
    bad.append(f"the chief did not finish its {steps} steps with accuracy above 0.7: {evals[-1:]}")
if sent < 10_000_000:
    bad.append(f"the ps host sent only {sent} bytes through its shaped link")
if bad:
    print("e2e: netns:\n  " + "\n  ".join(bad), file=sys.stderr); sys.exit(1)
print(f"   ok: {m.group(0)}; the ps host sent {sent / 1e6:.0f} MB through its 1 Gbit/s link")
PY
echo "netns: PASS"
