#!/usr/bin/env bash
# Sparse updates of an embedding table (tests/e2e/embedding_small.dtf, only
# gathered). In one process the plan updates the rows its gathers picked
# (dtf.sparse_apply_adagrad); the same model forced onto the dense path (a
# clip norm too large to clip, which needs the dense gradient) must leave the
# very same checkpoint bytes after 50 steps. Then 2 ps + 2 workers train it
# on 127.0.0.1 (the table in two shards; the gradient travels dense): every
# task ends with 0 and each ps applies every step's update to rows of its
# shard.
# usage: sparse_embedding.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
rm -rf "$work" && mkdir -p "$work"
model="$root/tests/e2e/embedding_small.dtf"
sed 's/^    batch = 32/    clip_gradients = global_norm(1e30)\n    batch = 32/' "$model" > "$work/dense.dtf"
"$bin/dtfc" "$model" -o "$work/sparse.plan"
"$bin/dtfc" "$work/dense.dtf" -o "$work/dense.plan"
"$bin/dtfc" "$model" --emit=train-mlir | grep -q 'dtf.sparse_apply_adagrad @"words/embeddings"' ||
  fail "the table's update is not sparse"
! "$bin/dtfc" "$work/dense.dtf" --emit=train-mlir | grep -q sparse_apply ||
  fail "with clipping the update should stay dense"

for kind in sparse dense; do
  "$bin/dtf-run" "$work/$kind.plan" --threads 2 --model-dir "$work/$kind" > "$work/$kind.log" 2>&1 ||
    { tail -20 "$work/$kind.log" >&2; fail "dtf-run of the $kind plan failed"; }
  grep '^final:' "$work/$kind.log"
done
for f in ckpt-50.index ckpt-50.data-0-of-1; do
  [ -f "$work/sparse/$f" ] || fail "no $f (have: $(ls "$work/sparse"))"
  cmp "$work/sparse/$f" "$work/dense/$f" || fail "$f differs between the sparse and the dense update"
done
echo "sparse and dense updates left the same checkpoint bytes"

cluster_json "$work/cluster.json" 2 2
timeout 300 "$bin/dtf-run" "$work/sparse.plan" --cluster "$work/cluster.json" --steps 100 --threads 1 \
  --log-every 10 --model-dir "$work/cluster-model" > "$work/cluster.log" 2>&1 ||
  { tail -30 "$work/cluster.log" >&2; fail "the cluster run failed"; }
grep -q 'the job finished' "$work/cluster.log" || fail "the launcher did not report the job finished"
for w in worker.0 worker.1; do
  grep -q "^$w *| final: steps=" "$work/cluster.log" || fail "$w did not finish: $(grep final "$work/cluster.log")"
done
# Both shards of the table were trained (the labels are random, so the loss
# says nothing): each ps applied every step's update and updated rows of its
# shard that the steps looked up.
for ps in ps.0 ps.1; do
  line=$(grep -E "^$ps *\| [0-9]+ updates applied" "$work/cluster.log" | tail -1)
  applied=$(sed -n 's/.*| \([0-9]*\) updates applied.*/\1/p' <<<"$line")
  updated=$(sed -n 's/.* \([0-9]*\) updated$/\1/p' <<<"$line")
  [ "${applied:-0}" -ge 100 ] && [ "${updated:-0}" -ge 1000 ] ||
    fail "$ps did not train its shard: '${line:-no summary}'"
  echo "   ok: $line"
done
# Async: the last pushes of both workers may both count (ckpt-100 or 101).
last=$(ls "$work/cluster-model" | sed -n 's/^ckpt-\([0-9]*\)\.index$/\1/p' | sort -n | tail -1)
[ -n "$last" ] && [ "$last" -ge 100 ] ||
  fail "no checkpoint of global step 100 or later (have: $(ls "$work/cluster-model"))"
echo "e2e: sparse embedding OK"
