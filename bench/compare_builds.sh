#!/usr/bin/env bash
# Two dtf builds side by side in one invocation, to show that a change made
# nothing slower: the seed CNN in one process (bench/throughput.sh's dtf run),
# the seed CNN on 1 ps + 2 workers (bench/distributed.sh's dtf run: the
# launcher's defaults, mutual TLS and Unix sockets between the tasks on this
# host) and the CTR model's dtf runs (bench/embedding.sh: one process with the
# sparse table update, and 2 ps + 2 workers with the table looked up on the
# ps). Runs alternate A B A B, round after round, so that a machine whose load
# drifts (other people's builds) weighs on both alike; the table gives each
# side's median and B/A. Each side compiles its plans with its own dtfc (the
# plan format may differ between them) from its own models/.
#
#   usage: bench/compare_builds.sh [options] A B
#     A, B            a build directory with bin/dtfc and bin/dtf-run (its
#                     source tree, for models/, is read from its
#                     CMakeCache.txt), or rev:REVISION: that git revision of
#                     this repository, checked out with `git worktree add`
#                     into $DTF_COMPARE_DIR/REVISION (default
#                     ~/.cache/dtf-compare, outside the repository) and built
#                     there (only dtfc and dtf-run, Release, -j2, ccache)
#     --rounds N      rounds of A B per workload (default 3)
#     --short         fewer steps (a few minutes in all; the merger's rerun
#                     on an idle machine can leave it out)
#     --only LIST     comma-separated subset of cnn,cluster,ctr,ctr-cluster
#                     (default all)
#     --out FILE      results file (default bench/results/compare_builds.md;
#                     "-" writes none)
#
#   environment: DTF_BENCH_DATA (Fashion-MNIST, default
#   /usr/share/datasets/fashion-mnist), DTF_COMPARE_DIR, DTF_COMPARE_JOBS
#   (ninja's -j for a rev: build, default 2)
#
# CPU seconds: user + system time of the run's processes (the launcher's
# tasks, the cluster driver's dtf-run, with theirs), from /usr/bin/time; for
# the seed CNN cluster also ps.0's own, sampled from /proc (bench/lib.sh's
# bench_dtf_cluster), in a row of its own. Both
# sides do the same work, so their ratio compares the builds' cost, and it
# moves far less than the rates when other work loads the cores.
#
# Rates: the seed CNN and the one-process CTR run count images (examples) per
# second over the timed steps after the warm-up (dtf-run's progress lines, as
# throughput.sh reads them); the seed CNN cluster sums the workers' final
# examples_per_sec (as distributed.sh: the warm-up included); the CTR cluster
# is bench/peers/dtf_cluster.py's examples/s after the warm-up.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
rounds=3
short=0
only=cnn,cluster,ctr,ctr-cluster
out=$root/bench/results/compare_builds.md
cmdline="bench/compare_builds.sh${*:+ $*}"
sides=()

die() { echo "compare_builds.sh: $*" >&2; exit 2; }
while (($#)); do
  case $1 in
    --rounds) [[ ${2-} =~ ^[1-9][0-9]*$ ]] || die "--rounds needs a positive count, got '${2-}'"; rounds=$2; shift 2 ;;
    --short) short=1; shift ;;
    --only) only=${2:?--only needs a list}; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) sides+=("$1"); shift ;;
  esac
done
((${#sides[@]} == 2)) || die "needs two builds, A and B (see --help)"
for f in ${only//,/ }; do
  case $f in cnn|cluster|ctr|ctr-cluster) ;; *) die "--only: unknown workload '$f' (cnn, cluster, ctr, ctr-cluster)" ;; esac
done
want() { [[ ",$only," == *",$1,"* ]]; }
data=${DTF_BENCH_DATA:-/usr/share/datasets/fashion-mnist}
[[ -e $data/train-images-idx3-ubyte.gz || -e $data/train-images-idx3-ubyte ]] ||
  die "$data: no Fashion-MNIST train-images-idx3-ubyte[.gz] (set DTF_BENCH_DATA)"

# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"

# A revision built outside the repository: a worktree of its own and a
# build folder in it, reused when it is there already.
build_rev() {
  local rev=$1 sha dir
  sha=$(git -C "$root" rev-parse --verify --quiet "$rev^{commit}") || die "rev:$rev is not a revision of $root"
  dir=${DTF_COMPARE_DIR:-$HOME/.cache/dtf-compare}/${sha:0:12}
  if [[ ! -e $dir/src/.git ]]; then
    mkdir -p "$dir"
    git -C "$root" worktree add --detach "$dir/src" "$sha" >&2
  fi
  if [[ ! -x $dir/src/build/bin/dtfc || ! -x $dir/src/build/bin/dtf-run ]]; then
    echo "== building $rev (${sha:0:12}) in $dir/src/build: dtfc and dtf-run" >&2
    # ccache finds what other checkouts compiled: paths under the folder
    # above the source tree are hashed relative to the build folder.
    (export CCACHE_BASEDIR=$dir
     cmake -S "$dir/src" -B "$dir/src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
       -DDTF_BUILD_TESTS=OFF -DDTF_SANITIZER_TESTS=OFF -DDTF_FUZZ_TESTS=OFF > "$dir/cmake.log" 2>&1 ||
       { tail -20 "$dir/cmake.log" >&2; exit 1; }
     ninja -C "$dir/src/build" -j "${DTF_COMPARE_JOBS:-2}" dtfc dtf-run > "$dir/build.log" 2>&1 ||
       { tail -20 "$dir/build.log" >&2; exit 1; }) || die "building $rev failed (logs in $dir)"
  fi
  echo "$dir/src/build"
}

# The build folder of a side, its source tree and a label.
declare -a build src label
for i in 0 1; do
  s=${sides[$i]}
  if [[ $s == rev:* ]]; then
    build[i]=$(build_rev "${s#rev:}")
    label[i]="rev:${s#rev:}"
  else
    [[ -d $s ]] || die "$s: no such build directory"
    build[i]=$(cd "$s" && pwd)
    label[i]=$s
  fi
  for b in dtfc dtf-run; do
    [[ -x ${build[i]}/bin/$b ]] || die "${build[i]}/bin/$b not found"
  done
  src[i]=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "${build[i]}/CMakeCache.txt")
  [[ -f ${src[i]}/models/mnist_cnn.dtf ]] || die "${build[i]}: no source tree with models/ (CMakeCache.txt says '${src[i]}')"
  rev=$(git -C "${src[i]}" rev-parse --short=7 HEAD 2>/dev/null || echo "?")
  dirty=$(git -C "${src[i]}" status --porcelain --untracked-files=no 2>/dev/null | head -1)
  label[i]+=" [${src[i]} at $rev${dirty:+, with uncommitted changes}]"
done

if ((short)); then
  cnn_warmup=10 cnn_steps=60 cl_warmup=10 cl_steps=60 ctr_warmup=10 ctr_steps=60 ctrc_steps=40
else
  cnn_warmup=20 cnn_steps=200 cl_warmup=20 cl_steps=150 ctr_warmup=20 ctr_steps=200 ctrc_steps=100
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Each side's plans, by its own dtfc from its own models.
for i in 0 1; do
  d=$work/$i
  mkdir -p "$d"
  grep -v '^[[:space:]]*eval[[:space:]]*=' "${src[i]}/models/mnist_cnn.dtf" |
    sed "s#idx(\"/usr/share/datasets/fashion-mnist\"#idx(\"$data\"#" > "$d/cnn.dtf"
  "${build[i]}/bin/dtfc" "$d/cnn.dtf" -o "$d/cnn.plan" || die "side $i: dtfc failed on the seed CNN"
  "${build[i]}/bin/dtfc" "${src[i]}/models/ctr.dtf" -o "$d/ctr.plan" || die "side $i: dtfc failed on models/ctr.dtf"
done

# run WORKLOAD SIDE ROUND: one run; appends "workload side rate" to $work/runs.
run() {
  local w=$1 i=$2 r=$3 o=$work/$1.$2.$3.out rate every cpu
  local bin=${build[i]}/bin/dtf-run plans=$work/$i
  local -a timed=(/usr/bin/time -f '%U %S' -o "$o.cpu")
  case $w in
    cnn)
      every=$(bench_gcd "$cnn_warmup" "$cnn_steps")
      "${timed[@]}" "$bin" "$plans/cnn.plan" --steps $((cnn_warmup + cnn_steps)) --log-every "$every" \
        --threads 2 > "$o" 2>&1 || { tail -5 "$o" >&2; die "$w side $i failed"; }
      rate=$(bench_dtf_timed_rate "$o" "$cnn_warmup") ;;
    cluster)
      bench_cluster_json 1 2 > "$work/cluster.json"
      bench_dtf_cluster "$o" "${timed[@]}" "$bin" "$plans/cnn.plan" --cluster "$work/cluster.json" \
        --steps $(((cl_warmup + cl_steps) * 2)) --log-every $((cl_steps * 2)) --threads 1 ||
        { tail -5 "$o" >&2; die "$w side $i failed"; }
      rate=$(awk '/^worker\.[0-9]+ +\| final: / { for (k = 1; k <= NF; ++k)
               if ($k ~ /^examples_per_sec=/) { split($k, v, "="); s += v[2]; n++ } }
             END { if (n == 2) printf "%.1f", s }' "$o")
      # The ps's own share, from the same run (bench_dtf_cluster's sample).
      [[ -n $rate && -n ${bench_cpu[ps.0]-} ]] &&
        echo "cluster-ps $i $rate ${bench_cpu[ps.0]}" >> "$work/runs" ;;
    ctr)
      every=$(bench_gcd "$ctr_warmup" "$ctr_steps")
      "${timed[@]}" "$bin" "$plans/ctr.plan" --steps $((ctr_warmup + ctr_steps)) --log-every "$every" \
        --threads 2 > "$o" 2>&1 || { tail -5 "$o" >&2; die "$w side $i failed"; }
      rate=$(bench_dtf_timed_rate "$o" "$ctr_warmup") ;;
    ctr-cluster)
      "${timed[@]}" python3 "$root/bench/peers/dtf_cluster.py" --dtf-run "$bin" --plan "$plans/ctr.plan" \
        --warmup "$ctr_warmup" --steps "$ctrc_steps" > "$o" 2>&1 ||
        { tail -5 "$o" >&2; die "$w side $i failed"; }
      rate=$(python3 -c 'import json,sys; print("%.1f" % json.loads(open(sys.argv[1]).read().splitlines()[-1])["examples_per_sec"])' "$o") ;;
  esac
  [[ -n $rate ]] || { tail -5 "$o" >&2; die "$w side $i: no rate in its output"; }
  cpu=$(awk 'NF == 2 && $1 ~ /^[0-9.]+$/ { c = $1 + $2 } END { if (c != "") printf "%.2f", c }' "$o.cpu")
  [[ -n $cpu ]] || die "$w side $i: no CPU time in $o.cpu"
  echo "$w $i $rate $cpu" >> "$work/runs"
  printf '   %-11s %s round %d: %9.1f /s, %7.2f CPU s\n' "$w" "$([[ $i == 0 ]] && echo A || echo B)" "$r" "$rate" "$cpu"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s)
echo "== A: ${label[0]}"
echo "== B: ${label[1]}"
echo "== $rounds round(s) of A B per workload$( ((short)) && echo ', short' ) (load $load_before)"
for ((r = 1; r <= rounds; ++r)); do
  for w in cnn cluster ctr ctr-cluster; do
    want "$w" || continue
    run "$w" 0 "$r"
    run "$w" 1 "$r"
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
minutes=$(( ($(date +%s) - start + 59) / 60 ))

table=$(python3 - "$work/runs" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    w, side, rate, cpu = line.split()
    runs.setdefault(w, ([], []))[int(side)].append((float(rate), float(cpu)))
names = {"cnn": "seed CNN, one process, 2 threads (images/s)",
         "cluster": "seed CNN, 1 ps + 2 workers, TLS + Unix sockets (images/s, sum)",
         "cluster-ps": "the same runs: ps.0 alone (CPU s: its user + system time)",
         "ctr": "CTR model, one process, 2 threads (examples/s)",
         "ctr-cluster": "CTR model, 2 ps + 2 workers, lookups on the ps (examples/s)"}
print("| workload | rate A (median) | rate B | **rate B / A** | CPU s A (median) | CPU s B | **CPU B / A** | A runs: rate, CPU s | B runs |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
for w in ("cnn", "cluster", "cluster-ps", "ctr", "ctr-cluster"):
    if w not in runs:
        continue
    a, b = runs[w]
    ra, rb = (statistics.median(r for r, _ in v) for v in (a, b))
    ca, cb = (statistics.median(c for _, c in v) for v in (a, b))
    fmt = lambda v: " / ".join("%.0f, %.2f" % x for x in v)
    print(f"| {names[w]} | {ra:.0f} | {rb:.0f} | **{rb / ra:.3f}** | {ca:.2f} | {cb:.2f} | **{cb / ca:.3f}** | {fmt(a)} | {fmt(b)} |")
PY
)
echo
echo "$table"

[[ $out == - ]] && exit 0
cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
isa=$(grep -m1 -o -w -E 'avx512f|avx2|sse4_2' /proc/cpuinfo | head -1)
for f in avx512f avx512bw avx512_vnni avx512_bf16 amx_tile; do
  grep -q -m1 -w "$f" /proc/cpuinfo && isa=$f
done
isa_all=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512f|avx512bw|avx512vl|avx512_vnni|avx512_bf16|avx512_fp16|amx_tile)$' | tr '\n' ' ' | sed 's/ $//')
{
  echo "# Two builds side by side: no slowdown"
  echo
  echo "Command: \`$cmdline\` ($(date -u '+%Y-%m-%d %H:%M UTC'), $minutes min)."
  echo "Machine: $(nproc) cores ($cpu; ISA: ${isa_all:-$isa}), $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo);"
  echo "load average (1, 5, 15 min) $load_before before, $load_after after."
  if awk -v l="${load_before%% *}" -v l2="${load_after%% *}" -v n="$(nproc)" 'BEGIN { exit !(l > n / 2 || l2 > n / 2) }'; then
    echo "**The machine was busy with other work (load above half its cores): each"
    echo "figure alone is noisy; the ratios come from runs that alternated A B A B,"
    echo "so a drifting load weighs on both sides alike, but a ratio within a few"
    echo "percent of 1 is within the noise. Rerun on an idle machine before quoting"
    echo "them as absolute figures.**"
  fi
  echo
  echo "- A: ${label[0]}"
  echo "- B: ${label[1]}"
  echo
  echo "Each side compiles its plans with its own dtfc from its own models/. $rounds"
  echo "round(s); in each, every workload runs A then B. Steps: seed CNN $cnn_warmup warm-up +"
  echo "$cnn_steps timed; its cluster $cl_warmup + $cl_steps per worker (1 thread per task,"
  echo "async, the launcher's default mutual TLS over Unix sockets); CTR $ctr_warmup + $ctr_steps"
  echo "timed; its cluster (bench/peers/dtf_cluster.py) $ctr_warmup warm-up global steps +"
  echo "$ctrc_steps timed per worker. Rate B / A above 1: B is faster; CPU B / A below 1:"
  echo "B used less CPU for the same work (data loading and start-up included)."
  echo
  echo "$table"
} > "$out"
echo
echo "written to ${out#"$root"/}"
