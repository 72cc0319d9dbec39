#!/usr/bin/env bash
# End to end on one emulated GPU: the seed CNN with its graph on /gpu:0
# keeps the variables whose readers, gradient and (generated, in-place)
# update all run on GPU:0 in device memory between steps.
# - The run says which stay there; the copies per step (the emulation's
#   count over 40 more steps) drop by at least the number of resident
#   variables against the same plan with DTF_GPU_RESIDENT_VARIABLES=0, and
#   the loss at every logged step is the same.
# - The evaluation reads the variables where the training keeps them: its
#   copies drop by one per variable and eval batch (less the set-up's).
# - Checkpoints come down from the device: the mid-run checkpoint (step 20)
#   and the last (step 40) are equal byte for byte to those of the run
#   without resident variables, and the last, restored on the CPU path (no
#   driver) and evaluated, gives the GPU run's evaluation loss (1e-3).
# usage: gpu_resident.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
rm -rf "$work" && mkdir -p "$work"
python3 "$root/tests/e2e/gpu_model.py" "$root/models/mnist_cnn.dtf" "$work/cnn.dtf" 40 \
  "soft_placement = true"
sed -i -e "s/checkpoint every 600 s keep 5/checkpoint every 20 steps keep 5/" "$work/cnn.dtf"
grep -q "checkpoint every 20 steps" "$work/cnn.dtf" || fail "could not set the checkpoint period"
"$bin/dtfc" "$work/cnn.dtf" -o "$work/cnn.plan"
# For counting: an evaluation only at the end of a run (every 1000 steps).
python3 "$root/tests/e2e/gpu_model.py" "$root/models/mnist_cnn.dtf" "$work/count.dtf" 1000 \
  "soft_placement = true"
"$bin/dtfc" "$work/count.dtf" -o "$work/count.plan"

# Every evaluation reads the eval set's first 20 batches (of 200).
eval_steps=20
run() { # run NAME RESIDENT STEPS [MODEL_DIR]: the emulation's copy count
  local dir=() plan=$work/count.plan
  [ $# -lt 4 ] || { dir=(--model-dir "$4"); plan=$work/cnn.plan; }
  DTF_GPU_RESIDENT_VARIABLES=$2 "$bin/dtf-run" "$plan" --emulate-gpus 1 --steps "$3" \
    --log-every 10 --eval-steps "$eval_steps" "${dir[@]}" > "$work/$1.log" 2>&1 || { tail -20 "$work/$1.log" >&2; fail "$1 failed"; }
  sed -n 's/.*cuda emulation: .* \([0-9]*\) copies,.*/\1/p' "$work/$1.log"
}
run res40 1 40 "$work/res" > /dev/null
run plain40 0 40 "$work/plain" > /dev/null
r40=$(run rc40 1 40) r80=$(run rc80 1 80) p40=$(run pc40 0 40) p80=$(run pc80 0 80)
line=$(grep "variables and slots stay on" "$work/res40.log") || fail "no variable stayed on the GPU"
echo "e2e: $line"
n=$(echo "$line" | sed 's/.*train_step: \([0-9]*\) variables and slots.*/\1/')
! grep -q "stay on" "$work/plain40.log" || fail "DTF_GPU_RESIDENT_VARIABLES=0 kept variables on the GPU"
python3 - "$r40" "$r80" "$p40" "$p80" "$n" <<'PY'
import sys
r40, r80, p40, p80, n = map(int, sys.argv[1:])
res, plain = (r80 - r40) / 40, (p80 - p40) / 40
print(f"e2e: copies per step: {plain:g} with variables on the host, {res:g} with {n} variables and slots resident")
# Each resident variable (a third of them: var, m, v) no longer crosses up.
if not plain - res >= n // 3:
    sys.exit(f"e2e: the copies per step dropped by {plain - res:g}, fewer than the {n // 3} resident variables")
PY
# The evaluation reads the training's device copies instead of uploading
# every variable for every eval batch. Each count run ends with one
# evaluation; 2 * (copies at 40 steps) - (copies at 80) is that evaluation's
# copies plus the set-up's.
grep -q "on its first $eval_steps batches (--eval-steps)" "$work/rc40.log" ||
  fail "the run does not say it evaluates $eval_steps batches: $(grep '^  eval:' "$work/rc40.log")"
line=$(grep "^eval: reads [0-9]* variables in place on" "$work/rc40.log") ||
  fail "the evaluation does not read the training's resident variables: $(grep '^eval:' "$work/rc40.log")"
echo "e2e: $line"
python3 - "$r40" "$r80" "$p40" "$p80" "$(echo "$line" | sed 's/^eval: reads \([0-9]*\) .*/\1/')" "$eval_steps" "$n" <<'PY'
import sys
r40, r80, p40, p80, read, batches, resident = map(int, sys.argv[1:])
res, plain = 2 * r40 - r80, 2 * p40 - p80
print(f"e2e: the evaluation's copies ({batches} batches, with the set-up's): {plain} with variables on the host, {res} reading them in place")
# One upload per variable and eval batch saved, less what resident
# variables cost once per run: each resident variable and slot goes up at
# the start, down before the evaluation and down at the end, and each
# constant (at most 4) goes up once (8 * 20 - 3 * 24 - 2 = 86 now).
# And no more than that: the evaluations read --eval-steps batches.
if not plain - res <= read * batches:
    sys.exit(f"e2e: reading {read} variables in place saved {plain - res} copies, more than one per variable and eval batch ({read * batches}): did the evaluation read more than {batches} batches?")
if not plain - res >= read * batches - 3 * resident - 4:
    sys.exit(f"e2e: reading {read} variables in place saved {plain - res} copies, fewer than one per variable and eval batch ({read * batches}) less {3 * resident + 4} copies once per run")
PY
diff <(grep -E "^(step|eval) " "$work/rc80.log" | sed 's/ [0-9]* img\/s.*//') \
     <(grep -E "^(step|eval) " "$work/pc80.log" | sed 's/ [0-9]* img\/s.*//') ||
  fail "the loss curves with and without resident variables differ"
for s in 20 40; do
  cmp "$work/res/ckpt-$s.data-0-of-1" "$work/plain/ckpt-$s.data-0-of-1" ||
    fail "checkpoint $s differs between resident and host variables"
done
echo "e2e: checkpoints 20 (mid-run) and 40 are identical with and without resident variables"
gpuEval=$(sed -n 's/^eval  step 40  loss \([0-9.]*\).*/\1/p' "$work/res40.log")
DTF_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$bin/dtf-run" "$work/cnn.plan" --model-dir "$work/res" \
  --steps 0 --eval-steps "$eval_steps" > "$work/cpu-eval.log" 2>&1 || { tail -20 "$work/cpu-eval.log" >&2; fail "the CPU evaluation failed"; }
grep -q "restored checkpoint ckpt-40" "$work/cpu-eval.log" || fail "the CPU run did not restore ckpt-40"
cpuEval=$(sed -n 's/^eval  step 40  loss \([0-9.]*\).*/\1/p' "$work/cpu-eval.log")
python3 - "$gpuEval" "$cpuEval" <<'PY'
import sys
g, c = map(float, sys.argv[1:])
if abs(g - c) > 1e-3 * abs(g):
    sys.exit(f"e2e: the CPU path's evaluation of ckpt-40 ({c}) differs from the GPU run's ({g})")
print(f"e2e: ckpt-40 restored on the CPU path evaluates to {c} (the GPU run: {g})")
PY
