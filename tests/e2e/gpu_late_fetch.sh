#!/usr/bin/env bash
# End to end on one emulated GPU: the loss and metrics come down one step
# late (docs/gpu.md, "The host's waits"). The seed CNN with every op on
# /gpu:0 trains 12 steps on a slow device (DTF_EMU_SLOW_MS), with an
# evaluation of 10 batches at step 6 (and at the end) and checkpoints at
# steps 4, 8 and 12, once reading each step's fetches at its end
# (DTF_GPU_SYNC_FETCH=1) and once one step late (the default):
# - the same progress and evaluation lines, checkpoints equal byte for
#   byte, and the evaluations' summaries (their values as written to
#   eval/events.*, less the wall time) equal byte for byte;
# - the emulation's host waits that leave the GPU idle (waits within a
#   step: the host waits for the last work it queued): the synchronous run
#   makes one per training step and eval batch; the late run makes none but
#   those it must keep, one for each step whose results are needed before
#   the next step is queued (steps 4, 6 and 8, before a checkpoint or the
#   evaluation, and step 12, the last), one in the first step (it plans the
#   arena over its finished work), and in the evaluations (whose batch N+1
#   is queued before batch N's metrics are read) one for each evaluation's
#   last batch and one in the first evaluation's first batch (its arena);
#   the waits of the uploads and the checkpoints' copies are the same in
#   both runs.
# usage: gpu_late_fetch.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
work=$work/gpu_late_fetch
rm -rf "$work" && mkdir -p "$work"
steps=12
python3 "$root/tests/e2e/gpu_model.py" "$root/models/mnist_cnn.dtf" "$work/cnn.dtf" "$steps" ""
sed -i -e "s/checkpoint every 600 s keep 5/checkpoint every 4 steps keep 5/" \
  -e "s/every = $steps$/every = 6/" "$work/cnn.dtf"
grep -q "checkpoint every 4 steps" "$work/cnn.dtf" || fail "could not set the checkpoint period"
grep -q "every = 6$" "$work/cnn.dtf" || fail "could not set the evaluation period"
"$bin/dtfc" "$work/cnn.dtf" -o "$work/cnn.plan"

for mode in sync late; do
  sync=0
  [ "$mode" = late ] || sync=1
  DTF_GPU_SYNC_FETCH=$sync DTF_EMU_SLOW_MS=5 "$bin/dtf-run" "$work/cnn.plan" --emulate-gpus 1 \
    --log-every 3 --eval-steps 10 --model-dir "$work/$mode" > "$work/$mode.log" 2>&1 || {
    tail -20 "$work/$mode.log" >&2; fail "the $mode run failed"; }
done
python3 - "$work" "$steps" <<'PY'
import re, sys
work, steps = sys.argv[1], int(sys.argv[2])
fail = []
runs = {m: open(f"{work}/{m}.log").read() for m in ("sync", "late")}
def lines(text):
    # The progress and evaluation lines, less their timing.
    return [re.sub(r"\s+\d+ img/s.*", "", l) for l in text.splitlines()
            if re.match(r"(step \d+/\d+|eval  step \d+) ", l)]
sync, late = lines(runs["sync"]), lines(runs["late"])
if len(sync) != steps // 3 + 2:
    fail.append(f"the synchronous run logged {len(sync)} lines, expected {steps // 3 + 2}: {sync}")
if late != sync:
    fail.append(f"the late run logged {late}, the synchronous run {sync}")
idle = {}
for mode, text in runs.items():
    m = re.search(r"host waits that leave the GPU idle: (\d+) \((\d+) ms blocked\)", text)
    if not m:
        fail.append(f"{mode}: no count of the host waits that leave the GPU idle")
        continue
    idle[mode] = (int(m.group(1)), int(m.group(2)))
    print(f"e2e: {mode}: {idle[mode][0]} host waits left the GPU idle ({idle[mode][1]} ms blocked)")
if len(idle) == 2:
    # Per training step and eval batch one wait in the synchronous run; in
    # the late run the first step's and those of the 4 steps awaited at
    # once, and per evaluation (2 of 10 batches) its last batch's, and the
    # first evaluation's first batch's.
    saved = idle["sync"][0] - idle["late"][0]
    want = (steps - 5) + (2 * 10 - 3)
    if saved != want:
        fail.append(f"the late read saved {saved} waits that leave the GPU idle, not {want} (one per training step less the first step's and the 4 steps awaited at once, {steps - 5}; one per eval batch less each evaluation's last and the first evaluation's first, 2 * 10 - 3)")
    # The slow device: each step's graph launch keeps the synchronous run's
    # host waiting 5 ms within the step.
    if idle["sync"][1] < 5 * (steps - 2):
        fail.append(f"the synchronous run blocked {idle['sync'][1]} ms in waits that leave the GPU idle, less than 5 ms per replayed step")
for f in fail:
    print("e2e: FAIL: " + f)
if not fail:
    print(f"e2e: the same {len(sync)} progress and evaluation lines, late and synchronous: {sync}")
sys.exit(1 if fail else 0)
PY
# The evaluations' summaries: each event record less its wall time (field 1
# of the Event message), byte for byte.
python3 - "$work/sync/eval" "$work/late/eval" <<'PY' || fail "the late run's evaluation summaries differ from the synchronous run's"
import glob, struct, sys
def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1
        v |= (c & 0x7F) << s; s += 7
        if c < 0x80:
            return v, i
def records(folder):
    paths = glob.glob(folder + "/events.*")
    if len(paths) != 1:
        sys.exit(f"e2e: {folder} holds {len(paths)} event files, not 1")
    data, out, i = open(paths[0], "rb").read(), [], 0
    while i < len(data):
        (n,) = struct.unpack_from("<Q", data, i)
        event, i = data[i + 12:i + 12 + n], i + 16 + n
        kept, j = b"", 0
        while j < len(event):
            key, k = varint(event, j)
            wire = key & 7
            end = {0: lambda: varint(event, k)[1], 1: lambda: k + 8, 5: lambda: k + 4,
                   2: lambda: (lambda l, m: m + l)(*varint(event, k))}[wire]()
            if key >> 3 != 1:  # wall_time
                kept += event[j:end]
            j = end
        out.append(kept)
    return out
sync, late = records(sys.argv[1]), records(sys.argv[2])
if sync != late or len(sync) < 3:
    sys.exit(f"e2e: {len(sync)} synchronous and {len(late)} late eval records, not equal")
print(f"e2e: the {len(sync)} eval summary records are equal byte for byte, late and synchronous")
PY
for s in 4 8 12; do
  cmp "$work/sync/ckpt-$s.data-0-of-1" "$work/late/ckpt-$s.data-0-of-1" ||
    fail "checkpoint $s differs between the synchronous and the late run"
done
echo "e2e: checkpoints 4, 8 and 12 are identical, late and synchronous"
