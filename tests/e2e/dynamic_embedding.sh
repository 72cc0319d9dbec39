#!/usr/bin/env bash
# embedding(vocab = dynamic): tables without a fixed vocabulary.
#   1. One process: rows are made (after 2 sightings) and evicted (after 40
#      unused steps) and the table holds far fewer rows than its capacity;
#      a second run restores the checkpoint's live rows and goes on.
#   2. 2 ps + 2 workers, sync: each ps holds one shard (its ids by hash),
#      makes and evicts its own rows, moves only looked-up and updated rows;
#      the job's checkpoint restores onto 1 ps (holding both shards).
#   3. The evaluator task evaluates the job's checkpoints (their live rows).
#   4. In-graph replication cannot look a dynamic table up on its ps: the
#      plan is refused with the reason.
# usage: dynamic_embedding.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
rm -rf "$work" && mkdir -p "$work"
model="$root/tests/e2e/dynamic_embedding.dtf"
"$bin/dtfc" "$model" -o "$work/dyn.plan"
sed -e 's/^    batch = 32$/    update = sync(replicas_to_aggregate = 2)\n    batch = 32/' "$model" > "$work/sync.dtf"
"$bin/dtfc" "$work/sync.dtf" -o "$work/sync.plan"

# table_line LOG: the "N of C rows (M made, E evicted)" figures of the last
# dynamic table line of LOG for shard/table NAME.
rows_of() { # rows_of LOG NAME -> "live capacity made evicted"
  python3 - "$1" "$2" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
found = re.findall(re.escape(sys.argv[2]) + r": (\d+) of (\d+) rows \((\d+) made, (\d+) evicted", text)
if not found:
    sys.exit(f"e2e: FAIL: no dynamic table line for {sys.argv[2]} in {sys.argv[1]}")
print(*found[-1])
PY
}

# 1. One process, then a restore.
timeout 300 "$bin/dtf-run" "$work/dyn.plan" --model-dir "$work/one" --threads 1 > "$work/one.log" 2>&1 ||
  { tail -20 "$work/one.log" >&2; fail "the one-process run failed"; }
read -r live cap made evicted < <(rows_of "$work/one.log" cat/embeddings)
echo "one process: $live of $cap rows live, $made made, $evicted evicted"
[ "$cap" -eq 6000 ] || fail "capacity $cap, not 6000"
[ "$live" -gt 100 ] && [ "$live" -lt 6000 ] || fail "$live rows live"
[ "$evicted" -gt 0 ] || fail "no row was evicted"
[ "$made" -eq $((live + evicted)) ] || fail "$made made != $live live + $evicted evicted"
timeout 300 "$bin/dtf-run" "$work/dyn.plan" --model-dir "$work/one" --threads 1 --steps 180 > "$work/one2.log" 2>&1 ||
  { tail -20 "$work/one2.log" >&2; fail "the restored run failed"; }
grep -q "restored checkpoint ckpt-120" "$work/one2.log" || fail "the second run did not restore ckpt-120"
read -r live2 _ made2 evicted2 < <(rows_of "$work/one2.log" cat/embeddings)
echo "restored: $live2 rows live after 60 more steps ($made2 made, $evicted2 evicted since)"
[ "$live2" -eq $((live + made2 - evicted2)) ] ||
  fail "after the restore $live2 rows live, not the $live restored + $made2 made - $evicted2 evicted"

# --predict runs the inference program, which does not read the labels y:
# the source's labels go unread (not to the last input, ids).
timeout 120 "$bin/dtf-run" "$work/dyn.plan" --predict data --model-dir "$work/one" \
  -o "$work/pred.csv" > "$work/pred.log" 2>&1 || { cat "$work/pred.log" >&2; fail "--predict data failed"; }
[ "$(wc -l < "$work/pred.csv")" -eq 4001 ] || fail "--predict data wrote $(wc -l < "$work/pred.csv") lines, not 4001"
[ "$(tail -n +2 "$work/pred.csv" | sort -u | wc -l)" -gt 1 ] || fail "--predict data: every example got the same logits"
printf 'a,b,c,d,y\n1,2,3,4,0\n5,6,7,8,1\n9,10,11,12,0\n' > "$work/pred-in.csv"
timeout 120 "$bin/dtf-run" "$work/dyn.plan" --predict "csv:$work/pred-in.csv" --model-dir "$work/one" \
  -o "$work/pred2.csv" > "$work/pred2.log" 2>&1 || { cat "$work/pred2.log" >&2; fail "--predict csv failed"; }
[ "$(wc -l < "$work/pred2.csv")" -eq 4 ] || fail "--predict csv wrote $(wc -l < "$work/pred2.csv") lines, not 4"
echo "--predict: data and csv sources without a label input: ok"

# 2. 2 ps + 2 workers, sync.
cluster_json "$work/c22.json" 2 2
timeout 300 "$bin/dtf-run" "$work/sync.plan" --cluster "$work/c22.json" --threads 1 \
  --model-dir "$work/cluster" > "$work/cluster.log" 2>&1 ||
  { tail -30 "$work/cluster.log" >&2; fail "the cluster run failed"; }
grep -q 'the job finished' "$work/cluster.log" || fail "the cluster job did not finish"
total=0
for k in 0 1; do
  read -r live cap made evicted < <(rows_of "$work/cluster.log" "cat/embeddings/part_$k")
  echo "ps.$k: shard $k: $live of $cap rows live, $made made, $evicted evicted"
  [ "$live" -gt 0 ] && [ "$evicted" -gt 0 ] || fail "shard $k made or evicted no rows"
  total=$((total + live))
done
python3 - "$work/cluster.log" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
for ps in (0, 1):
    m = re.search(rf"ps\.{ps} +\| (\d+) updates applied.*?tensor bytes received (\d+), sent (\d+); "
                  r"embedding rows: (\d+) looked up in (\d+) lookups, (\d+) updated", text)
    if not m:
        sys.exit(f"e2e: FAIL: no byte counts in ps.{ps}'s summary")
    updates, rin, rout, looked, lookups, updated = map(int, m.groups())
    table = 3000 * 8 * 4  # its shard's capacity in bytes
    # Rows of 8 floats looked up, and the dense layer's pulls (66 floats
    # per pull, on ps.1 only, with round_robin), nothing like the shard.
    print(f"ps.{ps}: {updates} updates, {looked} rows looked up in {lookups} lookups "
          f"({rout} bytes sent), {updated} rows updated ({rin} bytes received); "
          f"the shard is {table} bytes")
    if looked == 0 or updated == 0:
        sys.exit(f"e2e: FAIL: ps.{ps} looked up or updated no rows")
    if rout > looked * 32 + lookups * 66 * 4 * 2 + 4096:
        sys.exit(f"e2e: FAIL: ps.{ps} sent {rout} bytes for {looked} rows")
    if rout / updates > table / 10:
        sys.exit(f"e2e: FAIL: ps.{ps} sent {rout / updates:.0f} bytes per update")
PY
echo "2 ps + 2 workers: $total rows live over both shards"
# Onto 1 ps: it holds both shards and restores both.
cluster_json "$work/c12.json" 1 2
timeout 300 "$bin/dtf-run" "$work/sync.plan" --cluster "$work/c12.json" --threads 1 \
  --model-dir "$work/cluster" --steps 150 > "$work/cluster2.log" 2>&1 ||
  { tail -30 "$work/cluster2.log" >&2; fail "the restore onto 1 ps failed"; }
grep -q "from checkpoint ckpt-120, read by this ps" "$work/cluster2.log" ||
  fail "the ps did not read the checkpoint itself"
for k in 0 1; do
  read -r live _ made evicted < <(rows_of "$work/cluster2.log" "cat/embeddings/part_$k")
  echo "1 ps, shard $k: $live rows live after the restore and 30 more updates ($made made, $evicted evicted)"
  [ "$live" -gt 0 ] || fail "shard $k holds no rows after the restore"
done

# 3. The evaluator task reads the job's checkpoints, the table's live rows
#    among them (1 ps + 2 workers + an evaluator).
sed -e 's/^    data = synthetic(examples = 4000)$/    data = synthetic(examples = 4000)\n    eval = synthetic(examples = 500), every = 60/' \
  "$model" > "$work/eval.dtf"
"$bin/dtfc" "$work/eval.dtf" -o "$work/eval.plan"
python3 - "$work/cev.json" <<'PY'
import json, socket, sys
socks, addr = [], []
for _ in range(4):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
    addr.append(f"127.0.0.1:{s.getsockname()[1]}")
json.dump({"ps": addr[:1], "worker": addr[1:3], "evaluator": addr[3:]}, open(sys.argv[1], "w"))
PY
timeout 300 "$bin/dtf-run" "$work/eval.plan" --cluster "$work/cev.json" --threads 1 \
  --model-dir "$work/evaluated" > "$work/eval.log" 2>&1 ||
  { tail -30 "$work/eval.log" >&2; fail "the job with an evaluator failed"; }
grep -q "evaluator.0 *| evaluator: evaluated the last step's checkpoint; done" "$work/eval.log" ||
  { grep evaluator "$work/eval.log" >&2; fail "the evaluator did not evaluate the last checkpoint"; }
echo "evaluator: $(grep -o 'evaluator: ckpt-[0-9]*  step [0-9]*  loss [0-9.]*' "$work/eval.log" | tail -1)"

# 4. In-graph replication is refused.
sed -e 's/^    batch = 32$/    replication = in_graph\n    batch = 32/' "$model" > "$work/ingraph.dtf"
"$bin/dtfc" "$work/ingraph.dtf" -o "$work/ingraph.plan"
cluster_json "$work/c11.json" 1 1
if timeout 120 "$bin/dtf-run" "$work/ingraph.plan" --cluster "$work/c11.json" --threads 1 \
  > "$work/ingraph.log" 2>&1; then
  fail "in-graph training of a dynamic table was not refused"
fi
grep -q "the dynamic table 'cat/embeddings' is looked up on the ps that holds it" "$work/ingraph.log" ||
  { tail -5 "$work/ingraph.log" >&2; fail "in-graph: not the expected refusal"; }
echo "in-graph: refused: $(grep -o "the dynamic table.*holds it" "$work/ingraph.log" | head -1)"
echo "e2e: dynamic_embedding: OK"
