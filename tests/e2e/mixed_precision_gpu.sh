#!/usr/bin/env bash
# End to end on an emulated GPU: mixed precision on /gpu:0. The seed CNN
# with its whole graph on /gpu:0 under `dtfc --precision=mixed_bfloat16`:
#  1. dtf-run's first lines say that its 11 products compute in bf16, all
#     on the GPU (dtfc's listing of them: tests/lit/frontend/precision.dtf);
#  2. on one emulated GPU the plan trains STEPS steps, and the emulation's
#     counts show every product on the tensor cores in bf16 (cublasGemmEx
#     6 per step, cuDNN's forward 2, backward data 1, backward filter 2),
#     no f32 product (cublasSgemm, f32 convolutions), and what the policy
#     keeps in f32 (pooling: 2 forward, 2 backward, each of which runs the
#     forward again) and the casts (cudnnTransformTensor) there;
#  3. its loss at every step follows the CPU's own mixed_bfloat16 run of the
#     same model within TOL (absolute): the two differ in the order of the
#     f32 sums and in the GPU's bf16 convolution outputs (cuDNN writes them
#     in the operands' type; oneDNN's keep f32). Measured 2026-11-29 over 20
#     steps: at most 0.0009 apart (tolerance 0.005). The losses alone cannot
#     tell bf16 from f32 this early (the f32 plan's are within 0.0015 of
#     both): the counts of 2 are what show the GPU computed in bf16.
# usage: mixed_precision_gpu.sh BIN_DIR WORK_DIR [STEPS [TOL]]
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$1" "$2"
steps=${3:-20} tol=${4:-0.005}
work=$work/mixed_precision_gpu
rm -rf "$work" && mkdir -p "$work"
python3 "$root/tests/e2e/gpu_model.py" "$root/models/mnist_cnn.dtf" "$work/all.dtf" "$steps" ""
grep -v '^ *eval *=' "$work/all.dtf" > "$work/gpu.dtf"
sed -E "s/steps( *)= *[0-9]+/steps = $steps/" "$root/models/mnist_cnn.dtf" |
  grep -v '^ *eval *=' > "$work/cpu.dtf"

# The two compilations, then the two runs, side by side (the test holds
# 2 processors).
"$bin/dtfc" "$work/gpu.dtf" --precision=mixed_bfloat16 -o "$work/gpu.plan" & g=$!
"$bin/dtfc" "$work/cpu.dtf" --precision=mixed_bfloat16 -o "$work/cpu.plan" & c=$!
wait $g && wait $c || fail "dtfc failed"
"$bin/dtf-run" "$work/gpu.plan" --emulate-gpus 1 --log-every 1 --threads 1 > "$work/gpu.log" 2>&1 & g=$!
"$bin/dtf-run" "$work/cpu.plan" --log-every 1 --threads 1 > "$work/cpu.log" 2>&1 & c=$!
gpu_rc=0 cpu_rc=0
wait $g || gpu_rc=$?
wait $c || cpu_rc=$?
[[ $gpu_rc == 0 ]] || { tail -20 "$work/gpu.log" >&2; fail "the GPU run failed"; }
[[ $cpu_rc == 0 ]] || { tail -20 "$work/cpu.log" >&2; fail "the CPU run failed"; }

grep -q "precision: mixed_bfloat16: 11 matmuls and convolutions compute in bf16 (f32 accumulation), variables and updates f32; 11 of them on a GPU" \
  "$work/gpu.log" || { head -20 "$work/gpu.log" >&2; fail "the GPU run's first lines do not say bf16 on the GPU"; }

# The counts, from the line the emulation prints at exit.
stats=$(grep "^cuda emulation: " "$work/gpu.log" | tail -1)
[[ -n $stats ]] || fail "the GPU run printed no emulation counts"
count() { grep -oE "$1=[0-9]+" <<<"$stats" | head -1 | cut -d= -f2; }
expect() { # NAME PER_STEP
  local got; got=$(count "$1")
  [[ ${got:-0} == $(($2 * steps)) ]] ||
    { echo "$stats" >&2; fail "$1: ${got:-0} calls, expected $2 per step ($(($2 * steps)))"; }
}
expect "cublasGemmEx bf16 tensor-op" 6
expect "cudnnConvolutionForward bf16 tensor-op" 2
expect "cudnnConvolutionBackwardData bf16 tensor-op" 1
expect "cudnnConvolutionBackwardFilter bf16 tensor-op" 2
expect "cudnnPoolingForward f32 fma" 4
expect "cudnnPoolingBackward f32 fma" 2
for f32 in "cublasSgemm f32" "cudnnConvolutionForward f32" "cudnnConvolutionBackwardData f32" \
    "cudnnConvolutionBackwardFilter f32"; do
  ! grep -q "$f32" <<<"$stats" || { echo "$stats" >&2; fail "an f32 product ran on the GPU: $f32"; }
done
casts=$(count "cudnnTransformTensor f32->bf16 convert")
[[ ${casts:-0} -ge $((20 * steps)) ]] || { echo "$stats" >&2; fail "too few casts to bf16: ${casts:-0}"; }

python3 - "$work/cpu.log" "$work/gpu.log" "$steps" "$tol" <<'PY'
import re, sys
def losses(path):
    return [float(m.group(1)) for m in
            (re.match(r"^step\s+\d+.*?loss[ =:]+([-0-9.e]+)", l) for l in open(path)) if m]
cpu, gpu = losses(sys.argv[1]), losses(sys.argv[2])
steps, tol = int(sys.argv[3]), float(sys.argv[4])
if len(cpu) != steps or len(gpu) != steps:
    sys.exit(f"e2e: FAIL: expected {steps} logged losses, got {len(cpu)} (CPU) and {len(gpu)} (GPU)")
worst = max(abs(a - b) for a, b in zip(cpu, gpu))
if worst > tol:
    sys.exit(f"e2e: FAIL: the GPU's bf16 losses differ from the CPU's by {worst:.5f} > {tol}:\n"
             f"CPU {cpu}\nGPU {gpu}")
if cpu[-1] >= cpu[0]:
    sys.exit(f"e2e: FAIL: the loss did not fall ({cpu[0]} -> {cpu[-1]})")
print(f"e2e: the seed CNN in bf16 on the emulated GPU follows the CPU's bf16 run: "
      f"{steps} steps, largest loss difference {worst:.5f} (tolerance {tol}), "
      f"loss {cpu[0]:.4f} -> {cpu[-1]:.4f}")
PY
echo "e2e: counts: $(grep -oE "cuBLAS and cuDNN calls by type and math: .*" <<<"$stats")"
