#!/usr/bin/env bash
# Where a ps/worker cluster's time goes: the seed CNN (models/mnist_cnn.dtf)
# on 1 ps + 2 workers on this host, as bench/distributed.sh runs it (1
# intra-op thread per worker), with mutual TLS over TCP by default; dtf-run
# --profile times the worker's step program (its compute), and `perf record`
# samples worker.0 and ps.0 for a while mid-run; each task's samples are put
# in categories (compute, TLS, copies, gRPC and protobuf, the kernel's
# socket copies, the ps's checks and update, malloc) by library and symbol.
# No peer: this is a breakdown of dtf's own time, not a comparison.
#
#   usage: bench/cluster_profile.sh [options] [-- DTF-RUN-FLAGS...]
#     --build DIR     dtf build directory (default: ./build of this checkout)
#     --steps N       global steps of the job (default 400)
#     --seconds S     how long perf samples each task (default 15)
#     DTF-RUN-FLAGS   more flags for dtf-run (default: --same-host tcp;
#                     e.g. -- --same-host tcp --prefetch-pull)
#
#   Needs perf (linux-perf) allowed to sample the tasks (root, or
#   kernel.perf_event_paranoid <= 1).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
steps=400
seconds=15
die() { echo "cluster_profile.sh: $*" >&2; exit 2; }
while (($#)); do
  case $1 in
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --steps) [[ ${2-} =~ ^[1-9][0-9]*$ ]] || die "--steps needs a positive count, got '${2-}'"; steps=$2; shift 2 ;;
    --seconds) [[ ${2-} =~ ^[1-9][0-9]*$ ]] || die "--seconds needs a positive count, got '${2-}'"; seconds=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
flags=("$@")
((${#flags[@]})) || flags=(--same-host tcp)
command -v perf > /dev/null || die "no perf (apt-get install linux-perf)"
[[ -x $build/bin/dtfc && -x $build/bin/dtf-run ]] || die "$build/bin has no dtfc and dtf-run (--build DIR)"
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
grep -v '^[[:space:]]*eval[[:space:]]*=' "$root/models/mnist_cnn.dtf" > "$work/cnn.dtf"
"$build/bin/dtfc" "$work/cnn.dtf" -o "$work/cnn.plan"
bench_cluster_json 1 2 > "$work/cluster.json"
echo "== dtf-run cnn.plan, 1 ps + 2 workers, $steps steps, ${flags[*]} --profile (load $(cut -d' ' -f1-3 /proc/loadavg))"
"$build/bin/dtf-run" "$work/cnn.plan" --cluster "$work/cluster.json" --steps "$steps" \
  --log-every "$steps" --threads 1 --profile "${flags[@]}" > "$work/run.out" 2>&1 &
launcher=$!
pid() { sed -n "s/^\[launcher\] $1 started (pid \([0-9]*\)).*/\1/p" "$work/run.out"; }
for _ in $(seq 100); do [[ -n $(pid worker.0) && -n $(pid ps.0) ]] && break; sleep 0.1; done
sleep 3 # past the start-up and the first steps
for task in worker.0 ps.0; do
  perf record -F 999 -p "$(pid $task)" -o "$work/$task.perf" -- sleep "$seconds" > /dev/null 2>&1 &
done
wait "$launcher" || { tail -20 "$work/run.out"; die "the run failed"; }
wait
grep -E 'profile: train_step|final:|updates applied|--prefetch-pull:' "$work/run.out"
for task in worker.0 ps.0; do
  perf report -i "$work/$task.perf" --stdio --no-children --sort dso,sym -n 2>/dev/null |
    python3 -c '
import collections, re, sys
def category(dso, sym):
    if "JIT" in dso or "dtf-plan-kernels" in dso or "dnnl" in dso or "openblas" in dso:
        return "compute (oneDNN JIT, generated kernels)"
    if dso == "dtf-run":
        if "dtf::cpu" in sym or "RangeFn" in sym or "ThreadPool" in sym or "exec::" in sym:
            return "compute (dtf kernels)"
        if "PsUpdate" in sym or "SyncAggregator" in sym:
            return "ps: checks of a push, the update"
        return "dtf-run, other"
    if "libcrypto" in dso or "libssl" in dso:
        return "TLS (OpenSSL)"
    if any(k in dso for k in ("grpc", "gpr", "protobuf", "absl", "upb", "re2", "address_sorting")):
        return "gRPC, protobuf"
    if "memmove" in sym or "memcpy" in sym or "memset" in sym:
        return "memcpy (copies into and out of messages)"
    if "malloc" in sym or "free" in sym or "unlink_chunk" in sym or "_int_" in sym:
        return "malloc, free"
    if "kernel" in dso:
        return "kernel: socket copies" if "copy" in sym and "iter" in sym else "kernel: network stack, scheduling"
    return "other"
counts, total = collections.Counter(), 0
for line in sys.stdin:
    m = re.match(r"\s*[\d.]+%\s+(\d+)\s+(\S.*?)\s+\[.\]\s+(.*)$", line)
    if m:
        counts[category(m.group(2).strip(), m.group(3))] += int(m.group(1))
        total += int(m.group(1))
print("%s: %d samples in %s s (%.0f%% of one core)" % (sys.argv[1], total, sys.argv[2], 100.0 * total / (999 * int(sys.argv[2]))))
for k, v in counts.most_common():
    print("  %-44s %5.1f%%" % (k, 100.0 * v / max(total, 1)))
' "$task" "$seconds"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
