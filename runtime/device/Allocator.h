// A device's memory: buffers of its own that outlive steps, and the arena
// that the steps' buffers are packed into once a step has sized them.
#pragma once

#include "schema/Status.h"

#include <cstddef>
#include <cstdint>

namespace dtf::device {

/// Device memory is named by its address on the device (a CUdeviceptr on
/// CUDA, a host pointer on the CPU), as a uint64_t: the executor never
/// reads it on the host.
class Allocator {
public:
  virtual ~Allocator() = default;
  /// A buffer of `bytes` of its own, outside the arena (whose buffers move
  /// and lose their contents): a resident variable, a fetch kept on the
  /// device. `what` names it in the error ("a resident variable").
  virtual Status allocate(size_t bytes, const char *what,
                          uint64_t *address) = 0;
  virtual void free(uint64_t address) = 0;

  /// Whether the next planArena() moves the steps' buffers (a step
  /// allocated outside the arena): what they hold is lost.
  virtual bool arenaPending() const = 0;
  /// After a step that allocated, its stream synchronized: moves every
  /// step buffer into one arena sized for the step, so that later steps of
  /// that shape allocate nothing.
  virtual Status planArena() = 0;
};

} // namespace dtf::device
