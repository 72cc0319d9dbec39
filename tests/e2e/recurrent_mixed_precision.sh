#!/usr/bin/env bash
# End to end, in real processes: models/lstm.dtf (seed 3) compiled with
# `dtfc --precision=mixed_bfloat16` and without.
#  1. `--emit=kernels` lists the layer's three ops (dtf.lstm_train,
#     dtf.lstm_grad, and eval's dtf.lstm) as bf16 products; models/gru.dtf
#     under the same policy keeps its dtf.gru_train and dtf.gru_grad f32
#     (oneDNN 2.6's bf16 GRU trains slower than its f32 one).
#  2. Both LSTM plans train STEPS steps in one process: at every logged step
#     the bf16 run's loss is within TOL (relative) of the f32 run's, the loss
#     falls, and the bf16 run says its precision at start. On a CPU with
#     AVX512-BF16 or AMX, oneDNN's log (ONEDNN_VERBOSE=1) shows the bf16 run
#     executing bf16 LSTM primitives (forward and backward) and the f32 run
#     none.
#  3. DTF_BF16_NATIVE=0 (the fallback: oneDNN's f32 LSTM on bf16-rounded x
#     and weights) trains, says so exactly once, and follows the f32 run
#     within TOL.
# usage: recurrent_mixed_precision.sh BIN_DIR WORK_DIR [STEPS [TOL]]
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$1" "$2"
steps=${3:-60} tol=${4:-1e-2}
rm -rf "$work" && mkdir -p "$work"
for m in lstm gru; do
  sed -E -e "s/^( *)steps( *)= [0-9]+/\1steps\2= $steps\n\1seed = 3/" "$root/models/$m.dtf" |
    grep -v '^ *eval *=' > "$work/$m.dtf"
  grep -Eq "^ *seed = 3" "$work/$m.dtf" || fail "could not set the seed of $m.dtf"
done
"$bin/dtfc" "$work/lstm.dtf" -o "$work/f32.plan"
"$bin/dtfc" "$work/lstm.dtf" --precision=mixed_bfloat16 -o "$work/bf16.plan"

# 1. The kernels listings.
"$bin/dtfc" "$work/lstm.dtf" --precision=mixed_bfloat16 --emit=kernels > "$work/lstm.kernels"
for op in "train_step: .*dtf.lstm_train" "train_step: .*dtf.lstm_grad" "eval: .*dtf.lstm"; do
  grep -q "^  $op  bf16 operands, f32 accumulation and result" "$work/lstm.kernels" ||
    { cat "$work/lstm.kernels" >&2; fail "the mixed_bfloat16 listing has no bf16 '$op'"; }
done
"$bin/dtfc" "$work/gru.dtf" --precision=mixed_bfloat16 --emit=kernels > "$work/gru.kernels"
for op in dtf.gru_train dtf.gru_grad; do
  grep -q "^  train_step: .*$op  f32$" "$work/gru.kernels" ||
    { cat "$work/gru.kernels" >&2; fail "the gru model's $op is not listed f32"; }
done
! grep -q "dtf.gru.*bf16" "$work/gru.kernels" || fail "a GRU op computes in bf16"

native=1
grep -qwE "avx512_bf16|amx_bf16" /proc/cpuinfo || native=0
((native)) || echo "e2e: note: this CPU has neither AVX512-BF16 nor AMX: the oneDNN bf16 checks are left out, the fallback runs"

# 2. f32 and bf16 in one process.
for p in f32 bf16; do
  ONEDNN_VERBOSE=1 "$bin/dtf-run" "$work/$p.plan" --log-every 10 --threads 2 \
    > "$work/$p.log" 2>&1 ||
    { grep -v onednn_verbose "$work/$p.log" | tail -20 >&2; fail "the $p run failed"; }
done
grep -q "precision: mixed_bfloat16: 3 matmuls and convolutions and 2 LSTM/GRU ops compute in bf16" \
  "$work/bf16.log" || { grep -v onednn_verbose "$work/bf16.log" | head -8 >&2; fail "the bf16 run does not say its precision"; }
if ((native)); then
  for kind in forward_training backward; do
    grep -q "^onednn_verbose,exec,cpu,rnn,[a-z_:0-9]*,$kind,src_layer_bf16" "$work/bf16.log" ||
      fail "the bf16 run executed no bf16 LSTM $kind primitive (ONEDNN_VERBOSE)"
    ! grep -q "^onednn_verbose,exec,cpu,rnn,.*src_layer_bf16" "$work/f32.log" ||
      fail "the f32 run executed a bf16 LSTM primitive"
  done
fi

# 3. The fallback.
DTF_BF16_NATIVE=0 "$bin/dtf-run" "$work/bf16.plan" --log-every 10 --threads 2 \
  > "$work/fallback.log" 2>&1 || { tail -20 "$work/fallback.log" >&2; fail "the DTF_BF16_NATIVE=0 run failed"; }
said=$(grep -c "DTF_BF16_NATIVE=0: bf16 LSTM and GRU layers run oneDNN's f32 primitives on bf16-rounded inputs and weights" \
  "$work/fallback.log" || true)
[[ $said == 1 ]] || { cat "$work/fallback.log" >&2; fail "DTF_BF16_NATIVE=0 said so $said times, not once"; }

python3 "$root/tests/e2e/loss_curves.py" "$work/f32.log" "$tol" "$work/bf16.log" \
  "$work/fallback.log" --fall 0.3
echo "e2e: the LSTM trains in bf16 (oneDNN's bf16 primitives) and follows f32; the GRU stays f32"
