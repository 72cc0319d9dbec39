#!/usr/bin/env bash
# The evaluator task under dtf-run's launcher: a cluster file with 1 ps, 2
# workers and an evaluator on 127.0.0.1; the launcher starts all four, the
# evaluator follows the checkpoints (every 100 steps) while the job trains,
# evaluates the last one and exits, and the launcher reports the job
# finished with exit 0. An evaluator without --model-dir, or for a plan with
# no eval set, is refused with its reason (exit 2).
# usage: evaluator.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
rm -rf "$work" && mkdir -p "$work"

base=$(free_ports 4 24000)
printf '{"ps": ["127.0.0.1:%d"], "worker": ["127.0.0.1:%d", "127.0.0.1:%d"], "evaluator": ["127.0.0.1:%d"]}\n' \
  "$base" $((base + 1)) $((base + 2)) $((base + 3)) > "$work/cluster.json"
mlp_plan mlp 1500 1500 100

echo "== dtf-run --cluster (1 ps, 2 workers, an evaluator)"
timeout 300 "$bin/dtf-run" "$work/mlp.plan" --cluster "$work/cluster.json" \
  --model-dir "$work/model" --log-every 250 > "$work/job.log" 2>&1 ||
  { tail -30 "$work/job.log" >&2; fail "evaluator: the job failed"; }
python3 - "$work/job.log" <<'PY' || { tail -30 "$work/job.log" >&2; fail "evaluator: the launcher's job"; }
import re, sys
log = open(sys.argv[1]).read().splitlines()
bad = []
if not any(re.match(r"\[launcher\] evaluator.0 started", l) for l in log):
    bad.append("the launcher did not start evaluator.0")
evals = [int(m.group(1)) for l in log for m in [re.match(r"evaluator.0 *\| evaluator: ckpt-(\d+)  step", l)] if m]
if len(evals) < 2 or evals[-1] < 1500:
    bad.append(f"the evaluator did not follow the job to its last step: {evals}")
if not any("the job finished" in l for l in log):
    bad.append("the launcher did not report the job finished")
if bad:
    print("\n".join(bad)); sys.exit(1)
print(f"   ok: the evaluator evaluated checkpoints {evals}")
PY

echo "== the evaluator's refusals"
set +e
TF_CONFIG='{"cluster": {"worker": ["127.0.0.1:1"], "evaluator": ["127.0.0.1:2"]}, "task": {"type": "evaluator"}}' \
  timeout 60 "$bin/dtf-run" "$work/mlp.plan" > "$work/nodir.log" 2>&1
nodir=$?
sed -e '/eval  *= idx/d' "$work/mlp.dtf" > "$work/noeval.dtf"
"$bin/dtfc" "$work/noeval.dtf" -o "$work/noeval.plan"
timeout 60 "$bin/dtf-run" "$work/noeval.plan" --cluster "$work/cluster.json" --job evaluator --task 0 \
  --model-dir "$work/model" > "$work/noeval.log" 2>&1
noeval=$?
set -e
[ $nodir -eq 2 ] && grep -q "give it the job's --model-dir" "$work/nodir.log" ||
  { cat "$work/nodir.log" >&2; fail "evaluator: without --model-dir: exit $nodir"; }
[ $noeval -eq 2 ] && grep -q "the plan has no eval set" "$work/noeval.log" ||
  { cat "$work/noeval.log" >&2; fail "evaluator: a plan without an eval set: exit $noeval"; }
echo "   ok: exit 2 without --model-dir and for a plan without an eval set"
# The job's last checkpoint is of another model: nothing newer will come, so
# the evaluator says why and exits at once instead of waiting.
sed -e 's/units = 256/units = 200/' "$work/mlp.dtf" > "$work/other.dtf"
"$bin/dtfc" "$work/other.dtf" -o "$work/other.plan"
set +e
timeout 60 "$bin/dtf-run" "$work/other.plan" --cluster "$work/cluster.json" --job evaluator --task 0 \
  --model-dir "$work/model" --steps 1500 > "$work/other.log" 2>&1
other=$?
set -e
[ $other -eq 4 ] && grep -q "cannot read the last step's checkpoint (checkpoint ckpt-[0-9]* .*hidden1/bias" "$work/other.log" ||
  { cat "$work/other.log" >&2; fail "evaluator: another model's last checkpoint: exit $other"; }
echo "   ok: another model's last checkpoint: exit 4 at once"
echo "evaluator: PASS"
