#!/usr/bin/env bash
# End to end: GPU workers with a CPU parameter server. The MLP with its graph
# on /gpu:0 (soft placement on) trains in a 1 ps + 2 worker cluster on
# 127.0.0.1 whose tasks each emulate one GPU (dtf-run --emulate-gpus 1 is
# handed to every task), asynchronously and synchronously (2 of 2 replicas).
# Each worker must have run its matmuls on cuBLAS and replayed CUDA graphs,
# the chief's loss must fall, its test accuracy end above 0.5, and the job
# must finish.
# usage: gpu_cluster.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
work=$work/gpu_cluster
rm -rf "$work" && mkdir -p "$work"
for mode in async "sync(replicas_to_aggregate = 2, total_num_replicas = 2)"; do
  name=${mode%%(*}
  python3 "$root/tests/e2e/gpu_model.py" "$root/models/mlp.dtf" "$work/$name.dtf" 300 \
    "soft_placement = true" "$mode"
  "$bin/dtfc" "$work/$name.dtf" -o "$work/$name.plan"
  cluster_json "$work/$name.json" 1 2
  timeout 300 "$bin/dtf-run" "$work/$name.plan" --cluster "$work/$name.json" \
    --emulate-gpus 1 --log-every 25 --eval-steps 10 > "$work/$name.log" 2>&1 || {
    echo "e2e: $name: the job failed:" >&2; tail -30 "$work/$name.log" >&2; exit 1; }
  python3 - "$work/$name.log" "$name" <<'PY'
import re, sys
path, name = sys.argv[1:]
log = open(path).read().splitlines()
bad = []
for w in ("worker.0", "worker.1"):
    stats = [l for l in log if l.startswith(w) and "cuda emulation:" in l]
    m = re.search(r"(\d+) cuBLAS calls.* (\d+) graph launches", stats[-1]) if stats else None
    if not m or int(m.group(1)) < 50 or int(m.group(2)) < 50:
        bad.append("%s ran too little on its emulated GPU: %s" % (w, stats))
chief = [l.split("|", 1)[1].strip() for l in log if l.startswith("worker.0")]
losses = [float(m.group(1)) for l in chief if l.startswith("step ")
          for m in [re.search(r"loss ([0-9.eE+-]+)", l)] if m]
final = [l for l in chief if l.startswith("final:")]
acc = re.search(r"accuracy=([0-9.]+)", final[-1]) if final else None
if len(losses) < 2 or not min(losses[1:]) < 0.85 * losses[0]:
    bad.append("the chief's loss did not fall by 15%%: %s" % losses)
if not acc or float(acc.group(1)) < 0.5:
    bad.append("final accuracy not above 0.5 (chance 0.1): %s" % final)
if not any("the job finished" in l for l in log):
    bad.append("the launcher did not report the job finished")
for b in bad:
    print("e2e: FAIL: %s: %s" % (name, b))
print("e2e: %s: chief loss %s; %s" % (name, losses, [l for l in log if "cuda emulation" in l and l.startswith("worker")]))
sys.exit(1 if bad else 0)
PY
done
