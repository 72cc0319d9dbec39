#!/usr/bin/env bash
# End to end: clipping by global norm on the GPU that makes the gradients
# (dtf-gpu-clip). The MLP with clip_gradients = global_norm(0.05), which
# clips every step (its loss after 100 steps stays far above the unclipped
# model's), trained 100 steps three ways from the same seed:
#   - on the CPU (models/mlp.dtf as it is: dtf.global_norm_clip's CPU kernel);
#   - with its graph on "/gpu:0" on one emulated GPU: the clip's ops are
#     generated kernels on GPU:0 (the placement log has no
#     dtf.global_norm_clip and dtf.fused ops of the clip's line on GPU:0);
#   - the same with dtfc --fusion=off: dtf.global_norm_clip on the CPU.
# The loss at every logged step must match the CPU's within 1e-4 relative.
# usage: gpu_clip.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
work=$work/gpu_clip
# Without GPU code the clip's ops would run on the CPU under soft placement
# and the comparison would be the CPU's with itself.
if [ ! -x /usr/local/cuda/bin/ptxas ]; then
  echo "e2e: SKIP: no CUDA toolkit at /usr/local/cuda: dtfc makes no GPU code, so the clip could not run on the GPU"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work"
sed -e 's/global_norm(5.0)/global_norm(0.05)/' "$root/models/mlp.dtf" > "$work/clip.dtf"
grep -q 'global_norm(0.05)' "$work/clip.dtf" || fail "models/mlp.dtf no longer clips by global_norm(5.0)"
python3 "$root/tests/e2e/gpu_model.py" "$work/clip.dtf" "$work/gpu.dtf" 100 \
  "soft_placement = true, log_device_placement = true"
"$bin/dtfc" "$work/clip.dtf" -o "$work/cpu.plan"
"$bin/dtfc" "$work/gpu.dtf" -o "$work/gpu.plan"
"$bin/dtfc" "$work/gpu.dtf" --fusion=off -o "$work/off.plan"
"$bin/dtfc" "$root/models/mlp.dtf" -o "$work/unclipped.plan"
run() { # PLAN LOG [ARGS]
  local plan=$1 log=$2; shift 2
  timeout 300 "$bin/dtf-run" "$plan" --steps 100 --log-every 20 "$@" > "$log" 2>&1 ||
    fail "$plan: training failed: $(tail -5 "$log")"
}
run "$work/cpu.plan" "$work/cpu.log"
run "$work/unclipped.plan" "$work/unclipped.log"
run "$work/gpu.plan" "$work/gpu.log" --emulate-gpus 1
run "$work/off.plan" "$work/off.log" --emulate-gpus 1

grep -qE "^dtf\.global_norm_clip \(.*\): .*device:CPU:0$" "$work/off.log" ||
  fail "--fusion=off: dtf.global_norm_clip is not on the CPU: $(grep -m1 global_norm_clip "$work/off.log")"
# The clip's source location (where dtf-optimize put it), from --fusion=off.
at=$(grep -m1 -oE "^dtf\.global_norm_clip \([^)]*\)" "$work/off.log" | sed -E 's/.*\((.*)\)/\1/')
grep -q "dtf.global_norm_clip" "$work/gpu.log" &&
  fail "the GPU plan still has dtf.global_norm_clip: $(grep -m1 global_norm_clip "$work/gpu.log")"
n=$(grep -cF "dtf.fused ($at): /job:localhost/replica:0/task:0/device:GPU:0" "$work/gpu.log" || true)
cpu=$(grep -cE "^dtf\.[a-z_]+ \($at\): .*device:CPU:0$" "$work/gpu.log" || true)
# 6 gradients: 6 sums of squares, the scale, 6 scaled gradients (dtf-fuse
# may merge some), all on GPU:0; on the CPU only the learning rate's and
# the global step's ops.
[ "$n" -ge 8 ] || fail "the clip's generated kernels are not on GPU:0 ($n dtf.fused at $at there)"
echo "e2e: clip at $at: $n generated kernels on GPU:0, $cpu ops there on the CPU (the learning rate's and the global step's)"

python3 - "$work" <<'PY'
import re, sys
work = sys.argv[1]
def losses(name):
    return [float(m.group(1)) for l in open("%s/%s.log" % (work, name))
            for m in [re.match(r"step \d+/\d+\s+loss ([0-9.eE+-]+)", l)] if m]
cpu, gpu, off, free = losses("cpu"), losses("gpu"), losses("off"), losses("unclipped")
bad = []
if len(cpu) != 5 or len(gpu) != 5 or len(off) != 5 or len(free) != 5:
    bad.append("expected 5 logged losses each: cpu %s gpu %s off %s unclipped %s" % (cpu, gpu, off, free))
else:
    for name, run in (("gpu", gpu), ("off", off)):
        worst = max(abs(a - b) / abs(a) for a, b in zip(cpu, run))
        if worst > 1e-4:
            bad.append("%s: losses %s differ from the CPU's %s (%.2e relative)" % (name, run, cpu, worst))
    # The clip really clips: the unclipped model's loss falls much faster.
    if not free[-1] < 0.7 * cpu[-1]:
        bad.append("the clip does not change training: clipped %s, unclipped %s" % (cpu, free))
for b in bad:
    print("e2e: FAIL: " + b)
print("e2e: clip: losses cpu %s, gpu %s, --fusion=off %s, unclipped %s" % (cpu, gpu, off, free))
sys.exit(1 if bad else 0)
PY
