#!/usr/bin/env bash
# End to end on an emulated GPU: a model of models/ with its whole graph in
# `on "/gpu:0" { ... }` (soft placement on, device placement logged) is
# compiled, then trained three ways from the same seed:
#   1. on a machine without a CUDA driver (DTF_CUDA_DRIVER names a missing
#      library): it trains on the CPU, saying so once, and without soft
#      placement the plan is refused with the op, the device and the fix;
#   2. on one GPU of dtf's CUDA emulation (dtf-run --emulate-gpus 1): matmul
#      on cuBLAS, convolution and pooling on cuDNN, the rest moved to the
#      CPU; the emulation must have run the library calls and graph launches
#      it reports at exit, and the loss at every logged step must match the
#      CPU run's within TOL (relative).
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

# A GPU, no soft placement: an op with no GPU kernel is refused, named with
# its device and the fix.
if "$bin/dtf-run" "$work/hard.plan" --emulate-gpus 1 --steps 1 > "$work/nokernel.log" 2>&1; then
  fail "an op with no GPU kernel ran on a GPU without soft placement"
fi
grep -qE "is placed on /device:GPU:0, a device this process does not have \((dtf-run has no GPU kernel for dtf\.|the plan has no GPU code for its generated kernels)" "$work/nokernel.log" ||
  fail "no refusal naming the op without a GPU kernel: $(cat "$work/nokernel.log")"
grep -q "soft_placement = true" "$work/nokernel.log" || fail "the refusal gives no fix"

# No driver, soft placement: the CPU path, said once per program.
DTF_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$bin/dtf-run" "$work/soft.plan" \
  --log-every "$every" > "$work/cpu.log" 2>&1 || {
  echo "e2e: the CPU run failed:" >&2; tail -20 "$work/cpu.log" >&2; exit 1; }
n=$(grep -c "train_step: soft placement: no CUDA driver" "$work/cpu.log" || true)
[ "$n" = 1 ] || fail "the CPU run should say once that there is no driver, said $n times"
grep -q "device:GPU" "$work/cpu.log" && grep -q "dtf.matmul (.*): /job:localhost/replica:0/task:0/device:CPU:0 (placed on /device:GPU:0: soft placement)" "$work/cpu.log" ||
  fail "the CPU run's placement log does not show matmul moved to the CPU"

# One emulated GPU.
"$bin/dtf-run" "$work/soft.plan" --emulate-gpus 1 --log-every "$every" \
  > "$work/gpu.log" 2>&1 || {
  echo "e2e: the emulated GPU run failed:" >&2; tail -20 "$work/gpu.log" >&2; exit 1; }
grep "cuda emulation:" "$work/gpu.log" || fail "the emulation printed no counters"
python3 - "$work/cpu.log" "$work/gpu.log" "$steps" "$every" "$tol" "$model" <<'PY'
import re, sys
cpu, gpu, steps, every, tol, model = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
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
if not re.search(r"\): /job:localhost/replica:0/task:0/device:CPU:0 \(placed on /device:GPU:0: soft placement\)", text):
    fail.append("the placement log shows no op moved to the CPU")
for f in fail:
    print("e2e: FAIL: " + f)
print("e2e: %s: %d logged steps match within %.1e (worst %.2e); %s" % (model, len(a), tol, worst, stats.group(0) if stats else "no stats"))
sys.exit(1 if fail else 0)
PY
