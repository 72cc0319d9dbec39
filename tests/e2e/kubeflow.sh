#!/usr/bin/env bash
# Kubeflow's TFJob, one process per pod, on loopback: every task gets the
# TF_CONFIG that the training operator writes (lower-case types, a chief, ps,
# worker and evaluator, "environment": "cloud", addresses
# <job>-<type>-<i>.<namespace>.svc), each name mapped to 127.0.0.1 in a
# private /etc/hosts (the ports differ, as the tasks share one network). The
# chief and the worker start before the ps's name resolves, must say so while
# they wait, and go on once it does. Every task must exit 0; the evaluator
# must follow the running job (more than one checkpoint evaluated, the last
# one at the final step) and TensorBoard's reader must find its eval scalars.
# The worker's process is killed with kill -9 mid-run and started again with
# the same TF_CONFIG (a rescheduled pod): it must rejoin without rolling the
# job back. A worker whose ps never resolves exits 166 (retryable) under
# "cloud" and 6 without it.
# usage: kubeflow.sh BIN_DIR WORK_DIR BUILD_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
build=$3

if [ "$(id -u)" -ne 0 ]; then
  echo "e2e: kubeflow: SKIPPED: the pods' DNS names need a private /etc/hosts (a mount namespace), which needs root" >&2
  exit 77 # ctest: skipped
fi
enter_private_mounts "$@"
rm -rf "$work" && mkdir -p "$work/model"

base=$(free_ports 4 23000)
name() { echo "dtfjob-$1-0.default.svc"; }
chief="$(name chief):$base" ps="$(name ps):$((base + 1))"
worker="$(name worker):$((base + 2))" evaluator="$(name evaluator):$((base + 3))"
# The ps's name is missing until its "pod" starts.
private_hosts "$work/hosts" "127.0.0.1 $(name chief) $(name worker) $(name evaluator)"
tf_config() { # TYPE
  printf '{"cluster":{"chief":["%s"],"evaluator":["%s"],"ps":["%s"],"worker":["%s"]},"task":{"type":"%s","index":0},"environment":"cloud"}' \
    "$chief" "$evaluator" "$ps" "$worker" "$1"
}

mlp_plan mlp 2000 1000 250
# The job's TLS material, as a Secret would hold it: made from the cluster
# part of the same TF_CONFIG.
tf_config chief > "$work/tf_config.json"
"$bin/dtf-run" certs --cluster "$work/tf_config.json" --out "$work/tls" > /dev/null ||
  fail "kubeflow: dtf-run certs failed"

declare -A pids
start() { # TYPE
  TF_CONFIG=$(tf_config "$1") timeout 300 "$bin/dtf-run" "$work/mlp.plan" \
    --model-dir "$work/model" --tls-dir "$work/tls" --log-every 250 --connect-timeout 60 \
    --evaluator-idle-timeout 120 > "$work/$1.log" 2>&1 &
  pids[$1]=$!
}
start chief
start worker
start evaluator
for _ in $(seq 100); do
  grep -q "does not resolve yet" "$work/chief.log" && break
  sleep 0.1
done
sleep 1 # a retry or two
echo "127.0.0.1 $(name ps)" >> "$work/hosts"
start ps
# A rescheduled pod: once the worker has trained a while, its process is
# killed with kill -9 and started again with the same TF_CONFIG, as the
# operator restarts a pod; it must rejoin the running job (the chief goes
# on, the global step never goes back) and train to the end.
for _ in $(seq 600); do
  grep -qE '^step ([5-9][0-9]{2}|1[0-9]{3})/' "$work/worker.log" && break
  kill -0 "${pids[worker]}" 2> /dev/null || break
  sleep 0.1
done
grep -qE '^step ([5-9][0-9]{2}|1[0-9]{3})/' "$work/worker.log" ||
  { tail -20 "$work/worker.log" >&2; fail "kubeflow: the worker never reached step 500"; }
pkill -9 -P "${pids[worker]}" -f "$bin/dtf-run" || fail "kubeflow: no worker process to kill"
wait "${pids[worker]}" 2> /dev/null || true
mv "$work/worker.log" "$work/worker-killed.log"
echo "   killed the worker pod's process at $(grep -E '^step ' "$work/worker-killed.log" | tail -1 | cut -d' ' -f1-2); starting it again"
start worker
failures=0
for t in ps chief worker evaluator; do
  set +e
  wait "${pids[$t]}"
  rc=$?
  set -e
  if [ $rc -ne 0 ]; then
    echo "e2e: kubeflow: $t exited $rc:" >&2; tail -20 "$work/$t.log" >&2
    failures=$((failures + 1))
  fi
done
[ $failures -eq 0 ] || fail "kubeflow: $failures task(s) did not exit 0"

python3 - "$work" "$(name ps)" <<'PY' || fail "kubeflow: the logs"
import re, sys
work, ps_name = sys.argv[1], sys.argv[2]
read = lambda t: open(f"{work}/{t}.log").read().splitlines()
chief, ps, evaluator = read("chief"), read("ps"), read("evaluator")
bad = []
if not any(f"waiting for ps.0: its host name '{ps_name}' does not resolve yet" in l for l in chief):
    bad.append("the chief did not name the ps while its name did not resolve")
final = [l for l in chief if l.startswith("final:")]
acc = re.search(r"accuracy=([0-9.]+)", final[-1]) if final else None
if not acc or float(acc.group(1)) < 0.5:
    bad.append(f"the chief did not finish with accuracy above 0.5: {final}")
if not any("shutting down (chief.0: training finished)" in l for l in ps):
    bad.append("the ps did not stop when the chief finished")
evals = [int(m.group(1)) for l in evaluator for m in [re.match(r"evaluator: ckpt-(\d+)  step", l)] if m]
if len(evals) < 2 or evals[-1] < 2000 or evals != sorted(set(evals)):
    bad.append(f"the evaluator did not follow the job (checkpoints evaluated: {evals})")
if not any("evaluated the last step's checkpoint; done" in l for l in evaluator):
    bad.append("the evaluator did not stop after the last checkpoint")
killed, again = read("worker-killed"), read("worker")
if any(l.startswith("final:") for l in killed):
    bad.append("the killed worker had already finished: the kill tested nothing")
if not any(l.startswith("final:") for l in again):
    bad.append("the restarted worker did not train to the end")
# The chief's global steps never go back across the worker's restart.
steps = [int(m.group(1)) for l in chief for m in [re.match(r"step (\d+)/", l)] if m]
if steps != sorted(steps) or not steps:
    bad.append(f"the chief's steps went back: {steps}")
if any("restor" in l for l in chief + ps):
    bad.append("the job was rolled back to a checkpoint for a worker's restart")
if bad:
    print("\n".join(bad)); sys.exit(1)
print(f"   ok: chief {final[-1]}; evaluator evaluated {evals}; the worker rejoined after kill -9 and finished")
PY

# TensorBoard's reader on the evaluator's events.
# shellcheck source=tests/summaries/venv.sh
source "$root/tests/summaries/venv.sh"
summaries_venv "$build" || fail "kubeflow: no TensorBoard virtualenv"
"$venv/bin/python" - "$work/model/evaluator" "$work/evaluator.log" <<'PY' || fail "kubeflow: the evaluator's summaries"
import re, sys
from tensorboard.backend.event_processing import event_accumulator
acc = event_accumulator.EventAccumulator(sys.argv[1])
acc.Reload()
lines = [l for l in open(sys.argv[2]) if re.match(r"evaluator: ckpt-\d+  step", l)]
bad = []
for tag in ("loss", "accuracy"):
    if tag not in acc.Tags()["scalars"]:
        bad.append(f"no '{tag}' scalar in {sys.argv[1]}: {acc.Tags()['scalars']}")
        continue
    events = {e.step: e.value for e in acc.Scalars(tag)}
    for l in lines:
        step = int(re.search(r"step (\d+)", l).group(1))
        logged = float(re.search(tag + r" ([0-9.]+)", l).group(1))
        if step not in events or abs(events[step] - logged) > 1e-3:
            bad.append(f"{tag} at step {step}: log {logged}, events {events.get(step)}")
if not lines:
    bad.append("no evaluation lines in evaluator.log")
if bad:
    print("\n".join(bad)); sys.exit(1)
print(f"   ok: TensorBoard reads {len(lines)} evaluations of loss and accuracy from evaluator/")
PY

# Exit codes for restartPolicy: ExitCode: a ps that never resolves is a
# cluster failure, retryable under "cloud" (166), 6 otherwise.
set +e
TF_CONFIG='{"cluster":{"ps":["dtfjob-nowhere-ps-0.default.svc:2222"],"worker":["127.0.0.1:1"]},"task":{"type":"worker","index":0},"environment":"cloud"}' \
  timeout 60 "$bin/dtf-run" "$work/mlp.plan" --insecure --connect-timeout 1 > "$work/noname.log" 2>&1
cloud=$?
TF_CONFIG='{"cluster":{"ps":["dtfjob-nowhere-ps-0.default.svc:2222"],"worker":["127.0.0.1:1"]},"task":{"type":"worker","index":0}}' \
  timeout 60 "$bin/dtf-run" "$work/mlp.plan" --insecure --connect-timeout 1 >> "$work/noname.log" 2>&1
plain=$?
set -e
[ $cloud -eq 166 ] && [ $plain -eq 6 ] ||
  { cat "$work/noname.log" >&2; fail "kubeflow: an unresolvable ps exited $cloud under cloud (want 166) and $plain without (want 6)"; }
grep -q "did not resolve within 1 s" "$work/noname.log" ||
  { cat "$work/noname.log" >&2; fail "kubeflow: no message naming the name that did not resolve"; }
echo "   ok: an unresolvable ps: exit 166 under environment cloud, 6 without"
echo "kubeflow: PASS"
