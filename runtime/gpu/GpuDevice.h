// GpuDevice: one GPU as one executor uses it (the primary context, a compute
// and a copy stream, cuBLAS and cuDNN handles, the modules loaded from the
// plan, its allocator); the CUDA implementation of device::Device.
#pragma once

#include "schema/Status.h"
#include "runtime/device/Device.h"
#include "runtime/device/KernelCode.h"
#include "runtime/gpu/CudaDriver.h"
#include "runtime/gpu/CudaPlatform.h" // processDriver(): the devices' driver
#include "runtime/gpu/GpuAllocator.h"
#include "runtime/gpu/GpuStream.h"

#include <functional>
#include <map>
#include <memory>
#include <string>

namespace dtf::gpu {

/// The plan's GPU module and a generated kernel's GPU code, as the device
/// layer names them.
using GpuModuleCode = device::ModuleCode;
using GpuKernelCode = device::KernelCode;

/// One GPU: the primary context, a compute stream for its steps' kernels
/// (cuBLAS and cuDNN handles are bound to it), and a copy stream on which
/// segments (GpuSegment.h) move values between host and device beside the
/// kernels, ordered by events.
class GpuDevice : public device::Device {
public:
  static Status create(CudaDriver &driver, int index,
                       std::unique_ptr<GpuDevice> *out,
                       const device::DeviceOptions &options = {});
  ~GpuDevice() override;

  CudaDriver &driver() { return driver_; }
  int index() const override { return index_; }
  /// The stream of its steps' kernels.
  cuda::CUstream computeStream() const { return stream_; }
  /// The stream for copies that overlap the compute stream's kernels.
  cuda::CUstream copyStream() const { return copyStream_; }
  cuda::cublasHandle_t blas() const { return blas_; }
  cuda::cudnnHandle_t dnn() const { return dnn_; }
  /// Whether its cuBLAS and cuDNN calls may compute f32 in TF32.
  bool allowTf32() const { return allowTf32_; }
  /// The device's compute capability, e.g. 90.
  int computeCapability() const { return cc_; }

  /// An error naming the call when r is not CUDA_SUCCESS.
  Status check(const char *call, cuda::CUresult r) const;
  Status makeCurrent();
  /// Waits for both streams' work.
  Status synchronize();
  /// An event for ordering the streams (no timing), or an error.
  Status createEvent(cuda::CUevent *event);
  /// An event that cuEventElapsedTime can time (dtf-run --profile).
  Status createTimingEvent(cuda::CUevent *event);
  /// The compute stream's later work waits for `event` (another stream's).
  Status waitFor(cuda::CUevent event);
  /// `event` recorded on `from`, and `to` made to wait for it.
  Status order(cuda::CUevent event, cuda::CUstream from, cuda::CUstream to);
  /// Captures the work `enqueue` puts on the stream (thread-local mode:
  /// nothing in it may allocate or synchronize) and instantiates it as
  /// `*exec`, ready to launch.
  Status capture(const std::function<Status()> &enqueue,
                 cuda::CUgraphExec *exec);
  /// Whether capture() is recording this device's stream work now.
  bool capturing() const { return capturing_; }
  /// `code` loaded on this device (once): the cubin for its compute
  /// capability, else the PTX for the driver to compile.
  Status loadModule(const GpuModuleCode &code, cuda::CUmodule *out);

  /// The device's memory (GpuAllocator.h); the calls below are its.
  GpuAllocator &memory() { return allocator_; }
  Status reserve(DeviceBuffer &b, size_t bytes) {
    return allocator_.reserve(b, bytes);
  }
  void release(DeviceBuffer &b) { allocator_.release(b); }
  void releaseStaged(DeviceBuffer &b, void *pinned) {
    allocator_.releaseStaged(b, pinned);
  }
  Status planArena() { return allocator_.planArena(); }
  int arenasPlanned() const { return allocator_.arenasPlanned(); }
  bool arenaPending() const { return allocator_.arenaPending(); }
  Status reservePinned(void **p, size_t *capacity, size_t bytes) {
    return allocator_.reservePinned(p, capacity, bytes);
  }
  Status workspace(size_t bytes, void **p) {
    return allocator_.workspace(bytes, p);
  }

  /// Staging slots (device::Device::setStagingSlots): how many, and the one
  /// the current step stages into; pinned buffers, label reports and
  /// captured graphs come one per slot.
  int stagingSlots() const { return slots_; }
  int stagingSlot() const { return slot_; }

  // device::Device
  std::string name() const override;
  void setStagingSlots(int n) override { slots_ = n == 2 ? 2 : 1; }
  void setStagingSlot(int slot) override { slot_ = slot % slots_; }
  Status recordStepEnd(int slot) override;
  Status waitStepEnd(int slot) override;
  device::Allocator &allocator() override { return allocator_; }
  device::Stream &stream() override { return streamView_; }
  Status createOp(device::DeviceOpSpec spec,
                  std::unique_ptr<device::DeviceOp> *out) override;
  std::unique_ptr<device::Graph> createGraph() override;

private:
  GpuDevice(CudaDriver &driver, int index)
      : driver_(driver), index_(index), allocator_(*this), streamView_(*this) {}
  CudaDriver &driver_;
  int index_;
  int cc_ = 0;
  cuda::CUcontext ctx_ = nullptr;
  cuda::CUstream stream_ = nullptr;
  cuda::CUstream copyStream_ = nullptr;
  cuda::cublasHandle_t blas_ = nullptr;
  cuda::cudnnHandle_t dnn_ = nullptr;
  bool allowTf32_ = false;
  bool capturing_ = false;
  int slots_ = 1, slot_ = 0;
  cuda::CUevent stepEnd_[2] = {nullptr, nullptr}; // per staging slot
  std::map<const GpuModuleCode *, cuda::CUmodule> modules_;

  GpuAllocator allocator_;
  GpuStream streamView_;
};

} // namespace dtf::gpu
