#!/usr/bin/env bash
# End to end: what dtf-run asks of oneDNN, read from oneDNN's own log of
# every call it runs (ONEDNN_VERBOSE=1), for the claims of
# runtime/kernels/README.md:
#   - the seed CNN's first convolution (1 input channel) runs forward on a
#     direct JIT kernel, not brgemm (brgconv); its second (32 channels) on
#     whatever oneDNN prefers;
#   - its dense layer's products are oneDNN matmul primitives (50x3136 by
#     3136x500), not sgemm calls (which oneDNN does not log);
#   - the transformer's attention multiplies a whole batch of 16x16 matrices
#     in one call ([64, 4, 16, 16] operands), never one call per matrix;
#   - dtf-run training alone runs with GOMP_SPINCOUNT=10000 (it starts itself
#     again with it: /proc/PID/environ), and keeps a policy the user set.
# usage: onednn_choices.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
work=$work/onednn_choices
rm -rf "$work" && mkdir -p "$work"
for m in mnist_cnn transformer; do
  grep -v '^[[:space:]]*eval[[:space:]]*=' "$root/models/$m.dtf" > "$work/$m.dtf"
  "$bin/dtfc" "$work/$m.dtf" -o "$work/$m.plan"
  ONEDNN_VERBOSE=1 "$bin/dtf-run" "$work/$m.plan" --steps 2 --threads 2 \
    > "$work/$m.log" 2>&1 || fail "$m: dtf-run failed: $(tail -3 "$work/$m.log")"
done
python3 - "$work/mnist_cnn.log" "$work/transformer.log" <<'PY'
import sys
def execs(path, primitive):
    rows = []
    for line in open(path):
        f = line.rstrip("\n").split(",")
        # onednn_verbose,exec,cpu,PRIMITIVE,IMPLEMENTATION,PROP,MDS,ATTRS,AUX,PROBLEM,TIME
        if len(f) >= 11 and f[0] == "onednn_verbose" and f[1] == "exec" and f[3] == primitive:
            rows.append((f[4], f[5], f[-2]))
    return rows
fail = []
conv = execs(sys.argv[1], "convolution")
first = [r for r in conv if r[1].startswith("forward") and "_ic1oc32_" in r[2]]
if not first:
    fail.append("no forward call of the first convolution in oneDNN's log: %s" % conv[:6])
elif any(impl.startswith("brgconv") or not impl.startswith("jit:") for impl, _, _ in first):
    fail.append("the first convolution (1 channel) ran forward on %s, not a direct JIT kernel"
                % sorted({impl for impl, _, _ in first}))
mm = execs(sys.argv[1], "matmul")
if not any(p == "50x3136:3136x500:50x500" for _, _, p in mm):
    fail.append("the dense layer's product is not a matmul primitive call: %s" % sorted({p for _, _, p in mm}))
att = execs(sys.argv[2], "matmul")
batched = [p for _, _, p in att if p.startswith("64x4x16x16:")]
single = [p for _, _, p in att if p == "16x16:16x16:16x16"]
if not batched or single:
    fail.append("attention's products: %d batched calls, %d calls of one 16x16 matrix (want >0 and 0)"
                % (len(batched), len(single)))
if fail:
    print("e2e: FAIL: " + "\n  ".join(fail), file=sys.stderr)
    sys.exit(1)
print("e2e: first convolution forward on %s; dense products as matmul primitives; "
      "%d batched attention products per 2 steps, none one matrix at a time"
      % (first[0][0], len(batched)))
PY

# The OpenMP waits dtf-run chooses for itself, and keeps when they are set.
environ_of() { # PLAN LOG [ENV...]: the environment of a running dtf-run
  local plan=$1 log=$2 pid
  shift 2
  env "$@" "$bin/dtf-run" "$plan" --steps 100000 --threads 2 --log-every 10 > "$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do grep -q "^step " "$log" && break; sleep 0.1; done
  tr '\0' '\n' < "/proc/$pid/environ" | grep -E "^(OMP_WAIT_POLICY|GOMP_SPINCOUNT)=" | sort | tr '\n' ' '
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
alone=$(environ_of "$work/mnist_cnn.plan" "$work/alone.log" -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT)
[ "$alone" = "GOMP_SPINCOUNT=10000 " ] || fail "dtf-run alone ran with '$alone', not GOMP_SPINCOUNT=10000 alone"
kept=$(environ_of "$work/mnist_cnn.plan" "$work/kept.log" -u GOMP_SPINCOUNT OMP_WAIT_POLICY=passive)
[ "$kept" = "OMP_WAIT_POLICY=passive " ] || fail "the user's OMP_WAIT_POLICY=passive became '$kept'"
echo "e2e: alone: $alone; the user's passive policy kept: $kept"
