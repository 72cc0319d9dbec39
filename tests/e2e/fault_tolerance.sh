#!/usr/bin/env bash
# Failures in real processes on 127.0.0.1: a 1 ps + 2 worker async job trains
# the MLP with a checkpoint every 100 steps while this script kill -9s a
# worker, then the ps, then the chief. The launcher restarts each (a dead
# chief restarts the whole job); the run must finish all its steps, every
# restore must start from the last checkpoint saved before its failure (no
# more lost than the steps since), and the model must evaluate as well as an
# uninterrupted run of the same job (within noise). The run with three kills
# and the sync run whose ps is killed move
# their tensors in 4 KiB chunks (--chunk-bytes 4096), so the kills cut
# streams and the restores go through InitializeStream.
# usage: fault_tolerance.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
rm -rf "$work" && mkdir -p "$work"
steps=2400
every=100 # steps between checkpoints
sed -e "s/steps = 10000/steps = $steps/" -e "s/every = 2000/every = $steps/" \
    -e "s/checkpoint every 5 min keep 3/checkpoint every $every steps keep 3/" \
    -e 's/update = sync(replicas_to_aggregate = 2, total_num_replicas = 3)/update = async/' \
    "$root/models/mlp.dtf" > "$work/ft.dtf"
"$bin/dtfc" "$work/ft.dtf" -o "$work/ft.plan"

cluster() { cluster_json "$1" 1 2; }

accuracy() { sed -n 's/^worker.0 *| eval .*accuracy \([0-9.]*\).*/\1/p' "$1" | tail -1; }

echo "== uninterrupted"
# With the same 4 KiB chunks as the run with failures below, so that the two
# differ only by the failures (chunks make each step slower, and an async
# job's accuracy depends on how stale its gradients are).
cluster "$work/c0.json"
timeout 600 "$bin/dtf-run" "$work/ft.plan" --cluster "$work/c0.json" --log-every 100 \
  --chunk-bytes 4096 --model-dir "$work/clean" > "$work/clean.log" 2>&1 || {
  echo "e2e: the uninterrupted run failed:" >&2; tail -30 "$work/clean.log" >&2; exit 1; }
clean=$(accuracy "$work/clean.log")
echo "   test accuracy $clean"

echo "== kill -9 worker.1, then ps.0, then the chief (worker.0)"
cluster "$work/c1.json"
log="$work/faulty.log"
# In 4 KiB chunks: every pull, push and restore larger than that is a
# stream, cut off by each kill.
timeout 900 "$bin/dtf-run" "$work/ft.plan" --cluster "$work/c1.json" --log-every 100 \
  --chunk-bytes 4096 --model-dir "$work/faulty" > "$log" 2>&1 &
launcher=$!
# The pid the launcher last started for a task.
pid_of() { sed -n "s/^\[launcher\] $1 started (pid \([0-9]*\).*/\1/p" "$log" | tail -1; }
# Waits until the chief's progress reaches a global step.
wait_step() {
  for _ in $(seq 1 600); do
    local s
    s=$(sed -n 's/^worker.0 *| step \([0-9]*\)\/.*/\1/p' "$log" | tail -1)
    if [ -n "$s" ] && [ "$s" -ge "$1" ]; then return 0; fi
    kill -0 "$launcher" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}
kills=0
for victim in "worker.1:500" "ps.0:1100" "worker.0:1700"; do
  task=${victim%%:*} at=${victim##*:}
  if wait_step "$at"; then
    pid=$(pid_of "$task")
    echo "   step >= $at: kill -9 $task (pid $pid)"
    kill -9 "$pid" && kills=$((kills + 1))
  fi
done
set +e
wait "$launcher"
code=$?
set -e
python3 - "$log" "$code" "$kills" "$clean" "$steps" "$every" <<'PY'
import re, sys
log = open(sys.argv[1]).read().splitlines()
code, kills, clean, steps = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
every = int(sys.argv[6])
bad = []
if code != 0:
    bad.append(f"the launcher exited {code}")
if kills != 3:
    bad.append(f"only {kills} of 3 kills happened (the job ended early?)")
for task in ["worker.1", "ps.0", "worker.0"]:
    if not any(re.match(rf"\[launcher\] {re.escape(task)} killed by signal 9", l) for l in log):
        bad.append(f"the launcher did not see {task} killed")
if not any("restarting the job" in l for l in log):
    bad.append("the chief's death did not restart the job")
# Every restore starts at the last checkpoint saved before it: the last one
# the log shows, or the next (`every` steps on) when a kill -9 landed after
# that checkpoint was complete but before the chief printed so (seen once:
# "saved ckpt-1801" logged, ckpt-1901 written, restored from 1901). Never an
# older one: that would lose a checkpoint already written.
last_saved, restores = None, 0
for l in log:
    m = re.search(r"saved checkpoint ckpt-(\d+)", l)
    if m:
        last_saved = int(m.group(1))
    m = re.search(r"restored checkpoint ckpt-(\d+)", l)
    if m:
        restores += 1
        got = int(m.group(1))
        if last_saved is None or not last_saved <= got <= last_saved + every:
            bad.append(f"restored ckpt-{got}, but the last one saved was ckpt-{last_saved}")
if restores < 2:
    bad.append(f"{restores} restores, expected one after the ps and one after the chief")
evals = [l for l in log if re.match(r"worker.0 *\| eval  step (\d+)", l)]
m = re.search(r"eval  step (\d+) .*accuracy ([0-9.]+)", evals[-1]) if evals else None
if not m or int(m.group(1)) < steps:
    bad.append(f"the job did not finish its {steps} steps: {evals[-1:] }")
elif float(m.group(2)) < clean - 0.03:
    bad.append(f"test accuracy {m.group(2)} after the failures, {clean} without")
if bad:
    print("e2e: fault tolerance:\n  " + "\n  ".join(bad), file=sys.stderr); sys.exit(1)
print(f"   ok: {restores} restores from the last checkpoint; test accuracy {m.group(2)} (uninterrupted {clean})")
PY

echo "== the same run directory continued on 2 ps tasks (a checkpoint restored onto another ps count)"
python3 - "$work/c2.json" <<'PY'
import json, socket, sys
socks, ports = [], []
for _ in range(4):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s); ports.append(s.getsockname()[1])
addr = [f"127.0.0.1:{p}" for p in ports]
json.dump({"ps": addr[:2], "worker": addr[2:]}, open(sys.argv[1], "w"))
PY
more=$((steps + 200))
timeout 600 "$bin/dtf-run" "$work/ft.plan" --cluster "$work/c2.json" --log-every 20 \
  --steps "$more" --model-dir "$work/faulty" > "$work/resharded.log" 2>&1 || {
  echo "e2e: the continued run failed:" >&2; tail -30 "$work/resharded.log" >&2; exit 1; }
grep -q "restored checkpoint ckpt-[0-9]* from .* onto 2 ps tasks" "$work/resharded.log" || {
  echo "e2e: no restore onto 2 ps tasks:" >&2; grep -i "restor\|error" "$work/resharded.log" >&2; exit 1; }
last=$(sed -n 's/^worker.0 *| eval  step \([0-9]*\).*/\1/p' "$work/resharded.log" | tail -1)
acc=$(accuracy "$work/resharded.log")
if [ -z "$last" ] || [ "$last" -lt "$more" ]; then
  echo "e2e: the continued run ended at step '$last', not $more" >&2; exit 1
fi
# The shards hold the trained values, not initial ones: the continued run's
# first logged loss is below the uninterrupted run's first (at step 200,
# from the initializers), and it evaluates as well as that run did.
first_loss() { sed -n 's/^worker.0 *| step [0-9]*\/[0-9]* *loss \([0-9.]*\).*/\1/p' "$1" | head -1; }
python3 - "$(first_loss "$work/resharded.log")" "$(first_loss "$work/clean.log")" "$acc" "$clean" <<'PY' || exit 1
import sys
resumed, fresh, acc, clean = (float(x) for x in sys.argv[1:5])
if not resumed < fresh:
    sys.exit(f"e2e: the continued run's first loss {resumed} is not below a fresh run's {fresh}: restored values?")
if acc < clean - 0.03:
    sys.exit(f"e2e: the continued run evaluates {acc}, the uninterrupted one {clean}")
print(f"   ok: first loss {resumed} after the restore (a fresh run's: {fresh})")
PY
echo "   ok: $(grep -o 'restored checkpoint.*' "$work/resharded.log" | head -1); test accuracy $acc at step $last"

# kill_during NAME PLAN VICTIM STEP [FLAGS...]: runs PLAN (with dtf-run
# FLAGS) on a fresh 1 ps + 2 worker cluster (log in $work/NAME.log, model dir
# $work/NAME) and kill -9s VICTIM once worker.0 reaches STEP; sets code,
# killed, restored (worker.0's first restore) and last (its last eval step).
kill_during() {
  cluster "$work/$1.json"
  log="$work/$1.log"
  timeout 900 "$bin/dtf-run" "$2" --cluster "$work/$1.json" --log-every 100 \
    --model-dir "$work/$1" "${@:5}" > "$log" 2>&1 &
  launcher=$!
  killed=""
  if wait_step "$4"; then
    pid=$(pid_of "$3")
    echo "   step >= $4: kill -9 $3 (pid $pid)"
    kill -9 "$pid" && killed=yes
  fi
  set +e
  wait "$launcher"
  code=$?
  set -e
  restored=$(grep -o "^worker.0 *| restored checkpoint ckpt-[0-9]*" "$log" | head -1 || true)
  last=$(sed -n 's/^worker.0 *| eval  step \([0-9]*\).*/\1/p' "$log" | tail -1)
}
# finished_without_restart STEPS: the job ended well, restored, and was not restarted.
finished_without_restart() {
  [ "$code" -eq 0 ] && [ -n "$killed" ] && [ -n "$restored" ] && [ -n "$last" ] && \
    [ "$last" -ge "$1" ] && ! grep -q "restarting the job" "$log"
}
explain() {
  echo "e2e: $1: exit $code, restored '$restored', last eval step '$last':" >&2
  grep -E "launcher|restor|error|eval|waiting|gave up|dropped" "$log" | tail -20 >&2
  exit 1
}

echo "== --chief-failover: kill -9 the chief; the chief role moves to worker.1"
kill_during failover "$work/ft.plan" worker.0 600 --steps 1200 --chief-failover
moved=$(grep -c "moving the chief role to worker.1" "$log" || true)
restored=$(grep -o "^worker.1 *| restored checkpoint ckpt-[0-9]*" "$log" | head -1 || true)
last=$(sed -n 's/^worker.1 *| eval  step \([0-9]*\).*/\1/p' "$log" | tail -1)
if [ "$code" -ne 0 ] || [ "$moved" -lt 1 ] || [ -z "$restored" ] || [ -z "$last" ] || [ "$last" -lt 1200 ]; then
  echo "e2e: chief failover: exit $code, moved '$moved', restored '$restored', last eval step '$last':" >&2
  grep -E "launcher|restor|error|eval" "$log" | tail -20 >&2
  exit 1
fi
echo "   ok: worker.1 took over as chief, ${restored#*| }, evaluated at step $last"

echo "== sync (2 of 2 replicas): kill -9 the ps; every worker waits, the chief restores, all go on"
sed -e "s/steps = 10000/steps = 900/" -e "s/every = 2000/every = 900/" \
    -e 's/checkpoint every 5 min keep 3/checkpoint every 100 steps keep 3/' \
    -e 's/update = sync(replicas_to_aggregate = 2, total_num_replicas = 3)/update = sync(replicas_to_aggregate = 2)/' \
    "$root/models/mlp.dtf" > "$work/sync.dtf"
"$bin/dtfc" "$work/sync.dtf" -o "$work/sync.plan"
kill_during sync-ps "$work/sync.plan" ps.0 400 --chunk-bytes 4096 --same-host unix
# The restarted ps took the checkpoint, and the pulls and pushes after it, as
# streams (its final line counts them; --same-host unix: through shared
# memory, the default, pulls and pushes do not stream).
streamed=$(grep -o "^ps.0 *| .*streamed in chunks of 4096 bytes: [1-9][0-9]* pulls, [1-9][0-9]* pushes, [1-9][0-9]* initializations" "$log" | tail -1 || true)
if ! finished_without_restart 900 || [ -z "$streamed" ]; then
  echo "e2e: sync ps failure: exit $code, restored '$restored', last eval step '$last', streamed '$streamed':" >&2
  grep -E "launcher|restor|error|eval|waiting|gave up" "$log" | tail -20 >&2
  exit 1
fi
echo "   ok: ${restored#*| }; the job went on without a restart and evaluated at step $last; ${streamed#*; }"

sed -e "s/steps = 2000/steps = 900/" -e "s/every = 1000/every = 900/" \
    -e 's/checkpoint every 500 steps keep 2/checkpoint every 100 steps keep 3/' \
    "$root/models/model_parallel.dtf" > "$work/staged.dtf"
"$bin/dtfc" "$work/staged.dtf" -o "$work/staged.plan"

echo "== model parallelism (one replica on 2 workers): kill -9 its stage 1 (worker.1)"
kill_during staged "$work/staged.plan" worker.1 400
# The chief names the lost stage within seconds (not --sync-timeout), the
# job restarts from the last checkpoint, and every stage finishes.
lost=$(grep -m1 -o "^worker.0 *| dtf-run: error: .*\(lost worker.1\|worker.1 at [0-9.:]* started again\).*" "$log" | cut -c1-160 || true)
ran=$(grep -c "^worker.1 *| ran [0-9]* steps as stage 1" "$log" || true)
if [ "$code" -ne 0 ] || [ -z "$killed" ] || [ -z "$lost" ] || [ -z "$restored" ] || \
   [ -z "$last" ] || [ "$last" -lt 900 ] || [ "$ran" -lt 1 ]; then
  explain "model-parallel stage failure (lost '$lost', stage-1 ends $ran)"
fi
echo "   ok: ${lost#*error: }"
echo "   ok: ${restored#*| }; evaluated at step $last"

echo "== model parallelism: kill -9 the ps; whichever stage notices, the replica recovers in place"
kill_during staged-ps "$work/staged.plan" ps.0 400
finished_without_restart 900 || explain "model-parallel ps failure"
echo "   ok: ${restored#*| }; no job restart; evaluated at step $last$(grep -q 'step dropped' "$log" && echo '; a stage-1 pull noticed first and stage 0 dropped the step')"

echo "== in-graph replication: kill -9 the ps; the client drops the step, restores, and goes on"
sed -e "s/steps = 2000/steps = 4000/" -e "s/every = 500/every = 4000/" \
    -e 's/checkpoint every 1000 steps keep 2/checkpoint every 200 steps keep 3/' \
    "$root/models/logistic_regression.dtf" > "$work/ingraph.dtf"
"$bin/dtfc" "$work/ingraph.dtf" -o "$work/ingraph.plan"
kill_during ingraph "$work/ingraph.plan" ps.0 1500
finished_without_restart 4000 || explain "in-graph ps failure"
echo "   ok: ${restored#*| }; the job went on without a restart and evaluated at step $last"
