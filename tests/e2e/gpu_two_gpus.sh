#!/usr/bin/env bash
# End to end: two GPUs in one task. tests/e2e/two_gpus.dtf places its hidden
# layer on /gpu:0 and its logits on /gpu:1; on 2 emulated GPUs each matmul
# runs on its own device (the value between them crosses through the host),
# and the loss at every logged step matches the run on a machine without a
# driver (the CPU path). On 1 emulated GPU the ops of /gpu:1 move to the CPU
# under soft placement, which says why; --emulate-gpus 0 is a usage error.
# With session(gpu_towers = 2) on 4 emulated GPUs, two such towers in one
# process log the losses of one tower (the second GPUs' variables are
# updated on the host: NCCL refuses buffers off its communicator's GPU).
# usage: gpu_two_gpus.sh BIN_DIR WORK_DIR
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh" "$@"
work=$work/gpu_two_gpus
mkdir -p "$work"
"$bin/dtfc" "$root/tests/e2e/two_gpus.dtf" -o "$work/two.plan"
"$bin/dtf-run" "$work/two.plan" --emulate-gpus 2 --log-every 25 > "$work/two.log" 2>&1 ||
  { tail -20 "$work/two.log" >&2; fail "the run on 2 emulated GPUs failed"; }
DTF_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$bin/dtf-run" "$work/two.plan" --log-every 25 \
  > "$work/cpu.log" 2>&1 || { tail -20 "$work/cpu.log" >&2; fail "the CPU run failed"; }
"$bin/dtf-run" "$work/two.plan" --emulate-gpus 1 --log-every 25 > "$work/one.log" 2>&1 ||
  { tail -20 "$work/one.log" >&2; fail "the run on 1 emulated GPU failed"; }
grep -q "dtf.matmul (.*two_gpus.dtf:7:23): /job:localhost/replica:0/task:0/device:GPU:0$" "$work/two.log" ||
  fail "the hidden layer's matmul is not on GPU 0"
grep -q "dtf.matmul (.*two_gpus.dtf:8:28): /job:localhost/replica:0/task:0/device:GPU:1$" "$work/two.log" ||
  fail "the logits' matmul is not on GPU 1"
grep -q "soft placement: this machine has 1 GPU" "$work/one.log" ||
  fail "on 1 GPU, soft placement does not say why /gpu:1's ops moved"
# A bad count is a usage error (exit 2) that says what it takes.
rc=0; "$bin/dtf-run" "$work/two.plan" --emulate-gpus 0 > "$work/bad.log" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "emulate-gpus expects a GPU count from 1 to 16, got '0'" "$work/bad.log" ||
  fail "--emulate-gpus 0: exit $rc, $(cat "$work/bad.log")"
steps() { grep -E "^step " "$1" | sed -E 's/ +[0-9]+ img\/s.*//'; }
[ "$(steps "$work/two.log")" = "$(steps "$work/cpu.log")" ] && [ -n "$(steps "$work/cpu.log")" ] ||
  fail "the logged losses differ: $(steps "$work/two.log") vs $(steps "$work/cpu.log")"
grep "cuda emulation:" "$work/two.log" | grep -qE "[1-9][0-9]* cuBLAS calls" ||
  fail "the emulation ran no cuBLAS call"
# Two towers of this model in one process (GPUs 0, 1 and 2, 3; NCCL over
# 0 and 2): the variables of each tower's second GPU cannot go through the
# communicators of the first GPUs (NCCL refuses such buffers, as the
# emulation does), so they are updated on the host; the curve is the one
# tower's.
sed 's/session = session(soft_placement = true, log_device_placement = true)/session = session(soft_placement = true, gpu_towers = 2)/' \
  "$root/tests/e2e/two_gpus.dtf" > "$work/towers.dtf"
cmp -s "$root/tests/e2e/two_gpus.dtf" "$work/towers.dtf" && fail "could not give two_gpus.dtf towers"
"$bin/dtfc" "$work/towers.dtf" -o "$work/towers.plan"
"$bin/dtf-run" "$work/towers.plan" --emulate-gpus 4 --log-every 25 > "$work/towers.log" 2>&1 ||
  { tail -5 "$work/towers.log" >&2; fail "two model-parallel towers in one process failed"; }
"$bin/dtf-run" "$work/towers.plan" --emulate-gpus 2 --gpu-towers 1 --log-every 25 > "$work/tower1.log" 2>&1 ||
  { tail -5 "$work/tower1.log" >&2; fail "one model-parallel tower failed"; }
grep -q "2 variables stay on every tower's GPU" "$work/towers.log" ||
  fail "the towers do not keep the first GPU's 2 variables: $(grep 'towers:' "$work/towers.log")"
# (The same global batch; the towers' gradients are summed in another
# order: equal within 2e-3 relative, as e2e.gpu_towers_match_one_gpu.)
python3 - "$work/towers.log" "$work/tower1.log" <<'PY' ||
import re, sys
def losses(path):
    return [float(x) for x in re.findall(r"^step \d+/\d+\s+loss ([0-9.]+)", open(path).read(), re.M)]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
sys.exit(0 if len(a) == 4 and len(a) == len(b) and all(abs(x - y) <= 2e-3 * y for x, y in zip(a, b)) else 1)
PY
  fail "2 model-parallel towers differ from one: $(steps "$work/towers.log") vs $(steps "$work/tower1.log")"
echo "e2e: 2 emulated GPUs match the CPU path: $(steps "$work/two.log" | tail -1)"
