#!/usr/bin/env bash
# End to end: in-graph towers over a task's GPUs. The seed CNN with its graph
# on /gpu:0 asks for 2 towers in its session (session(gpu_towers = 2)) and
# trains on 2 emulated GPUs; the same plan with --gpu-towers 1 on one GPU is
# the reference (the same global batch of 50, the same seed). Checked:
#   - the loss at every logged step equals the reference's within TOL
#     (relative): the towers' gradients, weighted by their shares of the
#     batch, are the whole batch's gradient;
#   - the emulation ran one NCCL all-reduce per gradient bucket per step, and
#     tower 1's ops ran on GPU 1 (placement log and the emulation's stream
#     work on GPU 1); cuDNN's algorithm was chosen once per GPU and shape;
#   - 3 towers (an uneven split, 17/17/16) match the reference too;
#   - without NCCL (DTF_NCCL_LIBRARY names a missing library) the gradients
#     are summed through the host, said once, with the same curve;
#   - the gradients and the variables stay on the GPUs: over the training
#     steps (a full run's counters less a half run's), the bytes copied
#     between host and device per step with 2 and 3 towers are one GPU's
#     (the batch and the loss's values) within 64 bytes (a few scalars) and
#     under 1 MB (the variables are 6.5 MB), no device-to-device copy, and
#     one ncclBroadcast per resident variable and step;
#   - the checkpoint after the half run is byte for byte the one of the
#     same run with DTF_GPU_RESIDENT_VARIABLES=0 (variables on the host);
#   - on 1 GPU, tower 1's ops move to the CPU saying the machine has 1 GPU;
#   - the MLP has dropout: each tower draws the masks its examples get in
#     the whole batch, so without its gradient clipping it equals one GPU's
#     curve within 5e-3 at every logged step to 120 (to 4 decimals so far;
#     with masks drawn per tower it was up to 8% off), and within 5% after:
#     while the emulated cuBLAS went through the CPU's matmul, a tower's
#     products of 50 rows rounded otherwise than one GPU's of 100 (oneDNN's
#     matmul primitive blocks by the row count), and training grew that from
#     step 140 on (2.6e-2 at step 180); since it sums by a plain loop, the
#     curves are equal to 4 decimals at every logged step to 200; with its
#     clipping (each tower clips its own gradient, as each replica does in
#     between-graph training) it stays within 10% without equalling it;
#   - its moving averages, which ps_update computes on the CPU from the
#     updated variables (whose updates then run on the host), give 2 towers
#     without clipping the evaluation loss of one GPU within 1%;
#   - --gpu-towers 0, a batch smaller than the towers, inputs of a fixed
#     batch size and a dynamic vocabulary are refused, saying why.
# usage: gpu_towers.sh BIN_DIR WORK_DIR STEPS LOG_EVERY TOL
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
steps=$3 every=$4 tol=$5
work=$work/gpu_towers
rm -rf "$work" && mkdir -p "$work"
python3 "$root/tests/e2e/gpu_model.py" "$root/models/mnist_cnn.dtf" "$work/cnn.dtf" "$steps" \
  "soft_placement = true, log_device_placement = true, gpu_towers = 2"
"$bin/dtfc" "$work/cnn.dtf" -o "$work/cnn.plan"

run() { # NAME ARGS...: trains the plan, the log in $work/NAME.log
  # (evaluating 10 batches: the evaluation is not what is compared here)
  local name=$1; shift
  "$bin/dtf-run" "$work/cnn.plan" --log-every "$every" --eval-steps 10 "$@" > "$work/$name.log" 2>&1 || {
    echo "e2e: the $name run failed:" >&2; tail -20 "$work/$name.log" >&2; exit 1; }
}
run one --emulate-gpus 1 --gpu-towers 1
run two --emulate-gpus 2
run three --emulate-gpus 3 --gpu-towers 3
# The same runs stopped halfway: the counters' differences are what the
# last half's training steps did (evaluation and set-up cancel out).
half=$((steps / 2))
run one_half --emulate-gpus 1 --gpu-towers 1 --steps "$half"
run two_half --emulate-gpus 2 --steps "$half"
# The checkpoint at the end comes down from the GPUs (tower 0's variables,
# the slots of the update on GPU 0): the same bytes as with every variable
# on the host.
run two_res --emulate-gpus 2 --steps "$half" --model-dir "$work/res"
DTF_GPU_RESIDENT_VARIABLES=0 run two_plain --emulate-gpus 2 --steps "$half" --model-dir "$work/plain"
grep -q "variables stay on every tower's GPU" "$work/two_plain.log" &&
  fail "DTF_GPU_RESIDENT_VARIABLES=0 kept variables on the towers' GPUs"
cmp "$work/res/ckpt-$half.data-0-of-1" "$work/plain/ckpt-$half.data-0-of-1" ||
  fail "the towers' checkpoint at step $half differs between resident and host variables"
run three_half --emulate-gpus 3 --gpu-towers 3 --steps "$half"
DTF_NCCL_LIBRARY=/nonexistent/libnccl.so.2 run host --emulate-gpus 2
run onegpu --emulate-gpus 1

# The MLP has dropout (the towers draw the whole batch's masks) and clips
# its gradients by their global norm (each tower its own); mlpnc is the same
# model without the clipping.
python3 "$root/tests/e2e/gpu_model.py" "$root/models/mlp.dtf" "$work/mlp.dtf" 200 \
  "soft_placement = true, gpu_towers = 2"
sed '/clip_gradients = global_norm/d' "$work/mlp.dtf" > "$work/mlpnc.dtf"
cmp -s "$work/mlp.dtf" "$work/mlpnc.dtf" && fail "could not take the clipping out of the MLP"
for m in mlp mlpnc; do
  "$bin/dtfc" "$work/$m.dtf" -o "$work/$m.plan"
  for n in 1 2; do
    "$bin/dtf-run" "$work/$m.plan" --emulate-gpus "$n" --gpu-towers "$n" --log-every 20 \
      > "$work/$m$n.log" 2>&1 || fail "$m on $n towers failed: $(tail -3 "$work/$m$n.log")"
  done
done

if "$bin/dtf-run" "$work/cnn.plan" --gpu-towers 0 > "$work/zero.log" 2>&1; then
  fail "--gpu-towers 0 was accepted"
fi
grep -q "gpu-towers expects a tower count from 1 to 16, got '0'" "$work/zero.log" ||
  fail "--gpu-towers 0: no precise refusal: $(cat "$work/zero.log")"

# Refused with the reason: a batch smaller than the towers, and inputs of a
# fixed batch size (towers split each batch).
sed -e 's/batch       = 50 /batch       = 2 /' "$work/cnn.dtf" > "$work/small.dtf"
sed -e 's/input x: f32\[B, 784\]/input x: f32[50, 784]/' -e 's/input y: i32\[B\]/input y: i32[50]/' \
  "$work/cnn.dtf" > "$work/fixed.dtf"
for bad in small fixed; do
  "$bin/dtfc" "$work/$bad.dtf" -o "$work/$bad.plan"
  if "$bin/dtf-run" "$work/$bad.plan" --emulate-gpus 3 --gpu-towers 3 --steps 1 > "$work/$bad.log" 2>&1; then
    fail "$bad: towers ran where they must be refused"
  fi
done
# Nor do towers share a table with a dynamic vocabulary.
"$bin/dtfc" "$root/tests/e2e/dynamic_embedding.dtf" -o "$work/dynamic.plan"
if "$bin/dtf-run" "$work/dynamic.plan" --gpu-towers 2 --steps 1 > "$work/dynamic.log" 2>&1; then
  fail "towers with a dynamic vocabulary ran"
fi
grep -q "gpu_towers = 2: towers do not share the rows of a table with a dynamic vocabulary (embedding(vocab = dynamic))" "$work/dynamic.log" ||
  fail "towers with a dynamic vocabulary: no precise refusal: $(tail -3 "$work/dynamic.log")"
grep -q "gpu_towers = 3: a batch of 2 examples cannot give every tower one" "$work/small.log" ||
  fail "a batch smaller than the towers: no precise refusal: $(tail -3 "$work/small.log")"
grep -q "gpu_towers = 3: the inputs take batches of exactly 50 examples; towers split each batch, so the inputs' batch dimension must be B (-1)" "$work/fixed.log" ||
  fail "inputs of a fixed batch: no precise refusal: $(tail -3 "$work/fixed.log")"

python3 - "$work" "$steps" "$every" "$tol" <<'PY'
import re, sys
work, steps, every, tol = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
def text(name): return open("%s/%s.log" % (work, name)).read()
def losses(name):
    return [(int(m.group(1)), float(m.group(2))) for line in text(name).splitlines()
            for m in [re.match(r"step (\d+).*?loss ([0-9.eE+-]+)", line)] if m]
def stats(name):
    m = re.search(r"cuda emulation: .*", text(name))
    return m.group(0) if m else ""
def placement(t, program):
    # The lines of `program`'s device placement log.
    lines = t.splitlines()
    for i, l in enumerate(lines):
        m = re.match(re.escape(program) + r": device placement \((\d+) ops\):", l)
        if m:
            return [x.strip() for x in lines[i + 1:i + 1 + int(m.group(1))]]
    return []
fail = []
ref = losses("one")
if len(ref) < steps // every:
    fail.append("the reference logged %s" % ref)
if not ref or not ref[-1][1] < 0.8 * ref[0][1]:
    fail.append("the reference's loss did not fall by 20%%: %s" % ref)
worst = {}
for name in ("two", "three", "host"):
    got = losses(name)
    if [s for s, _ in got] != [s for s, _ in ref]:
        fail.append("%s: logged steps differ: %s vs %s" % (name, got, ref))
    worst[name] = 0.0
    for (s, x), (_, y) in zip(ref, got):
        rel = abs(x - y) / max(abs(x), 1e-6)
        worst[name] = max(worst[name], rel)
        if rel > tol:
            fail.append("%s: step %d: loss %g, 1 GPU %g (relative %.2e > %g)" % (name, s, y, x, rel, tol))
for name, towers, gpus in (("two", 2, "0, 1"), ("three", 3, "0, 1, 2")):
    t = text(name)
    m = re.search(r"towers: %d towers on GPU %s; .* in (\d+) buckets?\) are summed with emulated NCCL" % (towers, gpus), t)
    if not m:
        fail.append("%s: no line saying the towers use NCCL over GPU %s" % (name, gpus))
        continue
    buckets = int(m.group(1))
    st = re.search(r"(\d+) NCCL all-reduces, \d+ cuDNN algorithm choices, stream work per GPU:((?: \d+=\d+)+)", t)
    if not st:
        fail.append("%s: no NCCL counter: %s" % (name, stats(name)))
        continue
    if int(st.group(1)) != buckets * steps:
        fail.append("%s: %s NCCL all-reduces, expected %d buckets x %d steps" % (name, st.group(1), buckets, steps))
    # The cuDNN algorithm is chosen once per GPU, direction and shape: the
    # seed CNN's 5 convolution calls per tower, and eval's 2 forward ones at
    # its batch of 50 (on GPU 0), whatever the step count.
    alg = re.search(r"(\d+) cuDNN algorithm choices", t)
    if not alg or not 5 * towers <= int(alg.group(1)) <= 5 * towers + 2:
        fail.append("%s: cuDNN algorithm choices not once per shape: %s" % (name, stats(name)))
    work_per = dict((int(a), int(b)) for a, b in re.findall(r"(\d+)=(\d+)", st.group(2)))
    for g in range(towers):
        # Each tower's GPU ops: at least 6 cuDNN/cuBLAS calls or graph
        # launches per step on its own GPU.
        if work_per.get(g, 0) < 6 * steps:
            fail.append("%s: GPU %d ran %d pieces of stream work in %d steps" % (name, g, work_per.get(g, 0), steps))
        placed = placement(t, "worker_step (tower %d)" % g)
        for op in ("dtf.conv2d", "dtf.conv2d_backprop_filter", "dtf.max_pool_grad", "dtf.matmul"):
            if not any(l.startswith(op + " (") and l.endswith("/job:localhost/replica:0/task:0/device:GPU:%d" % g) for l in placed):
                fail.append("%s: tower %d's %s is not placed on GPU:%d" % (name, g, op, g))
def counters(name):
    m = re.search(r"copies between host and device: (\d+) \((\d+) bytes\), between device buffers: (\d+); NCCL broadcasts: (\d+)", text(name))
    return [int(x) for x in m.groups()] if m else None
half = steps // 2
per_step = {}
for name in ("one", "two", "three"):
    full, part = counters(name), counters(name + "_half")
    if not full or not part:
        fail.append("%s: no copy counters: %s" % (name, stats(name)))
        continue
    per_step[name] = [(a - b) / (steps - half) for a, b in zip(full, part)]
if len(per_step) == 3:
    one_bytes = per_step["one"][1]
    for name, towers in (("two", 2), ("three", 3)):
        copies, nbytes, device, broadcasts = per_step[name]
        if not one_bytes <= nbytes <= one_bytes + 64 or not nbytes < 1 << 20:
            fail.append("%s: %.0f bytes between host and device per step, one GPU %.0f: gradients or variables cross" % (name, nbytes, one_bytes))
        if device != 0:
            fail.append("%s: %g device-to-device copies per step" % (name, device))
        m = re.search(r"; (\d+) variables stay on every tower's GPU, updated on GPU 0 and sent to the others with ncclBroadcast", text(name))
        if not m or int(m.group(1)) < 4:
            fail.append("%s: no line saying the variables stay on every tower's GPU" % name)
        elif broadcasts != int(m.group(1)):
            fail.append("%s: %g NCCL broadcasts per step for %s resident variables" % (name, broadcasts, m.group(1)))
h = text("host")
n = len(re.findall(r"are summed through the host, without NCCL: cannot load NCCL from /nonexistent/libnccl.so.2", h))
if n != 1:
    fail.append("without NCCL: said %d times that the sum runs through the host" % n)
if not re.search(r" 0 NCCL all-reduces", h) or not re.search(r"NCCL broadcasts: 0(;|$)", stats("host")):
    fail.append("without NCCL: NCCL ran anyway: %s" % stats("host"))
o = text("onegpu")
if "worker_step (tower 1): soft placement" not in o or "this machine has 1 GPU" not in o:
    fail.append("on 1 GPU, tower 1's ops were not moved to the CPU saying why")
if not re.search(r"are summed on the host: this machine has 1 GPU for 2 towers", o):
    fail.append("on 1 GPU, no line saying the sum runs on the host")
a, b = losses("mlp1"), losses("mlp2")
gaps = [abs(x - y) / x for (_, x), (_, y) in zip(a, b)]
if len(a) != 10 or len(b) != 10 or not max(gaps) > 1e-3 or not max(gaps) < 0.1:
    fail.append("the MLP with dropout and clipping: 2 towers should differ from 1 GPU by 0.1%% to 10%% per logged step: %s vs %s" % (b, a))
a, b = losses("mlpnc1"), losses("mlpnc2")
gaps = [abs(x - y) / x for (_, x), (_, y) in zip(a, b)]
early = [g for (s, _), g in zip(a, gaps) if s <= 120]
worst["mlp without clipping (within 5e-3 to step 120)"] = max(early) if early else 1.0
if len(a) != 10 or len(b) != 10 or len(early) != 6 or not max(early) < 5e-3 or not max(gaps) < 0.05:
    fail.append("the MLP with dropout, without clipping: 2 towers should equal 1 GPU within 5e-3 at every logged step to 120 and within 5%% after: %s vs %s" % (b, a))
def evals(name):
    return [float(m.group(1)) for m in re.finditer(r"^eval  step \d+  loss ([0-9.eE+-]+)", text(name), re.M)]
# Evaluation reads the moving averages, which ps_update computes on the CPU
# from the updated variables (stale host copies gave an untrained model).
a, b = evals("mlpnc1"), evals("mlpnc2")
if len(a) != 1 or len(b) != 1 or not abs(a[0] - b[0]) < 0.01 * a[0]:
    fail.append("the MLP's moving averages: 2 towers' evaluation loss should equal 1 GPU's within 1%%: %s vs %s" % (b, a))
for f in fail:
    print("e2e: FAIL: " + f)
print("e2e: towers: %d logged steps; worst relative difference from 1 GPU: %s (tolerance %g); 2 towers: %s"
      % (len(ref), ", ".join("%s %.2e" % kv for kv in worst.items()), tol, stats("two")))
print("e2e: towers: per training step [host-device copies, bytes, device-device copies, NCCL broadcasts]: %s" % per_step)
sys.exit(1 if fail else 0)
PY
