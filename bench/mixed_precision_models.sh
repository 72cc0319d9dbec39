#!/usr/bin/env bash
# Every model of models/ under mixed_bfloat16 against its f32 plan (issue
# #33): each model trained N steps three times, f32 with two seeds (their
# spread is the noise at equal steps) and `dtfc --precision=mixed_bfloat16`
# with the first seed, then evaluated; the table says whether the bf16 run's
# final metric lies within the noise of the f32 run of the same seed. Writes
# it, with the machine and the command, to results/mixed_precision_models.md.
# Accuracy does not depend on the machine's load; the seconds do.
#
#   usage: bench/mixed_precision_models.sh [options]
#     --build DIR       dtf build with bin/dtfc and bin/dtf-run (default ./build)
#     --steps N         training steps of every run (default 600)
#     --eval-steps N    evaluation batches at the end (default 40)
#     --models LIST     comma-separated model names (default: every models/*.dtf)
#     --seeds A,B       the two seeds (default 1,2)
#     --cluster         train each run on 1 ps + 2 workers (asynchronous or
#                       as the model's train block says; the launcher's
#                       default wiring: Unix sockets, the tensors in shared
#                       memory) through the launcher, the bf16 run with
#                       `--wire bf16` as well, and report the tensor bytes
#                       per applied update that ps.0 moved (pulls and pushes)
#                       in f32 and over the bf16 wire; default results file
#                       results/mixed_precision_models_cluster.md
#     --out FILE        results file (default bench/results/mixed_precision_models.md;
#                       "-" writes none)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build steps=600 eval_steps=40 models="" seeds=1,2 cluster=0
out=""
cmdline="bench/mixed_precision_models.sh $*"
while (($#)); do
  case $1 in
    --build) build=${2:?}; shift 2 ;;
    --steps) steps=${2:?}; shift 2 ;;
    --eval-steps) eval_steps=${2:?}; shift 2 ;;
    --models) models=${2:?}; shift 2 ;;
    --seeds) seeds=${2:?}; shift 2 ;;
    --cluster) cluster=1; shift ;;
    --out) out=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "mixed_precision_models.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for n in "$steps" "$eval_steps"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "mixed_precision_models.sh: '$n' is not a positive count" >&2; exit 2; }
done
[[ $seeds =~ ^[0-9]+,[0-9]+$ ]] || { echo "mixed_precision_models.sh: --seeds wants A,B (two integers), got '$seeds'" >&2; exit 2; }
seed_a=${seeds%,*} seed_b=${seeds#*,}
if [ -z "$out" ]; then
  out=$root/bench/results/mixed_precision_models.md
  ((cluster)) && out=$root/bench/results/mixed_precision_models_cluster.md
fi
[ -n "$models" ] || models=$(cd "$root/models" && ls ./*.dtf | sed 's|^\./||; s|\.dtf$||' | paste -sd,)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# with_seed SRC SEED OUT: the model with `seed = SEED` in its train block.
with_seed() {
  if grep -qE '^ *seed *= *[0-9]+' "$1"; then
    sed -E "s/^( *)seed( *)= *[0-9]+/\1seed\2= $2/" "$1" > "$3"
  else
    sed -E "0,/^( *)steps( *)= *([0-9]+)(.*)$/s//\1steps\2= \3\4\n\1seed = $2/" "$1" > "$3"
  fi
  grep -qE "^ *seed *= *$2\b" "$3" || { echo "mixed_precision_models.sh: could not set the seed of $1" >&2; exit 1; }
}

rows=$work/rows
: > "$rows"
for m in ${models//,/ }; do
  src=$root/models/$m.dtf
  [ -f "$src" ] || { echo "mixed_precision_models.sh: no model $src" >&2; exit 2; }
  for run in "f32 $seed_a" "f32 $seed_b" "bf16 $seed_a"; do
    set -- $run
    f=$work/${m}_$1_$2.dtf
    with_seed "$src" "$2" "$f"
    flags=() run_flags=()
    [ "$1" = bf16 ] && flags=(--precision=mixed_bfloat16)
    if ((cluster)); then
      bench_cluster_json 1 2 > "$work/cluster.json"
      run_flags=(--cluster "$work/cluster.json")
      [ "$1" = bf16 ] && run_flags+=(--wire bf16)
    fi
    "$build/bin/dtfc" "$f" "${flags[@]}" -o "${f%.dtf}.plan" 2> "${f%.dtf}.dtfc.log" ||
      { cat "${f%.dtf}.dtfc.log" >&2; exit 1; }
    log=${f%.dtf}.log
    if ! "$build/bin/dtf-run" "${f%.dtf}.plan" --steps "$steps" --eval-steps "$eval_steps" \
        --log-every "$steps" "${run_flags[@]}" > "$log" 2>&1; then
      echo "mixed_precision_models.sh: $m ($1, seed $2) failed: $(tail -2 "$log")" >&2
      echo "$m $1 $2 FAILED" >> "$rows"
      continue
    fi
    if ((cluster)); then
      # The chief's final line (it evaluates), and what ps.0 moved.
      final=$(sed -n 's/^worker\.0 *| \(final:.*\)/\1/p' "$log" | tail -1)
      final+=" $(sed -n 's/^ps\.0 *| \([0-9]*\) updates applied.*tensor bytes received \([0-9]*\), sent \([0-9]*\).*/updates=\1 received=\2 sent=\3/p' "$log" | tail -1)"
    else
      final=$(grep "^final:" "$log" | tail -1)
    fi
    echo "$m $1 $2 $final" >> "$rows"
    echo "$m $1 seed $2: $final"
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

table=$(python3 - "$rows" "$seed_a" "$seed_b" "$cluster" <<'PY'
import re, sys
rows, a, b, cluster = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
runs = {}
for line in open(rows):
    m, kind, seed, rest = line.split(" ", 3)
    vals = dict(re.findall(r"(\w+)=([0-9.eE+-]+|nan|inf)", rest))
    runs[(m, kind, seed)] = vals if "FAILED" not in rest else None
extra = " bytes per update, f32 | bytes per update, bf16 wire | bf16 ÷ f32 bytes |" if cluster else ""
print("| model | metric | f32, seed %s | f32, seed %s | f32 spread (noise) | mixed_bfloat16, seed %s | bf16 − f32 (seed %s) | within noise |%s" % (a, b, a, a, extra))
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |" + (" ---: | ---: | ---: |" if cluster else ""))
def per_update(r):
    if not r or "updates" not in r or float(r["updates"]) == 0:
        return None
    return (float(r["received"]) + float(r["sent"])) / float(r["updates"])
def mb(x):
    return "?" if x is None else f"{x / 1e6:.3f} MB"
within = total = 0
for m in sorted({k[0] for k in runs}):
    x, y, z = runs.get((m, "f32", a)), runs.get((m, "f32", b)), runs.get((m, "bf16", a))
    if not (x and y and z):
        print(f"| {m} | | {'ok' if x else 'FAILED'} | {'ok' if y else 'FAILED'} | | {'ok' if z else 'FAILED'} | | no |" + (" | | |" if cluster else ""))
        total += 1
        continue
    metric = "accuracy" if "accuracy" in x else "loss"
    fx, fy, fz = (float(r[metric]) for r in (x, y, z))
    spread = abs(fx - fy)
    # The noise floor: two f32 seeds can land close by chance; 0.01 of
    # accuracy, or 2% of the loss, counts as noise whatever they gave.
    floor = 0.01 if metric == "accuracy" else 0.02 * abs(fx)
    ok = abs(fz - fx) <= max(spread, floor)
    within += ok
    total += 1
    cols = ""
    if cluster:
        bx, bz = per_update(x), per_update(z)
        cols = f" {mb(bx)} | {mb(bz)} | {(bz / bx if bx and bz else float('nan')):.2f} |"
    print(f"| {m} | {metric} | {fx:.4f} | {fy:.4f} | {spread:.4f} | {fz:.4f} | {fz - fx:+.4f} | {'yes' if ok else '**no**'} |" + cols)
print()
print(f"{within} of {total} models within the noise (|bf16 − f32| at most the f32 seeds' spread, or 0.01 of accuracy / 2% of the loss where the spread is smaller).")
PY
)
echo "$table"
[[ $out == - ]] && exit 0
{
  echo "# Every model under mixed_bfloat16 against its f32 plan$( ((cluster)) && echo ', on 1 ps + 2 workers with bf16 on the wire')"
  echo
  echo "Command: \`$cmdline\` ($(date -u '+%Y-%m-%d %H:%M UTC'))."
  echo "Machine: $(nproc) cores ($(bench_cpu_isa)); load average (1, 5, 15 min) $load_before before, $load_after after"
  echo "(the load changes the seconds, not the metrics)."
  echo
  echo "Each model of models/ trained $steps steps three times from its own train block (its"
  echo "optimizer, batch and data): f32 with seeds $seed_a and $seed_b, and \`dtfc"
  echo "--precision=mixed_bfloat16\` with seed $seed_a; then its evaluation of $eval_steps batches"
  echo "(\`--eval-steps\`). The metric is the final line's accuracy, or its loss where the model"
  echo "has no accuracy. $steps steps is early in most models' training: the f32 seeds' spread"
  echo "there is the noise the bf16 run is held to."
  if ((cluster)); then
    echo
    echo "On a cluster: each run is a job of 1 ps + 2 workers started by \`dtf-run --cluster\` on this"
    echo "machine (its default: Unix sockets between the tasks, the tensors in shared memory), $steps global steps (updates) in"
    echo "the model's own update mode; the bf16 run also passes \`--wire bf16\` (pulled"
    echo "variables and pushed gradients as bfloat16). The metric is the chief's (worker.0)"
    echo "final evaluation. Bytes per update: the tensor bytes ps.0 received and sent over"
    echo "the job (pulls, pushes, lookups) over the updates it applied."
  fi
  echo
  echo "$table"
} > "$out"
echo "mixed_precision_models.sh: wrote $out"
