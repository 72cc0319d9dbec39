// CpuDevice: the host as a device::Device: memory is host memory, the stream
// runs every copy at once, and ops call the CPU kernels of a registry. The
// executor makes each CPU op of a program here (CpuOp, run without a
// virtual call: runtime/device/README.md has the measurement).
#pragma once

#include "runtime/device/Device.h"
#include "runtime/kernels/Kernel.h"

#include <string>

namespace dtf::device {

/// Host memory (aligned for any tensor); the host has no arena to plan.
class CpuAllocator : public Allocator {
public:
  Status allocate(size_t bytes, const char *what, uint64_t *address) override;
  void free(uint64_t address) override;
  bool arenaPending() const override { return false; }
  Status planArena() override { return Status::ok(); }
};

/// Copies done when called (memcpy); nothing is ever pending.
class CpuStream : public Stream {
public:
  Status copyToDevice(uint64_t device, const void *host, size_t bytes,
                      const char *what) override;
  Status copyToHost(void *host, uint64_t device, size_t bytes,
                    const char *what) override;
  Status copyOnDevice(uint64_t to, uint64_t from, size_t bytes,
                      const char *what) override;
  Status wait(const Event &) override { return Status::ok(); }
  Status synchronize() override { return Status::ok(); }
};

class CpuDevice : public Device {
public:
  /// `kernels` (the CPU kernels) and `pool` (the kernels' threads; null:
  /// none) must outlive the device.
  explicit CpuDevice(const KernelRegistry &kernels, ThreadPool *pool = nullptr)
      : kernels_(kernels), pool_(pool) {}
  int index() const override { return 0; }
  std::string name() const override;
  Allocator &allocator() override { return allocator_; }
  Stream &stream() override { return stream_; }
  /// An error naming the op when the registry has no kernel for it.
  Status createOp(DeviceOpSpec spec, std::unique_ptr<DeviceOp> *out) override;
  std::unique_ptr<Graph> createGraph() override;

private:
  const KernelRegistry &kernels_;
  ThreadPool *pool_;
  CpuAllocator allocator_;
  CpuStream stream_;
};

} // namespace dtf::device
