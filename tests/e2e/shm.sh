#!/usr/bin/env bash
# Shared memory between the tasks of one host (--same-host shm, the
# default; docs/protocol.md, "Shared memory") on a real cluster of 1 ps + 2
# workers, mutual TLS and Unix sockets as the launcher runs them:
# - the MLP of models/mlp.dtf, async (Adam 1e-3), 200 steps: trains (loss
#   down by 15%, final accuracy above 0.5) and the ps says that every pull
#   and push went through shared memory (the line after its summary counts
#   them: a push per update, at least as many pulls), each worker that most
#   of its pushed values were made in place; no region is left in
#   the region directory once the job is done;
# - the same model in sync (replicas_to_aggregate = 2 of 2 workers, seed 1),
#   60 steps, with shared memory and with --same-host unix: the two
#   checkpoints are the same bytes (2 gradients per update, summed in either
#   order, give the same float);
# - sparse rows: the embedding model of embedding_small.dtf on 2 ps + 1
#   worker, async, leaves the same checkpoint bytes with and without (both
#   ps tasks take its sparse pushes through shared memory);
# - a region directory others may enter (mode 0777) is not used: every task
#   says so, the job trains over the sockets, nothing is made in it;
# - --same-host with another value is refused (exit 2, naming the choices).
# usage: shm.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
rm -rf "$work" && mkdir -p "$work"
export DTF_SHM_DIR=$work/shm # the regions, to see them go
cluster_json "$work/c1x2.json" 1 2

sed -e 's/steps = 10000/steps = 200/' -e 's/every = 2000/every = 200/' \
    -e 's/update = sync(replicas_to_aggregate = 2, total_num_replicas = 3)/update = async/' \
    -e '/optimizer = momentum/,/momentum = 0.9)/c\    optimizer = adam(learning_rate = 0.001)' \
    -e '/checkpoint every/d' "$root/models/mlp.dtf" > "$work/async.dtf"
sed -e 's/steps = 10000/steps = 60/' -e 's/every = 2000/every = 60/' \
    -e 's/total_num_replicas = 3/total_num_replicas = 2/' "$root/models/mlp.dtf" > "$work/sync.dtf"
grep -q 'optimizer = adam' "$work/async.dtf" && grep -q 'total_num_replicas = 2' "$work/sync.dtf" ||
  fail "models/mlp.dtf changed: the test's edits no longer apply"
"$bin/dtfc" "$work/async.dtf" -o "$work/async.plan"
"$bin/dtfc" "$work/sync.dtf" -o "$work/sync.plan"

run() { # run NAME PLAN [dtf-run flags...]
  local name=$1 plan=$2; shift 2
  echo "== $name: dtf-run $(basename "$plan") --cluster c1x2.json $*"
  timeout 240 "$bin/dtf-run" "$plan" --cluster "$work/c1x2.json" --log-every 10 \
    --model-dir "$work/$name-dir" "$@" > "$work/$name.log" 2>&1 ||
    { tail -20 "$work/$name.log" >&2; fail "$name: the job failed"; }
}

run async "$work/async.plan"
# The chief trained: its loss fell by 15% (by the last progress line or its
# last evaluation) and it evaluates above 0.5.
python3 "$root/tests/e2e/check_training.py" "$work/async.log" 0 0.5 "async:" --task worker.0 --fall 0.15 ||
  fail "async with shared memory: the chief did not train"
python3 - "$work/async.log" <<'PY' || fail "async with shared memory: see above"
import re, sys
text = open(sys.argv[1]).read()
bad = []
m = re.search(r"^ps\.0 *\| (\d+) updates applied;.*\nps\.0 *\| through shared memory: (\d+) pulls, (\d+) pushes \((\d+) regions mapped at the end\); (\d+) pushed values read where they lay",
              text, re.M)
if not m:
    bad.append("the ps did not say it moved tensors through shared memory")
else:
    updates, pulls, pushes, mapped, in_slot = map(int, m.groups())
    print(f"   ps.0: {updates} updates; through shared memory {pulls} pulls, {pushes} pushes, "
          f"{mapped} regions mapped at the end; {in_slot} pushed values read in their slot")
    # Async: every push's gradients are read where the worker made them.
    if in_slot < pushes:
        bad.append(f"the async ps read only {in_slot} values in place for {pushes} pushes")
    if pushes != updates or updates < 200:
        bad.append(f"{pushes} pushes through shared memory for {updates} updates (all of them should)")
    if pulls < updates:
        bad.append(f"only {pulls} pulls through shared memory for {updates} updates")
# Each worker's gradients are made in its push region after the first push
# (docs/protocol.md, "The gradients' own region"): all but the first step's
# and those of ops that keep their own buffers are pushed with no copy.
for task in ("worker.0", "worker.1"):
    m = re.search(rf"^{task} *\| pushed through shared memory: (\d+) values, (\d+) of them made in place",
                  text, re.M)
    if not m:
        bad.append(f"{task} did not say how its pushes went through shared memory")
        continue
    values, in_place = map(int, m.groups())
    print(f"   {task}: {values} values pushed through shared memory, {in_place} made in place")
    if in_place < values // 2:
        bad.append(f"{task}: only {in_place} of {values} pushed values made in place")
if "go through the socket" in text or "no shared memory" in text:
    bad.append("a task fell back to the socket: " +
               next(l for l in text.splitlines() if "socket" in l and "shared" in l))
if bad:
    sys.exit("\n".join(bad))
PY
left=$(find "$DTF_SHM_DIR" -name 'dtf-shm-*' | wc -l)
[ "$left" -eq 0 ] || fail "$left regions left in $DTF_SHM_DIR after the job: $(ls "$DTF_SHM_DIR")"
[ "$(stat -c %a "$DTF_SHM_DIR")" = 700 ] || fail "$DTF_SHM_DIR is not mode 0700"
echo "   ok: no region left; $DTF_SHM_DIR is mode 0700"

run sync-shm "$work/sync.plan"
run sync-unix "$work/sync.plan" --same-host unix
grep -q "through shared memory" "$work/sync-shm.log" || fail "sync-shm: the ps moved nothing through shared memory"
! grep -q "through shared memory" "$work/sync-unix.log" || fail "sync-unix: --same-host unix still used shared memory"
a=$(ls "$work"/sync-shm-dir/ckpt-*.data-* | sort -V | tail -1)
b=$(ls "$work"/sync-unix-dir/ckpt-*.data-* | sort -V | tail -1)
[ "$(basename "$a")" = "$(basename "$b")" ] || fail "the runs' last checkpoints differ: $(basename "$a") and $(basename "$b")"
cmp "$a" "$b" || fail "the sync checkpoints differ with and without shared memory: $(python3 "$root/tests/e2e/ckpt_diff.py" "$a" "$b")"
echo "   ok: $(basename "$a") is the same $(stat -c %s "$a") bytes with shared memory and with --same-host unix"

# Sparse rows too: the embedding model of tests/e2e/embedding_small.dtf on
# 2 ps (its table in 2 shards) + 1 worker (one pusher: the updates come in
# one order), async, with and without shared memory: the same checkpoint.
cluster_json "$work/c2x1.json" 2 1
"$bin/dtfc" "$root/tests/e2e/embedding_small.dtf" -o "$work/emb.plan"
for v in shm unix; do
  echo "== emb-$v: dtf-run emb.plan --cluster c2x1.json --same-host $v"
  timeout 120 "$bin/dtf-run" "$work/emb.plan" --cluster "$work/c2x1.json" --same-host $v \
    --model-dir "$work/emb-$v-dir" > "$work/emb-$v.log" 2>&1 ||
    { tail -20 "$work/emb-$v.log" >&2; fail "emb-$v: the job failed"; }
done
[ "$(grep -c "embedding rows: .* [1-9][0-9]* updated" "$work/emb-shm.log")" -eq 2 ] &&
  [ "$(grep -c "through shared memory: [1-9][0-9]* pulls, [1-9][0-9]* pushes" "$work/emb-shm.log")" -eq 2 ] ||
  fail "emb-shm: not both ps tasks took sparse pushes through shared memory: $(grep "updates applied\|shared memory" "$work/emb-shm.log")"
for f in "$work"/emb-shm-dir/ckpt-*.data-*; do
  cmp "$f" "$work/emb-unix-dir/$(basename "$f")" ||
    fail "$(basename "$f") differs with and without shared memory: $(python3 "$root/tests/e2e/ckpt_diff.py" "$f" "$work/emb-unix-dir/$(basename "$f")")"
done
echo "   ok: $(ls "$work"/emb-shm-dir/ckpt-*.data-* | wc -l) checkpoint shards the same bytes; both ps tasks took sparse rows through shared memory"

# A region directory others may enter is not used: each task says so once,
# and the tensors go through the sockets.
mkdir -m 0777 "$work/open"
DTF_SHM_DIR=$work/open run open-dir "$work/sync.plan"
said=$(grep -c "the shared-memory directory $work/open is not this user's alone.*go through the Unix sockets instead" "$work/open-dir.log" || true)
[ "$said" -eq 3 ] || fail "open-dir: $said of 3 tasks said they do not use $work/open: $(grep -m3 shared "$work/open-dir.log")"
! grep -q "through shared memory" "$work/open-dir.log" || fail "open-dir: the ps still used shared memory"
[ -z "$(ls -A "$work/open")" ] || fail "open-dir: regions were made in $work/open: $(ls "$work/open")"
echo "   ok: $said tasks said $work/open is not this user's alone; the tensors went through the sockets"

"$bin/dtf-run" certs --cluster "$work/c1x2.json" --out "$work/certs" > /dev/null
refused same-host-bogus "--same-host expects shm, unix or tcp, got 'ram'" \
  "$bin/dtf-run" "$work/sync.plan" --cluster "$work/c1x2.json" --job worker --task 1 \
  --tls-dir "$work/certs" --same-host ram
echo "e2e: shared memory ok"
