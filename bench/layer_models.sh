#!/usr/bin/env bash
# The layer models of models/ (resnet.dtf: batch norm; transformer.dtf:
# attention and layer norm; vit.dtf: a class token, attention dropout, GELU;
# lstm.dtf) trained on Fashion-MNIST by dtf and by
# a faithful PyTorch twin (bench/peers/torch_layers.py), in one invocation:
# images/s over the steps after the warm-up, and test accuracy at the end,
# side by side as ratios. Writes results/layer_models.md.
#
#   usage: bench/layer_models.sh [options]
#     --build DIR     dtf build directory (default: ./build of this checkout)
#     --steps N       training steps of each run (default 3000, the models')
#     --warmup N      steps left out of images/s (default 50)
#     --threads N     threads for each framework (default 2)
#     --repeat N      runs of each framework per model, interleaved (dtf,
#                     PyTorch, dtf, ...); the table gives the median
#                     images/s of each (default 1)
#     --models LIST   comma-separated subset of resnet,transformer,lstm,vit
#                     (default resnet,transformer,lstm)
#     --out FILE      results file (default bench/results/layer_models.md; "-": none)
#
#   environment: DTF_BENCH_VENV, DTF_BENCH_TORCH as in bench/throughput.sh.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
steps=3000
warmup=50
threads=2
repeat=1
models=resnet,transformer,lstm
out=$root/bench/results/layer_models.md
cmdline="bench/layer_models.sh${*:+ $*}"

die() { echo "layer_models.sh: $*" >&2; exit 2; }
posint() { [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1 needs a positive integer, got '$2'"; }
while (($#)); do
  case $1 in
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --steps) posint --steps "${2-}"; steps=$2; shift 2 ;;
    --warmup) posint --warmup "${2-}"; warmup=$2; shift 2 ;;
    --threads) posint --threads "${2-}"; threads=$2; shift 2 ;;
    --repeat) posint --repeat "${2-}"; repeat=$2; shift 2 ;;
    --models) models=${2:?--models needs a list}; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
((steps > warmup)) || die "--steps must exceed --warmup"
for m in ${models//,/ }; do
  case $m in resnet|transformer|lstm|vit) ;; *) die "--models: unknown model '$m'" ;; esac
done
# shellcheck source=bench/venv.sh
source "$root/bench/venv.sh"
bench_venv || exit 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== layer models, $steps steps ($warmup warm-up), batch 64, $threads threads (load $load_before)"
rows="" runs=""
for m in ${models//,/ }; do
  "$build/bin/dtfc" "$root/models/$m.dtf" -o "$work/$m.plan"
  drates=() trates=()
  for ((r = 1; r <= repeat; ++r)); do
    "$build/bin/dtf-run" "$work/$m.plan" --steps "$steps" --log-every "$warmup" \
      --threads "$threads" > "$work/$m.dtf.log" 2>&1 || { tail "$work/$m.dtf.log" >&2; die "dtf-run $m failed"; }
    read -r drate dacc < <(awk -v w="$warmup" '
      /^step [0-9]+\/[0-9]+ / { split($2, s, "/");
        for (k = 3; k < NF; ++k) if ($(k + 1) == "img/s") r = $k;
        if (s[1] > w) { n++; inv += 1 / r } }
      /^final:/ { for (k = 2; k <= NF; ++k) if ($k ~ /^accuracy=/) { sub("accuracy=", "", $k); acc = $k } }
      END { printf "%.1f %s\n", n / inv, acc }' "$work/$m.dtf.log")
    "$bench_py" "$root/bench/peers/torch_layers.py" "$m" --steps "$steps" --warmup "$warmup" \
      --threads "$threads" > "$work/$m.torch.json" 2> "$work/$m.torch.err" ||
      { cat "$work/$m.torch.err" >&2; die "the PyTorch twin of $m failed"; }
    read -r trate tacc < <(python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print("%.1f %.4f" % (r["images_per_sec"], r["test_accuracy"]))' "$work/$m.torch.json")
    ((repeat == 1)) || echo "   $m run $r: dtf $drate images/s, PyTorch $trate images/s"
    drates+=("$drate") trates+=("$trate")
  done
  median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%.1f\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
  drate=$(median "${drates[@]}") trate=$(median "${trates[@]}")
  printf '   %-11s dtf %8.1f images/s, accuracy %s; PyTorch %8.1f images/s, accuracy %s\n' "$m" "$drate" "$dacc" "$trate" "$tacc"
  runs+="${runs:+; }$m dtf ${drates[*]}, PyTorch ${trates[*]}"
  rows+="| $m | $drate | $dacc | $trate | $tacc | $(python3 -c "print('%.2f' % ($drate / $trate))") |"$'\n'
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
table="| model | dtf images/s | dtf test accuracy | PyTorch images/s | PyTorch test accuracy | dtf ÷ PyTorch (images/s) |
| --- | ---: | ---: | ---: | ---: | ---: |
$rows"
echo
echo "$table"
[[ $out == - ]] && exit 0
{
  echo "# Layer models beside PyTorch (bench/layer_models.sh)"
  echo
  flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
  isa=SSE4; [[ $flags == *" avx2 "* ]] && isa=AVX2; [[ $flags == *" avx512f "* ]] && isa=AVX-512
  [[ $flags == *" avx512_bf16 "* ]] && isa+=" with AVX512-BF16"
  echo "Command: \`$cmdline\`, $(date -u +%Y-%m-%d) on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') ($isa), $(nproc) cores; load average before $load_before, after $load_after. $([[ $repeat == 1 ]] && echo "One run each." || echo "$repeat interleaved runs each, medians; the runs: $runs.")"
  echo
  echo "$table"
} > "$out"
echo "wrote $out"
