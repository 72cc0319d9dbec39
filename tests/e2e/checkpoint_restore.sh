#!/usr/bin/env bash
# End to end, in real processes: dtf-run trains the MLP of models/mlp.dtf (momentum
# slots, moving averages, global step, a decaying learning rate) with --model-dir
# and a checkpoint every 100 steps, stops at step 200, and a second dtf-run
# restores ckpt-200 and continues to 300. Its final line must equal the one of an
# uninterrupted 300-step run. Then: a reached step count only evaluates, a flipped
# byte in a data file is reported with the tensor's name (exit 4), and --fresh
# moves the checkpoints aside and starts at step 0.
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

# A flipped byte in the middle of the data file: exit 4, the tensor named.
data_file="$ckpt/ckpt-300.data-0-of-1"
size=$(stat -c %s "$data_file")
python3 - "$data_file" $((size / 2)) <<'PY'
import sys
path, at = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f:
    f.seek(at); b = f.read(1); f.seek(at); f.write(bytes([b[0] ^ 0x40]))
PY
rc=0; run "$work/damaged.log" --model-dir "$ckpt" || rc=$?
cat "$work/damaged.log"
[ $rc = 4 ] || fail "a damaged checkpoint gave exit code $rc, not 4"
grep -q "ckpt-300.data-0-of-1 is damaged: tensor '" "$work/damaged.log" ||
  fail "the error does not name the file and the tensor"
grep -q "the previous checkpoint, ckpt-200, is complete" "$work/damaged.log" ||
  fail "the error does not point at ckpt-200"

# --fresh: the old checkpoints move aside, training starts at 0.
run "$work/fresh.log" --model-dir "$ckpt" --fresh --steps 50 || { tail "$work/fresh.log"; fail "--fresh failed"; }
grep -q "moved the checkpoints of the previous run to $ckpt/previous-run-1" "$work/fresh.log" ||
  fail "--fresh did not say where the checkpoints went"
[ -f "$ckpt/previous-run-1/ckpt-200.index" ] || fail "--fresh lost ckpt-200"
grep -q '^step 50/50' "$work/fresh.log" || fail "--fresh did not start at step 0"
[ -f "$ckpt/ckpt-50.index" ] || fail "--fresh saved no ckpt-50"
echo "e2e: checkpoint restore OK: $(final "$work/second.log")"
