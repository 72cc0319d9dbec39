// GpuAllocator: one GPU's memory as its executor uses it: the device buffers
// of ops' tensors and scratch (packed into one arena once a step has sized
// them), pinned host staging buffers, the library workspace, and buffers of
// their own (device::Allocator).
#pragma once

#include "schema/Status.h"
#include "runtime/device/Allocator.h"
#include "runtime/gpu/CudaApi.h"

#include <cstddef>
#include <set>

namespace dtf::gpu {

class GpuDevice;

/// Device memory that one op's tensor (or scratch) lives in: a slice of its
/// device's arena, or an allocation of its own until the arena is planned.
struct DeviceBuffer {
  cuda::CUdeviceptr ptr = 0;
  size_t capacity = 0;
  bool inArena = false;
};

/// Pinned host staging memory, one buffer per staging slot
/// (GpuDevice::stagingSlots): a step that ends without waiting stages into
/// its slot's buffer while the step before may still copy out of (or into)
/// the other's. Each slot's buffer grows on its own, only for a larger
/// value, so a captured graph's slot sees it move only with a new shape.
struct PinnedSlots {
  void *slot[2] = {nullptr, nullptr};
  size_t capacity[2] = {0, 0};
};

class GpuAllocator : public device::Allocator {
public:
  explicit GpuAllocator(GpuDevice &device) : device_(device) {}
  GpuAllocator(const GpuAllocator &) = delete;
  GpuAllocator &operator=(const GpuAllocator &) = delete;

  /// Makes `b` hold at least `bytes` (a new allocation only when it grows).
  /// Its contents do not survive growth or planArena(): every buffer is
  /// written before it is read within a step.
  Status reserve(DeviceBuffer &b, size_t bytes);
  void release(DeviceBuffer &b);
  /// A host value's device copy and its pinned staging buffer, released.
  void releaseStaged(DeviceBuffer &b, void *pinned);
  /// Pinned host memory, likewise.
  Status reservePinned(void **p, size_t *capacity, size_t bytes);
  /// Slot `slot`'s buffer of `p`, likewise; freePinned frees every slot's.
  Status reservePinned(PinnedSlots &p, int slot, size_t bytes) {
    return reservePinned(&p.slot[slot], &p.capacity[slot], bytes);
  }
  void freePinned(PinnedSlots &p);
  /// A scratch buffer for library workspaces, shared by the device's ops.
  Status workspace(size_t bytes, void **p);
  /// How many arenas were planned (the first step's, and one per new shape).
  int arenasPlanned() const { return arenasPlanned_; }
  /// Frees every buffer and the arena (the device's end, its streams
  /// synchronized).
  void freeAll();

  // device::Allocator
  Status allocate(size_t bytes, const char *what, uint64_t *address) override;
  void free(uint64_t address) override;
  bool arenaPending() const override { return allocatedOutsideArena_; }
  /// Moves every buffer into one arena sized for the step (one cuMemAlloc).
  /// Buffers move, so captured graphs are captured anew.
  Status planArena() override;

private:
  GpuDevice &device_;
  DeviceBuffer workspace_;
  std::set<DeviceBuffer *> buffers_; // every buffer holding memory
  cuda::CUdeviceptr arena_ = 0;
  bool allocatedOutsideArena_ = false;
  int arenasPlanned_ = 0;
};

} // namespace dtf::gpu
