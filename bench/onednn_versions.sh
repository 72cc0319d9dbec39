#!/usr/bin/env bash
# Which oneDNN computes the seed CNN's layers faster on this CPU (issue 33:
# "Debian's oneDNN is 2.6 (2022); PyPI ships a newer one ... measure both on
# bf16 here"): bench/peers/onednn_layers.cpp (conv1, conv2, dense 3136->500;
# forward, backward-data, backward-weights; f32 and bf16 at batch 50) built
# against Debian's libdnnl (2.6) and against the PyPI wheel onednn-cpu-gomp
# (3.2, GNU OpenMP like dtf; the newer wheel `onednn` 2026.1 is built for TBB
# and SYCL and needs Intel's SYCL runtime, so it is not a drop-in for dtf),
# run in interleaved rounds on the same threads. Prints a table and writes it
# to results/onednn_versions.md.
#
#   usage: bench/onednn_versions.sh [--rounds N] [--threads T] [--out FILE]
#   environment: DTF_ONEDNN3 (default ~/.cache/dtf-onednn-3.2: where the
#   wheel is unpacked on first use)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
rounds=3 threads=2 out=$root/bench/results/onednn_versions.md
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/onednn_versions.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

new=${DTF_ONEDNN3:-$HOME/.cache/dtf-onednn-3.2}
if [[ ! -f $new/include/oneapi/dnnl/dnnl.hpp ]]; then
  echo "== unpacking onednn-cpu-gomp 2023.2.0 (oneDNN 3.2) from PyPI into $new"
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps -d "$tmp" onednn-cpu-gomp==2023.2.0 onednn-devel-cpu-gomp==2023.2.0
  for w in "$tmp"/*.whl; do python3 -m zipfile -e "$w" "$tmp/x"; done
  mkdir -p "$new" && cp -r "$tmp"/x/*.data/data/* "$new"/
  rm -rf "$tmp"
fi
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
src=$root/bench/peers/onednn_layers.cpp
g++ -O2 -std=c++17 "$src" -o "$bin/debian" -ldnnl
g++ -O2 -std=c++17 -I"$new/include" "$src" -o "$bin/pypi" -L"$new/lib" -Wl,-rpath,"$new/lib" -ldnnl

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= rounds; ++r)); do
  for v in debian pypi; do
    OMP_NUM_THREADS=$threads GOMP_SPINCOUNT=10000 "$bin/$v" >> "$bin/$v.out"
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

table=$(python3 - "$bin/debian.out" "$bin/pypi.out" <<'PY'
import statistics, sys
def load(p):
    ver, ms = None, {}
    for line in open(p):
        if line.startswith("# oneDNN"): ver = line.split()[2]
        elif line.startswith("#"): continue
        else:
            layer, pas, dt, t = line.split()
            ms.setdefault((dt, layer, pas), []).append(float(t))
    return ver, {k: statistics.median(v) for k, v in ms.items()}
va, a = load(sys.argv[1]); vb, b = load(sys.argv[2])
print(f"| dtype | layer | pass | oneDNN {va} (ms) | oneDNN {vb} (ms) | {va} ÷ {vb} |")
print("| --- | --- | --- | ---: | ---: | ---: |")
tot = {}
for k in sorted(a, key=lambda k: (k[0] != "f32", k[1], k[2])):
    if k not in b: continue
    print(f"| {k[0]} | {k[1]} | {k[2]} | {a[k]:.3f} | {b[k]:.3f} | {a[k] / b[k]:.2f}x |")
    t = tot.setdefault(k[0], [0.0, 0.0]); t[0] += a[k]; t[1] += b[k]
for dt, (x, y) in tot.items():
    print(f"| {dt} | all | sum | {x:.3f} | {y:.3f} | {x / y:.2f}x |")
PY
)
echo "$table"
[[ $out == - ]] && exit 0
{
  echo "# oneDNN versions on the seed CNN's layers (bench/onednn_versions.sh)"
  echo
  echo "Command: \`bench/onednn_versions.sh --rounds $rounds --threads $threads\` ($(date -u '+%Y-%m-%d %H:%M UTC'))."
  echo "Machine: $(nproc) cores, $(bench_cpu_isa); load average (1, 5, 15 min) $load_before before, $load_after after."
  echo
  echo "Each primitive with every memory \`format_tag::any\` (each library's own layouts; reorders"
  echo "not timed), batch 50, $threads threads, GOMP_SPINCOUNT=10000; median over $rounds interleaved rounds of"
  echo "the median of 5 batches of 40 runs. A ratio above 1 means the newer library is faster."
  echo
  echo "$table"
} > "$out"
echo "written to ${out#"$root"/}"
