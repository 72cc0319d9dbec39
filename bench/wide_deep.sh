#!/usr/bin/env bash
# Wide & deep side by side in one invocation: models/wide_deep.dtf (FTRL for
# the wide table, Adagrad for the deep part: `optimizer for linear =
# ftrl(...)`) in dtf, and its twins bench/peers/torch_wide_deep.py (PyTorch,
# FTRL written by hand: torch has none) and tf_wide_deep.py (Keras 3 layers,
# a custom train step applying keras.optimizers.Ftrl to the wide table and
# Adagrad to the rest). One process each, batch 128, learnable synthetic data
# (the label a fixed projection of the features), every batch unseen: the
# accuracy and loss of the last 100 steps are on new examples. The rounds are
# interleaved (dtf, torch, tf, dtf, ...) and the medians reported, as ratios
# of dtf's examples/s to each peer's.
#
#   usage: bench/wide_deep.sh [options]
#     --build DIR     dtf build directory (default: ./build of this checkout)
#     --warmup N      untimed steps first (default 100)
#     --steps N       timed steps (default 1900)
#     --threads N     threads for each framework (default 2)
#     --repeat N      rounds (default 3)
#     --omp-passive   run every framework with OMP_WAIT_POLICY=passive (OpenMP
#                     threads sleep between jobs). On a shared machine
#                     PyTorch's default waits made its 2-thread steps
#                     erratic (1.4 to 127 ms per step in one run, against a
#                     steady 1.4 ms passive); dtf and TensorFlow moved less.
#     --out FILE      results file (default bench/results/wide_deep.md; "-": none)
#
#   environment: DTF_BENCH_VENV, DTF_BENCH_TORCH, DTF_BENCH_TF as in
#   bench/throughput.sh (bench/venv.sh makes the peers' virtualenv).
#
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
warmup=100
steps=1900
threads=2
repeat=3
out=$root/bench/results/wide_deep.md
cmdline="bench/wide_deep.sh${*:+ $*}"

die() { echo "wide_deep.sh: $*" >&2; exit 2; }
posint() { [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1 needs a positive integer, got '$2'"; }
while (($#)); do
  case $1 in
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --warmup) posint --warmup "${2-}"; warmup=$2; shift 2 ;;
    --steps) posint --steps "${2-}"; steps=$2; shift 2 ;;
    --threads) posint --threads "${2-}"; threads=$2; shift 2 ;;
    --repeat) posint --repeat "${2-}"; repeat=$2; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    --omp-passive) export OMP_WAIT_POLICY=passive; unset GOMP_SPINCOUNT; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
(((warmup + steps) % 100 == 0 && warmup % 100 == 0)) ||
  die "--warmup and --steps must be multiples of 100 (dtf logs every 100 steps)"
for b in dtfc dtf-run; do
  [[ -x $build/bin/$b ]] || die "$build/bin/$b not found (build it, or pass --build DIR)"
done
# shellcheck source=bench/venv.sh
source "$root/bench/venv.sh"
bench_venv || exit 2
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/bin/dtfc" "$root/models/wide_deep.dtf" -o "$work/wd.plan"
"$build/bin/dtfc" "$root/models/wide_deep.dtf" --emit=train-mlir | grep -q 'sparse_apply_ftrl @"linear/embeddings"' ||
  die "models/wide_deep.dtf does not update its wide table with a sparse FTRL update"

# run FW ROUND: one run; appends "FW examples_per_sec loss accuracy" to $work/runs.
run() {
  local fw=$1 o=$work/$1.$2.out line
  case $fw in
    dtf)
      "$build/bin/dtf-run" "$work/wd.plan" --steps $((warmup + steps)) --log-every 100 \
        --threads "$threads" > "$o" 2>&1 || { cat "$o" >&2; die "dtf-run failed"; }
      # The last progress line: the means of the last 100 steps.
      line="dtf $(bench_dtf_timed_rate "$o" "$warmup") $(awk '/^step [0-9]+\// { l = $4; a = $6 } END { print l, a }' "$o")" ;;
    torch|tf)
      "$bench_py" "$root/bench/peers/${fw}_wide_deep.py" --warmup "$warmup" --steps "$steps" \
        --threads "$threads" > "$o" 2> "$o.err" || { cat "$o" "$o.err" >&2; die "$fw failed"; }
      line=$(python3 -c 'import json,sys; r = json.loads(open(sys.argv[1]).read().splitlines()[-1]); print(sys.argv[2], "%.1f %.4f %.4f" % (r["examples_per_sec"], r["loss_last100"], r["accuracy_last100"]))' "$o" "$fw")
      [[ $fw == torch ]] && sed -n 's/.*"framework": "\([^"]*\)".*/\1/p' "$o" > "$work/torch.version"
      [[ $fw == tf ]] && sed -n 's/.*"framework": "\([^"]*\)".*/\1/p' "$o" > "$work/tf.version" ;;
  esac
  echo "$line" >> "$work/runs"
  read -r _ rate loss acc <<< "$line"
  printf '   %-5s %9.0f examples/s, last 100 steps: loss %s, accuracy %s\n' "$fw" "$rate" "$loss" "$acc"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== wide & deep (480 x 2 FTRL table, 80 x 8 embedding + 72-64-32-2 Adagrad, batch 128), $threads threads, $warmup warm-up + $steps timed steps, $repeat rounds (load $load_before${OMP_WAIT_POLICY:+, OMP_WAIT_POLICY=$OMP_WAIT_POLICY})"
for ((r = 1; r <= repeat; ++r)); do
  for fw in dtf torch tf; do
    run "$fw" "$r"
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

table=$(python3 - "$work/runs" "$(cat "$work/torch.version")" "$(cat "$work/tf.version")" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    fw, rate, loss, acc = line.split()
    runs.setdefault(fw, []).append((float(rate), float(loss), float(acc)))
names = {"dtf": "dtf (sparse FTRL + Adagrad)",
         "torch": sys.argv[2] + " (sparse embeddings, FTRL by hand, Adagrad)",
         "tf": sys.argv[3] + " (custom train step, keras.optimizers.Ftrl + Adagrad)"}
dtf = statistics.median(r[0] for r in runs["dtf"])
print("| framework | examples/s (median) | runs | dtf ÷ this | loss, last 100 steps | accuracy, last 100 steps |")
print("| --- | ---: | --- | ---: | ---: | ---: |")
for fw in ("dtf", "torch", "tf"):
    rs = runs[fw]
    rate = statistics.median(r[0] for r in rs)
    print(f"| {names[fw]} | {rate:.0f} | {', '.join('%.0f' % r[0] for r in rs)} | {dtf / rate:.2f} | "
          f"{statistics.median(r[1] for r in rs):.4f} | {statistics.median(r[2] for r in rs):.4f} |")
PY
)
echo
echo "$table"
[[ $out == - ]] && exit 0
{
  echo "# Wide & deep: FTRL and Adagrad in one model (bench/wide_deep.sh)"
  echo
  echo "Command: \`$cmdline\`, $(date -u +%Y-%m-%d) on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores ($(grep -o -m1 'avx512[a-z_0-9]*' /proc/cpuinfo | sort -u | head -3 | tr '\n' ' ' | sed 's/ $//' || true)); load average before $load_before, after $load_after."
  echo
  echo "$table"
  echo
  if [[ -n ${OMP_WAIT_POLICY-} ]]; then
    echo "OpenMP waits, for every framework: OMP_WAIT_POLICY=$OMP_WAIT_POLICY."
    echo
  fi
  echo "$repeat rounds, interleaved; the medians. The model is models/wide_deep.dtf; the peers bench/peers/torch_wide_deep.py and tf_wide_deep.py (bench/peers/wide_deep_common.py: their data and ids). Each run draws its own learnable data of the same kind (8 features uniform in [-1, 1), the label the argmax of a fixed random projection; dtf's synthetic source, the peers' numpy), every batch new, so the loss and accuracy of the last 100 steps are on unseen examples; they are comparable in kind, not example for example. The machine is shared: the runs of one framework show the noise."
} > "$out"
echo "wrote $out"
