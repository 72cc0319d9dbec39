// CpuDevice: host memory, an immediate stream, and ops over CPU kernels.
#include "runtime/device/cpu/CpuDevice.h"
#include "runtime/device/cpu/CpuOp.h"

#include <cstdlib>
#include <cstring>

namespace dtf::device {

namespace {
void *hostPointer(uint64_t address) {
  return reinterpret_cast<void *>(uintptr_t(address));
}
} // namespace

Status CpuAllocator::allocate(size_t bytes, const char *what,
                              uint64_t *address) {
  // A multiple of the alignment, as aligned_alloc requires.
  constexpr size_t kAlign = 64;
  void *p = std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  if (!p)
    return errorStatus("CPU: out of memory for ", what, " (", bytes,
                       " bytes)");
  *address = uint64_t(uintptr_t(p));
  return Status::ok();
}

void CpuAllocator::free(uint64_t address) { std::free(hostPointer(address)); }

Status CpuStream::copyToDevice(uint64_t device, const void *host, size_t bytes,
                               const char *) {
  std::memcpy(hostPointer(device), host, bytes);
  return Status::ok();
}

Status CpuStream::copyToHost(void *host, uint64_t device, size_t bytes,
                             const char *) {
  std::memcpy(host, hostPointer(device), bytes);
  return Status::ok();
}

Status CpuStream::copyOnDevice(uint64_t to, uint64_t from, size_t bytes,
                               const char *) {
  std::memmove(hostPointer(to), hostPointer(from), bytes);
  return Status::ok();
}

std::string CpuDevice::name() const {
  return "/job:localhost/replica:0/task:0/device:CPU:0";
}

Status CpuDevice::createOp(DeviceOpSpec spec, std::unique_ptr<DeviceOp> *out) {
  KernelFn fn = kernels_.lookup(spec.opName);
  if (!fn)
    return errorStatus("there is no CPU kernel for ", spec.opName);
  std::unique_ptr<KernelContext> ctx;
  if (spec.kernels)
    ctx = std::make_unique<FusedKernelContext>(spec.kernels, spec.kernel);
  else
    ctx = std::make_unique<KernelContext>();
  ctx->setOpName(spec.opName);
  ctx->setAttrs(std::move(spec.attrs));
  ctx->setThreadPool(pool_);
  ctx->outputs().reserve(size_t(spec.numOutputs + kSpareOutputs));
  ctx->setNumOutputs(spec.numOutputs);
  *out = std::make_unique<CpuOp>(fn, std::move(ctx));
  return Status::ok();
}

std::unique_ptr<Graph> CpuDevice::createGraph() {
  return std::make_unique<CpuGraph>();
}

} // namespace dtf::device
