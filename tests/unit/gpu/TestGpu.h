// The GPU the GPU unit tests run on: GPU 0 of dtf's host emulation
// (libdtf-cuda-emu.so) by default, or, with DTF_GPU=real, this machine's
// CUDA driver, loaded through the same dlopen path as dtf-run's
// (libcuda.so.1 or $DTF_CUDA_DRIVER; cuBLAS, cuDNN and NCCL as
// $DTF_CUBLAS_LIBRARY, $DTF_CUDNN_LIBRARY and $DTF_NCCL_LIBRARY name them,
// else by their sonames). A test that needs what only the emulation has (its
// faults, its refusals, its counters) says so: GTEST_SKIP with the reason, or
// one "[ NOTE ]" line per check it leaves out.
#pragma once

#include "runtime/gpu/CudaPlatform.h"
#include "runtime/gpu/GpuDevice.h"
#include "runtime/kernels/CpuKernels.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

namespace dtf::gpu {

/// DTF_GPU=real: the tests run on the real driver.
inline bool onRealGpu() {
  const char *v = std::getenv("DTF_GPU");
  return v && std::string(v) == "real";
}

/// The emulation library: $DTF_CUDA_EMU_LIBRARY, else the build's (the GPU
/// bundle's check.sh names its own copy).
inline const char *emulationLibrary() {
  const char *env = std::getenv("DTF_CUDA_EMU_LIBRARY");
  return env && *env ? env : DTF_CUDA_EMU_BUILD_PATH;
}

/// The libraries the tests load: the emulation with `gpus` GPUs, or the
/// real driver's (DTF_GPU=real: libcuda.so.1 or $DTF_CUDA_DRIVER, as
/// dtf-run's; CudaDriver::loadLibraries reads $DTF_CUBLAS_LIBRARY...).
inline CudaLibraries testLibraries(int gpus = 1) {
  CudaLibraries libs;
  if (onRealGpu()) {
    if (const char *driver = std::getenv("DTF_CUDA_DRIVER"))
      libs.driver = driver;
    return libs;
  }
  libs.driver = emulationLibrary();
  libs.emulatedGpus = gpus;
  return libs;
}

/// Whether the emulation's counters can be checked here; on a real driver
/// it prints which checks `what` names are left out, and the test goes on
/// with the rest (its results against the CPU's).
inline bool emulationCounts(const char *what) {
  if (!onRealGpu())
    return true;
  std::printf("[   NOTE   ] DTF_GPU=real: not checked: %s (the emulation's "
              "counters)\n",
              what);
  return false;
}

/// The CPU's kernels, against which the GPU kernels' results are checked.
inline const KernelRegistry &cpuKernels() {
  static KernelRegistry *r = [] {
    auto *reg = new KernelRegistry();
    registerCpuKernels(*reg);
    return reg;
  }();
  return *r;
}

/// GPU 0 of the tests' driver, made the process's driver.
struct TestGpu {
  std::unique_ptr<GpuDevice> device;
  TestGpu() {
    configureProcessGpus(testLibraries(1));
    std::string why;
    CudaDriver *d = processDriver(&why);
    EXPECT_TRUE(d) << why;
    if (d) {
      Status s = GpuDevice::create(*d, 0, &device);
      EXPECT_TRUE(s.isOk()) << s.message();
    }
  }
};

/// Sets an environment variable for a scope, then gives back the value it
/// had (check.sh passes the libraries it found in $DTF_*_LIBRARY; a test
/// that names a missing one must not lose them for the tests after it).
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name_(name) {
    if (const char *old = std::getenv(name))
      old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv &) = delete;
  ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
  const char *name_;
  std::string old_;
  bool had_ = false;
};

/// The emulation's counter named `what` ("copies", "graph launches"), -1
/// when it prints none (a real driver).
inline long counter(const std::string &what) {
  const std::string stats = processEmulationStats();
  const size_t at = stats.find(" " + what);
  if (at == std::string::npos)
    return -1;
  const size_t start = stats.rfind(' ', at - 1) + 1;
  return std::stol(stats.substr(start, at - start));
}

} // namespace dtf::gpu

/// Skips the test on a real driver (DTF_GPU=real), saying why: it checks
/// what only the emulation does (a fault it plays, a refusal in its words).
#define DTF_EMULATION_ONLY(why)                                                \
  do {                                                                         \
    if (::dtf::gpu::onRealGpu())                                               \
      GTEST_SKIP() << "DTF_GPU=real: needs dtf's CUDA emulation: " << why;     \
  } while (0)

/// Skips the test when the driver `d` has fewer than `n` GPUs (only a real
/// one can: the emulation has as many as the test asks for).
#define DTF_NEEDS_GPUS(d, n)                                                   \
  do {                                                                         \
    if ((d).deviceCount() < (n))                                               \
      GTEST_SKIP() << "needs " << (n) << " GPUs; this machine has "            \
                   << (d).deviceCount();                                       \
  } while (0)

/// Every use of the emulation library's path in the tests.
#define DTF_CUDA_EMU_PATH (::dtf::gpu::emulationLibrary())
