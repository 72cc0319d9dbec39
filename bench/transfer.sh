#!/usr/bin/env bash
# Pull/push bandwidth of one large f32 tensor through dtf's ps service, as one
# gRPC message and as a stream of chunks, beside loopback TCP
# (dtf-transfer-bench, a ps in the same process on 127.0.0.1), as the tasks
# of a job talk: plaintext (--insecure), mutual TLS over TCP (dtf's default
# between hosts), the Unix socket (--same-host unix) and the Unix socket with
# the tensors in shared memory (--same-host shm, dtf's default on one host;
# one message only: no streams); each with
# the ps's reused transfer buffers and, for a before/after in the same run,
# with fresh ones (--fresh-buffers, the path before). Prints the tables and
# writes them to results/transfer.md.
#
#   usage: bench/transfer.sh [options]
#     --build DIR        dtf build directory with bin/dtf-transfer-bench and
#                        bin/dtf-run (default: ./build of this checkout)
#     --mb LIST          sizes in MB of the per-size table, plaintext
#                        (default 256,1024; 2560 streams only and needs about
#                        11 GB of memory)
#     --repeat N         rounds per measurement, the best counts (default 5)
#     --chunk-bytes N    stream chunk size (default 4194304)
#     --out FILE         results file (default bench/results/transfer.md;
#                        "-" writes none)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
mb=256,1024
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
[[ -x $build/bin/dtf-run ]] || die "$build/bin/dtf-run is not built (it makes the certificates)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo '{"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:1"]}' > "$work/cluster.json"
"$build/bin/dtf-run" certs --cluster "$work/cluster.json" --out "$work/certs" > /dev/null
export DTF_SOCKET_DIR=$work/sockets

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
# One 256 MB row per wiring and buffer path; the bench's last line says how
# it ran, which becomes the row's label.
wirings=("" "--tls-dir $work/certs --same-host tcp" "--tls-dir $work/certs --same-host unix"
         "--tls-dir $work/certs --same-host shm")
rows="" head=""
for wiring in "${wirings[@]}"; do
  for fresh in --fresh-buffers ""; do
    # shellcheck disable=SC2086
    t=$("$bench" --mb 256 --repeat "$repeat" --chunk-bytes "$chunk" $wiring $fresh)
    [[ -n $head ]] || head=$(sed -n '1,2p' <<<"$t")
    label=$(tail -1 <<<"$t" | sed 's/.*variable; //')
    rows+="${rows:+$'\n'}$(sed -n '3p' <<<"$t" | sed "s/^| 256 MB /| 256 MB, $label /")"
    echo "$rows" | tail -1
  done
done
table=$("$bench" --mb "$mb" --repeat "$repeat" --chunk-bytes "$chunk")
# A transfer of one chunk or less: one message or a stream of one chunk
# (why dtf-run streams only what is larger than a chunk).
small=$("$bench" --mb 1 --repeat 30 --chunk-bytes "$chunk")
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
echo "$table"
echo "$small"

# Each wiring: the best pull and push as a share of the loopback TCP of its
# own row, and the reused buffers against fresh ones (after / before).
ratios=$(python3 - "$rows" <<'EOF'
import re, sys
rows = [l for l in sys.argv[1].splitlines() if l.startswith('|')]
def rates(line):
    # Each cell's MB/s; 0 for one not measured ("n/a": shared memory has
    # no streams).
    cells = [c for c in line.split('|')[2:] if c.strip()]
    return [float(m.group(1)) if (m := re.search(r'(\d+) MB/s', c)) else 0.0
            for c in cells]
print('| wiring | pull: % of loopback TCP (before -> after) | push: % of loopback TCP (before -> after) | pull after / before | push after / before |')
print('| --- | ---: | ---: | ---: | ---: |')
for before, after in zip(rows[0::2], rows[1::2]):
    wiring = re.sub(r'^\| 256 MB, fresh buffers \(the old path\), ', '', before.split(' |')[0])
    b, a = rates(before), rates(after)
    pb, pa = max(b[0], b[1]), max(a[0], a[1])
    sb, sa = max(b[2], b[3]), max(a[2], a[3])
    print('| %s | %.0f%% -> %.0f%% | %.0f%% -> %.0f%% | %.2fx | %.2fx |' % (
        wiring, 100 * pb / b[4], 100 * pa / a[4], 100 * sb / b[4],
        100 * sa / a[4], pa / pb, sa / sb))
EOF
)
echo "$ratios"
[[ $out == - ]] && exit 0
cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
isa=$(grep -q -w avx512f /proc/cpuinfo && echo AVX-512 || { grep -q -w avx2 /proc/cpuinfo && echo AVX2; } || true)
aes=$(grep -q -w vaes /proc/cpuinfo && echo "VAES, " || true)
{
  echo "# Moving one large tensor between tasks: one message or a stream of chunks"
  echo
  echo "Command: \`$cmdline\` ($(date -u '+%Y-%m-%d %H:%M UTC'))."
  echo "Machine: $(nproc) cores ($cpu, ${aes}${isa:-no AVX2}), $(awk '/^MemTotal/ {printf "%.0f GB", $2 / 1e6}' /proc/meminfo);"
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
  echo "Loopback TCP: the same bytes through one socket into a buffer, measured in"
  echo "the same run after each row. MB = 10^6 bytes."
  echo
  echo "## 256 MB as the tasks of a job talk, before and after"
  echo
  echo "Plaintext (\`--insecure\`), mutual TLS over TCP (between hosts; TLS 1.3,"
  echo "docs/security.md), the Unix socket (\`--same-host unix\`) and the Unix socket"
  echo "with the tensor bytes in shared memory (\`--same-host shm\`, dtf-run's default"
  echo "on one host; no streams: n/a). \"fresh buffers"
  echo "(the old path)\" rows run \`--fresh-buffers\`: the ps allocates every pull"
  echo "snapshot and pushed value anew, as before it kept them (docs/protocol.md,"
  echo "\"Buffers\"); the other rows are dtf as it is."
  echo
  echo "$head"
  echo "$rows"
  echo "best of $repeat; chunks of $chunk bytes"
  echo
  echo "The best of one message and streamed, as a share of the row's loopback TCP:"
  echo
  echo "$ratios"
  echo
  echo "## Sizes (plaintext)"
  echo
  echo "$table"
  echo
  echo "## One chunk or less"
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
