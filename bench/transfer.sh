#!/usr/bin/env bash
# Pull/push bandwidth of one large f32 tensor through dtf's ps service, as one
# gRPC message and as a stream of chunks, beside loopback TCP
# (dtf-transfer-bench, a ps in the same process on 127.0.0.1). Prints the
# table and writes it to results/transfer.md.
#
#   usage: bench/transfer.sh [options]
#     --build DIR        dtf build directory with bin/dtf-transfer-bench
#                        (default: ./build of this checkout)
#     --mb LIST          tensor sizes in MB (default 256,1024,2560; 2560
#                        needs about 11 GB of memory: the ps's variable and
#                        its pull copy, the received push, the worker's copy)
#     --repeat N         rounds per size, the best counts (default 5)
#     --chunk-bytes N    stream chunk size (default 4194304)
#     --out FILE         results file (default bench/results/transfer.md;
#                        "-" writes none)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
mb=256,1024,2560
repeat=5
chunk=4194304
out=$root/bench/results/transfer.md
cmdline="bench/transfer.sh${*:+ $*}"
die() { echo "transfer.sh: $*" >&2; exit 2; }
while (($#)); do
  case $1 in
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --mb) mb=${2:?--mb needs sizes}; shift 2 ;;
    --repeat) repeat=${2:?--repeat needs a count}; shift 2 ;;
    --chunk-bytes) chunk=${2:?--chunk-bytes needs bytes}; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
bench=$build/bin/dtf-transfer-bench
[[ -x $bench ]] || die "$bench is not built (ninja -C $build dtf-transfer-bench)"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
table=$("$bench" --mb "$mb" --repeat "$repeat" --chunk-bytes "$chunk")
# A transfer of one chunk or less: one message or a stream of one chunk
# (why dtf-run streams only what is larger than a chunk).
small=$("$bench" --mb 1 --repeat 30 --chunk-bytes "$chunk")
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
echo "$table"
echo "$small"
[[ $out == - ]] && exit 0
cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
{
  echo "# Moving one large tensor between tasks: one message or a stream of chunks"
  echo
  echo "Command: \`$cmdline\` ($(date -u '+%Y-%m-%d %H:%M UTC'))."
  echo "Machine: $(nproc) cores ($cpu), $(awk '/^MemTotal/ {printf "%.0f GB", $2 / 1e6}' /proc/meminfo);"
  echo "load average (1, 5, 15 min) $load_before before, $load_after after."
  if awk -v l="${load_before%% *}" -v n="$(nproc)" 'BEGIN { exit !(l > n / 2) }'; then
    echo "**The machine was busy with other work (load above half its cores): these"
    echo "figures are noisy; rerun on an idle machine before quoting them.**"
  fi
  echo
  echo "dtf-transfer-bench starts a ps task in its own process on a loopback port,"
  echo "holding one f32 variable of each size, and times a worker's pull of it"
  echo "(into the worker's tensor) and push of a gradient of that size (the ps"
  echo "applies sgd before it answers) through the gRPC calls dtf-run uses: Pull/Push"
  echo "(one raw message) and PullStream/PushStream (chunks, docs/protocol.md)."
  echo "Loopback TCP: the same bytes through one socket into a buffer. MB = 10^6 bytes."
  echo
  echo "$table"
  echo
  echo "A transfer that fits one chunk (1 MB), as one message and as a stream of one"
  echo "chunk (\`dtf-transfer-bench --mb 1 --repeat 30 --chunk-bytes $chunk\`): the"
  echo "stream's extra round trips (the request, then the chunks, then the status,"
  echo "each waited for) make it slower, so dtf-run streams only transfers larger"
  echo "than one chunk:"
  echo
  echo "$small"
} > "$out"
echo "written to ${out#"$root"/}"
