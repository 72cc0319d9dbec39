// Replaces the global operator new and C's aligned_alloc in the test binary
// to count calls; Tensor::allocate gets its buffers from aligned_alloc, so
// that count is the number of tensor buffers made.
#include "tests/unit/exec/AllocationCounter.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<uint64_t> gNew{0};
std::atomic<uint64_t> gAligned{0};
} // namespace

namespace dtf::testing {
uint64_t operatorNewCount() { return gNew.load(); }
uint64_t alignedAllocCount() { return gAligned.load(); }
} // namespace dtf::testing

extern "C" void *aligned_alloc(size_t alignment, size_t size) noexcept {
  gAligned.fetch_add(1, std::memory_order_relaxed);
  void *p = nullptr;
  if (alignment < sizeof(void *))
    alignment = sizeof(void *);
  return posix_memalign(&p, alignment, size) == 0 ? p : nullptr;
}

void *operator new(size_t size) {
  gNew.fetch_add(1, std::memory_order_relaxed);
  if (void *p = std::malloc(size ? size : 1))
    return p;
  throw std::bad_alloc();
}
void *operator new[](size_t size) { return operator new(size); }
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, size_t) noexcept { std::free(p); }
void operator delete[](void *p, size_t) noexcept { std::free(p); }
