#!/usr/bin/env bash
# End to end: a label outside the classes is a precise error, not a NaN loss.
# tests/e2e/gpu_labels.dtf (every op on /gpu:0, no soft placement, so nothing
# may move to the CPU) trains on 64 CSV examples of 3 classes:
#   0. a label column holding 7 is refused by the reader before training,
#      naming the file, the line and the loss's classes (exit 4);
#   1. a label of 7 made in the graph (one example's x4 is flagged): on the
#      CPU (no driver, soft placement) the step that reads it fails with the
#      op-by-op kernel's message;
#   2. on one emulated GPU (dtf-run --emulate-gpus 1) the same step fails
#      with the same op, source location, example, label and class count
#      (the sparse cross-entropy's row kernel reported it in its
#      row-index-error word from a replayed CUDA graph), exit status non-zero;
#   3. the same data with good labels trains all 40 steps on the GPU (no
#      report from any replay);
#   4. a run resumed from a checkpoint (step 16, good data) that meets the bad
#      label fails and leaves the checkpoint directory as it was: no
#      checkpoint of the failed step, none lost.
# usage: gpu_labels.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
work=$work/gpu_labels
rm -rf "$work"
mkdir -p "$work"
python3 "$root/tests/e2e/gpu_labels_data.py" "$work"
for data in good bad column; do
  sed "s|@DATA@|$work/$data.csv|" "$root/tests/e2e/gpu_labels.dtf" > "$work/$data.dtf"
  # The CPU run needs soft placement (no driver); the GPU runs do without.
  sed 's|^  train {$|  train {\n    session = session(soft_placement = true)|' \
    "$work/$data.dtf" > "$work/${data}_soft.dtf"
  # The column check needs a loss that reads the label column itself.
  [ "$data" = column ] && sed -i 's/labels = y + flagged \* (7 - y)/labels = y/' "$work/${data}_soft.dtf"
  "$bin/dtfc" "$work/$data.dtf" -o "$work/$data.plan"
  "$bin/dtfc" "$work/${data}_soft.dtf" -o "$work/${data}_soft.plan"
done

# run NAME PLAN [dtf-run flags]: sets rc, the log in $work/NAME.log.
run() {
  local name=$1 plan=$2; shift 2
  rc=0
  "$bin/dtf-run" "$plan" --log-every 4 "$@" > "$work/$name.log" 2>&1 || rc=$?
}
error_of() { grep -m1 "^dtf-run: error: " "$work/$1.log" || true; }

# 0. The reader: a label column outside the loss's classes, before any step.
DTF_CUDA_DRIVER=/nonexistent/libcuda.so.1 run column "$work/column_soft.plan"
[ "$rc" -eq 4 ] || fail "a label column holding 7 made dtf-run exit $rc, want 4: $(tail -3 "$work/column.log")"
grep -q "^step " "$work/column.log" && fail "the run trained before refusing the label column"
error_of column | grep -qF "column.csv:39: column 'y': label 7 is outside 0..2 (the model's loss has 3 classes)" ||
  fail "the reader's refusal does not name the file, line and classes: $(error_of column)"
echo "e2e: reader: $(error_of column)"
# The same for an IDX split: 20 images of 2x2, example 13 labelled 12, for a
# loss of 10 classes.
mkdir -p "$work/idx"
python3 - "$work/idx" <<'PY'
import struct, sys
d = sys.argv[1]
with open(d + "/train-images-idx3-ubyte", "wb") as f:
    f.write(struct.pack(">IIII", 0x803, 20, 2, 2) + bytes(range(80)))
with open(d + "/train-labels-idx1-ubyte", "wb") as f:
    f.write(struct.pack(">II", 0x801, 20) + bytes(12 if i == 13 else i % 10 for i in range(20)))
PY
cat > "$work/idx.dtf" <<EOF
model idx_labels {
  input x: f32[B, 4]
  input y: i32[B]
  graph {
    logits = dense(x, units = 10) as out
    loss = mean(sparse_softmax_cross_entropy(logits, y))
  }
  train {
    optimizer = sgd(learning_rate = 0.1)
    batch = 4
    steps = 10
    data = idx("$work/idx", split = train)
  }
}
EOF
"$bin/dtfc" "$work/idx.dtf" -o "$work/idx.plan"
run idx "$work/idx.plan"
[ "$rc" -eq 4 ] || fail "an IDX label of 12 for 10 classes made dtf-run exit $rc, want 4: $(tail -3 "$work/idx.log")"
error_of idx | grep -qF "idx/train-labels-idx1-ubyte: example 13 has label 12, outside the model's classes 0..9 (its loss has 10 classes)" ||
  fail "the IDX reader's refusal does not name the file, example and classes: $(error_of idx)"
echo "e2e: reader: $(error_of idx)"

if [ ! -x /usr/local/cuda/bin/ptxas ]; then
  echo "e2e: SKIP: no CUDA toolkit at /usr/local/cuda: dtfc makes no GPU code for the row kernels here"
  exit 77
fi

# 1. The CPU path.
DTF_CUDA_DRIVER=/nonexistent/libcuda.so.1 run cpu "$work/bad_soft.plan"
[ "$rc" -ne 0 ] || fail "the CPU run trained on a label outside the classes"
cpu=$(error_of cpu)
echo "e2e: CPU: $cpu"
[[ "$cpu" =~ ^dtf-run:\ error:\ step\ ([0-9]+):\ (.*bad_soft\.dtf:[0-9]+:[0-9]+):\ dtf\.sparse_softmax_cross_entropy:\ (label\ 7\ of\ example\ [0-9]+\ is\ outside\ the\ classes\ \[0,\ 3\))$ ]] ||
  fail "the CPU run's error is not the op-by-op kernel's: $(tail -3 "$work/cpu.log")"
cpu_step=${BASH_REMATCH[1]} cpu_where=${BASH_REMATCH[2]##*/} cpu_what=${BASH_REMATCH[3]}

# 2. One emulated GPU, every op on it.
run gpu "$work/bad.plan" --emulate-gpus 1
gpu=$(error_of gpu)
echo "e2e: GPU: $gpu"
{ [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ]; } ||
  fail "the GPU run on a label outside the classes exited $rc: $(tail -3 "$work/gpu.log")"
grep -q "soft placement" "$work/gpu.log" && fail "an op moved to the CPU: $(grep 'soft placement' "$work/gpu.log")"
grep -qiE "(^| )nan( |$)" "$work/gpu.log" && fail "the GPU run logged a NaN: $(grep -iE '(^| )nan( |$)' "$work/gpu.log")"
[[ "$gpu" =~ ^dtf-run:\ error:\ step\ ([0-9]+):\ (.*bad\.dtf:[0-9]+:[0-9]+):\ dtf\.fused\ on\ /job:localhost/replica:0/task:0/device:GPU:0:\ dtf\.sparse_softmax_cross_entropy\ \(kernel\ dtf_fused_[0-9]+\):\ (.*)$ ]] ||
  fail "the GPU run's error does not name the op, its location and the GPU: $gpu"
gpu_step=${BASH_REMATCH[1]} gpu_where=${BASH_REMATCH[2]##*/} gpu_what=${BASH_REMATCH[3]}
[ "$gpu_step" = "$cpu_step" ] || fail "the GPU run failed at step $gpu_step, the CPU run at $cpu_step"
[ "${gpu_where#bad.dtf}" = "${cpu_where#bad_soft.dtf}" ] ||
  fail "the GPU run names $gpu_where, the CPU run $cpu_where"
[ "$gpu_what" = "$cpu_what" ] || fail "the GPU run says '$gpu_what', the CPU run '$cpu_what'"
# The report came from a replayed CUDA graph (the step's one wait).
stats=$(grep "cuda emulation:" "$work/gpu.log") || fail "the emulation printed no counters"
[[ "$stats" =~ ([0-9]+)\ graphs\ captured,\ ([0-9]+)\ graph\ launches ]] ||
  fail "no graph counters: $stats"
{ [ "${BASH_REMATCH[1]}" -ge 1 ] && [ "${BASH_REMATCH[2]}" -ge 2 ]; } ||
  fail "the failing step was not a graph replay: $stats"

# 3. Good labels: every step, no report.
run good "$work/good.plan" --emulate-gpus 1
[ "$rc" -eq 0 ] || fail "the GPU run on good labels failed: $(tail -3 "$work/good.log")"
grep -q "^final: steps=40 " "$work/good.log" || fail "the good run did not train 40 steps"

# 4. A checkpoint, then a resumed run that meets the bad label.
run first "$work/good.plan" --emulate-gpus 1 --steps 16 --model-dir "$work/model"
[ "$rc" -eq 0 ] || fail "the first run failed: $(tail -3 "$work/first.log")"
before=$(cd "$work/model" && md5sum ckpt-* checkpoint)
echo "$before" | grep -q "ckpt-16.index" || fail "no checkpoint at step 16: $before"
run resumed "$work/bad.plan" --emulate-gpus 1 --model-dir "$work/model"
[ "$rc" -ne 0 ] || fail "the resumed run trained on a label outside the classes"
grep -q "restored checkpoint ckpt-16" "$work/resumed.log" || fail "the run did not resume: $(head -5 "$work/resumed.log")"
error_of resumed | grep -qE "step (1[7-9]|2[0-9]|3[0-9]|40): .*label 7 of example [0-9]+ is outside the classes \[0, 3\)" ||
  fail "the resumed run's error: $(error_of resumed)"
after=$(cd "$work/model" && md5sum ckpt-* checkpoint)
[ "$before" = "$after" ] || fail "the checkpoints changed: before $before, after $after"
echo "e2e: resumed at 16, $(error_of resumed | grep -oE 'step [0-9]+'): failed; checkpoints unchanged"
echo "e2e: PASS"
