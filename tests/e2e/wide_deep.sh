#!/usr/bin/env bash
# models/wide_deep.dtf: FTRL for the wide part (a table only gathered),
# Adagrad for the deep part, one model (`optimizer for linear = ftrl(...)`).
# - dtfc's placement report names each variable's optimizer;
# - in one process the sparse FTRL update of the zero-initialized table
#   leaves the very same checkpoint bytes as the dense update (the model
#   forced dense by a clip norm too large to clip), as docs/language.md says
#   it does for a zero start without l2_shrinkage;
# - on 1 ps + 2 workers (the tables looked up on the ps) the job trains,
#   and its checkpoint holds FTRL's slots (Ftrl, Ftrl_1) for the wide table
#   and Adagrad's for the deep variables, none of the other's; every row of
#   the wide table is what FTRL derives from its slots (l1 = l2 = 0:
#   var = -linear * lr / sqrt(accum)), so the ps applied FTRL there.
# usage: wide_deep.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
rm -rf "$work" && mkdir -p "$work"
model="$root/models/wide_deep.dtf"
sed 's/^    batch = 128/    clip_gradients = global_norm(1e30)\n    batch = 128/' "$model" > "$work/dense.dtf"
"$bin/dtfc" "$model" -o "$work/sparse.plan"
"$bin/dtfc" "$work/dense.dtf" -o "$work/dense.plan"

"$bin/dtfc" "$model" --placement-report --ps 1 > "$work/report.txt"
grep -q '^    linear/embeddings  .*  updated by ftrl (optimizer for linear)$' "$work/report.txt" ||
  fail "the placement report does not say FTRL updates linear/embeddings: $(cat "$work/report.txt")"
grep -q '^    hidden1/kernel  .*  updated by adagrad$' "$work/report.txt" ||
  fail "the placement report does not say Adagrad updates hidden1/kernel"
"$bin/dtfc" "$model" --emit=train-mlir > "$work/train.mlir"
grep -q 'dtf.sparse_apply_ftrl @"linear/embeddings"' "$work/train.mlir" || fail "the wide table's FTRL update is not sparse"
"$bin/dtfc" "$work/dense.dtf" --emit=train-mlir > "$work/dense.mlir"
grep -q 'dtf.apply_ftrl @"linear/embeddings"' "$work/dense.mlir" || fail "with clipping the FTRL update should be dense"

for kind in sparse dense; do
  "$bin/dtf-run" "$work/$kind.plan" --steps 40 --threads 2 --model-dir "$work/$kind" > "$work/$kind.log" 2>&1 ||
    { tail -20 "$work/$kind.log" >&2; fail "dtf-run of the $kind plan failed"; }
  grep '^final:' "$work/$kind.log"
done
for f in ckpt-40.index ckpt-40.data-0-of-1; do
  [ -f "$work/sparse/$f" ] || fail "no $f (have: $(ls "$work/sparse"))"
  cmp "$work/sparse/$f" "$work/dense/$f" || fail "$f differs between the sparse and the dense FTRL update"
done
echo "   ok: sparse and dense FTRL updates left the same checkpoint bytes"

cluster_json "$work/cluster.json" 1 2
timeout 300 "$bin/dtf-run" "$work/sparse.plan" --cluster "$work/cluster.json" --steps 150 --threads 1 \
  --log-every 50 --model-dir "$work/cluster-model" > "$work/cluster.log" 2>&1 ||
  { tail -30 "$work/cluster.log" >&2; fail "the cluster run failed"; }
grep -q 'the job finished' "$work/cluster.log" || fail "the launcher did not report the job finished"
acc=$(sed -n 's/^worker.0 *| final: .*accuracy=\([0-9.]*\).*/\1/p' "$work/cluster.log")
python3 -c "import sys; sys.exit(0 if float('${acc:-0}') > 0.8 else 1)" ||
  fail "the chief's final accuracy is ${acc:-missing} (learnable data: expected above 0.8)"
echo "   ok: 1 ps + 2 workers, chief's final accuracy $acc"
index=$(ls "$work/cluster-model"/ckpt-*.index | sort -V | tail -1)
for t in linear/embeddings/Ftrl linear/embeddings/Ftrl_1 hidden1/kernel/Adagrad buckets_embedding/embeddings/Adagrad; do
  grep -q "^tensor $t " "$index" || fail "the checkpoint lacks $t"
done
for t in linear/embeddings/Adagrad hidden1/kernel/Ftrl; do
  ! grep -q "^tensor $t " "$index" || fail "the checkpoint holds $t"
done
python3 - "$root/tests/e2e" "${index%.index}.data-0-of-1" <<'PY' || fail "the wide table is not FTRL's (above)"
import math, sys
sys.path.insert(0, sys.argv[1])
from ckpt_diff import read
t = {name: values for (name, _), (_, _, _, values) in read(sys.argv[2]).items()}
var, accum, linear = (t["linear/embeddings" + s] for s in ("", "/Ftrl", "/Ftrl_1"))
trained = [i for i, a in enumerate(accum) if a > 0.1]
assert len(trained) > 400, f"only {len(trained)} elements of the wide table were updated"
for i in range(len(var)):
    want = -linear[i] * 0.2 / math.sqrt(accum[i])
    assert abs(var[i] - want) <= 1e-5 * max(1.0, abs(want)), (i, var[i], want)
print(f"   ok: {len(trained)} of {len(var)} wide weights updated, each FTRL's value of its slots")
PY
echo "e2e: wide & deep OK"
