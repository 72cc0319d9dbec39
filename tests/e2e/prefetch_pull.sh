#!/usr/bin/env bash
# --prefetch-pull on a real cluster: the MLP of models/mlp.dtf with Adam
# 1e-3 (its momentum 0.9 at lr 0.05 diverges under staleness, as with
# --overlap-push), async, 160 steps on 1 ps + 1 worker (so that every update
# is the worker's own and the figures below are exact), with and without the
# option. With it, the next step's pull runs beside each step: the worker
# says how many steps took such a pull, how many of those lacked its own
# last gradient (the pulled global step below the one its last push
# completed: the pull read the ps before that push landed) and by how many
# global steps at most (the staleness bound, measured: must be 1). The ps
# applies exactly 160 updates (the worker counts its last push, not the
# pulled global step, so it stops at the step count), and the test accuracy
# at the end is within 0.1 of the run without (seen 2026-11-29 on 1 ps + 2
# workers: 0.80 without, 0.73 and 0.75 with, 0.78 with --overlap-push). A
# sync plan and --overlap-push beside it are refused: exit 2, saying why.
# usage: prefetch_pull.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
rm -rf "$work" && mkdir -p "$work"
cluster_json "$work/c1x1.json" 1 1
cluster_json "$work/c1x2.json" 1 2
sed -e 's/steps = 10000/steps = 160/' -e 's/every = 2000/every = 160/' \
    -e 's/update = sync(replicas_to_aggregate = 2, total_num_replicas = 3)/update = async/' \
    -e '/optimizer = momentum/,/momentum = 0.9)/c\    optimizer = adam(learning_rate = 0.001)' \
    -e '/checkpoint every/d' "$root/models/mlp.dtf" > "$work/mlp.dtf"
grep -q 'optimizer = adam' "$work/mlp.dtf" || fail "models/mlp.dtf changed: the test's edits no longer apply"
"$bin/dtfc" "$work/mlp.dtf" -o "$work/mlp.plan"

for variant in plain prefetch; do
  flags=()
  [ "$variant" = plain ] || flags=(--prefetch-pull)
  echo "== dtf-run mlp.plan --cluster c1x1.json ${flags[*]}"
  timeout 120 "$bin/dtf-run" "$work/mlp.plan" --cluster "$work/c1x1.json" --log-every 80 \
    "${flags[@]}" > "$work/$variant.log" 2>&1 ||
    { tail -20 "$work/$variant.log" >&2; fail "the $variant run failed"; }
done

python3 - "$work" <<'PY' || fail "--prefetch-pull: see above"
import re, sys
work = sys.argv[1]
def run(variant):
    text = open(f"{work}/{variant}.log").read()
    m = re.search(r"^ps.0 *\| (\d+) updates applied", text, re.M)
    acc = re.findall(r"^worker.0 *\| eval .*?accuracy[ =]([0-9.]+)", text, re.M)
    if not m or not acc:
        sys.exit(f"{variant}: no ps summary or evaluation line")
    return int(m.group(1)), float(acc[-1]), text
bad = []
plain_updates, plain_acc, _ = run("plain")
updates, acc, text = run("prefetch")
print(f"   updates applied {updates} (without: {plain_updates}); test accuracy {acc} (without: {plain_acc})")
if updates != 160 or plain_updates != 160:
    bad.append(f"the ps applied {updates} updates ({plain_updates} without), not 160")
if acc < plain_acc - 0.1:
    bad.append(f"test accuracy {acc} is more than 0.1 below {plain_acc} without --prefetch-pull")
lines = re.findall(r"^(worker\.\d) *\| --prefetch-pull: (\d+) steps took the pull started during "
                   r"the step before; (\d+) of those lacked this worker's own last gradient, by at "
                   r"most (\d+) global step", text, re.M)
if len(lines) != 1:
    bad.append(f"{len(lines)} workers said what their prefetched pulls read, not 1")
for task, took, behind, lag in lines:
    took, behind, lag = int(took), int(behind), int(lag)
    print(f"   {task}: {took} prefetched pulls, {behind} of them without its last gradient, lag at most {lag}")
    if took != 160:
        bad.append(f"{task}: {took} steps took a prefetched pull, not 160 (all but the first, and the end)")
    if behind < 80:
        bad.append(f"{task}: only {behind} prefetched pulls lacked its last gradient (did they run beside the step?)")
    if lag > 1:
        bad.append(f"{task}: a prefetched pull was {lag} global steps behind its last push (bound: 1)")
if bad:
    sys.exit("\n".join(bad))
PY

sed -e 's/steps = 10000/steps = 10/' "$root/models/mlp.dtf" > "$work/sync.dtf"
"$bin/dtfc" "$work/sync.dtf" -o "$work/sync.plan"
"$bin/dtf-run" certs --cluster "$work/c1x2.json" --out "$work/certs" > /dev/null
refused sync "worker.1: --prefetch-pull needs between-graph replication with update = async" \
  "$bin/dtf-run" "$work/sync.plan" --cluster "$work/c1x2.json" --job worker --task 1 \
  --tls-dir "$work/certs" --prefetch-pull
refused with-overlap-push "worker.1: --prefetch-pull and --overlap-push both start the next step's pull early" \
  "$bin/dtf-run" "$work/mlp.plan" --cluster "$work/c1x2.json" --job worker --task 1 \
  --tls-dir "$work/certs" --prefetch-pull --overlap-push
echo "e2e: --prefetch-pull ok"
