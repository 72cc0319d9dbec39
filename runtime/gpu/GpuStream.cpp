// GpuStream: copies, waits and synchronization on a GPU's compute stream.
#include "runtime/gpu/GpuStream.h"
#include "runtime/gpu/GpuDevice.h"

namespace dtf::gpu {

using namespace cuda;

namespace {
// The error of a copy: "GPU 0: cuMemcpyHtoDAsync (a resident variable) ...".
Status copied(GpuDevice &device, const char *call, const char *what,
              CUresult r) {
  if (r == CUDA_SUCCESS)
    return Status::ok();
  return device.check(strCat(call, " (", what, ")").c_str(), r);
}
} // namespace

Status GpuStream::copyToDevice(uint64_t to, const void *host, size_t bytes,
                               const char *what) {
  DTF_RETURN_IF_ERROR(device_.makeCurrent());
  return copied(device_, "cuMemcpyHtoDAsync", what,
                device_.driver().cuMemcpyHtoDAsync(CUdeviceptr(to), host, bytes,
                                                   device_.computeStream()));
}

Status GpuStream::copyToHost(void *host, uint64_t from, size_t bytes,
                             const char *what) {
  DTF_RETURN_IF_ERROR(device_.makeCurrent());
  return copied(device_, "cuMemcpyDtoHAsync", what,
                device_.driver().cuMemcpyDtoHAsync(
                    host, CUdeviceptr(from), bytes, device_.computeStream()));
}

Status GpuStream::copyOnDevice(uint64_t to, uint64_t from, size_t bytes,
                               const char *what) {
  DTF_RETURN_IF_ERROR(device_.makeCurrent());
  return copied(device_, "cuMemcpyDtoDAsync", what,
                device_.driver().cuMemcpyDtoDAsync(CUdeviceptr(to),
                                                   CUdeviceptr(from), bytes,
                                                   device_.computeStream()));
}

Status GpuStream::wait(const device::Event &event) {
  DTF_RETURN_IF_ERROR(device_.makeCurrent());
  return device_.waitFor(static_cast<const GpuEvent &>(event).event);
}

Status GpuStream::synchronize() {
  DTF_RETURN_IF_ERROR(device_.makeCurrent());
  return device_.synchronize();
}

} // namespace dtf::gpu
