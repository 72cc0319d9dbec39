// The launch of one op of a program on a device: its kernel, its inputs as
// device views, and the outputs that host code reads, copied down.
#pragma once

#include "runtime/core/Tensor.h"
#include "runtime/device/KernelCode.h"
#include "runtime/kernels/GeneratedKernels.h"
#include "runtime/kernels/Kernel.h"

#include <cstdint>
#include <memory>
#include <string>

namespace dtf::device {

/// What Device::createOp needs to know of an op.
struct DeviceOpSpec {
  std::string opName;
  AttrMap attrs;
  int numOutputs = 0;
  /// dtf.fused: the plan's loaded kernels (their parameters; the CPU twin
  /// an emulation runs), which one it runs, and that kernel's device code.
  std::shared_ptr<const GeneratedKernels> kernels;
  int kernel = -1;
  const KernelCode *code = nullptr;
};

/// One op placed on a device. Its inputs are device views (another op's
/// deviceOutput on the same device, an upload of a Graph, a resident
/// variable's copy); it runs as part of a Graph.
class DeviceOp {
public:
  virtual ~DeviceOp() = default;
  /// The next input, in order: a view that outlives this op.
  virtual void addDeviceInput(const Tensor *view) = 0;
  /// Output k is read on the host: copied down into hostOutput(k).
  virtual void setDownload(int k) = 0;
  virtual Tensor *hostOutput(int k) = 0;
  /// Output k in device memory (stable address; valid after a run).
  virtual const Tensor &deviceOutput(int k) = 0;
  /// The op writes some input in place (an optimizer update): a copy down
  /// still reading its memory must finish first.
  virtual void setWritesInputs() = 0;
  /// This step's share of the global batch (random kernels' masks).
  virtual void setBatchOffset(int64_t first, int64_t rows) = 0;
  /// Whether each step copies a per-step key up (a dropout kernel).
  virtual bool uploadsStepKey() const = 0;
};

} // namespace dtf::device
