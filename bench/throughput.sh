#!/usr/bin/env bash
# Side-by-side training throughput and peak memory of the seed CNN
# (models/mnist_cnn.dtf: conv 5x5x32, pool, conv 5x5x64, pool, dense 500,
# dense 10; Adam 1e-4; batch 50; Fashion-MNIST) in dtf, PyTorch and
# TensorFlow, in one invocation. Prints a table and writes it, with the
# machine, the load, the versions and the command, to results/throughput.md.
#
#   usage: bench/throughput.sh [options]
#     --build DIR     dtf build directory with bin/dtfc and bin/dtf-run
#                     (default: ./build of this checkout)
#     --warmup N      untimed steps before the timed ones (default 50)
#     --steps N       timed steps (default 300)
#     --threads N     threads for each framework (default 2)
#     --repeat R      runs of each framework, interleaved; the table shows
#                     the median images/s and the largest peak RSS (default 3)
#     --only LIST     comma-separated subset of dtf,torch,tf (default all; dtf
#                     runs twice: with its generated kernels and --fusion=off)
#     --out FILE      results file (default bench/results/throughput.md;
#                     "-" writes none)
#     --omp-passive   run every framework with OMP_WAIT_POLICY=passive: OpenMP
#                     threads sleep between jobs. PyTorch's spin for a long
#                     while by default, which costs it a factor of 3 to 5 when
#                     other processes load the cores. It costs dtf its short
#                     spin (dtf-run's own choice when neither variable is set:
#                     GOMP_SPINCOUNT=10000 when training alone)
#     --omp-spin N    run every framework with GOMP_SPINCOUNT=N (and no
#                     OMP_WAIT_POLICY): each OpenMP thread spins N rounds after
#                     a job before it sleeps; 10000 is dtf-run's own choice.
#                     Fair to every peer on an idle or a loaded machine
#
#   environment:
#     DTF_BENCH_VENV  the peers' virtualenv, made on first use and reused
#                     (default ~/.cache/dtf-bench-venv, outside the repo;
#                     see bench/venv.sh)
#     DTF_BENCH_TORCH, DTF_BENCH_TF   pip requirements for the peers
#                     (default torch==2.15.0, tensorflow-cpu==2.21.0)
#     DTF_BENCH_DATA  Fashion-MNIST IDX directory
#                     (default /usr/share/datasets/fashion-mnist)
#
# Each framework runs as its own process under /usr/bin/time (peak RSS is
# its "Maximum resident set size"); images/s counts only the timed steps.
# The first run makes the virtualenv (bench/venv.sh says why it is big).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
warmup=50
steps=300
threads=2
repeat=3
only=dtf,torch,tf
out=$root/bench/results/throughput.md
cmdline="bench/throughput.sh${*:+ $*}"

die() { echo "throughput.sh: $*" >&2; exit 2; }
posint() { [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1 needs a positive integer, got '$2'"; }
while (($#)); do
  case $1 in
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --warmup) [[ ${2-} =~ ^[0-9]+$ ]] || die "--warmup needs a count, got '${2-}'"; warmup=$2; shift 2 ;;
    --steps) posint --steps "${2-}"; steps=$2; shift 2 ;;
    --threads) posint --threads "${2-}"; threads=$2; shift 2 ;;
    --repeat) posint --repeat "${2-}"; repeat=$2; shift 2 ;;
    --only) only=${2:?--only needs a list}; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    --omp-passive) export OMP_WAIT_POLICY=passive; unset GOMP_SPINCOUNT; shift ;;
    --omp-spin) posint --omp-spin "${2-}"; export GOMP_SPINCOUNT=$2
                unset OMP_WAIT_POLICY; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for f in ${only//,/ }; do
  case $f in dtf|torch|tf) ;; *) die "--only: unknown framework '$f' (dtf, torch, tf)" ;; esac
done
want() { [[ ",$only," == *",$1,"* ]]; }

data=${DTF_BENCH_DATA:-/usr/share/datasets/fashion-mnist}
[[ -e $data/train-images-idx3-ubyte.gz || -e $data/train-images-idx3-ubyte ]] ||
  die "$data: no Fashion-MNIST train-images-idx3-ubyte[.gz] (set DTF_BENCH_DATA)"
[[ -x /usr/bin/time ]] || die "/usr/bin/time is missing (apt-get install time)"
if want dtf; then
  for b in dtfc dtf-run; do
    [[ -x $build/bin/$b ]] || die "$build/bin/$b not found (build it, or pass --build DIR)"
  done
fi

# The peers' virtualenv: made once, reused while its requirements match.
# shellcheck source=bench/venv.sh
source "$root/bench/venv.sh"
if want torch || want tf; then
  bench_venv || exit 2
fi
py=$bench_py

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# dtf: the seed model without its eval source, so that dtf, like the peers,
# loads only the training set and spends no time evaluating.
if want dtf; then
  grep -v '^[[:space:]]*eval[[:space:]]*=' "$root/models/mnist_cnn.dtf" |
    sed "s#idx(\"/usr/share/datasets/fashion-mnist\"#idx(\"$data\"#" > "$work/cnn.dtf"
  "$build/bin/dtfc" "$work/cnn.dtf" -o "$work/cnn.plan"
  # The same model without generated kernels: every op its own kernel.
  "$build/bin/dtfc" "$work/cnn.dtf" --fusion=off -o "$work/cnn-nofuse.plan"
fi
# dtf-run prints img/s per logging interval; logging every gcd(warmup, steps)
# steps lets the timed rate leave the warm-up out exactly.
gcd() { local a=$1 b=$2 t; while ((b)); do t=$((a % b)); a=$b; b=$t; done; echo "$a"; }
every=$(gcd "$warmup" "$steps")

# run FRAMEWORK I: one run; appends "framework images_per_sec peak_rss_kb" to
# $work/runs and keeps its output in $work/FRAMEWORK.I.out.
run() {
  local fw=$1 i=$2 o=$work/$1.$2.out rate
  local -a cmd
  case $fw in
    dtf) cmd=("$build/bin/dtf-run" "$work/cnn.plan" --steps $((warmup + steps))
              --log-every "$every" --threads "$threads") ;;
    dtf-nofuse) cmd=("$build/bin/dtf-run" "$work/cnn-nofuse.plan" --steps $((warmup + steps))
              --log-every "$every" --threads "$threads") ;;
    torch) cmd=("$py" "$root/bench/peers/torch_cnn.py" --warmup "$warmup"
                --steps "$steps" --threads "$threads" --data "$data") ;;
    tf) cmd=("$py" "$root/bench/peers/tf_cnn.py" --warmup "$warmup"
             --steps "$steps" --threads "$threads" --data "$data") ;;
  esac
  if ! /usr/bin/time -f '%M' -o "$work/$fw.$i.rss" "${cmd[@]}" > "$o" 2> "$o.err"; then
    cat "$o" "$o.err" >&2
    die "$fw run $i failed: ${cmd[*]}"
  fi
  if [[ $fw == dtf* ]]; then
    # Equal intervals: the timed rate is the harmonic mean of the rates of
    # the intervals after the warm-up.
    rate=$(awk -v w="$warmup" '
      /^step [0-9]+\/[0-9]+ / { split($2, s, "/");
        for (k = 3; k < NF; ++k) if ($(k + 1) == "img/s") r = $k;
        if (s[1] > w) { n++; inv += 1 / r } }
      END { if (n) printf "%.1f", n / inv }' "$o")
  else
    rate=$("$py" -c 'import json,sys; print("%.1f" % json.loads(open(sys.argv[1]).read().splitlines()[-1])["images_per_sec"])' "$o")
  fi
  [[ -n $rate ]] || { cat "$o" >&2; die "$fw run $i: no images/s in its output"; }
  echo "$fw $rate $(tail -1 "$work/$fw.$i.rss")" >> "$work/runs"
  printf '   %-10s run %d: %8.1f images/s, peak RSS %6.0f MB\n' "$fw" "$i" "$rate" \
    "$(($(tail -1 "$work/$fw.$i.rss") / 1024))"
}

# The SGEMM bound (as bench/fusion.sh measures it), before and after the
# runs, under the same OpenMP settings: dtf's median against the larger.
bound() { OMP_NUM_THREADS=$threads "$work/sgemm_bound" 1024 10; }
if want dtf; then
  [[ -e /usr/include/oneapi/dnnl/dnnl.h ]] || die "no oneDNN headers (apt-get install libdnnl-dev)"
  c++ -O2 -std=c++17 "$root/bench/peers/sgemm_bound.cpp" -ldnnl -o "$work/sgemm_bound"
  gflops_before=$(bound)
fi
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== seed CNN, batch 50, $threads threads, $warmup warm-up + $steps timed steps, $repeat run(s) each (load $load_before${OMP_WAIT_POLICY:+, OMP_WAIT_POLICY=$OMP_WAIT_POLICY}${GOMP_SPINCOUNT:+, GOMP_SPINCOUNT=$GOMP_SPINCOUNT})"
for ((i = 1; i <= repeat; ++i)); do
  for fw in dtf dtf-nofuse torch tf; do
    if [[ $fw == dtf-nofuse ]]; then want dtf && run "$fw" "$i"; continue; fi
    want "$fw" && run "$fw" "$i"
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
bound_line=""
if want dtf; then
  gflops_after=$(bound)
  bound_line=$(python3 - "$gflops_before" "$gflops_after" "$work/runs" <<'PY'
import statistics, sys
before, after = float(sys.argv[1]), float(sys.argv[2])
dtf = [float(l.split()[1]) for l in open(sys.argv[3]) if l.split()[0] == "dtf"]
peak = max(before, after)
bound = peak * 1e9 / 73e6
print("SGEMM bound (bench/peers/sgemm_bound.cpp, oneDNN sgemm 1024^3 on the same threads, best of 10): "
      "%.1f GFLOP/s before the runs, %.1f after; at about 73 MFLOP per image the seed CNN's bound is "
      "%.0f images/s (the larger), and dtf's median is **%.0f%%** of it (the bound counts the direct "
      "arithmetic; dtf's Winograd convolutions multiply less, docs/kernels.md)." % (before, after, bound, 100 * statistics.median(dtf) / bound))
PY
)
  echo "$bound_line"
fi

# Versions, from the runs themselves where they say it.
versions="dtf $("$build/bin/dtf-run" --version 2>/dev/null | awk '{print $2}')"
want dtf || versions=""
for fw in torch tf; do
  want "$fw" || continue
  v=$("$py" -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["framework"])' "$work/$fw.1.out")
  versions+="${versions:+, }$v"
done
versions+=", Python $(python3 -c 'import platform; print(platform.python_version())')"

# The table: median images/s and largest peak RSS per framework.
table=$(python3 - "$work/runs" "$only" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    fw, rate, rss = line.split()
    runs.setdefault(fw, []).append((float(rate), int(rss)))
names = {"dtf": "dtf", "dtf-nofuse": "dtf --fusion=off", "torch": "PyTorch", "tf": "TensorFlow"}
med = {fw: statistics.median(r for r, _ in v) for fw, v in runs.items()}
rss = {fw: max(m for _, m in v) / 1024.0 for fw, v in runs.items()}
print("| framework | images/s (median) | runs | peak RSS MB | dtf img/s ÷ this | dtf RSS ÷ this |")
print("| --- | ---: | --- | ---: | ---: | ---: |")
for fw in ("dtf", "dtf-nofuse", "torch", "tf"):
    if fw not in runs:
        continue
    all_rates = " / ".join("%.0f" % r for r, _ in runs[fw])
    if "dtf" in runs:
        speed = "%.2f" % (med["dtf"] / med[fw])
        mem = "%.2f" % (rss["dtf"] / rss[fw])
    else:
        speed = mem = "-"
    print(f"| {names[fw]} | {med[fw]:.0f} | {all_rates} | {rss[fw]:.0f} | {speed} | {mem} |")
EOF
)
echo
echo "$table"

# Extras that the peers report: their loss (a check that they train) and
# their RSS after the warm-up (framework and data, before the timed steps).
extras=""
for fw in torch tf; do
  want "$fw" || continue
  extras+=$("$py" -c '
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print("- %s: mean loss over the last 50 timed steps %.4f, RSS after the warm-up %.0f MB, %s thread(s)%s" % (
    r["framework"], r["loss_last_50"], r["rss_after_warmup_mb"], r["threads"],
    ", %d inter-op" % r["inter_threads"] if "inter_threads" in r else ""))' "$work/$fw.1.out")$'\n'
done
if want dtf; then
  extras+="- dtf: $(tail -1 "$work/dtf.1.out") (examples_per_sec there includes the warm-up)"$'\n'
fi
echo
printf '%s' "$extras"

[[ $out == - ]] && exit 0
cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
{
  echo "# Seed CNN training throughput: dtf, PyTorch, TensorFlow"
  echo
  echo "Command: \`$cmdline\` ($(date -u '+%Y-%m-%d %H:%M UTC'))."
  echo "Machine: $(nproc) cores ($cpu), $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo);"
  echo "load average (1, 5, 15 min) $load_before before, $load_after after."
  echo "Versions: $versions."
  echo
  echo "Model: models/mnist_cnn.dtf (conv 5x5x32 + relu, max pool 2, conv 5x5x64 +"
  echo "relu, max pool 2, dense 500 + relu, dense 10; sparse softmax cross-entropy;"
  echo "Adam 1e-4; batch 50; float32), Fashion-MNIST training images scaled to"
  echo "[0, 1], shuffled every epoch. $warmup warm-up steps, then $steps timed steps;"
  echo "$threads threads for each framework; $repeat run(s) of each, interleaved."
  echo "Peak RSS: /usr/bin/time's maximum resident set size of the process."
  if awk -v l="${load_before%% *}" -v n="$(nproc)" 'BEGIN { exit !(l > n / 2) }'; then
    echo "**The machine was busy with other work (load above half its cores): these"
    echo "figures are noisy; rerun on an idle machine before quoting them.**"
  fi
  if [[ -n ${OMP_WAIT_POLICY-} || -n ${GOMP_SPINCOUNT-} ]]; then
    echo "OpenMP waits, for every framework: ${OMP_WAIT_POLICY:+OMP_WAIT_POLICY=$OMP_WAIT_POLICY}${GOMP_SPINCOUNT:+GOMP_SPINCOUNT=$GOMP_SPINCOUNT}."
  else
    echo "OpenMP waits: each framework's default (dtf-run's own: GOMP_SPINCOUNT=10000)."
  fi
  [[ -n $bound_line ]] && echo "$bound_line"
  echo
  echo "$table"
  echo
  printf '%s' "$extras"
} > "$out"
echo
echo "written to ${out#"$root"/}"
