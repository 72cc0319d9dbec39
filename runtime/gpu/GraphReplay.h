// GraphReplay: stream work replayed as a CUDA graph once its inputs'
// shapes and buffers stop changing, and GraphSignature, what it depends on.
#pragma once

#include "schema/Status.h"
#include "runtime/gpu/GpuDevice.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace dtf::gpu {

/// False when DTF_CUDA_GRAPHS=0: GPU work then always runs eagerly.
bool cudaGraphsEnabled();

/// What a captured graph depends on: its inputs' shapes and buffers.
struct GraphSignature {
  std::vector<std::vector<int64_t>> shapes;
  std::vector<const void *> pointers;
  bool operator==(const GraphSignature &o) const {
    return shapes == o.shapes && pointers == o.pointers;
  }
};

/// Stream work replayed as a CUDA graph (GpuOp's, GpuSegment's): eager while
/// its signature changes from step to step, captured when a step's
/// signature equals the one the step before left, replayed while it stays.
/// With two staging slots (GpuDevice::stagingSlots) the work of each slot
/// bakes in that slot's pinned buffers: one graph per slot, the second
/// captured at its slot's first step after the first capture (the
/// signature names slot 0's buffers, standing for both).
class GraphReplay {
public:
  explicit GraphReplay(GpuDevice &device)
      : device_(device), enabled_(cudaGraphsEnabled()) {}
  ~GraphReplay() {
    drop(0);
    drop(1);
  }
  GraphReplay(const GraphReplay &) = delete;
  GraphReplay &operator=(const GraphReplay &) = delete;
  /// Runs a step whose inputs are `sig`, staged in slot `slot`: one
  /// cuGraphLaunch, or `enqueue` captured and launched, or `enqueue`
  /// eagerly.
  Status run(const GraphSignature &sig, const std::function<Status()> &enqueue,
             int slot = 0);
  /// The signature this step left for the next (an eager step may have made
  /// buffers).
  void ran(GraphSignature after) {
    last_ = std::move(after);
    haveLast_ = true;
  }
  /// From now on every step runs eagerly (dtf-run --profile times each op
  /// between events, which a captured graph would not show one by one).
  void disable() { enabled_ = false; }
  uint64_t launches() const { return launches_; }
  /// Whether the last run() replayed the graph already captured (its
  /// buffers and shapes were those of the capture, and still are).
  bool replayed() const { return replayed_; }

private:
  void drop(int slot);
  Status captureAndLaunch(const GraphSignature &sig,
                          const std::function<Status()> &enqueue, int slot);
  GpuDevice &device_;
  bool enabled_;
  GraphSignature last_, captured_[2];
  bool haveLast_ = false;
  cuda::CUgraphExec exec_[2] = {nullptr, nullptr};
  uint64_t launches_ = 0;
  bool replayed_ = false;
};

} // namespace dtf::gpu
