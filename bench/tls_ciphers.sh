#!/usr/bin/env bash
# The TLS 1.3 ciphers' speed on this CPU through the OpenSSL that dtf's gRPC
# links (`openssl speed -evp`, 16 KB: one full TLS record), per CPU second:
# the measurement behind the suite order every dtf task offers
# (runtime/distributed/TlsCipher.h, docs/security.md). Writes
# results/tls_ciphers.md. No peer: this compares ciphers, not frameworks.
#
#   usage: bench/tls_ciphers.sh [--repeat N] [--seconds S] [--out FILE]
#     --repeat N    runs of each cipher, interleaved (default 3)
#     --seconds S   seconds per run (default 4)
#     --out FILE    results file (default bench/results/tls_ciphers.md; "-"
#                   writes none)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
repeat=3 seconds=4 out=$root/bench/results/tls_ciphers.md
cmdline="bench/tls_ciphers.sh${*:+ $*}"
die() { echo "tls_ciphers.sh: $*" >&2; exit 2; }
while (($#)); do
  case $1 in
    --repeat) repeat=${2:?--repeat needs a count}; shift 2 ;;
    --seconds) seconds=${2:?--seconds needs a number}; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ $repeat =~ ^[1-9][0-9]*$ ]] || die "--repeat takes a positive count, not '$repeat'"
[[ $seconds =~ ^[1-9][0-9]*$ ]] || die "--seconds takes a positive number, not '$seconds'"
command -v openssl > /dev/null || die "openssl is not installed (scripts/setup.sh installs it)"

ciphers=(aes-128-gcm aes-256-gcm chacha20-poly1305)
declare -A runs
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for ((i = 1; i <= repeat; ++i)); do
  for c in "${ciphers[@]}"; do
    # The last column of the result line: bytes per second in 16384-byte
    # blocks, in thousands ("4312345.67k").
    k=$(openssl speed -seconds "$seconds" -bytes 16384 -evp "$c" 2> /dev/null |
      awk 'NF > 1 && $NF ~ /k$/ {v = $NF} END {sub(/k$/, "", v); print v}')
    [[ -n $k ]] || die "openssl speed printed no figure for $c"
    runs[$c]+=" $(python3 -c "print('%.2f' % (float('$k') * 1000 / 1e9))")"
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

table="| cipher (TLS 1.3 suite) | GB/s per CPU second, each run | best |"$'\n'"| --- | --- | ---: |"
for c in "${ciphers[@]}"; do
  best=$(tr ' ' '\n' <<< "${runs[$c]}" | grep . | sort -n | tail -1)
  table+=$'\n'"| $c | $(sed 's/^ //; s/ /, /g' <<< "${runs[$c]}") | $best |"
done
echo "$table"
[[ $out == - ]] && exit 0
busy=$(awk -v l="${load_before%% *}" -v n="$(nproc)" 'BEGIN {print (l > n / 2) ? 1 : 0}')
{
  echo "# TLS 1.3 ciphers on this CPU (bench/tls_ciphers.sh)"
  echo
  echo "Command: \`$cmdline\` ($(date -u '+%Y-%m-%d %H:%M UTC'))."
  echo "Machine: $(nproc) cores ($(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo);" \
    "$(grep -o -w -E 'aes|vaes|vpclmulqdq|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' ' | sed 's/ $//'));"
  echo "load average (1, 5, 15 min) $load_before before, $load_after after."
  echo "$(openssl version). \`openssl speed -seconds $seconds -bytes 16384 -evp CIPHER\`,"
  echo "$repeat runs of each, interleaved; one OpenSSL thread, so GB/s per CPU second."
  ((busy)) && echo "**The machine was busy with other work (load above half its cores): these figures are noisy.**"
  echo
  echo "$table"
  echo
  echo "dtf offers TLS_AES_128_GCM_SHA256 first (runtime/distributed/TlsCipher.h)."
} > "$out"
echo "written to $out"
