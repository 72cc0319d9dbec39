// The emulation's streams run out of order unless events order them
// (DTF_EMU_STREAM_ORDER): a read on one stream of what another stream wrote
// gets the wrong bytes without an event and the right ones with it, and
// captures across streams follow CUDA's rules (join, unjoined, isolation).
// The emulation's own orders and refusals: skipped with DTF_GPU=real.
#include "runtime/gpu/CudaDriver.h"
#include "tests/unit/gpu/FakeCubin.h"
#include "tests/unit/gpu/TestGpu.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <string>
#include <vector>

namespace dtf::gpu {
namespace {

using namespace cuda;

void *emulationHandle() {
  return dlopen(DTF_CUDA_EMU_PATH, RTLD_NOW | RTLD_NOLOAD);
}

// The emulation's order of streams from now on ("reversed", ...).
int setOrder(const char *order) {
  auto set = reinterpret_cast<int (*)(const char *)>(
      dlsym(emulationHandle(), "dtfEmuSetStreamOrder"));
  EXPECT_TRUE(set);
  return set ? set(order) : -1;
}

// The CPU twin of `scale`: out[i] = 2 * in[i] over [begin, end).
extern "C" void streamOrderScaleTwin(void *const *buffers, const int64_t *,
                                     int64_t begin, int64_t end) {
  const auto *in = static_cast<const float *>(buffers[0]);
  auto *out = static_cast<float *>(buffers[1]);
  for (int64_t i = begin; i < end; ++i)
    out[i] = 2 * in[i];
}

constexpr int kN = 8;

// One emulated GPU with two streams (a copy stream and a compute stream,
// as dtf's), the `scale` kernel, device buffers in and out of kN floats,
// and pinned host buffers x (up) and y (down).
struct TwoStreams {
  std::unique_ptr<CudaDriver> d;
  CUstream copy = nullptr, compute = nullptr;
  CUfunction scale = nullptr;
  CUdeviceptr in = 0, out = 0;
  float *x = nullptr, *y = nullptr;
  std::vector<CUevent> events;

  void start() {
    CudaLibraries libs;
    libs.driver = DTF_CUDA_EMU_PATH;
    libs.emulatedGpus = 1;
    Status s = CudaDriver::load(libs, &d);
    ASSERT_TRUE(s.isOk()) << s.message();
    CUcontext ctx = nullptr;
    ASSERT_EQ(d->cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    ASSERT_EQ(d->cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    ASSERT_EQ(d->cuStreamCreate(&copy, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ASSERT_EQ(d->cuStreamCreate(&compute, CU_STREAM_NON_BLOCKING),
              CUDA_SUCCESS);
    auto reg = reinterpret_cast<int (*)(
        const char *,
        void (*)(void *const *, const int64_t *, int64_t, int64_t),
        const char *, int)>(dlsym(emulationHandle(), "dtfEmuRegisterKernel"));
    ASSERT_TRUE(reg);
    reg("scale", streamOrderScaleTwin, "bbi", 2);
    std::vector<uint8_t> image = cubin("scale", {8, 8, 8});
    CUmodule mod = nullptr;
    ASSERT_EQ(d->cuModuleLoadData(&mod, image.data()), CUDA_SUCCESS);
    ASSERT_EQ(d->cuModuleGetFunction(&scale, mod, "scale"), CUDA_SUCCESS);
    ASSERT_EQ(d->cuMemAlloc(&in, kN * 4), CUDA_SUCCESS);
    ASSERT_EQ(d->cuMemAlloc(&out, kN * 4), CUDA_SUCCESS);
    void *p = nullptr;
    ASSERT_EQ(d->cuMemHostAlloc(&p, kN * 4, CU_MEMHOSTALLOC_PORTABLE),
              CUDA_SUCCESS);
    x = static_cast<float *>(p);
    ASSERT_EQ(d->cuMemHostAlloc(&p, kN * 4, CU_MEMHOSTALLOC_PORTABLE),
              CUDA_SUCCESS);
    y = static_cast<float *>(p);
    for (int i = 0; i < 4; ++i) {
      CUevent e = nullptr;
      ASSERT_EQ(d->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
      events.push_back(e);
    }
  }

  // in and out hold `v` everywhere, y holds -1: a fresh state.
  void reset(float v) {
    std::vector<float> fill(kN, v);
    ASSERT_EQ(d->cuMemcpyHtoDAsync(in, fill.data(), kN * 4, nullptr),
              CUDA_SUCCESS);
    ASSERT_EQ(d->cuMemcpyHtoDAsync(out, fill.data(), kN * 4, nullptr),
              CUDA_SUCCESS);
    for (int i = 0; i < kN; ++i)
      y[i] = -1;
  }

  CUresult launch(CUstream stream) {
    uint64_t n = kN;
    void *params[] = {&in, &out, &n};
    return d->cuLaunchKernel(scale, 1, 1, 1, 128, 1, 1, 0, stream, params,
                             nullptr);
  }

  CUresult record(int k, CUstream s) { return d->cuEventRecord(events[k], s); }
  CUresult wait(CUstream s, int k) {
    return d->cuStreamWaitEvent(s, events[k], 0);
  }

  // The upload on the copy stream, the kernel and the download on the
  // compute stream, the kernel after the upload's event when `ordered`.
  void uploadThenKernel(bool ordered) {
    for (int i = 0; i < kN; ++i)
      x[i] = float(i + 1);
    ASSERT_EQ(d->cuMemcpyHtoDAsync(in, x, kN * 4, copy), CUDA_SUCCESS);
    if (ordered) {
      ASSERT_EQ(record(0, copy), CUDA_SUCCESS);
      ASSERT_EQ(wait(compute, 0), CUDA_SUCCESS);
    }
    ASSERT_EQ(launch(compute), CUDA_SUCCESS);
    ASSERT_EQ(d->cuMemcpyDtoHAsync(y, out, kN * 4, compute), CUDA_SUCCESS);
    ASSERT_EQ(d->cuStreamSynchronize(compute), CUDA_SUCCESS);
    ASSERT_EQ(d->cuStreamSynchronize(copy), CUDA_SUCCESS);
  }

  // The upload and the kernel on the compute stream, the download on the
  // copy stream, after the kernel's event when `ordered`.
  void kernelThenDownload(bool ordered) {
    for (int i = 0; i < kN; ++i)
      x[i] = float(i + 1);
    ASSERT_EQ(d->cuMemcpyHtoDAsync(in, x, kN * 4, compute), CUDA_SUCCESS);
    ASSERT_EQ(launch(compute), CUDA_SUCCESS);
    if (ordered) {
      ASSERT_EQ(record(1, compute), CUDA_SUCCESS);
      ASSERT_EQ(wait(copy, 1), CUDA_SUCCESS);
    }
    ASSERT_EQ(d->cuMemcpyDtoHAsync(y, out, kN * 4, copy), CUDA_SUCCESS);
    // Joined back, as a segment ends: the host waits for the compute stream.
    ASSERT_EQ(record(2, copy), CUDA_SUCCESS);
    ASSERT_EQ(wait(compute, 2), CUDA_SUCCESS);
    ASSERT_EQ(d->cuStreamSynchronize(compute), CUDA_SUCCESS);
  }

  std::vector<float> result() const { return std::vector<float>(y, y + kN); }
};

std::vector<float> doubled() {
  std::vector<float> v;
  for (int i = 0; i < kN; ++i)
    v.push_back(2.0f * float(i + 1));
  return v;
}

// Under the default order (reversed) a stream's work runs only when the
// host or another stream needs it: a kernel that does not wait for the
// upload on the other stream reads the buffer as it was.
TEST(StreamOrder, AKernelReadsAnUploadOnAnotherStreamOnlyThroughAnEvent) {
  DTF_EMULATION_ONLY("the emulation's hostile stream orders and its "
                     "refusals in captures");
  TwoStreams t;
  ASSERT_NO_FATAL_FAILURE(t.start());
  ASSERT_NO_FATAL_FAILURE(t.reset(0.5f));
  ASSERT_NO_FATAL_FAILURE(t.uploadThenKernel(false));
  EXPECT_EQ(t.result(), std::vector<float>(kN, 1.0f)) << "2 x the old 0.5";
  ASSERT_NO_FATAL_FAILURE(t.reset(0.5f));
  ASSERT_NO_FATAL_FAILURE(t.uploadThenKernel(true));
  EXPECT_EQ(t.result(), doubled());
  EXPECT_NE(t.d->emulationStats().find("; cross-stream waits: 1 eager, 0 "
                                       "replayed"),
            std::string::npos)
      << t.d->emulationStats();
}

// Interleaved: before each item of the stream the host waits for, one item
// of every other stream that may run; a download on the copy stream that
// does not wait for the kernel copies the result before it is made.
TEST(StreamOrder, ADownloadOnAnotherStreamWaitsForTheKernelOnlyThroughAnEvent) {
  DTF_EMULATION_ONLY("the emulation's hostile stream orders and its "
                     "refusals in captures");
  TwoStreams t;
  ASSERT_NO_FATAL_FAILURE(t.start());
  ASSERT_EQ(setOrder("interleaved"), 0);
  ASSERT_NO_FATAL_FAILURE(t.reset(0.5f));
  ASSERT_NO_FATAL_FAILURE(t.kernelThenDownload(false));
  EXPECT_EQ(t.result(), std::vector<float>(kN, 0.5f))
      << "out before the kernel";
  ASSERT_NO_FATAL_FAILURE(t.reset(0.5f));
  ASSERT_NO_FATAL_FAILURE(t.kernelThenDownload(true));
  EXPECT_EQ(t.result(), doubled());
}

// With the events, every order gives the same bytes; in submission order
// (work runs when submitted, as the emulation used to) even without them.
TEST(StreamOrder, WithEventsEveryOrderGivesTheSameBytes) {
  DTF_EMULATION_ONLY("the emulation's hostile stream orders and its "
                     "refusals in captures");
  TwoStreams t;
  ASSERT_NO_FATAL_FAILURE(t.start());
  for (const char *order : {"submission", "reversed", "interleaved"}) {
    ASSERT_EQ(setOrder(order), 0);
    ASSERT_NO_FATAL_FAILURE(t.reset(0.5f));
    ASSERT_NO_FATAL_FAILURE(t.uploadThenKernel(true));
    EXPECT_EQ(t.result(), doubled()) << order;
    ASSERT_NO_FATAL_FAILURE(t.reset(0.5f));
    ASSERT_NO_FATAL_FAILURE(t.kernelThenDownload(true));
    EXPECT_EQ(t.result(), doubled()) << order;
  }
  ASSERT_EQ(setOrder("submission"), 0);
  ASSERT_NO_FATAL_FAILURE(t.reset(0.5f));
  ASSERT_NO_FATAL_FAILURE(t.uploadThenKernel(false));
  EXPECT_EQ(t.result(), doubled());
  EXPECT_EQ(setOrder("sideways"), 2);
  auto lastError = reinterpret_cast<const char *(*)()>(
      dlsym(emulationHandle(), "dtfEmuLastError"));
  ASSERT_TRUE(lastError);
  EXPECT_NE(std::string(lastError())
                .find("DTF_EMU_STREAM_ORDER=sideways names no order: "
                      "submission, reversed (the default) or interleaved"),
            std::string::npos)
      << lastError();
}

// A wait on an event never recorded waits for nothing (as CUDA's: an empty
// set of work), on a stream and in a capture.
TEST(StreamOrder, AWaitOnAnEventNeverRecordedIsANoOp) {
  DTF_EMULATION_ONLY("the emulation's hostile stream orders and its "
                     "refusals in captures");
  TwoStreams t;
  ASSERT_NO_FATAL_FAILURE(t.start());
  EXPECT_EQ(t.wait(t.compute, 3), CUDA_SUCCESS);
  ASSERT_EQ(
      t.d->cuStreamBeginCapture(t.compute, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
      CUDA_SUCCESS);
  EXPECT_EQ(t.wait(t.compute, 3), CUDA_SUCCESS);
  ASSERT_EQ(t.launch(t.compute), CUDA_SUCCESS);
  CUgraph g = nullptr;
  EXPECT_EQ(t.d->cuStreamEndCapture(t.compute, &g), CUDA_SUCCESS);
  EXPECT_NE(g, nullptr);
}

// Forks the copy stream off the compute stream in a capture (it joins it),
// uploads there, and runs the kernel and the download on the compute
// stream, the kernel after the upload's event when `ordered`; the copy
// stream joins back before the end when `joined`.
CUresult captureFork(TwoStreams &t, bool ordered, bool joined, CUgraph *g) {
  EXPECT_EQ(
      t.d->cuStreamBeginCapture(t.compute, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
      CUDA_SUCCESS);
  EXPECT_EQ(t.record(0, t.compute), CUDA_SUCCESS);
  EXPECT_EQ(t.wait(t.copy, 0), CUDA_SUCCESS); // the copy stream joins
  EXPECT_EQ(t.d->cuMemcpyHtoDAsync(t.in, t.x, kN * 4, t.copy), CUDA_SUCCESS);
  EXPECT_EQ(t.record(1, t.copy), CUDA_SUCCESS);
  if (ordered) {
    EXPECT_EQ(t.wait(t.compute, 1), CUDA_SUCCESS);
  }
  EXPECT_EQ(t.launch(t.compute), CUDA_SUCCESS);
  EXPECT_EQ(t.d->cuMemcpyDtoHAsync(t.y, t.out, kN * 4, t.compute),
            CUDA_SUCCESS);
  if (joined) {
    EXPECT_EQ(t.wait(t.compute, 1), CUDA_SUCCESS);
  }
  return t.d->cuStreamEndCapture(t.compute, g);
}

// A capture across two streams keeps the event's edge: replayed in the
// hostile order (the last-captured node that may run first), the kernel
// still follows the upload; without the edge it runs first and reads the
// old bytes.
TEST(StreamOrder, ACaptureAcrossStreamsKeepsTheEventsEdgeInItsReplays) {
  DTF_EMULATION_ONLY("the emulation's hostile stream orders and its "
                     "refusals in captures");
  TwoStreams t;
  ASSERT_NO_FATAL_FAILURE(t.start());
  for (const bool ordered : {true, false}) {
    CUgraph g = nullptr;
    ASSERT_EQ(captureFork(t, ordered, true, &g), CUDA_SUCCESS)
        << t.d->errorText("cuStreamEndCapture", 1);
    CUgraphExec exec = nullptr;
    ASSERT_EQ(t.d->cuGraphInstantiateWithFlags(&exec, g, 0), CUDA_SUCCESS);
    for (int i = 0; i < kN; ++i)
      t.x[i] = float(i + 1);
    ASSERT_NO_FATAL_FAILURE(t.reset(0.5f));
    ASSERT_EQ(t.d->cuGraphLaunch(exec, t.compute), CUDA_SUCCESS);
    // Nothing ran yet: the host has not asked.
    EXPECT_EQ(t.y[0], -1.0f);
    ASSERT_EQ(t.d->cuStreamSynchronize(t.compute), CUDA_SUCCESS);
    EXPECT_EQ(t.result(), ordered ? doubled() : std::vector<float>(kN, 1.0f))
        << (ordered ? "with" : "without") << " the upload's event";
    EXPECT_EQ(t.d->cuGraphExecDestroy(exec), CUDA_SUCCESS);
    EXPECT_EQ(t.d->cuGraphDestroy(g), CUDA_SUCCESS);
  }
  // The ordered graph has 1 edge between the streams (upload -> kernel),
  // the other none (its join follows the origin stream's last node).
  EXPECT_NE(t.d->emulationStats().find("cross-stream waits: 0 eager, 1 "
                                       "replayed"),
            std::string::npos)
      << t.d->emulationStats();
}

// The copy stream's work not joined back to the origin stream: the capture
// ends with CUDA_ERROR_STREAM_CAPTURE_UNJOINED and no graph, and both
// streams leave it (eager work runs on them again).
TEST(StreamOrder, ACaptureWhoseForkIsNotJoinedBackIsRefused) {
  DTF_EMULATION_ONLY("the emulation's hostile stream orders and its "
                     "refusals in captures");
  TwoStreams t;
  ASSERT_NO_FATAL_FAILURE(t.start());
  CUgraph g = nullptr;
  EXPECT_EQ(captureFork(t, false, false, &g),
            CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
  EXPECT_EQ(g, nullptr);
  EXPECT_NE(t.d->errorText("cuStreamEndCapture", 1)
                .find("node 0 (cuMemcpyHtoDAsync), captured on another "
                      "stream, was not joined back to the origin stream"),
            std::string::npos)
      << t.d->errorText("cuStreamEndCapture", 1);
  ASSERT_NO_FATAL_FAILURE(t.reset(0.5f));
  ASSERT_NO_FATAL_FAILURE(t.uploadThenKernel(true));
  EXPECT_EQ(t.result(), doubled());
}

// In a capture, a wait on an event recorded outside it would cross the
// capture's boundary: CUDA_ERROR_STREAM_CAPTURE_ISOLATION, and the capture
// is invalidated. Ending a capture on a stream that only joined it is
// CUDA_ERROR_STREAM_CAPTURE_UNMATCHED.
TEST(StreamOrder, ACaptureRefusesAWaitOnAnEventRecordedOutsideIt) {
  DTF_EMULATION_ONLY("the emulation's hostile stream orders and its "
                     "refusals in captures");
  TwoStreams t;
  ASSERT_NO_FATAL_FAILURE(t.start());
  ASSERT_EQ(t.d->cuMemcpyHtoDAsync(t.in, t.x, kN * 4, t.copy), CUDA_SUCCESS);
  ASSERT_EQ(t.record(0, t.copy), CUDA_SUCCESS);
  ASSERT_EQ(
      t.d->cuStreamBeginCapture(t.compute, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
      CUDA_SUCCESS);
  EXPECT_EQ(t.wait(t.compute, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
  EXPECT_NE(t.d->errorText("cuStreamWaitEvent", 1)
                .find("an event recorded outside it"),
            std::string::npos);
  CUgraph g = nullptr;
  EXPECT_EQ(t.d->cuStreamEndCapture(t.compute, &g),
            CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT_EQ(g, nullptr);
  ASSERT_EQ(t.d->cuStreamSynchronize(t.copy), CUDA_SUCCESS);

  ASSERT_EQ(
      t.d->cuStreamBeginCapture(t.compute, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
      CUDA_SUCCESS);
  ASSERT_EQ(t.record(1, t.compute), CUDA_SUCCESS);
  ASSERT_EQ(t.wait(t.copy, 1), CUDA_SUCCESS);
  EXPECT_EQ(t.d->cuStreamEndCapture(t.copy, &g),
            CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
  ASSERT_EQ(t.record(2, t.copy), CUDA_SUCCESS);
  ASSERT_EQ(t.wait(t.compute, 2), CUDA_SUCCESS);
  EXPECT_EQ(t.d->cuStreamEndCapture(t.compute, &g), CUDA_SUCCESS);
}

// cuMemFree synchronizes as the real one does: the queued work that may
// use the memory runs first.
TEST(StreamOrder, AFreeRunsTheQueuedWorkFirst) {
  DTF_EMULATION_ONLY("the emulation's hostile stream orders and its "
                     "refusals in captures");
  TwoStreams t;
  ASSERT_NO_FATAL_FAILURE(t.start());
  ASSERT_NO_FATAL_FAILURE(t.reset(0.5f));
  for (int i = 0; i < kN; ++i)
    t.x[i] = float(i + 1);
  ASSERT_EQ(t.d->cuMemcpyHtoDAsync(t.in, t.x, kN * 4, t.compute), CUDA_SUCCESS);
  ASSERT_EQ(t.launch(t.compute), CUDA_SUCCESS);
  ASSERT_EQ(t.d->cuMemcpyDtoHAsync(t.y, t.out, kN * 4, t.compute),
            CUDA_SUCCESS);
  EXPECT_EQ(t.y[0], -1.0f); // queued
  ASSERT_EQ(t.d->cuMemFree(t.in), CUDA_SUCCESS);
  EXPECT_EQ(t.result(), doubled());
}

} // namespace
} // namespace dtf::gpu
