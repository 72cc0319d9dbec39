#!/usr/bin/env bash
# Large embeddings in one process, side by side in one invocation: the CTR
# model of models/ctr.dtf (2,000,000 x 32 f32 table in 4 shards, 26 ids per
# example, dense 64 relu, dense 2, Adagrad 0.05, batch 256, synthetic data)
# in dtf with its sparse table update, in dtf forced onto the dense update
# (a clip norm too large to clip, which needs the whole gradient: what every
# dtf plan did before sparse updates), in PyTorch (sparse nn.Embedding +
# Adagrad) and in TensorFlow (tf.compat.v1, partitioned variable,
# embedding_lookup, AdagradOptimizer). Prints a table of examples/s and peak
# RSS, as ratios to dtf, and writes it with the machine, the load and the
# command to results/embedding.md.
#
#   usage: bench/embedding.sh [options]
#     --build DIR     dtf build directory (default: ./build of this checkout)
#     --warmup N      untimed steps first (default 20)
#     --steps N       timed steps (default 200)
#     --threads N     threads for each framework (default 2)
#     --only LIST     comma-separated subset of dtf,dtf-dense,torch,tf
#                     (default all)
#     --out FILE      results file (default bench/results/embedding.md; "-": none)
#
#   environment: DTF_BENCH_VENV, DTF_BENCH_TORCH, DTF_BENCH_TF as in
#   bench/throughput.sh (bench/venv.sh makes the peers' virtualenv).
#
# Not measured here yet: the ps/worker cluster (issue 15: its gradient
# still travels dense, so a 2 ps + 2 worker run moves the whole table).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
warmup=20
steps=200
threads=2
only=dtf,dtf-dense,torch,tf
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
    --only) only=${2:?--only needs a list}; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for f in ${only//,/ }; do
  case $f in dtf|dtf-dense|torch|tf) ;; *) die "--only: unknown framework '$f'" ;; esac
done
want() { [[ ",$only," == *",$1,"* ]]; }
[[ -x /usr/bin/time ]] || die "/usr/bin/time is missing (apt-get install time)"
for b in dtfc dtf-run; do
  [[ -x $build/bin/$b ]] || die "$build/bin/$b not found (build it, or pass --build DIR)"
done
# shellcheck source=bench/venv.sh
source "$root/bench/venv.sh"
if want torch || want tf; then
  bench_venv || exit 2
fi
py=${bench_py:-python3}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/bin/dtfc" "$root/models/ctr.dtf" -o "$work/sparse.plan"
sed 's/^    batch = 256/    clip_gradients = global_norm(1e30)\n    batch = 256/' "$root/models/ctr.dtf" > "$work/dense.dtf"
"$build/bin/dtfc" "$work/dense.dtf" -o "$work/dense.plan"
"$build/bin/dtfc" "$root/models/ctr.dtf" --emit=train-mlir | grep -q sparse_apply_adagrad ||
  die "models/ctr.dtf does not compile to a sparse update"

# run NAME: one run; appends "NAME examples_per_sec peak_rss_kb" to $work/runs.
run() {
  local fw=$1 o=$work/$1.out rate
  local -a cmd
  case $fw in
    dtf) cmd=("$build/bin/dtf-run" "$work/sparse.plan" --steps $((warmup + steps))
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
echo "== CTR model (2M x 32 table, 26 ids, batch 256), $threads threads, $warmup warm-up + $steps timed steps (dtf-dense: $((steps / 10))) (load $load_before)"
for fw in dtf dtf-dense torch tf; do
  want "$fw" && run "$fw"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

table=$(python3 - "$work/runs" <<'PY'
import sys
runs = {}
for line in open(sys.argv[1]):
    fw, rate, rss = line.split()
    runs[fw] = (float(rate), int(rss) / 1024.0)
names = {"dtf": "dtf (sparse update)", "dtf-dense": "dtf (dense update)",
         "torch": "PyTorch, sparse nn.Embedding", "tf": "TensorFlow tf.compat.v1"}
print("| framework | examples/s | peak RSS MB | dtf examples/s ÷ this | dtf RSS ÷ this |")
print("| --- | ---: | ---: | ---: | ---: |")
for fw in ("dtf", "dtf-dense", "torch", "tf"):
    if fw not in runs:
        continue
    r, m = runs[fw]
    if "dtf" in runs:
        ratio, mem = "%.2f" % (runs["dtf"][0] / r), "%.2f" % (runs["dtf"][1] / m)
    else:
        ratio = mem = "-"
    print(f"| {names[fw]} | {r:.0f} | {m:.0f} | {ratio} | {mem} |")
PY
)
echo
echo "$table"
[[ $out == - ]] && exit 0
{
  echo "# Large embeddings in one process (bench/embedding.sh)"
  echo
  echo "Command: \`$cmdline\`, $(date -u +%Y-%m-%d) on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load average before $load_before, after $load_after."
  echo
  echo "$table"
  echo
  echo "One run each. The model is models/ctr.dtf; the peers are bench/peers/torch_ctr.py and tf_ctr.py."
} > "$out"
echo "wrote $out"
