#!/usr/bin/env bash
# End to end on an emulated GPU, with copies on a stream of their own: a
# model of models/ with its graph on `/gpu:0` trains under each order of the
# emulation's streams (DTF_EMU_STREAM_ORDER=submission, reversed,
# interleaved: docs/gpu.md, "Streams out of order"). A segment's uploads go
# on the copy stream and its kernels wait for them by events, its copies
# down go back on the copy stream after their kernels' events, so every
# order must log the same loss at every logged step as `submission` (work
# run when submitted, where no event can be missing); the emulation must
# have run cross-stream waits eagerly and replayed at least one edge between
# the streams per upload and graph launch. A value that names no order is
# refused. With TOWERS > 1 the model trains as that many in-graph towers on
# as many emulated GPUs (NCCL all-reduce and broadcast ordered by events):
# the same losses in every order, and cross-stream waits.
# usage: gpu_stream_orders.sh BIN_DIR WORK_DIR MODEL STEPS LOG_EVERY [TOWERS]
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
model=$3 steps=$4 every=$5 towers=${6:-1}
work=$work/gpu_orders_${model}_$towers
gpus=(--emulate-gpus "$towers")
[ "$towers" -gt 1 ] && gpus+=(--gpu-towers "$towers")
mkdir -p "$work"
python3 "$root/tests/e2e/gpu_model.py" "$root/models/$model.dtf" "$work/model.dtf" "$steps" \
  "soft_placement = true, log_device_placement = true"
"$bin/dtfc" "$work/model.dtf" -o "$work/model.plan"

if DTF_EMU_STREAM_ORDER=sideways "$bin/dtf-run" "$work/model.plan" --emulate-gpus 1 \
    --steps 1 > "$work/bad.log" 2>&1; then
  fail "DTF_EMU_STREAM_ORDER=sideways was not refused"
fi
grep -q "DTF_EMU_STREAM_ORDER=sideways names no order of the emulation's streams: submission, reversed (the default) or interleaved" \
  "$work/bad.log" || fail "the refusal does not name the orders: $(cat "$work/bad.log")"

for order in submission reversed interleaved; do
  DTF_EMU_STREAM_ORDER=$order "$bin/dtf-run" "$work/model.plan" "${gpus[@]}" \
    --log-every "$every" --eval-steps 10 > "$work/$order.log" 2>&1 || {
    echo "e2e: the run under $order failed:" >&2; tail -20 "$work/$order.log" >&2; exit 1; }
done
python3 - "$work" "$steps" "$every" "$towers" <<'PY'
import re, sys
work, steps, every, towers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
fail = []
def losses(text):
    return [(int(m.group(1)), m.group(2)) for line in text.splitlines()
            for m in [re.match(r"step (\d+).*?loss ([0-9.eE+-]+)", line)] if m]
runs = {o: open("%s/%s.log" % (work, o)).read() for o in ("submission", "reversed", "interleaved")}
base = losses(runs["submission"])
if len(base) < steps // every:
    fail.append("submission logged %d losses, expected %d" % (len(base), steps // every))
for order in ("reversed", "interleaved"):
    got = losses(runs[order])
    if got != base:
        fail.append("%s: losses %s differ from submission's %s" % (order, got, base))
seg = re.search(r"(?:train_step|worker_step \(tower 0\)): (\d+) GPU segments? \(one CUDA graph each\): (.*)", runs["reversed"])
up = sum(int(u) for u, _ in re.findall(r"(\d+) values up, (\d+) down", seg.group(2))) if seg else 0
if not seg or up == 0:
    fail.append("no segment with uploads in the placement log")
for order, text in runs.items():
    m = re.search(r"(\d+) graph launches .*; cross-stream waits: (\d+) eager, (\d+) replayed\b", text, re.M)
    if not m:
        fail.append("%s: no cross-stream counters" % order)
        continue
    launches, eager, replayed = (int(m.group(i)) for i in (1, 2, 3))
    # The eager steps order each segment's uploads before their readers
    # (in submission order the uploads ran already: nothing to wait for);
    # every replay keeps an edge from each upload to its first reader.
    if order != "submission" and eager < up:
        fail.append("%s: %d eager cross-stream waits, fewer than the %d uploads" % (order, eager, up))
    if launches == 0 or replayed < launches * up // max(1, int(seg.group(1)) if seg else 1):
        fail.append("%s: %d edges between streams replayed in %d graph launches (%d uploads per step)" % (order, replayed, launches, up))
    print("e2e: %s: %d graph launches, cross-stream waits %d eager, %d replayed" % (order, launches, eager, replayed))
for f in fail:
    print("e2e: FAIL: " + f)
print("e2e: the same %d logged losses under submission, reversed and interleaved: %s" % (len(base), [l for _, l in base]))
sys.exit(1 if fail else 0)
PY
