#!/usr/bin/env bash
# The GPU unit tests as a GPU machine runs them (DTF_GPU=real, one process
# per test as the bundle's check.sh runs them), with the emulation playing
# the real driver: DTF_CUDA_DRIVER and DTF_*_LIBRARY name it and it is not
# configured as the emulation (2 GPUs by DTF_EMU_GPUS), so its counters and
# faults are out of the tests' reach. Every test must pass, or skip saying
# why; the tests that left a check out must say which ([ NOTE ]).
# usage: real_driver_path.sh TESTS_BINARY EMULATION_LIBRARY
set -uo pipefail
tests=$1 emu=$2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
bad=0 passed=0 skipped=0 notes=0
for t in $("$tests" --gtest_list_tests | awk '/^[^ ]/ {s = $1} /^  / {print s $1}'); do
  env DTF_GPU=real DTF_CUDA_DRIVER="$emu" DTF_CUBLAS_LIBRARY="$emu" DTF_CUDNN_LIBRARY="$emu" \
    DTF_NCCL_LIBRARY="$emu" DTF_EMU_GPUS=2 "$tests" --gtest_filter="$t" > "$log" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ] || grep -q "^\[  FAILED  \]" "$log"; then
    echo "FAIL: $t (exit status $rc):"; cat "$log"; bad=$((bad + 1)); continue
  fi
  if grep -q "^\[  SKIPPED \] $t" "$log"; then
    grep -q "DTF_GPU=real: \|needs [0-9]* GPUs" "$log" ||
      { echo "FAIL: $t skipped without saying why:"; cat "$log"; bad=$((bad + 1)); continue; }
    skipped=$((skipped + 1))
  else
    passed=$((passed + 1))
  fi
  notes=$((notes + $(grep -c "^\[   NOTE   \] DTF_GPU=real: not checked" "$log")))
done
echo "real-driver path: $passed passed, $skipped skipped with their reasons, $notes checks left out with a note, $bad failed"
[ "$bad" -eq 0 ] && [ "$passed" -gt 0 ]
