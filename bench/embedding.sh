#!/usr/bin/env bash
# Large embeddings side by side in one invocation: the CTR model of
# models/ctr.dtf (2,000,000 x 32 f32 table in 4 shards, 26 ids per example,
# dense 64 relu, dense 2, Adagrad 0.05, batch 256, synthetic data).
# In one process: dtf with its sparse table update, dtf with the same table
# as a dynamic one (`vocab = dynamic, capacity = 2000000`: rows made in hash
# tables as ids come, the same ids), dtf forced onto the dense
# update (a clip norm too large to clip, which needs the whole gradient: what
# every dtf plan did before sparse updates), PyTorch (sparse nn.Embedding +
# Adagrad) and TensorFlow (tf.compat.v1, partitioned variable,
# embedding_lookup, AdagradOptimizer).
# On 2 ps + 2 workers (127.0.0.1, one thread per task, async): dtf
# (bench/peers/dtf_cluster.py: the table looked up on the ps) with its
# default mutual TLS and with --insecure (plaintext, as TensorFlow's), and
# TensorFlow's tf.compat.v1 ps/worker training (bench/peers/tf_ctr_cluster.py:
# replica_device_setter, the lookups on the ps), each in a network namespace
# of its own (unshare -n, as root) so that the loopback's byte counter gives
# the bytes per global step; peak RSS per task.
# Prints the tables, as ratios to dtf, and writes them with the machine, the
# load and the command to results/embedding.md.
#
#   usage: bench/embedding.sh [options]
#     --build DIR     dtf build directory (default: ./build of this checkout)
#     --warmup N      untimed steps first (default 20)
#     --steps N       timed steps (default 200)
#     --threads N     threads for each framework (default 2)
#     --repeat N      runs of each one-process framework, interleaved; the
#                     table gives their median (default 1; bench/readme.sh
#                     passes 3: a single run of the one-process CTR model
#                     swung from 92,000 to 159,000 examples/s on this VM)
#     --only LIST     comma-separated subset of dtf,dtf-dynamic,dtf-dense,torch,tf,
#                     dtf-cluster,dtf-cluster-plain,tf-cluster (default all)
#     --cluster-steps N  timed steps per worker in the cluster runs (default 200)
#     --out FILE      results file (default bench/results/embedding.md; "-": none)
#
#   environment: DTF_BENCH_VENV, DTF_BENCH_TORCH, DTF_BENCH_TF as in
#   bench/throughput.sh (bench/venv.sh makes the peers' virtualenv).
#
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
warmup=20
steps=200
threads=2
repeat=1
only=dtf,dtf-dynamic,dtf-dense,torch,tf,dtf-cluster,dtf-cluster-plain,tf-cluster
cluster_steps=200
out=$root/bench/results/embedding.md
cmdline="bench/embedding.sh${*:+ $*}"

die() { echo "embedding.sh: $*" >&2; exit 2; }
posint() { [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1 needs a positive integer, got '$2'"; }
while (($#)); do
  case $1 in
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --warmup) [[ ${2-} =~ ^[0-9]+$ ]] || die "--warmup needs a count, got '${2-}'"; warmup=$2; shift 2 ;;
    --steps) posint --steps "${2-}"; steps=$2; shift 2 ;;
    --threads) posint --threads "${2-}"; threads=$2; shift 2 ;;
    --repeat) posint --repeat "${2-}"; repeat=$2; shift 2 ;;
    --only) only=${2:?--only needs a list}; shift 2 ;;
    --cluster-steps) posint --cluster-steps "${2-}"; cluster_steps=$2; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for f in ${only//,/ }; do
  case $f in dtf|dtf-dynamic|dtf-dense|torch|tf|dtf-cluster|dtf-cluster-plain|tf-cluster) ;; *) die "--only: unknown framework '$f'" ;; esac
done
want() { [[ ",$only," == *",$1,"* ]]; }
[[ -x /usr/bin/time ]] || die "/usr/bin/time is missing (apt-get install time)"
for b in dtfc dtf-run; do
  [[ -x $build/bin/$b ]] || die "$build/bin/$b not found (build it, or pass --build DIR)"
done
# shellcheck source=bench/venv.sh
source "$root/bench/venv.sh"
if want torch || want tf || want tf-cluster; then
  bench_venv || exit 2
fi
py=${bench_py:-python3}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/bin/dtfc" "$root/models/ctr.dtf" -o "$work/sparse.plan"
sed 's/^    batch = 256/    clip_gradients = global_norm(1e30)\n    batch = 256/' "$root/models/ctr.dtf" > "$work/dense.dtf"
"$build/bin/dtfc" "$work/dense.dtf" -o "$work/dense.plan"
sed 's/vocab = 2000000, dim = 32, partitions = 4/vocab = dynamic, dim = 32, capacity = 2000000, partitions = 4/' \
  "$root/models/ctr.dtf" > "$work/dynamic.dtf"
grep -q 'vocab = dynamic' "$work/dynamic.dtf" || die "models/ctr.dtf: its embedding call changed; update the dynamic variant"
"$build/bin/dtfc" "$work/dynamic.dtf" -o "$work/dynamic.plan"
"$build/bin/dtfc" "$root/models/ctr.dtf" --emit=train-mlir | grep -q sparse_apply_adagrad ||
  die "models/ctr.dtf does not compile to a sparse update"

# run NAME: one run; appends "NAME examples_per_sec peak_rss_kb" to $work/runs.
run() {
  local fw=$1 o=$work/$1.out rate
  local -a cmd
  case $fw in
    dtf) cmd=("$build/bin/dtf-run" "$work/sparse.plan" --steps $((warmup + steps))
              --log-every "$warmup" --threads "$threads") ;;
    dtf-dynamic) cmd=("$build/bin/dtf-run" "$work/dynamic.plan" --steps $((warmup + steps))
                      --log-every "$warmup" --threads "$threads") ;;
    dtf-dense) cmd=("$build/bin/dtf-run" "$work/dense.plan" --steps $((warmup + steps / 10))
                    --log-every "$warmup" --threads "$threads") ;;
    torch) cmd=("$py" "$root/bench/peers/torch_ctr.py" --warmup "$warmup" --steps "$steps" --threads "$threads") ;;
    tf) cmd=("$py" "$root/bench/peers/tf_ctr.py" --warmup "$warmup" --steps "$steps" --threads "$threads") ;;
  esac
  /usr/bin/time -f '%M' -o "$work/$fw.rss" "${cmd[@]}" > "$o" 2> "$o.err" ||
    { cat "$o" "$o.err" >&2; die "$fw failed: ${cmd[*]}"; }
  if [[ $fw == dtf* ]]; then
    # The rate of the intervals after the warm-up (harmonic mean).
    rate=$(awk -v w="$warmup" '
      /^step [0-9]+\/[0-9]+ / { split($2, s, "/");
        for (k = 3; k < NF; ++k) if ($(k + 1) == "img/s") r = $k;
        if (s[1] > w) { n++; inv += 1 / r } }
      END { if (n) printf "%.1f", n / inv }' "$o")
  else
    rate=$(python3 -c 'import json,sys; print("%.1f" % json.loads(open(sys.argv[1]).read().splitlines()[-1])["examples_per_sec"])' "$o")
  fi
  [[ -n $rate ]] || { cat "$o" >&2; die "$fw: no examples/s in its output"; }
  echo "$fw $rate $(tail -1 "$work/$fw.rss")" >> "$work/runs"
  printf '   %-9s %9.1f examples/s, peak RSS %6.0f MB\n' "$fw" "$rate" "$(($(tail -1 "$work/$fw.rss") / 1024))"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== CTR model (2M x 32 table, 26 ids, batch 256), $threads threads, $warmup warm-up + $steps timed steps (dtf-dense: $((steps / 10))), $repeat run(s) each (load $load_before)"
for ((r = 1; r <= repeat; ++r)); do
  for fw in dtf dtf-dynamic dtf-dense torch tf; do
    want "$fw" && run "$fw"
  done
done

# The cluster runs: each in a network namespace of its own when this runs as
# root (the loopback then counts its bytes only); otherwise bytes are not
# measured and the table says so.
netns=() private=()
if unshare -n true 2>/dev/null; then
  netns=(unshare -n) private=(--private-net)
else
  echo "   (not root: no private network namespace, so bytes per step are not measured)"
fi
cluster_run() {
  local fw=$1 o=$work/$1.json
  local -a cmd
  case $fw in
    dtf-cluster|dtf-cluster-plain)
      cmd=(python3 "$root/bench/peers/dtf_cluster.py" --dtf-run "$build/bin/dtf-run"
           --plan "$work/sparse.plan" --warmup "$warmup" --steps "$cluster_steps" "${private[@]}")
      [[ $fw == dtf-cluster-plain ]] && cmd+=(--insecure) ;;
    tf-cluster) cmd=("$py" "$root/bench/peers/tf_ctr_cluster.py" --warmup "$warmup"
                     --steps "$cluster_steps" "${private[@]}") ;;
  esac
  "${netns[@]}" "${cmd[@]}" > "$o" 2> "$o.err" || { cat "$o" "$o.err" >&2; die "$fw failed: ${cmd[*]}"; }
  python3 -c 'import json,sys; r = json.loads(open(sys.argv[1]).read().splitlines()[-1]); print("   %-11s %9.1f examples/s, %s bytes per global step, peak RSS %s" % (sys.argv[2], r["examples_per_sec"], "not measured" if r["bytes_per_step"] is None else "%.0f" % r["bytes_per_step"], r["peak_rss_mb"]))' "$o" "$fw"
}
if want dtf-cluster || want dtf-cluster-plain || want tf-cluster; then
  echo "== the same model on 2 ps + 2 workers (127.0.0.1, 1 thread per task, async), $warmup warm-up + $cluster_steps timed steps per worker"
  for fw in dtf-cluster dtf-cluster-plain tf-cluster; do
    want "$fw" && cluster_run "$fw"
  done
fi
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

cluster_table=$(python3 - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
runs = {}
for fw in ("dtf-cluster", "dtf-cluster-plain", "tf-cluster"):
    path = os.path.join(work, fw + ".json")
    if os.path.exists(path):
        runs[fw] = json.loads(open(path).read().splitlines()[-1])
if not runs:
    sys.exit(0)
names = {"dtf-cluster": "dtf, table looked up on the ps, mutual TLS (the default)",
         "dtf-cluster-plain": "dtf, the same with --insecure (plaintext)",
         "tf-cluster": "TensorFlow tf.compat.v1 ps/worker (plaintext)"}
print("| 2 ps + 2 workers | examples/s (sum) | bytes per global step | peak RSS MB per task | dtf (TLS / plaintext) examples/s ÷ this |")
print("| --- | ---: | ---: | --- | ---: |")
for fw, r in runs.items():
    b = "not measured" if r["bytes_per_step"] is None else f"{r['bytes_per_step'] / 1e6:.2f} MB"
    tasks = ", ".join(f"{k} {v}" for k, v in sorted(r["peak_rss_mb"].items()))
    ratio = " / ".join("%.2f" % (runs[d]["examples_per_sec"] / r["examples_per_sec"])
                       for d in ("dtf-cluster", "dtf-cluster-plain") if d in runs) or "-"
    print(f"| {names[fw]} | {r['examples_per_sec']:.0f} | {b} | {tasks} | {ratio} |")
PY
)

touch "$work/runs"
table=$(python3 - "$work/runs" <<'PY'
import sys
each = {}
for line in open(sys.argv[1]):
    fw, rate, rss = line.split()
    each.setdefault(fw, []).append((float(rate), int(rss) / 1024.0))
# Per framework: the median rate (the lower middle one of an even count, a
# rate that was measured) and the largest peak RSS of its runs.
runs = {fw: (sorted(r for r, _ in rs)[(len(rs) - 1) // 2], max(m for _, m in rs))
        for fw, rs in each.items()}
names = {"dtf": "dtf (sparse update)", "dtf-dynamic": "dtf, vocab = dynamic (hash tables, rows made as ids come)",
         "dtf-dense": "dtf (dense update)",
         "torch": "PyTorch, sparse nn.Embedding", "tf": "TensorFlow tf.compat.v1"}
print("| framework | examples/s | runs | peak RSS MB | dtf examples/s ÷ this | dtf RSS ÷ this |")
print("| --- | ---: | --- | ---: | ---: | ---: |")
for fw in ("dtf", "dtf-dynamic", "dtf-dense", "torch", "tf"):
    if fw not in runs:
        continue
    r, m = runs[fw]
    if "dtf" in runs:
        ratio, mem = "%.2f" % (runs["dtf"][0] / r), "%.2f" % (runs["dtf"][1] / m)
    else:
        ratio = mem = "-"
    each_run = " / ".join(f"{x:.0f}" for x, _ in each[fw])
    print(f"| {names[fw]} | {r:.0f} | {each_run} | {m:.0f} | {ratio} | {mem} |")
PY
)
[[ -s $work/runs ]] || table=""
[[ -n $table ]] && { echo; echo "$table"; }
[[ -n $cluster_table ]] && { echo; echo "$cluster_table"; }
[[ $out == - ]] && exit 0
{
  echo "# Large embeddings (bench/embedding.sh)"
  echo
  echo "Command: \`$cmdline\`, $(date -u +%Y-%m-%d) on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load average before $load_before, after $load_after."
  echo
  echo "$table"
  echo
  if [[ -n $cluster_table ]]; then
    echo "$cluster_table"
    echo
    echo "Bytes per global step: what the loopback interface of the run's own network namespace carried (TCP/IP headers included) over the timed steps, divided by the global steps in them; peak RSS sampled from /proc every 50 ms (bench/peers/task_watch.py)."
    echo
  fi
  echo "One process: $repeat run(s) of each, interleaved; examples/s is their median (with an even count, the lower middle run), peak RSS the largest of them.${cluster_table:+ The cluster: one run each.} The model is models/ctr.dtf; the peers are bench/peers/torch_ctr.py, tf_ctr.py and tf_ctr_cluster.py; dtf's cluster runs through bench/peers/dtf_cluster.py."
} > "$out"
echo "wrote $out"
