#!/usr/bin/env bash
# Generated kernels (issue 14) in one invocation: the seed CNN beside PyTorch
# and TensorFlow (bench/throughput.sh), and the other models of models/
# (resnet: batch norm, transformer, lstm, gru, autoencoder, and mlp run in one
# process) beside their PyTorch twins (bench/peers/torch_layers.py), dtf each
# time with its generated kernels and with --fusion=off; the kernel launches
# per training step of each plan (the ops dtf-run's executor runs per step:
# dtf.fused runs plus library calls, from dtf-run --profile); and the SGEMM
# bound measured in the same run (bench/peers/sgemm_bound.cpp: oneDNN's
# dnnl_sgemm, the library dtf-run calls, compiled here with c++ -ldnnl).
# Writes results/kernels.md.
#
#   usage: bench/fusion.sh [options]
#     --build DIR     dtf build directory (default: ./build of this checkout)
#     --steps N       timed steps of each run (default 300)
#     --warmup N      untimed steps before them (default 50)
#     --threads N     threads for each framework (default 2)
#     --repeat N      runs of each framework and model, interleaved; tables give
#                     the median (default 1)
#     --models LIST   comma-separated subset of resnet,transformer,lstm,gru,autoencoder,
#                     mlp
#     --no-cnn        leave out the seed CNN (bench/throughput.sh)
#     --out FILE      results file (default bench/results/kernels.md; "-": none)
#
#   environment: DTF_BENCH_VENV, DTF_BENCH_TORCH, DTF_BENCH_TF, DTF_BENCH_DATA
#   as in bench/throughput.sh. Every framework runs with GOMP_SPINCOUNT=10000:
#   OpenMP threads spin that many rounds after a job, then sleep. It is
#   dtf-run's own choice when training alone; PyTorch's default spin is far
#   longer, which on a shared machine cost it a factor of 3 to 30
#   (bench/README.md), and passive waits cost dtf its short spin.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
steps=300
warmup=50
threads=2
repeat=1
models=resnet,transformer,lstm,gru,autoencoder,mlp
cnn=1
out=$root/bench/results/kernels.md
cmdline="bench/fusion.sh${*:+ $*}"

die() { echo "fusion.sh: $*" >&2; exit 2; }
posint() { [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1 needs a positive integer, got '$2'"; }
while (($#)); do
  case $1 in
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --steps) posint --steps "${2-}"; steps=$2; shift 2 ;;
    --warmup) posint --warmup "${2-}"; warmup=$2; shift 2 ;;
    --threads) posint --threads "${2-}"; threads=$2; shift 2 ;;
    --repeat) posint --repeat "${2-}"; repeat=$2; shift 2 ;;
    --models) models=${2:?--models needs a list}; shift 2 ;;
    --no-cnn) cnn=0; shift ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for m in ${models//,/ }; do
  case $m in resnet|transformer|lstm|gru|autoencoder|mlp) ;; *) die "--models: unknown model '$m'" ;; esac
done
for b in dtfc dtf-run; do
  [[ -x $build/bin/$b ]] || die "$build/bin/$b not found (build it, or pass --build DIR)"
done
[[ -e /usr/include/oneapi/dnnl/dnnl.h ]] || die "no oneDNN headers (apt-get install libdnnl-dev)"
export GOMP_SPINCOUNT=10000
unset OMP_WAIT_POLICY
# shellcheck source=bench/venv.sh
source "$root/bench/venv.sh"
bench_venv || exit 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcd() { local a=$1 b=$2 t; while ((b)); do t=$((a % b)); a=$b; b=$t; done; echo "$a"; }
every=$(gcd "$warmup" "$steps")

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== generated kernels: $warmup warm-up + $steps timed steps, $threads threads (load $load_before)"

# The bound: oneDNN's SGEMM peak on these threads, and for the seed CNN
# (about 73 MFLOP of training work per image, issue 5) images/s at that peak.
c++ -O2 -std=c++17 "$root/bench/peers/sgemm_bound.cpp" -ldnnl -o "$work/sgemm_bound"
gflops=$(OMP_NUM_THREADS=$threads "$work/sgemm_bound" 1024 10)
cnn_bound=$(python3 -c "print('%.0f' % ($gflops * 1e9 / 73e6))")
echo "   oneDNN SGEMM 1024^3, $threads threads: $gflops GFLOP/s (seed CNN bound $cnn_bound images/s)"

# ops_per_step PLAN: the ops the train step runs (dtf-run --profile).
ops_per_step() {
  "$build/bin/dtf-run" "$1" --steps 20 --profile --threads "$threads" 2>&1 |
    awk '/^profile: train_step,/ { for (k = 1; k < NF; ++k) if ($(k + 1) == "ops") print $k }'
}
# dtf_rate LOG: images/s over the intervals after the warm-up.
dtf_rate() {
  awk -v w="$warmup" '
    /^step [0-9]+\/[0-9]+ / { split($2, s, "/");
      for (k = 3; k < NF; ++k) if ($(k + 1) == "img/s") r = $k;
      if (s[1] > w) { n++; inv += 1 / r } }
    END { if (n) printf "%.1f", n / inv }' "$1"
}

cnn_table=""
cnn_bound_line=""
cnn_launches=""
if ((cnn)); then
  "$root/bench/throughput.sh" --build "$build" --warmup "$warmup" --steps "$steps" \
    --threads "$threads" --repeat "$repeat" --omp-spin 10000 --out "$work/cnn.md"
  cnn_table=$(grep '^|' "$work/cnn.md")
  # throughput.sh's own bound (the larger of its measurements before and
  # after its runs), against which it states dtf's share.
  cnn_bound_line=$(grep '^SGEMM bound' "$work/cnn.md" || true)
  grep -v '^[[:space:]]*eval[[:space:]]*=' "$root/models/mnist_cnn.dtf" > "$work/cnn.dtf"
  "$build/bin/dtfc" "$work/cnn.dtf" -o "$work/cnn.plan"
  "$build/bin/dtfc" "$work/cnn.dtf" --fusion=off -o "$work/cnn-off.plan"
  cnn_launches="$(ops_per_step "$work/cnn.plan") with kernels, $(ops_per_step "$work/cnn-off.plan") with --fusion=off"
  echo "   seed CNN kernel launches per step: $cnn_launches"
fi

rows=""
runlog=""
# median RUN...: the middle run (the mean of the middle two).
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%.1f", (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2 }'; }
# bench_model MODEL LABEL [DTFC_FLAGS...]: one row of the table.
bench_model() {
  local m=$1 label=$2
  shift 2
  # One process, no evaluation (as the twins): mlp's sync replication
  # (2 of 3 workers) is dropped, so it trains alone with batch 100.
  grep -v -e '^[[:space:]]*eval[[:space:]]*=' -e '^[[:space:]]*replication[[:space:]]*=' \
    -e '^[[:space:]]*update[[:space:]]*=' "$root/models/$m.dtf" > "$work/$m.dtf"
  local batch
  batch=$(awk '/^[[:space:]]*batch[[:space:]]*=/ { print $3; exit }' "$work/$m.dtf")
  "$build/bin/dtfc" "$work/$m.dtf" "$@" -o "$work/$label.plan"
  "$build/bin/dtfc" "$work/$m.dtf" "$@" --fusion=off -o "$work/$label-off.plan"
  local kernels
  kernels=$("$build/bin/dtfc" "$work/$m.dtf" "$@" --emit=kernels | grep -c '^dtf_fused_' || true)
  local on=() off=() torch=() r p rate
  for ((r = 1; r <= repeat; ++r)); do
    for p in "$label" "$label-off"; do
      "$build/bin/dtf-run" "$work/$p.plan" --steps $((warmup + steps)) --log-every "$every" \
        --threads "$threads" > "$work/$p.log" 2>&1 || { tail "$work/$p.log" >&2; die "dtf-run $p failed"; }
      ! grep -q "op by op" "$work/$p.log" || die "$p fell back to the op-by-op kernels"
      rate=$(dtf_rate "$work/$p.log")
      if [[ $p == "$label" ]]; then on+=("$rate"); else off+=("$rate"); fi
    done
    # The PyTorch twin runs once per model and round (lstm-unrolled reuses lstm's).
    if [[ ! -s $work/$m.torch.$r.json ]]; then
      "$bench_py" "$root/bench/peers/torch_layers.py" "$m" --steps $((warmup + steps)) --warmup "$warmup" \
        --batch "$batch" --threads "$threads" > "$work/$m.torch.$r.json" 2> "$work/$m.torch.err" ||
        { cat "$work/$m.torch.err" >&2; die "the PyTorch twin of $m failed"; }
    fi
    torch+=("$(python3 -c 'import json,sys; print("%.1f" % json.loads(open(sys.argv[1]).read().splitlines()[-1])["images_per_sec"])' "$work/$m.torch.$r.json")")
  done
  local rates=("$(median "${on[@]}")" "$(median "${off[@]}")")
  local launches launches_off
  launches=$(ops_per_step "$work/$label.plan")
  launches_off=$(ops_per_step "$work/$label-off.plan")
  local trate
  trate=$(median "${torch[@]}")
  printf '   %-11s dtf %8.1f, --fusion=off %8.1f, PyTorch %8.1f images/s; %s kernels; launches/step %s vs %s\n' \
    "$label" "${rates[0]}" "${rates[1]}" "$trate" "$kernels" "$launches" "$launches_off"
  if ((repeat > 1)); then
    echo "               runs: dtf ${on[*]}; --fusion=off ${off[*]}; PyTorch ${torch[*]}"
    runlog+="- $label: dtf ${on[*]}; --fusion=off ${off[*]}; PyTorch ${torch[*]}"$'\n'
  fi
  rows+="| $label | $batch | ${rates[0]} | ${rates[1]} | $trate | $(python3 -c "print('%.2f | %.2f' % (${rates[0]} / ${rates[1]}, ${rates[0]} / $trate))") | $kernels | $launches | $launches_off |"$'\n'
}
for m in ${models//,/ }; do
  bench_model "$m" "$m"
  # The LSTM's and GRU's layers are one oneDNN call by default; the unrolled
  # cell (the form before) beside each, against the same PyTorch runs.
  [[ $m == lstm || $m == gru ]] && bench_model "$m" "$m-unrolled" --recurrent=unrolled
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
table="| model | batch | dtf images/s | dtf --fusion=off | PyTorch | kernels ÷ off | dtf ÷ PyTorch | kernels | launches/step | launches/step off |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
$rows"
echo
echo "$table"
[[ $out == - ]] && exit 0
cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
{
  echo "# Generated kernels: dtf with and without fusion, PyTorch, TensorFlow (bench/fusion.sh)"
  echo
  echo "Command: \`$cmdline\` ($(date -u '+%Y-%m-%d %H:%M UTC'))."
  echo "Machine: $(nproc) cores ($cpu); load average (1, 5, 15 min) $load_before before,"
  echo "$load_after after. GOMP_SPINCOUNT=10000 for every framework; $threads threads each;"
  echo "$warmup warm-up steps, then $steps timed steps; $repeat run(s) of each, interleaved"
  echo "(a model's dtf, dtf --fusion=off and PyTorch runs take turns); medians."
  if awk -v l="${load_before%% *}" -v n="$(nproc)" 'BEGIN { exit !(l > n / 2) }'; then
    echo "**The machine was busy with other work (load above half its cores): these"
    echo "figures are noisy; differences below about 20% between two runs say nothing.**"
  fi
  echo
  echo "SGEMM bound, measured in this run: oneDNN dnnl_sgemm 1024x1024x1024 on $threads"
  echo "threads (bench/peers/sgemm_bound.cpp), best of 10: **$gflops GFLOP/s**; at about 73"
  echo "MFLOP per image the seed CNN's bound is **$cnn_bound images/s**."
  if ((cnn)); then
    echo
    echo "## Seed CNN (bench/throughput.sh, batch 50)"
    echo
    echo "$cnn_table"
    echo
    [[ -z $cnn_bound_line ]] || { echo "$cnn_bound_line"; echo; }
    echo "Kernel launches per training step (ops the executor runs: dtf.fused plus"
    echo "library calls, dtf-run --profile): $cnn_launches."
  fi
  echo
  echo "## Other models beside their PyTorch twins"
  echo
  echo "models/*.dtf without evaluation (mlp in one process, its sync replication"
  echo "dropped); PyTorch twins in bench/peers/torch_layers.py. \"kernels\": the"
  echo "plan's generated kernels (both programs); launches/step: ops per training step."
  echo
  echo "$table"
  if [[ -n $runlog ]]; then
    echo "Every run's images/s, in the order they ran:"
    echo
    echo -n "$runlog"
  fi
} > "$out"
echo "written to ${out#"$root"/}"
