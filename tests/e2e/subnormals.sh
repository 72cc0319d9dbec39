#!/usr/bin/env bash
# End to end: dtf-run flushes subnormal floats to zero on every thread
# (runtime/core/FloatEnv.h; docs/kernels.md, "Subnormal floats"). A model
# whose logits are scaled by 1e-40 (a subnormal f32) trains 3 steps;
# --predict over the test split (10,000 images) then writes all-zero
# logits (the generated kernel's product, flushed), and with
# DTF_FLUSH_SUBNORMALS=0 the same prediction keeps the subnormals (so the
# test can tell one from the other). kernels.FloatEnv.* checks that the
# threads made after the flush, the pool's among them, flush too.
# usage: subnormals.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
rm -rf "$work" && mkdir -p "$work"
cat > "$work/tiny.dtf" <<DTF
model tiny {
  input x: f32[B, 784]
  input y: i32[B]
  var W: f32[784, 10] = truncated_normal(stddev = 0.01)
  var b: f32[10] = zeros
  graph {
    scores = x @ W + b + 1.0
    logits = scores * 1e-40
    loss = mean(sparse_softmax_cross_entropy(logits, y))
  }
  train {
    optimizer = sgd(learning_rate = 0.1)
    batch = 50
    steps = 3
    data = idx("$data", split = train)
    eval = idx("$data", split = test), every = 3
    checkpoint every 3 steps keep 1
  }
}
DTF
"$bin/dtfc" "$work/tiny.dtf" -o "$work/tiny.plan"
"$bin/dtf-run" "$work/tiny.plan" --model-dir "$work/run" --threads 2 --eval-steps 1 > "$work/train.log" 2>&1 ||
  { cat "$work/train.log" >&2; fail "training failed"; }
predict() { # predict NAME [ENV...]
  local name=$1; shift
  env "$@" "$bin/dtf-run" "$work/tiny.plan" --model-dir "$work/run" --predict eval --threads 2 \
    -o "$work/$name.csv" > "$work/$name.log" 2>&1 || { cat "$work/$name.log" >&2; fail "--predict ($name) failed"; }
}
predict flushed
predict kept DTF_FLUSH_SUBNORMALS=0
python3 - "$work/flushed.csv" "$work/kept.csv" <<'PY'
import sys
def read(path):
    rows = open(path).read().split("\n")[1:]
    return [float(v) for r in rows if r for v in r.split(",")]
flushed, kept = read(sys.argv[1]), read(sys.argv[2])
if len(flushed) < 1000 or len(flushed) != len(kept):
    sys.exit("e2e: FAIL: %d and %d logits, want the same count of at least 1000" % (len(flushed), len(kept)))
nonzero = [v for v in flushed if v != 0.0]
if nonzero:
    sys.exit("e2e: FAIL: %d of %d logits are not flushed to zero (first %r)" % (len(nonzero), len(flushed), nonzero[0]))
sub = [v for v in kept if 0.0 < abs(v) < 1.1754944e-38]
if len(sub) != len(kept):
    sys.exit("e2e: FAIL: with DTF_FLUSH_SUBNORMALS=0, %d of %d logits are subnormal (first %r): the test cannot tell"
             % (len(sub), len(kept), kept[:3]))
print("e2e: %d logits: all 0 flushed, all subnormal kept (%g to %g)" % (len(flushed), min(kept), max(kept)))
PY
