#!/usr/bin/env bash
# Trains the seed CNN (models/mnist_cnn.dtf: Adam, batch 50, 5000 steps) on
# Fashion-MNIST with the seed's learning rate (1e-4) and with 1e-3, and prints
# each run's evaluations and final line. Results and the reference figures
# are in results/accuracy.md. About 2 to 5 minutes per run on 2 cores.
#   usage: bench/accuracy.sh [options] [BUILD_DIR]
#     --lr LIST       comma-separated learning rates (default 1e-4,1e-3)
#     --seeds LIST    comma-separated run seeds, each a `seed = N` line in the
#                     train block (default: the file's own, which is seed 0)
#     --fusion=off    compile with dtfc --fusion=off (op by op)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
lrs=1e-4,1e-3
seeds=""
dtfc_flags=()
while (($#)); do
  case $1 in
    --lr) lrs=${2:?--lr needs a list}; shift 2 ;;
    --seeds) seeds=${2:?--seeds needs a list}; shift 2 ;;
    --fusion=off) dtfc_flags+=(--fusion=off); shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "accuracy.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for lr in ${lrs//,/ }; do
  seedlist=${seeds:-file}
  for s in ${seedlist//,/ }; do
    f=$work/cnn_${lr}_$s.dtf
    sed "s/adam(learning_rate = 1e-4)/adam(learning_rate = $lr)/" "$root/models/mnist_cnn.dtf" > "$f"
    if [[ $s != file ]]; then
      [[ $s =~ ^[0-9]+$ ]] || { echo "accuracy.sh: --seeds: '$s' is not a seed (an integer >= 0)" >&2; exit 2; }
      sed -Ei "s/^( *)steps( *)= 5000(.*)$/\1steps\2= 5000\3\n\1seed = $s/" "$f"
      grep -q "seed = $s" "$f" || { echo "accuracy.sh: could not set the seed" >&2; exit 2; }
    fi
    "$build/bin/dtfc" "$f" "${dtfc_flags[@]}" -o "${f%.dtf}.plan"
    echo "== Adam $lr, seed ${s/file/of the file (0)}${dtfc_flags[*]:+, ${dtfc_flags[*]}}"
    "$build/bin/dtf-run" "${f%.dtf}.plan" --log-every 1000 | grep -E "^(eval|final)"
  done
done
