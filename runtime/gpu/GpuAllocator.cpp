// GpuAllocator: a GPU's buffers, its arena and its pinned staging memory.
#include "runtime/gpu/GpuAllocator.h"
#include "runtime/gpu/GpuDevice.h"

#include <algorithm>

namespace dtf::gpu {

using namespace cuda;

Status GpuAllocator::reserve(DeviceBuffer &b, size_t bytes) {
  if (bytes <= b.capacity)
    return Status::ok();
  // The old buffer may still be in use by queued work.
  if (b.ptr) {
    DTF_RETURN_IF_ERROR(device_.synchronize());
    release(b);
  }
  // Rounded up, so that batches of nearby sizes share a buffer.
  const size_t rounded = (bytes + 255) / 256 * 256;
  DTF_RETURN_IF_ERROR(device_.check(
      "cuMemAlloc", device_.driver().cuMemAlloc(&b.ptr, rounded)));
  b.capacity = rounded;
  b.inArena = false;
  buffers_.insert(&b);
  allocatedOutsideArena_ = true;
  return Status::ok();
}

void GpuAllocator::release(DeviceBuffer &b) {
  if (b.ptr && !b.inArena)
    device_.driver().cuMemFree(b.ptr);
  buffers_.erase(&b);
  b = DeviceBuffer();
}

void GpuAllocator::releaseStaged(DeviceBuffer &b, void *pinned) {
  release(b);
  if (pinned)
    device_.driver().cuMemFreeHost(pinned);
}

Status GpuAllocator::planArena() {
  if (!allocatedOutsideArena_)
    return Status::ok();
  CudaDriver &driver = device_.driver();
  DTF_RETURN_IF_ERROR(device_.synchronize());
  size_t total = 0;
  for (DeviceBuffer *b : buffers_)
    total += b->capacity; // multiples of 256 bytes
  CUdeviceptr arena = 0;
  if (total > 0)
    DTF_RETURN_IF_ERROR(
        device_.check("cuMemAlloc", driver.cuMemAlloc(&arena, total)));
  size_t offset = 0;
  for (DeviceBuffer *b : buffers_) {
    if (!b->inArena)
      driver.cuMemFree(b->ptr);
    b->ptr = arena + offset;
    b->inArena = true;
    offset += b->capacity;
  }
  if (arena_)
    driver.cuMemFree(arena_);
  arena_ = arena;
  allocatedOutsideArena_ = false;
  ++arenasPlanned_;
  return Status::ok();
}

Status GpuAllocator::reservePinned(void **p, size_t *capacity, size_t bytes) {
  if (bytes <= *capacity && *p)
    return Status::ok();
  CudaDriver &driver = device_.driver();
  if (*p) {
    DTF_RETURN_IF_ERROR(device_.synchronize());
    driver.cuMemFreeHost(*p);
    *p = nullptr;
  }
  const size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  DTF_RETURN_IF_ERROR(device_.check(
      "cuMemHostAlloc",
      driver.cuMemHostAlloc(p, rounded, CU_MEMHOSTALLOC_PORTABLE)));
  *capacity = rounded;
  return Status::ok();
}

void GpuAllocator::freePinned(PinnedSlots &p) {
  for (void *&b : p.slot) {
    if (b)
      device_.driver().cuMemFreeHost(b);
    b = nullptr;
  }
  p.capacity[0] = p.capacity[1] = 0;
}

Status GpuAllocator::workspace(size_t bytes, void **p) {
  DTF_RETURN_IF_ERROR(reserve(workspace_, std::max<size_t>(bytes, 256)));
  *p = reinterpret_cast<void *>(uintptr_t(workspace_.ptr));
  return Status::ok();
}

void GpuAllocator::freeAll() {
  release(workspace_);
  for (DeviceBuffer *b : buffers_)
    if (!b->inArena && b->ptr)
      device_.driver().cuMemFree(b->ptr);
  if (arena_)
    device_.driver().cuMemFree(arena_);
  arena_ = 0;
}

Status GpuAllocator::allocate(size_t bytes, const char *what,
                              uint64_t *address) {
  DTF_RETURN_IF_ERROR(device_.makeCurrent());
  CUdeviceptr p = 0;
  CUresult r = device_.driver().cuMemAlloc(&p, bytes);
  if (r != CUDA_SUCCESS)
    return device_.check(strCat("cuMemAlloc (", what, ")").c_str(), r);
  *address = uint64_t(p);
  return Status::ok();
}

void GpuAllocator::free(uint64_t address) {
  if (device_.makeCurrent().isOk())
    (void)device_.driver().cuMemFree(CUdeviceptr(address));
}

} // namespace dtf::gpu
