#!/usr/bin/env bash
# End to end, in real processes: the seed CNN (models/mnist_cnn.dtf, seed 3)
# compiled with `dtfc --precision=mixed_bfloat16` and without.
#  1. `--emit=kernels` lists the training step's 11 matmuls and convolutions
#     as bf16 products (the f32 plan: none, and says float32).
#  2. Both train STEPS steps in one process: at every logged step the bf16
#     run's loss is within TOL (relative) of the f32 run's, the loss falls,
#     the bf16 run says its precision at start (the f32 run does not), and
#     the trained checkpoints differ (bf16 did compute). On a CPU with
#     AVX512-BF16 or AMX, oneDNN's log (ONEDNN_VERBOSE=1) shows the bf16 run
#     executing bf16 matmuls and convolutions and the f32 run none.
#  3. DTF_BF16_NATIVE=0 (the fallback: f32 products of bf16-rounded operands)
#     trains, says so exactly once, and follows the native run within TOL.
#  4. On 1 ps + 2 workers the plan's compute_dtype reaches both workers: each
#     says its precision and (with bf16 instructions) runs bf16 primitives.
# usage: mixed_precision.sh BIN_DIR WORK_DIR [STEPS [TOL]]
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$1" "$2"
steps=${3:-20} tol=${4:-2e-3}
work=$work/mixed_precision
rm -rf "$work" && mkdir -p "$work"
sed -E -e "s/^( *)steps( *)= [0-9]+/\1steps\2= $steps\n\1seed = 3/" "$root/models/mnist_cnn.dtf" |
  grep -v '^ *eval *=' > "$work/cnn.dtf"
grep -Eq "^ *seed = 3" "$work/cnn.dtf" || fail "could not set the seed"
"$bin/dtfc" "$work/cnn.dtf" -o "$work/f32.plan"
"$bin/dtfc" "$work/cnn.dtf" --precision=mixed_bfloat16 -o "$work/bf16.plan"

# 1. The kernels listing.
"$bin/dtfc" "$work/cnn.dtf" --precision=mixed_bfloat16 --emit=kernels > "$work/bf16.kernels"
"$bin/dtfc" "$work/cnn.dtf" --emit=kernels > "$work/f32.kernels"
n=$(grep -c "^  train_step: .*bf16 operands, f32 accumulation and result" "$work/bf16.kernels" || true)
[[ $n == 11 ]] || { cat "$work/bf16.kernels" >&2; fail "expected 11 bf16 products in train_step, got $n"; }
grep -q "^precision: mixed_bfloat16" "$work/bf16.kernels" || fail "the bf16 listing does not say mixed_bfloat16"
grep -q "^precision: float32" "$work/f32.kernels" || fail "the f32 listing does not say float32"
! grep -q "bf16 operands" "$work/f32.kernels" || fail "the f32 plan lists bf16 products"

native=1
grep -qwE "avx512_bf16|amx_bf16" /proc/cpuinfo || native=0
((native)) || echo "e2e: note: this CPU has neither AVX512-BF16 nor AMX: the oneDNN bf16 checks are left out, the fallback runs"

# 2. f32 and bf16 in one process.
for p in f32 bf16; do
  rm -rf "$work/$p.ckpt"
  ONEDNN_VERBOSE=1 "$bin/dtf-run" "$work/$p.plan" --log-every 5 --threads 2 \
    --model-dir "$work/$p.ckpt" > "$work/$p.log" 2>&1 ||
    { grep -v onednn_verbose "$work/$p.log" | tail -20 >&2; fail "the $p run failed"; }
done
grep -q "precision: mixed_bfloat16: 11 matmuls and convolutions compute in bf16" "$work/bf16.log" ||
  fail "the bf16 run does not say its precision"
! grep -q "precision: mixed_bfloat16" "$work/f32.log" || fail "the f32 run says mixed_bfloat16"
if ((native)); then
  for kind in matmul convolution; do
    grep -q "^onednn_verbose,exec,cpu,$kind,.*src_bf16" "$work/bf16.log" ||
      fail "the bf16 run executed no bf16 $kind (ONEDNN_VERBOSE)"
    ! grep -q "^onednn_verbose,exec,cpu,$kind,.*src_bf16" "$work/f32.log" ||
      fail "the f32 run executed a bf16 $kind"
  done
fi
a=$work/f32.ckpt/ckpt-$steps.data-0-of-1 b=$work/bf16.ckpt/ckpt-$steps.data-0-of-1
[[ -f $a && -f $b ]] || fail "no checkpoint after $steps steps"
! cmp -s "$a" "$b" || fail "the bf16 run's checkpoint equals the f32 run's byte for byte: no bf16 product ran"

# 3. The fallback.
DTF_BF16_NATIVE=0 "$bin/dtf-run" "$work/bf16.plan" --log-every 5 --steps 10 --threads 2 \
  > "$work/fallback.log" 2>&1 || { tail -20 "$work/fallback.log" >&2; fail "the DTF_BF16_NATIVE=0 run failed"; }
said=$(grep -c "DTF_BF16_NATIVE=0: bf16 matmuls and convolutions run as f32 products of bf16-rounded operands" \
  "$work/fallback.log" || true)
[[ $said == 1 ]] || { cat "$work/fallback.log" >&2; fail "DTF_BF16_NATIVE=0 said so $said times, not once"; }

python3 - "$work/f32.log" "$work/bf16.log" "$work/fallback.log" "$steps" "$tol" <<'PY'
import re, sys
def curve(path):
    return {int(m.group(1)): float(m.group(2)) for line in open(path)
            for m in [re.match(r"step (\d+)/\d+\s+loss\s+([-0-9.e+na]+)", line)] if m}
f32, bf16, fb = (curve(p) for p in sys.argv[1:4])
steps, tol = int(sys.argv[4]), float(sys.argv[5])
if len(f32) < steps // 5 or f32.keys() != bf16.keys():
    sys.exit(f"e2e: the logs have different points: {sorted(f32)} vs {sorted(bf16)}")
for s in sorted(f32):
    rel = abs(bf16[s] - f32[s]) / abs(f32[s])
    print(f"step {s:3}  f32 {f32[s]:.4f}  bf16 {bf16[s]:.4f}  rel {rel:.1e}"
          + (f"  fallback {fb[s]:.4f}" if s in fb else ""))
    if not rel <= tol:
        sys.exit(f"e2e: at step {s} the bf16 loss {bf16[s]} is not within {tol} of f32's {f32[s]}")
    if s in fb and not abs(fb[s] - bf16[s]) <= tol * abs(bf16[s]):
        sys.exit(f"e2e: at step {s} the fallback's loss {fb[s]} is not within {tol} of the native run's {bf16[s]}")
if len(fb) < 2:
    sys.exit(f"e2e: the fallback run logged {sorted(fb)}")
if not bf16[steps] < 0.9 * bf16[5]:
    sys.exit(f"e2e: the bf16 loss did not fall: {bf16}")
PY

# 4. 1 ps + 2 workers.
cluster_json "$work/cluster.json" 1 2
ONEDNN_VERBOSE=1 timeout 120 "$bin/dtf-run" "$work/bf16.plan" --cluster "$work/cluster.json" \
  --steps 10 --log-every 5 --threads 1 > "$work/cluster.log" 2>&1 ||
  { grep -v onednn_verbose "$work/cluster.log" | tail -30 >&2; fail "the 1 ps + 2 workers run failed"; }
for w in worker.0 worker.1; do
  grep -q "^$w | *precision: mixed_bfloat16: 11 matmuls" "$work/cluster.log" ||
    { grep -v onednn_verbose "$work/cluster.log" >&2; fail "$w does not say it trains in mixed_bfloat16"; }
  if ((native)); then
    grep -q "^$w | onednn_verbose,exec,cpu,matmul,.*src_bf16" "$work/cluster.log" ||
      fail "$w executed no bf16 matmul (ONEDNN_VERBOSE)"
  fi
done
echo "e2e: mixed_bfloat16 follows f32 within $tol over $steps steps, the fallback says so once, and both workers of a cluster compute in bf16"
