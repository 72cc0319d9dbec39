// A device's stream of work (copies, kernels, graphs run in order) and the
// events by which one stream waits for another's work.
#pragma once

#include "schema/Status.h"

#include <cstddef>
#include <cstdint>

namespace dtf::device {

/// A point in some stream's work (a CUDA event): another stream's later
/// work can wait for it. Made and recorded by the implementation that owns
/// the work (the towers' all-reduce); opaque to the executor.
class Event {
public:
  virtual ~Event() = default;
};

/// The stream that a device's ops run on. Copies are queued, not done:
/// their host memory must stay as it is until synchronize(). `what` names
/// the copy in the error ("a resident variable").
class Stream {
public:
  virtual ~Stream() = default;
  virtual Status copyToDevice(uint64_t device, const void *host, size_t bytes,
                              const char *what) = 0;
  virtual Status copyToHost(void *host, uint64_t device, size_t bytes,
                            const char *what) = 0;
  virtual Status copyOnDevice(uint64_t to, uint64_t from, size_t bytes,
                              const char *what) = 0;
  /// The stream's later work waits for `event` (another stream's).
  virtual Status wait(const Event &event) = 0;
  /// Waits on the host for all the device's work.
  virtual Status synchronize() = 0;
};

} // namespace dtf::device
