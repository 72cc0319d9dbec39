// GpuSegment: consecutive GPU ops run as one unit. A host value read by two
// of its ops is copied up once; the segment runs eagerly while its buffers
// change, then is captured as one CUDA graph and replayed with one
// cuGraphLaunch per step; a new input shape runs it eagerly and captures it
// again; the results stay the CPU kernels'. The uploads go on the device's
// copy stream, ordered before their readers by events. With DTF_GPU=real the
// results, graph launches and arenas are checked on the real driver; the
// emulation's counts of copies, waits and captures are not.
#include "runtime/gpu/GpuKernelContext.h"
#include "runtime/gpu/GpuKernels.h"
#include "runtime/gpu/GpuOp.h"
#include "runtime/gpu/GpuSegment.h"
#include "runtime/kernels/CpuKernels.h"
#include "tests/unit/gpu/FakeCubin.h"
#include "tests/unit/gpu/TestGpu.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>
#include <regex>

namespace dtf::gpu {
namespace {

void fill(Tensor &t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data<float>()[i] = u(rng);
}

// (x W) x on the CPU kernels.
Tensor reference(Tensor &x, Tensor &w) {
  KernelRegistry cpu;
  registerCpuKernels(cpu);
  KernelContext first, second;
  first.setOpName("dtf.matmul");
  first.setInputs({&x, &w});
  first.setNumOutputs(1);
  EXPECT_TRUE(callKernel(cpu.lookup("dtf.matmul"), first).isOk());
  second.setOpName("dtf.matmul");
  second.setInputs({&first.outputs()[0], &x});
  second.setNumOutputs(1);
  EXPECT_TRUE(callKernel(cpu.lookup("dtf.matmul"), second).isOk());
  return second.outputs()[0];
}

// z = (x W) x as one segment of two matmuls on `dev`: x is read by both,
// the second reads the first's result on the device, z comes down.
struct TwoMatmuls {
  Tensor x = Tensor::allocate(DType::F32, {4, 4});
  Tensor w = Tensor::allocate(DType::F32, {4, 4});
  std::unique_ptr<GpuOp> first, second;
  std::unique_ptr<GpuSegment> segment;
  const Tensor *xOnGpu = nullptr;
  explicit TwoMatmuls(GpuDevice *dev) {
    auto op = [&]() {
      auto ctx = std::make_unique<GpuKernelContext>(*dev);
      ctx->setOpName("dtf.matmul");
      auto o = std::make_unique<GpuOp>(
          *dev, gpuKernelRegistry().lookup("dtf.matmul"), std::move(ctx));
      o->setNumOutputs(1);
      return o;
    };
    first = op();
    second = op();
    segment = std::make_unique<GpuSegment>(*dev);
    xOnGpu = segment->upload(&x);
    first->addDeviceInput(xOnGpu);
    first->addDeviceInput(segment->upload(&w));
    second->addDeviceInput(&first->context().output(0));
    second->addDeviceInput(xOnGpu);
    second->setDownload(0);
    segment->add(first.get());
    segment->add(second.get());
  }
  // Runs steps [from, to) with new values each step, in the same host
  // buffers (a replay reads them), against the CPU kernels.
  void runSteps(GpuDevice *dev, int from, int to) {
    for (int step = from; step < to; ++step) {
      fill(x, uint32_t(2 * step + 1));
      fill(w, uint32_t(2 * step + 2));
      Status s = segment->run(uint64_t(step), 0);
      ASSERT_TRUE(s.isOk()) << s.message();
      ASSERT_TRUE(dev->synchronize().isOk());
      ASSERT_TRUE(dev->planArena().isOk());
      Tensor want = reference(x, w);
      const Tensor &got = *second->hostOutput(0);
      ASSERT_EQ(got.shape(), want.shape());
      for (int64_t i = 0; i < want.numElements(); ++i)
        ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-5f)
            << "step " << step << " element " << i;
    }
  }
};

TEST(GpuSegment, OneUploadPerHostValueAndOneGraphLaunchPerStep) {
  TestGpu e;
  ASSERT_TRUE(e.device);
  GpuDevice *dev = e.device.get();
  TwoMatmuls m(dev);
  Tensor &x = m.x, &w = m.w;
  GpuSegment &segment = *m.segment;
  EXPECT_EQ(segment.upload(&x), m.xOnGpu); // one copy however many readers
  EXPECT_EQ(segment.numUploads(), 2);
  EXPECT_EQ(segment.numOps(), 2);

  const bool emulation =
      emulationCounts("the counts of copies, captures and graph launches");
  const long copies0 = counter("copies"), launches0 = counter("graph launches");
  const long captured0 = counter("graphs captured");
  ASSERT_NO_FATAL_FAILURE(m.runSteps(dev, 0, 6));
  // Per step: x and W up once each, z down. Step 1 made the buffers (and
  // the arena moved them), step 2 ran in the arena, step 3 was captured;
  // steps 3 to 6 are one cuGraphLaunch each for both matmuls.
  if (emulation) {
    EXPECT_EQ(counter("copies") - copies0, 6 * 3);
    EXPECT_EQ(counter("graphs captured") - captured0, 1);
    EXPECT_EQ(counter("graph launches") - launches0, 4);
  }
  EXPECT_EQ(segment.graphLaunches(), 4u);

  // A new shape (20 x 20: past the buffers' 256-byte rounding): eager again
  // while the buffers grow and move into a new arena, then captured anew.
  x = Tensor::allocate(DType::F32, {20, 20});
  w = Tensor::allocate(DType::F32, {20, 20});
  ASSERT_NO_FATAL_FAILURE(m.runSteps(dev, 6, 10));
  EXPECT_EQ(dev->arenasPlanned(), 2);
  if (emulation) {
    EXPECT_EQ(counter("graphs captured") - captured0, 2);
  }
  EXPECT_EQ(segment.graphLaunches(), 6u);
}

// The emulation's "cross-stream waits: E eager, R replayed".
std::pair<long, long> crossStreamWaits() {
  std::smatch m;
  const std::string stats = processEmulationStats();
  if (!std::regex_search(stats, m,
                         std::regex("cross-stream waits: (\\d+) eager, "
                                    "(\\d+) replayed")))
    return {-1, -1};
  return {std::stol(m[1]), std::stol(m[2])};
}

// The segment's uploads run on the copy stream and its copy down goes back
// there: each eager step orders the compute stream after the two uploads
// (x and W, read first by the first matmul), the copy stream after the
// second matmul (for z's copy down) and the compute stream after the copy
// stream at the end (4 waits); each replayed graph keeps the 3 edges
// between nodes of the two streams (x's and W's copies to the first
// matmul, the second matmul to z's copy). The results stay right under the
// default order (reversed), where a missing wait reads stale bytes.
TEST(GpuSegment, UploadsAndCopiesDownGoOnTheCopyStreamOrderedByEvents) {
  TestGpu e;
  ASSERT_TRUE(e.device);
  GpuDevice *dev = e.device.get();
  EXPECT_NE(dev->copyStream(), dev->computeStream());
  TwoMatmuls m(dev);
  Tensor &w = m.w;
  GpuSegment &segment = *m.segment;
  GpuOp *first = m.first.get(), *second = m.second.get();
  const Tensor *xOnGpu = m.xOnGpu;
  EXPECT_TRUE(first->reads(xOnGpu));
  EXPECT_FALSE(second->reads(segment.upload(&w)));
  const bool emulation = emulationCounts("the count of cross-stream waits");
  const auto [eager0, replayed0] = crossStreamWaits();
  if (emulation) {
    ASSERT_GE(eager0, 0) << processEmulationStats();
  }
  ASSERT_NO_FATAL_FAILURE(m.runSteps(dev, 0, 6));
  // Steps 1 and 2 eager, step 3 captured and launched, 4 to 6 replayed.
  EXPECT_EQ(segment.graphLaunches(), 4u);
  if (!emulation)
    return;
  const auto [eager, replayed] = crossStreamWaits();
  EXPECT_EQ(eager - eager0, 2 * 4) << processEmulationStats();
  EXPECT_EQ(replayed - replayed0, 4 * 3) << processEmulationStats();
}

// The emulation's "host waits for streams: N (M ms blocked)".
std::pair<long, long> hostWaits() {
  std::smatch m;
  const std::string stats = processEmulationStats();
  if (!std::regex_search(stats, m,
                         std::regex("host waits for streams: (\\d+) "
                                    "\\((\\d+) ms blocked\\)")))
    return {-1, -1};
  return {std::stol(m[1]), std::stol(m[2])};
}

// DTF_EMU_SLOW_MS: each graph launch (and each kernel launched outside a
// capture) takes that long when it runs, and the host, which waits for the
// segment's copy down every step, is counted blocked for it.
TEST(GpuSegment, ASlowDeviceMakesEachGraphLaunchTakeItsTime) {
  DTF_EMULATION_ONLY("the fault DTF_EMU_SLOW_MS");
  TestGpu e;
  ASSERT_TRUE(e.device);
  GpuDevice *dev = e.device.get();
  TwoMatmuls m(dev);
  ASSERT_NO_FATAL_FAILURE(m.runSteps(dev, 0, 2)); // eager, no kernel launch
  const auto [waits0, blocked0] = hostWaits();
  ASSERT_GE(waits0, 0) << processEmulationStats();
  ASSERT_EQ(setenv("DTF_EMU_SLOW_MS", "40", 1), 0);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_NO_FATAL_FAILURE(m.runSteps(dev, 2, 5)); // captured, replayed twice
  const double ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start)
                        .count();
  unsetenv("DTF_EMU_SLOW_MS");
  EXPECT_EQ(m.segment->graphLaunches(), 3u);
  EXPECT_GE(ms, 3 * 40.0);
  const auto [waits, blocked] = hostWaits();
  // Per step, the segment's wait and the test's, each for both streams.
  EXPECT_EQ(waits - waits0, 3 * 4) << processEmulationStats();
  EXPECT_GE(blocked - blocked0, 3 * 40 - 1) << processEmulationStats();
}

// The emulation's "host waits that leave the GPU idle: N (M ms blocked)".
long idleWaits() {
  std::smatch m;
  const std::string stats = processEmulationStats();
  if (!std::regex_search(stats, m,
                         std::regex("host waits that leave the GPU idle: "
                                    "(\\d+) \\((\\d+) ms blocked\\)")))
    return -1;
  return std::stol(m[1]);
}

// Steps that end without waiting (the executor's late fetches): with two
// staging slots, step N+1 is staged and queued before step N's result is
// read, after step N's end only. Under the emulation's default order
// (queued work runs when waited for), step N+1 staged into step N's pinned
// buffers would give step N step N+1's inputs; here every step gets its
// own product, from the slot it was staged in. Each slot's work is
// captured once, and once the arena is planned no wait leaves the GPU idle
// (the host waits for step N while step N+1 is queued).
TEST(GpuSegment, TwoStagingSlotsLetTheNextStepBeQueuedBeforeAResultIsRead) {
  TestGpu e;
  ASSERT_TRUE(e.device);
  GpuDevice *dev = e.device.get();
  dev->setStagingSlots(2);
  TwoMatmuls m(dev);
  m.segment->setLate();
  const long captured0 = counter("graphs captured");
  long idle0 = -1;
  std::vector<Tensor> want;
  constexpr int kSteps = 8;
  auto check = [&](int step) {
    ASSERT_TRUE(dev->waitStepEnd(step % 2).isOk());
    Status s = m.segment->finishLate(step % 2);
    ASSERT_TRUE(s.isOk()) << s.message();
    const Tensor &got = *m.second->hostOutput(0);
    ASSERT_EQ(got.shape(), want[size_t(step)].shape());
    for (int64_t i = 0; i < got.numElements(); ++i)
      ASSERT_NEAR(got.data<float>()[i], want[size_t(step)].data<float>()[i],
                  1e-5f)
          << "step " << step << " element " << i;
  };
  for (int step = 0; step < kSteps; ++step) {
    fill(m.x, uint32_t(2 * step + 1));
    fill(m.w, uint32_t(2 * step + 2));
    want.push_back(reference(m.x, m.w));
    dev->setStagingSlot(step % 2);
    Status s = m.segment->run(uint64_t(step), 0);
    ASSERT_TRUE(s.isOk()) << s.message();
    if (dev->arenaPending()) {
      ASSERT_TRUE(dev->synchronize().isOk());
      ASSERT_TRUE(dev->planArena().isOk());
    }
    ASSERT_TRUE(dev->recordStepEnd(step % 2).isOk());
    if (step == 1)
      idle0 = idleWaits();
    if (step > 0) {
      ASSERT_NO_FATAL_FAILURE(check(step - 1));
    }
  }
  const bool emulation =
      emulationCounts("the counts of idle host waits and captures");
  if (emulation) {
    ASSERT_GE(idle0, 0) << processEmulationStats();
    EXPECT_EQ(idleWaits() - idle0, 0) << processEmulationStats();
  }
  ASSERT_NO_FATAL_FAILURE(check(kSteps - 1)); // nothing queued behind it
  if (emulation) {
    EXPECT_EQ(idleWaits() - idle0, 1) << processEmulationStats();
    // Steps 1 and 2 eager (the arena moved after step 1), step 3 captured
    // in slot 0's buffers, step 4 in slot 1's, then replays.
    EXPECT_EQ(counter("graphs captured") - captured0, 2);
  }
  EXPECT_EQ(m.segment->graphLaunches(), uint64_t(kSteps - 2));
}

// An event and a module belong to the context current when they are made:
// the device makes its own current first, whatever context the calling
// thread had (none here; another GPU's on a thread that set up two). A real
// driver, and the emulation, refuse cuEventCreate and cuModuleLoadData
// without one.
TEST(GpuDevice, MakesItsContextCurrentForItsEventsAndModules) {
  TestGpu e;
  ASSERT_TRUE(e.device);
  CudaDriver &d = e.device->driver();
  ASSERT_EQ(d.cuCtxSetCurrent(nullptr), cuda::CUDA_SUCCESS);
  cuda::CUevent event = nullptr;
  Status s = e.device->createEvent(&event);
  EXPECT_TRUE(s.isOk()) << s.message();
  ASSERT_EQ(d.cuCtxSetCurrent(nullptr), cuda::CUDA_SUCCESS);
  GpuModuleCode code;
  code.ptx = scalePtx();
  cuda::CUmodule module = nullptr;
  s = e.device->loadModule(code, &module);
  EXPECT_TRUE(s.isOk()) << s.message();
  EXPECT_NE(module, nullptr);
  if (event) {
    EXPECT_EQ(d.cuEventDestroy(event), cuda::CUDA_SUCCESS);
  }
}

} // namespace
} // namespace dtf::gpu
