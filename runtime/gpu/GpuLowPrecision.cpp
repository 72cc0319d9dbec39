// Mixed precision on the GPU: compute_dtype, the library element types, and
// the f32 <-> bf16/f16 casts by cudnnTransformTensor.
#include "runtime/gpu/GpuLowPrecision.h"
#include "runtime/gpu/GpuDevice.h"

#include <algorithm>

namespace dtf::gpu {

using namespace cuda;

Status lowPrecisionOf(const KernelContext &ctx, const char *op,
                      LowPrecision *out) {
  *out = LowPrecision::kNone;
  if (!ctx.hasAttr("compute_dtype"))
    return Status::ok();
  const std::string dtype = ctx.getString("compute_dtype");
  if (dtype == "bf16")
    *out = LowPrecision::kBf16;
  else if (dtype == "f16")
    *out = LowPrecision::kF16;
  else if (dtype != "f32")
    return errorStatus(op,
                       ": compute_dtype is \"bf16\", \"f16\" or absent, not \"",
                       dtype, "\"");
  return Status::ok();
}

int cudaTypeOf(LowPrecision p) {
  return p == LowPrecision::kBf16  ? CUDA_R_16BF
         : p == LowPrecision::kF16 ? CUDA_R_16F
                                   : CUDA_R_32F;
}

int cudnnTypeOf(LowPrecision p) {
  return p == LowPrecision::kBf16  ? CUDNN_DATA_BFLOAT16
         : p == LowPrecision::kF16 ? CUDNN_DATA_HALF
                                   : CUDNN_DATA_FLOAT;
}

Status convertOnDevice(GpuKernelContext &ctx, const void *src, int srcType,
                       void *dst, int dstType, int64_t n) {
  CudaDriver &d = ctx.device().driver();
  if (!d.missing(CudaDriver::Library::kCudnn).empty())
    return errorStatus(ctx.opName(),
                       " in bf16 or f16 on a GPU casts its operands with "
                       "cuDNN, which is not usable: ",
                       d.missing(CudaDriver::Library::kCudnn),
                       " (compile with --precision=float32, or place the op "
                       "on the CPU)");
  auto elementSize = [](int type) { return type == CUDNN_DATA_FLOAT ? 4 : 2; };
  // A tensor descriptor's dimensions are ints: at most 2^30 elements a call.
  constexpr int64_t kChunk = int64_t(1) << 30;
  for (int64_t at = 0; at < n; at += kChunk) {
    const int count = int(std::min(kChunk, n - at));
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnStatus_t s = d.cudnnCreateTensorDescriptor(&x);
    if (s == CUDNN_STATUS_SUCCESS)
      s = d.cudnnCreateTensorDescriptor(&y);
    if (s == CUDNN_STATUS_SUCCESS)
      s = d.cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, srcType, 1, 1, 1,
                                       count);
    if (s == CUDNN_STATUS_SUCCESS)
      s = d.cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, dstType, 1, 1, 1,
                                       count);
    const float one = 1, zero = 0;
    if (s == CUDNN_STATUS_SUCCESS)
      s = d.cudnnTransformTensor(
          ctx.device().dnn(), &one, x,
          static_cast<const char *>(src) + at * elementSize(srcType), &zero, y,
          static_cast<char *>(dst) + at * elementSize(dstType));
    if (x)
      d.cudnnDestroyTensorDescriptor(x);
    if (y)
      d.cudnnDestroyTensorDescriptor(y);
    if (s != CUDNN_STATUS_SUCCESS)
      return errorStatus(
          ctx.opName(),
          ": cudnnTransformTensor failed: ", d.cudnnGetErrorString(s),
          d.emulated() ? " (" + d.errorText("cudnnTransformTensor", 0) + ")"
                       : std::string());
  }
  return Status::ok();
}

Status lowCopy(GpuKernelContext &ctx, LowPrecision p, const void *f32,
               int64_t n, int slot, void **out) {
  DTF_RETURN_IF_ERROR(ctx.scratch(slot, size_t(n) * elementSizeOf(p), out));
  return convertOnDevice(ctx, f32, CUDNN_DATA_FLOAT, *out, cudnnTypeOf(p), n);
}

} // namespace dtf::gpu
