#!/usr/bin/env bash
# check.sh of the GPU bundle (scripts/gpu-bundle.sh makes it): checks dtf on
# this machine's GPU from any folder, with a bare environment, in a few
# minutes. It finds the CUDA driver, cuBLAS, cuDNN and NCCL (the loader's
# cache, the usual folders, then Python environments' nvidia/*/lib), says
# what it found, runs the GPU unit tests on the real driver (dtf-gpu-tests
# with DTF_GPU=real: kernels against the CPU's, segments, streams and
# events, CUDA graphs, the towers' all-reduce where there are 2 GPUs), and
# for the seed CNN and the MLP (every op on /gpu:0) trains the same plan on
# the CPU and on the GPU, with CUDA graphs and without: the loss at every logged step against the CPU's, images/s; a
# label outside the classes; 1 ps + 2 GPU workers beside the same cluster
# on the CPU; dtf-run --profile; then compute-sanitizer (memcheck,
# racecheck) over a few steps and Nsight Compute's and Systems' per-kernel
# times where they are installed, and towers where there are 2 GPUs. One
# summary goes to $OUT/summary.md (else ./dtf-gpu-check/).
# Nothing is skipped silently: each part not run says why.
# usage: check.sh [--emulate] [--steps N]
#   --emulate  the same on dtf's CUDA emulation (no GPU needed), as CI runs it
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
emulate=0 steps=""
while [ $# -gt 0 ]; do
  case "$1" in
    --emulate) emulate=1 ;;
    --steps) steps=$2; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "check.sh: unknown argument '$1' (--emulate, --steps N)" >&2; exit 2 ;;
  esac
  shift
done
out=${OUT:-$PWD/dtf-gpu-check}
mkdir -p "$out"
summary=$out/summary.md
work=$(mktemp -d "${TMPDIR:-/tmp}/dtf-gpu-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
say() { echo "$*"; echo "$*" >> "$summary"; }
bad() { say "- FAIL: $*"; failures=$((failures + 1)); }
: > "$summary"
say "# dtf GPU check ($(cat "$here/VERSION" 2>/dev/null || echo unknown), $(date -u +%Y-%m-%dT%H:%MZ))"
say ""

mkdir -p "$work/lib"
tar -C "$work/lib" -xzf "$here/lib.tar.gz" || { echo "check.sh: cannot unpack $here/lib.tar.gz" >&2; exit 1; }
libpath=$work/lib

# find_lib NAME...: the first file of these names in the loader's cache, the
# usual folders, then Python environments (pip's nvidia-* wheels).
python_dirs() {
  for py in python3 /opt/conda/bin/python3 /usr/bin/python3; do
    command -v "$py" > /dev/null 2>&1 || continue
    "$py" - <<'PY' 2> /dev/null
import site, sys
for p in list(getattr(site, "getsitepackages", lambda: [])()) + [site.getusersitepackages()] + sys.path:
    print(p)
PY
  done
  ls -d /opt/conda/lib/python3*/site-packages /usr/local/lib/python3*/dist-packages \
    /usr/lib/python3/dist-packages "$HOME"/.local/lib/python3*/site-packages 2> /dev/null
}
find_lib() {
  local name found
  for name in "$@"; do
    found=$(ldconfig -p 2> /dev/null | awk -v n="$name" '$1 == n {print $NF; exit}')
    [ -n "$found" ] && { echo "$found"; return; }
    for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
             /usr/local/cuda-*/lib64 /usr/local/nvidia/lib64 /usr/lib/wsl/lib; do
      [ -e "$d/$name" ] && { echo "$d/$name"; return; }
    done
    while read -r p; do
      for f in "$p"/nvidia/*/lib/"$name"; do
        [ -e "$f" ] && { echo "$f"; return; }
      done
    done < <(python_dirs | sort -u)
  done
}

run_env=()
if [ "$emulate" = 1 ]; then
  say "mode: dtf's CUDA emulation (--emulate): no GPU is used; what only hardware shows is not measured"
  gpu_flags=(--emulate-gpus 1)
  ngpu=2
  steps=${steps:-40}
  # The emulation runs the GPU's work on this CPU, slowly: each run's
  # closing evaluation reads 20 batches of the test set, not all 200 (the
  # comparison is of the training losses).
  eval_flags=(--eval-steps 20)
else
  gpu_flags=()
  driver=$(find_lib libcuda.so.1)
  cublas=$(find_lib libcublas.so.13 libcublas.so.12)
  cudnn=$(find_lib libcudnn.so.9)
  nccl=$(find_lib libnccl.so.2)
  # cuDNN 9 compiles some of its engines at run time with NVRTC, which a
  # Python environment keeps in another folder (nvidia/cuda_nvrtc/lib).
  nvrtc=$(find_lib libnvrtc.so.13 libnvrtc.so.12)
  say "## Libraries found"
  # A library's version: the name its link resolves to (libcublas.so.13.1.0.3),
  # else the Python wheel that holds it.
  version() {
    [ -n "$1" ] || return 0
    local real; real=$(basename "$(readlink -f "$1")")
    local wheel; wheel=$(echo "$1" | grep -o "site-packages/nvidia/[a-z_]*" | head -1)
    echo " ($real${wheel:+, from the Python wheel ${wheel#site-packages/}})"
  }
  say "- CUDA driver: ${driver:-NOT FOUND}$(version "$driver")"
  say "- cuBLAS: ${cublas:-NOT FOUND}$(version "$cublas")"
  say "- cuDNN: ${cudnn:-NOT FOUND}$(version "$cudnn")"
  say "- NCCL: ${nccl:-NOT FOUND}$(version "$nccl")"
  say "- NVRTC (cuDNN's runtime-compiled engines): ${nvrtc:-not found (cuDNN uses its precompiled engines only)}$(version "$nvrtc")"
  say "- CPU: $(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
  [ -n "$driver" ] || { bad "no CUDA driver (libcuda.so.1): nothing can run on a GPU here"; exit 1; }
  # Their folders go on the loader's path too: cuBLAS needs cublasLt, cuDNN
  # its engine libraries, each beside it.
  for f in "$cublas" "$cudnn" "$nccl" "$nvrtc"; do
    [ -n "$f" ] && libpath=$libpath:$(dirname "$f")
  done
  run_env=(DTF_CUDA_DRIVER="$driver")
  [ -n "$cublas" ] && run_env+=(DTF_CUBLAS_LIBRARY="$cublas")
  [ -n "$cudnn" ] && run_env+=(DTF_CUDNN_LIBRARY="$cudnn")
  [ -n "$nccl" ] && run_env+=(DTF_NCCL_LIBRARY="$nccl")
  if command -v nvidia-smi > /dev/null 2>&1; then
    say "- device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
    ngpu=$(nvidia-smi -L | grep -c "^GPU" || true)
  else
    say "- device: nvidia-smi is not installed: the device is named by dtf-run's log below"
    ngpu=1
  fi
  steps=${steps:-300}
  eval_flags=()
fi
export LD_LIBRARY_PATH=$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
tar -C "$work" -xzf "$here/plans.tar.gz" || { echo "check.sh: cannot unpack $here/plans.tar.gz" >&2; exit 1; }
plans=$work/plans
# The plans read ./fashion-mnist.
ln -s "$here/data/fashion-mnist" "$work/fashion-mnist"
ln -s "$here/data/labels" "$work/labels"
cd "$work" || exit 1
every=$((steps / 5 > 0 ? steps / 5 : 1))

# The GPU unit tests first: on the real driver through the libraries found
# above (the same variables and loader path as dtf-run's), or on the
# bundle's emulation. Each test that needs what only the emulation has says
# so (SKIPPED, with the reason); a NOTE names each check left out.
say ""
say "## GPU unit tests (dtf-gpu-tests)"
say ""
if [ "$emulate" = 1 ]; then
  unit_env=(DTF_CUDA_EMU_LIBRARY="$here/bin/libdtf-cuda-emu.so")
else
  unit_env=("${run_env[@]}" DTF_GPU=real)
fi
# One process per test, as ctest runs them: the emulation is configured
# once per process (with the GPUs the test asks for), and a test that
# crashes on a real driver does not hide the others.
mkdir -p "$out/unit-tests"
: > "$out/unit-tests.log"
unit_rc=0
for t in $("$here/bin/dtf-gpu-tests" --gtest_list_tests | awk '/^[^ ]/ {s = $1} /^  / {print s $1}'); do
  env "${unit_env[@]}" timeout 60 "$here/bin/dtf-gpu-tests" --gtest_filter="$t" \
    --gtest_output="json:$out/unit-tests/$t.json" > "$out/unit-tests/$t.log" 2>&1
  rc=$?
  cat "$out/unit-tests/$t.log" >> "$out/unit-tests.log"
  [ "$rc" -eq 0 ] || { unit_rc=$rc; echo "$t $rc" >> "$out/unit-tests/exit-codes"; }
done
if ! table=$(python3 - "$out/unit-tests" "$out/unit-tests.log" <<'PY'
import glob, json, os, re, sys
folder, log = sys.argv[1], sys.argv[2]
counts, failed, skipped = {"passed": 0, "failed": 0, "skipped": 0}, [], []
codes = {}
if os.path.exists(f"{folder}/exit-codes"):
    codes = dict(line.split() for line in open(f"{folder}/exit-codes"))
reported = set()
for path in sorted(glob.glob(f"{folder}/*.json")):
    try:
        report = json.load(open(path))
    except ValueError as e:
        continue
    for suite in report.get("testsuites", []):
        for t in suite.get("testsuite", []):
            name = f"{suite['name']}.{t['name']}"
            reported.add(name)
            if t.get("result") == "SKIPPED":
                counts["skipped"] += 1
                # The reason follows gtest's "file:line: Skipped" line in
                # the test's output (its JSON report holds none).
                text = open(path[:-len(".json")] + ".log", errors="replace").read()
                m = re.search(r": Skipped\n(.*?)\n\[  SKIPPED \]", text, re.S)
                why = " ".join(m.group(1).split()) if m and m.group(1).strip() else "no reason given"
                skipped.append(f"{name}: {why}")
            elif t.get("failures"):
                counts["failed"] += 1
                first = t["failures"][0].get("failure", "").strip().splitlines()
                failed.append(f"{name}: {' '.join(first[:4])}")
            else:
                counts["passed"] += 1
for name, code in sorted(codes.items()):
    if name not in reported:
        counts["failed"] += 1
        failed.append(f"{name}: no report (exit status {code}: a crash, or the 60 s timeout); unit-tests.log has its output")
notes = sorted(set(re.findall(r"\[   NOTE   \] (.*)", open(sys.argv[2], errors="replace").read())))
print(f"- {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
for f in failed:
    print(f"- FAILED {f}")
for s in skipped:
    print(f"- skipped {s}")
for n in notes:
    print(f"- note: {n}")
sys.exit(1 if counts["failed"] or not counts["passed"] else 0)
PY
); then
  failures=$((failures + 1))
  table="$table"$'\n'"- FAIL: the GPU unit tests (exit status $unit_rc; unit-tests.log)"
elif [ "$unit_rc" -ne 0 ]; then
  failures=$((failures + 1))
  table="$table"$'\n'"- FAIL: dtf-gpu-tests exited with status $unit_rc (unit-tests.log)"
fi
say "$table"

# run NAME PLAN [ENV=...] -- [dtf-run flags]: the log in $out/NAME.log.
run() {
  local name=$1 plan=$2; shift 2
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" timeout 300 "$here/bin/dtf-run" "$plans/$plan.plan" --steps "$steps" \
    --log-every "$every" "${eval_flags[@]}" "$@" > "$out/$name.log" 2>&1
}
compare() { # compare MODEL TOL: losses of MODEL-gpu and MODEL-gpu-nographs against MODEL-cpu
  python3 - "$out" "$1" "$2" <<'PY'
import re, sys
out, model, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
def read(name):
    text = open(f"{out}/{model}-{name}.log", errors="replace").read()
    losses = [float(x) for x in re.findall(r"^step \d+/\d+\s+loss ([0-9.eE+-]+|nan|inf)", text, re.M)]
    # The last logged interval's rate (the first step's cuDNN algorithm
    # search and graph capture are behind it); the whole run's is in the log.
    ips = re.findall(r"^step \d+/\d+\s.*?\s([0-9.]+) img/s", text, re.M)
    return losses, float(ips[-1]) if ips else float("nan")
cpu = read("cpu")
worst_all = 0.0
for name in ("gpu", "gpu-nographs"):
    gpu = read(name)
    if not gpu[0] or len(gpu[0]) != len(cpu[0]):
        print(f"| {model} | {name} | {len(gpu[0])} logged losses against the CPU's {len(cpu[0])} | | FAIL |")
        worst_all = float("inf")
        continue
    worst = max(abs(a - b) / max(abs(a), 1e-6) for a, b in zip(cpu[0], gpu[0]))
    worst_all = max(worst_all, worst)
    verdict = "ok" if worst <= tol else "FAIL"
    print(f"| {model} | {name} | {worst:.2e} (tolerance {tol:g}) | {gpu[1]:.0f} (CPU {cpu[1]:.0f}, {gpu[1] / cpu[1]:.2f}x) | {verdict} |")
sys.exit(0 if worst_all <= tol else 1)
PY
}

say ""
say "## Training: the same plan on the CPU and on the GPU ($steps steps)"
models="mnist_cnn mlp mnist_cnn_bf16 mnist_cnn_tf32"
# The emulation computes a call that allows TF32 in f32 (it counts such
# calls: e2e.gpu_fallbacks_on_the_emulation): the TF32 plan would repeat
# the f32 one there.
if [ "$emulate" = 1 ]; then
  models="mnist_cnn mlp mnist_cnn_bf16"
  say "- mnist_cnn_tf32: not run on the emulation, which computes a call that allows TF32 in f32 (the f32 rows stand for it; e2e.gpu_fallbacks_on_the_emulation counts such calls)"
fi
say ""
say "| model | run | worst relative loss difference from the CPU | images/s (last logged interval) | verdict |"
say "| --- | --- | --- | --- | --- |"
for model in $models; do
  # The emulation checks the plumbing to the CPU's own precision; a real GPU
  # rounds otherwise (other summation orders and algorithms; TF32 is off
  # unless a plan says allow_tf32). Under mixed_bfloat16 each matmul rounds
  # its inputs to 8 bits of mantissa, where oneDNN's and cuDNN's summation
  # orders part more.
  case "$emulate/$model" in
    1/*_bf16) tol=1e-2 ;;
    1/*) tol=3e-3 ;;
    0/*_bf16 | 0/*_tf32) tol=1e-1 ;;
    *) tol=3e-2 ;;
  esac
  run "$model-cpu" "$model" DTF_CUDA_DRIVER=/nonexistent/libcuda.so.1 -- ||
    { bad "$model on the CPU failed: $(tail -2 "$out/$model-cpu.log")"; continue; }
  ok=1
  run "$model-gpu" "$model" "${run_env[@]}" DTF_CUDA_GRAPHS=1 -- "${gpu_flags[@]}" ||
    { bad "$model on the GPU failed: $(tail -2 "$out/$model-gpu.log")"; ok=0; }
  run "$model-gpu-nographs" "$model" "${run_env[@]}" DTF_CUDA_GRAPHS=0 -- "${gpu_flags[@]}" ||
    { bad "$model on the GPU without CUDA graphs failed: $(tail -2 "$out/$model-gpu-nographs.log")"; ok=0; }
  [ "$ok" = 1 ] || continue
  # Every op of the plan has a GPU kernel: none may fall back to the CPU.
  if grep -q "soft placement: .* run on .*CPU" "$out/$model-gpu.log"; then
    bad "$model: ops ran on the CPU instead: $(grep -m1 'soft placement:' "$out/$model-gpu.log")"
  fi
  grep -q "device:GPU:0" "$out/$model-gpu.log" || bad "$model: the GPU run's log names no GPU:0"
  if [ "$emulate" = 1 ]; then
    grep -qE "cuda emulation: [1-9][0-9]* kernel launches" "$out/$model-gpu.log" ||
      bad "$model: the emulation launched no kernel"
  fi
  case "$model" in
    *_bf16) grep -q "precision: mixed_bfloat16: .* on a GPU" "$out/$model-gpu.log" ||
      bad "$model: dtf-run's log does not say that its bf16 matmuls run on a GPU" ;;
  esac
  table=$(compare "$model" "$tol") || failures=$((failures + 1))
  say "$table"
done

# A label outside the classes (tests/e2e/gpu_labels.sh): the sparse
# cross-entropy's row kernel reports it from the GPU (an atomic word in
# mapped pinned memory, read after the step), and the step fails with the
# CPU's message, at the same step; good labels train every step.
say ""
say "## A label outside the classes, on the GPU"
labels() { # labels NAME PLAN [ENV...]: rc, the log in $out/labels-NAME.log
  local name=$1 plan=$2; shift 2
  rc=0
  env "$@" timeout 120 "$here/bin/dtf-run" "$plans/$plan.plan" --log-every 4 "${gpu_flags[@]}" \
    > "$out/labels-$name.log" 2>&1 || rc=$?
}
labels cpu labels_bad_soft DTF_CUDA_DRIVER=/nonexistent/libcuda.so.1
cpu_error=$(grep -m1 "^dtf-run: error: " "$out/labels-cpu.log" | sed -E 's/^dtf-run: error: (step [0-9]+): .*(dtf\.sparse_softmax_cross_entropy)[^:]*: (label .*)$/\1: \2: \3/')
labels gpu labels_bad "${run_env[@]}"
gpu_error=$(grep -m1 "^dtf-run: error: " "$out/labels-gpu.log" | sed -E 's/^dtf-run: error: (step [0-9]+): .*(dtf\.sparse_softmax_cross_entropy)[^:]*: (label .*)$/\1: \2: \3/')
if [ "$rc" -eq 0 ] || [ "$rc" -ge 128 ]; then
  bad "a label of 7 for 3 classes on the GPU: exit status $rc (want a failed step): $(tail -2 "$out/labels-gpu.log")"
elif [ -z "$cpu_error" ] || [ "$gpu_error" != "$cpu_error" ]; then
  bad "a label of 7 on the GPU: '$gpu_error', on the CPU: '$cpu_error'"
else
  say "- a label of 7 for 3 classes fails the step as on the CPU: $gpu_error"
fi
labels good labels_good "${run_env[@]}"
if [ "$rc" -ne 0 ] || ! grep -q "^step 40/40" "$out/labels-good.log"; then
  bad "good labels on the GPU did not train 40 steps: $(tail -2 "$out/labels-good.log")"
else
  say "- good labels: 40 steps, no report"
fi

if [ "$emulate" = 0 ]; then
  say ""
  say "## Steady images/s (3000 steps, batch of the plan, last logged interval)"
  say ""
  for spec in "mnist_cnn DTF_CUDA_GRAPHS=1" "mnist_cnn DTF_CUDA_GRAPHS=0" "mnist_cnn_bf16 DTF_CUDA_GRAPHS=1" \
              "mnist_cnn_tf32 DTF_CUDA_GRAPHS=1" \
              "mlp DTF_CUDA_GRAPHS=1" "mlp DTF_CUDA_GRAPHS=0"; do
    set -- $spec
    name="$1-long-${2#DTF_CUDA_GRAPHS=}"
    if env "${run_env[@]}" "$2" timeout 120 "$here/bin/dtf-run" "$plans/$1.plan" --steps 3000 \
         --log-every 500 --eval-steps 1 > "$out/$name.log" 2>&1; then
      say "- $1, $2: $(grep -E '^step' "$out/$name.log" | tail -1 | grep -oE '[0-9.]+ img/s')"
    else
      bad "$1 for 3000 steps ($2) failed: $(tail -2 "$out/$name.log")"
    fi
  done
fi

# A ps/worker cluster (tests/e2e/gpu_cluster.sh runs it on the emulation in
# CI): the seed CNN's plan (async updates, variables on the ps) on 1 ps and 2
# workers on 127.0.0.1, started by dtf-run --cluster; the workers run the
# graph on this GPU (both on GPU 0 where there is one); the ps keeps the
# variables in host memory and updates them on its CPU.
# The same plan with no driver is the CPU cluster beside it.
say ""
say "## A ps/worker cluster: 1 ps (CPU) + 2 workers on GPU 0, seed CNN, async"
say ""
cluster_json() { # cluster_json FILE: 1 ps + 2 workers on free loopback ports
  python3 - "$1" <<'PY'
import json, socket, sys
socks = [socket.socket() for _ in range(3)]
for s in socks:
    s.bind(("127.0.0.1", 0))
ports = [s.getsockname()[1] for s in socks]
json.dump({"ps": ["127.0.0.1:%d" % ports[0]],
           "worker": ["127.0.0.1:%d" % p for p in ports[1:]]}, open(sys.argv[1], "w"))
PY
}
cluster() { # cluster NAME STEPS [ENV...]: rc, the log in $out/cluster-NAME.log
  local name=$1 csteps=$2; shift 2
  cluster_json "$work/cluster-$name.json"
  local cflags=()
  [ "$emulate" = 1 ] && cflags=(--emulate-gpus 1)
  rc=0
  env "$@" timeout 240 "$here/bin/dtf-run" "$plans/mnist_cnn.plan" --cluster "$work/cluster-$name.json" \
    --steps "$csteps" --log-every $((csteps / 5)) --eval-steps 1 "${cflags[@]}" > "$out/cluster-$name.log" 2>&1 || rc=$?
}
cluster_rates() { # cluster_rates NAME [guard]: each worker's logged rates,
  # their last intervals summed, and the chief's final accuracy; with
  # `guard`, exit status 3 when a worker's last interval ran at less than
  # half its best (a ps fed by GPU workers slowed 4x over 2,000 steps on an
  # H200 while dtf-run left subnormal floats unflushed: bench/results/gpu.md).
  # The guard is for a real GPU's 2,000 steps; the emulation's few steps on
  # a loaded CI machine measure no decay.
  python3 - "$out/cluster-$1.log" "${2-}" <<'PY'
import re, sys
log = open(sys.argv[1], errors="replace").read().splitlines()
rates, seqs, decayed = [], [], []
for w in ("worker.0", "worker.1"):
    r = [float(m.group(1)) for l in log if l.startswith(w) for m in [re.search(r"^\S+ \| step \d+/\d+ .* ([0-9.]+) img/s", l)] if m]
    rates.append(r[-1] if r else float("nan"))
    seqs.append("%s %s" % (w, " -> ".join("%.0f" % x for x in r) or "none"))
    if len(r) >= 2 and r[-1] < 0.5 * max(r):
        decayed.append(seqs[-1])
final = [l for l in log if l.startswith("worker.0") and "final:" in l]
acc = re.search(r"accuracy=([0-9.]+)", final[-1]) if final else None
print("%.0f images/s (workers %.0f + %.0f, their last logged intervals; logged: %s); chief's final accuracy %s"
      % (sum(rates), rates[0], rates[1], "; ".join(seqs), acc.group(1) if acc else "none"))
if decayed and sys.argv[2] == "guard":
    print("the rate fell below half its best over the run: " + "; ".join(decayed))
    sys.exit(3)
PY
}
csteps=2000
[ "$emulate" = 1 ] && csteps=$steps
cluster gpu "$csteps" "${run_env[@]}"
if [ "$rc" -ne 0 ] || ! grep -q "the job finished" "$out/cluster-gpu.log"; then
  bad "the cluster with GPU workers failed (exit status $rc): $(tail -3 "$out/cluster-gpu.log")"
elif grep -qE "^worker\.[01] .*soft placement: " "$out/cluster-gpu.log"; then
  bad "a worker of the cluster ran its GPU ops on the CPU: $(grep -m1 -E '^worker.*soft placement: ' "$out/cluster-gpu.log")"
elif ! rates=$(cluster_rates gpu "$([ "$emulate" = 0 ] && echo guard)"); then
  bad "GPU workers, $csteps steps each: $rates"
else
  say "- GPU workers, $csteps steps each: $rates"
  say "- the ps: $(grep -m1 -E '^ps\.0 .*updates applied' "$out/cluster-gpu.log" | sed 's/^ps\.0 *| //')"
fi
# The same with subnormals kept (DTF_FLUSH_SUBNORMALS=0, every task): what
# the flush is worth here, side by side; a decay in this row is expected
# and fails nothing.
cluster kept "$csteps" "${run_env[@]}" DTF_FLUSH_SUBNORMALS=0
if [ "$rc" -ne 0 ] || ! grep -q "the job finished" "$out/cluster-kept.log"; then
  bad "the cluster with GPU workers and DTF_FLUSH_SUBNORMALS=0 failed (exit status $rc): $(tail -3 "$out/cluster-kept.log")"
else
  say "- the same, subnormals kept (DTF_FLUSH_SUBNORMALS=0): $(cluster_rates kept)"
fi
if [ "$emulate" = 0 ]; then
  cluster cpu 300 DTF_CUDA_DRIVER=/nonexistent/libcuda.so.1
  if [ "$rc" -ne 0 ]; then
    bad "the same cluster on the CPU failed (exit status $rc): $(tail -3 "$out/cluster-cpu.log")"
  else
    say "- the same plan with no driver (workers on the CPU, $(nproc) cores shared), 300 steps each: $(cluster_rates cpu)"
  fi
fi

if [ "$emulate" = 0 ]; then
  say ""
  say "## dtf-run --profile: each GPU op timed by CUDA events (seed CNN, 300 steps, no CUDA graphs)"
  say ""
  if env "${run_env[@]}" timeout 120 "$here/bin/dtf-run" "$plans/mnist_cnn.plan" --steps 300 \
       --log-every 100 --eval-steps 1 --profile > "$out/profile.log" 2>&1; then
    say '```'
    say "$(sed -n '/^profile:/,/^final:/p' "$out/profile.log" | grep -v '^final:')"
    say '```'
  else
    bad "dtf-run --profile failed: $(tail -2 "$out/profile.log")"
  fi
fi

say ""
say "## Sanitizers and kernel times"
if [ "$emulate" = 1 ]; then
  say "- compute-sanitizer and Nsight Systems need a real GPU: not run on the emulation"
else
  if command -v compute-sanitizer > /dev/null 2>&1; then
    # memcheck over every kernel; racecheck (about 100 times slower: 3 steps
    # and the closing evaluation of every kernel ran past 300 s on an H200)
    # over dtf's own fused kernels, which are the ones dtf's code generation
    # could make racy.
    for tool in memcheck racecheck; do
      case $tool in
        memcheck) sflags=() what="every kernel, seed CNN, 3 steps" ;;
        racecheck) sflags=(--kernel-name kns=dtf_) what="dtf's fused kernels, seed CNN, 3 steps" ;;
      esac
      if env "${run_env[@]}" timeout 240 compute-sanitizer --tool "$tool" "${sflags[@]}" --error-exitcode 9 \
          "$here/bin/dtf-run" "$plans/mnist_cnn.plan" --steps 3 --eval-steps 1 > "$out/sanitizer-$tool.log" 2>&1; then
        say "- compute-sanitizer $tool, $what: $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer-$tool.log" || echo 'no summary line')"
      else
        bad "compute-sanitizer $tool (exit status or the 240 s timeout): $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer-$tool.log" || tail -1 "$out/sanitizer-$tool.log")"
      fi
    done
  else
    say "- NOT RUN: compute-sanitizer is not installed here"
  fi
  # Per-kernel GPU times: Nsight Compute's gpu__time_duration (one pass per
  # kernel, the clocks left as they are) over the seed CNN's first steps.
  if command -v ncu > /dev/null 2>&1; then
    if env "${run_env[@]}" timeout 240 ncu --clock-control none --metrics gpu__time_duration.sum --launch-skip 400 \
         --launch-count 600 --csv --log-file "$out/ncu.csv" "$here/bin/dtf-run" "$plans/mnist_cnn.plan" \
         --steps 30 --eval-steps 1 > "$out/ncu.log" 2>&1; then
      ktable=$(python3 - "$out/ncu.csv" <<'PY'
import csv, collections, statistics, sys
rows = [r for r in csv.reader(open(sys.argv[1], errors="replace")) if len(r) > 5]
if not rows:
    sys.exit("no kernel rows")
head = rows[0]
name_i, metric_i, unit_i, value_i = (head.index(k) for k in ("Kernel Name", "Metric Name", "Metric Unit", "Metric Value"))
times = collections.defaultdict(list)
scales = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}
for r in rows[1:]:
    if r[metric_i] != "gpu__time_duration.sum":
        continue
    if r[unit_i] not in scales:
        sys.exit(f"unknown time unit {r[unit_i]!r}")
    times[r[name_i]].append(float(r[value_i].replace(",", "")) * scales[r[unit_i]])
# The window is whole steps but its two ends: the steps it holds are the most
# common launch count of dtf's own kernels (each runs once a step); a kernel
# launched fewer times is cut by an end of the window. The first 400 launches
# (step 1 and its cuDNN algorithm search, which would time its candidates
# under the profiler and pick another algorithm than an unprofiled run) are
# left out.
counts = collections.Counter(len(v) for k, v in times.items() if k.startswith("dtf_"))
if not counts:
    sys.exit("no dtf kernel in the window")
steps = counts.most_common(1)[0][0]
steady = {k: v for k, v in times.items() if len(v) >= steps - 1}
edge = {k: v for k, v in times.items() if len(v) < steps - 1}
per_step = sum(sum(v) for v in steady.values()) / steps
print(f"- per-kernel GPU times (ncu gpu__time_duration, clocks as they are, seed CNN, batch 50, launches 401-1000 "
      f"of 30 steps, about {steps} steps): {len(steady)} kernels run every step, about {per_step:.0f} us of kernel "
      f"time per step; {len(edge)} others ran fewer times (cut by the window's ends), "
      f"{sum(map(sum, edge.values())) / 1e3:.2f} ms in all. The step's kernels by total:")
print("")
print("| kernel | launches | median us | total us |")
print("| --- | --- | --- | --- |")
for name, v in sorted(steady.items(), key=lambda kv: -statistics.median(kv[1]) * len(kv[1]))[:20]:
    short = name if len(name) <= 90 else name[:87] + "..."
    print(f"| {short.replace('|', '/')} | {len(v)} | {statistics.median(v):.1f} | {sum(v):.0f} |")
PY
) && say "$ktable" || bad "ncu ran but its report could not be read: $(head -c 300 "$out/ncu.csv")"
    else
      bad "ncu failed: $(tail -2 "$out/ncu.log")"
    fi
  else
    say "- NOT RUN: Nsight Compute (ncu) is not installed here"
  fi
  if command -v nsys > /dev/null 2>&1; then
    if env "${run_env[@]}" nsys profile --force-overwrite true -o "$out/kernels" \
         "$here/bin/dtf-run" "$plans/mnist_cnn.plan" --steps 50 > "$out/nsys.log" 2>&1 &&
       nsys stats --report cuda_gpu_kern_sum "$out/kernels.nsys-rep" > "$out/kernels.txt" 2>&1; then
      say "- per-kernel times (Nsight Systems, seed CNN, 50 steps): $out/kernels.txt"
    else
      bad "nsys profile failed: $(tail -1 "$out/nsys.log")"
    fi
  else
    say "- NOT RUN: Nsight Systems (nsys) is not installed here: kernels not timed one by one"
  fi
fi

say ""
say "## Towers"
if [ "$ngpu" -lt 2 ]; then
  say "- NOT RUN: one GPU on this machine; towers over 2 GPUs need two"
else
  tflags=(--gpu-towers 2)
  [ "$emulate" = 1 ] && tflags=(--emulate-gpus 2 --gpu-towers 2)
  if run "mnist_cnn-towers" mnist_cnn "${run_env[@]}" -- "${tflags[@]}"; then
    say "- towers over 2 GPUs, seed CNN: $(grep -m1 -o 'examples_per_sec=[0-9.]*' "$out/mnist_cnn-towers.log")"
  else
    bad "towers over 2 GPUs failed: $(tail -2 "$out/mnist_cnn-towers.log")"
  fi
fi

say ""
if [ "$failures" -eq 0 ]; then say "RESULT: PASS"; else say "RESULT: $failures FAILED"; fi
echo "check.sh: summary in $summary, logs in $out"
[ "$failures" -eq 0 ]
