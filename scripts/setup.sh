#!/usr/bin/env bash
# Installs, idempotently, every Debian package that dtf needs to build, test and train.
# Fast when everything is present: one dpkg-query, no apt-get update.
set -euo pipefail

PACKAGES=(
  # build
  cmake ninja-build ccache pkg-config g++ python3 zlib1g-dev
  # compiler: MLIR/LLVM 19 with lit and FileCheck; clang + libFuzzer for the fuzz target
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  clang-19 libclang-rt-19-dev libfuzzer-19-dev
  # grammar: ANTLR4 tool and C++ runtime
  antlr4 libantlr4-runtime-dev default-jre-headless
  # cluster specs (cluster.json, TF_CONFIG)
  nlohmann-json3-dev
  # RPC
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  # TLS between the tasks: the launcher makes a CA and certificates (OpenSSL)
  libssl-dev
  # kernels
  libdnnl-dev libopenblas-dev
  # tests and benchmarks
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  # data
  dataset-fashion-mnist
  # editor tests run the Vim files in both editors
  vim neovim
  # deployment tests: a real Slurm (tests/e2e/slurm.sh); ip, tc and the bridge
  # of the network-namespace test (tests/e2e/netns.sh)
  slurmctld slurmd slurm-client munge iproute2
)

missing=()
for p in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = installed ] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup: installing ${#missing[@]} missing package(s): ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done" >&2
