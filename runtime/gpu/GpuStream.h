// GpuStream: a GPU's compute stream as the device layer sees it
// (device::Stream), and GpuEvent, a CUDA event as a device::Event.
#pragma once

#include "runtime/device/Stream.h"
#include "runtime/gpu/CudaApi.h"

namespace dtf::gpu {

class GpuDevice;

/// A CUDA event (made and recorded by its owner, e.g. the towers'
/// all-reduce).
class GpuEvent : public device::Event {
public:
  cuda::CUevent event = nullptr;
};

/// The compute stream of a GpuDevice; every call makes the device's context
/// current first.
class GpuStream : public device::Stream {
public:
  explicit GpuStream(GpuDevice &device) : device_(device) {}
  Status copyToDevice(uint64_t device, const void *host, size_t bytes,
                      const char *what) override;
  Status copyToHost(void *host, uint64_t device, size_t bytes,
                    const char *what) override;
  Status copyOnDevice(uint64_t to, uint64_t from, size_t bytes,
                      const char *what) override;
  /// `event` must be a GpuEvent.
  Status wait(const device::Event &event) override;
  /// Waits for both of the device's streams.
  Status synchronize() override;

private:
  GpuDevice &device_;
};

} // namespace dtf::gpu
