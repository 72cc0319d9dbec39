#!/usr/bin/env bash
# End to end, in real processes: the optimizer updates as generated kernels
# (dtfc's default --fuse-updates=on) against the op-by-op update kernels
# (--fuse-updates=off), everything else fused alike.
# 1. The seed CNN (Adam) in one process: the checkpoints after STEPS steps
#    must be equal byte for byte (the generated update computes the op-by-op
#    kernel's arithmetic bit for bit, in place on the variable and slots).
# 2. The MLP (momentum) on 1 ps + 2 workers, where the updates run on the ps:
#    async trains (the chief's last loss or its eval at the end is 15% below
#    its first loss); sync (2 replicas) trains, and
#    its checkpoint must equal the op-by-op run's byte for byte whenever two
#    op-by-op runs agree with each other (the ps summed the two gradients in
#    the same order), and else differ from it no more than 10 times as much
#    as the two op-by-op runs differ from each other.
# Neither run may fall back to running its fused regions op by op.
# usage: fusion_updates.sh BIN_DIR WORK_DIR [STEPS]
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
steps=${3:-60}
rm -rf "$work" && mkdir -p "$work"

sed -E -e "s/^( *)steps( *)= [0-9]+/\1steps\2= $steps\n\1seed = 3/" \
  -e "s/every = [0-9]+/every = $steps/" "$root/models/mnist_cnn.dtf" > "$work/cnn.dtf"
grep -Eq "^ *seed = 3" "$work/cnn.dtf" || fail "could not set the seed"
"$bin/dtfc" "$work/cnn.dtf" -o "$work/fused.plan"
"$bin/dtfc" "$work/cnn.dtf" --fuse-updates=off -o "$work/plain.plan"
"$bin/dtfc" "$work/cnn.dtf" --emit=kernels > "$work/kernels.txt"
n=$(grep -c "dtf.apply_adam" "$work/kernels.txt" || true)
[ "$n" -ge 1 ] || { cat "$work/kernels.txt" >&2; fail "no generated Adam update in the plan"; }
"$bin/dtfc" "$work/cnn.dtf" --fuse-updates=off --emit=kernels > "$work/kernels-off.txt"
! grep -q "dtf.apply_" "$work/kernels-off.txt" || fail "--fuse-updates=off still fused an update"
echo "e2e: the seed CNN's plan has $n generated Adam updates"
for p in fused plain; do
  "$bin/dtf-run" "$work/$p.plan" --log-every 10 --threads 2 --model-dir "$work/$p.ckpt" \
    > "$work/$p.log" 2>&1 || { tail -20 "$work/$p.log" >&2; fail "dtf-run $p failed"; }
done
! grep -q "op by op" "$work/fused.log" || { grep "op by op" "$work/fused.log" >&2; fail "the fused plan ran op by op"; }
cmp "$work/fused.ckpt/ckpt-$steps.data-0-of-1" "$work/plain.ckpt/ckpt-$steps.data-0-of-1" ||
  fail "the checkpoints after $steps steps differ between generated and op-by-op updates"
echo "e2e: seed CNN: the checkpoints after $steps steps are identical, byte for byte"

cluster_json "$work/c1x2.json" 1 2
mlp() { # mlp NAME UPDATE [DTFC_FLAGS]
  sed -e 's/steps = 10000/steps = 200/' -e 's/every = 2000/every = 200/' \
      -e "s/update = sync(replicas_to_aggregate = 2, total_num_replicas = 3)/update = $2/" \
      "$root/models/mlp.dtf" > "$work/$1.dtf"
  # shellcheck disable=SC2086
  "$bin/dtfc" "$work/$1.dtf" ${3:-} -o "$work/$1.plan"
}
run() { # run NAME: the plan on 1 ps + 2 workers; the chief's loss must fall
  rm -rf "$work/$1-dir"
  timeout 300 "$bin/dtf-run" "$work/$1.plan" --cluster "$work/c1x2.json" --log-every 25 \
    --model-dir "$work/$1-dir" > "$work/$1.log" 2>&1 || { tail -30 "$work/$1.log" >&2; fail "$1: the job failed"; }
  ! grep -q "op by op" "$work/$1.log" || { grep "op by op" "$work/$1.log" >&2; fail "$1 ran op by op"; }
  python3 "$root/tests/e2e/check_training.py" "$work/$1.log" 0 0 "$1:" --task worker.0 --fall 0.15 ||
    fail "$1: the chief did not train"
}
mlp async async
mlp sync "sync(replicas_to_aggregate = 2)"
mlp sync-off "sync(replicas_to_aggregate = 2)" --fuse-updates=off
grep -q "dtf.apply_momentum" <("$bin/dtfc" "$work/sync.dtf" --emit=kernels) ||
  fail "the MLP's plan has no generated momentum update"
cp "$work/sync-off.plan" "$work/sync-off2.plan"
run async
run sync
run sync-off
run sync-off2
last() { find "$work/$1-dir" -name 'ckpt-*.data-0-of-1' | sort -t- -k2 -n | tail -1; }
a=$(last sync) b=$(last sync-off) c=$(last sync-off2)
[ -n "$a" ] && [ -n "$b" ] && [ -n "$c" ] || fail "the sync runs wrote no checkpoint"
if ! cmp -s "$b" "$c"; then
  # Two op-by-op runs differ: the ps summed the workers' gradients in another
  # order; then the generated run cannot be held to the bits either, but it
  # may differ from an op-by-op run no more than two of those differ (x10).
  noise=$(python3 "$root/tests/e2e/ckpt_diff.py" "$b" "$c") || fail "op-by-op checkpoints differ in their tensors: $noise"
  gen=$(python3 "$root/tests/e2e/ckpt_diff.py" "$a" "$b") || fail "the generated run's checkpoint differs in its tensors: $gen"
  python3 -c "import sys; sys.exit(float(sys.argv[1]) > 10 * float(sys.argv[2]))" \
    "$(awk '{print $2}' <<<"$gen")" "$(awk '{print $2}' <<<"$noise")" ||
    fail "sync on 1 ps + 2 workers: generated vs op-by-op ($gen) differ more than 10x two op-by-op runs ($noise)"
  echo "e2e: sync on 1 ps + 2 workers: two op-by-op runs differ ($noise: the gradients' order at the ps); generated vs op-by-op: $gen"
elif cmp -s "$a" "$b"; then
  echo "e2e: sync on 1 ps + 2 workers: $(basename "$a") is identical, byte for byte, with generated and op-by-op updates (and two op-by-op runs agree)"
else
  fail "sync on 1 ps + 2 workers: two op-by-op runs agree, but the generated updates' checkpoint $(basename "$a") differs"
fi
