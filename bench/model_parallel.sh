#!/usr/bin/env bash
# Model parallelism across tasks on one machine: the MLP of
# models/model_parallel.dtf (784-256 on worker task 0 | dropout, 128, 10 and
# the loss on worker task 1; variables on the ps) trained by dtf in one
# process, by dtf on 1 ps + 2 workers as one model-parallel replica, by dtf on
# 1 ps + 2 workers as two data-parallel replicas (the same MLP without its
# `on` blocks, async), and by TensorFlow's own tf.compat.v1 model parallelism
# (peers/tf_model_parallel.py), beside the bytes that cross between the stages
# and the machine's loopback TCP bandwidth. Prints a table and writes it to
# results/model_parallel.md.
#
#   usage: bench/model_parallel.sh [options]
#     --build DIR     dtf build directory with bin/dtfc and bin/dtf-run
#                     (default: ./build of this checkout)
#     --warmup N      untimed steps per replica (default 100)
#     --steps N       timed steps per replica (default 2000)
#     --runs N        runs of each, interleaved; the table gives the median
#                     (default 3)
#     --only LIST     comma-separated subset of bw,one,mp,dp,tf (default all)
#     --out FILE      results file (default bench/results/model_parallel.md;
#                     "-" writes none)
#
#   environment: DTF_BENCH_VENV, DTF_BENCH_TORCH, DTF_BENCH_TF (see
#   bench/venv.sh), DTF_BENCH_DATA (default /usr/share/datasets/fashion-mnist)
#
# Every process gets 1 intra-op thread (and 1 inter-op thread). images/s of a
# model-parallel run is its one replica's (worker 0's, stage 0's) rate over
# its timed steps; of the data-parallel run, the sum of both workers' final
# lines (their warm-up included). Peak RSS is summed over a run's processes.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
warmup=100
steps=2000
runs=3
only=bw,one,mp,dp,tf
out=$root/bench/results/model_parallel.md
cmdline="bench/model_parallel.sh${*:+ $*}"

die() { echo "model_parallel.sh: $*" >&2; exit 2; }
while (($#)); do
  case $1 in
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --warmup) [[ ${2-} =~ ^[0-9]+$ ]] || die "--warmup needs a count, got '${2-}'"; warmup=$2; shift 2 ;;
    --steps) [[ ${2-} =~ ^[1-9][0-9]*$ ]] || die "--steps needs a positive count, got '${2-}'"; steps=$2; shift 2 ;;
    --runs) [[ ${2-} =~ ^[1-9][0-9]*$ ]] || die "--runs needs a positive count, got '${2-}'"; runs=$2; shift 2 ;;
    --only) only=${2:?--only needs a list}; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for f in ${only//,/ }; do
  case $f in bw|one|mp|dp|tf) ;; *) die "--only: unknown part '$f' (bw, one, mp, dp, tf)" ;; esac
done
want() { [[ ",$only," == *",$1,"* ]]; }
data=${DTF_BENCH_DATA:-/usr/share/datasets/fashion-mnist}
[[ -e $data/train-images-idx3-ubyte.gz || -e $data/train-images-idx3-ubyte ]] ||
  die "$data: no Fashion-MNIST train-images-idx3-ubyte[.gz] (set DTF_BENCH_DATA)"
if want one || want mp || want dp; then
  [[ -x $build/bin/dtfc && -x $build/bin/dtf-run ]] ||
    die "$build/bin/dtfc or dtf-run is not built (--build DIR)"
fi

# shellcheck source=bench/venv.sh
source "$root/bench/venv.sh"
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
if want tf; then
  bench_venv || exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
batch=100
every=$(bench_gcd "$warmup" "$steps")
notes=()

# The bytes that cross between the stages each step, from the model (f32 and
# i32 are 4 bytes). Forward: hidden1's activations [B, 256] and the labels
# [B] (the input is fed on stage 0; the loss on stage 1 needs them). Backward:
# the activations' gradient [B, 256]. Both runtimes also move, from stage 1
# to stage 0, the gradients of the variables stage 1 reads (hidden2 256x128 +
# 128, softmax_linear 128x10 + 10), because the clipping by global norm runs
# on stage 0, and the logits [B, 10] and the loss for the metrics there.
act_bytes=$((batch * 256 * 4 * 2 + batch * 4))
all_bytes=$((act_bytes + (256 * 128 + 128 + 128 * 10 + 10) * 4 + batch * 10 * 4 + 4))

# The model as it is (without its eval source, which would evaluate the test
# set every 1000 steps), and without its `on` blocks (each becomes a graph
# block): the same MLP, data parallel.
if want one || want mp || want dp; then
  grep -v '^[[:space:]]*eval[[:space:]]*=' "$root/models/model_parallel.dtf" |
    sed "s#idx(\"/usr/share/datasets/fashion-mnist\"#idx(\"$data\"#" > "$work/mp.dtf"
  sed -E 's#^([[:space:]]*)on "/job:worker/task:[0-9]+" \{#\1graph {#' "$work/mp.dtf" > "$work/dp.dtf"
  grep -q 'on "' "$work/dp.dtf" && die "models/model_parallel.dtf: an on block the script does not know how to drop"
  "$build/bin/dtfc" "$work/mp.dtf" -o "$work/mp.plan"
  "$build/bin/dtfc" "$work/dp.dtf" -o "$work/dp.plan"
  # Check the byte count above against the compiler's split: one transfer
  # (a blue dashed edge of the dot graph) per tensor that crosses.
  transfers=$("$build/bin/dtfc" "$work/mp.dtf" --emit=dot -o - | grep -c 'color = blue' || true)
  notes+=("- dtf's split (\`dtfc --emit=dot\`): $transfers tensors cross between the stages each step ($(
    "$build/bin/dtfc" "$work/mp.dtf" --emit=dot -o - | sed -n 's/.*color = blue, label = "\([^"]*\)".*/\1/p' | sort -V | tr '\n' ' ' | sed 's/ $//'))")
fi

# Loopback TCP bandwidth: what any runtime here can move between its tasks.
bw="not measured"
if want bw; then
  echo "== loopback TCP bandwidth (256 MB, best of 3)"
  bw=$(bench_loopback_bw)
  echo "   $bw"
fi

# run PART I: one run; appends "PART timed_rate incl_rate peak_rss_kb" to
# $work/runs ("-" where a figure does not exist) and keeps its output in
# $work/PART.I.out.
run() {
  local part=$1 i=$2 o=$work/$1.$2.out rate incl rss t
  case $part in
    one)
      /usr/bin/time -f '%M' -o "$o.rss" "$build/bin/dtf-run" "$work/mp.plan" \
        --steps $((warmup + steps)) --log-every "$every" --threads 1 > "$o" 2>&1 ||
        { tail -5 "$o" >&2; return 1; }
      rate=$(bench_dtf_timed_rate "$o" "$warmup")
      incl=$(sed -n 's/^final: .*examples_per_sec=\([0-9.]*\).*/\1/p' "$o")
      rss=$(tail -1 "$o.rss") ;;
    mp|dp)
      local workers=2 plan=$work/$part.plan
      bench_cluster_json 1 "$workers" > "$work/cluster.json"
      if [[ $part == mp ]]; then
        # One replica: the global step is the replica's step.
        bench_dtf_cluster "$o" "$build/bin/dtf-run" "$plan" --cluster "$work/cluster.json" \
          --steps $((warmup + steps)) --log-every "$every" --threads 1 ||
          { grep -v '^\[launcher\]' "$o" | tail -5 >&2; return 1; }
        rate=$(bench_dtf_timed_rate "$o" "$warmup" worker.0)
        incl=$(sed -n 's/^worker\.0 *| final: .*examples_per_sec=\([0-9.]*\).*/\1/p' "$o")
      else
        # Two replicas: the global step counts both workers' steps.
        bench_dtf_cluster "$o" "$build/bin/dtf-run" "$plan" --cluster "$work/cluster.json" \
          --steps $(((warmup + steps) * workers)) --log-every $((steps * workers)) --threads 1 ||
          { grep -v '^\[launcher\]' "$o" | tail -5 >&2; return 1; }
        incl=$(sed -n 's/^worker\.[0-9]* *| final: .*examples_per_sec=\([0-9.]*\).*/\1/p' "$o" |
               awk '{ s += $1; n++ } END { if (n == 2) printf "%.1f", s }')
        rate=$incl
      fi
      rss=0
      for t in "${!bench_hwm[@]}"; do rss=$((rss + bench_hwm[$t])); done
      per=""
      for t in $(printf '%s\n' "${!bench_hwm[@]}" | sort); do per+="${per:+, }$t $((bench_hwm[$t] / 1024))"; done
      echo "$per" > "$o.per" ;;
    tf)
      "$bench_py" "$root/bench/peers/tf_model_parallel.py" --warmup "$warmup" --steps "$steps" \
        --batch "$batch" --threads 1 --inter-threads 1 --data "$data" > "$o" 2> "$o.err" ||
        { grep '^tf_model_parallel:' "$o.err" | head -1 >&2; tail -5 "$o.err" >&2; return 1; }
      read -r rate rss < <(python3 -c '
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print("%.1f %d" % (r["images_per_sec"], r["peak_rss_mb_total"] * 1024))' "$o")
      incl=- ;;
  esac
  [[ -n $rate && -n $incl ]] || { cat "$o" >&2; echo "no images/s in its output" >&2; return 1; }
  echo "$part $rate $incl $rss" >> "$work/runs"
  printf '   %-3s run %d: %8.1f images/s, peak RSS %5d MB (all processes)\n' "$part" "$i" "$rate" "$((rss / 1024))"
}

parts=()
for p in one mp dp tf; do want "$p" && parts+=("$p"); done
failed=0
: > "$work/runs"
if ((${#parts[@]})); then
  echo "== MLP 784-256-128-10, batch $batch, $warmup warm-up + $steps timed steps, 1 thread per process, $runs run(s) of each (load $load_before)"
  for ((i = 1; i <= runs; ++i)); do
    for p in "${parts[@]}"; do
      if ! run "$p" "$i"; then
        echo "   $p run $i failed"
        notes+=("- $p run $i failed (see above)")
        failed=1
      fi
    done
  done
fi

# Where a model-parallel step's time goes: one more run of the model-parallel
# replica with --profile (its op timings, stage 0's view; not in the table).
profile=""
if want mp; then
  echo "== dtf, 1 ps + 2 workers, model parallel, once more with --profile"
  bench_cluster_json 1 2 > "$work/cluster.json"
  if bench_dtf_cluster "$work/profile.out" "$build/bin/dtf-run" "$work/mp.plan" --cluster "$work/cluster.json" \
       --steps $((warmup + steps)) --log-every $((warmup + steps)) --threads 1 --profile; then
    profile=$(sed -n 's/^worker\.0 *| //p' "$work/profile.out" |
              sed -n '/^profile:/,/slowest ops:/p' | sed '$d'
              sed -n 's/^worker\.0 *| \(final: .*\)/\1/p' "$work/profile.out")
    echo "$profile" | sed 's/^/   /'
  else
    profile="(the profiled run failed: $(grep -v '^\[launcher\]' "$work/profile.out" | tail -1))"
  fi
fi
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# The table: the median of each part's runs.
table=$(python3 - "$work/runs" "$batch" "$act_bytes" "$all_bytes" "$runs" <<'PYEOF'
import statistics, sys
runs_file, batch, act, allb, nruns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rows = {}
for line in open(runs_file):
    part, rate, incl, rss = line.split()
    rows.setdefault(part, []).append((float(rate), None if incl == "-" else float(incl), int(rss)))
label = {
    "one": ("dtf, one process (no cluster)", "1"),
    "mp": ("dtf, model parallel: 1 replica over 2 workers", "1 ps + 2 workers"),
    "dp": ("dtf, data parallel (no `on` blocks), async, 2 replicas", "1 ps + 2 workers"),
    "tf": ("TensorFlow tf.compat.v1 model parallel: 1 replica over 2 workers", "1 ps + 2 workers"),
}
print("| run | processes | images/s (median) | runs | ms per step | images/s incl. warm-up (dtf final lines) | stage traffic MB/s (activations + labels / all) | peak RSS MB (all processes, max) |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for part in ("one", "mp", "dp", "tf"):
    if part not in rows:
        continue
    r = rows[part]
    rate = statistics.median(x[0] for x in r)
    incl = [x[1] for x in r if x[1] is not None]
    # dp: two replicas, each a step of one batch: a replica's step time.
    ms = 1000.0 * batch / rate * (2 if part == "dp" else 1)
    traffic = ""
    if part in ("mp", "tf"):
        steps_per_s = rate / batch
        traffic = "%.1f / %.1f" % (act * steps_per_s / 1e6, allb * steps_per_s / 1e6)
    print("| %s | %s | %.0f%s | %d of %d | %.2f | %s | %s | %.0f |" % (
        label[part][0], label[part][1], rate, " (incl. warm-up)" if part == "dp" else "",
        len(r), nruns, ms, "%.0f" % statistics.median(incl) if incl else "",
        traffic, max(x[2] for x in r) / 1024.0))
PYEOF
)
# Per-run figures and per-task RSS of the last run, for the notes.
for p in "${parts[@]}"; do
  notes+=("- $p: images/s of each run $(awk -v p="$p" '$1 == p { printf "%s%s", s, $2; s = " / " }' "$work/runs")$(
    if [[ -f $work/$p.$runs.out.per ]]; then echo "; peak RSS per task (MB, last run) $(cat "$work/$p.$runs.out.per")"; fi)")
done
if want tf && [[ -s $work/tf.$runs.out ]]; then
  notes+=("$(python3 -c '
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print("- tf (last run): %s; peak RSS per task (MB) %s; graph partitions by task %s; %d _Send ops from one worker to the other; loss over the last 50 timed steps %s, accuracy %s" % (
    r["framework"], r["peak_rss_mb"], [p[0].replace("/replica:0", "") for p in r["partitions"]],
    r["worker_to_worker_sends"], r["loss_last_50"], r["accuracy_last_50"]))' "$work/tf.$runs.out")")
fi
for p in one mp dp; do
  if [[ -f $work/$p.$runs.out ]]; then
    notes+=("- $p (last run), final line(s): $(grep 'final:' "$work/$p.$runs.out" | sed 's/.*final: //' | tr '\n' ';')")
  fi
done

traffic_text="Bytes crossing between the stages per step (batch $batch, 4-byte floats and labels):
hidden1's activations forward and their gradient back, $((batch * 256 * 4)) B each, plus the
labels, $((batch * 4)) B: $act_bytes B. Both runtimes also send stage 1's variables' gradients
to stage 0 (clipping by global norm runs there; $(((256 * 128 + 128 + 128 * 10 + 10) * 4)) B) and the logits and the
loss for the metrics ($((batch * 10 * 4 + 4)) B): $all_bytes B in all. MB/s below is that times the
replica's steps per second."

echo
echo "loopback TCP: $bw"
echo "$traffic_text"
echo "$table"
printf '%s\n' "${notes[@]}"

[[ $out == - ]] && exit $failed
cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
{
  echo "# Model parallelism across tasks on one machine: dtf and TensorFlow"
  echo
  echo "Command: \`$cmdline\` ($(date -u '+%Y-%m-%d %H:%M UTC'))."
  echo "Machine: $(nproc) cores ($cpu), $(awk '/^MemTotal/ {printf "%.0f GB", $2 / 1048576}' /proc/meminfo) memory;"
  echo "load average (1, 5, 15 min) $load_before before, $load_after after."
  echo "Every task is a process on 127.0.0.1 with free ports; all share the cores."
  if awk -v l="${load_before%% *}" -v n="$(nproc)" 'BEGIN { exit !(l > n / 2) }'; then
    echo "**The machine was busy with other work (load above half its cores): these"
    echo "figures are noisy; rerun on an idle machine before quoting them.**"
  fi
  echo
  echo "Model: models/model_parallel.dtf, an MLP 784-256-relu | dropout 0.2, 128-relu,"
  echo "10, sparse softmax cross-entropy (235,146 parameters); momentum 0.9, learning"
  echo "rate 0.05, gradients clipped by global norm 5; batch $batch; Fashion-MNIST"
  echo "training set. Layer 1 runs on /job:worker/task:0, the rest on task 1;"
  echo "variables on the ps. $warmup warm-up + $steps timed steps per replica;"
  echo "median of $runs interleaved runs. Every process has 1 intra-op and 1 inter-op thread."
  echo
  echo "- one: \`dtf-run plan --steps $((warmup + steps)) --log-every $every --threads 1\` (the"
  echo "  same plan; with no cluster every stage runs in the one process)."
  echo "- mp: \`dtf-run plan --cluster cluster.json --threads 1\`, 1 ps + 2 workers: one"
  echo "  replica whose stages are worker 0 and worker 1; images/s is worker 0's"
  echo "  over the logging intervals after the warm-up."
  echo "- dp: the same model with each \`on\` block turned into a \`graph\` block,"
  echo "  1 ps + 2 workers, async: two replicas; images/s is the sum of both"
  echo "  workers' final lines, which include the warm-up."
  echo "- tf: bench/peers/tf_model_parallel.py, TensorFlow's tf.compat.v1"
  echo "  between-graph client on worker 0 with \`tf.device\` per stage, a"
  echo "  \`tf.distribute.Server\` per task, worker 1 serving only; worker 0's timed"
  echo "  steps. Peak RSS of every process from wait4; dtf's from VmHWM (sampled)"
  echo "  or /usr/bin/time."
  echo
  echo "Loopback TCP bandwidth (one connection, Python sockets, 256 MB): $bw."
  echo
  echo "$traffic_text"
  echo
  echo "$table"
  echo
  printf '%s\n' "${notes[@]}"
  if [[ -n $profile ]]; then
    echo
    echo "Where a model-parallel step goes, from one more mp run with \`--profile\`"
    echo "(stage 0's ops; a recv's time is the wait for stage 1, a send's is the"
    echo "Transfer call; the rest of a step, outside the ops, is the pulls, the"
    echo "BeginStep call to stage 1 and the push to the ps):"
    echo
    echo '```'
    echo "$profile"
    echo '```'
  fi
} > "$out"
echo
echo "written to ${out#"$root"/}"
exit $failed
