#!/usr/bin/env bash
# The recurrent models (models/lstm.dtf, models/gru.dtf) under mixed_bfloat16
# against their f32 plans (issue #33). First oneDNN's LSTM and GRU primitives
# alone at the models' shape, f32 and bf16, on 1 and on --threads threads
# (bench/peers/rnn_primitives.cpp: the implementation oneDNN picks and its
# time per call), which is why `--precision=mixed_bfloat16` marks the LSTM
# bf16 and leaves the GRU f32. Then per model interleaved runs of both plans
# from the same seed: images/s over the timed steps, the CPU time per step,
# and the test accuracy after the same steps (the plans' own evaluation at
# the end). Writes both tables, with the machine, its load and the command,
# to results/mixed_precision_recurrent.md.
#
#   usage: bench/mixed_precision_recurrent.sh [options]
#     --build DIR     dtf build with bin/dtfc and bin/dtf-run (default ./build)
#     --models LIST   comma-separated models (default lstm,gru)
#     --warmup N      untimed steps before the timed ones (default 50)
#     --steps N       timed steps; every run trains warmup + steps (default 950)
#     --eval-steps N  test batches evaluated at the end (default 40)
#     --repeat R      interleaved runs of each plan; medians (default 3)
#     --threads N     dtf-run --threads (default 2)
#     --out FILE      results file (default bench/results/mixed_precision_recurrent.md;
#                     "-" writes none)
#
# images/s counts the timed steps only. "CPU ms/step" is user + system time
# with OMP_WAIT_POLICY=passive (no spinning) of a run of warmup + steps
# minus a 1-step run, per step: steadier than images/s on a loaded machine.
# The accuracy does not depend on the load; the rates do.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build models=lstm,gru warmup=50 steps=950 eval_steps=40 repeat=3 threads=2
out=$root/bench/results/mixed_precision_recurrent.md
cmdline="bench/mixed_precision_recurrent.sh $*"
die() { echo "mixed_precision_recurrent.sh: $*" >&2; exit 1; }
while (($#)); do
  case $1 in
    --build) build=${2:?}; shift 2 ;;
    --models) models=${2:?}; shift 2 ;;
    --warmup) warmup=${2:?}; shift 2 ;;
    --steps) steps=${2:?}; shift 2 ;;
    --eval-steps) eval_steps=${2:?}; shift 2 ;;
    --repeat) repeat=${2:?}; shift 2 ;;
    --threads) threads=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "mixed_precision_recurrent.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for n in "$warmup" "$steps" "$eval_steps" "$repeat" "$threads"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "mixed_precision_recurrent.sh: '$n' is not a positive count" >&2; exit 2; }
done
for b in dtfc dtf-run; do
  [ -x "$build/bin/$b" ] || die "no $build/bin/$b (build it, or pass --build DIR)"
done
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
every=$(bench_gcd "$warmup" "$steps")
total=$((warmup + steps))

for m in ${models//,/ }; do
  src=$root/models/$m.dtf
  [ -f "$src" ] || die "no model $src"
  sed -E "0,/^( *)steps( *)= *([0-9]+)(.*)$/s//\1steps\2= \3\4\n\1seed = 1/" "$src" > "$work/$m.dtf"
  grep -qE '^ *seed = 1$' "$work/$m.dtf" || die "could not set the seed of $src"
  "$build/bin/dtfc" "$work/$m.dtf" -o "$work/$m-float32.plan"
  "$build/bin/dtfc" "$work/$m.dtf" --precision=mixed_bfloat16 -o "$work/$m-mixed_bfloat16.plan"
  # The f32 plan with seed 2: how far two f32 runs land apart (the noise).
  sed -E 's/^( *)seed = 1$/\1seed = 2/' "$work/$m.dtf" > "$work/$m-seed2.dtf"
  "$build/bin/dtfc" "$work/$m-seed2.dtf" -o "$work/$m-seed2.plan"
  n=$("$build/bin/dtfc" "$work/$m.dtf" --precision=mixed_bfloat16 --emit=kernels |
        grep -c "dtf\.\(lstm\|gru\)[_a-z]*  bf16 operands" || true)
  echo "$m: $n LSTM/GRU ops in bf16 in the mixed_bfloat16 plan's listing"
done

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
c++ -O2 -std=c++17 "$root/bench/peers/rnn_primitives.cpp" -ldnnl -o "$work/rnn_primitives"
primitives=""
for t in 1 "$threads"; do
  echo "== oneDNN's primitives alone, B 64, T 28, F 28, U 64, $t thread(s)"
  table=$(OMP_NUM_THREADS=$t "$work/rnn_primitives" 64 28 28 64 200)
  echo "$table"
  primitives+=$'\n'"$t thread(s):"$'\n\n'"$table"$'\n'
  [[ $t == "$threads" ]] && break
done
: > "$work/runs"
echo "== $warmup warm-up + $steps timed steps, $eval_steps test batches, $threads threads, $repeat interleaved runs (load $load_before)"
for ((i = 1; i <= repeat; ++i)); do
  for m in ${models//,/ }; do
    for p in float32 mixed_bfloat16; do
      o=$work/$m.$p.$i.out
      "$build/bin/dtf-run" "$work/$m-$p.plan" --steps "$total" --log-every "$every" \
        --eval-steps "$eval_steps" --threads "$threads" > "$o" 2>&1 ||
        { tail -5 "$o" >&2; die "$m $p run $i failed"; }
      rate=$(bench_dtf_timed_rate "$o" "$warmup")
      acc=$(grep "^final:" "$o" | tail -1 | grep -o 'accuracy=[0-9.]*' | cut -d= -f2)
      [[ -n $rate && -n $acc ]] || { cat "$o" >&2; die "$m $p run $i: no images/s or accuracy"; }
      # CPU time per step: the long run minus a 1-step run, without spinning.
      cpu() {
        OMP_WAIT_POLICY=passive GOMP_SPINCOUNT=0 /usr/bin/time -f '%U %S' -o "$work/cpu.t" \
          "$build/bin/dtf-run" "$work/$m-$p.plan" --steps "$1" --threads "$threads" \
          > /dev/null 2>&1 || die "dtf-run $m $p --steps $1 failed"
        awk '{printf "%.3f", $1 + $2}' "$work/cpu.t"
      }
      a=$(cpu 1) b=$(cpu "$total")
      ms=$(awk -v a="$a" -v b="$b" -v n=$((total - 1)) 'BEGIN {printf "%.2f", 1000 * (b - a) / n}')
      echo "$m $p $rate $acc $ms" >> "$work/runs"
      printf '   %-5s %-15s run %d: %8.1f images/s, test accuracy %s, %6.2f CPU ms/step\n' \
        "$m" "$p" "$i" "$rate" "$acc" "$ms"
    done
  done
done
for m in ${models//,/ }; do
  "$build/bin/dtf-run" "$work/$m-seed2.plan" --steps "$total" --eval-steps "$eval_steps" \
    --threads "$threads" --log-every "$total" > "$work/$m.seed2.out" 2>&1 ||
    { tail -5 "$work/$m.seed2.out" >&2; die "$m f32 seed 2 failed"; }
  acc=$(grep "^final:" "$work/$m.seed2.out" | tail -1 | grep -o 'accuracy=[0-9.]*' | cut -d= -f2)
  echo "   $m float32, seed 2: test accuracy $acc"
  echo "$m seed2 0 $acc 0" >> "$work/runs"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

table=$(python3 - "$work/runs" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m, p, rate, acc, ms = line.split()
    runs.setdefault((m, p), []).append((float(rate), float(acc), float(ms)))
print("| model | precision | images/s (median) | runs (images/s) | CPU ms/step (median) | test accuracy | bf16 ÷ f32 images/s | bf16 ÷ f32 CPU time |")
print("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: |")
noise = []
for m in sorted({k[0] for k in runs}):
    seed2 = runs.get((m, "seed2"), [(0, float("nan"), 0)])[0][1]
    f32acc = runs[(m, "float32")][0][1]
    bf16acc = runs[(m, "mixed_bfloat16")][0][1]
    noise.append("%s: f32 seed 1 %.4f, seed 2 %.4f (spread %.4f); mixed_bfloat16 seed 1 %.4f (%+.4f from f32 seed 1)"
                 % (m, f32acc, seed2, abs(f32acc - seed2), bf16acc, bf16acc - f32acc))
    med = {p: (statistics.median(r for r, _, _ in runs[(m, p)]),
               statistics.median(c for _, _, c in runs[(m, p)])) for p in ("float32", "mixed_bfloat16")}
    for p in ("float32", "mixed_bfloat16"):
        v = runs[(m, p)]
        accs = sorted({a for _, a, _ in v})
        ratio = cpu = ""
        if p == "mixed_bfloat16":
            ratio = "%.2fx" % (med[p][0] / med["float32"][0])
            cpu = "%.2fx" % (med["float32"][1] / med[p][1])
        print("| %s | %s | %.0f | %s | %.2f | %s | %s | %s |" % (
            m, p, med[p][0], ", ".join("%.0f" % r for r, _, _ in v), med[p][1],
            ", ".join("%.4f" % a for a in accs), ratio, cpu))
print()
print("Test accuracy at equal steps, against the noise of two f32 seeds:")
print()
for line in noise:
    print("- " + line)
PY
)
echo "$table"
[[ $out == - ]] && exit 0
{
  echo "# The recurrent models under mixed_bfloat16 against f32"
  echo
  echo "Command: \`$cmdline\` ($(date -u '+%Y-%m-%d %H:%M UTC'))."
  echo "Machine: $(nproc) cores ($(bench_cpu_isa)); load average (1, 5, 15 min) $load_before before, $load_after after."
  echo "oneDNN: $(ls /usr/lib/x86_64-linux-gnu/libdnnl.so.* 2>/dev/null | sed 's|.*/||' | sort | tail -1)."
  echo
  echo "Each model from its own train block (optimizer, batch 64, data) with seed 1, both plans"
  echo "trained $total steps ($warmup untimed) in each of $repeat interleaved rounds, then evaluated on"
  echo "$eval_steps test batches. The same seed gives the same batches, so the accuracies differ by"
  echo "the precision alone (a plan's rounds agree when the accuracy column has one value); an f32"
  echo "run with seed 2 gives the spread of f32 itself. images/s swing with the other"
  echo "work on the machine; the CPU time per step (OMP_WAIT_POLICY=passive, a long run minus a"
  echo "1-step run) is the steadier measure."
  echo
  echo "$table"
  echo
  echo "## oneDNN's LSTM and GRU primitives alone"
  echo
  echo "bench/peers/rnn_primitives.cpp: forward_training then backward at the lstm and gru"
  echo "models' shape (B 64, T 28, F 28, U 64), memory already in the primitives' formats, as"
  echo "dtf-run's kernels build them; median and best ms per call over 200 calls."
  echo "$primitives"
} > "$out"
echo "wrote $out"
