#!/usr/bin/env bash
# kill -9 of a parameter server that holds a shard of a large embedding table
# (600,000 x 32 f32 in 2 shards: 77 MB and as much of Adagrad accumulators
# per ps), looked up on the ps by 1 worker, with a checkpoint every 100
# steps. The launcher restarts the ps; the chief sets every ps back to the
# last checkpoint, which each ps reads itself from the model directory
# (straight into its variables), and the job finishes its steps. Each ps's
# peak memory stays near what it holds (the table's rows were never made
# whole on it, nor copied to checkpoint them).
# usage: ps_lookups_kill.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
rm -rf "$work" && mkdir -p "$work"
steps=400
sed -e '/^    b = mean/d' -e 's/concat(\[a, b\], axis = 1)/a/' -e '/^  input ctx: /d' \
  -e 's/vocab = 5000, dim = 16, partitions = 2/vocab = 600000, dim = 32, partitions = 2/' \
  -e "s/steps = 50/steps = $steps\n    checkpoint every 100 steps keep 2/" \
  -e 's/synthetic(examples = 2000)/synthetic(examples = 20000)/' \
  "$root/tests/e2e/embedding_small.dtf" > "$work/big.dtf"
grep -q 'vocab = 600000' "$work/big.dtf" || fail "the model edit did not apply"
"$bin/dtfc" "$work/big.dtf" -o "$work/big.plan"
cluster_json "$work/c.json" 2 1
log=$work/run.log
timeout 600 "$bin/dtf-run" "$work/big.plan" --cluster "$work/c.json" --threads 1 --log-every 20 \
  --model-dir "$work/model" > "$log" 2>&1 &
launcher=$!
# The job stops with this script, however it ends.
trap 'kill "$launcher" 2>/dev/null || true; wait "$launcher" 2>/dev/null || true' EXIT
pid_of() { sed -n "s/^\[launcher\] $1 started (pid \([0-9]*\).*/\1/p" "$log" | tail -1; }
step_now() { sed -n 's/^worker.0 *| step \([0-9]*\)\/.*/\1/p' "$log" | tail -1; }
# Peak resident memory (VmHWM, kB) of a task's current process.
hwm() { local v; v=$(sed -n "s/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$(pid_of "$1")/status" 2>/dev/null); echo "${v:-0}"; }
peak0=0 peak1=0 killed=no
for _ in $(seq 1 3000); do
  kill -0 "$launcher" 2>/dev/null || break
  s=$(step_now)
  if [ "$killed" = no ]; then
    p=$(hwm ps.0); [ "$p" -gt "$peak0" ] && peak0=$p
    p=$(hwm ps.1); [ "$p" -gt "$peak1" ] && peak1=$p
  fi
  if [ "$killed" = no ] && [ -n "$s" ] && [ "$s" -ge 250 ]; then
    pid=$(pid_of ps.1)
    echo "   step $s: kill -9 ps.1 (pid $pid)"
    kill -9 "$pid" && killed=yes
  fi
  sleep 0.1
done
set +e
wait "$launcher"
code=$?
set -e
[ "$code" = 0 ] || { tail -30 "$log" >&2; fail "the launcher exited $code"; }
[ "$killed" = yes ] || fail "ps.1 was not killed (the job ended before step 250?)"
python3 - "$log" "$steps" "$peak0" "$peak1" <<'PY'
import re, sys
log = open(sys.argv[1]).read().splitlines()
steps, peaks = int(sys.argv[2]), [int(sys.argv[3]), int(sys.argv[4])]
bad = []
if not any(re.match(r"\[launcher\] ps\.1 killed by signal 9", l) for l in log):
    bad.append("the launcher did not see ps.1 killed")
last_saved, restored = None, None
for l in log:
    m = re.search(r"saved checkpoint ckpt-(\d+)", l)
    if m and restored is None:
        last_saved = int(m.group(1))
    m = re.search(r"restored checkpoint ckpt-(\d+)", l)
    if m and restored is None:
        restored = int(m.group(1))
if restored is None or restored != last_saved:
    bad.append(f"restored ckpt-{restored}, but the last one saved before the kill was ckpt-{last_saved}")
for ps in ("ps.0", "ps.1"):
    if not any(re.match(rf"{ps} *\| re-initialized by .* from checkpoint ckpt-{restored}, read by this ps from", l)
               for l in log):
        bad.append(f"{ps} did not read ckpt-{restored} itself")
final = [l for l in log if re.match(r"worker.0 *\| final: steps=", l)]
last = max([int(m.group(1)) for l in log for m in [re.search(r"saved checkpoint ckpt-(\d+)", l)] if m] or [0])
if not final or last < steps:
    bad.append(f"the job did not reach step {steps} (last checkpoint ckpt-{last})")
# Each ps holds 300,000 x 32 f32 rows of the table and as many of Adagrad's:
# 76.8 MB; its peak may add the process itself, not another copy of either.
held_mb = 2 * 300000 * 32 * 4 / 1e6
for ps, kb in zip(("ps.0", "ps.1"), peaks):
    if kb == 0 or kb / 1e3 > held_mb + 60:
        bad.append(f"{ps} peaked at {kb / 1e3:.0f} MB holding {held_mb:.0f} MB")
if bad:
    print("e2e: FAIL: " + "\n  ".join(bad), file=sys.stderr); sys.exit(1)
print(f"   ok: ps.1 killed, every ps restored ckpt-{restored} itself, the job reached step {last}; "
      f"peak memory ps.0 {peaks[0] / 1e3:.0f} MB, ps.1 {peaks[1] / 1e3:.0f} MB, each holding {held_mb:.0f} MB")
PY
echo "e2e: kill -9 of a ps with a large table OK"
