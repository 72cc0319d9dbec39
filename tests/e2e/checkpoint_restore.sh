#!/usr/bin/env bash
# End to end, in real processes: dtf-run trains the MLP of models/mlp.dtf (momentum
# slots, moving averages, global step, a decaying learning rate) with --model-dir
# and a checkpoint every 100 steps, stops at step 200, and a second dtf-run
# restores ckpt-200 and continues to 300. Its final line must equal the one of an
# uninterrupted 300-step run. Then: a reached step count only evaluates; a
# damaged newest checkpoint (a flipped byte in its index, then in its data
# file) stops dtf-run with exit 4, naming the damage and the older whole one,
# and refuses --predict and dtf-export too; --restore=latest-valid takes
# ckpt-200 with a warning naming both (dtf-run, --predict, dtf-export), and
# the run restored from it ends as the uninterrupted one; --fresh moves the
# checkpoints aside and starts at step 0; and when the only checkpoint is
# damaged, dtf-run refuses (exit 4) under either policy instead of starting
# from the initializers.
# usage: checkpoint_restore.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
rm -rf "$work"
mkdir -p "$work"
sed -e 's/steps = 10000/steps = 300/' -e 's/every = 2000/every = 300/' \
  -e 's/checkpoint every 5 min keep 3/checkpoint every 100 steps keep 2/' \
  "$root/models/mlp.dtf" > "$work/mlp.dtf"
grep -q 'checkpoint every 100 steps keep 2' "$work/mlp.dtf" || fail "could not set the checkpoint policy"
"$bin/dtfc" "$work/mlp.dtf" -o "$work/mlp.plan"
run() { # LOG ARGS...: dtf-run, its output in LOG; returns its exit code
  local log=$1; shift
  local rc=0
  "$bin/dtf-run" "$work/mlp.plan" --log-every 50 --threads 2 "$@" > "$log" 2>&1 || rc=$?
  return $rc
}
final() { grep '^final:' "$1" | tail -1 | sed -e 's/ examples_per_sec=.*//'; }

# The reference: 300 steps in one go, no checkpoints.
run "$work/straight.log" || { tail "$work/straight.log"; fail "the uninterrupted run failed"; }

# 200 steps, then on to 300 from the checkpoint.
ckpt="$work/model"
run "$work/first.log" --model-dir "$ckpt" --steps 200 || { tail "$work/first.log"; fail "the first run failed"; }
for f in ckpt-100.index ckpt-100.data-0-of-1 ckpt-200.index ckpt-200.data-0-of-1 checkpoint; do
  [ -f "$ckpt/$f" ] || fail "no $f after 200 steps with a checkpoint every 100 (have: $(ls "$ckpt"))"
done
run "$work/second.log" --model-dir "$ckpt" || { tail "$work/second.log"; fail "the restored run failed"; }
cat "$work/second.log"
grep -qx "restored checkpoint ckpt-200 from $ckpt; continuing at step 200" "$work/second.log" ||
  fail "the second run did not say it restored ckpt-200"
first_step=$(grep -o '^step [0-9]*' "$work/second.log" | head -1 | cut -d' ' -f2)
[ "$first_step" = 250 ] || fail "the restored run's first progress line is step $first_step, not 250"
[ "$(final "$work/second.log")" = "$(final "$work/straight.log")" ] ||
  fail "restored run: '$(final "$work/second.log")'; uninterrupted: '$(final "$work/straight.log")'"
# keep 2: ckpt-100 is gone.
[ ! -e "$ckpt/ckpt-100.index" ] || fail "ckpt-100 outlived keep 2"
[ -f "$ckpt/ckpt-300.index" ] || fail "no ckpt-300 at the end"

# A reached step count only evaluates.
run "$work/third.log" --model-dir "$ckpt" || { tail "$work/third.log"; fail "the third run failed"; }
grep -q "continuing at step 300" "$work/third.log" || fail "the third run did not restore ckpt-300"
! grep -q '^step ' "$work/third.log" || fail "the third run trained"
[ "$(final "$work/third.log")" = "$(final "$work/straight.log")" ] || fail "the third run's final line differs"

# flip FILE OFFSET: one bit of FILE's byte at OFFSET flipped (its size stays).
flip() {
  python3 - "$1" "$2" <<'PY'
import sys
path, at = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f:
    f.seek(at); b = f.read(1); f.seek(at); f.write(bytes([b[0] ^ 0x40]))
PY
}
# expect_refused LOG CODE WHAT PATTERN...: the command that wrote LOG exited
# CODE ($rc) and LOG holds every PATTERN (grep -F) and no progress line
# (nothing trained).
expect_refused() {
  local log=$1 code=$2 what=$3; shift 3
  [ "$rc" = "$code" ] || { cat "$log"; fail "$what: exit code $rc, not $code"; }
  for p in "$@"; do
    grep -qF -- "$p" "$log" || { cat "$log"; fail "$what: no '$p' in its output"; }
  done
  ! grep -q '^step ' "$log" || fail "$what: it trained"
}

# A damaged index of the newest checkpoint (which findLatest used to skip in
# silence): exit 4, the damage and the way on named.
index_file="$ckpt/ckpt-300.index"
cp "$index_file" "$work/ckpt-300.index.good"
flip "$index_file" 40
rc=0; run "$work/damaged-index.log" --model-dir "$ckpt" || rc=$?
expect_refused "$work/damaged-index.log" 4 "a damaged index" \
  "its newest checkpoint, ckpt-300, is damaged: checkpoint index $index_file is damaged" \
  "pass --restore=latest-valid to restore ckpt-200, the newest whole one" \
  "--fresh to start over"
cp "$work/ckpt-300.index.good" "$index_file"

# A flipped byte in the middle of the data file: exit 4, the tensor named.
data_file="$ckpt/ckpt-300.data-0-of-1"
flip "$data_file" $(($(stat -c %s "$data_file") / 2))
rc=0; run "$work/damaged.log" --model-dir "$ckpt" || rc=$?
expect_refused "$work/damaged.log" 4 "a damaged data file" \
  "ckpt-300.data-0-of-1 is damaged: tensor '" \
  "pass --restore=latest-valid to restore ckpt-200"
# --predict and dtf-export refuse it too, naming the damage.
rc=0; run "$work/predict-damaged.log" --model-dir "$ckpt" --predict eval -o "$work/p.csv" || rc=$?
expect_refused "$work/predict-damaged.log" 4 "--predict on a damaged checkpoint" \
  "ckpt-300.data-0-of-1 is damaged: tensor '"
[ ! -e "$work/p.csv" ] || fail "--predict wrote predictions from a damaged checkpoint"
rc=0; "$bin/dtf-export" "$work/mlp.plan" --model-dir "$ckpt" -o "$work/m.onnx" > "$work/export-damaged.log" 2>&1 || rc=$?
expect_refused "$work/export-damaged.log" 4 "dtf-export of a damaged checkpoint" \
  "ckpt-300.data-0-of-1 is damaged: tensor '"
[ ! -e "$work/m.onnx" ] || fail "dtf-export wrote a model from a damaged checkpoint"

# --restore=latest-valid: each says which checkpoint it read, and which it
# passed over.
passed_over="checkpoint ckpt-300 in $ckpt is damaged (checkpoint data file $data_file is damaged: tensor '"
taken="restoring ckpt-200, the newest whole one, instead (--restore=latest-valid)"
run "$work/predict-valid.log" --model-dir "$ckpt" --predict eval -o "$work/p.csv" --restore=latest-valid ||
  { cat "$work/predict-valid.log"; fail "--predict --restore=latest-valid failed"; }
for p in "$passed_over" "$taken" "--predict reads checkpoint $ckpt/ckpt-200 (step 200)"; do
  grep -qF -- "$p" "$work/predict-valid.log" || { cat "$work/predict-valid.log"; fail "--predict: no '$p'"; }
done
"$bin/dtf-export" "$work/mlp.plan" --model-dir "$ckpt" -o "$work/m.onnx" --restore latest-valid > "$work/export-valid.log" 2>&1 ||
  { cat "$work/export-valid.log"; fail "dtf-export --restore latest-valid failed"; }
for p in "$passed_over" "$taken" "dtf-export: reading checkpoint $ckpt/ckpt-200 (step 200)"; do
  grep -qF -- "$p" "$work/export-valid.log" || { cat "$work/export-valid.log"; fail "dtf-export: no '$p'"; }
done
# Training goes on from ckpt-200, sets the damaged ckpt-300 aside (it saves
# step 300 again) and ends as the uninterrupted run did.
run "$work/valid.log" --model-dir "$ckpt" --restore=latest-valid ||
  { cat "$work/valid.log"; fail "dtf-run --restore=latest-valid failed"; }
grep -qF "dtf-run: warning: $passed_over" "$work/valid.log" || { cat "$work/valid.log"; fail "no warning naming ckpt-300"; }
grep -qF "$taken" "$work/valid.log" || fail "the warning does not name ckpt-200, the one taken"
grep -qx "restored checkpoint ckpt-200 from $ckpt; continuing at step 200" "$work/valid.log" ||
  fail "--restore=latest-valid did not restore ckpt-200"
[ -f "$ckpt/damaged-1/ckpt-300.data-0-of-1" ] || fail "the damaged ckpt-300 was not set aside in $ckpt/damaged-1"
[ -f "$ckpt/ckpt-300.index" ] || fail "no new ckpt-300"
[ "$(final "$work/valid.log")" = "$(final "$work/straight.log")" ] ||
  fail "latest-valid run: '$(final "$work/valid.log")'; uninterrupted: '$(final "$work/straight.log")'"

# --fresh: the old checkpoints move aside, training starts at 0.
run "$work/fresh.log" --model-dir "$ckpt" --fresh --steps 50 || { tail "$work/fresh.log"; fail "--fresh failed"; }
grep -q "moved the checkpoints of the previous run to $ckpt/previous-run-1" "$work/fresh.log" ||
  fail "--fresh did not say where the checkpoints went"
[ -f "$ckpt/previous-run-1/ckpt-200.index" ] || fail "--fresh lost ckpt-200"
grep -q '^step 50/50' "$work/fresh.log" || fail "--fresh did not start at step 0"
[ -f "$ckpt/ckpt-50.index" ] || fail "--fresh saved no ckpt-50"

# The only checkpoint damaged: refused under either policy, never a start
# from the initializers over it.
flip "$ckpt/ckpt-50.data-0-of-1" $(($(stat -c %s "$ckpt/ckpt-50.data-0-of-1") / 2))
for policy in latest latest-valid; do
  rc=0; run "$work/only-$policy.log" --model-dir "$ckpt" --steps 60 --restore=$policy || rc=$?
  expect_refused "$work/only-$policy.log" 4 "the only checkpoint damaged (--restore=$policy)" \
    "cannot restore from $ckpt: it holds checkpoints, but none is whole: the newest, ckpt-50, is damaged: checkpoint data file $ckpt/ckpt-50.data-0-of-1 is damaged: tensor '" \
    "pass --fresh to start over"
done
[ ! -e "$ckpt/ckpt-60.index" ] || fail "a run trained from the initializers over the damaged ckpt-50"
echo "e2e: checkpoint restore OK: $(final "$work/second.log")"
