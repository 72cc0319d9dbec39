// The cuBLAS and cuDNN halves of libdtf-cuda-emu.so: the entry points dtf
// calls, checked like the device memory they touch, run by reference
// implementations (a plain loop under the products) on the handle's stream.
#include "runtime/core/Bf16.h"
#include "runtime/core/F16.h"
#include "runtime/gpu/emu/EmuDnn.h"
#include "runtime/gpu/emu/EmuQueue.h"
#include "runtime/gpu/emu/EmuState.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <limits>
#include <vector>

namespace dtf::gpu::emu {
namespace {

struct BlasHandle {
  CUstream stream = nullptr;
  int mathMode = CUBLAS_DEFAULT_MATH;
};
struct PoolDesc {
  int mode = 0, wh = 1, ww = 1, padH = 0, padW = 0, sh = 1, sw = 1;
};

// Column-major C[m,n] = alpha op(A) op(B) + beta C by a plain loop over the
// definition: each element sums its k products in order, in float. It
// calls neither the CPU's matmul nor oneDNN, so a layout or transposition
// bug in dtf's calls gives a wrong result instead of the CPU's (and the
// rounding differs from the CPU kernel's blocked sums). op(A) is first
// copied into a contiguous column-major m x k buffer, so that the inner loop
// runs down a column, and 8 columns of C are summed at once (each element
// still in k order), so that op(A) is read n / 8 times, not n.
void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float *a,
          int lda, const float *b, int ldb, float beta, float *c, int ldc) {
  std::vector<float> opA(static_cast<size_t>(m) * size_t(k));
  for (int p = 0; p < k; ++p)
    for (int i = 0; i < m; ++i)
      opA[size_t(p) * m + i] =
          ta ? a[size_t(i) * lda + p] : a[size_t(p) * lda + i];
  constexpr int kCols = 8;
  std::vector<float> acc(size_t(kCols) * size_t(m));
  for (int j0 = 0; j0 < n; j0 += kCols) {
    const int cols = std::min(kCols, n - j0);
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int p = 0; p < k; ++p) {
      const float *col = opA.data() + size_t(p) * m;
      for (int jj = 0; jj < cols; ++jj) {
        const int j = j0 + jj;
        const float bpj = tb ? b[size_t(p) * ldb + j] : b[size_t(j) * ldb + p];
        float *sum = acc.data() + size_t(jj) * m;
        for (int i = 0; i < m; ++i)
          sum[i] += col[i] * bpj;
      }
    }
    for (int jj = 0; jj < cols; ++jj) {
      float *cj = c + size_t(j0 + jj) * ldc;
      const float *sum = acc.data() + size_t(jj) * m;
      for (int i = 0; i < m; ++i)
        cj[i] = alpha * sum[i] + (beta == 0.0f ? 0.0f : beta * cj[i]);
    }
  }
}

// Elements of a column-major matrix of `rows` x `cols` with leading
// dimension ld, and its bytes in f32.
size_t matrixElements(int rows, int cols, int ld) {
  if (rows == 0 || cols == 0)
    return 0;
  return size_t(ld) * (cols - 1) + rows;
}
size_t matrixBytes(int rows, int cols, int ld) {
  return matrixElements(rows, cols, ld) * sizeof(float);
}

// cudaDataType's element size for cublasGemmEx's matrices; 0 for a type
// the emulation does not take.
size_t blasElementSize(int type) {
  return type == CUDA_R_32F                          ? 4
         : type == CUDA_R_16BF || type == CUDA_R_16F ? 2
                                                     : 0;
}
const char *blasTypeName(int type) {
  return type == CUDA_R_32F    ? "f32"
         : type == CUDA_R_16BF ? "bf16"
         : type == CUDA_R_16F  ? "f16"
                               : "an unknown type";
}
int dnnTypeOfBlas(int type) {
  return type == CUDA_R_16BF  ? CUDNN_DATA_BFLOAT16
         : type == CUDA_R_16F ? CUDNN_DATA_HALF
                              : CUDNN_DATA_FLOAT;
}

// The math an f32 cuBLAS call of the handle's mode runs: TF32 tensor ops or
// f32 FMA.
const char *sgemmMath(int mode) {
  return (mode & ~16) == CUBLAS_TF32_TENSOR_OP_MATH ? "tf32-tensor-op" : "fma";
}

int blasCheck(const void *p, size_t bytes, const char *what, Work *w) {
  if (bytes == 0)
    return CUBLAS_STATUS_SUCCESS;
  return checkDevice(uintptr_t(p), bytes, what, w) == CUDA_SUCCESS
             ? CUBLAS_STATUS_SUCCESS
             : CUBLAS_STATUS_EXECUTION_FAILED;
}

} // namespace

std::vector<float> widened(const void *p, size_t n, int dtype) {
  std::vector<float> out(n);
  const auto *h = static_cast<const uint16_t *>(p);
  if (dtype == CUDNN_DATA_BFLOAT16)
    widenFromBf16(h, int64_t(n), out.data());
  else if (dtype == CUDNN_DATA_HALF)
    for (size_t i = 0; i < n; ++i)
      out[i] = f32FromF16(h[i]);
  else if (n)
    std::memcpy(out.data(), p, n * sizeof(float));
  return out;
}

void blendInto(void *out, int dtype, const float *value, int64_t n, float alpha,
               float beta) {
  auto *f = static_cast<float *>(out);
  auto *h = static_cast<uint16_t *>(out);
  const bool bf16 = dtype == CUDNN_DATA_BFLOAT16;
  for (int64_t i = 0; i < n; ++i) {
    // alpha 1 and beta 0 (every cast dtf makes) keep the value as it is:
    // -0 stays -0 and a NaN's payload reaches the rounding untouched.
    float v = alpha == 1.0f ? value[i] : alpha * value[i];
    if (beta != 0)
      v += beta * (dtype == CUDNN_DATA_FLOAT ? f[i]
                   : bf16                    ? f32FromBf16(h[i])
                                             : f32FromF16(h[i]));
    if (dtype == CUDNN_DATA_FLOAT)
      f[i] = v;
    else
      h[i] = bf16 ? bf16FromF32(v) : f16FromF32(v);
  }
}

void countTypedCall(const std::string &call, const char *type,
                    const char *math) {
  ++machine().counters.typedCalls[call + " " + type + " " + math];
}

} // namespace dtf::gpu::emu

using namespace dtf::gpu::emu;

extern "C" {

// --- cuBLAS --------------------------------------------------------------
cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) {
  *handle = reinterpret_cast<cublasHandle_t>(new BlasHandle());
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  delete reinterpret_cast<BlasHandle *>(handle);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, CUstream stream) {
  reinterpret_cast<BlasHandle *>(handle)->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, int mode) {
  // cublasMath_t: DEFAULT 0, TENSOR_OP 1 (deprecated), PEDANTIC 2, TF32 3;
  // the flag DISALLOW_REDUCED_PRECISION_REDUCTION (16) may be or-ed in.
  if ((mode & ~16) < 0 || (mode & ~16) > 3)
    return refuse(CUBLAS_STATUS_INVALID_VALUE,
                  "cublasSetMathMode: mode " + std::to_string(mode));
  reinterpret_cast<BlasHandle *>(handle)->mathMode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasSgemmStridedBatched(cublasHandle_t handle, int transa, int transb, int m,
                          int n, int k, const float *alpha, const float *a,
                          int lda, long long strideA, const float *b, int ldb,
                          long long strideB, const float *beta, float *c,
                          int ldc, long long strideC, int batch) {
  std::lock_guard<std::recursive_mutex> lock(machine().mutex);
  const bool ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || ldc < std::max(1, m) ||
      lda < std::max(1, ta ? k : m) || ldb < std::max(1, tb ? n : k))
    return refuse(CUBLAS_STATUS_INVALID_VALUE,
                  "cublasSgemm: a negative size or a leading dimension too "
                  "small");
  // A fault for the tests: cuBLAS calls that a capture cannot hold (as a
  // cuBLAS that allocates its workspace inside does), so that dtf's eager
  // fallback runs (DTF_EMU_CAPTURE_UNSAFE=cublas).
  static const bool unsafe = [] {
    const char *v = std::getenv("DTF_EMU_CAPTURE_UNSAFE");
    return v && std::string(v) == "cublas";
  }();
  if (unsafe && !capturingHere().empty())
    return refuseInCapture(CUBLAS_STATUS_NOT_SUPPORTED,
                           "cublasSgemm (DTF_EMU_CAPTURE_UNSAFE=cublas)");
  Work w{"cublasSgemm", nullptr, {}};
  if (batch > 0) {
    const size_t last = size_t(batch - 1);
    if (int r = blasCheck(a,
                          matrixBytes(ta ? k : m, ta ? m : k, lda) +
                              last * size_t(strideA) * sizeof(float),
                          "cublasSgemm A", &w))
      return r;
    if (int r = blasCheck(b,
                          matrixBytes(tb ? n : k, tb ? k : n, ldb) +
                              last * size_t(strideB) * sizeof(float),
                          "cublasSgemm B", &w))
      return r;
    if (int r = blasCheck(
            c, matrixBytes(m, n, ldc) + last * size_t(strideC) * sizeof(float),
            "cublasSgemm C", &w))
      return r;
  }
  const float al = *alpha, be = *beta;
  const int mode = reinterpret_cast<BlasHandle *>(handle)->mathMode;
  const bool tf32 = (mode & ~16) == CUBLAS_TF32_TENSOR_OP_MATH;
  w.run = [=] {
    if (tf32)
      ++machine().counters.tf32Calls;
    countTypedCall("cublasSgemm", "f32", sgemmMath(mode));
    for (int i = 0; i < batch; ++i)
      gemm(ta, tb, m, n, k, al, a + i * strideA, lda, b + i * strideB, ldb, be,
           c + i * strideC, ldc);
    ++machine().counters.blasCalls;
    return CUDA_SUCCESS;
  };
  int r = submit(reinterpret_cast<BlasHandle *>(handle)->stream, std::move(w));
  return r == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS
                           : CUBLAS_STATUS_EXECUTION_FAILED;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, int transa, int transb,
                              int m, int n, int k, const float *alpha,
                              const float *a, int lda, const float *b, int ldb,
                              const float *beta, float *c, int ldc) {
  return cublasSgemmStridedBatched(handle, transa, transb, m, n, k, alpha, a,
                                   lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
}

cublasStatus_t cublasSgeam(cublasHandle_t handle, int transa, int transb, int m,
                           int n, const float *alpha, const float *a, int lda,
                           const float *beta, const float *b, int ldb, float *c,
                           int ldc) {
  std::lock_guard<std::recursive_mutex> lock(machine().mutex);
  const bool ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T;
  const float al = *alpha, be = *beta;
  Work w{"cublasSgeam", nullptr, {}};
  if (int r =
          blasCheck(a, al == 0 ? 0 : matrixBytes(ta ? n : m, ta ? m : n, lda),
                    "cublasSgeam A", &w))
    return r;
  if (int r =
          blasCheck(b, be == 0 ? 0 : matrixBytes(tb ? n : m, tb ? m : n, ldb),
                    "cublasSgeam B", &w))
    return r;
  if (int r = blasCheck(c, matrixBytes(m, n, ldc), "cublasSgeam C", &w))
    return r;
  if (c == a || c == b)
    return refuse(CUBLAS_STATUS_INVALID_VALUE,
                  "cublasSgeam in place is not supported by this emulation");
  w.run = [=] {
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        float v = 0;
        if (al != 0)
          v += al * (ta ? a[i * int64_t(lda) + j] : a[j * int64_t(lda) + i]);
        if (be != 0)
          v += be * (tb ? b[i * int64_t(ldb) + j] : b[j * int64_t(ldb) + i]);
        c[j * int64_t(ldc) + i] = v;
      }
    countTypedCall("cublasSgeam", "f32", "fma");
    ++machine().counters.blasCalls;
    return CUDA_SUCCESS;
  };
  int r = submit(reinterpret_cast<BlasHandle *>(handle)->stream, std::move(w));
  return r == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS
                           : CUBLAS_STATUS_EXECUTION_FAILED;
}

// cublasGemmStridedBatchedEx: A and B of one type (f32, bf16 or f16), C of
// f32, f32 compute. Each operand is widened to f32 exactly and the
// products summed in f32 by the same loop as cublasSgemm's, so a bf16 call
// is the f32 product of the bf16 values, accumulated in f32 (what the tensor
// cores compute, up to the order of the sums). bf16 and f16 operands run on
// the tensor cores unless the handle's math is pedantic; the call is
// counted with its type and math.
cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, int transa, int transb, int m, int n, int k,
    const void *alpha, const void *a, int aType, int lda, long long strideA,
    const void *b, int bType, int ldb, long long strideB, const void *beta,
    void *c, int cType, int ldc, long long strideC, int batch, int computeType,
    int algo) {
  std::lock_guard<std::recursive_mutex> lock(machine().mutex);
  const bool ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || ldc < std::max(1, m) ||
      lda < std::max(1, ta ? k : m) || ldb < std::max(1, tb ? n : k))
    return refuse(CUBLAS_STATUS_INVALID_VALUE,
                  "cublasGemmEx: a negative size or a leading dimension too "
                  "small");
  if (blasElementSize(aType) == 0 || aType != bType || cType != CUDA_R_32F)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  "cublasGemmEx: A and B of one type (CUDA_R_32F, "
                  "CUDA_R_16BF or CUDA_R_16F) and C of CUDA_R_32F, got types " +
                      std::to_string(aType) + ", " + std::to_string(bType) +
                      ", " + std::to_string(cType));
  if (computeType != CUBLAS_COMPUTE_32F)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  "cublasGemmEx: compute type " + std::to_string(computeType) +
                      " (the emulation has CUBLAS_COMPUTE_32F, 68)");
  if (algo != CUBLAS_GEMM_DEFAULT && algo != 99)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  "cublasGemmEx: algorithm " + std::to_string(algo) +
                      " (the emulation has CUBLAS_GEMM_DEFAULT, -1, and "
                      "CUBLAS_GEMM_DEFAULT_TENSOR_OP, 99)");
  const size_t e = blasElementSize(aType);
  const size_t aElems = matrixElements(ta ? k : m, ta ? m : k, lda),
               bElems = matrixElements(tb ? n : k, tb ? k : n, ldb);
  Work w{"cublasGemmEx", nullptr, {}};
  if (batch > 0) {
    const size_t last = size_t(batch - 1);
    if (int r = blasCheck(a, (aElems + last * size_t(strideA)) * e,
                          "cublasGemmEx A", &w))
      return r;
    if (int r = blasCheck(b, (bElems + last * size_t(strideB)) * e,
                          "cublasGemmEx B", &w))
      return r;
    if (int r = blasCheck(
            c, matrixBytes(m, n, ldc) + last * size_t(strideC) * sizeof(float),
            "cublasGemmEx C", &w))
      return r;
  }
  const float al = *static_cast<const float *>(alpha),
              be = *static_cast<const float *>(beta);
  const int mode = reinterpret_cast<BlasHandle *>(handle)->mathMode;
  const char *math = e == 4                             ? sgemmMath(mode)
                     : (mode & 0xf) == 2 /* pedantic */ ? "fma"
                                                        : "tensor-op";
  const int dnnType = dnnTypeOfBlas(aType);
  const char *type = blasTypeName(aType);
  const auto *pa = static_cast<const char *>(a);
  const auto *pb = static_cast<const char *>(b);
  auto *pc = static_cast<float *>(c);
  w.run = [=] {
    for (int i = 0; i < batch; ++i) {
      const std::vector<float> fa = widened(pa + i * strideA * e, aElems,
                                            dnnType),
                               fb = widened(pb + i * strideB * e, bElems,
                                            dnnType);
      gemm(ta, tb, m, n, k, al, fa.data(), lda, fb.data(), ldb, be,
           pc + i * strideC, ldc);
    }
    countTypedCall("cublasGemmEx", type, math);
    ++machine().counters.blasCalls;
    return CUDA_SUCCESS;
  };
  int r = submit(reinterpret_cast<BlasHandle *>(handle)->stream, std::move(w));
  return r == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS
                           : CUBLAS_STATUS_EXECUTION_FAILED;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, int transa, int transb,
                            int m, int n, int k, const void *alpha,
                            const void *a, int aType, int lda, const void *b,
                            int bType, int ldb, const void *beta, void *c,
                            int cType, int ldc, int computeType, int algo) {
  return cublasGemmStridedBatchedEx(handle, transa, transb, m, n, k, alpha, a,
                                    aType, lda, 0, b, bType, ldb, 0, beta, c,
                                    cType, ldc, 0, 1, computeType, algo);
}

// --- cuDNN ---------------------------------------------------------------
cudnnStatus_t cudnnCreate(cudnnHandle_t *handle) {
  *handle = reinterpret_cast<cudnnHandle_t>(new DnnHandle());
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  delete reinterpret_cast<DnnHandle *>(handle);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, CUstream stream) {
  reinterpret_cast<DnnHandle *>(handle)->stream = stream;
  return CUDNN_STATUS_SUCCESS;
}
const char *cudnnGetErrorString(cudnnStatus_t s) {
  switch (s) {
  case CUDNN_STATUS_SUCCESS:
    return "CUDNN_STATUS_SUCCESS";
  case CUDNN_STATUS_BAD_PARAM:
    return "CUDNN_STATUS_BAD_PARAM";
  case CUDNN_STATUS_NOT_SUPPORTED:
    return "CUDNN_STATUS_NOT_SUPPORTED";
  default:
    return "CUDNN_STATUS_EXECUTION_FAILED";
  }
}

#define EMU_DESC(Type, Struct, create, destroy)                                \
  cudnnStatus_t create(Type *d) {                                              \
    *d = reinterpret_cast<Type>(new Struct());                                 \
    return CUDNN_STATUS_SUCCESS;                                               \
  }                                                                            \
  cudnnStatus_t destroy(Type d) {                                              \
    delete reinterpret_cast<Struct *>(d);                                      \
    return CUDNN_STATUS_SUCCESS;                                               \
  }
EMU_DESC(cudnnTensorDescriptor_t, TensorDesc, cudnnCreateTensorDescriptor,
         cudnnDestroyTensorDescriptor)
EMU_DESC(cudnnFilterDescriptor_t, FilterDesc, cudnnCreateFilterDescriptor,
         cudnnDestroyFilterDescriptor)
EMU_DESC(cudnnConvolutionDescriptor_t, ConvDesc,
         cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor)
EMU_DESC(cudnnPoolingDescriptor_t, PoolDesc, cudnnCreatePoolingDescriptor,
         cudnnDestroyPoolingDescriptor)
#undef EMU_DESC

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, int format,
                                         int dtype, int n, int c, int h,
                                         int w) {
  if (n <= 0 || c <= 0 || h <= 0 || w <= 0)
    return refuse(CUDNN_STATUS_BAD_PARAM, "a tensor dimension <= 0");
  *reinterpret_cast<TensorDesc *>(d) = {format, dtype, n, c, h, w};
  return CUDNN_STATUS_SUCCESS;
}
// cudnnTransformTensor, as dtf calls it: y = alpha x + beta y between two
// tensors of the same dimensions and layout, the element types converted
// (f32 to bf16 or f16 rounded to nearest even, as runtime/core's casts
// round; bf16 and f16 to f32 exactly).
cudnnStatus_t cudnnTransformTensor(cudnnHandle_t handle, const void *alpha,
                                   cudnnTensorDescriptor_t xDesc, const void *x,
                                   const void *beta,
                                   cudnnTensorDescriptor_t yDesc, void *y) {
  std::lock_guard<std::recursive_mutex> lock(machine().mutex);
  const TensorDesc xd = td(xDesc), yd = td(yDesc);
  if (!knownDnnType(xd.dtype) || !knownDnnType(yd.dtype) || xd.n != yd.n ||
      xd.c != yd.c || xd.h != yd.h || xd.w != yd.w || xd.format != yd.format)
    return refuse(CUDNN_STATUS_NOT_SUPPORTED,
                  "cudnnTransformTensor: the emulation converts between f32, "
                  "bf16 and f16 tensors of the same dimensions and layout");
  Work w{"cudnnTransformTensor", nullptr, {}};
  if (int r = dnnCheck(x, xd.bytes(), "x", &w))
    return r;
  if (int r = dnnCheck(y, yd.bytes(), "y", &w))
    return r;
  const float al = scalar(alpha), be = scalar(beta);
  const std::string type =
      std::string(dnnTypeName(xd.dtype)) + "->" + dnnTypeName(yd.dtype);
  w.run = [=] {
    const std::vector<float> v = widened(x, xd.elements(), xd.dtype);
    blendInto(y, yd.dtype, v.data(), int64_t(v.size()), al, be);
    countTypedCall("cudnnTransformTensor", type.c_str(), "convert");
    ++machine().counters.dnnCalls;
    return CUDA_SUCCESS;
  };
  int r = submit(reinterpret_cast<DnnHandle *>(handle)->stream, std::move(w));
  return r == CUDA_SUCCESS ? CUDNN_STATUS_SUCCESS
                           : CUDNN_STATUS_EXECUTION_FAILED;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, int dtype,
                                         int format, int k, int c, int h,
                                         int w) {
  if (k <= 0 || c <= 0 || h <= 0 || w <= 0)
    return refuse(CUDNN_STATUS_BAD_PARAM, "a filter dimension <= 0");
  *reinterpret_cast<FilterDesc *>(d) = {dtype, format, k, c, h, w};
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d,
                                              int padH, int padW, int strideH,
                                              int strideW, int dilH, int dilW,
                                              int mode, int computeType) {
  if (padH < 0 || padW < 0 || strideH <= 0 || strideW <= 0 || dilH <= 0 ||
      dilW <= 0 || computeType != CUDNN_DATA_FLOAT)
    return refuse(CUDNN_STATUS_BAD_PARAM, "a bad convolution descriptor");
  *reinterpret_cast<ConvDesc *>(d) = {padH, padW, strideH, strideW,
                                      dilH, dilW, mode};
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d,
                                          int mathType) {
  // cudnnMathType_t: DEFAULT 0, TENSOR_OP 1, TENSOR_OP_ALLOW_CONVERSION 2,
  // FMA 3.
  if (mathType < 0 || mathType > 3)
    return refuse(CUDNN_STATUS_BAD_PARAM,
                  "cudnnSetConvolutionMathType: " + std::to_string(mathType));
  reinterpret_cast<ConvDesc *>(d)->mathType = mathType;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t d, int mode,
                                          int, int wh, int ww, int padH,
                                          int padW, int sh, int sw) {
  if (wh <= 0 || ww <= 0 || sh <= 0 || sw <= 0 || padH < 0 || padW < 0)
    return refuse(CUDNN_STATUS_BAD_PARAM, "a bad pooling descriptor");
  *reinterpret_cast<PoolDesc *>(d) = {mode, wh, ww, padH, padW, sh, sw};
  return CUDNN_STATUS_SUCCESS;
}


extern "C++" {
namespace {
// Calls f(n, oy, ox, c, iy, ix) for each position of each output's window
// inside the image.
template <typename F>
void forWindows(const TensorDesc &x, const TensorDesc &y, const PoolDesc &p,
                F f) {
  for (int n = 0; n < y.n; ++n)
    for (int oy = 0; oy < y.h; ++oy)
      for (int ox = 0; ox < y.w; ++ox)
        f(n, oy, ox, [&](auto visit) {
          for (int ky = 0; ky < p.wh; ++ky)
            for (int kx = 0; kx < p.ww; ++kx) {
              const int iy = oy * p.sh - p.padH + ky,
                        ix = ox * p.sw - p.padW + kx;
              if (iy >= 0 && iy < x.h && ix >= 0 && ix < x.w)
                visit(((int64_t(n) * x.h + iy) * x.w + ix) * x.c);
            }
        });
}

cudnnStatus_t poolCheck(const PoolDesc &p, const TensorDesc &x,
                        const TensorDesc &y, const char *name) {
  if (!supportedF32(x) || !supportedF32(y) || x.n != y.n || x.c != y.c ||
      (x.h + 2 * p.padH - p.wh) / p.sh + 1 != y.h ||
      (x.w + 2 * p.padW - p.ww) / p.sw + 1 != y.w ||
      (p.mode != CUDNN_POOLING_MAX &&
       p.mode != CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING))
    return refuse(CUDNN_STATUS_NOT_SUPPORTED,
                  std::string(name) + ": descriptors that do not fit");
  return CUDNN_STATUS_SUCCESS;
}
} // namespace
} // extern "C++"

cudnnStatus_t cudnnPoolingForward(cudnnHandle_t handle,
                                  cudnnPoolingDescriptor_t pool,
                                  const void *alpha,
                                  cudnnTensorDescriptor_t xDesc, const void *x,
                                  const void *beta,
                                  cudnnTensorDescriptor_t yDesc, void *y) {
  std::lock_guard<std::recursive_mutex> lock(machine().mutex);
  const PoolDesc p = *reinterpret_cast<PoolDesc *>(pool);
  const TensorDesc xd = td(xDesc), yd = td(yDesc);
  if (int r = poolCheck(p, xd, yd, "cudnnPoolingForward"))
    return r;
  Work w{"cudnnPoolingForward", nullptr, {}};
  if (int r = dnnCheck(x, xd.bytes(), "x", &w))
    return r;
  if (int r = dnnCheck(y, yd.bytes(), "y", &w))
    return r;
  const float al = scalar(alpha), be = scalar(beta);
  const auto *px = static_cast<const float *>(x);
  auto *py = static_cast<float *>(y);
  w.run = [=] {
    std::vector<float> acc(size_t(xd.c));
    forWindows(xd, yd, p, [&](int n, int oy, int ox, auto window) {
      int count = 0;
      window([&](int64_t at) {
        for (int q = 0; q < xd.c; ++q) {
          const float v = px[at + q];
          if (count == 0)
            acc[size_t(q)] = v;
          else if (p.mode == CUDNN_POOLING_MAX)
            acc[size_t(q)] = std::max(acc[size_t(q)], v);
          else
            acc[size_t(q)] += v;
        }
        ++count;
      });
      float *out = py + ((int64_t(n) * yd.h + oy) * yd.w + ox) * yd.c;
      for (int q = 0; q < xd.c; ++q) {
        float v = count == 0                    ? 0.0f
                  : p.mode == CUDNN_POOLING_MAX ? acc[size_t(q)]
                                                : acc[size_t(q)] / float(count);
        out[q] = al * v + (be == 0 ? 0.0f : be * out[q]);
      }
    });
    countTypedCall("cudnnPoolingForward", "f32", "fma");
    ++machine().counters.dnnCalls;
    return CUDA_SUCCESS;
  };
  int r = submit(reinterpret_cast<DnnHandle *>(handle)->stream, std::move(w));
  return r == CUDA_SUCCESS ? CUDNN_STATUS_SUCCESS
                           : CUDNN_STATUS_EXECUTION_FAILED;
}

cudnnStatus_t
cudnnPoolingBackward(cudnnHandle_t handle, cudnnPoolingDescriptor_t pool,
                     const void *alpha, cudnnTensorDescriptor_t yDesc,
                     const void *y, cudnnTensorDescriptor_t dyDesc,
                     const void *dy, cudnnTensorDescriptor_t xDesc,
                     const void *x, const void *beta,
                     cudnnTensorDescriptor_t dxDesc, void *dx) {
  std::lock_guard<std::recursive_mutex> lock(machine().mutex);
  const PoolDesc p = *reinterpret_cast<PoolDesc *>(pool);
  const TensorDesc xd = td(xDesc), yd = td(yDesc);
  if (int r = poolCheck(p, xd, yd, "cudnnPoolingBackward"))
    return r;
  if (td(dyDesc).bytes() != yd.bytes() || td(dxDesc).bytes() != xd.bytes())
    return refuse(CUDNN_STATUS_BAD_PARAM,
                  "cudnnPoolingBackward: dy or dx does not match y or x");
  Work w{"cudnnPoolingBackward", nullptr, {}};
  if (p.mode == CUDNN_POOLING_MAX) {
    if (int r = dnnCheck(x, xd.bytes(), "x", &w))
      return r;
    if (int r = dnnCheck(y, yd.bytes(), "y", &w))
      return r;
  }
  if (int r = dnnCheck(dy, yd.bytes(), "dy", &w))
    return r;
  if (int r = dnnCheck(dx, xd.bytes(), "dx", &w))
    return r;
  const float al = scalar(alpha), be = scalar(beta);
  const auto *px = static_cast<const float *>(x);
  const auto *py = static_cast<const float *>(y);
  const auto *pdy = static_cast<const float *>(dy);
  auto *pdx = static_cast<float *>(dx);
  w.run = [=] {
    std::vector<float> grad(xd.bytes() / sizeof(float), 0.0f);
    forWindows(xd, yd, p, [&](int n, int oy, int ox, auto window) {
      const int64_t at = ((int64_t(n) * yd.h + oy) * yd.w + ox) * yd.c;
      if (p.mode == CUDNN_POOLING_MAX) {
        // The first position holding the maximum takes the gradient.
        for (int q = 0; q < xd.c; ++q) {
          bool done = false;
          window([&](int64_t pos) {
            if (!done && px[pos + q] == py[at + q]) {
              grad[size_t(pos + q)] += pdy[at + q];
              done = true;
            }
          });
        }
      } else {
        int count = 0;
        window([&](int64_t) { ++count; });
        window([&](int64_t pos) {
          for (int q = 0; q < xd.c; ++q)
            grad[size_t(pos + q)] += pdy[at + q] / float(count);
        });
      }
    });
    blend(pdx, grad.data(), int64_t(grad.size()), al, be);
    countTypedCall("cudnnPoolingBackward", "f32", "fma");
    ++machine().counters.dnnCalls;
    return CUDA_SUCCESS;
  };
  int r = submit(reinterpret_cast<DnnHandle *>(handle)->stream, std::move(w));
  return r == CUDA_SUCCESS ? CUDNN_STATUS_SUCCESS
                           : CUDNN_STATUS_EXECUTION_FAILED;
}

} // extern "C"
