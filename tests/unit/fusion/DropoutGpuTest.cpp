// A generated dropout kernel on the (emulated) GPU as dtf-run runs it: one
// GpuOp whose first step runs eagerly, whose second is captured as a CUDA
// graph and whose later steps replay that graph. The step's key reaches the
// kernel through the "dropout-key" word, written on the host at every step
// and copied up inside the graph: each replay must draw its own step's mask,
// bit for bit the op-by-op kernel's (a launch that baked the key into the
// graph would replay the captured step's mask forever, and fail here).
#include "runtime/core/ThreadPool.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/PlanKernels.h"
#include "runtime/gpu/GpuDevice.h"
#include "runtime/gpu/GpuFusedContext.h"
#include "runtime/gpu/GpuKernels.h"
#include "runtime/gpu/GpuOp.h"
#include "runtime/kernels/CpuKernels.h"
#include "runtime/kernels/GeneratedKernels.h"
#include "runtime/plan/FusedKernels.h"
#include "runtime/plan/PlanReader.h"
#include "tests/unit/fusion/EmulatedGpuPlan.h"
#include "tests/unit/fusion/KernelInputs.h"
#include "tests/unit/fusion/SkipReasons.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace {

using dtf::gpu::cuda::CUdeviceptr;

TEST(DropoutKernelOnTheEmulatedGpu, EveryReplayOfItsGraphDrawsItsOwnStepsMask) {
  dtf::gpu::CudaDriver *driver = nullptr;
  std::unique_ptr<dtf::gpu::GpuDevice> device;
  int tested = 0;
  for (const char *model : {"dropout_f32", "dropout_f64"}) {
    dtf::plan::Plan plan;
    std::string skip;
    ASSERT_NO_FATAL_FAILURE(dtf::test::compileWithGpuCode(
        std::string("tests/unit/fusion/dropout/") + model + ".dtf",
        "dropout-gpu", &plan, &skip));
    // Skips only where the build has no CUDA toolkit (noCudaToolkit) or this
    // CPU cannot run the kernels' CPU twins (cannotRunGeneratedKernels); the
    // message says which and what checks the rest (SkipReasons.h).
    if (!skip.empty())
      GTEST_SKIP() << skip;
    auto kernels = dtf::exec::planKernelsOf(plan);
    ASSERT_TRUE(kernels && kernels->loaded) << kernels->fallbackReason;
    if (!device) {
      ASSERT_NO_FATAL_FAILURE(dtf::test::emulatedGpu(&driver, &device));
    }
    dtf::KernelRegistry registry;
    dtf::registerCpuKernels(registry);
    dtf::ThreadPool pool(2);
    for (int k = 0; k < plan.kernels_size(); ++k) {
      const dtf::plan::Kernel &kernel = plan.kernels(k);
      if (!dtf::isDropoutKernel(kernels->loaded->info(k)))
        continue;
      ++tested;
      ASSERT_TRUE(kernels->gpu[size_t(k)].present()) << kernel.name();
      // x in a device buffer of its own, 40 examples of a tower that
      // starts at example 80 of the batch.
      constexpr int64_t kRows = 40, kFirst = 80;
      constexpr uint64_t kSeed = 5;
      std::mt19937 rng{uint32_t(k)};
      std::uniform_real_distribution<double> u(-2, 2);
      dtf::Tensor x = dtf::test::kernelInputZeros(kernel, 0, kRows);
      for (int64_t e = 0; e < x.numElements(); ++e)
        if (x.dtype() == dtf::DType::F32)
          x.data<float>()[e] = float(u(rng));
        else
          x.data<double>()[e] = u(rng);
      CUdeviceptr buffer = 0;
      ASSERT_EQ(driver->cuMemAlloc(&buffer, x.byteSize()), 0);
      ASSERT_EQ(driver->cuMemcpyHtoDAsync(buffer, x.rawData(), x.byteSize(),
                                          device->computeStream()),
                0);
      ASSERT_TRUE(device->synchronize().isOk());
      dtf::Tensor view = dtf::Tensor::view(x.dtype(), x.shape(),
                                           reinterpret_cast<void *>(buffer));
      auto ctx = std::make_unique<dtf::gpu::GpuFusedContext>(
          *device, kernels->loaded, k, kernels->gpu[size_t(k)]);
      ctx->setOpName("dtf.fused");
      ctx->setBatchOffset(kFirst, kRows);
      dtf::gpu::GpuOp op(*device,
                         dtf::gpu::gpuKernelRegistry().lookup("dtf.fused"),
                         std::move(ctx));
      op.addDeviceInput(&view);
      op.setNumOutputs(1);
      op.setDownload(0);

      // The op-by-op kernel on the host, for the same steps.
      dtf::plan::Program body = dtf::plan::kernelBodyProgram(kernel);
      for (auto &o : *body.mutable_ops())
        o.clear_device();
      dtf::exec::VariableStore variables;
      dtf::exec::ExecutorOptions options;
      options.intraOpPool = &pool;
      options.seed = kSeed;
      std::unique_ptr<dtf::exec::Executor> opByOp;
      dtf::Status s = dtf::exec::Executor::create(body, variables, registry,
                                                  options, &opByOp);
      ASSERT_TRUE(s.isOk()) << s.message();
      ASSERT_TRUE(opByOp->setFeed(0, x).isOk());
      opByOp->setBatchOffset(kFirst, kRows);

      std::vector<char> previous;
      constexpr uint64_t kSteps = 6;
      for (uint64_t step = 1; step <= kSteps; ++step) {
        s = op.run(step, kSeed);
        ASSERT_TRUE(s.isOk()) << kernel.name() << ": " << s.message();
        ASSERT_TRUE(opByOp->run(step).isOk());
        const dtf::Tensor &got = *op.hostOutput(0);
        const dtf::Tensor &want = opByOp->fetch(0);
        ASSERT_EQ(got.shape(), want.shape());
        EXPECT_EQ(std::memcmp(got.rawData(), want.rawData(), got.byteSize()), 0)
            << model << " " << kernel.name() << " (" << kernel.body(0).name()
            << ") step " << step << (step >= 3 ? " (a replay)" : "")
            << " differs from the op-by-op kernel's mask";
        std::vector<char> bytes(got.byteSize());
        std::memcpy(bytes.data(), got.rawData(), bytes.size());
        if (kernel.body(0).attrs().at("rate").f() > 0) {
          EXPECT_NE(bytes, previous) << kernel.name() << ": step " << step
                                     << " drew the mask of the step before";
        }
        previous = std::move(bytes);
      }
      // Step 1 eager, step 2 captured and launched, 3 to 6 replayed.
      EXPECT_EQ(op.graphLaunches(), kSteps - 1) << kernel.name();
      EXPECT_EQ(driver->cuMemFree(buffer), 0);
    }
  }
  EXPECT_GT(tested, 0);
  std::printf("[ gpu      ] %d dropout kernels: every replay of the graph "
              "drew its step's mask, equal to the op-by-op kernel's\n",
              tested);
}

} // namespace
