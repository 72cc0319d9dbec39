#!/usr/bin/env bash
# Workers join and leave a running job (docs/elastic.md), in real processes on
# 127.0.0.1:
#   scale: the MLP in sync mode (replicas_to_aggregate = 4) on 1 ps + 4 worker
#     slots, launched with --workers 2; `dtf-run ctl scale worker=4` while it
#     trains (worker.2 and worker.3 join), then `scale worker=1` (worker.1-3
#     leave after their step). Every task exits 0, the updates average
#     min(4, live workers) gradients (ps.0's sync trace shows 2, 4 and 1),
#     and the chief's test accuracy ends in the band of an unchanged run.
#   kill: 1 ps + 3 workers started one by one (--job/--task), sync with
#     replicas_to_aggregate = 3; worker.2 killed with kill -9 and not
#     replaced: after --lease-timeout the updates average 2 and the job
#     finishes, every other task exiting 0.
# usage: elastic.sh BIN_DIR WORK_DIR scale|kill
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
what=$3
rm -rf "$work" && mkdir -p "$work"
steps=400
mlp() { # mlp NAME UPDATE
  sed -e "s/steps = 10000/steps = $steps/" -e "s/every = 2000/every = $steps/" \
      -e "s/update = sync(replicas_to_aggregate = 2, total_num_replicas = 3)/update = $2/" \
      "$root/models/mlp.dtf" > "$work/$1.dtf"
  "$bin/dtfc" "$work/$1.dtf" -o "$work/$1.plan"
}
log=$work/run.log
: > "$log"
step_now() { sed -n 's/^\(worker.0 *| \)\{0,1\}step \([0-9]*\)\/.*/\2/p' "$1" | tail -1; }
at_step() { local s; s=$(step_now "$1"); [ "${s:-0}" -ge "$2" ]; }

if [ "$what" = scale ]; then
  mlp scale "sync(replicas_to_aggregate = 4)"
  cluster_json "$work/c.json" 1 4
  timeout 120 "$bin/dtf-run" "$work/scale.plan" --cluster "$work/c.json" --insecure \
    --threads 1 --log-every 10 --model-dir "$work/model" --workers 2 > "$log" 2>&1 &
  launcher=$!
  trap 'kill "$launcher" 2>/dev/null || true; wait "$launcher" 2>/dev/null || true' EXIT
  ctl() { "$bin/dtf-run" ctl --cluster "$work/c.json" scale "$1" >> "$work/ctl.log" 2>&1; }
  wait_for 60 "the chief's step 60" at_step "$log" 60
  ctl worker=4 || fail "dtf-run ctl scale worker=4 failed: $(cat "$work/ctl.log")"
  echo "   step $(step_now "$log"): scale worker=4"
  # Once an update averaged all 4 (worker.2 and worker.3 joined and pushed).
  wait_for 30 "an update averaging 4 gradients" \
    grep -q ' averaged 4 gradients' "$work/model/ps.0.sync.log"
  s=$(step_now "$log")
  wait_for 30 "20 more steps" at_step "$log" $((s + 20))
  ctl worker=1 || fail "dtf-run ctl scale worker=1 failed: $(cat "$work/ctl.log")"
  echo "   step $(step_now "$log"): scale worker=1"
  # A bad request: a precise error, nothing changes.
  if "$bin/dtf-run" ctl --cluster "$work/c.json" scale worker=5 2> "$work/bad.err"; then
    fail "scale worker=5 of 4 slots was taken"
  fi
  grep -q "N must be from 1 to 4" "$work/bad.err" || fail "scale worker=5: $(cat "$work/bad.err")"
  set +e; wait "$launcher"; code=$?; set -e
  [ "$code" = 0 ] || { tail -30 "$log" >&2; fail "the launcher exited $code"; }
else
  mlp kill "sync(replicas_to_aggregate = 3)"
  cluster_json "$work/c.json" 1 3
  pids=()
  for t in ps:0 worker:0 worker:1 worker:2; do
    "$bin/dtf-run" "$work/kill.plan" --cluster "$work/c.json" --insecure --threads 1 \
      --log-every 10 --lease-timeout 2 --job "${t%:*}" --task "${t#*:}" \
      > "$work/${t/:/.}.log" 2>&1 &
    pids+=($!)
  done
  trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true' EXIT
  wait_for 60 "worker.2's step 50" at_step "$work/worker.2.log" 50
  kill -9 "${pids[3]}"
  wait "${pids[3]}" 2>/dev/null || true
  echo "   step $(step_now "$work/worker.0.log"): kill -9 worker.2"
  for i in 0 1 2; do
    set +e; timeout 90 tail --pid="${pids[$i]}" -f /dev/null; wait "${pids[$i]}"; code=$?; set -e
    [ "$code" = 0 ] || { tail -20 "$work"/*.log >&2; fail "task $i exited $code"; }
  done
  cat "$work/ps.0.log" "$work/worker.0.log" > "$log"
fi

python3 - "$what" "$log" "$work" "$steps" <<'PY'
import re, sys
what, log, work, steps = sys.argv[1], open(sys.argv[2]).read().splitlines(), sys.argv[3], int(sys.argv[4])
bad = []
chief = [l.split("|", 1)[1].strip() if "|" in l else l for l in log if l.startswith("worker.0") or what == "kill"]
final = [l for l in chief if l.startswith("final:")]
acc = re.search(r"accuracy=([0-9.]+)", final[-1]) if final else None
# Unchanged runs of this plan (replicas_to_aggregate = N on N workers
# throughout, 400 updates) end at test accuracy 0.838 (N = 1), 0.847 (2) and
# 0.856 (4) (measured 2026-11-29); the band is 0.03 below the lowest.
if not acc or float(acc.group(1)) < 0.808:
    bad.append(f"the chief's final accuracy is not in the band of an unchanged run (>= 0.808): {final}")
if what == "scale":
    exits = [l for l in log if l.startswith("[launcher]") and (" exited " in l or " killed " in l)]
    if len(exits) != 5 or any("(code 0)" not in l for l in exits):
        bad.append(f"not every task (ps.0, worker.0-3) exited 0: {exits}")
    for w in ("worker.1", "worker.2", "worker.3"):
        if not any(l.startswith("[launcher] " + w + " left the job") for l in log):
            bad.append(f"{w} did not leave the job")
    trace = open(work + "/model/ps.0.sync.log").read().splitlines()
else:
    if not any("worker.2 went silent" in l for l in log):
        bad.append("ps.0 did not count worker.2 gone")
    trace = []
if what == "scale":
    sizes = [int(m.group(1)) for l in trace for m in [re.match(r"update \d+ averaged (\d+) ", l)] if m]
    seen = []
    for n in sizes:
        if not seen or seen[-1] != n:
            seen.append(n)
    print(f"   updates averaged, in runs: {seen} ({len(sizes)} updates)")
    if not {2, 4, 1} <= set(sizes) or sizes[-1] != 1:
        bad.append(f"the updates did not average 2, then 4, then 1 gradients: {seen}")
if bad:
    sys.exit("e2e: FAIL: " + "\n  ".join(bad))
print(f"   ok: {final[-1]}")
PY
echo "e2e: elastic $what OK"
