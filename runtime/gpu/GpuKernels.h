// The GPU kernels (GpuKernels.cpp): matmul on cuBLAS, convolution and
// pooling on cuDNN, reshape, and dtf.fused from the plan's device code.
#pragma once

#include "runtime/gpu/CudaDriver.h"
#include "runtime/kernels/Kernel.h"

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace dtf::gpu {

/// The GPU kernels: op name -> kernel taking a GpuKernelContext.
const KernelRegistry &gpuKernelRegistry();

/// The libraries the GPU kernel of `opName` calls: matmul cuBLAS;
/// convolutions cuDNN, and cuBLAS to transpose their filters; pooling cuDNN.
/// A matmul with compute_dtype bf16 or f16 casts its operands with cuDNN
/// too; without cuDNN it fails naming it (GpuLowPrecision.h), as it is not
/// listed here (an f32 matmul needs no cuDNN).
std::vector<CudaDriver::Library> librariesOfKernel(std::string_view opName);

/// The largest workspace a convolution algorithm may ask for (1 GiB).
inline constexpr size_t kMaxConvWorkspace = size_t(1) << 30;


} // namespace dtf::gpu
