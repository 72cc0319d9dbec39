#!/usr/bin/env bash
# Distributed training throughput of the seed CNN (models/mnist_cnn.dtf) on
# one machine: every ps and worker task a separate process on 127.0.0.1,
# asynchronous between-graph replication, batch 50 per worker and step, in
# TensorFlow's classic tf.compat.v1 ps/worker runtime and in dtf's, beside the machine's loopback TCP bandwidth. Prints a table and
# writes it to results/distributed.md.
#
#   usage: bench/distributed.sh [options]
#     --build DIR     dtf build directory with bin/dtfc and bin/dtf-run
#                     (default: ./build of this checkout)
#     --warmup N      untimed steps per worker (default 50)
#     --steps N       timed steps per worker (default 300)
#     --clusters L    comma-separated PSxWORKERS shapes (default 1x2,2x2)
#     --only LIST     comma-separated subset of bw,tf,dtf (default all)
#     --repeat N      runs of each cluster (TensorFlow's and each of dtf's
#                     variants), one after another; the table shows the
#                     run with the median images/s and the notes list all
#                     (default 1)
#     --variants LIST dtf's runs, a comma-separated subset of shm (the
#                     launcher's default, "default: shared memory": the
#                     calls over Unix sockets, the tensors in shared memory),
#                     unix (--same-host unix: the tensors in the sockets too),
#                     tcp, insecure, bf16, prefetch, tcp-prefetch (bf16 with
#                     --wire bf16, the last two with --prefetch-pull; bf16
#                     and prefetch over the default; default all)
#     --out FILE      results file (default bench/results/distributed.md;
#                     "-" writes none)
#
#   environment: DTF_BENCH_VENV, DTF_BENCH_TORCH, DTF_BENCH_TF (see
#   bench/venv.sh), DTF_BENCH_DATA (default /usr/share/datasets/fashion-mnist)
#
# images/s is the sum over the workers of each worker's rate over its timed
# steps; "span" is all workers' timed images over the time from the first
# worker's first timed step to the last worker's last. Peak RSS is the sum
# over all tasks of each process's maximum resident set size.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
warmup=50
steps=300
clusters=1x2,2x2
only=bw,tf,dtf
variants=shm,unix,tcp,insecure,bf16,prefetch,tcp-prefetch
repeat=1
out=$root/bench/results/distributed.md
cmdline="bench/distributed.sh${*:+ $*}"

die() { echo "distributed.sh: $*" >&2; exit 2; }
while (($#)); do
  case $1 in
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --warmup) [[ ${2-} =~ ^[0-9]+$ ]] || die "--warmup needs a count, got '${2-}'"; warmup=$2; shift 2 ;;
    --steps) [[ ${2-} =~ ^[1-9][0-9]*$ ]] || die "--steps needs a positive count, got '${2-}'"; steps=$2; shift 2 ;;
    --clusters) clusters=${2:?--clusters needs a list}; shift 2 ;;
    --only) only=${2:?--only needs a list}; shift 2 ;;
    --repeat) [[ ${2-} =~ ^[1-9][0-9]*$ ]] || die "--repeat needs a positive count, got '${2-}'"; repeat=$2; shift 2 ;;
    --variants) variants=${2:?--variants needs a list}; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for f in ${only//,/ }; do
  case $f in bw|tf|dtf) ;; *) die "--only: unknown part '$f' (bw, tf, dtf)" ;; esac
done
for v in ${variants//,/ }; do
  case $v in shm|unix|tcp|insecure|bf16|prefetch|tcp-prefetch) ;;
    *) die "--variants: unknown run '$v' (shm, unix, tcp, insecure, bf16, prefetch, tcp-prefetch)" ;; esac
done
for c in ${clusters//,/ }; do
  [[ $c =~ ^[1-9][0-9]*x[1-9][0-9]*$ ]] || die "--clusters: '$c' is not PSxWORKERS (e.g. 2x2)"
done
want() { [[ ",$only," == *",$1,"* ]]; }
data=${DTF_BENCH_DATA:-/usr/share/datasets/fashion-mnist}
[[ -e $data/train-images-idx3-ubyte.gz || -e $data/train-images-idx3-ubyte ]] ||
  die "$data: no Fashion-MNIST train-images-idx3-ubyte[.gz] (set DTF_BENCH_DATA)"

# shellcheck source=bench/venv.sh
source "$root/bench/venv.sh"
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
if want tf; then
  bench_venv || exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
rows=()
notes=()
failed=0  # a failed run is reported in its row; the script then exits 1

# Loopback TCP bandwidth: what any runtime here can move between its tasks.
bw="not measured"
if want bw; then
  echo "== loopback TCP bandwidth (256 MB, best of 3)"
  bw=$(bench_loopback_bw)
  echo "   $bw"
  echo "== dtf push/pull of one 256 MB tensor through the ps service, one message and streamed (best of 5)"
  if [[ -x $build/bin/dtf-transfer-bench ]]; then
    # As the tasks of a job on one host talk: plaintext (--insecure), mutual
    # TLS over TCP (--same-host tcp), the Unix socket (--same-host unix) and
    # the default, the Unix socket with the tensors in shared memory.
    echo '{"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:1"]}' > "$work/transfer.json"
    "$build/bin/dtf-run" certs --cluster "$work/transfer.json" --out "$work/transfer-certs" > /dev/null
    transfer=""
    for wiring in "" "--tls-dir $work/transfer-certs --same-host tcp" "--tls-dir $work/transfer-certs --same-host unix" "--tls-dir $work/transfer-certs --same-host shm"; do
      # shellcheck disable=SC2086
      t=$("$build/bin/dtf-transfer-bench" --mb 256 --repeat 5 $wiring)
      transfer+="${transfer:+$'\n'}$(sed -n '3p' <<<"$t" | sed "s/^| 256 MB /| 256 MB, $(tail -1 <<<"$t" | sed 's/.*; //') /")"
      [[ -n ${transfer_head:-} ]] || transfer_head=$(sed -n '1,2p' <<<"$t")
    done
    transfer="$transfer_head"$'\n'"$transfer"$'\n'"best of 5; chunks of 4 MiB; a push includes the ps applying sgd to the variable"
  else
    transfer="not measured ($build/bin/dtf-transfer-bench is not built)"
  fi
  echo "$transfer" | sed 's/^/   /'
fi

# TensorFlow's own ps/worker runtime.
if want tf; then
  for c in ${clusters//,/ }; do
    ps=${c%x*} workers=${c#*x}
    echo "== TensorFlow, $ps ps + $workers workers"
    jsons=() tf_failed=0
    for ((rep = 1; rep <= repeat; ++rep)); do
      if ! json=$("$bench_py" "$root/bench/peers/tf_ps_worker.py" --ps "$ps" --workers "$workers" \
                    --warmup "$warmup" --steps "$steps" --data "$data" 2> "$work/tf.$c.err"); then
        tf_failed=1
        break
      fi
      jsons+=("$json")
      ((repeat == 1)) || echo "   run $rep: $(python3 -c 'import json, sys; print("%.0f images/s" % json.loads(sys.argv[1])["images_per_sec_sum"])' "$json")"
    done
    if ((tf_failed)); then
      why=$(grep '^tf_ps_worker:' "$work/tf.$c.err" | head -1)
      echo "   failed: ${why:-see its stderr below}"
      [[ -n $why ]] || tail -5 "$work/tf.$c.err"
      rows+=("| TensorFlow | $ps ps + $workers workers | failed | | | |")
      notes+=("- TensorFlow $ps ps + $workers workers: failed: ${why:-$(tail -1 "$work/tf.$c.err")}")
      failed=1
      continue
    fi
    # The run with the median images/s (the lower middle one of an even count).
    json=$(python3 -c '
import json, sys
runs = sorted((json.loads(j) for j in sys.argv[1:]), key=lambda r: r["images_per_sec_sum"])
print(json.dumps(runs[(len(runs) - 1) // 2]))' "${jsons[@]}")
    ((repeat == 1)) || notes+=("- TensorFlow $ps ps + $workers workers: $repeat runs, images/s $(python3 -c '
import json, sys
print(" / ".join("%.0f" % json.loads(j)["images_per_sec_sum"] for j in sys.argv[1:]))' "${jsons[@]}"); the table shows the median run")
    echo "$json" > "$work/tf.$c.json"
    row=$(python3 -c '
import json, sys
r = json.loads(sys.argv[1])
print("| %s | %d ps + %d workers | %.0f | %.0f | %s | %.0f |" % (
    r["framework"], r["ps"], r["workers"], r["images_per_sec_sum"],
    r["images_per_sec_span"], " / ".join("%.0f" % x for x in r["per_worker"]),
    r["peak_rss_mb_total"]))' "$json")
    echo "   $row"
    rows+=("$row")
    notes+=("$(python3 -c '
import json, sys
r = json.loads(sys.argv[1])
print("- TensorFlow %d ps + %d workers: threads %s; peak RSS per task (MB) %s; worker loss over the last 50 timed steps %s" % (
    r["ps"], r["workers"], r["threads"], r["peak_rss_mb"], r["loss_last_50"]))' "$json")")
  done
fi

# dtf's own runtime: dtf-run launching and supervising all local tasks
# (`dtf-run plan.bin --cluster cluster.json`). Its steps count globally over
# all workers; each worker's final line gives its examples_per_sec over all of
# its steps, the warm-up included (dtf-run has no option to leave it out), so
# dtf's figure here is, if anything, low. Workers get 1 intra-op thread each,
# as TensorFlow's do. Peak RSS: the launcher prints each task's pid; VmHWM
# (the process's own peak RSS) is sampled from /proc every 0.1 s and the last
# value seen for each task is summed.
if want dtf; then
  if [[ -x $build/bin/dtfc && -x $build/bin/dtf-run ]]; then
    grep -v '^[[:space:]]*eval[[:space:]]*=' "$root/models/mnist_cnn.dtf" |
      sed "s#idx(\"/usr/share/datasets/fashion-mnist\"#idx(\"$data\"#" > "$work/cnn.dtf"
    "$build/bin/dtfc" "$work/cnn.dtf" -o "$work/cnn.plan"
    # Each cluster several times: as the launcher runs it by default (mutual
    # TLS, Unix sockets between the tasks on this host and the tensors of
    # pulls and pushes in shared memory), over the Unix sockets alone
    # (--same-host unix, as the default was before), with TLS over
    # TCP between them too (--same-host tcp, as between hosts), in
    # plaintext (--insecure), to show what TLS and the sockets cost, and
    # with bfloat16 pulls and pushes (--wire bf16, half the bytes); and the
    # default and TLS over TCP with each step's next pull beside its compute
    # (--prefetch-pull).
    for c in ${clusters//,/ }; do
     for sec in ${variants//,/ }; do
      ps=${c%x*} workers=${c#*x}
      # The default's label is the one bench/readme_figures.py reads.
      label="dtf (Unix sockets only, --same-host unix)" secflags=(--same-host unix)
      [[ $sec == shm ]] && label="dtf (default: shared memory)" secflags=()
      [[ $sec == bf16 ]] && label="dtf (shared memory, --wire bf16)" secflags=(--wire bf16)
      [[ $sec == tcp ]] && label="dtf (mutual TLS over TCP)" secflags=(--same-host tcp)
      [[ $sec == insecure ]] && label="dtf (--insecure, TCP)" secflags=(--insecure)
      [[ $sec == prefetch ]] && label="dtf (shared memory, --prefetch-pull)" secflags=(--prefetch-pull)
      [[ $sec == tcp-prefetch ]] && label="dtf (mutual TLS over TCP, --prefetch-pull)" secflags=(--same-host tcp --prefetch-pull)
      echo "== $label, $ps ps + $workers workers"
      runs=() run_rows=() run_notes=()
      for ((rep = 1; rep <= repeat; ++rep)); do
        bench_cluster_json "$ps" "$workers" > "$work/cluster.json"
        o=$work/dtf.$c.$sec.$rep.out
        if ! bench_dtf_cluster "$o" "$build/bin/dtf-run" "$work/cnn.plan" --cluster "$work/cluster.json" \
             --steps $(((warmup + steps) * workers)) --log-every $((warmup > 0 ? warmup : steps)) --threads 1 \
             "${secflags[@]}"; then
          runs=()
          break
        fi
        row=$(python3 - "$o" "$ps" "$workers" "$label" "$warmup" "${bench_hwm[@]}" <<'PYEOF'
import re, sys
out, ps, workers, label, warmup, rss = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                                        sys.argv[4], int(sys.argv[5]), sys.argv[6:])
text = open(out).read()
# Each worker's rate over its timed steps, as TensorFlow's is measured: its
# training time and examples (the final line) less the warm-up's, its first
# progress line (--log-every WARMUP: that interval's own rate).
rates = []
for m in re.finditer(r"^(worker\.\d+) +\| final: steps=(\d+) .*examples_per_sec=([0-9.]+)", text, re.M):
    task, steps, whole = m.group(1), int(m.group(2)), float(m.group(3))
    batch = re.search(r"^%s +\| training .*, batch (\d+)" % re.escape(task), text, re.M)
    first = re.search(r"^%s +\| step \d+/\d+ .* ([0-9.]+) img/s" % re.escape(task), text, re.M)
    if warmup == 0 or not batch or not first or steps <= warmup:
        rates.append(whole)
        continue
    b = int(batch.group(1))
    rates.append((steps - warmup) * b / (steps * b / whole - warmup * b / float(first.group(1))))
if len(rates) != workers:
    sys.exit("distributed.sh: dtf-run printed %d final lines for %d workers" % (len(rates), workers))
total = sum(int(k) for k in rss) / 1024.0
print("| %s | %d ps + %d workers | %.0f | | %s | %.0f |" % (
    label, ps, workers, sum(rates), " / ".join("%.0f" % r for r in rates), total))
PYEOF
) || die "could not read dtf's figures from $o"
        per=""
        for t in "${!bench_hwm[@]}"; do per+="${per:+, }$t $((bench_hwm[$t] / 1024))"; done
        cpus=""
        for t in $(printf '%s\n' "${!bench_cpu[@]}" | sort); do cpus+="${cpus:+, }$t ${bench_cpu[$t]}"; done
        runs+=("$(awk -F'|' '{gsub(/ /, "", $4); print $4}' <<<"$row")")
        run_rows+=("$row")
        run_notes+=("- $label $ps ps + $workers workers: 1 thread per worker; peak RSS per task (MB) $per; CPU seconds per task (user + system) $cpus; images/s over the timed steps (the final line's examples and time less the first progress line's, the warm-up); $(grep -c '| final:' "$o") final lines: $(grep '| final:' "$o" | sed 's/.*| final: //' | tr '\n' ';')")
        ((repeat == 1)) || echo "   run $rep: ${runs[-1]} images/s"
      done
      if ((${#runs[@]})); then
        # The run with the median images/s (the lower middle one of an even count).
        m=$(bench_median_index "${runs[@]}")
        row=${run_rows[$m]}
        notes+=("${run_notes[$m]}")
        ((repeat == 1)) || notes+=("  ($repeat runs, images/s $(IFS=/; echo "${runs[*]}" | sed 's#/# / #g'); the table shows the median run)")
      else
        echo "   dtf-run --cluster failed: $(tail -1 "$o")"
        row="| $label | $ps ps + $workers workers | failed | | | |"
        failed=1
        notes+=("- $label $ps ps + $workers workers: dtf-run --cluster failed: $(grep -v '^\[launcher\]' "$o" | tail -1)")
      fi
      echo "   $row"
      rows+=("$row")
     done
    done
  else
    echo "== dtf: $build/bin/dtf-run not built; skipped"
    notes+=("- dtf: not run ($build/bin/dtf-run not built)")
  fi
fi
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

table="| framework | cluster | images/s (sum over workers) | images/s (span) | per worker | peak RSS MB (all tasks) |
| --- | --- | ---: | ---: | --- | ---: |"
for r in "${rows[@]}"; do table+=$'\n'"$r"; done
echo
echo "loopback TCP: $bw"
echo "dtf pull/push:"
echo "${transfer:-not measured}"
echo "$table"
printf '%s\n' "${notes[@]}"

[[ $out == - ]] && exit $failed
cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
{
  echo "# Seed CNN, distributed on one machine: TensorFlow's ps/worker runtime and dtf's"
  echo
  echo "Command: \`$cmdline\` ($(date -u '+%Y-%m-%d %H:%M UTC'))."
  echo "Machine: $(nproc) cores ($cpu); load average (1, 5, 15 min) $load_before before,"
  echo "$load_after after. Every task is a process on 127.0.0.1; all share the cores."
  if awk -v l="${load_before%% *}" -v n="$(nproc)" 'BEGIN { exit !(l > n / 2) }'; then
    echo "**The machine was busy with other work (load above half its cores): these"
    echo "figures are noisy; rerun on an idle machine before quoting them.**"
  fi
  echo
  echo "Model: models/mnist_cnn.dtf (1,625,606 parameters, 6.5 MB of float32), Adam 1e-4,"
  echo "asynchronous between-graph replication, batch 50 per worker and step,"
  echo "variables round robin over the ps tasks; $warmup warm-up + $steps timed steps per worker."
  echo "Each step a worker pulls every variable and pushes every gradient:"
  echo "about 13 MB of traffic, so at 1,000 images/s (20 steps/s) about 260 MB/s."
  echo
  echo "Loopback TCP bandwidth (one connection, Python sockets, 256 MB): $bw."
  echo ""
  echo "dtf's pull and push of one 256 MB f32 tensor through the ps service (gRPC, the raw tensor messages and streams dtf-run uses; \`dtf-transfer-bench --mb 256 --repeat 5 [--tls-dir DIR --same-host tcp|unix|shm]\`, a ps in the same process on loopback; larger sizes in results/transfer.md):"
  echo
  echo "${transfer:-not measured}"
  echo
  echo "$table"
  echo
  printf '%s\n' "${notes[@]}"
} > "$out"
echo
echo "written to ${out#"$root"/}"
exit $failed
