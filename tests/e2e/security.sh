#!/usr/bin/env bash
# Attacks on a running 1 ps + 2 worker job, in real processes on 127.0.0.1
# with real TLS (docs/security.md). The job runs with certificates from
# `dtf-run certs`; while it trains, dtf-intruder calls its ps: in plaintext,
# with TLS but no client certificate, with a certificate of another CA (each
# must be cut off in the handshake), and with worker.1's own certificate
# (which must be let in for GetStatus, so that the refusals are not a broken
# client): the chief-only calls (Shutdown, Initialize, Save), a push of NaN
# gradients claiming to be worker.0 (refused, naming worker.1: the identity
# is the certificate's), a push moving the global step by 2,000,000, a pull
# naming one variable 400 times and 40 pulls waiting at once (all but 16
# refused), and 20 push streams that stall inside a 1 MiB header (8 taken,
# then cut after --stall-timeout; the others refused at once). The chief's
# own certificate may not save outside the model
# directory. The ps must listen only on its cluster address (127.0.0.1, not
# 127.0.0.2), a task without certificates must refuse to start and say how
# to make them, and the job must train to the end with a finite loss. The
# tasks talk over Unix sockets in a directory of mode 0700 (one that others
# may enter is refused): there the workers' connections are, the same
# attacks are refused by the names the calls carry, a call without this
# job's CA token or naming no task of it is refused, and another user's
# connect is refused by the kernel.
# usage: security.sh BIN_DIR WORK_DIR [STEPS]
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$1" "$2"
rm -rf "$work" && mkdir -p "$work"
# Long enough that the attacks end before the job does (the test fails
# saying so otherwise, and prints where they ended): on the idle 2-core
# machine they ended at step 4,921 of the plain dtf-run's job and at 3,006
# of the sanitized one's (3x slower) before the 1.5 GiB push; 6000 steps
# once finished first on a loaded CI machine, and 12000 on an idle one
# with the 1.5 GiB push, whose attacks then ended at step 10,879 (13,027
# beside the sanitized run).
steps=${3:-26000}
sed -e "s/steps = 10000/steps = $steps/" -e "s/every = 2000/every = $steps/" \
    -e 's/update = sync(replicas_to_aggregate = 2, total_num_replicas = 3)/update = async/' \
    "$root/models/mlp.dtf" > "$work/sec.dtf"
"$bin/dtfc" "$work/sec.dtf" -o "$work/sec.plan"
cluster_json "$work/c.json" 1 2
"$bin/dtf-run" certs --cluster "$work/c.json" --out "$work/certs" > /dev/null
"$bin/dtf-run" certs --cluster "$work/c.json" --out "$work/other" > /dev/null
ps=$(python3 -c "import json;print(json.load(open('$work/c.json'))['ps'][0])")
port=${ps##*:}
failures=0
bad() { echo "e2e: FAIL: $*" >&2; failures=$((failures + 1)); }
# answers_only HOST OTHER PORT: HOST:PORT takes a connection, OTHER:PORT not.
answers_only() {
  python3 - "$@" <<'PY'
import socket, sys
host, other, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
socket.create_connection((host, port), timeout=2).close()
try:
    socket.create_connection((other, port), timeout=2).close()
except OSError:
    sys.exit(0)
sys.exit(1)
PY
}

echo "== a task without certificates refuses to start"
set +e
env -u DTF_TLS_DIR "$bin/dtf-run" "$work/sec.plan" --cluster "$work/c.json" --job worker --task 1 \
  > "$work/notls.log" 2>&1
code=$?
set -e
if [ "$code" -ne 2 ] || ! grep -q "no TLS certificates.*dtf-run certs" "$work/notls.log"; then
  bad "a task without TLS material: exit $code: $(cat "$work/notls.log")"
else
  echo "   ok: exit 2: $(cut -c1-100 "$work/notls.log")"
fi

set +e
"$bin/dtf-run" "$work/sec.plan" --cluster "$work/c.json" --job worker --task 1 \
  --tls-dir "$work/nowhere" > "$work/nodir.log" 2>&1
code=$?
set -e
if [ "$code" -ne 4 ] || ! grep -q "cannot read $work/nowhere/ca.pem.*dtf-run certs" "$work/nodir.log"; then
  bad "a task with a missing --tls-dir: exit $code: $(cat "$work/nodir.log")"
else
  echo "   ok: exit 4: $(cut -c1-100 "$work/nodir.log")"
fi

echo "== --bind: a ps started alone listens where it is told, only there"
cluster_json "$work/b.json" 1 1
bport=$(python3 -c "import json;print(json.load(open('$work/b.json'))['ps'][0].split(':')[1])")
"$bin/dtf-run" certs --cluster "$work/b.json" --out "$work/bcerts" > /dev/null
"$bin/dtf-run" "$work/sec.plan" --cluster "$work/b.json" --job ps --task 0 \
  --tls-dir "$work/bcerts" --bind "127.0.0.3:$bport" > "$work/bind.log" 2>&1 &
bps=$!
for _ in $(seq 1 100); do grep -q "serving on" "$work/bind.log" && break; sleep 0.1; done
if grep -q "serving on 127.0.0.3:$bport (mutual TLS)" "$work/bind.log" &&
   answers_only 127.0.0.3 127.0.0.1 "$bport"; then echo "   ok: 127.0.0.3:$bport answers, 127.0.0.1:$bport does not"
else bad "--bind 127.0.0.3:$bport: $(cat "$work/bind.log")"; fi
kill -INT "$bps"; wait "$bps" || true

echo "== a socket directory that others may enter is refused"
# The tasks on one host talk over Unix sockets in a directory only this
# user may enter; one of mode 0777 (or another user's) is not used.
sockets=/tmp/dtf-sec-$$
badsockets=/tmp/dtf-sec-bad-$$
rm -rf "$sockets" "$badsockets" && mkdir -m 0777 "$badsockets"
trap 'rm -rf "$sockets" "$badsockets"' EXIT
set +e
DTF_SOCKET_DIR=$badsockets timeout 60 "$bin/dtf-run" "$work/sec.plan" --cluster "$work/c.json" \
  --job ps --task 0 --tls-dir "$work/certs" > "$work/badsockets.log" 2>&1
code=$?
set -e
if [ "$code" -ne 2 ] || ! grep -q "the socket directory $badsockets is not this user's alone (a directory of uid $(id -u), mode 0777.*mode 0700.*--same-host tcp" "$work/badsockets.log"; then
  bad "a socket directory of mode 0777: exit $code: $(cat "$work/badsockets.log")"
else
  echo "   ok: exit 2: $(cut -c1-150 "$work/badsockets.log")"
fi

echo "== the job, attacked while it trains"
export DTF_SOCKET_DIR=$sockets
log="$work/job.log"
attacks_from=$SECONDS
timeout 600 "$bin/dtf-run" "$work/sec.plan" --cluster "$work/c.json" --tls-dir "$work/certs" \
  --log-every 500 --model-dir "$work/model" --stall-timeout 3 > "$log" 2>&1 &
job=$!
touch "$log"
for _ in $(seq 1 300); do
  grep -q "^ps.0 .*initialized by worker.0" "$log" && break
  sleep 0.1
done
grep -q "^ps.0 .*initialized by worker.0" "$log" || fail "the job did not start: $(tail -20 "$log")"

attack() { # attack EXPECTED ATTACK [intruder options...]: EXPECTED is a regex
  local expected=$1 name=$2; shift 2
  local out
  out=$("$bin/dtf-intruder" "$name" --target "$ps" --plan "$work/sec.plan" "$@" 2>&1)
  if ! grep -Eq "$expected" <<<"$out"; then
    bad "$name $*: expected /$expected/, got: $out"
  else
    echo "   ok: $(cut -c1-150 <<<"$out")"
  fi
}
w1=(--ca "$work/certs/ca.pem" --cert "$work/certs/worker.1.pem" --key "$work/certs/worker.1.key")
chief=(--ca "$work/certs/ca.pem" --cert "$work/certs/worker.0.pem" --key "$work/certs/worker.0.key")
attack "status: refused UNAVAILABLE" status
attack "status: refused UNAVAILABLE" status --ca "$work/certs/ca.pem"
attack "status: refused UNAVAILABLE" status --ca "$work/certs/ca.pem" \
  --cert "$work/other/worker.1.pem" --key "$work/other/worker.1.key"
attack "status: accepted" status "${w1[@]}"
# A client checks the server's name too: ps.0's certificate is not worker.0's.
attack "status: refused UNAVAILABLE" status "${w1[@]}" --server-name worker.0
attack "shutdown: refused PERMISSION_DENIED: .*worker.1 may not shut it down .*only the chief" shutdown "${w1[@]}"
attack "initialize: refused PERMISSION_DENIED: .*only the chief" initialize "${w1[@]}"
attack "save: refused PERMISSION_DENIED: .*only the chief" save "${w1[@]}" --dir "$work/model"
attack "save: refused PERMISSION_DENIED: .*only into its --model-dir" save "${chief[@]}" --dir "$work"
attack "push-nan: refused INVALID_ARGUMENT: ps.0 refused the push of worker.1: .*non-finite" \
  push-nan "${w1[@]}" --claim worker.0
attack "push-step: refused INVALID_ARGUMENT: .*global step advances by 1" push-step "${w1[@]}"
attack "pull-repeat: refused INVALID_ARGUMENT: ps.0: a pull names 400 variables" pull-repeat "${w1[@]}" --count 400
attack "pull-repeat: refused INVALID_ARGUMENT: ps.0: a pull names .* twice" pull-repeat "${w1[@]}" --count 2
attack "park: 24 of 40 pulls refused RESOURCE_EXHAUSTED" park "${w1[@]}" --count 40
attack "streams: 12 refused RESOURCE_EXHAUSTED, 8 cut, 0 other, of 20" streams "${w1[@]}" --count 20 --hold 6

echo "== over the ps's Unix socket: only this job's tasks, only this user"
sock=$sockets/127.0.0.1_$port.sock
grep -q "^ps.0 *| serving on 127.0.0.1:$port (mutual TLS) and on $sock for the tasks on this host" "$log" ||
  bad "ps.0 does not say it listens on $sock: $(grep -m1 'serving on' "$log")"
[ "$(stat -c %a "$sockets")" = 700 ] || bad "$sockets has mode $(stat -c %a "$sockets"), not 700"
# The listener and the two workers' connections (accepted sockets show the
# listener's path in /proc/net/unix).
n=$(grep -c " $sock\$" /proc/net/unix || true)
[ "$n" -ge 3 ] || bad "$n sockets on $sock: the workers do not talk to ps.0 over it"
echo "   ok: $n sockets on $sock (the listener and the workers' connections)"
u1=(--unix "$sock" --unix-ca "$work/certs/ca.pem" --unix-task worker.1)
attack "status: accepted" status "${u1[@]}"
attack "status: refused UNAUTHENTICATED: refused: not a task of this job" status --unix "$sock"
attack "status: refused UNAUTHENTICATED: refused: not a task of this job" status \
  --unix "$sock" --unix-ca "$work/other/ca.pem" --unix-task worker.1
attack "status: refused UNAUTHENTICATED: refused: not a task of this job" status \
  --unix "$sock" --unix-ca "$work/certs/ca.pem" --unix-task worker.7
attack "shutdown: refused PERMISSION_DENIED: .*worker.1 may not shut it down .*only the chief" shutdown "${u1[@]}"
attack "push-nan: refused INVALID_ARGUMENT: ps.0 refused the push of worker.1: .*non-finite" \
  push-nan "${u1[@]}" --claim worker.0
# Messages larger than the ps's bound: one of twice the bound is refused
# with its real size; a 1.5 GiB unary push is cut on its way in (gRPC 1.51
# reads a whole message before it checks its size, so the ps gives messages
# a memory bound of their own, past which gRPC cuts streams): the ps's peak
# memory grows by less than that bound and 64 MiB. Over the Unix socket,
# which moves it 3x as fast as TLS: the job must still be training when the
# attacks end. A worker call cut meanwhile is dropped and the job goes on.
ps_pid=$(sed -n 's/^\[launcher\] ps.0 started (pid \([0-9]*\)).*/\1/p' "$log" | tail -1)
max_message=$(sed -n 's/^ps.0 .*takes messages of up to \([0-9]*\) bytes.*/\1/p' "$log" | head -1)
bound=$(sed -n 's/^ps.0 .*holds at most \([0-9]*\) bytes of them at once.*/\1/p' "$log" | head -1)
hwm() { sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status"; }
if [ -z "$ps_pid" ] || [ -z "$max_message" ] || [ -z "$bound" ] || [ -z "$(hwm "$ps_pid")" ]; then
  bad "no ps.0 process (${ps_pid:-none}) or no message limits in its log (${max_message:-none}, ${bound:-none})"
else
  attack "push-huge: refused RESOURCE_EXHAUSTED: .*larger than max .$((2 * max_message / 1000))[0-9]{3} vs. $max_message" \
    push-huge "${u1[@]}" --bytes $((2 * max_message))
  before=$(hwm "$ps_pid")
  attack "push-huge: refused RESOURCE_EXHAUSTED: Received RST_STREAM with error code 11" push-huge "${u1[@]}"
  after=$(hwm "$ps_pid")
  grew=$(( (after - before) / 1024 ))
  limit=$(( bound / 1048576 + 64 ))
  if [ "$grew" -le "$limit" ]; then
    echo "   ok: ps.0's peak memory grew by $grew MB (from $((before / 1024)) MB) for the 1.5 GiB push: at most $limit MB (its bound of $((bound / 1048576)) MB and 64)"
  else
    bad "ps.0's peak memory grew by $grew MB for the 1.5 GiB push, more than its bound of $((bound / 1048576)) MB and 64"
  fi
fi
# Another user: the kernel refuses the connect (the directory is 0700).
if [ "$(id -u)" -ne 0 ] || ! command -v setpriv > /dev/null || [ ! -x /usr/bin/python3 ]; then
  echo "   not checked: a connect as another user needs root, setpriv and /usr/bin/python3"
else
  other=$(setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 - "$sock" <<'PY' 2>&1 || true
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
    print("connected")
except OSError as e:
    print(type(e).__name__, e.errno)
PY
)
  if [ "$other" = "PermissionError 13" ]; then echo "   ok: uid 65534's connect: $other"
  else bad "uid 65534's connect to $sock: $other"; fi
fi

echo "== the ps listens on its cluster address only"
if answers_only 127.0.0.1 127.0.0.2 "$port"; then echo "   ok: 127.0.0.1:$port answers, 127.0.0.2:$port does not"
else bad "ps.0 answers on 127.0.0.2:$port: it listens on every interface"; fi

echo "== a plaintext (--insecure) task cannot join the TLS job"
set +e
timeout 60 "$bin/dtf-run" "$work/sec.plan" --cluster "$work/c.json" --job worker --task 1 \
  --insecure --connect-timeout 2 > "$work/insecure.log" 2>&1
code=$?
set -e
if [ "$code" -ne 6 ] || ! grep -q "warning: worker.1: --insecure: plaintext" "$work/insecure.log" ||
   ! grep -q "cannot reach ps.0" "$work/insecure.log"; then
  bad "an --insecure task: exit $code: $(cat "$work/insecure.log")"
else
  echo "   ok: exit 6, warned: $(grep -o 'cannot reach ps.0 at [0-9.:]*' "$work/insecure.log")"
fi

echo "   worker calls ps.0 cut for memory meanwhile (each dropped, the job going on): $(grep -c 'ps.0 cut .* to stay within the memory' "$log" || true)"
echo "   the attacks ended $((SECONDS - attacks_from)) s after the job started; it is at step $(sed -n 's/^worker.0 *| step \([0-9]*\)\/.*/\1/p' "$log" | tail -1) of $steps"
grep -q "the job finished" "$log" && bad "the job ended before the attacks did (make it longer)"
set +e
wait "$job"
code=$?
set -e
if [ "$code" -ne 0 ]; then
  bad "the attacked job failed (exit $code):"; tail -30 "$log" >&2
fi
final=$(grep "^worker.0 *| final:" "$log" || true)
if ! python3 - "$final" <<'PY'
import math, re, sys
m = re.search(r"loss=([^ ]+) accuracy=([^ ]+)", sys.argv[1])
sys.exit(0 if m and math.isfinite(float(m.group(1))) and float(m.group(2)) > 0.75 else 1)
PY
then bad "the attacked job did not train: '$final'"; else echo "   ok: $final"; fi
applied=$(sed -n 's/^ps.0 *| \([0-9]*\) updates applied.*/\1/p' "$log" | tail -1)
[ "${applied:-0}" -ge "$steps" ] && [ "$applied" -lt $((steps + 10)) ] ||
  bad "ps.0 applied ${applied:-no} updates for $steps steps"
# A worker call cut for memory is dropped, not a reason to restart the job.
! grep -q "restarting the job" "$log" || bad "the job restarted: $(grep -m1 -B3 'restarting the job' "$log")"
grep -q "^ps.0 *| refused: " "$log" || bad "ps.0 logged no refusal"
grep -q "^ps.0 *| cut a stream of worker.1 that moved nothing for 3 s" "$log" || bad "ps.0 logged no stalled stream cut"
echo "   ps.0's log: $(grep -m1 '^ps.0 *| refused: ' "$log" | cut -c1-140)"

[ "$failures" -eq 0 ] || { echo "e2e: $failures security check(s) failed" >&2; exit 1; }
echo "e2e: every attack was refused and the job trained"
