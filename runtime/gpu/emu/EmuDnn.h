// The cuDNN state that EmuLibraries.cpp (handles, descriptors, pooling) and
// EmuConvolution.cpp (the convolutions and their algorithms) share.
#pragma once

#include "runtime/gpu/emu/EmuState.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dtf::gpu::emu {

struct DnnHandle {
  CUstream stream = nullptr;
};

/// The element types the emulated cuDNN takes: f32, and the bf16 and f16 of
/// mixed precision (tensors of 2 bytes, f32 arithmetic inside).
inline bool knownDnnType(int dtype) {
  return dtype == CUDNN_DATA_FLOAT || dtype == CUDNN_DATA_HALF ||
         dtype == CUDNN_DATA_BFLOAT16;
}
inline size_t dnnElementSize(int dtype) {
  return dtype == CUDNN_DATA_HALF || dtype == CUDNN_DATA_BFLOAT16 ? 2 : 4;
}
inline const char *dnnTypeName(int dtype) {
  return dtype == CUDNN_DATA_FLOAT      ? "f32"
         : dtype == CUDNN_DATA_HALF     ? "f16"
         : dtype == CUDNN_DATA_BFLOAT16 ? "bf16"
                                        : "an unknown type";
}

struct TensorDesc {
  int format = -1, dtype = -1, n = 0, c = 0, h = 0, w = 0;
  size_t elements() const { return size_t(n) * c * h * w; }
  size_t bytes() const { return elements() * dnnElementSize(dtype); }
};
struct FilterDesc {
  int dtype = -1, format = -1, k = 0, c = 0, h = 0, w = 0;
  size_t elements() const { return size_t(k) * c * h * w; }
  size_t bytes() const { return elements() * dnnElementSize(dtype); }
};
struct ConvDesc {
  int padH = 0, padW = 0, strideH = 1, strideW = 1, dilH = 1, dilW = 1,
      mode = -1;
  /// cuDNN's default math lets f32 use TF32 on Ampere and later.
  int mathType = CUDNN_DEFAULT_MATH;
};

inline int dnnCheck(const void *p, size_t bytes, const std::string &what,
                    Work *w) {
  if (bytes == 0)
    return CUDNN_STATUS_SUCCESS;
  return checkDevice(uintptr_t(p), bytes, what, w) == CUDA_SUCCESS
             ? CUDNN_STATUS_SUCCESS
             : CUDNN_STATUS_EXECUTION_FAILED;
}
// NHWC tensors and filters of f32, bf16 or f16 (convolutions); pooling
// takes f32 only.
inline bool supported(const TensorDesc &t) {
  return t.format == CUDNN_TENSOR_NHWC && knownDnnType(t.dtype);
}
inline bool supported(const FilterDesc &f) {
  return f.format == CUDNN_TENSOR_NHWC && knownDnnType(f.dtype);
}
inline bool supportedF32(const TensorDesc &t) {
  return supported(t) && t.dtype == CUDNN_DATA_FLOAT;
}

/// `n` elements of type `dtype` at `p` as floats (bf16 and f16 exactly).
std::vector<float> widened(const void *p, size_t n, int dtype);
/// out[i] = alpha * value[i] + beta * out[i] in f32, stored in `dtype`
/// (bf16 and f16 rounded to nearest even, as runtime/core's casts round).
void blendInto(void *out, int dtype, const float *value, int64_t n, float alpha,
               float beta);
/// Counts one library call under its name, element type and math
/// ("cublasGemmEx bf16 tensor-op"), for the emulation's statistics.
void countTypedCall(const std::string &call, const char *type,
                    const char *math);

// out = alpha * value + beta * out.
inline void blend(float *out, const float *value, int64_t n, float alpha,
                  float beta) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = alpha * value[i] + (beta == 0 ? 0.0f : beta * out[i]);
}

inline float scalar(const void *p) { return *static_cast<const float *>(p); }

inline const TensorDesc &td(cudnnTensorDescriptor_t d) {
  return *reinterpret_cast<const TensorDesc *>(d);
}
inline const FilterDesc &fdesc(cudnnFilterDescriptor_t d) {
  return *reinterpret_cast<const FilterDesc *>(d);
}
inline const ConvDesc &cdesc(cudnnConvolutionDescriptor_t d) {
  return *reinterpret_cast<const ConvDesc *>(d);
}

} // namespace dtf::gpu::emu
