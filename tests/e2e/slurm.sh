#!/usr/bin/env bash
# Slurm for real: munged, slurmctld and three slurmd "nodes" (n1..n3, each on
# its own loopback address 127.0.1.x and port) from Debian's slurm-wlm, with
# no systemd; then `srun dtf-run plan --cluster slurm` trains 1 ps + 2
# workers, one task per node. A worker task is killed with SIGKILL mid-run
# and started again as a step of its own on its node (a rescheduled task):
# it must rejoin and finish, the chief must finish without a rollback, the
# ps must stop when it does, and the step must end by itself. A second step lays 3 tasks over 2 nodes with -m cyclic
# and trains to the end, every task exiting 0; then deploy/slurm/train.sbatch
# runs through sbatch.
# Runs as root in a private mount namespace whose /etc/hosts names n1..n3
# (nothing outside the namespace changes); every daemon is stopped at exit.
# usage: slurm.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"

if [ "$(id -u)" -ne 0 ]; then
  echo "e2e: slurm: SKIPPED: the Slurm daemons need root (SlurmUser=root); run the suite as root" >&2
  exit 77 # ctest: skipped
fi
for tool in munged mungekey slurmctld slurmd srun sinfo unshare; do
  command -v "$tool" > /dev/null ||
    fail "slurm: '$tool' is missing: scripts/setup.sh installs munge, slurmctld, slurmd and slurm-client"
done

# Into a mount namespace of our own, where /etc/hosts can name the nodes.
enter_private_mounts "$@"

rm -rf "$work" && mkdir -p "$work"/{state,log,spool/n1,spool/n2,spool/n3,model1,model2}
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2> /dev/null || break; sleep 0.1; done
    kill -9 "$p" 2> /dev/null || true
  done
  wait 2> /dev/null || true
}
trap cleanup EXIT

private_hosts "$work/hosts" "127.0.1.1 n1" "127.0.1.2 n2" "127.0.1.3 n3"

# Free ports on loopback: the controller, one per node, and srun's reserved
# port range (MpiParams=ports).
nodes=(127.0.0.1 127.0.1.1 127.0.1.2 127.0.1.3)
ctld=$(free_ports 4 21000 "${nodes[@]}")
p1=$((ctld + 1)) p2=$((ctld + 2)) p3=$((ctld + 3))
resv=$(free_ports 32 $((ctld + 4)) "${nodes[@]}")
mungekey -c -f -k "$work/munge.key"
munged -F -f --socket="$work/munge.sock" --key-file="$work/munge.key" \
  --log-file="$work/log/munged.log" --pid-file="$work/munged.pid" \
  --seed-file="$work/munged.seed" > "$work/log/munged.out" 2>&1 &
pids+=($!)

cat > "$work/slurm.conf" <<EOF
ClusterName=dtftest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge.sock
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool/%n
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.%n.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
MpiParams=ports=$resv-$((resv + 31))
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=n1 NodeAddr=127.0.1.1 Port=$p1 CPUs=2 State=UNKNOWN
NodeName=n2 NodeAddr=127.0.1.2 Port=$p2 CPUs=2 State=UNKNOWN
NodeName=n3 NodeAddr=127.0.1.3 Port=$p3 CPUs=2 State=UNKNOWN
PartitionName=dtf Nodes=n[1-3] Default=YES MaxTime=30 State=UP OverSubscribe=FORCE:4
EOF
export SLURM_CONF=$work/slurm.conf
for _ in $(seq 50); do [ -S "$work/munge.sock" ] && break; sleep 0.1; done
slurmctld -D -i > "$work/log/slurmctld.out" 2>&1 &
pids+=($!)
for n in 1 2 3; do
  slurmd -D -N "n$n" > "$work/log/slurmd.n$n.out" 2>&1 &
  pids+=($!)
done
ready=0
for _ in $(seq 100); do
  if [ "$(sinfo -h -o '%T %D' 2> /dev/null)" = "idle 3" ]; then ready=1; break; fi
  sleep 0.2
done
if [ $ready -ne 1 ]; then
  sinfo >&2 || true
  tail -5 "$work"/log/*.log >&2 || true
  fail "slurm: the three nodes did not come up idle within 20 s"
fi
echo "slurm: munged, slurmctld and slurmd n1..n3 up (controller port $ctld)"

mlp_plan mlp 300 300
# TLS material for the tasks Slurm will start (ps.0, worker.0, worker.1): a
# certificate names a task, and peers are checked by that name, so the hosts
# and ports here need not be the ones Slurm picks.
printf '{"ps": ["n1:1"], "worker": ["n2:1", "n3:1"]}\n' > "$work/names.json"
"$bin/dtf-run" certs --cluster "$work/names.json" --out "$work/tls" > /dev/null ||
  fail "slurm: dtf-run certs failed"

# Step 1: one task per node, ports reserved by srun; rank 0 is the ps, rank 1
# the chief (worker.0), rank 2 worker.1, which is killed once it has trained
# 500 of the 3000 steps.
echo "== slurm: srun -N3 -n3 --resv-ports=1 dtf-run --cluster slurm (worker.1 killed mid-run)"
timeout 240 srun -N3 -n3 --resv-ports=1 --label --overcommit \
  "$bin/dtf-run" "$work/mlp.plan" --cluster slurm --tls-dir "$work/tls" --model-dir "$work/model1" \
  --steps 3000 --log-every 100 --sync-timeout 15 --connect-timeout 60 > "$work/step1.log" 2>&1 &
srun_pid=$!
killed=""
for _ in $(seq 2000); do
  if grep -qE '^2: step ([5-9][0-9]{2}|[1-9][0-9]{3})/' "$work/step1.log"; then
    # The dtf-run process with SLURM_PROCID=2 in its environment.
    for env in /proc/[0-9]*/environ; do
      pid=${env#/proc/}; pid=${pid%/environ}
      { tr '\0' '\n' < "$env" | grep -qx 'SLURM_PROCID=2' &&
        tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q 'dtf-run' &&
        kill -9 "$pid" && killed=$pid; } 2> /dev/null || true
    done
    break
  fi
  kill -0 $srun_pid 2> /dev/null || break
  sleep 0.05
done
[ -n "$killed" ] || { tail -30 "$work/step1.log" >&2; fail "slurm: worker.1 (rank 2) was never seen training, so it was not killed"; }
# Rescheduled: worker.1 again, as a step of its own on n3 (what a requeued
# or restarted task is under Slurm), told the step's addresses in a cluster
# file (one task per node: every task on the first reserved port); it must
# rejoin the running job and train to the end.
port1=$(sed -n 's/^0: serving on n1:\([0-9]*\)[ ;].*/\1/p' "$work/step1.log")
[ -n "$port1" ] || { tail -20 "$work/step1.log" >&2; fail "slurm: step 1: no 'serving on n1:PORT' line from the ps"; }
printf '{"ps": ["n1:%s"], "worker": ["n2:%s", "n3:%s"]}\n' "$port1" "$port1" "$port1" > "$work/step1.json"
timeout 120 srun -N1 -n1 -w n3 --overcommit \
  "$bin/dtf-run" "$work/mlp.plan" --cluster "$work/step1.json" --job worker --task 1 \
  --tls-dir "$work/tls" --model-dir "$work/model1" --steps 3000 --log-every 100 \
  --sync-timeout 15 --connect-timeout 60 > "$work/step1-again.log" 2>&1 &
again_pid=$!
set +e
wait $srun_pid
srun_rc=$?
wait $again_pid
again_rc=$?
set -e
echo "slurm: killed worker.1 (pid $killed); srun exited $srun_rc; worker.1's own step exited $again_rc"
[ $again_rc -eq 0 ] && grep -q "^final:" "$work/step1-again.log" ||
  { tail -20 "$work/step1-again.log" >&2; fail "slurm: worker.1 started again on n3 did not rejoin and train to the end (exit $again_rc)"; }
python3 - "$work/step1.log" "$work/model1" <<'PY' || { tail -40 "$work/step1.log" >&2; fail "slurm: step 1"; }
import glob, os, re, sys
log = open(sys.argv[1]).read().splitlines()
bad = []
def task(rank): return [l.split(":", 1)[1].strip() for l in log if re.match(rf"^\s*{rank}: ", l)]
ps, chief = task(0), task(1)
if not any("serving on n1:" in l for l in ps):
    bad.append("the ps (rank 0) did not serve on n1")
final = [l for l in chief if l.startswith("final:")]
acc = re.search(r"accuracy=([0-9.]+)", final[-1]) if final else None
if not acc or float(acc.group(1)) < 0.5:
    bad.append(f"the chief (rank 1) did not finish with accuracy above 0.5: {final}")
if not any("shutting down (worker.0: training finished)" in l for l in ps):
    bad.append("the ps did not stop when the chief finished")
steps = [int(re.search(r"ckpt-(\d+)", p).group(1)) for p in glob.glob(sys.argv[2] + "/ckpt-*.index")]
if not steps or max(steps) < 3000:
    bad.append(f"no final checkpoint (step >= 3000) in the shared model dir: {steps}")
if any(re.match(r"^\s*2: final:", l) for l in log):
    bad.append("worker.1 finished: it was killed too late to test anything")
steps = [int(m.group(1)) for l in chief for m in [re.match(r"step (\d+)/", l)] if m]
if not steps or steps != sorted(steps):
    bad.append(f"the chief's steps went back across worker.1's restart: {steps}")
if any("restor" in l for l in chief + ps):
    bad.append("the job was rolled back to a checkpoint for a worker's restart")
if bad:
    print("\n".join(bad)); sys.exit(1)
print(f"   ok: chief {final[-1]}; the ps stopped; ckpt-{max(steps)} written")
PY

# Step 2: -m cyclic over two nodes (n1 runs ranks 0 and 2, n2 rank 1); every
# task exits 0. With MpiParams=ports Slurm reserves ports for every step, so
# the ps listens on one of them.
echo "== slurm: srun -N2 -n3 -m cyclic dtf-run --cluster slurm"
if ! timeout 240 srun -N2 -n3 -m cyclic --label --overcommit \
     "$bin/dtf-run" "$work/mlp.plan" --cluster slurm --tls-dir "$work/tls" \
     --model-dir "$work/model2" --steps 120 --log-every 40 --connect-timeout 60 \
     > "$work/step2.log" 2>&1; then
  tail -30 "$work/step2.log" >&2
  fail "slurm: the -m cyclic step failed (every task must exit 0)"
fi
port=$(sed -n 's/^0: serving on n1:\([0-9]*\)[ ;].*/\1/p' "$work/step2.log")
[ -n "$port" ] && [ "$port" -ge "$resv" ] && [ "$port" -le $((resv + 31)) ] ||
  { tail -20 "$work/step2.log" >&2; fail "slurm: step 2: the ps did not serve on n1 at a port srun reserved ($resv-$((resv + 31)))"; }
grep -q "^1: final:" "$work/step2.log" ||
  { tail -20 "$work/step2.log" >&2; fail "slurm: step 2: the chief (rank 1, on n2) printed no final line"; }
grep -q "^2: worker.1: training" "$work/step2.log" ||
  { tail -20 "$work/step2.log" >&2; fail "slurm: step 2: worker.1 (rank 2, n1's second task) did not train"; }
echo "   ok: -m cyclic step trained 120 steps (ps on n1:$port), every task exited 0"

# Step 3: the example batch script of deploy/ as it is, on the 3 nodes here.
echo "== slurm: sbatch --wait -N3 deploy/slurm/train.sbatch"
if ! timeout 180 sbatch --wait -N3 --ntasks-per-node=1 --time=10 --output="$work/sbatch.out" \
     --export="ALL,DTF_RUN=$bin/dtf-run,PLAN=$work/mlp.plan,MODEL_DIR=$work/model3,TLS_DIR=$work/tls" \
     "$root/deploy/slurm/train.sbatch" > "$work/sbatch.log" 2>&1; then
  cat "$work/sbatch.log" "$work/sbatch.out" >&2 || true
  squeue -o '%i %T %r' >&2 || true
  fail "slurm: deploy/slurm/train.sbatch failed"
fi
grep -q "^dtf-train: done" "$work/sbatch.out" && grep -q "^1: final:" "$work/sbatch.out" ||
  { tail -20 "$work/sbatch.out" >&2; fail "slurm: the batch script's step did not finish"; }
echo "   ok: deploy/slurm/train.sbatch trained on n[1-3] and exited 0"
echo "slurm: PASS"
