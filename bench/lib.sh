# shellcheck shell=bash
# Sourced by the benchmark scripts that run dtf on local clusters
# (distributed.sh, model_parallel.sh): free ports, the cluster spec, and a
# dtf-run launcher whose tasks' peak RSS is sampled while it runs.

# bench_free_ports N: prints N free loopback ports, space-separated.
bench_free_ports() {
  python3 -c '
import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}

# bench_cluster_json PS WORKERS: prints a cluster spec of PS ps tasks and
# WORKERS workers on free loopback ports.
bench_cluster_json() {
  local -a ports
  read -r -a ports < <(bench_free_ports $(($1 + $2)))
  python3 -c '
import json, sys
ps, ports = int(sys.argv[1]), sys.argv[2:]
print(json.dumps({"ps": ["127.0.0.1:" + p for p in ports[:ps]],
                  "worker": ["127.0.0.1:" + p for p in ports[ps:]]}))' "$1" "${ports[@]}"
}

# bench_dtf_cluster OUT DTF-RUN-ARGS...: runs `DTF-RUN-ARGS` (a dtf-run that
# launches and supervises local tasks) with its output in OUT, and returns its
# status. Peak RSS: the launcher prints each task's pid; VmHWM (the process's
# own peak RSS) is sampled from /proc every 0.1 s, and the last value seen for
# each task is left in the associative array bench_hwm (task -> KB). CPU:
# the task's user + system time (/proc/PID/stat, in clock ticks), sampled as
# often; the last value seen, in bench_cpu (task -> seconds, 2 decimals; the
# last 0.1 s of a task, its shutdown, can be missing).
# shellcheck disable=SC2034  # bench_hwm and bench_cpu are read by the caller
bench_dtf_cluster() {
  local out=$1 launcher task pid v tick
  shift
  tick=$(getconf CLK_TCK)
  "$@" > "$out" 2>&1 &
  launcher=$!
  declare -gA bench_hwm=() bench_cpu=()
  while kill -0 "$launcher" 2>/dev/null; do
    while read -r task pid; do
      v=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
      [[ -n $v ]] && bench_hwm[$task]=$v
      # Fields 14 and 15 after the command name, which may hold spaces.
      v=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | awk -v t="$tick" '{printf "%.2f", ($12 + $13) / t}' || true)
      [[ -n $v ]] && bench_cpu[$task]=$v
    done < <(sed -n 's/^\[launcher\] \([a-z]*\.[0-9]*\) started (pid \([0-9]*\)).*/\1 \2/p' "$out")
    sleep 0.1
  done
  wait "$launcher"
}

# bench_median_index VALUE...: the 0-based index of the median value (the
# lower middle one of an even count, so a measured one).
bench_median_index() {
  printf '%s\n' "$@" | awk '{print NR - 1, $1}' | sort -k2 -g |
    awk -v n="$#" 'NR == int((n + 1) / 2) {print $1}'
}

# bench_gcd A B
bench_gcd() { local a=$1 b=$2 t; while ((b)); do t=$((a % b)); a=$b; b=$t; done; echo "$a"; }

# bench_dtf_timed_rate FILE WARMUP [TASK]: dtf-run prints img/s per logging
# interval; with equal intervals (--log-every gcd(warmup, steps)) the timed
# rate is the harmonic mean of the rates of the intervals after the warm-up.
# TASK (e.g. worker.0) reads that task's lines of a cluster's output.
bench_dtf_timed_rate() {
  awk -v w="$2" -v task="${3-}" '
    task != "" { if ($1 != task || $2 != "|") next; $1 = ""; $2 = ""; $0 = $0 }
    $1 == "step" && $2 ~ /^[0-9]+\/[0-9]+$/ { split($2, s, "/");
      for (k = 3; k < NF; ++k) if ($(k + 1) == "img/s") r = $k;
      if (s[1] > w) { n++; inv += 1 / r } }
    END { if (n) printf "%.1f", n / inv }' "$1"
}

# bench_loopback_bw: loopback TCP bandwidth (256 MB, best of 3) as one line,
# "N MB/s (G Gbit/s; runs [...] MB/s)": what any runtime here can move
# between its tasks.
bench_loopback_bw() {
  local root json
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  json=$(python3 "$root/bench/peers/loopback_bw.py" --mb 256 --repeat 3) || return 1
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print("%d MB/s (%.1f Gbit/s; runs %s MB/s)" % (r["best_MBps"], r["best_Gbps"], r["runs_MBps"]))' "$json"
}

# bench_cpu_isa: "CPU model; avx2, avx512f, avx512_bf16, no amx_bf16, ..."
# (the ISA extensions that decide dtf's and its peers' bf16 and f32 kernels).
bench_cpu_isa() {
  local isa="" f
  for f in avx2 avx512f avx512_bf16 amx_bf16 amx_tile; do
    grep -qw "$f" /proc/cpuinfo && isa+="${isa:+, }$f" || isa+="${isa:+, }no $f"
  done
  echo "$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo); $isa"
}

# Hosts on one machine (needs root): a bridge in a namespace TAG-hub and a
# namespace TAG-H per host H on a veth link to it (eth0, ADDR/24), as
# tests/e2e/netns.sh makes them. bench_netns_up TAG H=ADDR...; the hosts'
# names are left in bench_netns_hosts and the tag in bench_netns_tag for
# bench_netns_shape, bench_netns_wait and bench_netns_down.
bench_netns_up() {
  local h ns
  bench_netns_tag=$1
  shift
  bench_netns_hosts=()
  ip netns add "$bench_netns_tag-hub" || { echo "bench: this machine refuses to create a network namespace" >&2; return 1; }
  ip -n "$bench_netns_tag-hub" link add br0 type bridge
  ip -n "$bench_netns_tag-hub" link set br0 up
  for h in "$@"; do
    ns=$bench_netns_tag-${h%%=*}
    bench_netns_hosts+=("${h%%=*}")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$ns" link add eth0 type veth peer name "v${h%%=*}" netns "$bench_netns_tag-hub"
    ip -n "$bench_netns_tag-hub" link set "v${h%%=*}" master br0
    ip -n "$bench_netns_tag-hub" link set "v${h%%=*}" up
    ip -n "$ns" addr add "${h#*=}/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
}

# bench_netns_shape RATE: every host's link shaped to RATE (tc tbf), both ways.
bench_netns_shape() {
  local h
  for h in "${bench_netns_hosts[@]}"; do
    ip netns exec "$bench_netns_tag-$h" tc qdisc replace dev eth0 root tbf rate "$1" burst 1mb latency 50ms
    ip netns exec "$bench_netns_tag-hub" tc qdisc replace dev "v$h" root tbf rate "$1" burst 1mb latency 50ms
  done
}

# bench_netns_wait FROM ADDR: until host FROM reaches ADDR (10 s at most).
bench_netns_wait() {
  local _
  for _ in $(seq 50); do
    ip netns exec "$bench_netns_tag-$1" python3 -c "
import socket, sys
s = socket.socket(); s.settimeout(1)
try: s.connect(('$2', 9))
except ConnectionRefusedError: pass
except OSError: sys.exit(1)" && return 0
    sleep 0.2
  done
  return 1
}

# bench_netns_down: every process in the hosts killed, the namespaces gone.
bench_netns_down() {
  local ns p
  for ns in "${bench_netns_hosts[@]/#/$bench_netns_tag-}" "$bench_netns_tag-hub"; do
    for p in $(ip netns pids "$ns" 2> /dev/null); do kill -9 "$p" 2> /dev/null || true; done
    ip netns del "$ns" 2> /dev/null || true
  done
}
