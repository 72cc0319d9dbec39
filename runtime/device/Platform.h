// The devices of one kind that this process has (its GPUs), and where the
// executor finds them.
#pragma once

#include "schema/Status.h"
#include "runtime/device/Device.h"

#include <memory>
#include <string>
#include <string_view>

namespace dtf::device {

class Platform {
public:
  virtual ~Platform() = default;
  virtual int deviceCount() const = 0;
  /// What the devices are, for messages ("2 emulated GPUs", a driver's
  /// version).
  virtual std::string description() const = 0;
  /// Whether an op of this name has a kernel on these devices.
  virtual bool hasKernel(std::string_view opName) const = 0;
  /// Why the kernel of an op of this name cannot run here although it
  /// exists (a library it calls did not load), in words; "" when it can.
  virtual std::string kernelUnusable(std::string_view opName) const = 0;
  /// Device `index` (< deviceCount()), opened for one executor.
  virtual Status openDevice(int index, const DeviceOptions &options,
                            std::unique_ptr<Device> *out) = 0;
};

/// The process's GPUs: the CUDA driver (or its emulation), loaded at the
/// first call; null when there is none, with the reason in *whyNot ("no
/// CUDA driver: ..."). Defined by the CUDA implementation
/// (runtime/gpu/CudaPlatform.cpp), which a program that uses it links, as
/// IREE's drivers are linked into the programs that register them.
Platform *gpuPlatform(std::string *whyNot);

} // namespace dtf::device
