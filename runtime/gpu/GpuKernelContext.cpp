// GpuKernelContext: a kernel context whose tensors live in device memory.
#include "runtime/gpu/GpuKernelContext.h"

#include <algorithm>

namespace dtf::gpu {

GpuKernelContext::~GpuKernelContext() {
  for (DeviceBuffer &b : outputBuffers_)
    device_.release(b);
  for (DeviceBuffer &b : scratch_)
    device_.release(b);
}

Status GpuKernelContext::allocateOutput(int i, DType dtype,
                                        std::vector<int64_t> shape,
                                        Tensor **out) {
  if (i >= numOutputs())
    setNumOutputs(i + 1);
  // Registered with the device by address: sized once.
  if (outputBuffers_.size() < size_t(numOutputs())) {
    for (DeviceBuffer &b : outputBuffers_)
      device_.release(b);
    outputBuffers_.assign(size_t(numOutputs()) + 4, DeviceBuffer());
  }
  const size_t bytes = size_t(numElementsOf(shape)) * dtypeSize(dtype);
  DeviceBuffer &b = outputBuffers_[size_t(i)];
  DTF_RETURN_IF_ERROR(device_.reserve(b, std::max<size_t>(bytes, 1)));
  output(i) = Tensor::view(dtype, std::move(shape),
                           reinterpret_cast<void *>(uintptr_t(b.ptr)));
  *out = &output(i);
  return Status::ok();
}

Status GpuKernelContext::scratch(int k, size_t bytes, void **p) {
  if (scratch_.size() <= size_t(k)) {
    for (DeviceBuffer &b : scratch_)
      device_.release(b);
    scratch_.assign(size_t(k) + 4, DeviceBuffer());
  }
  DTF_RETURN_IF_ERROR(
      device_.reserve(scratch_[size_t(k)], std::max<size_t>(bytes, 1)));
  *p = reinterpret_cast<void *>(uintptr_t(scratch_[size_t(k)].ptr));
  return Status::ok();
}

} // namespace dtf::gpu
