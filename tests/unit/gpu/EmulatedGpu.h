// One GPU of the host emulation (libdtf-cuda-emu.so) for the GPU tests, and
// its counters.
#pragma once

#include "runtime/gpu/GpuDevice.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace dtf::gpu {

/// GPU 0 of the emulation, loaded as the process's driver.
struct Emulated {
  std::unique_ptr<GpuDevice> device;
  Emulated() {
    CudaLibraries libs;
    libs.driver = DTF_CUDA_EMU_PATH;
    libs.emulatedGpus = 1;
    configureProcessGpus(libs);
    std::string why;
    CudaDriver *d = processDriver(&why);
    EXPECT_TRUE(d) << why;
    if (d) {
      Status s = GpuDevice::create(*d, 0, &device);
      EXPECT_TRUE(s.isOk()) << s.message();
    }
  }
};

/// The emulation's counter named `what` ("copies", "graph launches"), -1
/// when it prints none.
inline long counter(const std::string &what) {
  const std::string stats = processEmulationStats();
  const size_t at = stats.find(" " + what);
  if (at == std::string::npos)
    return -1;
  const size_t start = stats.rfind(' ', at - 1) + 1;
  return std::stol(stats.substr(start, at - start));
}

} // namespace dtf::gpu
