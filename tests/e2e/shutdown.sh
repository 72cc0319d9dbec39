#!/usr/bin/env bash
# Stopping a running job, many times: a 1 ps + 2 worker async job is started
# and, once both workers train, its launcher gets SIGTERM (odd rounds) or
# SIGINT, Ctrl-C's signal (even rounds), at a different moment of the step
# each time. Every round must end with the launcher's interrupted exit code
# (143 or 130), every task exiting 130 or 0 (never killed by a signal: a
# SIGTERM once aborted a worker with heap corruption in 2 of 6 stops), and
# no heap or sanitizer report in the output. With a sanitized dtf-run (the
# asan bin directory) the same rounds check every stop under ASan and UBSan.
# usage: shutdown.sh BIN_DIR WORK_DIR [ROUNDS]
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$1" "$2"
rounds=${3:-8}
rm -rf "$work" && mkdir -p "$work"
sed -e 's/steps = 10000/steps = 1000000/' \
    -e 's/update = sync(replicas_to_aggregate = 2, total_num_replicas = 3)/update = async/' \
    "$root/models/mlp.dtf" > "$work/stop.dtf"
"$bin/dtfc" "$work/stop.dtf" -o "$work/stop.plan"
failures=0

# check_signal_masks LAUNCHER: in every task the launcher started, every thread
# but the one that waits for them (in sigtimedwait, which unblocks them while
# it waits) blocks SIGINT and SIGTERM, and no asynchronous signal has a
# handler: a handler running on a thread inside oneDNN's sgemm writes its
# frame over the heap (docs/security.md, "The crash on shutdown").
check_signal_masks() {
  local task t blocked waiting bad=0 async=0
  for s in 1 3 10 12 13 14 17 20 23 24 26 27 28 29; do async=$((async | 1 << (s - 1))); done
  for task in $(pgrep -P "$1"); do
    waiting=0
    caught=$(awk '/^SigCgt/ {print $2}' "/proc/$task/status" 2>/dev/null) || continue
    if (( (16#$caught & async) != 0 )); then
      echo "e2e: task $task has a handler for an asynchronous signal (SigCgt $caught)" >&2; bad=1
    fi
    for t in /proc/"$task"/task/*; do
      blocked=$(awk '/^SigBlk/ {print $2}' "$t/status" 2>/dev/null) || continue
      [ -n "$blocked" ] || continue
      (( (16#$blocked & 0x4002) == 0x4002 )) && continue
      case "$(cat "$t/wchan" 2>/dev/null)" in
        do_sigtimedwait*) waiting=$((waiting + 1)) ;;
        *) echo "e2e: thread ${t##*/} ($(cat "$t/comm")) of task $task takes SIGINT or SIGTERM (SigBlk $blocked)" >&2; bad=1 ;;
      esac
    done
    [ "$waiting" -le 1 ] || { echo "e2e: task $task has $waiting threads waiting for signals" >&2; bad=1; }
  done
  return "$bad"
}

for round in $(seq 1 "$rounds"); do
  cluster_json "$work/c$round.json" 1 2
  log="$work/round$round.log"
  : > "$log"
  # Not under timeout(1), which would pass the signal on to the launcher's
  # process group a second time (a second Ctrl-C kills at once).
  "$bin/dtf-run" "$work/stop.plan" --cluster "$work/c$round.json" --log-every 20 \
    > "$log" 2>&1 &
  job=$!
  for _ in $(seq 1 600); do
    [ "$(grep -c '^worker\.[01] *| step ' "$log" || true)" -ge 4 ] && break
    sleep 0.1
  done
  # A stop before training says nothing of a stop while it runs.
  trained=$(grep -c '^worker\.[01] *| step ' "$log" || true)
  if [ "$trained" -lt 4 ]; then
    echo "e2e: round $round: the job did not train within 60 s ($trained step lines):" >&2
    tail -15 "$log" >&2
    failures=$((failures + 1))
    kill -9 "$job" 2>/dev/null || true
    wait "$job" 2>/dev/null || true
    continue
  fi
  if [ "$round" -eq 1 ] && ! check_signal_masks "$job"; then
    failures=$((failures + 1))
  fi
  # A different moment within the step each round.
  sleep "0.$(( (round * 37) % 10 ))"
  if [ $((round % 2)) -eq 1 ]; then sig=TERM want=143; else sig=INT want=130; fi
  kill -s "$sig" "$job"
  for _ in $(seq 1 900); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$job" 2>/dev/null && { kill -9 "$job"; echo "e2e: round $round: the launcher did not stop within 90 s" >&2; }
  set +e
  wait "$job"
  code=$?
  set -e
  problems=$( { grep -E "killed by signal|corrupt|free\(\)|double free|Sanitizer|runtime error:|Segmentation fault" "$log"
                grep -E "exited \(code [0-9]+\)" "$log" | grep -Ev "exited \(code (0|130)\)"; } || true)
  if [ "$code" -ne "$want" ] || [ -n "$problems" ]; then
    echo "e2e: round $round (SIG$sig): launcher exit $code (want $want):" >&2
    echo "${problems:-$(tail -15 "$log")}" >&2
    failures=$((failures + 1))
  else
    echo "   ok: round $round: SIG$sig, launcher exit $code, $(grep -c 'exited (code 130)' "$log") tasks exited 130"
  fi
done
[ "$failures" -eq 0 ] || { echo "e2e: $failures of $rounds stops went wrong" >&2; exit 1; }
echo "e2e: $rounds stops, no task crashed"
