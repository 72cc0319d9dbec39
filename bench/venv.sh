# shellcheck shell=bash
# Sourced by the benchmark scripts: makes (once) and reuses the peers'
# virtualenv with PyTorch and TensorFlow from PyPI, outside the repository.
#
#   DTF_BENCH_VENV  where (default ~/.cache/dtf-bench-venv)
#   DTF_BENCH_TORCH, DTF_BENCH_TF   pip requirements
#                   (default torch==2.15.0, tensorflow-cpu==2.21.0)
#
# PyPI's torch wheel for Linux x86-64 is the CUDA build: installed with
# --no-deps it does not import (libtorch.so needs libcufile.so.0,
# libcusparseLt.so.0 and libnvshmem_host.so.3 from the nvidia-* wheels), and
# the CPU-only wheels live on PyTorch's own index, not on PyPI. So the
# nvidia-* dependencies come along (most of the virtualenv's 5 GB); the
# benchmarks run it on the CPU. tensorflow-cpu is TensorFlow's CPU-only
# package on PyPI.

# bench_venv: sets $bench_py to the virtualenv's python, making or updating
# the virtualenv when its requirements changed.
bench_venv() {
  local venv=${DTF_BENCH_VENV:-$HOME/.cache/dtf-bench-venv}
  local reqs="${DTF_BENCH_TORCH:-torch==2.15.0} ${DTF_BENCH_TF:-tensorflow-cpu==2.21.0}"
  bench_py=$venv/bin/python
  if [[ -x $bench_py && "$(cat "$venv/.dtf-bench-reqs" 2>/dev/null)" == "$reqs" ]]; then
    return 0
  fi
  echo "== making the peers' virtualenv in $venv ($reqs); first time only, a few minutes"
  local t0=$SECONDS
  if ! python3 -m venv "$venv"; then
    echo "bench: python3 -m venv $venv failed (apt-get install python3-venv)" >&2
    return 1
  fi
  # shellcheck disable=SC2086
  if ! "$venv/bin/pip" install --quiet $reqs; then
    echo "bench: pip install $reqs into $venv failed" >&2
    return 1
  fi
  echo "$reqs" > "$venv/.dtf-bench-reqs"
  echo "   done in $((SECONDS - t0)) s, $(du -sh "$venv" | cut -f1)"
}
