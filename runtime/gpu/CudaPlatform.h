// The process's CUDA driver (loaded once, at the first use) and
// CudaPlatform, the process's GPUs as the device layer sees them
// (device::gpuPlatform).
#pragma once

#include "runtime/device/Platform.h"
#include "runtime/gpu/CudaDriver.h"

#include <string>

namespace dtf::gpu {

/// Sets where the process's CUDA libraries come from (dtf-run's
/// --emulate-gpus; $DTF_CUDA_DRIVER names another driver library). Before the
/// first processDriver().
void configureProcessGpus(const CudaLibraries &libs);

/// The process's driver, loaded at the first call; null when there is none,
/// with the reason ("no CUDA driver: cannot load libcuda.so.1 (...)").
CudaDriver *processDriver(std::string *whyNot);

/// The emulation's counters when the process loaded it, else "".
std::string processEmulationStats();

/// The GPUs of one driver: their count, description and kernels; opens a
/// GpuDevice per executor.
class CudaPlatform : public device::Platform {
public:
  explicit CudaPlatform(CudaDriver &driver) : driver_(driver) {}
  int deviceCount() const override { return driver_.deviceCount(); }
  std::string description() const override { return driver_.description(); }
  bool hasKernel(std::string_view opName) const override;
  std::string kernelUnusable(std::string_view opName) const override;
  Status openDevice(int index, const device::DeviceOptions &options,
                    std::unique_ptr<device::Device> *out) override;

private:
  CudaDriver &driver_;
};

} // namespace dtf::gpu
