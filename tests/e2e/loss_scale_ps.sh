#!/usr/bin/env bash
# End to end, in real processes: mixed_float16's dynamic loss scale across
# the ps (docs/protocol.md, "Loss scaling across the ps"). models/mlp.dtf,
# STEPS steps, under mixed_float16 with an initial scale so large (2^24: the
# loss gradient times it passes f16's 65504) that the first steps overflow,
# async on 1 ps + 2 workers, then sync (2 of 2 replicas) on 2 ps + 2 workers
# (the scale and its count on one ps, every ps guarding its updates):
#  - each worker says each push it skipped, one line per skip with its step;
#  - the final checkpoint's loss_scale is 2^24 halved once per skipped
#    update: async, once per skipped push (each push is an update, as in
#    async TensorFlow); sync, once per step some replica skipped (the
#    replicas agree: the update is skipped whole, the scale halved once);
#  - its count of good steps is what followed the last skip (sync), its
#    global step is STEPS (async: or one more, two workers pushing at once), the loss is finite and below its start, and the momentum slots
#    moved (the updates ran once the scale came down).
# usage: loss_scale_ps.sh BIN_DIR WORK_DIR [STEPS]
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$1" "$2"
steps=${3:-20}
work=$work/loss_scale_ps
rm -rf "$work" && mkdir -p "$work"
for mode in async sync; do
  update="update = async"
  [[ $mode == sync ]] && update="update = sync(replicas_to_aggregate = 2, total_num_replicas = 2)"
  sed -E -e "s/^( *)update = sync\(.*\)$/\1$update/" -e "s/steps = 10000/steps = $steps/" \
    -e "s/, every = 2000//" -e "s/^( *)seed = 1$/\1seed = 1\n\1precision = mixed_float16\n\1loss_scale = dynamic(initial_scale = 16777216)/" \
    "$root/models/mlp.dtf" > "$work/$mode.dtf"
  grep -q "loss_scale = dynamic" "$work/$mode.dtf" && grep -q "^ *$update$" "$work/$mode.dtf" ||
    fail "could not make the $mode model from models/mlp.dtf"
  "$bin/dtfc" "$work/$mode.dtf" --fusion=off -o "$work/$mode.plan"
done
cluster_json "$work/async.json" 1 2
cluster_json "$work/sync.json" 2 2

for mode in async sync; do
  timeout 120 "$bin/dtf-run" "$work/$mode.plan" --cluster "$work/$mode.json" --threads 1 \
    --log-every 4 --eval-steps 1 --model-dir "$work/$mode.ckpt" > "$work/$mode.log" 2>&1 ||
    { tail -30 "$work/$mode.log" >&2; fail "the $mode run failed"; }
  # The last checkpoint (async workers may push a step past STEPS together).
  last=$(ls "$work/$mode.ckpt" | sed -nE 's/^ckpt-([0-9]+)\.data-0-of-[12]$/\1/p' | sort -n | tail -1)
  [[ -n $last ]] || { ls "$work/$mode.ckpt" >&2; fail "the $mode run saved no checkpoint"; }
  python3 - "$work/$mode.log" "$work/$mode.ckpt/ckpt-$last.data-" "$mode" "$steps" "$root" <<'PY' ||
import glob, math, re, sys
log, data, mode, steps, root = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
sys.path.insert(0, root + "/tests/e2e")
from ckpt_diff import read
text = open(log).read()
skips = [(w, int(s), float(sc)) for w, s, sc in re.findall(
    r"^(worker\.\d) \| step (\d+): a gradient is not finite at loss scale ([0-9.e+]+): "
    r"push skipped \(gradients withheld; the ps skips the update and halves the scale\)$",
    text, re.M)]
if not skips:
    sys.exit(f"e2e: {mode}: no worker said a skipped push")
for w in ("worker.0", "worker.1"):
    if not any(s[0] == w for s in skips) and mode == "sync":
        sys.exit(f"e2e: sync: {w} skipped no push (both replicas overflow at 2^24)")
# Async: every skipped push is an update that halves the scale; sync: every
# step some replica skipped is one skipped update, halved once.
halvings = len(skips) if mode == "async" else len({s for _, s, _ in skips})
shards = {}
for path in sorted(glob.glob(data + "*")):  # every ps's shard of the checkpoint
    shards.update(read(path))
t = {name: values for (name, _), (_, _, _, values) in shards.items()}
scale, good, step = t["loss_scale"][0], t["loss_scale_good_steps"][0], t["global_step"][0]
want = 16777216.0 / 2 ** halvings
losses = [float(x) for x in re.findall(r"^worker\.\d \| step \d+/\d+ +loss +([-0-9.e+naif]+)", text, re.M)]
moved = sum(1 for (name, _), (_, _, _, v) in shards.items()
            if name.endswith("/Momentum") for x in v if x != 0)
print(f"e2e: {mode}: {len(skips)} skip lines at steps {sorted({s for _, s, _ in skips})}, "
      f"final scale {scale:g} (2^24 / 2^{halvings}), good steps {good}, global step {step}, "
      f"losses {losses[:1]}..{losses[-1:]}")
if scale != want:
    sys.exit(f"e2e: {mode}: the checkpoint's loss scale is {scale:g}, not 2^24 halved "
             f"{halvings} times ({want:g})")
if step != steps and not (mode == "async" and steps <= step <= steps + 1):
    sys.exit(f"e2e: {mode}: the checkpoint's global step is {step}, not {steps}")
if mode == "sync" and good != steps - max(s for _, s, _ in skips):
    sys.exit(f"e2e: sync: {good} good steps counted after the last skip at step "
             f"{max(s for _, s, _ in skips)} of {steps}")
if not 0 < good <= step - halvings:
    sys.exit(f"e2e: {mode}: {good} good steps counted, {halvings} of {steps} skipped")
if len(losses) < 2 or not all(math.isfinite(x) for x in losses) or not losses[-1] < losses[0]:
    sys.exit(f"e2e: {mode}: the logged losses are not finite and falling: {losses}")
if moved == 0:
    sys.exit(f"e2e: {mode}: no momentum slot moved: no update ran after the scale came down")
PY
    fail "the $mode run's skips, scale or checkpoint are wrong"
done
echo "e2e: loss scale across the ps: skipped pushes said, the scale halved per skipped update (async) and once per skipped sync update, training goes on"
