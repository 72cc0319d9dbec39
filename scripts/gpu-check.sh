#!/usr/bin/env bash
# Checks dtf's GPU path: runs the GPU tests (ctest -L gpu, on the CUDA
# emulation), and, when this machine has an NVIDIA GPU and driver, trains the
# seed CNN with its graph on /gpu:0 on the real GPU: the loss curve beside the
# CPU path's, and the step time with and without CUDA graphs. Without a GPU it
# says so plainly; nothing is skipped silently.
# usage: scripts/gpu-check.sh [BUILD_DIR]   (default: build/, built already)
#        scripts/gpu-check.sh --bundle DIR [BUILD_DIR]
#          packs the GPU bundle into DIR (scripts/gpu-bundle.sh): copy DIR to
#          a GPU machine (it needs none of this project's packages) and run
#          DIR/check.sh there; DIR/check.sh --emulate runs it here
#        scripts/gpu-check.sh --bundle-test BUILD_DIR
#          packs BUILD_DIR/gpu-bundle and runs its check.sh --emulate from
#          another folder with a bare environment (ctest
#          gpu.bundle_check_on_the_emulation)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = "--bundle" ]; then
  shift
  exec "$root/scripts/gpu-bundle.sh" "$@"
fi
if [ "${1:-}" = "--bundle-test" ]; then
  build=$(cd "$2" && pwd)
  bundle=$build/gpu-bundle
  "$root/scripts/gpu-bundle.sh" "$bundle" "$build"
  elsewhere=$(mktemp -d)
  trap 'rm -rf "$elsewhere"' EXIT
  rm -rf "$build/gpu-bundle-check"
  (cd "$elsewhere" && env -i PATH=/usr/bin:/bin HOME="$elsewhere" OUT="$build/gpu-bundle-check" \
    bash "$bundle/check.sh" --emulate --steps 20)
  summary=$build/gpu-bundle-check/summary.md
  for model in mnist_cnn mlp; do
    [ "$(grep -c "^| $model | gpu.* | ok |$" "$summary")" -eq 2 ] ||
      { cat "$summary"; echo "gpu-check: $model did not match its CPU run on both GPU runs" >&2; exit 1; }
  done
  grep -q "^RESULT: PASS$" "$summary" || { cat "$summary"; exit 1; }
  echo "gpu-check: the bundle ($(du -sh "$bundle" | cut -f1)) passed its check on the emulation"
  exit 0
fi
build=$(cd "${1:-$root/build}" && pwd)
bin=$build/bin

echo "== GPU tests on the emulation (ctest -L gpu)"
(cd "$build" && ctest -L gpu --output-on-failure)

have_gpu=0
if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L 2> /dev/null | grep -q "^GPU"; then
  have_gpu=1
fi
if [ "$have_gpu" = 0 ]; then
  echo "== NO NVIDIA GPU on this machine (nvidia-smi lists none): the GPU path"
  echo "   was checked on dtf's CUDA emulation only; no real-GPU test or timing ran."
  exit 0
fi
nvidia-smi -L

# The plan the e2e test compiled: the seed CNN, graph on /gpu:0, soft placement.
plan=$build/e2e-work/gpu_mnist_cnn/soft.plan
[ -f "$plan" ] || { echo "gpu-check: $plan is missing (ctest -L gpu makes it)" >&2; exit 1; }
work=$build/gpu-check
mkdir -p "$work"
steps=300
run() { # run NAME ENV... -- dtf-run args
  local name=$1; shift
  echo "== $name"
  env "$@" "$bin/dtf-run" "$plan" --steps $steps --log-every 50 > "$work/$name.log" 2>&1 ||
    { tail -20 "$work/$name.log"; echo "gpu-check: $name failed" >&2; exit 1; }
  grep -E "^step|^final|soft placement: (no|this)" "$work/$name.log" || true
}
run cpu DTF_CUDA_DRIVER=/nonexistent/libcuda.so.1
run gpu DTF_CUDA_GRAPHS=1
run gpu-no-graphs DTF_CUDA_GRAPHS=0
grep -q "device:GPU:0$" "$work/gpu.log" || { echo "gpu-check: no op ran on GPU:0" >&2; exit 1; }
python3 - "$work" <<'PY'
import re, sys
work = sys.argv[1]
def read(name):
    text = open(f"{work}/{name}.log").read()
    losses = [float(x) for x in re.findall(r"^step \d+/\d+\s+loss ([0-9.]+)", text, re.M)]
    ips = re.search(r"examples_per_sec=([0-9.]+)", text)
    return losses, float(ips.group(1)) if ips else float("nan")
cpu, gpu, nog = read("cpu"), read("gpu"), read("gpu-no-graphs")
print("losses cpu:", cpu[0]); print("losses gpu:", gpu[0])
worst = max((abs(a - b) / max(a, 1e-6) for a, b in zip(cpu[0], gpu[0])), default=float("nan"))
print(f"worst relative loss difference: {worst:.2e} (other summation orders; TF32 only with allow_tf32)")
print(f"images/s: cpu {cpu[1]:.0f}, gpu with graphs {gpu[1]:.0f}, gpu without graphs {nog[1]:.0f}")
PY

# The generated kernels' GPU code, the reductions' block-wide trees among
# them (bias gradients, the loss mean, the accuracy; docs/kernels.md "The
# GPU code"), has run nowhere else: the emulation runs their CPU twins. The
# loss curves above go through them; Nsight Systems, when installed, times
# each kernel (docs/gpu.md estimates the conv bias gradients at 20-80 us).
echo "== generated kernels on the real GPU (reductions as block-wide trees)"
if command -v nsys > /dev/null 2>&1; then
  nsys profile --force-overwrite true -o "$work/kernels" \
    "$bin/dtf-run" "$plan" --steps 50 > "$work/nsys.log" 2>&1 ||
    { tail -20 "$work/nsys.log"; echo "gpu-check: nsys profile failed" >&2; exit 1; }
  nsys stats --report cuda_gpu_kern_sum "$work/kernels.nsys-rep" | grep -E "Time|dtf_fused" || true
else
  echo "   NO nsys on this machine: the generated kernels ran (the loss curves"
  echo "   above) but were not timed one by one."
fi

# Towers over 2 GPUs (NCCL) when the machine has them: the same plan with
# --gpu-towers 2 beside one GPU's curve.
ngpu=$(nvidia-smi -L | grep -c "^GPU" || true)
if [ "$ngpu" -lt 2 ]; then
  echo "== ONE GPU on this machine: towers over 2 GPUs (NCCL) were checked on the emulation only"
  exit 0
fi
echo "== towers: 2 GPUs"
"$bin/dtf-run" "$plan" --steps $steps --log-every 50 --gpu-towers 2 > "$work/towers.log" 2>&1 ||
  { tail -20 "$work/towers.log"; echo "gpu-check: towers failed" >&2; exit 1; }
grep -E "^step|^final|towers:" "$work/towers.log" || true
python3 - "$work" <<'PY'
import re, sys
work = sys.argv[1]
def read(name):
    text = open(f"{work}/{name}.log").read()
    return [float(x) for x in re.findall(r"^step \d+/\d+\s+loss ([0-9.]+)", text, re.M)]
one, two = read("gpu"), read("towers")
worst = max((abs(a - b) / max(a, 1e-6) for a, b in zip(one, two)), default=float("nan"))
print(f"towers: worst relative loss difference from one GPU: {worst:.2e}")
PY
