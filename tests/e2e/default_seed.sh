#!/usr/bin/env bash
# End to end: a train block without `seed` runs with seed 0 (docs/language.md,
# "train"): two plans compiled separately from the same file train to the
# same logged losses (glorot weights, the shuffle and dropout all drawn from
# it), equal to the plan with `seed = 0`, and `seed = 1` gives another run.
# usage: default_seed.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
rm -rf "$work" && mkdir -p "$work"
model() { # model NAME [SEED_LINE]
  cat > "$work/$1.dtf" <<DTF
model seeded {
  input x: f32[B, 784]
  input y: i32[B]
  graph {
    h = dropout(dense(x, units = 32, activation = relu) as hidden, rate = 0.3)
    logits = dense(h, units = 10) as out
    loss = mean(sparse_softmax_cross_entropy(logits, y))
  }
  train {
    optimizer = sgd(learning_rate = 0.1)
    batch = 32
    steps = 30
    data = idx("$data", split = train)
    ${2-}
  }
}
DTF
  "$bin/dtfc" "$work/$1.dtf" -o "$work/$1.plan"
  "$bin/dtf-run" "$work/$1.plan" --log-every 10 --threads 1 > "$work/$1.log" 2>&1 ||
    { cat "$work/$1.log" >&2; fail "dtf-run of $1 failed"; }
  grep -E '^step [0-9]+/' "$work/$1.log" | awk '{ print $2, $4 }' > "$work/$1.losses"
  [ "$(wc -l < "$work/$1.losses")" = 3 ] || fail "$1 logged $(wc -l < "$work/$1.losses") steps, want 3"
}
model a
model b
model zero "seed = 0"
model one "seed = 1"
cmp -s "$work/a.losses" "$work/b.losses" || fail "two plans without seed trained differently: $(paste -d' ' "$work/a.losses" "$work/b.losses")"
cmp -s "$work/a.losses" "$work/zero.losses" || fail "no seed is not seed 0: $(paste -d' ' "$work/a.losses" "$work/zero.losses")"
cmp -s "$work/a.losses" "$work/one.losses" && fail "seed = 1 trained as seed 0: $(cat "$work/one.losses")"
echo "e2e: no seed is seed 0 ($(tr '\n' ' ' < "$work/a.losses")); seed 1: $(tr '\n' ' ' < "$work/one.losses")"
