#!/usr/bin/env bash
# Which reductions to fuse (dtfc --fuse-reductions), in one invocation: the
# seed CNN and the residual CNN (or --models), each compiled three ways (all:
# rows and columns, the default; rows only; --fusion=off), trained in
# interleaved rounds so that every plan sees the same load. Prints, per
# round and plan, images/s and from dtf-run --profile the time per step of
# everything but the library calls (conv2d*, matmul, max_pool*): the
# elementwise ops and reductions that fusion changes, which the convolutions'
# noise on a shared machine would otherwise hide. Then the median of each.
#
#   usage: bench/reductions.sh [options]
#     --build DIR     dtf build directory (default: ./build of this checkout)
#     --rounds N      interleaved rounds (default 5)
#     --steps N       training steps of each run (default 40)
#     --threads N     dtf-run's threads (default 2)
#     --models LIST   comma-separated models of models/ (default mnist_cnn,resnet)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
rounds=5
steps=40
threads=2
models=mnist_cnn,resnet
die() { echo "reductions.sh: $*" >&2; exit 2; }
posint() { [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1 needs a positive integer, got '$2'"; }
while (($#)); do
  case $1 in
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --rounds) posint --rounds "${2-}"; rounds=$2; shift 2 ;;
    --steps) posint --steps "${2-}"; steps=$2; shift 2 ;;
    --threads) posint --threads "${2-}"; threads=$2; shift 2 ;;
    --models) models=${2:?--models needs a list}; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for m in ${models//,/ }; do
  [[ $m =~ ^[a-z0-9_]+$ && -f $root/models/$m.dtf ]] || die "--models: no models/$m.dtf"
done
for b in dtfc dtf-run; do
  [[ -x $build/bin/$b ]] || die "$build/bin/$b not found (build it, or pass --build DIR)"
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "bench/reductions.sh: $rounds rounds of $steps steps, $threads threads; load $(cut -d' ' -f1-3 /proc/loadavg)"
for m in ${models//,/ }; do
  grep -v '^[[:space:]]*eval[[:space:]]*=' "$root/models/$m.dtf" > "$work/$m.dtf"
  "$build/bin/dtfc" "$work/$m.dtf" --fuse-reductions=all -o "$work/$m-all.plan"
  "$build/bin/dtfc" "$work/$m.dtf" --fuse-reductions=rows -o "$work/$m-rows.plan"
  "$build/bin/dtfc" "$work/$m.dtf" --fusion=off -o "$work/$m-off.plan"
  for ((r = 1; r <= rounds; ++r)); do
    for p in all rows off; do
      load=$(cut -d' ' -f1 /proc/loadavg)
      "$build/bin/dtf-run" "$work/$m-$p.plan" --steps "$steps" --profile --threads "$threads" \
        > "$work/log" 2>&1 || { tail "$work/log" >&2; die "dtf-run $m-$p failed"; }
      awk -v m="$m" -v p="$p" -v r="$r" -v l="$load" '
        /by op kind/ { k = 1; next }
        /slowest/ { k = 0 }
        k && /ms\/step/ { if ($1 !~ /conv2d|matmul|max_pool/) e += $3 }
        /^final:/ { for (i = 1; i <= NF; ++i) if ($i ~ /^examples_per_sec=/) { split($i, a, "="); ips = a[2] } }
        END { printf "%-11s %-4s round %d: %8.1f images/s, %6.2f ms/step outside library calls (load %s)\n", m, p, r, ips, e, l }' \
        "$work/log" | tee -a "$work/results"
    done
  done
done
echo "medians:"
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
for m in ${models//,/ }; do
  for p in all rows off; do
    ips=$(awk -v m="$m" -v p="$p" '$1 == m && $2 == p { print $5 }' "$work/results" | median)
    ms=$(awk -v m="$m" -v p="$p" '$1 == m && $2 == p { print $7 }' "$work/results" | median)
    printf "%-11s %-4s %8.1f images/s, %6.2f ms/step outside library calls\n" "$m" "$p" "$ips" "$ms"
  done
done
