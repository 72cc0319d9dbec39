#!/usr/bin/env bash
# End to end on an emulated GPU: a model of models/ with its whole graph in
# `on "/gpu:0" { ... }` (soft placement on, device placement logged) is
# compiled, then trained three ways from the same seed:
#   1. on a machine without a CUDA driver (DTF_CUDA_DRIVER names a missing
#      library): it trains on the CPU, saying so once, and without soft
#      placement the plan is refused with the op, the device and the fix;
#   2. on one GPU of dtf's CUDA emulation (dtf-run --emulate-gpus 1): matmul
#      on cuBLAS, convolution and pooling on cuDNN, every fusable op as a
#      generated kernel (the loss, its gradient and argmax, the MLP's
#      dropouts and their gradients too), no op moved to the CPU (the MLP
#      compiled with --fuse-dropout=off keeps op-by-op dropouts, which have
#      no GPU kernel: refused without soft placement); the emulation must
#      have run the library calls and graph
#      launches it reports at exit (one graph launch per GPU segment and
#      step, the segments' copies and no more), and the loss at every
#      logged step must match the CPU run's within TOL (relative).
# usage: gpu_train.sh BIN_DIR WORK_DIR MODEL STEPS LOG_EVERY TOL
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
model=$3 steps=$4 every=$5 tol=$6
work=$work/gpu_$model
mkdir -p "$work"
# The model's graph on /gpu:0, with soft placement (and a copy without).
python3 "$root/tests/e2e/gpu_model.py" "$root/models/$model.dtf" "$work/soft.dtf" "$steps" \
  "soft_placement = true, log_device_placement = true"
python3 "$root/tests/e2e/gpu_model.py" "$root/models/$model.dtf" "$work/hard.dtf" "$steps"
"$bin/dtfc" "$work/soft.dtf" -o "$work/soft.plan"
"$bin/dtfc" "$work/hard.dtf" -o "$work/hard.plan"

# No driver, no soft placement: refused, naming the op, the device and fixes.
if DTF_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$bin/dtf-run" "$work/hard.plan" \
    --steps 1 > "$work/hard.log" 2>&1; then
  fail "a GPU plan without soft placement ran on a machine without a driver"
fi
grep -q "is placed on /device:GPU:0, a device this process does not have" "$work/hard.log" ||
  fail "no refusal naming the device: $(cat "$work/hard.log")"
grep -q "no CUDA driver: cannot load /nonexistent/libcuda.so.1" "$work/hard.log" ||
  fail "the refusal does not say why: $(cat "$work/hard.log")"
grep -q "soft_placement = true" "$work/hard.log" || fail "the refusal gives no fix"
grep -q -- "--emulate-gpus 1" "$work/hard.log" || fail "the refusal does not mention --emulate-gpus"
echo "e2e: refused without a driver: $(grep -m1 'placed on' "$work/hard.log" | cut -c1-160)..."

# A GPU, no soft placement: neither model has an op without a GPU kernel
# left (the loss, its gradient and argmax are generated row kernels, the
# MLP's dropouts generated dropout kernels): each trains on the GPU without
# soft placement.
"$bin/dtf-run" "$work/hard.plan" --emulate-gpus 1 --steps 1 > "$work/nokernel.log" 2>&1 ||
  fail "$model without soft placement did not run on the GPU: $(tail -5 "$work/nokernel.log")"
grep -q "soft placement" "$work/nokernel.log" &&
  fail "$model without soft placement moved ops: $(grep 'soft placement' "$work/nokernel.log")"
# The MLP with op-by-op dropouts (--fuse-dropout=off): dtf.dropout has no GPU
# kernel, so the plan is refused, the op named with its device and the fix.
if [ "$model" = mlp ]; then
  "$bin/dtfc" "$work/hard.dtf" --fuse-dropout=off -o "$work/nodrop.plan"
  if "$bin/dtf-run" "$work/nodrop.plan" --emulate-gpus 1 --steps 1 > "$work/nodrop.log" 2>&1; then
    fail "an op with no GPU kernel ran on a GPU without soft placement"
  fi
  grep -qE "is placed on /device:GPU:0, a device this process does not have \(dtf-run has no GPU kernel for dtf\.dropout" "$work/nodrop.log" ||
    fail "no refusal naming dtf.dropout: $(cat "$work/nodrop.log")"
  grep -q "soft_placement = true" "$work/nodrop.log" || fail "the refusal gives no fix"
  # With soft placement those 4 ops (2 dropouts, 2 gradients) run on the CPU,
  # said once, and split the step into segments again.
  "$bin/dtfc" "$work/soft.dtf" --fuse-dropout=off -o "$work/nodropsoft.plan"
  "$bin/dtf-run" "$work/nodropsoft.plan" --emulate-gpus 1 --steps 1 > "$work/nodropsoft.log" 2>&1 ||
    fail "the MLP with op-by-op dropouts did not train under soft placement: $(tail -5 "$work/nodropsoft.log")"
  grep -q "train_step: soft placement: 4 ops placed on a device this process lacks run on /job:localhost/replica:0/task:0/device:CPU:0 (first: .*: dtf.dropout on /device:GPU:0)" "$work/nodropsoft.log" &&
    grep -q "train_step: soft placement: dtf-run has no GPU kernel for dtf.dropout, dtf.dropout_grad (" "$work/nodropsoft.log" &&
    grep -q "train_step: 5 GPU segments" "$work/nodropsoft.log" ||
    fail "soft placement did not move the 4 op-by-op dropouts to the CPU: $(grep 'soft placement\|GPU segment' "$work/nodropsoft.log" | cut -c1-200)"
fi

# No driver, soft placement: the CPU path, said once per program.
DTF_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$bin/dtf-run" "$work/soft.plan" \
  --log-every "$every" --eval-steps 10 > "$work/cpu.log" 2>&1 || {
  echo "e2e: the CPU run failed:" >&2; tail -20 "$work/cpu.log" >&2; exit 1; }
n=$(grep -c "train_step: soft placement: no CUDA driver" "$work/cpu.log" || true)
[ "$n" = 1 ] || fail "the CPU run should say once that there is no driver, said $n times"
grep -q "device:GPU" "$work/cpu.log" && grep -q "dtf.matmul (.*): /job:localhost/replica:0/task:0/device:CPU:0 (placed on /device:GPU:0: soft placement)" "$work/cpu.log" ||
  fail "the CPU run's placement log does not show matmul moved to the CPU"
# Regions dtf-fuse made only because their ops are on a GPU (one op, a
# column sum) run op by op on the CPU, as fast as without them.
if [ "$model" = mnist_cnn ]; then
  for op in dtf.sum_to_shape dtf.relu_grad dtf.reduce_grad; do
    grep -q "^$op (.*): /job:localhost/replica:0/task:0/device:CPU:0 (placed on /device:GPU:0" "$work/cpu.log" ||
      fail "the CPU run does not run $op op by op: $(grep -c 'dtf.fused (' "$work/cpu.log") fused ops"
  done
fi

# One emulated GPU. Every run evaluates 10 batches (--eval-steps): the
# evaluation is compared, not measured.
"$bin/dtf-run" "$work/soft.plan" --emulate-gpus 1 --log-every "$every" --eval-steps 10 \
  > "$work/gpu.log" 2>&1 || {
  echo "e2e: the emulated GPU run failed:" >&2; tail -20 "$work/gpu.log" >&2; exit 1; }
grep "cuda emulation:" "$work/gpu.log" || fail "the emulation printed no counters"
# The same plan evaluating only: its counters are the evaluation's share of
# the training run's, so the rest is the training steps'.
"$bin/dtf-run" "$work/soft.plan" --emulate-gpus 1 --steps 0 --eval-steps 10 > "$work/eval.log" 2>&1 || {
  echo "e2e: the evaluation-only run failed:" >&2; tail -20 "$work/eval.log" >&2; exit 1; }
python3 - "$work/cpu.log" "$work/gpu.log" "$steps" "$every" "$tol" "$model" "$work/eval.log" <<'PY'
import re, sys
cpu, gpu, steps, every, tol, model = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
evalonly = open(sys.argv[7]).read()
def losses(path):
    return [(int(m.group(1)), float(m.group(2))) for line in open(path)
            for m in [re.match(r"step (\d+).*?loss ([0-9.eE+-]+)", line)] if m]
a, b = losses(cpu), losses(gpu)
fail = []
if len(a) < steps // every or [s for s, _ in a] != [s for s, _ in b]:
    fail.append("logged steps differ: cpu %s gpu %s" % (a, b))
worst = 0.0
for (s, x), (_, y) in zip(a, b):
    rel = abs(x - y) / max(abs(x), 1e-6)
    worst = max(worst, rel)
    if rel > tol:
        fail.append("step %d: cpu loss %g, gpu loss %g (relative %.2e > %g)" % (s, x, y, rel, tol))
if not b or not b[-1][1] < 0.8 * b[0][1]:
    fail.append("the GPU run's loss did not fall by 20%%: %s" % b)
text = open(gpu).read()
stats = re.search(r"cuda emulation: (\d+) kernel launches, (\d+) cuBLAS calls, (\d+) cuDNN calls, (\d+) copies, (\d+) device allocations, (\d+) pinned host allocations, (\d+) graphs captured, (\d+) graph launches", text)
if not stats:
    fail.append("no emulation counters")
else:
    blas, dnn, copies, allocs, captured, launches = (int(stats.group(i)) for i in (2, 3, 4, 5, 7, 8))
    # Every GPU op of every step after the first is a graph launch: at least
    # one matmul per step on cuBLAS, and for the CNN the convolutions and
    # pools on cuDNN.
    if blas < steps: fail.append("only %d cuBLAS calls in %d steps" % (blas, steps))
    if model == "mnist_cnn" and dnn < 6 * steps: fail.append("only %d cuDNN calls in %d steps" % (dnn, steps))
    if launches < steps: fail.append("only %d graph launches in %d steps" % (launches, steps))
    if copies < 2 * steps: fail.append("only %d copies in %d steps" % (copies, steps))
    # Buffers are made in the first steps (train, eval) and then reused.
    if allocs > 400: fail.append("%d device allocations: buffers are not reused" % allocs)
# cuDNN's convolution algorithm is chosen once per shape and direction: the
# seed CNN's 5 (2 forward, 1 backward data, 2 backward filter; eval's forward
# convolutions have the same shapes), not once per step.
alg = re.search(r"(\d+) cuDNN algorithm choices", text)
if model == "mnist_cnn" and (not alg or int(alg.group(1)) != 5):
    fail.append("cuDNN algorithm choices are not 5 (once per shape): %s" % (alg.group(0) if alg else "no counter"))
for op in ["dtf.matmul"] + (["dtf.conv2d", "dtf.conv2d_backprop_input", "dtf.conv2d_backprop_filter", "dtf.max_pool", "dtf.max_pool_grad"] if model == "mnist_cnn" else []):
    if not re.search(re.escape(op) + r" \(.*\): /job:localhost/replica:0/task:0/device:GPU:0\n", text):
        fail.append("%s is not placed on GPU:0 in the placement log" % op)
# Every op of both models has a GPU kernel now (the MLP's dropouts are
# generated kernels): none moved to the CPU, none named by a soft placement
# line.
if re.search(r"\): /job:localhost/replica:0/task:0/device:CPU:0 \(placed on /device:GPU:0: soft placement\)", text):
    fail.append("the placement log shows an op moved to the CPU")
left = re.search(r"train_step: soft placement: dtf-run has no GPU kernel for (.*?) \(its GPU kernels", text)
allowed = set()
on_cpu = set(left.group(1).replace(" (not f32)", "").split(", ")) if left else set()
if not on_cpu <= allowed:
    fail.append("ops with a generated GPU kernel stayed on the CPU: %s" % sorted(on_cpu - allowed))
moved = re.search(r"train_step: soft placement: (\d+) ops placed on a device", text)
# The GPU segments (consecutive GPU ops, one CUDA graph each) and the copies
# at their boundaries, as log_device_placement lists them.
seg = re.search(r"train_step: (\d+) GPU segments? \(one CUDA graph each\): (.*)", text)
if not seg:
    fail.append("no GPU segments in the placement log")
else:
    segments = int(seg.group(1))
    copies_listed = sum(int(u) + int(d) for u, d in re.findall(r"(\d+) values up, (\d+) down", seg.group(2)))
    # Each dropout kernel copies its step's key up inside the graph.
    copies_listed += sum(int(k) for k in re.findall(r"(\d+) dropout keys up", seg.group(2)))
    # Before segments (every GPU op its own graph and uploads): the CNN made
    # 22 graph launches and 32 copies per step, the MLP 11 and 31. Now the
    # CNN keeps its weights on the GPU (10 copies); the MLP keeps none (its
    # moving averages read them on the CPU) and its loss and accuracy means
    # run on the GPU, so the per-example losses of the CPU loss cross up (30).
    # With the loss, its gradient and argmax as generated row kernels the
    # CNN's step is one segment (was 4 segments, 10 copies, 3 ops on the
    # CPU), the MLP's 5 split only by its dropouts (was 8, 30, 7). With the
    # dropouts as generated kernels the MLP's step is one segment too, 21
    # copies (9 up, 8 down, 4 dropout keys; was 5 segments, 25 copies, 4 ops
    # on the CPU).
    most = {"mnist_cnn": (1, 5, 0), "mlp": (1, 21, 0)}[model]
    if segments > most[0]: fail.append("%d GPU segments per step, expected at most %d" % (segments, most[0]))
    if copies_listed > most[1]: fail.append("%d copies per step, expected at most %d" % (copies_listed, most[1]))
    if (int(moved.group(1)) if moved else 0) > most[2]:
        fail.append("more than %d ops left on the CPU: %s" % (most[2], moved.group(0) if moved else "none said"))
    ev = re.search(r"(\d+) copies, .* (\d+) graph launches", evalonly)
    if stats and ev:
        train_copies = copies - int(ev.group(1))
        train_launches = launches - int(ev.group(2))
        # Steps 1 and 2 run eagerly (buffers made, then moved into the
        # arena); from step 3 each segment is one cuGraphLaunch.
        if train_launches != segments * (steps - 2):
            fail.append("%d graph launches in %d training steps, expected one per segment and step: %d x %d" % (train_launches, steps, segments, steps - 2))
        # Plus copies made once per run, never per step (variables kept on
        # the GPU go up at the start and come down for checkpoints): fewer
        # than one per step.
        once = train_copies - copies_listed * steps
        if not 0 <= once < steps:
            fail.append("%d copies in %d training steps, expected the %d per step the segments list (and fewer than %d once per run)" % (train_copies, steps, copies_listed, steps))
        print("e2e: %s: %d GPU segments, %d graph launches and %d copies per step (%d more once per run); %d ops on the CPU (%s)" % (
            model, segments, train_launches / (steps - 2), copies_listed, once, int(moved.group(1)) if moved else 0, ", ".join(sorted(on_cpu))))
    else:
        fail.append("no emulation counters for the evaluation-only run")
for f in fail:
    print("e2e: FAIL: " + f)
print("e2e: %s: %d logged steps match within %.1e (worst %.2e); %s" % (model, len(a), tol, worst, stats.group(0) if stats else "no stats"))
sys.exit(1 if fail else 0)
PY

# --profile on the GPU: each GPU op's time between CUDA events on its
# stream (the emulation's clock: the host time its queued work took), the
# segment run without a CUDA graph; the CNN's library ops and its generated
# kernels each get a time of their own, not the segment's first op all of it.
if [ "$model" = mnist_cnn ]; then
  "$bin/dtf-run" "$work/soft.plan" --emulate-gpus 1 --steps 4 --eval-steps 1 --profile \
    > "$work/profile.log" 2>&1 || fail "the --profile run failed: $(tail -5 "$work/profile.log")"
  python3 - "$work/profile.log" <<'PY' || fail "--profile did not time the GPU ops: $(grep -A30 '^profile:' "$work/profile.log")"
import re, sys
text = open(sys.argv[1]).read()
head = re.search(r"  (\d+) ops on /job:localhost/replica:0/task:0/device:GPU:0 timed on the GPU by CUDA events: ([0-9.]+) ms per step \(run without CUDA graphs, and each of their 1 segment waited", text)
assert head and int(head.group(1)) >= 30 and float(head.group(2)) > 0, "no line of GPU ops timed by events"
assert "0 graph launches" in text, "the profiled segment was captured as a CUDA graph"
gpu = {op: float(ms) for ms, op in re.findall(r"^ +([0-9.]+) ms/step  .*: (dtf\.\w+) \(GPU\)$", text, re.M)}
kinds = {op: float(ms) for op, ms in re.findall(r"^    (dtf\.\w+) +x\d+ +([0-9.]+) ms/step", text, re.M)}
for op in ("dtf.conv2d", "dtf.conv2d_backprop_filter", "dtf.matmul", "dtf.fused"):
    assert kinds.get(op, 0) > 0, f"{op} has no time of its own: {kinds}"
assert gpu and max(gpu.values()) < 0.9 * float(head.group(2)), f"one op holds the segment's whole time: {gpu}"
print(f"e2e: --profile: {head.group(1)} GPU ops timed by events, {head.group(2)} ms per step; conv2d {kinds['dtf.conv2d']} ms, generated kernels {kinds['dtf.fused']} ms")
PY
fi
