#!/usr/bin/env bash
# Exactly-once data (docs/elastic.md) on the counting model (counting.dtf.in: a
# row per example id, +1 per applied occurrence): after the job's 3 epochs
# every row must read 3 under --data exactly-once, whatever happened;
# under --data static the same run must NOT (so the check can fail).
#   async: 1 ps + 2 workers; worker.1 killed with kill -9 mid-epoch (the
#     launcher restarts it, ps 0 hands its leased batches out again), then,
#     once it is back, ps.0 killed with kill -9 (every ps back to the last
#     checkpoint, whose ledger says which batches its variables saw).
#   sync: 1 ps + 3 workers, replicas_to_aggregate = 2: each update drops a
#     backup worker's gradient, whose batch goes out again. The update
#     averages its 2 gradients and the learning rate is 2, so each applied
#     example adds 1 (the ps must say that no update averaged fewer).
#   scale: async, 3 worker slots launched with --workers 1, scaled to 3
#     mid-epoch 0 (worker.1 and worker.2 join and lease), then to 2 mid-epoch 1
#     (worker.2 leaves; its leases go out again at once) (docs/elastic.md).
#   ps: async, 2 workers and 2 ps slots launched with --ps 1, re-sharded
#     over 2 ps mid-epoch 0 (the table moves to ps.1) and back to 1
#     mid-epoch 1 (every task restarts from a checkpoint of the current
#     step, whose ledger comes along).
# Every checkpoint must hold at least the updates its name says (the chief
# saved sync checkpoints before the update it pushed into was applied: the
# last one missed that update's 2 batches), and with exactly-once data the
# last one all of the job's.
# usage: exactly_once.sh BIN_DIR WORK_DIR async|sync|scale|ps exactly-once|static
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
mode=$3 data=$4
rm -rf "$work" && mkdir -p "$work"
examples=12800 batch=16 epochs=3
per_epoch=$((examples / batch))
if [ "$mode" = sync ]; then
  workers=3 lr=2.0 steps=$((epochs * per_epoch / 2))
  update='sync(replicas_to_aggregate = 2, total_num_replicas = 3)'
elif [ "$mode" = scale ]; then
  workers=3 lr=1.0 steps=$((epochs * per_epoch))
  update=async
else
  workers=2 lr=1.0 steps=$((epochs * per_epoch))
  update=async
fi
# Sync: a checkpoint every 10 steps, so that some come due when the chief's
# gradient is the first of its update (the case that was saved too early).
every=100
[ "$mode" = sync ] && every=10
scale=() split=4
[ "$mode" = scale ] && scale=(--workers 1)
# A worker holds no lease between its split's last push and its next lease
# (a pull in between): 1 step in `split`. The async kill wants one that
# holds a split, so its splits are long.
[ "$mode" = async ] && split=16
python3 -c "
print('x,id')
for i in range($examples): print(f'0,{i}')" > "$work/ids.csv"
sed -e "s|DATA|$work/ids.csv|" -e "s/LR/$lr/" -e "s/STEPS/$steps/" \
  -e "s/EXAMPLES/$examples/" -e "s/update = async/update = $update/" \
  -e "s/batch = 16/batch = $batch\n    checkpoint every $every steps keep 200/" \
  "$root/tests/e2e/counting.dtf.in" > "$work/counting.dtf"
# Over 2 ps the table goes to ps.1 (greedy: ps.0 holds the global step), so
# that the re-shards move it from ps.0 to ps.1 and back.
[ "$mode" = ps ] && sed -i 's/ps = round_robin/ps = greedy/' "$work/counting.dtf"
"$bin/dtfc" "$work/counting.dtf" -o "$work/counting.plan"
nps=1
[ "$mode" = ps ] && nps=2 scale=(--ps 1)
cluster_json "$work/c.json" "$nps" "$workers"
log=$work/run.log
# The loop below reads it before the launcher may have opened it (set -e).
: > "$log"
# Sync with several ps tasks is refused: each would average its own choice
# of gradients, one that ps 0 dropped among them (docs/elastic.md).
if [ "$mode" = sync ] && [ "$data" = exactly-once ]; then
  cluster_json "$work/c2.json" 2 "$workers"
  rc=0
  timeout 60 "$bin/dtf-run" "$work/counting.plan" --cluster "$work/c2.json" --threads 1 \
    --data exactly-once > "$work/two-ps.log" 2>&1 || rc=$?
  [ "$rc" != 0 ] || fail "--data exactly-once with update = sync and 2 ps tasks was accepted"
  grep -q "update = sync needs one ps task, not 2" "$work/two-ps.log" ||
    fail "the 2-ps sync refusal does not say why: $(grep -m3 error "$work/two-ps.log")"
  echo "   2 ps tasks: exit $rc: $(grep -m1 -o 'update = sync needs one ps task, not 2' "$work/two-ps.log")"
fi
timeout 120 "$bin/dtf-run" "$work/counting.plan" --cluster "$work/c.json" --threads 1 \
  --log-every 20 --model-dir "$work/model" --data "$data" --split-batches "$split" "${scale[@]}" > "$log" 2>&1 &
launcher=$!
trap 'kill "$launcher" 2>/dev/null || true; wait "$launcher" 2>/dev/null || true' EXIT
pid_of() { sed -n "s/^\[launcher\] $1 started (pid \([0-9]*\).*/\1/p" "$log" | tail -1; }
step_now() { sed -n 's/^worker.0 *| step \([0-9]*\)\/.*/\1/p' "$log" | tail -1; }
killed_worker=no killed_ps=no
if [ "$mode" = async ]; then
  # Mid-epoch 0: worker.1; mid-epoch 1, after a checkpoint: ps.0.
  for _ in $(seq 1 1500); do
    kill -0 "$launcher" 2>/dev/null || break
    s=$(step_now)
    # worker.1 holds a split while it trains (but in 1 step of $split).
    if [ "$killed_worker" = no ] && grep -q '^worker.1 *| step ' "$log"; then
      s=$(step_now)
      kill -9 "$(pid_of worker.1)" && killed_worker=yes
      echo "   step $s: kill -9 worker.1"
      [ "${s:-0}" -lt "$per_epoch" ] || fail "worker.1 was killed after epoch 0 (step $s); make the data larger"
    fi
    # Once worker.1 is back and trains (its first lease handed its dead
    # self's split out again) and a checkpoint came after (it holds the
    # re-send counts the restored ps 0 goes on from).
    if [ "$killed_ps" = no ] && awk '/^worker.1 *\|   program:/ { n++ }
        n >= 2 && /^worker.1 *\| step / { trained = 1 }
        trained && /saved checkpoint/ { saved = 1 } END { exit !saved }' "$log"; then
      s=$(step_now)
      kill -9 "$(pid_of ps.0)" && killed_ps=yes
      echo "   step $s: kill -9 ps.0"
    fi
    sleep 0.02
  done
fi
if [ "$mode" = scale ] || [ "$mode" = ps ]; then
  # Up in epoch 0, down in epoch 1 (a ps re-shard down once the one up is
  # done: a request during a re-shard is refused).
  up=worker=3 down=worker=2
  [ "$mode" = ps ] && up=ps=2 down=ps=1
  up_done() { [ "$mode" != ps ] || grep -q '^\[launcher\] ps scaled 1 -> 2' "$log"; }
  ctl() { "$bin/dtf-run" ctl --cluster "$work/c.json" scale "$1" > /dev/null; }
  scaled=no
  for _ in $(seq 1 3000); do
    kill -0 "$launcher" 2>/dev/null || break
    s=$(step_now)
    if [ "$scaled" = no ] && [ "${s:-0}" -ge 100 ]; then
      ctl "$up" && scaled=up && echo "   step $s: scale $up"
    fi
    if [ "$scaled" = up ] && up_done && [ "${s:-0}" -ge $((per_epoch + 100)) ]; then
      ctl "$down" && scaled=down && echo "   step $s: scale $down"
      [ "$s" -lt $((2 * per_epoch)) ] || fail "scaled down after epoch 1 (step $s); make the data larger"
    fi
    sleep 0.02
  done
  [ "$scaled" = down ] || fail "the job ended before it was scaled up and down ($scaled)"
fi
set +e
wait "$launcher"
code=$?
set -e
[ "$code" = 0 ] || { tail -30 "$log" >&2; fail "the launcher exited $code"; }
if [ "$mode" = async ]; then
  [ "$killed_worker" = yes ] && [ "$killed_ps" = yes ] ||
    fail "the job ended before its kills (worker.1: $killed_worker, ps.0: $killed_ps); make it longer"
fi
python3 - "$root/tests/e2e" "$work/model" "$log" "$examples" "$epochs" "$data" "$mode" "$steps" <<'PY'
import glob, re, sys
sys.path.insert(0, sys.argv[1])
from ckpt_diff import read
model, log, examples, epochs, data, mode, steps = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7], int(sys.argv[8])
saved = {}
for p in glob.glob(model + "/ckpt-*.data-0-of-*"):
    saved[int(re.search(r"ckpt-(\d+)\.", p).group(1))] = p
holds = {s: read(p)[("global_step", 0)][3][0] for s, p in saved.items()}
last = max(saved)
print(f"   {len(saved)} checkpoints, the last ckpt-{last} at global step {holds[last]}")
short = {s: g for s, g in holds.items() if g < s}
if short:
    sys.exit(f"e2e: FAIL: checkpoints hold fewer updates than their names say (name: global step): {dict(sorted(short.items()))}")
if data != "static" and (last != steps or holds[last] != steps):
    sys.exit(f"e2e: FAIL: the last checkpoint is ckpt-{last} at global step {holds[last]}, not {steps}")
counts = read(saved[last])[("counts", 0)][3]
assert len(counts) == examples, len(counts)
hist = {}
for c in counts:
    hist[c] = hist.get(c, 0) + 1
exact = hist == {float(epochs): examples}
lines = open(log).read().splitlines()
epoch_lines = [l for l in lines if "data epoch" in l]
for l in epoch_lines:
    print("   " + l)
print(f"   {data}: rows by count {dict(sorted(hist.items()))} (want every one of {examples} at {epochs})")
if data == "static":
    if exact:
        sys.exit("e2e: FAIL: static sharding counted every example exactly once: the test cannot tell")
    sys.exit(0)
bad = []
if not exact:
    bad.append("not every example was applied exactly once per epoch")
if len(epoch_lines) < epochs:
    bad.append(f"ps.0 reported {len(epoch_lines)} finished epochs, not {epochs}")
resent = lambda what: sum(int(m.group(1)) for l in epoch_lines for m in [re.search(r"(\d+) " + what, l)] if m)
if mode == "sync" and resent("of dropped gradients") == 0:
    bad.append("no dropped gradient's batch was re-sent (did the backup worker push?)")
if mode == "sync" and any("of them fewer" in l for l in lines):
    bad.append("an update averaged fewer than 2 gradients (its examples added more than 1): " + next(l for l in lines if "of them fewer" in l))
if mode == "scale":
    for w in ("worker.1", "worker.2"):
        if not any(l.startswith(w) and "step " in l for l in lines):
            bad.append(f"{w} did not train after the scale-up")
    if not any("worker.2 left the job (scaled down)" in l for l in lines):
        bad.append("worker.2 did not leave the job")
if mode == "ps":
    scaled = [l for l in lines if l.startswith("[launcher] ps scaled")]
    for l in scaled:
        print("   " + l)
    if len(scaled) != 2:
        bad.append(f"the launcher did not say both re-shards: {scaled}")
    if not any(re.match(r"ps\.1 *\| serving on .*; holds counts;", l) for l in lines):
        bad.append("ps.1 did not run holding the table")
if mode == "async":
    # worker.1 holds no lease in 1 step of a split (it pushed its last batch
    # and has not leased the next): then nothing of it is re-sent, and the
    # counts above are what shows exactly-once. Said, not failed.
    if resent("of dead workers") == 0:
        print("   note: no batch of the killed worker was re-sent: it held no lease when it was killed (1 step in a split), or the count was lost with ps.0 (docs/elastic.md)")
    if not any("restored checkpoint" in l for l in lines):
        bad.append("the chief did not restore a checkpoint after ps.0 was killed")
if bad:
    sys.exit("e2e: FAIL: " + "\n  ".join(bad))
PY
echo "e2e: exactly-once $mode ($data) OK"
