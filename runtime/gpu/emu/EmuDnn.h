// The cuDNN state that EmuLibraries.cpp (handles, descriptors, pooling) and
// EmuConvolution.cpp (the convolutions and their algorithms) share.
#pragma once

#include "runtime/gpu/emu/EmuState.h"

#include <cstdint>
#include <string>

namespace dtf::gpu::emu {

struct DnnHandle {
  CUstream stream = nullptr;
};
struct TensorDesc {
  int format = -1, dtype = -1, n = 0, c = 0, h = 0, w = 0;
  size_t bytes() const { return size_t(n) * c * h * w * sizeof(float); }
};
struct FilterDesc {
  int dtype = -1, format = -1, k = 0, c = 0, h = 0, w = 0;
  size_t bytes() const { return size_t(k) * c * h * w * sizeof(float); }
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
inline bool supported(const TensorDesc &t) {
  return t.format == CUDNN_TENSOR_NHWC && t.dtype == CUDNN_DATA_FLOAT;
}
inline bool supported(const FilterDesc &f) {
  return f.format == CUDNN_TENSOR_NHWC && f.dtype == CUDNN_DATA_FLOAT;
}

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
