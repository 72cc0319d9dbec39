// Shared by the fusion tests that launch a plan's generated kernels on the
// emulated GPU (UpdateGpuTest.cpp, LabelReportGpuTest.cpp): a model compiled
// by dtfc with its GPU code, and one emulated GPU. Needs the dtf-fusion-tests
// target's definitions (DTF_DTFC_PATH, DTF_CUDA_EMU_PATH, DTF_CUDA_TOOLKIT).
#pragma once

#include "runtime/gpu/GpuDevice.h"
#include "runtime/plan/PlanReader.h"
#include "tests/unit/fusion/SkipReasons.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>

namespace dtf::test {

/// Compiles `model` (a path under the source tree) with dtfc's GPU code
/// (--gpu-kernels=on) into `plan`; `tag` names the temporary file. Sets
/// `skip` (and compiles nothing) without a CUDA toolkit, or when this CPU
/// cannot run the CPU code the emulation runs for each GPU kernel.
inline void compileWithGpuCode(const std::string &model, const std::string &tag,
                               plan::Plan *plan, std::string *skip) {
  namespace fs = std::filesystem;
  *skip = noCudaToolkit(DTF_HAVE_CUDA_TOOLKIT,
                        std::string(DTF_CUDA_TOOLKIT) + "/bin/ptxas");
  if (!skip->empty())
    return;
  const std::string source = (fs::path(DTF_SOURCE_DIR) / model).string();
  const std::string out =
      (fs::temp_directory_path() /
       ("dtf-" + tag + "-" + std::to_string(::getpid()) + ".bin"))
          .string();
  const std::string cmd =
      std::string(DTF_DTFC_PATH) + " '" + source +
      "' --no-data-check --gpu-kernels=on --cuda-toolkit '" + DTF_CUDA_TOOLKIT +
      "' -o '" + out + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  Status s = plan::readPlanFile(out, plan);
  fs::remove(out);
  ASSERT_TRUE(s.isOk()) << s.message();
  *skip = cannotRunGeneratedKernels(*plan);
}

/// The process's driver set to the emulation with one GPU, and that GPU.
inline void emulatedGpu(gpu::CudaDriver **driver,
                        std::unique_ptr<gpu::GpuDevice> *device) {
  // Once per process: the process's driver is loaded once.
  static const bool configured = [] {
    gpu::CudaLibraries libs;
    libs.driver = DTF_CUDA_EMU_PATH;
    libs.emulatedGpus = 1;
    gpu::configureProcessGpus(libs);
    return true;
  }();
  (void)configured;
  std::string noDriver;
  *driver = gpu::processDriver(&noDriver);
  ASSERT_TRUE(*driver) << noDriver;
  Status s = gpu::GpuDevice::create(**driver, 0, device);
  ASSERT_TRUE(s.isOk()) << s.message();
}

} // namespace dtf::test
