// GpuKernelContext: the kernel context of an op on a GPU, whose tensors
// are views over device memory.
#pragma once

#include "schema/Status.h"
#include "runtime/core/Tensor.h"
#include "runtime/gpu/GpuDevice.h"
#include "runtime/kernels/Kernel.h"

#include <vector>

namespace dtf::gpu {

/// A kernel context whose inputs and outputs are tensors in device memory
/// (Tensor views over device pointers: their data must not be touched on the
/// host). Outputs keep their device buffers from step to step.
class GpuKernelContext : public KernelContext {
public:
  explicit GpuKernelContext(GpuDevice &device) : device_(device) {}
  ~GpuKernelContext() override;
  GpuDevice &device() { return device_; }
  Status allocateOutput(int i, DType dtype, std::vector<int64_t> shape,
                        Tensor **out) override;
  /// A per-op scratch buffer `k` of at least `bytes`.
  Status scratch(int k, size_t bytes, void **p);

private:
  GpuDevice &device_;
  std::vector<DeviceBuffer> outputBuffers_;
  std::vector<DeviceBuffer> scratch_;
};

} // namespace dtf::gpu
