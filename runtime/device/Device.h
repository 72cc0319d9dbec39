// The device interface that the executor runs ops through, in the style of
// IREE's HAL: a device, its allocator, its stream, the ops placed on it and
// the graphs they run in. CUDA implements it (runtime/gpu), and so does the
// host (runtime/device/cpu).
#pragma once

#include "schema/Status.h"
#include "runtime/device/Allocator.h"
#include "runtime/device/DeviceOp.h"
#include "runtime/device/Graph.h"
#include "runtime/device/Stream.h"

#include <memory>
#include <string>

namespace dtf::device {

/// How a device is opened for one executor.
struct DeviceOptions {
  /// Whether f32 matmuls and convolutions may compute in TF32 on tensor
  /// cores (the plan's session(allow_tf32 = true)); off, they keep f32's
  /// 24-bit mantissa, as PyTorch's matmul does by default.
  bool allowTf32 = false;
};

/// "/job:localhost/replica:0/task:0/device:GPU:N", as log_device_placement
/// and messages name GPU `index`.
std::string gpuDeviceName(int index);

class Device {
public:
  virtual ~Device() = default;
  /// Its number among the devices of its kind (GPU:N).
  virtual int index() const = 0;
  /// Its full name ("/job:localhost/replica:0/task:0/device:GPU:0").
  virtual std::string name() const = 0;
  virtual Allocator &allocator() = 0;
  /// The stream its ops run on (the executor's copies go there too).
  virtual Stream &stream() = 0;
  /// An op placed on this device (its kernel looked up by spec.opName).
  virtual Status createOp(DeviceOpSpec spec,
                          std::unique_ptr<DeviceOp> *out) = 0;
  /// An empty graph of this device's ops.
  virtual std::unique_ptr<Graph> createGraph() = 0;

  /// Steps that end without waiting (their fetches read one step late,
  /// Graph::setLate): with 2 slots, every staging buffer (pinned copies up
  /// and down, a kernel's label report) has one per slot, and alternate
  /// steps use alternate slots, so that a step is queued while the one
  /// before still copies. 1 (the default): one of each. Set before the
  /// first step. A device whose work is done when called (the host) has
  /// nothing to stage.
  virtual void setStagingSlots(int /*n*/) {}
  /// The slot the next step stages into (0 or 1).
  virtual void setStagingSlot(int /*slot*/) {}
  /// The work queued so far ends the step staged in `slot`.
  virtual Status recordStepEnd(int /*slot*/) { return Status::ok(); }
  /// Waits on the host for that step's work only (later steps stay queued).
  virtual Status waitStepEnd(int /*slot*/) { return Status::ok(); }
};

} // namespace dtf::device
