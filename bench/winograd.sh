#!/usr/bin/env bash
# Winograd's F(2x2, 5x5) for the seed CNN's second convolution against
# oneDNN's direct kernels (DTF_CONV_WINOGRAD=0), in one invocation: the seed
# CNN (models/mnist_cnn.dtf) in one process, on 1 and 2 threads, the two
# builds' runs interleaved; images/s over the timed steps, the time of conv2's
# three passes from dtf-run --profile (and the GFLOP/s the direct sum's
# 1.0 GFLOP per pass and step would take), and the evaluation's loss and
# accuracy at equal steps (same seed, same batches). Writes
# results/winograd.md. The peers' figures for the whole model are
# bench/throughput.sh's.
#
#   usage: bench/winograd.sh [options]
#     --build DIR     dtf build directory (default: ./build of this checkout)
#     --steps N       timed steps of each run (default 300)
#     --warmup N      untimed steps before them (default 50)
#     --repeat N      runs of each variant and thread count (default 3)
#     --out FILE      results file (default bench/results/winograd.md; "-": none)
#
#   environment: DTF_BENCH_DATA (default /usr/share/datasets/fashion-mnist);
#   GOMP_SPINCOUNT=10000 as dtf-run's own default when training alone.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
steps=300
warmup=50
repeat=3
out=$root/bench/results/winograd.md
cmdline="bench/winograd.sh${*:+ $*}"

die() { echo "winograd.sh: $*" >&2; exit 2; }
posint() { [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1 needs a positive integer, got '$2'"; }
while (($#)); do
  case $1 in
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --steps) posint --steps "${2-}"; steps=$2; shift 2 ;;
    --warmup) posint --warmup "${2-}"; warmup=$2; shift 2 ;;
    --repeat) posint --repeat "${2-}"; repeat=$2; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for b in dtfc dtf-run; do
  [[ -x $build/bin/$b ]] || die "$build/bin/$b not found (build it, or pass --build DIR)"
done
grep -qw avx512f /proc/cpuinfo || die "this CPU has no AVX-512: Winograd's kernels do not run here"
export GOMP_SPINCOUNT=10000
unset OMP_WAIT_POLICY
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/bin/dtfc" "$root/models/mnist_cnn.dtf" -o "$work/cnn.plan"
gcd() { local a=$1 b=$2 t; while ((b)); do t=$((a % b)); a=$b; b=$t; done; echo "$a"; }
every=$(gcd "$warmup" "$steps")

# dtf_rate LOG: images/s over the intervals after the warm-up.
dtf_rate() {
  awk -v w="$warmup" '
    /^step [0-9]+\/[0-9]+ / { split($2, s, "/");
      for (k = 3; k < NF; ++k) if ($(k + 1) == "img/s") r = $k;
      if (s[1] > w) { n++; inv += 1 / r } }
    END { if (n) printf "%.1f", n / inv }' "$1"
}
# conv2's line in the model (the 5x5 convolution from 32 to 64 channels),
# where --profile places its three ops.
conv2_line=$(awk '/ as conv2$/ { print NR; exit }' "$root/models/mnist_cnn.dtf")
[[ -n $conv2_line ]] || die "models/mnist_cnn.dtf has no line '... as conv2'"
# conv2_ms LOG OP: ms per step of conv2's OP in --profile's slowest ops.
conv2_ms() {
  awk -v op="$2" -v at="mnist_cnn.dtf:$conv2_line:" \
    '$2 == "ms/step" && index($3, at) && $4 == op { print $1; exit }' "$1"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== Winograd against oneDNN's direct kernels: $warmup + $steps steps, $repeat rounds (load $load_before)"
# One line per run: threads variant images/s forward input-grad filter-grad
# eval-loss eval-accuracy.
: > "$work/runs"
for threads in 1 2; do
  for ((r = 1; r <= repeat; ++r)); do
    for v in direct winograd; do
      env_v=()
      [[ $v == direct ]] && env_v=(DTF_CONV_WINOGRAD=0)
      log=$work/$v.log
      env "${env_v[@]}" "$build/bin/dtf-run" "$work/cnn.plan" --steps $((warmup + steps)) \
        --log-every "$every" --threads "$threads" --profile > "$log" 2>&1 ||
        { tail "$log" >&2; die "dtf-run ($v, $threads threads) failed"; }
      fields="$(dtf_rate "$log") $(conv2_ms "$log" dtf.conv2d_bias) $(conv2_ms "$log" dtf.conv2d_backprop_input)"
      fields+=" $(conv2_ms "$log" dtf.conv2d_backprop_filter) $(awk '/^eval/ { l = $5; a = $7 } END { print l, a }' "$log")"
      read -r -a got <<< "$fields"
      ((${#got[@]} == 6)) || { tail "$log" >&2; die "$v, $threads threads: no rate, conv2 times or evaluation in dtf-run's output (got '$fields')"; }
      echo "$threads $v $fields" >> "$work/runs"
      echo "   $threads thread(s), round $r, $v: ${got[0]} images/s"
    done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
# The table (medians) and the notes (every run).
python3 - "$work/runs" "$((warmup + steps))" > "$work/report" <<'PY'
import statistics, sys
runs = [l.split() for l in open(sys.argv[1])]
steps = sys.argv[2]
gf = lambda ms: 1.0035 / (ms / 1e3)  # the direct sum's GFLOP per pass and step
cell = lambda d, w: f"{d:.2f} / {w:.2f} ({d / w:.2f}x; {gf(d):.0f} / {gf(w):.0f})"
print("| threads | images/s: direct / Winograd | conv2 forward ms (GFLOP/s) | input gradient ms (GFLOP/s) | filter gradient ms (GFLOP/s) |")
print("| ---: | ---: | ---: | ---: | ---: |")
notes = []
for t in ("1", "2"):
    med = {}
    for v in ("direct", "winograd"):
        mine = [r[2:] for r in runs if r[0] == t and r[1] == v]
        med[v] = [statistics.median(float(m[i]) for m in mine) for i in range(4)]
        each = lambda i: " ".join(m[i] for m in mine)
        notes.append(f"- {t} thread(s), {v}: images/s {each(0)}; conv2 forward ms {each(1)}; "
                     f"input gradient {each(2)}; filter gradient {each(3)}; evaluation loss/accuracy "
                     f"after {steps} steps {' '.join(m[4] + '/' + m[5] for m in mine)}")
    d, w = med["direct"], med["winograd"]
    print(f"| {t} | {d[0]:.0f} / {w[0]:.0f} (**{w[0] / d[0]:.2f}x**) | {cell(d[1], w[1])} | "
          f"{cell(d[2], w[2])} | {cell(d[3], w[3])} |")
print()
print("\n".join(notes))
PY
table=$(sed -n '/^|/p' "$work/report")
notes=$(sed -n '/^- /p' "$work/report")
echo
echo "$table"
echo "$notes"
[[ $out == - ]] && exit 0
cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
{
  echo "# Winograd F(2x2, 5x5) against oneDNN's direct convolution (bench/winograd.sh)"
  echo
  echo "Command: \`$cmdline\` ($(date -u '+%Y-%m-%d %H:%M UTC'))."
  echo "Machine: $(nproc) cores ($cpu); load average (1, 5, 15 min) $load_before before,"
  echo "$load_after after. The seed CNN (models/mnist_cnn.dtf, batch 50, Adam, f32) in one"
  echo "process; $warmup warm-up + $steps timed steps; $repeat rounds, the direct kernels"
  echo "(\`DTF_CONV_WINOGRAD=0\`: oneDNN $(dpkg-query -W -f='${Version}' libdnnl2 2>/dev/null || echo '?')) and Winograd alternating; medians."
  echo "conv2 is the 5x5 convolution from 32 to 64 channels on 14x14 (line $conv2_line); its"
  echo "direct sum is 1.0 GFLOP per pass and step, and the GFLOP/s columns divide that by"
  echo "the time (for Winograd, the rate the direct sum would need to match it)."
  echo
  echo "$table"
  echo "$notes"
} > "$out"
echo "wrote $out"
