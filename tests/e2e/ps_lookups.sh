#!/usr/bin/env bash
# Embedding tables looked up on the parameter servers (between-graph): a
# worker asks each shard for the rows of its step's unique ids and pushes
# (ids, rows) back, which the ps applies as a sparse update.
#   1. 1 ps + 1 worker, async: the checkpoint after 60 steps has the same
#      bytes as with DTF_EMBEDDING_LOOKUPS=pull (whole tables pulled and
#      dense gradients pushed, as before), and the ps's own byte counts are
#      exactly the unique rows times the row size (plus their int64 ids)
#      where the pull run moved the whole table every step.
#   2. 2 ps + 2 workers, sync over both replicas, the table in two shards
#      gathered twice per step: the same checkpoint bytes as the pull run
#      (each update averages both replicas' rows, by id).
#   3. In-graph replication (1 ps + 2 workers), and a model-parallel replica
#      whose stage 0 gathers the table, keep the dense way and train.
# usage: ps_lookups.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
rm -rf "$work" && mkdir -p "$work"
model="$root/tests/e2e/embedding_small.dtf"
# One gather of the table (partitions = 2), 60 steps.
sed -e '/^    b = mean/d' -e 's/concat(\[a, b\], axis = 1)/a/' -e 's/steps = 50/steps = 60/' \
  -e 's/^  input ctx: .*$//' "$model" > "$work/one.dtf"
# Both gathers, sync over 2 replicas.
sed -e 's/^    batch = 32/    update = sync(replicas_to_aggregate = 2)\n    batch = 32/' \
  -e 's/steps = 50/steps = 40/' "$model" > "$work/sync.dtf"
"$bin/dtfc" "$work/one.dtf" -o "$work/one.plan"
"$bin/dtfc" "$work/sync.dtf" -o "$work/sync.plan"

run() { # run NAME PLAN CLUSTER [ENV...]
  local name=$1 plan=$2 cluster=$3; shift 3
  env "$@" timeout 300 "$bin/dtf-run" "$plan" --cluster "$cluster" --threads 1 \
    --model-dir "$work/$name" > "$work/$name.log" 2>&1 ||
    { tail -30 "$work/$name.log" >&2; fail "the $name run failed"; }
  grep -q 'the job finished' "$work/$name.log" || fail "$name: the job did not finish"
}
same_checkpoint() { # same_checkpoint A B STEP
  local f n=0
  for f in "$work/$1"/ckpt-"$3".*; do
    [ -f "$f" ] || fail "$1: no checkpoint of step $3 (have: $(ls "$work/$1"))"
    cmp "$f" "$work/$2/$(basename "$f")" || fail "$(basename "$f") differs between $1 and $2"
    n=$((n + 1))
  done
  echo "$1 and $2: the same bytes in $n checkpoint files of step $3"
}

cluster_json "$work/c1.json" 1 1
run lookup1 "$work/one.plan" "$work/c1.json"
run pull1 "$work/one.plan" "$work/c1.json" DTF_EMBEDDING_LOOKUPS=pull
same_checkpoint lookup1 pull1 60
python3 - "$work" <<'PY'
import re, sys
work = sys.argv[1]
def counts(name):
    text = open(f"{work}/{name}.log").read()
    m = re.search(r"ps\.0 +\| (\d+) updates applied; tensor bytes received (\d+), sent (\d+)"
                  r"(?:; embedding rows: (\d+) looked up in (\d+) lookups, (\d+) updated)?", text)
    if not m:
        sys.exit(f"e2e: FAIL: {name}: no byte counts in the ps's summary")
    return [int(g or 0) for g in m.groups()]
steps, rin, rout, looked, lookups, updated = counts("lookup1")
psteps, pin, pout, *_ = counts("pull1")
table = 5000 * 16 * 4          # the whole table, what the pull run moved
row = 16 * 4                   # one row
batch, ids = 32, 6             # at most this many ids per step
assert steps == psteps == 60, (steps, psteps)
if not (0 < updated <= steps * batch * ids and 0 < looked <= steps * batch * ids):
    sys.exit(f"e2e: FAIL: {updated} rows updated, {looked} looked up in {steps} steps")
# Received: per update the dense variables' gradients (as in the pull run,
# without the table's), and per updated row its int64 id and its row.
dense_in = pin // steps - table
if pin != steps * (dense_in + table):
    sys.exit(f"e2e: FAIL: the pull run received {pin} bytes, not {steps} x (table + dense)")
if rin != steps * dense_in + updated * (8 + row):
    sys.exit(f"e2e: FAIL: received {rin} bytes; expected {steps} x {dense_in} (dense gradients) "
             f"+ {updated} rows x {8 + row}")
# Sent: the pulls of the dense variables (as many pulls as the pull run
# made, each without the table) and the looked-up rows.
dense_out = rout - looked * row
pulls, rest = divmod(pout - dense_out, table)
if rest != 0 or pulls < steps:
    sys.exit(f"e2e: FAIL: sent {rout} bytes with {looked} rows looked up; the pull run sent {pout}: "
             f"not whole tables apart ({pulls} tables and {rest} bytes)")
print(f"bytes per step: lookups received {rin / steps:.0f}, sent {rout / steps:.0f}; "
      f"whole tables received {pin / steps:.0f}, sent {pout / steps:.0f}; "
      f"{updated / steps:.0f} unique rows of {table // row} per step")
PY

cluster_json "$work/c2.json" 2 2
run lookup2 "$work/sync.plan" "$work/c2.json"
run pull2 "$work/sync.plan" "$work/c2.json" DTF_EMBEDDING_LOOKUPS=pull
grep -q 'embedding rows: [1-9][0-9]* looked up' "$work/lookup2.log" || fail "lookup2: no rows looked up"
! grep -q 'embedding rows' "$work/pull2.log" || fail "pull2 looked rows up"
same_checkpoint lookup2 pull2 40
sed -e 's/^    batch = 32/    replication = in_graph\n    batch = 32/' "$model" > "$work/ig.dtf"
"$bin/dtfc" "$work/ig.dtf" -o "$work/ig.plan"
cluster_json "$work/c3.json" 1 2
run ingraph "$work/ig.plan" "$work/c3.json"
grep -q '^worker.0 *| final: steps=50 ' "$work/ingraph.log" || fail "in-graph: the chief did not train 50 steps"
! grep -q 'embedding rows' "$work/ingraph.log" || fail "in-graph looked rows up on the ps"
cat > "$work/mp.dtf" <<'EOF'
model emb_mp {
  input ids: i64[B, 6]
  input y: i32[B]
  placement replicate(ps = round_robin)
  on "/job:worker/task:0" {
    a = mean(embedding(ids, vocab = 5000, dim = 16, partitions = 2) as words, axis = 1)
  }
  on "/job:worker/task:1" {
    h = dense(a, units = 16, activation = relu) as hidden
    logits = dense(h, units = 4) as out
    loss = mean(sparse_softmax_cross_entropy(logits, y))
  }
  train {
    optimizer = adagrad(learning_rate = 0.1)
    batch = 32
    steps = 50
    data = synthetic(examples = 2000)
  }
}
EOF
"$bin/dtfc" "$work/mp.dtf" -o "$work/mp.plan"
cluster_json "$work/c4.json" 1 2
run modelparallel "$work/mp.plan" "$work/c4.json"
grep -q '^worker.0 *| final: steps=50 ' "$work/modelparallel.log" || fail "model parallel: stage 0 did not train 50 steps"
grep -q '^worker.1 *| ran 50 steps as stage 1' "$work/modelparallel.log" || fail "model parallel: stage 1 did not run 50 steps"
! grep -q 'embedding rows' "$work/modelparallel.log" || fail "model parallel looked rows up on the ps"
echo "e2e: ps lookups OK"
