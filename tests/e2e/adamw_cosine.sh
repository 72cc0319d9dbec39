#!/usr/bin/env bash
# End to end: a model written as a Keras user would, with AdamW and a cosine
# learning-rate schedule with a linear warmup (adamw(learning_rate =
# cosine_decay(0.0, ..., warmup_target = ..., warmup_steps = ...),
# weight_decay = ...)). The plan must hold the decoupled weight decay in the
# (generated) Adam updates and the warmup in the graph; the MLP must train on
# Fashion-MNIST in one process (the loss falls, the test accuracy ends well
# above chance) and on 1 ps + 2 workers, where the ps applies the decayed
# updates and the chief's loss falls. Then an embedding table trains with
# adamw's sparse (lazy) update on 2 ps + 2 workers.
# usage: adamw_cosine.sh BIN_DIR WORK_DIR [STEPS]
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
steps=${3:-200}
rm -rf "$work" && mkdir -p "$work"
cat > "$work/adamw.dtf" <<DTF
model adamw_mlp {
  input x: f32[B, 784]
  input y: i32[B]
  graph {
    h = dense(x, units = 64, activation = relu) as hidden
    logits = dense(h, units = 10) as out
    loss = mean(sparse_softmax_cross_entropy(logits, y))
    accuracy = mean(cast(argmax(logits, 1) == y, to = f32))
  }
  train {
    optimizer = adamw(learning_rate = cosine_decay(0.0, decay_steps = $((steps - 30)), alpha = 0.1,
                                                   warmup_target = 0.003, warmup_steps = 30),
                      weight_decay = 0.05)
    batch = 100
    steps = $steps
    seed = 1
    data = idx("$data", split = train)
    eval = idx("$data", split = test)
    metrics = [loss, accuracy]
  }
}
DTF
"$bin/dtfc" "$work/adamw.dtf" -o "$work/adamw.plan"
"$bin/dtfc" "$work/adamw.dtf" --emit=train-mlir > "$work/train.mlir"
n=$(grep -c 'dtf.apply_adam .*epsilon 9.99999[0-9]*E-8 {weight_decay = 5.000000e-02 : f64}' "$work/train.mlir" || true)
[ "$n" -eq 4 ] || fail "want 4 Adam updates with weight_decay 0.05 and Keras' epsilon, got $n: $(grep apply_ "$work/train.mlir")"
grep -q 'dtf.select' "$work/train.mlir" || fail "the schedule has no warmup branch"
"$bin/dtfc" "$work/adamw.dtf" --emit=kernels > "$work/kernels.txt"
grep -q 'dtf.apply_adam' "$work/kernels.txt" || fail "the decayed Adam updates are not generated kernels"
echo "e2e: the plan holds 4 decayed Adam updates and the warmup"

"$bin/dtf-run" "$work/adamw.plan" --log-every 20 --threads 2 > "$work/one.log" 2>&1 ||
  { tail -20 "$work/one.log" >&2; fail "dtf-run failed"; }
! grep -q "op by op" "$work/one.log" || fail "the generated updates ran op by op"
python3 "$root/tests/e2e/check_training.py" "$work/one.log" "$steps" 0.7 "one process:"

cluster_json "$work/c1x2.json" 1 2
timeout 300 "$bin/dtf-run" "$work/adamw.plan" --cluster "$work/c1x2.json" --log-every 20 \
  --threads 1 > "$work/cluster.log" 2>&1 || { tail -30 "$work/cluster.log" >&2; fail "the cluster run failed"; }
grep -q 'the job finished' "$work/cluster.log" || fail "the launcher did not report the job finished"
python3 "$root/tests/e2e/check_training.py" "$work/cluster.log" "$steps" 0.6 "1 ps + 2 workers:" \
  --task worker.0 --fall 0.15

# An embedding table (only gathered) trained with adamw on 2 ps + 2
# workers: its update stays sparse (lazy), decaying the rows each step looks
# up, and runs on the ps that holds each shard.
sed 's/optimizer = adagrad(learning_rate = 0.1)/optimizer = adamw(learning_rate = 0.01, weight_decay = 0.1)/' \
  "$root/tests/e2e/embedding_small.dtf" > "$work/table.dtf"
grep -q 'adamw(' "$work/table.dtf" || fail "could not set adamw in embedding_small.dtf"
"$bin/dtfc" "$work/table.dtf" --emit=train-mlir > "$work/table.mlir"
grep -q 'dtf.sparse_apply_adam @"words/embeddings".*{weight_decay = 1.000000e-01 : f64}' "$work/table.mlir" ||
  fail "the table's adamw update is not sparse with its weight decay"
"$bin/dtfc" "$work/table.dtf" -o "$work/table.plan"
cluster_json "$work/c2x2.json" 2 2
timeout 300 "$bin/dtf-run" "$work/table.plan" --cluster "$work/c2x2.json" --steps 100 --threads 1 \
  --log-every 20 > "$work/table.log" 2>&1 || { tail -30 "$work/table.log" >&2; fail "the table's cluster run failed"; }
for ps in ps.0 ps.1; do
  line=$(grep -E "^$ps *\| [0-9]+ updates applied" "$work/table.log" | tail -1)
  applied=$(sed -n 's/.*| \([0-9]*\) updates applied.*/\1/p' <<<"$line")
  updated=$(sed -n 's/.* \([0-9]*\) updated$/\1/p' <<<"$line")
  [ "${applied:-0}" -ge 100 ] && [ "${updated:-0}" -ge 1000 ] ||
    fail "$ps did not train its shard of the table: '${line:-no summary}'"
  echo "   ok: $line"
done
echo "e2e: adamw with a cosine warmup schedule OK"
