#!/usr/bin/env bash
# End to end on an emulated GPU: mixed precision never changes a GPU op's
# numbers silently. The seed CNN with its graph on /gpu:0 under
# `dtfc --precision=mixed_bfloat16`:
#  1. dtfc leaves the GPU-placed products in f32, and `--emit=kernels` says
#     why for each ("on a GPU: ... no bf16 or f16 path yet") under the policy's name.
#  2. The same plan with those products marked compute_dtype "bf16" anyway
#     (dtf-test-mark-bf16: a plan dtfc does not write) runs on the emulated
#     GPU, says once that they run in f32, and trains exactly as the
#     unmarked plan (the same losses at every logged step).
# usage: mixed_precision_gpu.sh BIN_DIR WORK_DIR [STEPS]
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$1" "$2"
steps=${3:-3}
work=$work/mixed_precision_gpu
rm -rf "$work" && mkdir -p "$work"
python3 "$root/tests/e2e/gpu_model.py" "$root/models/mnist_cnn.dtf" "$work/gpu.dtf" "$steps" ""
grep -v '^ *eval *=' "$work/gpu.dtf" > "$work/cnn.dtf"

"$bin/dtfc" "$work/cnn.dtf" --precision=mixed_bfloat16 --emit=kernels > "$work/kernels.txt"
grep -q "^precision: mixed_bfloat16 " "$work/kernels.txt" ||
  { cat "$work/kernels.txt" >&2; fail "the listing does not name the policy"; }
! grep -q "bf16 operands" "$work/kernels.txt" || fail "dtfc marked a GPU-placed product bf16"
n=$(grep -c "^  train_step: .*  f32 (on a GPU: dtf-run's GPU kernels have no bf16 or f16 path yet)" "$work/kernels.txt" || true)
[[ $n == 11 ]] || { cat "$work/kernels.txt" >&2; fail "expected 11 GPU products said to stay f32, got $n"; }

"$bin/dtfc" "$work/cnn.dtf" --precision=mixed_bfloat16 -o "$work/plain.plan"
"$bin/dtf-test-mark-bf16" "$work/plain.plan" "$work/marked.plan" | tee "$work/mark.txt"
grep -q "^11 GPU ops marked" "$work/mark.txt" || fail "dtf-test-mark-bf16 did not mark the 11 products"
for p in plain marked; do
  "$bin/dtf-run" "$work/$p.plan" --emulate-gpus 1 --log-every 1 --threads 2 > "$work/$p.log" 2>&1 ||
    { tail -20 "$work/$p.log" >&2; fail "the $p run failed"; }
  # It ran on the emulated GPU (not moved to the CPU by soft placement).
  grep -q "cuda emulation: [1-9][0-9]* kernel launches" "$work/$p.log" ||
    { tail -5 "$work/$p.log" >&2; fail "the $p run launched nothing on the emulated GPU"; }
done
said=$(grep -c "^train_step: 11 ops with compute_dtype bf16 run on a GPU in f32 (first: .*dtf.conv2d.*): dtf-run's GPU kernels have no bf16 path yet" "$work/marked.log" || true)
[[ $said == 1 ]] || { cat "$work/marked.log" >&2; fail "the marked run said it $said times, not once"; }
grep -q "precision: mixed_bfloat16: 0 matmuls and convolutions compute in bf16 .*; 11 placed on a GPU compute in f32 there" \
  "$work/marked.log" || { cat "$work/marked.log" >&2; fail "the marked run's first lines claim bf16"; }
! grep -q "bf16" "$work/plain.log" || fail "the unmarked run talks of bf16"
a=$(grep '^step' "$work/plain.log") b=$(grep '^step' "$work/marked.log")
[[ -n $a && $(sed 's/ [0-9.]* img\/s.*//' <<<"$a") == $(sed 's/ [0-9.]* img\/s.*//' <<<"$b") ]] ||
  { printf 'unmarked:\n%s\nmarked:\n%s\n' "$a" "$b" >&2; fail "the marked plan trained differently"; }
echo "e2e: GPU-placed products stay f32 under mixed_bfloat16, and a plan marking them bf16 says so once and trains as f32"
