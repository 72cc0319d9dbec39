#!/usr/bin/env bash
# Runs a fuzzer for a bounded time from a seed corpus and every earlier finding.
#   run-fuzzer.sh FUZZER SECONDS WORKDIR            the front end: seeds are the
#       example models and the lit inputs; findings in tests/fuzz/regressions/
#   run-fuzzer.sh FUZZER SECONDS WORKDIR BIN_DIR    the file readers
#       (ReaderFuzzer.cpp): seeds are real files that BIN_DIR's dtfc and
#       dtf-run write (reader_seeds.py); findings in tests/fuzz/regressions-readers/
# A crash, leak or timeout fails the run; the input that caused it is written to
# WORKDIR/artifacts and should be copied into the regressions directory.
set -euo pipefail
fuzzer=$1 seconds=$2 work=$3 bin=${4:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
regressions=$root/tests/fuzz/regressions${bin:+-readers}

if [ ! -x "$fuzzer" ]; then
  echo "fuzz: $fuzzer is missing: the fuzz build (clang-19, build/fuzz) did not run" >&2
  exit 1
fi
# LLVM's BumpPtrAllocator poisons the unused part of its slabs when the code
# that inlines it is built with ASan. Ours is, libMLIR.so is not, and both
# allocate from the same MLIRContext arenas: libMLIR's writes into memory our
# side poisoned read as use-after-poison (a false report, found by this fuzzer;
# kept in regressions/). Manual poisoning is off; ASan's own checks stay on.
export ASAN_OPTIONS="allow_user_poisoning=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"

rm -rf "$work/seeds" "$work/artifacts"
mkdir -p "$work/seeds" "$work/corpus" "$work/artifacts"
# Seeds: copies, so the fuzzer's additions stay out of the source tree.
max_len=8192 runs=${DTF_FUZZ_RUNS:-12000}
extra=(-dict="$root/tests/fuzz/dtf.dict")
if [ -z "$bin" ]; then
  find "$root/models" "$root/tests/lit/frontend" "$regressions" \
    -type f \( -name '*.dtf' -o -path '*/regressions/*' \) -exec cp {} "$work/seeds/" \; 2>/dev/null || true
else
  # A plan without fusion and one with CPU kernels, a checkpoint of one step,
  # and small files of every other kind.
  max_len=40000 runs=${DTF_FUZZ_RUNS:-150000} # about 40 s: readers are fast
  # A file may not make a reader take more than this at once.
  extra=(-malloc_limit_mb=1024)
  model=$root/models/logistic_regression.dtf
  "$bin/dtfc" "$model" --no-data-check --fusion=off -o "$work/plain.plan"
  "$bin/dtfc" "$model" --no-data-check --gpu-kernels=off -o "$work/fused.plan"
  rm -rf "$work/ckpt"
  "$bin/dtf-run" "$work/plain.plan" --steps 1 --model-dir "$work/ckpt" --quiet > /dev/null
  python3 "$root/tests/fuzz/reader_seeds.py" "$work/seeds" "$work/plain.plan" "$work/fused.plan" -- \
    "$work/ckpt/ckpt-1.index" "$work/ckpt/ckpt-1.data-0-of-1"
  find "$regressions" -type f ! -name README.md -exec cp {} "$work/seeds/" \; 2>/dev/null || true
fi
echo "fuzz: $(ls "$work/seeds" | wc -l) seeds, ${seconds}s"

# Regressions first, one by one, so a finding that comes back is named.
for input in "$regressions"/*; do
  [ -f "$input" ] || continue
  [ "$(basename "$input")" = README.md ] && continue
  "$fuzzer" -runs=1 "$input" >/dev/null 2>&1 || {
    echo "fuzz: regression $(basename "$input") fails again:" >&2
    "$fuzzer" -runs=1 "$input" 2>&1 | tail -30 >&2
    exit 1
  }
done

# A fixed seed and a bounded number of runs make the test repeatable: CI
# explores the same inputs that a developer's run did. DTF_FUZZ_SEED and
# DTF_FUZZ_RUNS change them for longer, exploratory runs.
status=0
rm -rf "$work/corpus" && mkdir -p "$work/corpus"
"$fuzzer" "$work/corpus" "$work/seeds" \
  -seed="${DTF_FUZZ_SEED:-1}" -runs="$runs" \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len="$max_len" \
  "${extra[@]}" \
  -artifact_prefix="$work/artifacts/" -print_final_stats=1 \
  >"$work/fuzz.log" 2>&1 || status=$?
tail -n 15 "$work/fuzz.log"
if [ $status -ne 0 ]; then
  echo "fuzz: FAILED (exit $status); inputs in $work/artifacts:" >&2
  ls -l "$work/artifacts" >&2
  exit 1
fi
ran=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/fuzz.log" | grep -o '[0-9]*$' || true)
# A run that stopped early (its time budget on a slow machine, or an input
# that made the fuzzer quit) explored less than it claims: at least half the
# asked-for runs must have run.
if [ -z "$ran" ] || [ "$ran" -lt $((runs / 2)) ]; then
  echo "fuzz: FAILED: ${ran:-no} inputs ran of $runs asked for in ${seconds}s (see $work/fuzz.log)" >&2
  exit 1
fi
echo "fuzz: ok, $ran inputs of $runs in ${seconds}s, no crash, leak or hang"
