#!/usr/bin/env bash
# The sequence models of models/ train on Fashion-MNIST: the vision
# transformer (multi_head_attention, layer_norm, dense over patches,
# batched matmul) and the LSTM over image rows, 400 steps each in one
# process, must lower their loss by 20% and evaluate well above chance.
# Then 1 ps + 2 workers train the transformer (its attention and layer-norm
# variables on the ps) and every task ends with 0.
# usage: sequence_models.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
rm -rf "$work" && mkdir -p "$work"
for m in transformer lstm; do
  "$bin/dtfc" "$root/models/$m.dtf" -o "$work/$m.plan"
  "$bin/dtf-run" "$work/$m.plan" --steps 400 --log-every 100 --threads 2 > "$work/$m.log" 2>&1 ||
    { tail -20 "$work/$m.log" >&2; fail "dtf-run of models/$m.dtf failed"; }
  python3 "$root/tests/e2e/check_training.py" "$work/$m.log" 400 0.72 "$m"
done

cluster_json "$work/cluster.json" 1 2
timeout 300 "$bin/dtf-run" "$work/transformer.plan" --cluster "$work/cluster.json" --steps 200 \
  --log-every 50 --threads 1 > "$work/cluster.log" 2>&1 ||
  { tail -30 "$work/cluster.log" >&2; fail "the transformer's cluster run failed"; }
grep -q 'the job finished' "$work/cluster.log" || fail "the launcher did not report the job finished"
for w in worker.0 worker.1; do
  grep -q "^$w *| final: steps=" "$work/cluster.log" || fail "$w did not finish: $(grep final "$work/cluster.log")"
done
echo "e2e: sequence models OK"
