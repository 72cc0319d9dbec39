#!/usr/bin/env bash
# End to end: the generated kernels (dtf.fused) on an emulated GPU. The MLP
# with its graph on /gpu:0 is compiled with fusion (dtfc's default):
#   1. with --gpu-kernels=off its dtf.fused ops are soft-placed on the CPU,
#      saying why;
#   2. with dtfc's own GPU code (PTX and sm_80/sm_90 cubins, where the CUDA
#      toolkit is installed; else said and left out) they run on the GPU:
#      cuModuleLoadData of the sm_90 cubin, whose .nv.info parameter tables
#      the emulation reads, cuLaunchKernel with the plan's parameters, and the
#      emulation runs each kernel's CPU code from the plan; the loss at every
#      logged step matches the CPU path's;
#   3. the same with stand-in PTX only (dtf-test-add-gpu-code), and with a
#      stand-in sm_90 cubin beside a PTX that declares one parameter too few,
#      which works only if the cubin for the device's chip is chosen;
#   4. dtfc's code on an emulation that refuses every cubin
#      (DTF_EMU_REFUSE_CUBINS): the PTX is loaded instead, said once, and the
#      losses are the same; the stand-in cubin's plan, whose PTX is wrong,
#      then fails naming both loads.
# usage: gpu_fused.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
work=$work/gpu_fused
mkdir -p "$work"
python3 "$root/tests/e2e/gpu_model.py" "$root/models/mlp.dtf" "$work/mlp.dtf" 100 \
  "soft_placement = true, log_device_placement = true"
"$bin/dtfc" "$work/mlp.dtf" --gpu-kernels=off -o "$work/mlp.plan"
"$bin/dtf-test-add-gpu-code" "$work/mlp.plan" "$work/ptx.plan" ptx
"$bin/dtf-test-add-gpu-code" "$work/mlp.plan" "$work/cubin.plan" cubin
runs="ptx cubin"
if [ -x /usr/local/cuda/bin/ptxas ]; then
  "$bin/dtfc" "$work/mlp.dtf" --gpu-kernels=on -o "$work/dtfc.plan"
  runs="dtfc $runs"
else
  echo "e2e: no CUDA toolkit at /usr/local/cuda: dtfc's own GPU code is not tested here"
fi

run() { # run NAME PLAN [dtf-run flags]
  local name=$1 plan=$2; shift 2
  "$bin/dtf-run" "$plan" --log-every 25 "$@" > "$work/$name.log" 2>&1 ||
    { tail -20 "$work/$name.log" >&2; fail "the $name run failed"; }
}
DTF_CUDA_DRIVER=/nonexistent/libcuda.so.1 run cpu "$work/mlp.plan"
run nocode "$work/mlp.plan" --emulate-gpus 1
for name in $runs; do run "$name" "$work/$name.plan" --emulate-gpus 1; done

grep -q "dtf.fused (" "$work/cpu.log" || fail "the plan has no dtf.fused op (is fusion on?)"
grep -q "soft placement: the plan has no GPU code for its generated kernels (dtf.fused;" "$work/nocode.log" ||
  fail "without GPU code, soft placement does not say why dtf.fused moved"
steps() { grep -E "^step " "$1" | sed -E 's/ +[0-9]+ img\/s.*//'; }
for name in $runs; do
  grep -qE "^dtf.fused \(.*\): /job:localhost/replica:0/task:0/device:GPU:0$" "$work/$name.log" ||
    fail "$name: no dtf.fused op on GPU:0"
  launches=$(grep -oE "cuda emulation: [0-9]+ kernel launches" "$work/$name.log" | grep -oE "[0-9]+" | head -1)
  [ "${launches:-0}" -ge 100 ] || fail "$name: only ${launches:-0} kernel launches in 100 steps"
  [ -n "$(steps "$work/cpu.log")" ] && [ "$(steps "$work/$name.log")" = "$(steps "$work/cpu.log")" ] ||
    fail "$name: the logged losses differ from the CPU path's: $(steps "$work/$name.log") vs $(steps "$work/cpu.log")"
  echo "e2e: $name: $launches generated-kernel launches; $(steps "$work/$name.log" | tail -1)"
done

# 4. A driver that refuses the cubins: the PTX instead.
if [ -x /usr/local/cuda/bin/ptxas ]; then
  DTF_EMU_REFUSE_CUBINS=1 run refused "$work/dtfc.plan" --emulate-gpus 1
  [ "$(grep -c "the driver refused the plan's sm_90 cubin" "$work/refused.log")" -eq 1 ] ||
    fail "a refused cubin was not said exactly once: $(grep -m2 refused "$work/refused.log")"
  [ "$(steps "$work/refused.log")" = "$(steps "$work/cpu.log")" ] ||
    fail "refused cubins: the logged losses differ from the CPU path's"
  grep -qE "cuda emulation: [0-9]+ kernel launches.*[1-9][0-9]* refusals" "$work/refused.log" ||
    fail "the emulation counted no refusal: $(grep 'cuda emulation' "$work/refused.log")"
  echo "e2e: refused cubins: the PTX ran instead; $(steps "$work/refused.log" | tail -1)"
else
  echo "e2e: no CUDA toolkit at /usr/local/cuda: the PTX fallback of a refused cubin is not tested here"
fi
if DTF_EMU_REFUSE_CUBINS=1 "$bin/dtf-run" "$work/cubin.plan" --emulate-gpus 1 --steps 2 \
    > "$work/refused-standin.log" 2>&1 && ! grep -q "soft placement" "$work/refused-standin.log"; then
  fail "the stand-in cubin's plan ran on the GPU with its cubin refused and its PTX wrong"
fi
grep -q "the driver refused the plan's sm_90 cubin" "$work/refused-standin.log" ||
  fail "the stand-in cubin's refusal was not said: $(tail -3 "$work/refused-standin.log")"
echo "e2e: PASS"
