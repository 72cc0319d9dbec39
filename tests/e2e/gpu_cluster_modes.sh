#!/usr/bin/env bash
# End to end: the cluster modes on GPU workers (emulated, 127.0.0.1) that
# gpu_cluster.sh (async and sync 2 of 2, one GPU per worker) leaves out:
#   towers-async, towers-sync: 1 ps + 2 workers with 2 emulated GPUs each and
#     session(gpu_towers = 2): each worker's towers all-reduce their gradients
#     with NCCL once per step (its step count) on both its GPUs, and the ps
#     sees one push per worker step (async: updates applied = the workers'
#     steps; sync 2 of 2: 300 updates of 2 gradients each); a worker pulls
#     its variables to the host every step, uploads each that its towers'
#     GPUs read to GPU 0 once and sends it to GPU 1 with ncclBroadcast (the
#     MLP's 6 variables: 6 broadcasts per step);
#   backup: 1 ps + 3 GPU workers in sync with a backup worker
#     (replicas_to_aggregate = 2, total_num_replicas = 3): 300 updates of 2
#     gradients, every worker on its GPU;
#   model-parallel: models/model_parallel.dtf with its first stage on
#     "/job:worker/task:0/gpu:0": worker.0's layer on its GPU (cuBLAS),
#     worker.1's stage on its CPU, 300 updates.
# Every job must finish, with the chief's loss falling and its test accuracy
# above 0.5. Towers in the model-parallel job, and with an embedding looked
# up on the ps (tests/e2e/embedding_small.dtf), are refused, saying why.
# usage: gpu_cluster_modes.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
work=$work/gpu_cluster_modes
rm -rf "$work" && mkdir -p "$work"
cluster_json "$work/c1x2.json" 1 2
cluster_json "$work/c1x3.json" 1 3

mlp() { # NAME SESSION UPDATE
  python3 "$root/tests/e2e/gpu_model.py" "$root/models/mlp.dtf" "$work/$1.dtf" 300 "$2" "$3"
  "$bin/dtfc" "$work/$1.dtf" -o "$work/$1.plan"
}
mlp towers-async "soft_placement = true, gpu_towers = 2" async
mlp towers-sync "soft_placement = true, gpu_towers = 2" \
  "sync(replicas_to_aggregate = 2, total_num_replicas = 2)"
mlp backup "soft_placement = true" \
  "sync(replicas_to_aggregate = 2, total_num_replicas = 3)"
sed -e 's/steps = 2000/steps = 300/' -e 's/every = 1000/every = 300/' \
  -e 's#on "/job:worker/task:0" {#on "/job:worker/task:0/gpu:0" {#' \
  -e 's#^  train {#  train {\n    session = session(soft_placement = true, log_device_placement = true)#' \
  "$root/models/model_parallel.dtf" > "$work/model-parallel.dtf"
grep -q 'task:0/gpu:0' "$work/model-parallel.dtf" || fail "the model-parallel model has no GPU stage"
"$bin/dtfc" "$work/model-parallel.dtf" -o "$work/model-parallel.plan"

job() { # NAME CLUSTER GPUS_PER_TASK
  timeout 300 "$bin/dtf-run" "$work/$1.plan" --cluster "$work/$2.json" \
    --emulate-gpus "$3" --log-every 25 --eval-steps 10 > "$work/$1.log" 2>&1 || {
    echo "e2e: $1: the job failed:" >&2; tail -30 "$work/$1.log" >&2; exit 1; }
}
job towers-async c1x2 2
job towers-sync c1x2 2
job backup c1x3 1
job model-parallel c1x2 1

# Towers replicate a whole worker_step: a replica spanning tasks refuses them.
if timeout 120 "$bin/dtf-run" "$work/model-parallel.plan" --cluster "$work/c1x2.json" \
    --emulate-gpus 2 --gpu-towers 2 --max-restarts 0 > "$work/mp-towers.log" 2>&1; then
  fail "towers with model parallelism ran"
fi
grep -q "worker.0: gpu_towers = 2: towers replicate a whole worker_step; they do not combine with a replica that spans worker tasks (model parallelism)" \
  "$work/mp-towers.log" || fail "towers with model parallelism: no precise refusal: $(grep error "$work/mp-towers.log" | head -3)"

# Nor do they average the sparse rows of a table looked up on its ps.
"$bin/dtfc" "$root/tests/e2e/embedding_small.dtf" -o "$work/embedding.plan"
if timeout 120 "$bin/dtf-run" "$work/embedding.plan" --cluster "$work/c1x2.json" \
    --emulate-gpus 2 --gpu-towers 2 --max-restarts 0 > "$work/emb-towers.log" 2>&1; then
  fail "towers with a table looked up on the ps ran"
fi
grep -q "gpu_towers = 2: the worker_step sends sparse rows ('words/embeddings:grad:0', an embedding looked up on its ps); towers average dense gradients only" \
  "$work/emb-towers.log" || fail "towers with ps lookups: no precise refusal: $(grep error "$work/emb-towers.log" | head -3)"

python3 - "$work" <<'PY'
import re, sys
work = sys.argv[1]
bad = []
def lines(name): return open("%s/%s.log" % (work, name)).read().splitlines()
def task(log, who): return [l.split("|", 1)[1].strip() for l in log if l.startswith(who + " ")]
def stats(log, who):
    s = [l for l in task(log, who) if l.startswith("cuda emulation:")]
    return s[-1] if s else ""
def count(pattern, text):
    m = re.search(pattern, text)
    return int(m.group(1)) if m else -1
def steps(log, who):
    return count(r"final: steps=(\d+)", "\n".join(task(log, who)))
def updates(log):
    return "\n".join(task(log, "ps.0"))
def common(name, log):
    chief = task(log, "worker.0")
    losses = [float(m.group(1)) for l in chief if l.startswith("step ")
              for m in [re.search(r"loss ([0-9.eE+-]+)", l)] if m]
    final = [l for l in chief if l.startswith("final:")]
    acc = re.search(r"accuracy=([0-9.]+)", final[-1]) if final else None
    if len(losses) >= 2 and not min(losses[1:]) < 0.85 * losses[0]:
        bad.append("%s: the chief's loss did not fall by 15%%: %s" % (name, losses))
    if not acc or float(acc.group(1)) < 0.5:
        bad.append("%s: final accuracy not above 0.5 (chance 0.1): %s" % (name, final))
    if not any("the job finished" in l for l in log):
        bad.append("%s: the launcher did not report the job finished" % name)

for name in ("towers-async", "towers-sync"):
    log = lines(name)
    common(name, log)
    total = 0
    for w in ("worker.0", "worker.1"):
        st, n = stats(log, w), steps(log, w)
        total += max(n, 0)
        if not any(l.startswith("towers: 2 towers on GPU 0, 1; ") and "summed with emulated NCCL" in l for l in task(log, w)):
            bad.append("%s: %s does not say its 2 towers use NCCL" % (name, w))
        if n <= 0 or count(r"(\d+) NCCL all-reduces", st) != n:
            bad.append("%s: %s ran %d steps but its NCCL all-reduces were: %s" % (name, w, n, st))
        # A worker pulls its variables to the host every step; each goes up
        # to GPU 0 once and to GPU 1 by ncclBroadcast (6 per step).
        if count(r"NCCL broadcasts: (\d+)", st) != 6 * n or any("variables stay on every tower's GPU" in l for l in task(log, w)):
            bad.append("%s: %s did not broadcast its 6 pulled variables once per step (%d steps): %s" % (name, w, n, st))
        if not any(l.startswith("towers: ") and l.endswith("; 6 pulled variables go up to GPU 0 once per step and to the others with ncclBroadcast") for l in task(log, w)):
            bad.append("%s: %s does not say its pulled variables go up once and are broadcast" % (name, w))
        per = dict(re.findall(r" (\d+)=(\d+)", st.split("stream work per GPU:")[-1].split(";")[0])) if st else {}
        for g in ("0", "1"):
            if int(per.get(g, 0)) < 5 * max(n, 1):
                bad.append("%s: %s's GPU %s ran too little: %s" % (name, w, g, st))
    applied = count(r"(\d+) updates applied", updates(log))
    if name == "towers-async" and applied != total:
        bad.append("%s: the ps applied %d updates for %d worker steps (one push per worker step expected)" % (name, applied, total))
    if name == "towers-sync" and not re.search(r"300 updates applied \(each averaging 2 gradients\)", updates(log)):
        bad.append("%s: the ps did not apply 300 updates of 2 gradients: %s" % (name, updates(log)))

log = lines("backup")
common("backup", log)
if not re.search(r"300 updates applied \(each averaging 2 gradients\)", updates(log)):
    bad.append("backup: the ps did not apply 300 updates of 2 gradients: %s" % updates(log))
for w in ("worker.0", "worker.1", "worker.2"):
    if count(r"(\d+) cuBLAS calls", stats(log, w)) < 50:
        bad.append("backup: %s ran too little on its GPU: %s" % (w, stats(log, w)))

log = lines("model-parallel")
common("model-parallel", log)
w0 = task(log, "worker.0")
if not any(re.match(r"dtf\.matmul \(.*\): /job:localhost/replica:0/task:0/device:GPU:0$", l) for l in w0):
    bad.append("model-parallel: worker.0's matmul is not placed on its GPU")
if count(r"(\d+) cuBLAS calls", stats(log, "worker.0")) < 300:
    bad.append("model-parallel: worker.0 ran too little on its GPU: %s" % stats(log, "worker.0"))
if any("device:GPU" in l for l in task(log, "worker.1")):
    bad.append("model-parallel: stage 1 (worker.1, no GPU in its on block) placed an op on a GPU")
if not re.search(r"\b300 updates applied", updates(log)):
    bad.append("model-parallel: the ps did not apply 300 updates: %s" % updates(log))

for b in bad:
    print("e2e: FAIL: " + b)
for name in ("towers-async", "towers-sync", "backup", "model-parallel"):
    log = lines(name)
    print("e2e: %s: ps: %s; worker.0: %s" % (name, [l for l in task(log, "ps.0") if "updates applied" in l], stats(log, "worker.0")))
sys.exit(1 if bad else 0)
PY
