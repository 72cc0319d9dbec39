#!/usr/bin/env bash
# How OpenMP's threads wait between jobs, on one dtf-run binary: each model of
# models/ (without its evaluation) trains with OMP_WAIT_POLICY=passive (threads
# sleep: a wake-up per job, as a task of a cluster runs) and with
# GOMP_SPINCOUNT=10000 (a short spin: dtf-run's own choice when it trains
# alone), the two interleaved, and the median examples/s of each is reported.
# Writes results/omp_waits.md.
#
#   usage: bench/omp_waits.sh [options]
#     --build DIR     dtf build directory (default: ./build of this checkout)
#     --steps N       steps of each run, warm-up included (default 400)
#     --repeat R      runs of each model and setting (default 3)
#     --threads N     dtf-run --threads (default 2)
#     --models LIST   comma-separated subset of mnist_cnn,mlp,lstm,
#                     autoencoder,resnet,transformer (default all)
#     --out FILE      results file (default bench/results/omp_waits.md; "-": none)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
steps=400
repeat=3
threads=2
models=mnist_cnn,mlp,lstm,autoencoder,resnet,transformer
out=$root/bench/results/omp_waits.md
cmdline="bench/omp_waits.sh${*:+ $*}"

die() { echo "omp_waits.sh: $*" >&2; exit 2; }
posint() { [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1 needs a positive integer, got '$2'"; }
while (($#)); do
  case $1 in
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --steps) posint --steps "${2-}"; steps=$2; shift 2 ;;
    --repeat) posint --repeat "${2-}"; repeat=$2; shift 2 ;;
    --threads) posint --threads "${2-}"; threads=$2; shift 2 ;;
    --models) models=${2:?--models needs a list}; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for m in ${models//,/ }; do
  [[ -f $root/models/$m.dtf ]] || die "--models: no models/$m.dtf"
done
for b in dtfc dtf-run; do
  [[ -x $build/bin/$b ]] || die "$build/bin/$b not found (build it, or pass --build DIR)"
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# rate PLAN ENV...: examples/s of one run (its final line; warm-up included).
rate() {
  local plan=$1
  shift
  env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$@" "$build/bin/dtf-run" "$plan" \
    --steps "$steps" --threads "$threads" 2>&1 |
    sed -n 's/.*examples_per_sec=\([0-9.]*\).*/\1/p'
}
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
table="| model | passive (examples/s) | GOMP_SPINCOUNT=10000 | spin ÷ passive |"$'\n'
table+="| --- | ---: | ---: | ---: |"
for m in ${models//,/ }; do
  grep -v '^[[:space:]]*eval[[:space:]]*=' "$root/models/$m.dtf" > "$work/$m.dtf"
  "$build/bin/dtfc" "$work/$m.dtf" -o "$work/$m.plan"
  passive="" spin=""
  for ((i = 1; i <= repeat; ++i)); do
    passive+=" $(rate "$work/$m.plan" OMP_WAIT_POLICY=passive)"
    spin+=" $(rate "$work/$m.plan" GOMP_SPINCOUNT=10000)"
  done
  p=$(echo "$passive" | median) s=$(echo "$spin" | median)
  [[ -n $p && -n $s ]] || die "$m: no examples_per_sec in dtf-run's output"
  line=$(python3 -c "import sys; p, s = float(sys.argv[2]), float(sys.argv[3]); print('| %s | %.0f | %.0f | %.2f |' % (sys.argv[1], p, s, s / p))" "$m" "$p" "$s")
  echo "$line   (passive:$passive; spin:$spin)"
  table+=$'\n'"$line"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

[[ $out == - ]] && exit 0
{
  echo "# OpenMP waits: passive against a short spin (bench/omp_waits.sh)"
  echo
  echo "Command: \`$cmdline\` ($(date -u '+%Y-%m-%d %H:%M UTC'))."
  echo "Machine: $(nproc) cores ($(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo));"
  echo "load average (1, 5, 15 min) $load_before before, $load_after after."
  echo "One dtf-run binary; each model without its evaluation, \`dtf-run PLAN --steps $steps"
  echo "--threads $threads\`, examples/s from its final line (warm-up included);"
  echo "the median of $repeat runs of each setting, the two settings interleaved."
  echo
  echo "$table"
} > "$out"
echo "written to $out"
