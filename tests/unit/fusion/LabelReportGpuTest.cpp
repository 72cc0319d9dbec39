// A row kernel's report of a label outside the classes on the (emulated) GPU:
// the sparse cross-entropy and its gradient launched with the plan's
// parameters (the "row-index-error" word last among the buffers), once
// eagerly and then captured as a CUDA graph and replayed: the word is mapped
// pinned host memory, which the kernel claims for a bad row (row + 1, label)
// and the context reads after the stream's end, turns into the op-by-op
// kernel's message and clears; a good batch leaves it clear.
#include "runtime/exec/PlanKernels.h"
#include "runtime/gpu/GpuDevice.h"
#include "runtime/gpu/GpuFusedContext.h"
#include "runtime/gpu/GpuKernels.h"
#include "runtime/kernels/GeneratedKernels.h"
#include "runtime/plan/PlanReader.h"
#include "tests/unit/fusion/EmulatedGpuPlan.h"
#include "tests/unit/fusion/KernelInputs.h"
#include "tests/unit/fusion/SkipReasons.h"

#include <gtest/gtest.h>

#include <random>

namespace {

using dtf::gpu::cuda::CUdeviceptr;

TEST(RowKernelOnTheEmulatedGpu, ReportsABadLabelFromEveryReplayOfItsGraph) {
  dtf::plan::Plan plan;
  std::string skip;
  ASSERT_NO_FATAL_FAILURE(dtf::test::compileWithGpuCode(
      "tests/unit/fusion/rows/labels.dtf", "labels-gpu", &plan, &skip));
  // Skips only where the build has no CUDA toolkit (noCudaToolkit) or this
  // CPU cannot run the kernels' CPU twins (cannotRunGeneratedKernels); the
  // message says which and what checks the rest (SkipReasons.h).
  if (!skip.empty())
    GTEST_SKIP() << skip;
  auto kernels = dtf::exec::planKernelsOf(plan);
  ASSERT_TRUE(kernels && kernels->loaded) << kernels->fallbackReason;

  dtf::gpu::CudaDriver *driver = nullptr;
  std::unique_ptr<dtf::gpu::GpuDevice> device;
  ASSERT_NO_FATAL_FAILURE(dtf::test::emulatedGpu(&driver, &device));
  dtf::Status s;

  constexpr int64_t kRows = 4, kClasses = 5;
  int tested = 0;
  for (int k = 0; k < plan.kernels_size(); ++k) {
    const dtf::plan::Kernel &kernel = plan.kernels(k);
    if (kernel.body_size() != 1 ||
        kernel.body(0).name().rfind("dtf.sparse_softmax_cross_entropy", 0) != 0)
      continue;
    ++tested;
    const std::string op = kernel.body(0).name();
    ASSERT_TRUE(kernels->gpu[size_t(k)].present()) << op;
    int labelsAt = -1;
    for (const auto &p : kernel.params())
      if (p.meaning() == "row-index")
        labelsAt = p.operand();
    ASSERT_GE(labelsAt, 0) << op;
    // Inputs (logits; dloss, logits, labels for the gradient) in device
    // buffers of their own; the labels' buffer is rewritten between runs.
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-2, 2);
    std::vector<dtf::Tensor> host, views;
    std::vector<CUdeviceptr> buffers;
    for (int i = 0; i < kernel.inputs_size(); ++i) {
      dtf::Tensor t = dtf::test::kernelInputZeros(kernel, i, kRows);
      ASSERT_TRUE(t.defined()) << op << " input " << i;
      if (t.dtype() == dtf::DType::F32)
        for (int64_t e = 0; e < t.numElements(); ++e)
          t.data<float>()[e] = u(rng);
      CUdeviceptr p = 0;
      ASSERT_EQ(driver->cuMemAlloc(&p, t.byteSize()), 0);
      buffers.push_back(p);
      views.push_back(
          dtf::Tensor::view(t.dtype(), t.shape(), reinterpret_cast<void *>(p)));
      host.push_back(std::move(t));
    }
    dtf::Tensor &labels = host[size_t(labelsAt)];
    auto setLabels = [&](std::vector<int64_t> values) {
      for (int64_t e = 0; e < kRows; ++e) {
        if (labels.dtype() == dtf::DType::I64)
          labels.data<int64_t>()[e] = values[size_t(e)];
        else
          labels.data<int32_t>()[e] = int32_t(values[size_t(e)]);
      }
      for (size_t i = 0; i < host.size(); ++i)
        ASSERT_EQ(driver->cuMemcpyHtoDAsync(buffers[i], host[i].rawData(),
                                            host[i].byteSize(),
                                            device->computeStream()),
                  0);
      ASSERT_TRUE(device->synchronize().isOk());
    };

    dtf::gpu::GpuFusedContext ctx(*device, kernels->loaded, k,
                                  kernels->gpu[size_t(k)]);
    std::vector<dtf::Tensor *> inputs;
    for (dtf::Tensor &t : views)
      inputs.push_back(&t);
    ctx.setInputs(inputs);
    ctx.setNumOutputs(1);
    auto enqueue = [&] {
      return dtf::callKernel(dtf::gpu::gpuKernelRegistry().lookup("dtf.fused"),
                             ctx);
    };
    // Eagerly, good labels: the word is reserved, copied down, and clear.
    setLabels({0, 4, 2, 1});
    ASSERT_TRUE(enqueue().isOk());
    ASSERT_TRUE(device->synchronize().isOk());
    EXPECT_TRUE(ctx.checksRowIndices()) << op;
    EXPECT_TRUE(ctx.rowIndexError().isOk()) << ctx.rowIndexError().message();

    // Captured (nothing allocates now), then replayed on other labels.
    dtf::gpu::cuda::CUgraphExec exec = nullptr;
    s = device->capture(enqueue, &exec);
    ASSERT_TRUE(s.isOk()) << s.message();
    auto replay = [&] {
      ASSERT_EQ(driver->cuGraphLaunch(exec, device->computeStream()), 0);
      ASSERT_TRUE(device->synchronize().isOk());
    };
    struct Case {
      std::vector<int64_t> labels;
      std::vector<int64_t> badRows; // the rows a report may name
    };
    const Case cases[] = {{{0, 1, 7, -3}, {2, 3}}, // two bad rows
                          {{3, 3, 3, 3}, {}},      // a good batch: cleared
                          {{5, 0, 1, 2}, {0}},     // C itself is outside
                          {{0, 1, 2, 4}, {}}};
    for (const Case &c : cases) {
      setLabels(c.labels);
      replay();
      dtf::Status report = ctx.rowIndexError();
      if (c.badRows.empty()) {
        EXPECT_TRUE(report.isOk()) << op << ": " << report.message();
        continue;
      }
      ASSERT_FALSE(report.isOk()) << op << ": a bad label was not reported";
      bool named = false;
      for (int64_t row : c.badRows)
        named |= report.message() ==
                 op + " (kernel " + kernel.name() + "): label " +
                     std::to_string(c.labels[size_t(row)]) + " of example " +
                     std::to_string(row) + " is outside the classes [0, " +
                     std::to_string(kClasses) + ")";
      EXPECT_TRUE(named) << op << ": " << report.message();
    }
    EXPECT_EQ(driver->cuGraphExecDestroy(exec), 0);
    for (CUdeviceptr p : buffers)
      EXPECT_EQ(driver->cuMemFree(p), 0);
    std::printf("[ gpu      ] %s (%s): a bad label reported from each replay "
                "of its CUDA graph, a good batch left clear\n",
                kernel.name().c_str(), op.c_str());
  }
  // The loss and its gradient in train_step, the loss again in eval.
  EXPECT_EQ(tested, 3) << "the sparse cross-entropy and its gradient";
}

} // namespace
