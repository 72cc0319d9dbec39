// TransferBuffers: large buffers a task lends to the tensors it sends and
// receives (a pull's snapshot, a push's values) and takes back when the last
// tensor over one goes, so that each transfer does not map and fault in
// fresh pages.
#pragma once

#include "runtime/core/Tensor.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace dtf::dist {

/// Why: glibc serves an allocation larger than a thread arena's heap
/// (64 MiB) from gRPC's threads with mmap whatever M_MMAP_THRESHOLD says, and
/// unmaps it on free, so a 256 MB pull or push faulted in and zeroed 65,536
/// fresh pages every time (half the time of a plaintext 256 MB transfer on
/// the development machine; docs/protocol.md, "Buffers").
///
/// Buffers of at least kMinBytes are kept when released, up to `maxIdleBytes`
/// idle in all (the least recently released go first); smaller tensors come
/// from malloc, whose own free lists serve them without faults. Thread-safe;
/// a buffer released after the pool is gone is freed.
class TransferBuffers {
public:
  static constexpr size_t kMinBytes = size_t(1) << 20;

  /// maxIdleBytes 0: no reuse, every tensor is Tensor::allocate's.
  explicit TransferBuffers(size_t maxIdleBytes);
  ~TransferBuffers();
  TransferBuffers(const TransferBuffers &) = delete;
  TransferBuffers &operator=(const TransferBuffers &) = delete;

  /// An uninitialized tensor, over an idle buffer that fits (capacity at
  /// least its bytes and at most twice) when there is one. Undefined only
  /// when memory runs out.
  Tensor allocate(DType dtype, std::vector<int64_t> shape);

  /// What the pool holds idle now, and how many allocations it served from
  /// idle buffers and from new ones (of at least kMinBytes).
  size_t idleBytes() const;
  uint64_t reused() const;
  uint64_t fresh() const;

  /// The idle bound of a ps holding `variableBytes`: twice that (a pull's
  /// snapshot and a push's values in flight together), at most 1 GiB.
  static size_t boundFor(uint64_t variableBytes);

private:
  struct Idle;
  std::shared_ptr<Idle> idle_;
};

} // namespace dtf::dist
