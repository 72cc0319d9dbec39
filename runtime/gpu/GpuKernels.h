// The GPU kernels (GpuKernels.cpp): matmul on cuBLAS, convolution and
// pooling on cuDNN, reshape, and dtf.fused from the plan's device code.
#pragma once

#include "runtime/kernels/Kernel.h"

#include <cstddef>
#include <cstdint>

namespace dtf::gpu {

/// The GPU kernels: op name -> kernel taking a GpuKernelContext.
const KernelRegistry &gpuKernelRegistry();

/// The largest workspace a convolution algorithm may ask for (1 GiB).
inline constexpr size_t kMaxConvWorkspace = size_t(1) << 30;

/// How many times this process asked cuDNN for a convolution algorithm (once
/// per GPU, direction and shape).
uint64_t convAlgorithmQueries();

} // namespace dtf::gpu
