#!/usr/bin/env bash
# End to end on an emulated GPU: what dtf does when part of the GPU stack
# fails (docs/gpu.md, "When part of the GPU stack is missing"). The seed CNN
# with its graph on /gpu:0 (soft placement on, placement logged) trains four
# ways from the same seed:
#   1. on the CPU (no CUDA driver): the reference losses;
#   2. on the emulation without cuDNN (DTF_CUDNN_LIBRARY names a missing
#      library): the convolutions and pools (and their gradients) run on the
#      CPU, said in one line naming cuDNN and the path; matmul stays on the
#      GPU on cuBLAS, and no cuDNN call is made;
#   3. without cuBLAS (DTF_CUBLAS_LIBRARY): matmul moves, and so do the
#      convolutions (their filters are transposed with cuBLAS), said once;
#      the pools stay on cuDNN, and no cuBLAS call is made;
#   4. with cuBLAS calls that a capture cannot hold (DTF_EMU_CAPTURE_UNSAFE=
#      cublas): the capture fails, said exactly once, and the segment runs
#      eagerly from then on (no graph launch in the training steps).
# None of these runs lets a library call compute in TF32 (the default); the
# same plan with session(allow_tf32 = true) lets every cuBLAS call and
# convolution (the emulation counts them by their math mode).
# The loss at every logged step matches the CPU run's within TOL (relative).
# usage: gpu_fallbacks.sh BIN_DIR WORK_DIR [STEPS] [TOL]
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$1" "$2"
steps=${3:-40} tol=${4:-3e-3}
work=$work/gpu_fallbacks
mkdir -p "$work"
python3 "$root/tests/e2e/gpu_model.py" "$root/models/mnist_cnn.dtf" "$work/cnn.dtf" "$steps" \
  "soft_placement = true, log_device_placement = true"
"$bin/dtfc" "$work/cnn.dtf" -o "$work/cnn.plan"
python3 "$root/tests/e2e/gpu_model.py" "$root/models/mnist_cnn.dtf" "$work/tf32.dtf" "$steps" \
  "soft_placement = true, allow_tf32 = true"
"$bin/dtfc" "$work/tf32.dtf" -o "$work/tf32.plan"
run() { # run NAME [dtf-run flags]: trains the plan, its log in NAME.log
  local name=$1; shift
  "$bin/dtf-run" "$work/cnn.plan" --log-every 10 --eval-steps 10 "$@" > "$work/$name.log" 2>&1 ||
    { tail -20 "$work/$name.log" >&2; fail "the $name run failed"; }
}
DTF_CUDA_DRIVER=/nonexistent/libcuda.so.1 run cpu
DTF_CUDNN_LIBRARY=/nonexistent/libcudnn.so.9 run nodnn --emulate-gpus 1
DTF_CUBLAS_LIBRARY=/nonexistent/libcublas.so.13 run noblas --emulate-gpus 1
DTF_EMU_CAPTURE_UNSAFE=cublas run eager --emulate-gpus 1
"$bin/dtf-run" "$work/tf32.plan" --emulate-gpus 1 --steps 10 > "$work/tf32.log" 2>&1 ||
  { tail -20 "$work/tf32.log" >&2; fail "the allow_tf32 run failed"; }
python3 - "$work" "$tol" <<'PY'
import re, sys
work, tol = sys.argv[1], float(sys.argv[2])
def losses(text):
    return [(int(m.group(1)), float(m.group(2)))
            for m in re.finditer(r"^step (\d+).*?loss ([0-9.eE+-]+)", text, re.M)]
cpu = losses(open(work + "/cpu.log").read())
fail = []
cpu_ops = r"\(.*\): /job:localhost/replica:0/task:0/device:CPU:0 \(placed on /device:GPU:0: soft placement\)$"
gpu_ops = r"\(.*\): /job:localhost/replica:0/task:0/device:GPU:0$"
for name, lib, path, moved, kept, zero, used in [
        ("nodnn", "cuDNN", "/nonexistent/libcudnn.so.9",
         ["dtf.conv2d", "dtf.conv2d_backprop_input", "dtf.conv2d_backprop_filter",
          "dtf.max_pool", "dtf.max_pool_grad"], ["dtf.matmul"], 3, 2),
        ("noblas", "cuBLAS", "/nonexistent/libcublas.so.13",
         ["dtf.matmul", "dtf.conv2d", "dtf.conv2d_backprop_input", "dtf.conv2d_backprop_filter"],
         ["dtf.max_pool", "dtf.max_pool_grad"], 2, 3)]:
    text = open("%s/%s.log" % (work, name)).read()
    said = re.findall(r"^train_step: soft placement: %s is not usable: cannot load %s from %s \(.*DTF_%s_LIBRARY=PATH names another\)$"
                      % (lib, lib, re.escape(path), lib.upper()), text, re.M)
    if len(said) != 1:
        fail.append("%s: the missing %s is said %d times in train_step, not once" % (name, lib, len(said)))
    for op in moved:
        if not re.search("^" + re.escape(op) + " " + cpu_ops, text, re.M):
            fail.append("%s: %s did not move to the CPU" % (name, op))
    for op in kept:
        if not re.search("^" + re.escape(op) + " " + gpu_ops, text, re.M):
            fail.append("%s: %s did not stay on GPU:0" % (name, op))
    stats = re.search(r"cuda emulation: (\d+) kernel launches, (\d+) cuBLAS calls, (\d+) cuDNN calls", text)
    if not stats:
        fail.append("%s: no emulation counters" % name)
    elif int(stats.group(zero)) != 0 or int(stats.group(used)) == 0 or int(stats.group(1)) == 0:
        fail.append("%s: %s" % (name, stats.group(0)))
    gpu = losses(text)
    if not cpu or [s for s, _ in gpu] != [s for s, _ in cpu]:
        fail.append("%s: logged steps differ: cpu %s, %s" % (name, cpu, gpu))
    worst = max([abs(x - y) / max(abs(x), 1e-6) for (_, x), (_, y) in zip(cpu, gpu)] or [1])
    if worst > tol:
        fail.append("%s: losses differ from the CPU's by %.2e > %g: %s vs %s" % (name, worst, tol, gpu, cpu))
    print("e2e: %s: %s; %d logged losses within %.1e of the CPU's (worst %.2e); %s" % (
        name, said[0][:110] if said else "(not said)", len(gpu), tol, worst, stats.group(0) if stats else ""))
# 4. The failed capture: said once, eager from then on, the same losses.
text = open(work + "/eager.log").read()
said = re.findall(r"^dtf-run: warning: \S*GPU:0: capturing a CUDA graph failed \(.*cublasSgemm \(DTF_EMU_CAPTURE_UNSAFE=cublas\).*\); that GPU work runs eagerly from now on", text, re.M)
if len(said) != 1:
    fail.append("eager: the failed capture is said %d times, not once" % len(said))
stats = re.search(r"cuda emulation: .* (\d+) cuBLAS calls, .* (\d+) graphs captured, (\d+) graph launches", text)
steps = len(losses(text)) * 10
if not stats or int(stats.group(1)) < steps or int(stats.group(3)) >= steps - 2:
    fail.append("eager: the training steps still replay graphs, or ran no cuBLAS call: %s" % (stats.group(0) if stats else "no counters"))
gpu = losses(text)
worst = max([abs(x - y) / max(abs(x), 1e-6) for (_, x), (_, y) in zip(cpu, gpu)] or [1])
if [s for s, _ in gpu] != [s for s, _ in cpu] or worst > tol:
    fail.append("eager: losses differ from the CPU's: %s vs %s" % (gpu, cpu))
print("e2e: eager: %s; %d logged losses within %.1e of the CPU's (worst %.2e); %s" % (
    said[0][:120] if said else "(not said)", len(gpu), tol, worst, stats.group(0) if stats else ""))
# TF32 only where the plan allows it.
for name in ["nodnn", "noblas", "eager", "tf32"]:
    text = open("%s/%s.log" % (work, name)).read()
    m = re.search(r"cuda emulation: \d+ kernel launches, (\d+) cuBLAS calls, (\d+) cuDNN calls.*library calls that may compute in TF32: (\d+)", text)
    if not m:
        fail.append("%s: no TF32 counter" % name)
        continue
    blas, dnn, tf32 = (int(m.group(i)) for i in (1, 2, 3))
    if name != "tf32" and tf32 != 0:
        fail.append("%s: %d library calls may compute in TF32 without allow_tf32" % (name, tf32))
    # cuBLAS calls count the convolutions' filter transposes (cublasSgeam,
    # which has no math mode) and cuDNN calls the pools: the GEMMs and
    # convolutions are fewer than both together, and each of 10 steps has
    # several.
    if name == "tf32" and not (50 <= tf32 <= blas + dnn):
        fail.append("tf32: %d TF32 calls of %d cuBLAS and %d cuDNN calls: not every matmul and convolution" % (tf32, blas, dnn))
    if name == "tf32":
        print("e2e: tf32: %d of %d cuBLAS and %d cuDNN calls may compute in TF32 (0 in every run without allow_tf32)" % (tf32, blas, dnn))
for f in fail:
    print("e2e: FAIL: " + f)
sys.exit(1 if fail else 0)
PY
