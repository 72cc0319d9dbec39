#!/usr/bin/env bash
# The pauses of elastic jobs (docs/elastic.md) on loopback: the seed CNN
# (models/mnist_cnn.dtf, its eval source left out) on 1 ps + 2 workers, in
# sync mode (replicas_to_aggregate = 3: an update averages min(3, live
# workers) gradients) and in async mode. Measures, from every task's output
# line timestamped as it comes:
#   - scale-up (`dtf-run ctl scale worker=3` on a launcher started with
#     --workers 2 of 3 slots): request -> the new worker's first step (its
#     first push; async: applied, sync: in the next update);
#   - scale-down (`scale worker=2`): request -> ps.0's "worker.2 left";
#   - kill -9 of worker.1 in a job started task by task (--job/--task, no
#     launcher to restart it), with a short --lease-timeout: kill -> ps.0's
#     "went silent";
#   - ps re-shards (`dtf-run ctl scale ps=2`, then `scale ps=1`, on a
#     launcher started with --ps 1 of 2 ps slots, --workers 2 of 3 worker
#     slots and a model dir): request -> the launcher's "ps scaled" line
#     (the restarted chief restored the checkpoint of the step it paused
#     at);
#   - for each, the longest time the job's global step did not move after
#     the change (the pause) beside the median step interval before it, and
#     the global steps per second before and after;
#   - with --runs replicas (not in the default runs, and appended to the
#     results file as a section of its own): kill -9 of ps.0 on 2 ps + 2
#     workers under the launcher with a checkpoint every 100 steps, without
#     and with --ps-replicas 2: the time the global step stood still, the
#     steps lost (rolled back), the time until it is past the step it had
#     reached, and the images/s before the kill of both (their ratio: the
#     cost of replication).
# No peer runs beside it: no peer scales a running ps/worker job (TensorFlow's
# ParameterServerStrategy has a fixed cluster; torchrun restarts every worker).
# Prints a table and writes it to results/elastic.md.
#
#   usage: bench/elastic.sh [options]
#     --build DIR          dtf build directory with bin/dtfc and bin/dtf-run
#                          (default: ./build of this checkout)
#     --phase S            seconds of each phase between changes (default 8)
#     --lease-timeout S    the kill run's --lease-timeout (default 2)
#     --modes LIST         sync,async (default both)
#     --runs LIST          scale,kill,ps (default all three), or replicas
#                          (alone: appended to the results file)
#     --out FILE           results file (default bench/results/elastic.md;
#                          "-" writes none)
#     --keep DIR           keep the logs in DIR (default: removed)
#     --links RATE         run on hosts instead of loopback: ps.0 and each
#                          worker in a network namespace of its own, links
#                          shaped to RATE (tc, e.g. 1gbit), every task started
#                          by hand (--job/--task) with mutual TLS over TCP;
#                          runs scale (worker.2 started on its host, then
#                          asked to leave with SIGUSR1) and kill; a ps
#                          re-shard needs the launcher and one host, so `ps`
#                          is refused here (default results file
#                          results/elastic-hosts.md; needs root)
#
#   environment: DTF_BENCH_DATA (default /usr/share/datasets/fashion-mnist)
#
# Every task has 1 intra-op thread; all share the machine's cores. About 2
# minutes with the defaults.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
phase=8
lease=2
modes=sync,async
runs=scale,kill,ps
out=$root/bench/results/elastic.md
keep=
links=
cmdline="bench/elastic.sh${*:+ $*}"

die() { echo "elastic.sh: $*" >&2; exit 2; }
while (($#)); do
  case $1 in
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --phase) [[ ${2-} =~ ^[1-9][0-9]*$ ]] || die "--phase needs whole seconds, got '${2-}'"; phase=$2; shift 2 ;;
    --lease-timeout) [[ ${2-} =~ ^[1-9][0-9]*$ ]] || die "--lease-timeout needs whole seconds, got '${2-}'"; lease=$2; shift 2 ;;
    --modes) modes=${2:?--modes needs a list}; shift 2 ;;
    --runs) runs=${2:?--runs needs a list}; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    --keep) keep=${2:?--keep needs a directory}; shift 2 ;;
    --links) [[ ${2-} =~ ^[0-9]+(k|m|g)bit$ ]] || die "--links needs a tc rate such as 1gbit, got '${2-}'"; links=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for m in ${modes//,/ }; do
  case $m in sync|async) ;; *) die "--modes: unknown mode '$m' (sync, async)" ;; esac
done
for r in ${runs//,/ }; do
  case $r in scale|kill|ps) ;; replicas) [[ $runs == replicas ]] || die "--runs replicas goes alone (it appends its own section)" ;;
    *) die "--runs: unknown run '$r' (scale, kill, ps, replicas)" ;; esac
done
[[ $runs == replicas && -n $links ]] && die "--links: the replicas run needs the launcher with every task on one host"

if [[ -n $links ]]; then
  [[ ,$runs, == *,ps,* && $runs != scale,kill,ps ]] && die "--links: a ps re-shard needs the launcher with every task on one host; --runs scale,kill"
  runs=${runs//,ps/}; runs=${runs//ps,/}
  [[ $out == "$root/bench/results/elastic.md" ]] && out=$root/bench/results/elastic-hosts.md
  [ "$(id -u)" -eq 0 ] || die "--links: network namespaces need root"
fi
data=${DTF_BENCH_DATA:-/usr/share/datasets/fashion-mnist}
[[ -e $data/train-images-idx3-ubyte.gz || -e $data/train-images-idx3-ubyte ]] ||
  die "$data: no Fashion-MNIST train-images-idx3-ubyte[.gz] (set DTF_BENCH_DATA)"
[[ -x $build/bin/dtfc && -x $build/bin/dtf-run ]] ||
  die "$build/bin/dtfc or dtf-run is not built (--build DIR)"
run=$build/bin/dtf-run

# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"

work=$(mktemp -d)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  sleep 1
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [[ -n $links ]] && bench_netns_down
  if [[ -n $keep ]]; then
    mkdir -p "$keep"
    cp "$work"/*.log "$work"/*.events "$keep"/ 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# Each line as it comes, after the wall-clock time it came at and a task name
# (the launcher's lines carry their own).
stamp() {
  python3 -u -c '
import sys, time
prefix = sys.argv[1]
for line in iter(sys.stdin.readline, ""):
    sys.stdout.write("%.3f %s%s" % (time.time(), prefix, line))
    sys.stdout.flush()' "${1:-}"
}
now() { date +%s.%N; }
# steps_of LOG TASK: the last step number TASK printed.
steps_of() { sed -n "s/^[0-9.]* $2 *| step \([0-9]*\)\/.*/\1/p" "$1" | tail -1; }
# wait_step LOG TASK N: until TASK printed step N (60 s at most).
wait_step() {
  local _
  for _ in $(seq 1 600); do
    [[ $(steps_of "$1" "$2") -ge $3 ]] 2>/dev/null && return 0
    sleep 0.1
  done
  tail -20 "$1" >&2
  die "$2 did not reach step $3 in 60 s (log above)"
}

plan_for() { # MODE -> $work/MODE.plan
  local update=async
  [[ $1 == sync ]] && update='sync(replicas_to_aggregate = 3)'
  grep -v '^[[:space:]]*eval[[:space:]]*=' "$root/models/mnist_cnn.dtf" |
    sed -e "s|/usr/share/datasets/fashion-mnist|$data|" \
        -e "s/^\([[:space:]]*update[[:space:]]*=\).*/\1 $update/" \
        -e "s/^\([[:space:]]*steps[[:space:]]*=\).*/\1 1000000/" > "$work/$1.dtf"
  "$build/bin/dtfc" "$work/$1.dtf" -o "$work/$1.plan"
}

# The launcher with some slots of the cluster file, scaled twice, a phase
# apart:
#   scale: 1 ps and 3 worker slots, --workers 2; worker=3, then worker=2;
#   ps: 2 ps and 3 worker slots, --ps 1 --workers 2 and a model dir; ps=2,
#     then ps=1 (re-shards through a checkpoint of the current step: every
#     task restarts).
launcher_run() { # MODE RUN
  local m=$1 r=$2 log=$work/$1.$2.log nps=1 change
  local -a args=(--workers 2) changes=("up worker=3" "down worker=2")
  if [[ $r == ps ]]; then
    nps=2
    args+=(--ps 1 --model-dir "$work/$m.model")
    changes=("psup ps=2" "psdown ps=1")
  fi
  bench_cluster_json "$nps" 3 > "$work/$m.$r.json"
  "$run" "$work/$m.plan" --cluster "$work/$m.$r.json" "${args[@]}" --threads 1 \
    --log-every 1 > >(stamp > "$log") 2>&1 &
  pids+=($!)
  wait_step "$log" worker.1 20
  for change in "${changes[@]}"; do
    sleep "$phase"
    echo "$(now) ${change% *}" >> "$work/$m.$r.events"
    "$run" ctl --cluster "$work/$m.$r.json" scale "${change#* }" > /dev/null
  done
  sleep "$phase"
  echo "$(now) end" >> "$work/$m.$r.events"
  kill -INT "${pids[-1]}" 2>/dev/null || true
  wait "${pids[-1]}" 2>/dev/null || true
}

# ps.0, worker.0 and worker.1 started one by one; worker.1 killed with -9.
kill_run() { # MODE
  local m=$1 log=$work/$1.kill.log t w1=
  bench_cluster_json 1 3 > "$work/$m.kill.json"
  # Mutual TLS as the launcher's tasks have it (its own CA there).
  "$run" certs --cluster "$work/$m.kill.json" --out "$work/$m.certs" > /dev/null
  local -a mine=()
  for t in ps:0 worker:0 worker:1; do
    "$run" "$work/$m.plan" --cluster "$work/$m.kill.json" --tls-dir "$work/$m.certs" \
      --workers 2 --threads 1 \
      --log-every 1 --lease-timeout "$lease" --job "${t%:*}" --task "${t#*:}" \
      > >(stamp "${t/:/.} | " >> "$log") 2>&1 &
    mine+=($!)
    pids+=($!)
  done
  w1=${mine[2]}
  wait_step "$log" worker.1 20
  sleep "$phase"
  echo "$(now) kill" >> "$work/$m.kill.events"
  { kill -9 "$w1"; wait "$w1"; } 2>/dev/null || true
  sleep "$((lease + phase))"
  echo "$(now) end" >> "$work/$m.kill.events"
  for t in "${mine[@]}"; do kill -INT "$t" 2>/dev/null || true; done
  for t in "${mine[@]}"; do wait "$t" 2>/dev/null || true; done
}

# --runs replicas: 2 ps + 2 workers under the launcher (a checkpoint every
# 100 steps), without and with --ps-replicas 2; ps.0 killed with -9 a phase
# after worker.1's step 20, a phase before the end.
replicas_run() { # MODE none|replicas
  local m=$1 v=$2 log=$work/$1.rep-$2.log pid
  local -a args=(--model-dir "$work/$m.rep-$v.model")
  [[ $v == replicas ]] && args+=(--ps-replicas 2)
  sed -e 's/^\([[:space:]]*checkpoint every\).*/\1 100 steps keep 3/' "$work/$m.dtf" > "$work/$m.ckpt.dtf"
  "$build/bin/dtfc" "$work/$m.ckpt.dtf" -o "$work/$m.ckpt.plan"
  bench_cluster_json 2 2 > "$work/$m.rep-$v.json"
  "$run" "$work/$m.ckpt.plan" --cluster "$work/$m.rep-$v.json" "${args[@]}" --threads 1 \
    --log-every 1 > >(stamp > "$log") 2>&1 &
  pids+=($!)
  wait_step "$log" worker.1 20
  echo "$(now) start" >> "$work/$m.rep-$v.events"
  sleep "$phase"
  pid=$(sed -n 's/^[0-9.]* \[launcher\] ps\.0 started (pid \([0-9]*\).*/\1/p' "$log" | tail -1)
  echo "$(now) kill" >> "$work/$m.rep-$v.events"
  kill -9 "$pid"
  sleep "$phase"
  echo "$(now) end" >> "$work/$m.rep-$v.events"
  kill -INT "${pids[-1]}" 2>/dev/null || true
  wait "${pids[-1]}" 2>/dev/null || true
}

# On hosts (--links): ps.0, worker.0 and worker.1 each on a host of its own,
# started by hand with mutual TLS over TCP; then, for `scale`, worker.2
# started on its host (it joins) and later asked to leave (SIGUSR1), or, for
# `kill`, worker.1 killed with -9 (absorbed after --lease-timeout).
hosts_run() { # MODE RUN
  local m=$1 r=$2 log=$work/$1.$2.log t
  local -a mine=()
  start_on() { # HOST JOB:INDEX WORKERS
    ip netns exec "$bench_netns_tag-$1" "$run" "$work/$m.plan" --cluster "$work/hosts.json" \
      --tls-dir "$work/hosts.certs" --workers "$3" --threads 1 --log-every 1 \
      --lease-timeout "$lease" --connect-timeout 60 --job "${2%:*}" --task "${2#*:}" \
      > >(stamp "${2/:/.} | " >> "$log") 2>&1 &
    mine+=($!)
    pids+=($!)
  }
  start_on ps ps:0 2
  start_on w0 worker:0 2
  start_on w1 worker:1 2
  wait_step "$log" worker.1 20
  sleep "$phase"
  if [[ $r == scale ]]; then
    echo "$(now) up" >> "$work/$m.$r.events"
    start_on w2 worker:2 3
    sleep "$phase"
    echo "$(now) down" >> "$work/$m.$r.events"
    kill -USR1 "${mine[3]}"
  else
    echo "$(now) kill" >> "$work/$m.$r.events"
    { kill -9 "${mine[2]}"; wait "${mine[2]}"; } 2>/dev/null || true
    sleep "$lease"
  fi
  sleep "$phase"
  echo "$(now) end" >> "$work/$m.$r.events"
  for t in "${mine[@]}"; do kill -INT "$t" 2>/dev/null || true; done
  for t in "${mine[@]}"; do wait "$t" 2>/dev/null || true; done
}
if [[ -n $links ]]; then
  bench_netns_hosts=()
  bench_netns_up "dtfe$$" ps=10.215.0.1 w0=10.215.0.2 w1=10.215.0.3 w2=10.215.0.4 || die "no network namespaces here"
  bench_netns_shape "$links"
  bench_netns_wait w0 10.215.0.1 || die "host w0 cannot reach the ps host"
  printf '{"ps": ["10.215.0.1:2222"], "worker": ["10.215.0.2:2222", "10.215.0.3:2222", "10.215.0.4:2222"]}\n' > "$work/hosts.json"
  "$run" certs --cluster "$work/hosts.json" --out "$work/hosts.certs" > /dev/null
fi

for m in ${modes//,/ }; do
  plan_for "$m"
  for r in ${runs//,/ }; do
    case $r in
      scale) if [[ -n $links ]]; then echo "== $m: worker.2 joins and leaves (hosts, $links links)"; hosts_run "$m" scale
             else echo "== $m: scale up and down (launcher)"; launcher_run "$m" scale; fi ;;
      kill) if [[ -n $links ]]; then echo "== $m: kill -9 of worker.1 (hosts, $links links, --lease-timeout $lease)"; hosts_run "$m" kill
            else echo "== $m: kill -9 (tasks started by hand, --lease-timeout $lease)"; kill_run "$m"; fi ;;
      ps) echo "== $m: ps re-shards 1 -> 2 -> 1 (launcher)"; launcher_run "$m" ps ;;
      replicas) for v in none replicas; do
                  if [[ $v == none ]]; then echo "== $m: kill -9 of ps.0 without replicas (rollback)"
                  else echo "== $m: kill -9 of ps.0 with --ps-replicas 2"; fi
                  replicas_run "$m" "$v"
                done ;;
    esac
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

read -r -a mode_list <<< "${modes//,/ }"
if [[ $runs == replicas ]]; then
  table=$(python3 "$root/bench/elastic_replicas.py" "$work" "${mode_list[@]}")
  echo
  echo "$table"
  [[ $out == - ]] && exit 0
  busy=
  if awk -v l="${load_before%% *}" -v a="${load_after%% *}" -v n="$(nproc)" \
       'BEGIN { exit !(l > n / 2 || a > n) }'; then
    busy=yes
  fi
  {
    echo
    echo "## A ps lost with kill -9, without and with \`--ps-replicas 2\`"
    echo
    echo "Command: \`$cmdline\` ($(date -u '+%Y-%m-%d %H:%M UTC')); load average (1, 5,"
    echo "15 min) $load_before before, $load_after after, on $(nproc) cores."
    if [[ -n $busy ]]; then
      echo "**The machine was busy with other work (load above half its cores before,"
      echo "or above its cores after): these figures are noisy; rerun on an idle"
      echo "machine before quoting them.**"
    fi
    echo
    echo "The seed CNN as above (\`checkpoint every 100 steps keep 3\`) on 2 ps + 2"
    echo "workers under the launcher with a model dir, \`--threads 1 --log-every 1\`;"
    echo "ps.0 (it holds the global step) killed with kill -9 $phase s after worker.1's"
    echo "step 20, and the launcher restarts it. Without replicas the chief sets every"
    echo "ps back to the last checkpoint; with \`--ps-replicas 2\` it restores ps.0 from"
    echo "its replica on ps.1 (docs/elastic.md). *Stood still*: kill to the first step"
    echo "line after the restore; *lost*: the global step reached before the kill minus"
    echo "the first one after (the steps done again); *back*: kill to the first global"
    echo "step past the one reached before the kill; *img/s*: over the $phase s before the"
    echo "kill (examples of the global steps), and the ratio with replicas to without"
    echo "in the same invocation."
    echo
    echo "$table"
  } >> "$out"
  echo
  echo "appended to ${out#"$root"/}"
  exit 0
fi
table=$(python3 "$root/bench/elastic_table.py" "$work" "$phase" "$lease" "$runs" "${mode_list[@]}")
echo
echo "$table"

[[ $out == - ]] && exit 0
cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
isa=$(grep -o -w -m1 'avx512f' /proc/cpuinfo || grep -o -w -m1 'avx2' /proc/cpuinfo || echo 'no AVX2')
{
  if [[ -n $links ]]; then
    echo "# Elastic jobs: the pauses of a worker joining, leaving and killed, on hosts with $links links"
  else
    echo "# Elastic jobs: the pauses of scaling and of a kill -9, on loopback"
  fi
  echo
  echo "Command: \`$cmdline\` ($(date -u '+%Y-%m-%d %H:%M UTC'))."
  echo "Machine: $(nproc) cores ($cpu, $isa), $(awk '/^MemTotal/ {printf "%.0f GB", $2 / 1048576}' /proc/meminfo) memory;"
  echo "load average (1, 5, 15 min) $load_before before, $load_after after."
  if [[ -n $links ]]; then
    echo "Every task is on a host of its own (a network namespace on a veth link to a"
    echo "bridge, every link shaped with tc tbf to $links both ways: bench/lib.sh's"
    echo "bench_netns_*), started by hand (\`--job/--task\`, certificates from \`dtf-run"
    echo "certs\`, mutual TLS over TCP); all share the machine's cores. *Joined*: worker.2"
    echo "started on its host (\`--workers 3\`) to its first step line; *left*: SIGUSR1 to"
    echo "it to ps.0's \"worker.2 left\"; the rows' \"scale-up\" and \"scale-down\" are"
    echo "these (no launcher scales tasks across hosts: each host's scheduler starts"
    echo "and stops its own)."
  else
    echo "Every task is a process on 127.0.0.1 with free ports; all share the cores."
  fi
  if awk -v l="${load_before%% *}" -v a="${load_after%% *}" -v n="$(nproc)" \
       'BEGIN { exit !(l > n / 2 || a > n) }'; then
    echo "**The machine was busy with other work (load above half its cores before,"
    echo "or above its cores after): these figures are noisy; rerun on an idle"
    echo "machine before quoting them.**"
  fi
  echo
  echo "No peer runs beside it: no peer scales a running ps/worker job (TensorFlow's"
  echo "ParameterServerStrategy has a fixed cluster and its elastic-worker pull request"
  echo "was closed unmerged; torchrun restarts every worker on any change), so these"
  echo "are dtf's own figures, not ratios."
  echo
  echo "Model: the seed CNN (models/mnist_cnn.dtf without its eval source: Adam 1e-4,"
  echo "batch 50 per worker and step, Fashion-MNIST), 1 intra-op thread per task,"
  echo "\`--log-every 1\`; each task's output line is timestamped as it arrives."
  echo "sync: \`update = sync(replicas_to_aggregate = 3)\`: an update averages"
  echo "min(3, live workers) gradients (docs/elastic.md). $phase s per phase."
  echo
  echo "- scale-up / scale-down: \`dtf-run plan --cluster c.json --workers 2\` (1 ps, 3"
  echo "  worker slots), then \`dtf-run ctl --cluster c.json scale worker=3\`, then"
  echo "  \`scale worker=2\`. *Joined*: request to the new worker's first step line (its"
  echo "  first push done: process start, plan and data load, connection, pull, step)."
  echo "  *Left*: request to ps.0's \"worker.2 left\" (it stops counting it)."
  echo "- kill -9: ps.0, worker.0 and worker.1 started one by one (\`--job/--task\`,"
  echo "  certificates from \`dtf-run certs\`,"
  echo "  \`--workers 2 --lease-timeout $lease\`, so nothing restarts the killed one);"
  echo "  \`kill -9\` of worker.1. *Absorbed*: kill to ps.0's \"went silent\"."
  echo "- ps re-shards: \`dtf-run plan --cluster c.json --ps 1 --workers 2 --model-dir"
  echo "  DIR\` (2 ps slots, 3 worker slots), then \`scale ps=2\`, then \`scale ps=1\`: the other worker"
  echo "  stops, the chief saves the step and stops the ps, every task starts again"
  echo "  (docs/elastic.md). *Re-sharded*: request to the launcher's \"ps scaled\" line"
  echo "  (the restarted chief restored the step onto the new ps tasks)."
  echo "- *Pause*: the longest time the job's global step (the highest step any"
  echo "  worker printed) did not move, from the change to the end of its phase,"
  echo "  beside the median interval between its moves in the phase before."
  echo "  Steps/s: global steps per second over the phase before and after (the"
  echo "  first second after a change left out)."
  echo
  echo "$table"
  echo
  echo "Reading: a global step is an update, so in sync mode it carries the examples"
  echo "of every gradient it averages (2 workers: 100, 3: 150, the lone worker after"
  echo "the kill: 50) and in async mode one push's 50. With 3 workers on 2 cores a"
  echo "sync update waits for the slowest of three processes sharing two cores, so"
  echo "sync steps/s fall after the scale-up; after the kill the lone worker's updates"
  echo "come at its own rate. A pause of one or two median intervals is no pause."
} > "$out"
echo
echo "written to ${out#"$root"/}"
