// Mixed precision on the GPU: an op's compute_dtype as cuBLAS's and cuDNN's
// element types, and the casts between f32 tensors and their bf16 or f16
// operand copies on the device.
#pragma once

#include "runtime/gpu/GpuKernelContext.h"

#include <cstdint>

namespace dtf::gpu {

/// The element type a GPU product computes its operands in.
enum class LowPrecision { kNone, kBf16, kF16 };

/// The op's `compute_dtype` ("bf16", "f16" or absent, as
/// dtf-mixed-precision sets it); another value is an error naming the op.
Status lowPrecisionOf(const KernelContext &ctx, const char *op,
                      LowPrecision *out);

/// cudaDataType (CUDA_R_16BF, CUDA_R_16F) and cudnnDataType_t
/// (CUDNN_DATA_BFLOAT16, CUDNN_DATA_HALF) of `p`; f32's for kNone.
int cudaTypeOf(LowPrecision p);
int cudnnTypeOf(LowPrecision p);
inline size_t elementSizeOf(LowPrecision p) {
  return p == LowPrecision::kNone ? 4 : 2;
}

/// `n` elements at `src` (cuDNN type `srcType`) converted to `dstType` at
/// `dst`, on the device's compute stream by cudnnTransformTensor: f32 to
/// bf16 or f16 rounds to nearest even (runtime/core's Bf16.h and F16.h
/// round alike), bf16 or f16 to f32 is exact. Needs cuDNN even for a
/// matmul; its absence is an error naming the op.
Status convertOnDevice(GpuKernelContext &ctx, const void *src, int srcType,
                       void *dst, int dstType, int64_t n);

/// An f32 device tensor's `n` elements as a `p` copy in the op's scratch
/// buffer `slot`.
Status lowCopy(GpuKernelContext &ctx, LowPrecision p, const void *f32,
               int64_t n, int slot, void **out);

} // namespace dtf::gpu
