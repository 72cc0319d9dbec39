// The convolution algorithm of each GPU, direction and shape: timed once by
// cuDNN (cudnnFindConvolution*AlgorithmEx) on the op's own buffers, ranked,
// cached; a launch that fails moves the shape to the next algorithm.
#pragma once

#include "runtime/gpu/GpuKernelContext.h"

#include <cstdint>
#include <vector>

namespace dtf::gpu {

enum class ConvDirection {
  kForward = 0,
  kBackwardData = 1,
  kBackwardFilter = 2
};

/// One convolution call: its descriptors (set for its shape, the math type
/// left to runConvolution) and its buffers. `x`, `w` and `y` are the input,
/// the KRSC filter and the output of the forward convolution, whichever of
/// them the call writes (y forward, x backward data, w backward filter).
struct ConvOperands {
  cuda::cudnnTensorDescriptor_t xDesc = nullptr, yDesc = nullptr;
  cuda::cudnnFilterDescriptor_t wDesc = nullptr;
  cuda::cudnnConvolutionDescriptor_t convDesc = nullptr;
  void *x = nullptr, *w = nullptr, *y = nullptr;
  /// bf16 or f16 descriptors (mixed precision): every launch sets
  /// CUDNN_TENSOR_OP_MATH.
  bool lowPrecision = false;
};

/// Runs the convolution `op` in `direction` (alpha 1, beta 0) with the
/// algorithm chosen for this GPU, direction and `shape` (the key: batch,
/// channels, image, filter, padding, strides). The first call of a shape
/// asks cuDNN's heuristic (cudnnGetConvolution*Algorithm_v7) for the
/// candidates and their workspaces, then, outside a stream capture, times
/// them with cudnnFindConvolution*AlgorithmEx on the op's buffers and the
/// device's workspace; the ranking is kept (inside a capture, the
/// heuristic's). Each launch sets the algorithm's math type on the
/// descriptor (never TF32 unless the plan allows it). A launch that fails
/// tries the next algorithm of the ranking, says so once per shape, and the
/// shape keeps that one.
Status runConvolution(GpuKernelContext &ctx, ConvDirection direction,
                      const std::vector<int64_t> &shape,
                      const ConvOperands &op);

/// How many times this process asked cuDNN for a convolution algorithm (once
/// per GPU, direction and shape), and how many of those were timed.
uint64_t convAlgorithmQueries();
uint64_t convAlgorithmSearches();

} // namespace dtf::gpu
