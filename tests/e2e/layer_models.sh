#!/usr/bin/env bash
# The layer models of models/ train on Fashion-MNIST: the vision transformer
# (multi_head_attention, layer_norm, dense over patches, batched matmul),
# the ViT with a class token (broadcast_to over the batch, attention
# dropout, GELU, slicing token 0),
# the LSTM over image rows and the residual CNN with batch_norm (evaluated
# with its moving statistics), 250 steps each in one process, must lower
# their loss by 20% and evaluate well above chance (0.65; about 0.75 at
# step 250, 0.78-0.82 at 400). Then 1 ps + 2 workers
# train the transformer and the residual CNN (its moving statistics updated
# on the ps): every task ends with 0, the chief's loss falls by 10% and it
# evaluates above chance. The residual CNN's checkpoint holds
# its moving statistics and restores.
# usage: layer_models.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
rm -rf "$work" && mkdir -p "$work"
for m in transformer:250:0.65 vit:250:0.65 lstm:250:0.65 resnet:250:0.65; do
  IFS=: read -r name steps floor <<<"$m"
  "$bin/dtfc" "$root/models/$name.dtf" -o "$work/$name.plan"
  "$bin/dtf-run" "$work/$name.plan" --steps "$steps" --log-every 50 --threads 2 > "$work/$name.log" 2>&1 ||
    { tail -20 "$work/$name.log" >&2; fail "dtf-run of models/$name.dtf failed"; }
  python3 "$root/tests/e2e/check_training.py" "$work/$name.log" "$steps" "$floor" "$name"
done

# The ViT's class token written as tile(class_token, [B, 1, 1]) instead of
# broadcast_to(class_token, [B, 1, 64]): the same loss at step 50.
sed 's/broadcast_to(class_token, \[B, 1, 64\])/tile(class_token, [B, 1, 1])/' "$root/models/vit.dtf" > "$work/vit_tile.dtf"
grep -q 'tile(class_token' "$work/vit_tile.dtf" || fail "models/vit.dtf no longer writes broadcast_to(class_token, [B, 1, 64])"
"$bin/dtfc" "$work/vit_tile.dtf" -o "$work/vit_tile.plan"
"$bin/dtf-run" "$work/vit_tile.plan" --steps 50 --log-every 50 --threads 2 > "$work/vit_tile.log" 2>&1 ||
  { tail -20 "$work/vit_tile.log" >&2; fail "dtf-run of the ViT with tile failed"; }
want=$(grep -o '^step 50/[0-9]* *loss [0-9.]*' "$work/vit.log" | sed 's|/[0-9]*||')
got=$(grep -o '^step 50/[0-9]* *loss [0-9.]*' "$work/vit_tile.log" | sed 's|/[0-9]*||')
[ -n "$want" ] && [ "$got" = "$want" ] || fail "the ViT with tile logged '$got', with broadcast_to '$want'"
echo "   ok: the ViT's class token by tile and by broadcast_to: the same $want"

# Checkpoints keep batch norm's moving statistics (non-trainable) and every
# new layer's variables, and a second run restores them and goes on.
"$bin/dtf-run" "$work/resnet.plan" --steps 20 --log-every 10 --threads 2 --model-dir "$work/ckpt" \
  > "$work/ckpt1.log" 2>&1 || { tail -20 "$work/ckpt1.log" >&2; fail "the resnet run with --model-dir failed"; }
for v in 'block1/bn1/moving_mean' 'block1/bn1/moving_variance' 'block1/bn1/gamma' 'stem1/conv/kernel'; do
  grep -aq "^tensor $v " "$work/ckpt/ckpt-20.index" || fail "ckpt-20 does not hold $v: $(grep -a '^tensor' "$work/ckpt/ckpt-20.index" | head -5)"
done
"$bin/dtf-run" "$work/resnet.plan" --steps 30 --log-every 10 --threads 2 --model-dir "$work/ckpt" \
  > "$work/ckpt2.log" 2>&1 || { tail -20 "$work/ckpt2.log" >&2; fail "the restored resnet run failed"; }
grep -qx "restored checkpoint ckpt-20 from $work/ckpt; continuing at step 20" "$work/ckpt2.log" ||
  fail "the second run did not restore ckpt-20: $(head -3 "$work/ckpt2.log")"
grep -q '^final: steps=30 ' "$work/ckpt2.log" || fail "the restored run did not reach step 30"
echo "   ok: ckpt-20 holds the moving statistics; restored and trained to 30"

for m in transformer:200:0.4 resnet:60:0.2; do
  IFS=: read -r name steps floor <<<"$m"
  cluster_json "$work/$name.json" 1 2
  timeout 300 "$bin/dtf-run" "$work/$name.plan" --cluster "$work/$name.json" --steps "$steps" \
    --log-every 10 --threads 1 > "$work/$name-cluster.log" 2>&1 ||
    { tail -30 "$work/$name-cluster.log" >&2; fail "the $name cluster run failed"; }
  grep -q 'the job finished' "$work/$name-cluster.log" || fail "$name: the launcher did not report the job finished"
  for w in worker.0 worker.1; do
    grep -q "^$w *| final: steps=" "$work/$name-cluster.log" ||
      fail "$name: $w did not finish: $(grep final "$work/$name-cluster.log")"
  done
  # The job trained: the chief's loss fell by 10% and it evaluates above
  # chance (0.1).
  python3 "$root/tests/e2e/check_training.py" "$work/$name-cluster.log" "$steps" "$floor" \
    "$name on 1 ps + 2 workers:" --task worker.0 --fall 0.1
done
echo "e2e: layer models OK"
