#!/usr/bin/env bash
# A dynamic table re-sharded while it trains (docs/elastic.md, "ps tasks
# join and leave"): tests/e2e/dynamic_embedding.dtf (no fixed vocabulary,
# rows made and evicted as ids come and go, 2 shards), async, on 2 ps and 2
# worker slots, launched over both ps (a shard on each); `dtf-run ctl scale
# ps=1` moves both shards onto ps.0, `scale ps=2` back. Checks that each
# restore gives the ps tasks the live rows every shard held when the job
# paused (the ps summaries at the stop against the restore lines), that the
# global step goes on where it stopped, and that the job ends with exit 0
# at its steps. It took about 10 s on the 2-core test machine (2026-11-30).
# usage: elastic_ps_dynamic.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
rm -rf "$work" && mkdir -p "$work"
steps=600
sed -e "s/steps = 120/steps = $steps/" "$root/tests/e2e/dynamic_embedding.dtf" > "$work/dyn.dtf"
"$bin/dtfc" "$work/dyn.dtf" -o "$work/dyn.plan"
cluster_json "$work/c.json" 2 2
log=$work/run.log
: > "$log"

timeout 150 "$bin/dtf-run" "$work/dyn.plan" --cluster "$work/c.json" --insecure \
  --threads 1 --log-every 10 --model-dir "$work/model" > "$log" 2>&1 &
launcher=$!
trap 'kill "$launcher" 2>/dev/null || true; wait "$launcher" 2>/dev/null || true' EXIT
wait_for 60 "the chief's step 150" chief_at 150
reshard "$work/c.json" 2 1
s=$(chief_step)
wait_for 60 "100 more steps on 1 ps" chief_at $((s + 100))
reshard "$work/c.json" 1 2
set +e; wait "$launcher"; code=$?; set -e
[ "$code" = 0 ] || { tail -30 "$log" >&2; fail "the launcher exited $code"; }

python3 - "$log" "$steps" <<'PY'
import re, sys
log, steps = open(sys.argv[1]).read().splitlines(), int(sys.argv[2])
bad = []
def said(task):
    return [l.split("|", 1)[1].strip() for l in log if re.match(task + r" *\|", l)]
def rows(line):
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"(cat/embeddings/part_\d): (\d+) of \d+ rows", line)}
for l in log:
    if l.startswith("[launcher] ps scaled"):
        print("   " + l)
if len([l for l in log if l.startswith("[launcher] ps scaled")]) != 2:
    bad.append("the launcher did not say both re-shards")
paused = [int(m.group(1)) for l in said("worker.0") for m in [re.match(r"paused at global step (\d+)", l)] if m]
restored = [int(m.group(1)) for l in said("worker.0") for m in [re.match(r"restored checkpoint ckpt-\d+ .*; continuing at step (\d+)", l)] if m]
if len(paused) != 2 or restored != paused:
    bad.append(f"the restores {restored} did not start at the steps the chief paused at {paused}")
# The rows each ps held when it stopped (its summary), and the rows each
# restore gave back, in order: stop 1 (2 ps), restore 1 (1 ps), stop 2 (1 ps),
# restore 2 (2 ps).
events = []
for l in log:
    m = re.match(r"(ps\.\d) *\| (.*)", l)
    if not m:
        continue
    if re.match(r"\d+ updates applied", m.group(2)) and "dynamic tables" in m.group(2):
        events.append(("held", m.group(1), rows(m.group(2))))
    elif m.group(2).startswith("initialized by") and "dynamic tables" in m.group(2):
        events.append(("back", m.group(1), rows(m.group(2))))
# Group them: the stops before each restore, the restores after.
phases, cur = [], None
for kind, task, r in events:
    if cur is None or cur[0] != kind:
        cur = [kind, {}]
        phases.append(cur)
    cur[1].update(r)
shown = [(k, dict(sorted(r.items()))) for k, r in phases]
print("   live rows by shard, in order:", shown)
kinds = [k for k, _ in phases]
if kinds[:4] != ["held", "back", "held", "back"]:
    bad.append(f"not two stops each followed by a restore with dynamic tables: {kinds}")
else:
    for i in (0, 2):
        if phases[i][1] != phases[i + 1][1] or len(phases[i][1]) != 2 or not all(phases[i][1].values()):
            bad.append(f"the restore after stop {i // 2 + 1} gave back other rows than the shards held: {phases[i][1]} -> {phases[i + 1][1]}")
evals = [int(m.group(1)) for l in said("ps.0") for m in [re.match(r"(\d+) updates applied", l)] if m]
if not evals or evals[-1] not in (steps, steps + 1):
    bad.append(f"the job did not end at step {steps}: ps.0 applied {evals}")
if bad:
    sys.exit("e2e: FAIL: " + "\n  ".join(bad))
PY
echo "e2e: elastic ps dynamic table OK"
