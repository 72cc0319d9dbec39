#!/usr/bin/env bash
# ps tasks join and leave a running job (docs/elastic.md, "ps tasks join and
# leave"), in real processes on 127.0.0.1: the MLP (async, or sync with
# replicas_to_aggregate = 2) on a cluster file of 2 ps and 2 worker slots,
# launched with --ps 1 and a model dir;
# `dtf-run ctl scale ps=2` while it trains re-shards its variables over 2 ps
# through a checkpoint of the current step, then `scale ps=1` back. Checks:
# - the launcher says each re-shard (`ps scaled 1 -> 2: the job paused ...
#   at global step S`), and ps.1 runs holding variables only between them;
# - the global step never goes back: every worker's step lines only go up,
#   and each restore starts where the ps tasks stopped (the updates ps.0 and
#   ps.1 say they applied when they stop = the step the chief paused at =
#   the checkpoint ps.0 restores): the other workers stopped pushing before
#   the chief saved;
# - the pause checkpoints have 1 and then 2 shards (the ps count changed);
# - the job ends with exit 0 at its 400 steps, the chief's test accuracy in
#   the band of unchanged runs; a request out of range is refused by ctl,
#   and so are re-shards of a job without --model-dir, of an in-graph job
#   and of a plan compiled for 2 ps (exit 2, from what the launcher wrote
#   into its pid file).
# It took 6 to 12 s on the 2-core test machine (2026-11-30).
# usage: elastic_ps.sh BIN_DIR WORK_DIR [UPDATE]   (default async)
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
rm -rf "$work" && mkdir -p "$work"
steps=400 update=${3:-async}
sed -e "s/steps = 10000/steps = $steps/" -e "s/every = 2000/every = $steps/" \
    -e "s/update = sync(replicas_to_aggregate = 2, total_num_replicas = 3)/update = $update/" \
    "$root/models/mlp.dtf" > "$work/mlp.dtf"
"$bin/dtfc" "$work/mlp.dtf" -o "$work/mlp.plan"
cluster_json "$work/c.json" 2 2
log=$work/run.log
: > "$log"

# refused_by_ctl NAME TEXT REQUEST PLAN ARGS...: with a launcher of PLAN
# running on $work/NAME.json (2 ps and 2 worker slots), `ctl scale REQUEST`
# exits 2 saying TEXT (what the launcher's pid file says it cannot take);
# the job is then stopped.
refused_by_ctl() {
  local name=$1 text=$2 request=$3 plan=$4; shift 4
  [ -f "$work/$name.json" ] || cluster_json "$work/$name.json" 2 2
  "$bin/dtf-run" "$plan" --cluster "$work/$name.json" --insecure --threads 1 "$@" \
    > "$work/$name.log" 2>&1 &
  local job=$! code=0
  wait_for 30 "the launcher's pid file" test -s "$work/$name.json.launcher"
  "$bin/dtf-run" ctl --cluster "$work/$name.json" scale "$request" 2> "$work/$name.err" || code=$?
  kill -INT "$job"; wait "$job" || true
  [ "$code" = 2 ] && grep -qF "$text" "$work/$name.err" ||
    fail "$name: ctl exited $code, expected 2 saying '$text': $(cat "$work/$name.err")"
  echo "   refused ($name): $(cut -c1-120 "$work/$name.err")"
}
refused_by_ctl no-model-dir "scale ps=2: re-sharding the ps tasks goes through a checkpoint of the current step, and this job has no --model-dir" \
  ps=2 "$work/mlp.plan" --ps 1
sed -e 's/replication = between_graph/replication = in_graph/' "$work/mlp.dtf" > "$work/in_graph.dtf"
"$bin/dtfc" "$work/in_graph.dtf" -o "$work/in_graph.plan"
refused_by_ctl in-graph "scale ps=2: re-sharding the ps tasks needs between-graph replication" \
  ps=2 "$work/in_graph.plan" --ps 1 --model-dir "$work/in_graph_model"
# A plan compiled for the cluster's 2 ps tasks (dtfc --cluster) runs over 2.
cluster_json "$work/bound.json" 2 2
"$bin/dtfc" "$work/mlp.dtf" --cluster "$work/bound.json" -o "$work/bound.plan"
refused_by_ctl bound "scale ps=1: $work/bound.plan was compiled for 2 ps tasks (dtfc --cluster)" \
  ps=1 "$work/bound.plan" --model-dir "$work/bound_model"

timeout 150 "$bin/dtf-run" "$work/mlp.plan" --cluster "$work/c.json" --insecure \
  --threads 1 --log-every 10 --model-dir "$work/model" --ps 1 > "$log" 2>&1 &
launcher=$!
trap 'kill "$launcher" 2>/dev/null || true; wait "$launcher" 2>/dev/null || true' EXIT
wait_for 60 "the chief's step 100" chief_at 100
reshard "$work/c.json" 1 2
s=$(chief_step)
wait_for 60 "60 more steps over 2 ps" chief_at $((s + 60))
# Refused at once by ctl, with the range; nothing changes.
if "$bin/dtf-run" ctl --cluster "$work/c.json" scale ps=3 2> "$work/bad.err"; then
  fail "scale ps=3 of 2 ps slots was taken"
fi
grep -q "scale ps=N: N must be from 1 to 2 (the ps tasks of" "$work/bad.err" ||
  fail "scale ps=3: $(cat "$work/bad.err")"
echo "   refused: $(cut -c1-110 "$work/bad.err")"
reshard "$work/c.json" 2 1
set +e; wait "$launcher"; code=$?; set -e
[ "$code" = 0 ] || { tail -30 "$log" >&2; fail "the launcher exited $code"; }

PYTHONPATH="$root/tests/e2e" python3 - "$log" "$steps" "$update" <<'PY'
import re, sys
import launcher_log
log, steps, update = open(sys.argv[1]).read().splitlines(), int(sys.argv[2]), sys.argv[3]
bad = []
def said(task):
    return launcher_log.said(log, task)
scaled = [m for l in log for m in [re.match(r"\[launcher\] ps scaled (\d) -> (\d): the job paused ([0-9.]+) s at global step (\d+) \(checkpoint ckpt-(\d+)", l)] if m]
for l in log:
    if l.startswith("[launcher] ps scaled"):
        print("   " + l)
if [(m.group(1), m.group(2)) for m in scaled] != [("1", "2"), ("2", "1")]:
    bad.append(f"the launcher did not say both re-shards (1 -> 2, then 2 -> 1): {[m.group(0) for m in scaled]}")
# Where each pause stopped and each restore started.
paused = [int(m.group(1)) for l in said("worker.0") for m in [re.match(r"paused at global step (\d+)", l)] if m]
restored = [int(m.group(1)) for l in said("worker.0") for m in [re.match(r"restored checkpoint ckpt-\d+ .*; continuing at step (\d+)", l)] if m]
applied = {t: [int(m.group(1)) for l in said(t) for m in [re.match(r"(\d+) updates applied", l)] if m] for t in ("ps.0", "ps.1")}
print(f"   chief paused at {paused}, restored at {restored}; updates applied when each ps stopped: {applied}")
if len(paused) != 2 or restored != paused:
    bad.append(f"the restores {restored} did not start at the steps the chief paused at {paused}")
elif applied["ps.0"][:2] != paused or applied["ps.1"][:1] != paused[1:]:
    bad.append(f"a ps applied updates the pause checkpoint lacks (applied {applied}, paused at {paused}): the workers pushed after the save")
if len(scaled) == 2 and [int(m.group(4)) for m in scaled] != paused:
    bad.append("the launcher's re-shard lines name other steps than the chief's pauses")
# The global step never goes back: each worker's step lines only go up.
bad += launcher_log.steps_went_back(log)
# The job ran its steps (in async mode the other worker's last push may
# land beside the chief's: one more).
evals = [int(m.group(1)) for l in said("worker.0") for m in [re.match(r"eval +step (\d+) ", l)] if m]
if not evals or not applied["ps.0"] or evals[-1] not in (steps, steps + 1) or applied["ps.0"][-1] not in (steps, steps + 1):
    bad.append(f"the job did not end at step {steps}: evaluated at {evals}, ps.0 applied {applied['ps.0']}")
# The ps count changed: the pause checkpoints' shards, ps.1's variables.
shards = [int(m.group(1)) for l in said("worker.0") for m in [re.search(r"saved checkpoint ckpt-\d+ in .* \((\d+) shards?\)", l)] if m]
if len(paused) == 2:
    at = {int(m.group(1)): int(m.group(2)) for l in said("worker.0") for m in [re.search(r"saved checkpoint ckpt-(\d+) in .* \((\d+) shards?\)", l)] if m}
    if at.get(paused[0]) != 1 or at.get(paused[1]) != 2:
        bad.append(f"the pause checkpoints do not have 1 and then 2 shards: {at}")
started = [l for l in log if l.startswith("[launcher] ps.1 started")]
serving = [l for l in said("ps.1") if l.startswith("serving on")]
if len(started) != 1 or len(serving) != 1 or "holds no variables" in serving[0]:
    bad.append(f"ps.1 did not run once holding variables: {started} {serving}")
exits = [l for l in log if l.startswith("[launcher]") and (" exited " in l or " killed " in l)]
final_exits = exits[-3:]
if any("(code 0)" not in l for l in final_exits) or any(" killed " in l for l in exits):
    bad.append(f"not every task ended well: {exits}")
# Unchanged runs of this plan (2 workers, 400 steps; 1 or 2 ps) end at test
# accuracy 0.776 to 0.825 async (12 runs, measured 2026-11-30: async runs
# differ) and 0.8473 sync (3 runs, all alike); the band starts 0.03 below
# the lowest.
final, below = launcher_log.accuracy_below(log, 0.746 if update == "async" else 0.817)
bad += below
if bad:
    sys.exit("e2e: FAIL: " + "\n  ".join(bad))
print(f"   ok: {final[-1]}")
PY
echo "e2e: elastic ps OK"
