#!/usr/bin/env bash
# Checks runtime/gpu/CudaApi.h against the real CUDA headers: for every
# driver, cuBLAS, cuDNN and NCCL entry point dtf declares (the X-macro
# lists), the number of parameters and the size of each parameter and of
# the result must equal those of the header's declaration (dtf builds
# without CUDA headers and calls through dlsym/cuGetProcAddress, so nothing
# else catches a wrong declaration before a real GPU does). The driver's
# names resolve as the headers' macros resolve them (cuMemAlloc is
# cuMemAlloc_v2), which is what cuGetProcAddress returns for CUDA 12.0.
# usage: scripts/cuda-api-audit.sh [CUDA_INCLUDE_DIR]   (default /usr/local/cuda/include)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
inc=${1:-/usr/local/cuda/include}
for h in cuda.h cublas_v2.h cudnn.h nccl.h; do
  [ -f "$inc/$h" ] || { echo "cuda-api-audit: no $inc/$h (pass the CUDA include folder)" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/sig.h" <<'EOF'
#include <cstddef>
#include <cstdio>
template <typename F> struct Sig;
template <typename R, typename... A> struct Sig<R (*)(A...)> {
  static void print(const char *name) {
    const size_t sizes[] = {sizeof(R), sizeof(A)...};
    std::printf("%s %zu:", name, sizeof...(A));
    for (size_t s : sizes)
      std::printf(" %zu", s);
    std::printf("\n");
  }
};
EOF
cat > "$tmp/ours.cpp" <<'EOF'
#include "runtime/gpu/CudaApi.h"
#include "sig.h"
using namespace dtf::gpu::cuda;
#define P(name, params) Sig<int(*) params>::print(#name);
int main() {
  DTF_CUDA_DRIVER_FUNCTIONS(P) DTF_CUBLAS_FUNCTIONS(P) DTF_CUDNN_FUNCTIONS(P)
  DTF_NCCL_FUNCTIONS(P)
}
EOF
c++ -std=c++17 -I"$root" -I"$tmp" "$tmp/ours.cpp" -o "$tmp/ours"
"$tmp/ours" > "$tmp/ours.txt"
# The headers' side: the same names. cublas_api.h overloads cublasGemmEx and
# cublasGemmStridedBatchedEx in C++ (inline forms taking a cudaDataType
# compute type), so their exported C forms are written out here, and
# checked to be declared by taking their address as that type.
gemm_ex='cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *, const void *, cudaDataType, int, const void *, cudaDataType, int, const void *, void *, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t)'
batched_ex='cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *, const void *, cudaDataType, int, long long, const void *, cudaDataType, int, long long, const void *, void *, cudaDataType, int, long long, int, cublasComputeType_t, cublasGemmAlgo_t)'
{
  printf '#include <cuda.h>\n#include <cublas_v2.h>\n#include <cudnn.h>\n#include <nccl.h>\n#include "sig.h"\n'
  printf 'static_assert(sizeof(static_cast<%s>(&cublasGemmEx)) > 0, "cublasGemmEx");\n' "$gemm_ex"
  printf 'static_assert(sizeof(static_cast<%s>(&cublasGemmStridedBatchedEx)) > 0, "cublasGemmStridedBatchedEx");\n' "$batched_ex"
  printf 'int main() {\n'
  while read -r name _; do
    case $name in
      cublasGemmEx) printf '  Sig<%s>::print("%s");\n' "$gemm_ex" "$name" ;;
      cublasGemmStridedBatchedEx) printf '  Sig<%s>::print("%s");\n' "$batched_ex" "$name" ;;
      *) printf '  Sig<decltype(&::%s)>::print("%s");\n' "$name" "$name" ;;
    esac
  done < "$tmp/ours.txt"
  printf '}\n'
} > "$tmp/headers.cpp"
c++ -std=c++17 -w -I"$inc" -I"$tmp" "$tmp/headers.cpp" -o "$tmp/headers"
"$tmp/headers" > "$tmp/headers.txt"
if ! diff "$tmp/ours.txt" "$tmp/headers.txt" > "$tmp/diff.txt"; then
  echo "cuda-api-audit: runtime/gpu/CudaApi.h differs from $inc (<: dtf's, >: the headers'; name arity: result and parameter sizes):" >&2
  cat "$tmp/diff.txt" >&2
  exit 1
fi
echo "cuda-api-audit: $(wc -l < "$tmp/ours.txt") entry points of runtime/gpu/CudaApi.h match $inc in arity and parameter sizes"
