#!/usr/bin/env bash
# The seed CNN's ps/worker cluster where real clusters live: every task on a
# host of its own (a network namespace with its own address, on veth links
# to a bridge in a namespace of its own), each link shaped to a rate with tc
# tbf, TensorFlow's ps/worker runtime and dtf's side by side in one run.
# Needs root (network namespaces). Prints a table and writes it to
# results/hosts.md.
#
#   usage: bench/hosts.sh [options]
#     --build DIR     dtf build directory with bin/dtfc and bin/dtf-run
#                     (default: ./build of this checkout)
#     --links L       comma-separated link rates for tc (default 1gbit)
#     --warmup N      untimed steps per worker (default 50)
#     --steps N       timed steps per worker (default 300)
#     --repeat N      runs of each framework and variant (default 1), one
#                     after another; the table shows the run with the
#                     median images/s (with an even count, the lower middle
#                     one) and the notes every run's
#     --only LIST     comma-separated subset of tf,dtf,bf16,compress,prefetch
#                     (default all; bf16 is both bf16 runs, compress both
#                     compressed ones, prefetch both --prefetch-pull ones)
#     --out FILE      results file (default bench/results/hosts.md; "-"
#                     writes none)
#
# 1 ps + 2 workers, asynchronous, batch 50 per worker and step, 1 intra-op
# thread per worker as in bench/distributed.sh. dtf runs with mutual TLS
# over TCP (the hosts' addresses are not loopback), f32, with --wire bf16,
# with --wire bf16 --overlap-push (each step's push beside the next
# step's pull), and with --wire bf16 and compressed pushes (--compress-push
# topk:0.01, then onebit: the gradients top-k or 1-bit with error feedback,
# the pulls bf16), and with --prefetch-pull (each step's next pull beside
# its compute and push), f32 and bf16. The chief evaluates once, at the end (test accuracy at
# equal steps; not in the timed figures). Bytes per step: what crossed the ps host's link both ways (tc's
# counters of its two qdiscs) over all the workers' steps, warm-up included;
# link use: the busier direction's bytes per second over the run against
# the link's rate. CPU: each task's user+system seconds.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
links=1gbit
warmup=50
steps=300
repeat=1
only=tf,dtf,bf16,compress,prefetch
out=$root/bench/results/hosts.md
cmdline="bench/hosts.sh${*:+ $*}"
die() { echo "hosts.sh: $*" >&2; exit 2; }
while (($#)); do
  case $1 in
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --links) links=${2:?--links needs rates}; shift 2 ;;
    --warmup) [[ ${2-} =~ ^[0-9]+$ ]] || die "--warmup needs a count, got '${2-}'"; warmup=$2; shift 2 ;;
    --steps) [[ ${2-} =~ ^[1-9][0-9]*$ ]] || die "--steps needs a positive count, got '${2-}'"; steps=$2; shift 2 ;;
    --repeat) [[ ${2-} =~ ^[1-9][0-9]*$ ]] || die "--repeat needs a positive count, got '${2-}'"; repeat=$2; shift 2 ;;
    --only) only=${2:?--only needs a list}; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for f in ${only//,/ }; do
  case $f in tf|dtf|bf16|compress|prefetch) ;; *) die "--only: unknown part '$f' (tf, dtf, bf16, compress, prefetch)" ;; esac
done
for l in ${links//,/ }; do
  [[ $l =~ ^[0-9]+(k|m|g)bit$ ]] || die "--links: '$l' is not a tc rate such as 1gbit or 100mbit"
done
want() { [[ ",$only," == *",$1,"* ]]; }
[ "$(id -u)" -eq 0 ] || die "network namespaces need root"
for tool in ip tc; do command -v "$tool" > /dev/null || die "'$tool' is missing (iproute2)"; done
data=${DTF_BENCH_DATA:-/usr/share/datasets/fashion-mnist}
[[ -x $build/bin/dtfc && -x $build/bin/dtf-run ]] || die "$build/bin has no dtfc and dtf-run (build first)"

# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
# shellcheck source=bench/venv.sh
source "$root/bench/venv.sh"
if want tf; then
  bench_venv || exit 2
fi

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
work=$(mktemp -d)
tag=dtfb$$
hosts=(ps w0 w1)
declare -A addr=([ps]=10.214.0.1 [w0]=10.214.0.2 [w1]=10.214.0.3)
cleanup() {
  bench_netns_down
  rm -rf "$work"
}
trap cleanup EXIT
bench_netns_hosts=()
bench_netns_up "$tag" ps=${addr[ps]} w0=${addr[w0]} w1=${addr[w1]} || die "no network namespaces here"
hub=$tag-hub
# Bytes the ps host's link carried so far: out of it, and into it.
ps_bytes() {
  local o i
  o=$(ip netns exec "$tag-ps" tc -s qdisc show dev eth0 | sed -n 's/^ *Sent \([0-9]*\) bytes.*/\1/p' | head -1)
  i=$(ip netns exec "$hub" tc -s qdisc show dev vps | sed -n 's/^ *Sent \([0-9]*\) bytes.*/\1/p' | head -1)
  echo "${o:-0} ${i:-0}"
}
bench_netns_shape "${links%%,*}"
bench_netns_wait w0 "${addr[ps]}" || die "host w0 cannot reach the ps host"

spec=$(printf '{"ps": ["%s:2222"], "worker": ["%s:2222", "%s:2222"]}' "${addr[ps]}" "${addr[w0]}" "${addr[w1]}")
echo "$spec" > "$work/cluster.json"
"$build/bin/dtf-run" certs --cluster "$work/cluster.json" --out "$work/tls" > /dev/null
# One evaluation, when the last step is done (the test accuracy at equal
# steps; the images/s count training time only).
sed -e "s#idx(\"/usr/share/datasets/fashion-mnist\"#idx(\"$data\"#g" \
    -e "s/every = 1000/every = $((2 * (warmup + steps)))/" "$root/models/mnist_cnn.dtf" > "$work/cnn.dtf"
"$build/bin/dtfc" "$work/cnn.dtf" -o "$work/cnn.plan"

rows=()
notes=()
failed=0
# A row from a run: LABEL LINK IMAGES_PER_S PER_WORKER STEPS SECONDS BYTES_BEFORE BYTES_AFTER CPU ACCURACY
row() {
  python3 - "$@" <<'PY'
import sys
label, link, ips, per, steps, secs, before, after, cpu, acc = sys.argv[1:11]
o0, i0 = map(int, before.split()); o1, i1 = map(int, after.split())
out, into, steps, secs = o1 - o0, i1 - i0, int(steps), float(secs)
rate = {"k": 1e3, "m": 1e6, "g": 1e9}[link[-4]] * float(link[:-4]) / 8
use = max(out, into) / secs / rate
print("| %s | %s | %.0f | %s | %.2f MB | %.0f%% | %s | %s |" % (
    label, link, float(ips), per, (out + into) / steps / 1e6, 100 * use, cpu, acc))
PY
}

# median_of LABEL LINK ROW...: the row with the median images/s (the lower
# middle one of an even count) into rows, every run's figure into notes.
median_of() {
  local label=$1 link=$2 r
  shift 2
  local runs=("$@") ips=()
  for r in "$@"; do ips+=("$(awk -F'|' '{gsub(/ /, "", $4); print $4}' <<<"$r")"); done
  rows+=("${runs[$(bench_median_index "${ips[@]}")]}")
  ((repeat == 1)) ||
    notes+=("- $label, $link: $# runs, images/s $(IFS=/; echo "${ips[*]}" | sed 's#/# / #g'); the table shows the median run")
}

for link in ${links//,/ }; do
  bench_netns_shape "$link"
  if want tf; then
    runs=()
    for ((rep = 1; rep <= repeat; ++rep)); do
      echo "== TensorFlow, 1 ps + 2 workers, links $link$( ((repeat == 1)) || echo ", run $rep of $repeat")"
      before=$(ps_bytes) t0=$SECONDS
      if json=$("$bench_py" "$root/bench/peers/tf_ps_worker.py" --ps 1 --workers 2 --spec "$spec" \
                  --netns "$tag-ps,$tag-w0,$tag-w1" --warmup "$warmup" --steps "$steps" \
                  --data "$data" 2> "$work/tf.err"); then
        after=$(ps_bytes)
        r=$(python3 -c '
import json, sys
r = json.loads(sys.argv[1])
print(r["images_per_sec_sum"], " / ".join("%.0f" % x for x in r["per_worker"]),
      ", ".join("%s %.1f s" % kv for kv in sorted(r["cpu_seconds"].items())).replace(" ", "_"),
      r["framework"])' "$json")
        read -r ips per1 _ per2 tfcpu fw <<<"$r"
        runs+=("$(row "$fw" "$link" "$ips" "$per1 / $per2" $((2 * (warmup + steps))) $((SECONDS - t0)) "$before" "$after" "${tfcpu//_/ }" "not measured")")
        echo "   ${runs[-1]}"
      else
        echo "   failed: $(tail -3 "$work/tf.err")"
        runs=(); failed=1
        break
      fi
    done
    if ((${#runs[@]})); then
      median_of TensorFlow "$link" "${runs[@]}"
    else
      rows+=("| TensorFlow | $link | failed | | | | | |")
    fi
  fi
  for variant in f32 bf16 overlap topk onebit prefetch bf16-prefetch; do
    case $variant in
      f32) want dtf ;; bf16|overlap) want bf16 ;; *prefetch) want prefetch ;; *) want compress ;;
    esac || continue
    label="dtf (mutual TLS)" wire=$variant extra=()
    [[ $variant == bf16 ]] && label="dtf (mutual TLS, --wire bf16)"
    [[ $variant == overlap ]] && label="dtf (mutual TLS, --wire bf16 --overlap-push)" wire=bf16 extra=(--overlap-push)
    [[ $variant == topk ]] && label="dtf (mutual TLS, --wire bf16 --compress-push topk:0.01)" wire=bf16 extra=(--compress-push topk:0.01)
    [[ $variant == onebit ]] && label="dtf (mutual TLS, --wire bf16 --compress-push onebit)" wire=bf16 extra=(--compress-push onebit)
    [[ $variant == prefetch ]] && label="dtf (mutual TLS, --prefetch-pull)" wire=f32 extra=(--prefetch-pull)
    [[ $variant == bf16-prefetch ]] && label="dtf (mutual TLS, --wire bf16 --prefetch-pull)" wire=bf16 extra=(--prefetch-pull)
    runs=() run_notes=()
    for ((rep = 1; rep <= repeat; ++rep)); do
      echo "== $label, 1 ps + 2 workers, links $link$( ((repeat == 1)) || echo ", run $rep of $repeat")"
      before=$(ps_bytes) t0=$SECONDS
      pids=()
      for h in "${hosts[@]}"; do
        # Each host's launcher starts only the task whose address is its own.
        # bash's `times` after it: the user and system seconds of the
        # launcher and the task it started and waited for.
        ( ip netns exec "$tag-$h" "$build/bin/dtf-run" "$work/cnn.plan" --cluster "$work/cluster.json" \
            --tls-dir "$work/tls" --steps $((2 * (warmup + steps))) --log-every $((warmup > 0 ? warmup : steps)) \
            --threads 1 --wire "$wire" "${extra[@]}" --connect-timeout 60 > "$work/$h.$variant.log" 2>&1
          code=$?; times > "$work/$h.$variant.times"; exit $code ) &
        pids+=($!)
      done
      ok=1
      for p in "${pids[@]}"; do wait "$p" || ok=0; done
      after=$(ps_bytes)
      secs=$((SECONDS - t0))
      if [[ $ok != 1 ]]; then
        echo "   failed: $(tail -3 "$work"/*."$variant".log)"
        runs=(); failed=1
        break
      fi
      # Each worker's rate over its timed steps, as TensorFlow's is measured
      # (and as distributed.sh takes dtf's): its final line's examples and
      # training time less the warm-up's, its first progress line
      # (--log-every WARMUP: that interval's own rate).
      rates=$(python3 - "$warmup" "$work"/w[01].$variant.log <<'PY'
import re, sys
warmup = int(sys.argv[1])
for path in sys.argv[2:]:
    text = open(path).read()
    m = re.search(r"^(worker\.\d+) +\| final: steps=(\d+) .*examples_per_sec=([0-9.]+)", text, re.M)
    if not m:
        continue
    task, steps, whole = m.group(1), int(m.group(2)), float(m.group(3))
    batch = re.search(r"^%s +\| training .*, batch (\d+)" % re.escape(task), text, re.M)
    first = re.search(r"^%s +\| step \d+/\d+ .* ([0-9.]+) img/s" % re.escape(task), text, re.M)
    if warmup == 0 or not batch or not first or steps <= warmup:
        print("%.1f" % whole)
        continue
    b = int(batch.group(1))
    print("%.1f" % ((steps - warmup) * b / (steps * b / whole - warmup * b / float(first.group(1)))))
PY
)
      cpu=$(for h in "${hosts[@]}"; do
              python3 - "$h" "$work/$h.$variant.times" <<'PY'
import re, sys
# times: the shell's own user/system line, then its children's.
line = open(sys.argv[2]).read().splitlines()[1]
secs = [int(m) * 60 + float(s) for m, s in re.findall(r"(\d+)m([0-9.]+)s", line)]
print("%s %.1f s" % ({"ps": "ps:0", "w0": "worker:0", "w1": "worker:1"}[sys.argv[1]], sum(secs)))
PY
            done | paste -sd, - | sed 's/,/, /g')
      ips=$(awk '{s+=$1} END{print s}' <<<"$rates")
      acc=$(sed -n 's/^worker.0 *| eval .*accuracy \([0-9.]*\).*/\1/p' "$work/w0.$variant.log" | tail -1)
      runs+=("$(row "$label" "$link" "$ips" "$(paste -sd/ <<<"$rates" | sed 's#/# / #g')" $((2 * (warmup + steps))) "$secs" "$before" "$after" "${cpu:-not measured}" "${acc:-none}")")
      run_notes+=("- $label, $link: final lines: $(grep -h '| final:' "$work"/w[01].$variant.log | sed 's/.*| final: //' | tr '\n' ';')")
      echo "   ${runs[-1]}"
    done
    if ((${#runs[@]})); then
      median_of "$label" "$link" "${runs[@]}"
      notes+=("${run_notes[@]}")
    else
      rows+=("| $label | $link | failed | | | | | |")
    fi
  done
done

table="| framework | links | images/s (sum over workers) | per worker | bytes per step (ps link) | link use | CPU | test accuracy |
| --- | --- | ---: | --- | ---: | ---: | --- | ---: |"
for r in "${rows[@]}"; do table+=$'\n'"$r"; done
echo
echo "$table"
printf '%s\n' "${notes[@]}"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
[[ $out == - ]] && exit $failed
cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
{
  echo "# Seed CNN on hosts with shaped links: TensorFlow's ps/worker runtime and dtf's"
  echo
  echo "Command: \`$cmdline\` ($(date -u '+%Y-%m-%d %H:%M UTC'))."
  echo "Machine: $(nproc) cores ($cpu). Every task is on a host of its own (a network"
  echo "namespace on a veth link to a bridge), every link shaped with tc tbf to the rate"
  echo "given, both ways; all tasks share the machine's cores. Load average (1, 5, 15"
  echo "min) $load_before before, $load_after after."
  echo
  echo "Model: models/mnist_cnn.dtf (6.5 MB of float32 variables), Adam 1e-4, 1 ps + 2"
  echo "workers, asynchronous, batch 50 per worker and step, $warmup warm-up + $steps timed"
  echo "steps per worker (both figures leave the warm-up out: dtf's from each worker's final"
  echo "line less its first progress line, at the end of the warm-up)."
  echo "Bytes per step: both directions of the ps host's link over all the workers' steps."
  echo "Test accuracy: the chief's evaluation of the 10,000 test images once the last of"
  echo "the $((2 * (warmup + steps))) global steps is done (outside the timed figures)."
  echo
  echo "$table"
  echo
  printf '%s\n' "${notes[@]}"
} > "$out"
echo "written to ${out#"$root"/}"
exit $failed
