// The GPU kernels (cuBLAS and cuDNN calls, run by the host emulation, or
// with DTF_GPU=real by the real libraries) give the CPU kernels' results:
// matmul (transposed, batched), conv2d and its two gradients, pooling and
// its gradients, reshape; GpuOp captures its second step as a CUDA graph and
// replays it; the arena.
#include "runtime/gpu/GpuKernels.h"
#include "runtime/gpu/ConvAlgo.h"
#include "runtime/gpu/GpuDevice.h"
#include "runtime/gpu/GpuKernelContext.h"
#include "runtime/gpu/GpuOp.h"
#include "runtime/kernels/CpuKernels.h"
#include "tests/unit/gpu/TestGpu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace dtf::gpu {
namespace {

Tensor randomTensor(std::vector<int64_t> shape, uint32_t seed) {
  Tensor t = Tensor::allocate(DType::F32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data<float>()[i] = u(rng);
  return t;
}

// Runs `op` on the CPU and on the emulated GPU (steps times, so that the
// graph path runs too) and compares output 0.
void expectSameOnGpu(GpuDevice &device, const std::string &op,
                     std::vector<Tensor> inputs, AttrMap attrs, int steps = 3) {
  KernelContext c;
  std::vector<Tensor *> ptrs;
  for (Tensor &t : inputs)
    ptrs.push_back(&t);
  c.setInputs(ptrs);
  c.setAttrs(attrs);
  c.setOpName(op);
  c.setNumOutputs(1);
  ASSERT_TRUE(callKernel(cpuKernels().lookup(op), c).isOk());
  const Tensor &want = c.output(0);

  auto ctx = std::make_unique<GpuKernelContext>(device);
  ctx->setAttrs(attrs);
  ctx->setOpName(op);
  GpuOp g(device, gpuKernelRegistry().lookup(op), std::move(ctx));
  g.setNumOutputs(1);
  for (Tensor &t : inputs)
    g.addHostInput(&t);
  g.setDownload(0);
  for (int step = 0; step < steps; ++step) {
    Status s = g.run(uint64_t(step), 0);
    ASSERT_TRUE(s.isOk()) << op << ": " << s.message();
    const Tensor &got = *g.hostOutput(0);
    ASSERT_EQ(got.shape(), want.shape()) << op;
    for (int64_t i = 0; i < want.numElements(); ++i)
      ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i],
                  1e-4f * (1 + std::fabs(want.data<float>()[i])))
          << op << " element " << i << " step " << step;
  }
  // Steps 2 and 3 were a capture and a replay of the same graph.
  EXPECT_EQ(g.graphLaunches(), uint64_t(std::max(0, steps - 1))) << op;
}

TEST(GpuKernels, MatmulMatchesTheCpuKernel) {
  TestGpu e;
  ASSERT_TRUE(e.device);
  expectSameOnGpu(*e.device, "dtf.matmul",
                  {randomTensor({5, 7}, 1), randomTensor({7, 3}, 2)}, {});
  expectSameOnGpu(*e.device, "dtf.matmul",
                  {randomTensor({7, 5}, 3), randomTensor({3, 7}, 4)},
                  {{"transpose_a", true}, {"transpose_b", true}});
  // Batched: equal batch dimensions, and a shared right operand.
  expectSameOnGpu(
      *e.device, "dtf.matmul",
      {randomTensor({2, 3, 4, 5}, 5), randomTensor({2, 3, 5, 6}, 6)}, {});
  expectSameOnGpu(*e.device, "dtf.matmul",
                  {randomTensor({4, 3, 5}, 7), randomTensor({5, 2}, 8)},
                  {{"transpose_b", false}});
  expectSameOnGpu(*e.device, "dtf.matmul",
                  {randomTensor({4, 5, 3}, 9), randomTensor({4, 5, 2}, 10)},
                  {{"transpose_a", true}});
}

TEST(GpuKernels, ConvolutionAndItsGradientsMatchTheCpuKernels) {
  TestGpu e;
  ASSERT_TRUE(e.device);
  for (std::string padding : {"same", "valid"}) {
    AttrMap attrs = {{"padding", padding},
                     {"strides", std::vector<int64_t>{1, 1}}};
    Tensor x = randomTensor({2, 9, 9, 3}, 11),
           f = randomTensor({3, 3, 3, 4}, 12);
    expectSameOnGpu(*e.device, "dtf.conv2d", {x, f}, attrs);
    const int64_t o = padding == "same" ? 9 : 7;
    Tensor dy = randomTensor({2, o, o, 4}, 13);
    AttrMap in = attrs;
    in["input_shape"] = std::vector<int64_t>{2, 9, 9, 3};
    expectSameOnGpu(*e.device, "dtf.conv2d_backprop_input", {dy, f}, in);
    AttrMap fl = attrs;
    fl["filter_shape"] = std::vector<int64_t>{3, 3, 3, 4};
    expectSameOnGpu(*e.device, "dtf.conv2d_backprop_filter", {x, dy}, fl);
  }
  // Strided, as a 5x5 "valid" convolution with stride 2.
  AttrMap s2 = {{"padding", std::string("valid")},
                {"strides", std::vector<int64_t>{2, 2}}};
  expectSameOnGpu(
      *e.device, "dtf.conv2d",
      {randomTensor({3, 11, 11, 2}, 14), randomTensor({5, 5, 2, 3}, 15)}, s2);
}

// The emulation's count of cudnnGetConvolution*Algorithm_v7 calls.
uint64_t emulatedAlgorithmChoices() {
  const std::string stats = processEmulationStats();
  const size_t at = stats.find(" cuDNN algorithm choices");
  size_t begin = stats.rfind(' ', at - 1);
  EXPECT_NE(at, std::string::npos) << stats;
  return at == std::string::npos
             ? 0
             : std::stoull(stats.substr(begin + 1, at - begin - 1));
}

// The emulation's number after `label` ("cuDNN algorithms timed: ").
unsigned long countAfter(const std::string &label) {
  const std::string stats = processEmulationStats();
  const size_t at = stats.find(label);
  EXPECT_NE(at, std::string::npos) << stats;
  return at == std::string::npos ? 0ul
                                 : std::stoul(stats.substr(at + label.size()));
}

TEST(GpuKernels, ConvolutionAlgorithmIsChosenOncePerShapeAndDirection) {
  TestGpu e;
  ASSERT_TRUE(e.device);
  // dtf's own counts hold on a real cuDNN too; the emulation's, of the
  // library calls behind them, only here.
  const bool emulation = emulationCounts(
      "cuDNN's heuristic and timing calls (dtf's own counts are checked)");
  const uint64_t q0 = convAlgorithmQueries();
  const uint64_t c0 = emulation ? emulatedAlgorithmChoices() : 0;
  const uint64_t s0 = convAlgorithmSearches();
  auto timedCount = [] { return countAfter("cuDNN algorithms timed: "); };
  const unsigned long e0 = emulation ? timedCount() : 0;
  auto chosen = [&] {
    // Each shape: the heuristic's candidates, then one timing outside a
    // capture (the first step of a shape is eager).
    if (emulation) {
      EXPECT_EQ(emulatedAlgorithmChoices() - c0, convAlgorithmQueries() - q0);
      EXPECT_EQ(timedCount() - e0, convAlgorithmQueries() - q0);
    }
    EXPECT_EQ(convAlgorithmSearches() - s0, convAlgorithmQueries() - q0);
    return convAlgorithmQueries() - q0;
  };
  AttrMap attrs = {{"padding", std::string("same")},
                   {"strides", std::vector<int64_t>{1, 1}}};
  // Shapes no other test uses: the choices are the process's (the tests
  // run in one process with DTF_GPU=real).
  Tensor x = randomTensor({2, 10, 10, 3}, 21), f = randomTensor({3, 3, 3, 4}, 22);
  // Three steps (eager, captured, replayed), then another op of the same
  // shape: one choice. The emulation's heuristic ranks algorithm 1 first,
  // which works in the workspace dtf provides, its timing algorithm 0.
  expectSameOnGpu(*e.device, "dtf.conv2d", {x, f}, attrs);
  EXPECT_EQ(chosen(), 1u);
  expectSameOnGpu(*e.device, "dtf.conv2d", {x, f}, attrs);
  EXPECT_EQ(chosen(), 1u);
  // Another batch is another shape; each gradient is another direction.
  expectSameOnGpu(*e.device, "dtf.conv2d", {randomTensor({4, 10, 10, 3}, 23), f},
                  attrs);
  EXPECT_EQ(chosen(), 2u);
  Tensor dy = randomTensor({2, 10, 10, 4}, 24);
  AttrMap in = attrs;
  in["input_shape"] = std::vector<int64_t>{2, 10, 10, 3};
  expectSameOnGpu(*e.device, "dtf.conv2d_backprop_input", {dy, f}, in);
  AttrMap fl = attrs;
  fl["filter_shape"] = std::vector<int64_t>{3, 3, 3, 4};
  expectSameOnGpu(*e.device, "dtf.conv2d_backprop_filter", {x, dy}, fl);
  expectSameOnGpu(*e.device, "dtf.conv2d_backprop_filter", {x, dy}, fl);
  EXPECT_EQ(chosen(), 4u);
}

// The timed ranking's first algorithm fails at every launch
// (DTF_EMU_CONV_ALGO_FAILS): each direction and shape moves to the next one
// of its ranking once, says so once, and gives the CPU's results. Without
// the retry the op fails; with the heuristic's choice (algorithm 1) instead
// of the timed one (0), nothing fails and nothing is said.
TEST(GpuKernels, AFailingConvolutionAlgorithmGivesWayToTheNextOfItsRanking) {
  DTF_EMULATION_ONLY("the fault DTF_EMU_CONV_ALGO_FAILS");
  TestGpu e;
  ASSERT_TRUE(e.device);
  auto failures = [] {
    return countAfter("launches failed by DTF_EMU_CONV_ALGO_FAILS: ");
  };
  const unsigned long f0 = failures();
  const std::string tf32Label = "library calls that may compute in TF32: ";
  const unsigned long tf32 = countAfter(tf32Label);
  ASSERT_EQ(setenv("DTF_EMU_CONV_ALGO_FAILS", "0", 1), 0);
  AttrMap attrs = {{"padding", std::string("same")},
                   {"strides", std::vector<int64_t>{1, 1}}};
  // Shapes no other test uses: the choices are the process's.
  Tensor x = randomTensor({3, 7, 7, 2}, 31), f = randomTensor({3, 3, 2, 5}, 32);
  Tensor dy = randomTensor({3, 7, 7, 5}, 33);
  AttrMap in = attrs;
  in["input_shape"] = std::vector<int64_t>{3, 7, 7, 2};
  AttrMap fl = attrs;
  fl["filter_shape"] = std::vector<int64_t>{3, 3, 2, 5};
  testing::internal::CaptureStderr();
  for (int round = 0; round < 2; ++round) {
    expectSameOnGpu(*e.device, "dtf.conv2d", {x, f}, attrs);
    expectSameOnGpu(*e.device, "dtf.conv2d_backprop_input", {dy, f}, in);
    expectSameOnGpu(*e.device, "dtf.conv2d_backprop_filter", {x, dy}, fl);
  }
  const std::string err = testing::internal::GetCapturedStderr();
  unsetenv("DTF_EMU_CONV_ALGO_FAILS");
  // One failed launch per direction, then algorithm 1 for good.
  EXPECT_EQ(failures() - f0, 3u);
  for (const char *op : {"dtf.conv2d:", "dtf.conv2d_backprop_input:",
                         "dtf.conv2d_backprop_filter:"}) {
    const std::string line =
        std::string(op) + " cuDNN algorithm 0 failed "
                          "(CUDNN_STATUS_EXECUTION_FAILED); using algorithm 1 "
                          "for this shape from now on";
    const size_t at = err.find(line);
    EXPECT_NE(at, std::string::npos) << err;
    if (at != std::string::npos) {
      EXPECT_EQ(err.find(line, at + 1), std::string::npos) << err;
    }
  }
  // f32 stays f32: the math type of the timed algorithm is FMA here.
  EXPECT_EQ(countAfter(tf32Label), tf32);
}

TEST(GpuKernels, PoolingAndItsGradientsMatchTheCpuKernels) {
  TestGpu e;
  ASSERT_TRUE(e.device);
  AttrMap attrs = {{"window", std::vector<int64_t>{2, 2}},
                   {"strides", std::vector<int64_t>{2, 2}},
                   {"padding", std::string("valid")}};
  Tensor x = randomTensor({2, 8, 8, 3}, 21),
         dy = randomTensor({2, 4, 4, 3}, 22);
  expectSameOnGpu(*e.device, "dtf.max_pool", {x}, attrs);
  expectSameOnGpu(*e.device, "dtf.avg_pool", {x}, attrs);
  expectSameOnGpu(*e.device, "dtf.max_pool_grad", {x, dy}, attrs);
  expectSameOnGpu(*e.device, "dtf.avg_pool_grad", {x, dy}, attrs);
}

// The number in the emulation's counters before `what` ("7 device
// allocations").
TEST(GpuArena, StepsOfOneShapeAllocateNothingOnceTheArenaIsPlanned) {
  TestGpu e;
  ASSERT_TRUE(e.device);
  GpuDevice &dev = *e.device;
  // y = (x W1) W2, the second matmul reading the first's result in place.
  Tensor x = randomTensor({4, 6}, 1), w1 = randomTensor({6, 5}, 2),
         w2 = randomTensor({5, 3}, 3);
  auto c1 = std::make_unique<GpuKernelContext>(dev);
  c1->setOpName("dtf.matmul");
  GpuOp first(dev, gpuKernelRegistry().lookup("dtf.matmul"), std::move(c1));
  first.setNumOutputs(1);
  first.addHostInput(&x);
  first.addHostInput(&w1);
  auto c2 = std::make_unique<GpuKernelContext>(dev);
  c2->setOpName("dtf.matmul");
  GpuOp second(dev, gpuKernelRegistry().lookup("dtf.matmul"), std::move(c2));
  second.setNumOutputs(1);
  second.addDeviceInput(&first.context().output(0));
  second.addHostInput(&w2);
  second.setDownload(0);
  std::vector<float> want;
  long afterFirstStep = 0;
  for (int step = 0; step < 6; ++step) {
    ASSERT_TRUE(first.run(uint64_t(step), 0).isOk());
    ASSERT_TRUE(second.run(uint64_t(step), 0).isOk());
    ASSERT_TRUE(dev.synchronize().isOk());
    ASSERT_TRUE(dev.planArena().isOk());
    const Tensor &y = *second.hostOutput(0);
    std::vector<float> got(y.data<float>(), y.data<float>() + y.numElements());
    if (step == 0) {
      want = got;
      afterFirstStep = counter("device allocations");
      // The first step's results, against the CPU kernels (on the
      // emulation they are the CPU's own reference loops).
      KernelContext a, b;
      a.setOpName("dtf.matmul");
      a.setInputs({&x, &w1});
      a.setNumOutputs(1);
      ASSERT_TRUE(callKernel(cpuKernels().lookup("dtf.matmul"), a).isOk());
      b.setOpName("dtf.matmul");
      b.setInputs({&a.output(0), &w2});
      b.setNumOutputs(1);
      ASSERT_TRUE(callKernel(cpuKernels().lookup("dtf.matmul"), b).isOk());
      for (int64_t i = 0; i < b.output(0).numElements(); ++i)
        ASSERT_NEAR(got[size_t(i)], b.output(0).data<float>()[i], 1e-4f) << i;
    }
    EXPECT_EQ(got, want) << "step " << step;
  }
  // The first step's buffers and the arena planned after it, nothing later.
  EXPECT_EQ(dev.arenasPlanned(), 1);
  if (emulationCounts("the count of device allocations")) {
    EXPECT_GT(afterFirstStep, 0);
    EXPECT_EQ(counter("device allocations"), afterFirstStep);
  }
  // Step 2 ran eagerly in the arena, step 3 was captured; 3 to 6 launched.
  EXPECT_EQ(first.graphLaunches(), 4u);
  EXPECT_EQ(second.graphLaunches(), 4u);
  // A larger batch grows the buffers once, and the next arena holds them.
  x = randomTensor({64, 6}, 4);
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(first.run(uint64_t(step), 0).isOk());
    ASSERT_TRUE(second.run(uint64_t(step), 0).isOk());
    ASSERT_TRUE(dev.planArena().isOk());
    EXPECT_EQ(second.hostOutput(0)->dim(0), 64);
  }
  EXPECT_EQ(dev.arenasPlanned(), 2);
}

TEST(GpuKernels, ReshapeKeepsTheDeviceBuffer) {
  TestGpu e;
  ASSERT_TRUE(e.device);
  expectSameOnGpu(*e.device, "dtf.reshape", {randomTensor({4, 3, 2}, 31)},
                  {{"out_shape", std::vector<int64_t>{-1, 6}}});
}

TEST(GpuKernels, UnevenPaddingIsRefusedWithTheFix) {
  TestGpu e;
  ASSERT_TRUE(e.device);
  auto ctx = std::make_unique<GpuKernelContext>(*e.device);
  ctx->setAttrs({{"window", std::vector<int64_t>{2, 2}},
                 {"strides", std::vector<int64_t>{2, 2}},
                 {"padding", std::string("same")}});
  ctx->setOpName("dtf.max_pool");
  GpuOp g(*e.device, gpuKernelRegistry().lookup("dtf.max_pool"),
          std::move(ctx));
  g.setNumOutputs(1);
  Tensor x = randomTensor({1, 5, 5, 1}, 1);
  g.addHostInput(&x);
  Status s = g.run(0, 0);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("pads unevenly (place the op on the CPU)"),
            std::string::npos)
      << s.message();
}

} // namespace
} // namespace dtf::gpu
