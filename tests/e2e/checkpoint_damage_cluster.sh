#!/usr/bin/env bash
# A damaged checkpoint in a ps/worker job (1 ps + 1 worker on 127.0.0.1 under
# the launcher), where the chief picks the checkpoint for every ps: a damaged
# newest one makes the chief exit 4 naming it, and the launcher stops the job
# at once with that code (4 is not retried); --restore=latest-valid, which the
# launcher passes on to its tasks, restores the older one onto the ps with a
# warning naming both and trains to the end; and a job whose checkpoints are
# all damaged is refused (exit 4), not trained from the initializers.
# usage: checkpoint_damage_cluster.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
rm -rf "$work" && mkdir -p "$work"
mlp_plan job 40 40 20 # 40 steps, a checkpoint every 20
dir="$work/run"
job() { # job LOG ARGS...: the launcher and its tasks; returns its exit code
  local log=$1 rc=0
  shift
  cluster_json "$work/c.json" 1 1
  timeout 120 "$bin/dtf-run" "$work/job.plan" --cluster "$work/c.json" --log-every 20 \
    --model-dir "$dir" "$@" > "$log" 2>&1 || rc=$?
  return $rc
}
flip() { # flip FILE: one bit of the byte in its middle
  python3 - "$1" <<'PY'
import os, sys
path = sys.argv[1]
at = os.path.getsize(path) // 2
with open(path, "r+b") as f:
    f.seek(at); b = f.read(1); f.seek(at); f.write(bytes([b[0] ^ 0x40]))
PY
}
has() { # has LOG TEXT: LOG holds TEXT (grep -F), else fail naming WHAT
  grep -qF -- "$2" "$1" || { tail -30 "$1" >&2; fail "$(basename "$1"): no '$2'"; }
}

job "$work/first.log" || { tail -30 "$work/first.log" >&2; fail "the first job failed"; }
for s in 20 40; do
  [ -f "$dir/ckpt-$s.index" ] || fail "no ckpt-$s after the first job (have: $(ls "$dir"))"
done

# The newest damaged: the chief refuses, the launcher stops with its code.
flip "$dir/ckpt-40.data-0-of-1"
rc=0; job "$work/damaged.log" || rc=$?
[ $rc = 4 ] || { tail -30 "$work/damaged.log" >&2; fail "a damaged newest checkpoint: exit code $rc, not 4"; }
has "$work/damaged.log" "its newest checkpoint, ckpt-40, is damaged: checkpoint data file $dir/ckpt-40.data-0-of-1 is damaged: tensor '"
has "$work/damaged.log" "pass --restore=latest-valid to restore ckpt-20"
has "$work/damaged.log" "[launcher] the chief (worker.0) failed with exit code 4, which a restart does not fix"
! grep -q 'restarting' "$work/damaged.log" || fail "the launcher restarted a task over a damaged checkpoint"

# --restore=latest-valid reaches the chief through the launcher.
job "$work/valid.log" --restore=latest-valid ||
  { tail -30 "$work/valid.log" >&2; fail "the job with --restore=latest-valid failed"; }
has "$work/valid.log" "warning: checkpoint ckpt-40 in $dir is damaged ("
has "$work/valid.log" "restoring ckpt-20, the newest whole one, instead (--restore=latest-valid)"
has "$work/valid.log" "restored checkpoint ckpt-20 from $dir onto 1 ps task; continuing at step 20"
[ -f "$dir/damaged-1/ckpt-40.index" ] || fail "the damaged ckpt-40 was not set aside"
[ -f "$dir/ckpt-40.index" ] || fail "the job did not save ckpt-40 again"

# Every checkpoint damaged: refused under either policy.
flip "$dir/ckpt-20.data-0-of-1"
flip "$dir/ckpt-40.data-0-of-1"
rc=0; job "$work/none.log" --restore=latest-valid || rc=$?
[ $rc = 4 ] || { tail -30 "$work/none.log" >&2; fail "only damaged checkpoints: exit code $rc, not 4"; }
has "$work/none.log" "it holds checkpoints, but none is whole: the newest, ckpt-40, is damaged"
has "$work/none.log" "pass --fresh to start over"
! grep -q "the plan's initializers" "$work/none.log" || fail "the ps tasks started from the initializers"
echo "e2e: damaged checkpoints in a cluster OK"
