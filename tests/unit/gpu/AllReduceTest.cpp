// The towers' gradient all-reduce over the emulated NCCL (libdtf-cuda-emu.so):
// weighted sums in buckets, one ncclAllReduce per bucket, the host fallback
// without NCCL, and what the emulated NCCL refuses as the real one would hang
// or fail on. With DTF_GPU=real the sums run on the machine's GPUs and NCCL
// (skipped, saying so, with fewer than 2 GPUs); the tests of the emulated
// NCCL's refusals are skipped.
#include "runtime/gpu/GpuAllReduce.h"
#include "tests/unit/gpu/TestGpu.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

namespace dtf::gpu {
namespace {

using namespace cuda;

// The process's driver: the emulation with `gpus` GPUs, or the real one
// (DTF_NEEDS_GPUS then says when it has fewer).
CudaDriver *emulatedProcess(int gpus) {
  configureProcessGpus(testLibraries(gpus));
  std::string why;
  CudaDriver *d = processDriver(&why);
  EXPECT_NE(d, nullptr) << why;
  return d;
}

uint64_t ncclAllReduces(CudaDriver &d) {
  std::smatch m;
  const std::string stats = d.emulationStats();
  EXPECT_TRUE(
      std::regex_search(stats, m, std::regex("(\\d+) NCCL all-reduces")))
      << stats;
  return m.empty() ? 0 : std::stoull(m[1]);
}

// Tower k's tensor i holds (k + 1) * (i + j) at element j.
std::vector<std::vector<Tensor>> towerValues(int towers,
                                             const std::vector<int64_t> &n) {
  std::vector<std::vector<Tensor>> v(static_cast<size_t>(towers));
  for (int k = 0; k < towers; ++k)
    for (size_t i = 0; i < n.size(); ++i) {
      Tensor t = Tensor::allocate(DType::F32, {n[i]});
      for (int64_t j = 0; j < n[i]; ++j)
        t.data<float>()[j] = float((k + 1) * (int64_t(i) + j));
      v[size_t(k)].push_back(std::move(t));
    }
  return v;
}

void expectWeightedSums(TowerAllReduce &a, int towers,
                        const std::vector<int64_t> &n,
                        const std::vector<float> &w) {
  auto values = towerValues(towers, n);
  std::vector<std::vector<const Tensor *>> in(static_cast<size_t>(towers));
  std::vector<Tensor> out;
  std::vector<Tensor *> outPtrs;
  for (int k = 0; k < towers; ++k)
    for (const Tensor &t : values[size_t(k)])
      in[size_t(k)].push_back(&t);
  for (int64_t e : n)
    out.push_back(Tensor::allocate(DType::F32, {e}));
  for (Tensor &t : out)
    outPtrs.push_back(&t);
  Status s = a.reduce(in, w, outPtrs);
  ASSERT_TRUE(s.isOk()) << s.message();
  for (size_t i = 0; i < n.size(); ++i)
    for (int64_t j = 0; j < n[i]; ++j) {
      double want = 0;
      for (int k = 0; k < towers; ++k)
        want += double(w[size_t(k)]) * (k + 1) * (double(i) + double(j));
      ASSERT_NEAR(out[i].data<float>()[j], want, 1e-4 * (1 + want))
          << "tensor " << i << " element " << j;
    }
}

TEST(TowerAllReduce, SumsWeightedGradientsOverThreeGpusOneNcclCallPerBucket) {
  CudaDriver *d = emulatedProcess(3);
  ASSERT_NE(d, nullptr);
  DTF_NEEDS_GPUS(*d, 2);
  // Three GPUs (two on a real machine that has only two).
  const int towers = std::min(3, d->deviceCount());
  // Buckets of 4096 bytes (1024 floats): {1000, 10}, {300}, {5000} (a tensor
  // larger than a bucket is one of its own).
  const std::vector<int64_t> n = {1000, 10, 300, 5000};
  std::unique_ptr<TowerAllReduce> a;
  std::string note;
  std::vector<int> gpus = {0, 1, 2};
  gpus.resize(size_t(towers));
  Status s = TowerAllReduce::create(gpus, n, &a, &note, 4096);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_TRUE(a->usesNccl()) << note;
  EXPECT_EQ(a->buckets(), 3);
  EXPECT_NE(note.find(onRealGpu() ? "in 3 buckets) are summed with NCCL"
                                  : "in 3 buckets) are summed with emulated "
                                    "NCCL"),
            std::string::npos)
      << note;
  const bool emulation = emulationCounts("the count of NCCL all-reduces");
  const uint64_t before = emulation ? ncclAllReduces(*d) : 0;
  if (towers == 3) {
    expectWeightedSums(*a, 3, n, {0.34f, 0.34f, 0.32f});
    expectWeightedSums(*a, 3, n, {0.5f, 0.25f, 0.25f});
  } else {
    expectWeightedSums(*a, 2, n, {0.5f, 0.5f});
    expectWeightedSums(*a, 2, n, {0.75f, 0.25f});
  }
  if (emulation) {
    EXPECT_EQ(ncclAllReduces(*d) - before, 6u); // 3 buckets, 2 steps
  }
}

uint64_t statsCounter(CudaDriver &d, const char *pattern) {
  std::smatch m;
  const std::string stats = d.emulationStats();
  EXPECT_TRUE(std::regex_search(stats, m, std::regex(pattern))) << stats;
  return m.empty() ? 0 : std::stoull(m[1]);
}

// Gradients already on the towers' GPUs are weighted and packed there
// (cublasSgeam into the bucket): only a host gradient goes up and only the
// sums asked for on the host come down; the rest of the sum stays on the
// first GPU. Then a broadcast copies a buffer from GPU 0 to GPU 1.
TEST(TowerAllReduce, PacksDeviceGradientsOnTheGpusAndBroadcasts) {
  CudaDriver *d = emulatedProcess(2);
  ASSERT_NE(d, nullptr);
  DTF_NEEDS_GPUS(*d, 2);
  const bool emulation =
      emulationCounts("the counts of copies, all-reduces and broadcasts");
  const std::vector<int64_t> n = {1000, 10};
  std::unique_ptr<TowerAllReduce> a;
  std::string note;
  ASSERT_TRUE(TowerAllReduce::sumsOnGpus({0, 1}));
  ASSERT_TRUE(TowerAllReduce::create({0, 1}, n, &a, &note).isOk()) << note;
  ASSERT_TRUE(a->usesNccl()) << note;
  auto values = towerValues(2, n);
  // Each tower's tensors copied to its GPU; tower 1's tensor 1 stays on the
  // host (a gradient a CPU op made).
  std::vector<std::vector<CUdeviceptr>> ptrs(2);
  std::vector<std::vector<Tensor>> views(2);
  CUstream streams[2] = {nullptr, nullptr};
  // GPU k's context current on this thread before work on its stream (the
  // all-reduce makes its own GPUs' current as it goes; a real driver
  // wants a stream's own context current for its copies).
  CUcontext contexts[2] = {nullptr, nullptr};
  auto use = [&](int k) {
    ASSERT_EQ(d->cuCtxSetCurrent(contexts[k]), CUDA_SUCCESS);
  };
  for (int k = 0; k < 2; ++k) {
    CUcontext &ctx = contexts[k];
    ASSERT_EQ(d->cuDevicePrimaryCtxRetain(&ctx, k), CUDA_SUCCESS);
    ASSERT_EQ(d->cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    ASSERT_EQ(d->cuStreamCreate(&streams[k], 0), CUDA_SUCCESS);
    for (size_t i = 0; i < n.size(); ++i) {
      CUdeviceptr p = 0;
      const size_t bytes = size_t(n[i]) * sizeof(float);
      ASSERT_EQ(d->cuMemAlloc(&p, bytes), CUDA_SUCCESS);
      ASSERT_EQ(d->cuMemcpyHtoDAsync(p, values[size_t(k)][i].rawData(), bytes,
                                     streams[k]),
                CUDA_SUCCESS);
      ptrs[size_t(k)].push_back(p);
      views[size_t(k)].push_back(Tensor::view(
          DType::F32, {n[i]}, reinterpret_cast<void *>(uintptr_t(p))));
    }
    ASSERT_EQ(d->cuStreamSynchronize(streams[k]), CUDA_SUCCESS);
  }
  std::vector<std::vector<const Tensor *>> host(2), onDevice(2);
  for (size_t k = 0; k < 2; ++k)
    for (size_t i = 0; i < n.size(); ++i) {
      host[k].push_back(&values[k][i]);
      onDevice[k].push_back(k == 1 && i == 1 ? nullptr : &views[k][i]);
    }
  Tensor out1 = Tensor::allocate(DType::F32, {n[1]});
  const char *kHostCopies = "copies between host and device: (\\d+)";
  const uint64_t copiesBefore = emulation ? statsCounter(*d, kHostCopies) : 0;
  const uint64_t reducesBefore = emulation ? ncclAllReduces(*d) : 0;
  const std::vector<float> w = {0.75f, 0.25f};
  Status s = a->reduce(host, onDevice, w, {nullptr, &out1});
  ASSERT_TRUE(s.isOk()) << s.message();
  // Up: tower 1's host tensor; down: tensor 1's sum. Nothing else crosses.
  if (emulation) {
    EXPECT_EQ(statsCounter(*d, kHostCopies) - copiesBefore, 2u);
    EXPECT_EQ(ncclAllReduces(*d) - reducesBefore, 1u);
  }
  auto want = [&](size_t i, int64_t j) {
    return (w[0] * 1 + w[1] * 2) * (double(i) + double(j));
  };
  for (int64_t j = 0; j < n[1]; ++j)
    EXPECT_NEAR(out1.data<float>()[j], want(1, j), 1e-4 * (1 + want(1, j)));
  std::vector<float> sum0(static_cast<size_t>(n[0]));
  ASSERT_NE(a->sumOnGpu(0), 0u);
  ASSERT_NO_FATAL_FAILURE(use(0));
  ASSERT_EQ(d->cuMemcpyDtoHAsync(sum0.data(), a->sumOnGpu(0),
                                 sum0.size() * sizeof(float), streams[0]),
            CUDA_SUCCESS);
  ASSERT_EQ(d->cuStreamSynchronize(streams[0]), CUDA_SUCCESS);
  for (int64_t j = 0; j < n[0]; ++j)
    ASSERT_NEAR(sum0[size_t(j)], want(0, j), 1e-4 * (1 + want(0, j)));

  // GPU 0's tensor 0 to GPU 1's, in one group: GPU 1 then holds tower 0's
  // values, and nothing crossed the host.
  const char *kBroadcasts = "NCCL broadcasts: (\\d+)";
  const uint64_t broadcastsBefore =
      emulation ? statsCounter(*d, kBroadcasts) : 0;
  const uint64_t copies = emulation ? statsCounter(*d, kHostCopies) : 0;
  s = a->broadcast({{uint64_t(ptrs[0][0]), uint64_t(ptrs[1][0])},
                    {uint64_t(ptrs[0][1]), uint64_t(ptrs[1][1])}},
                   {size_t(n[0]) * 4, size_t(n[1]) * 4});
  ASSERT_TRUE(s.isOk()) << s.message();
  // Queued on the towers' streams (the emulation's default order runs
  // work when another stream or the host needs it): no host wait.
  if (emulation) {
    EXPECT_EQ(statsCounter(*d, kBroadcasts) - broadcastsBefore, 0u);
  }
  // A reader on another stream waits for finished(k) by an event.
  ASSERT_NE(a->finished(1), nullptr);
  ASSERT_NO_FATAL_FAILURE(use(1));
  ASSERT_EQ(d->cuStreamWaitEvent(streams[1], a->finished(1)->event, 0),
            CUDA_SUCCESS);
  std::vector<float> got(static_cast<size_t>(n[0]));
  ASSERT_EQ(d->cuMemcpyDtoHAsync(got.data(), ptrs[1][0],
                                 got.size() * sizeof(float), streams[1]),
            CUDA_SUCCESS);
  ASSERT_EQ(d->cuStreamSynchronize(streams[1]), CUDA_SUCCESS);
  if (emulation) {
    EXPECT_EQ(statsCounter(*d, kBroadcasts) - broadcastsBefore, 2u);
    EXPECT_EQ(statsCounter(*d, kHostCopies), copies + 1);
  }
  for (int64_t j = 0; j < n[0]; ++j)
    ASSERT_EQ(got[size_t(j)], values[0][0].data<float>()[j]);
}

TEST(TowerAllReduce, WithoutNcclSumsThroughTheHostAndSaysWhy) {
  std::unique_ptr<TowerAllReduce> a;
  std::string note;
  const std::vector<int64_t> n = {7, 70};
  CudaDriver *d = nullptr;
  Status s;
  {
    ScopedEnv missing("DTF_NCCL_LIBRARY", "/nonexistent/libnccl.so.2");
    d = emulatedProcess(2);
    ASSERT_NE(d, nullptr);
    DTF_NEEDS_GPUS(*d, 2);
    s = TowerAllReduce::create({0, 1}, n, &a, &note);
  }
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_FALSE(a->usesNccl());
  EXPECT_NE(note.find("summed through the host, without NCCL: cannot load "
                      "NCCL from /nonexistent/libnccl.so.2"),
            std::string::npos)
      << note;
  expectWeightedSums(*a, 2, n, {0.5f, 0.5f});
  if (emulationCounts("the count of NCCL all-reduces")) {
    EXPECT_EQ(ncclAllReduces(*d), 0u);
  }
}

// A failure half way through create() (here ncclCommInitAll, refused for a
// GPU named twice) is a precise error; the half-made all-reduce is then
// destroyed without touching buffers it never had (it crashed there).
TEST(TowerAllReduce, ANcclSetUpFailureIsAPreciseErrorNotACrash) {
  CudaDriver *d = emulatedProcess(2);
  ASSERT_NE(d, nullptr);
  std::unique_ptr<TowerAllReduce> a;
  std::string note;
  Status s = TowerAllReduce::create({0, 0}, {7, 70}, &a, &note);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(a, nullptr);
  EXPECT_NE(s.message().find("ncclCommInitAll"), std::string::npos)
      << s.message();
}

// Two communicators over GPUs 0 and 1, each with a stream and a buffer of
// 16 floats on its GPU.
struct TwoRanks {
  ncclComm_t comms[2] = {nullptr, nullptr};
  CUstream streams[2] = {nullptr, nullptr};
  CUdeviceptr bufs[2] = {0, 0};
};
void setUpTwoRanks(CudaDriver &d, TwoRanks *r) {
  ASSERT_TRUE(d.loadNccl().isOk());
  const int devices[2] = {0, 1};
  ASSERT_EQ(d.ncclCommInitAll(r->comms, 2, devices), ncclSuccess);
  for (int k = 0; k < 2; ++k) {
    CUcontext ctx = nullptr;
    ASSERT_EQ(d.cuDevicePrimaryCtxRetain(&ctx, k), CUDA_SUCCESS);
    ASSERT_EQ(d.cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    ASSERT_EQ(d.cuStreamCreate(&r->streams[k], 0), CUDA_SUCCESS);
    ASSERT_EQ(d.cuMemAlloc(&r->bufs[k], 16 * sizeof(float)), CUDA_SUCCESS);
  }
}

TEST(EmulatedNccl, RefusesWhatTheRealNcclWouldHangOn) {
  DTF_EMULATION_ONLY("the emulated NCCL's refusals and queueing");
  CudaDriver *d = emulatedProcess(2);
  ASSERT_NE(d, nullptr);
  TwoRanks r;
  setUpTwoRanks(*d, &r);
  auto reduce = [&](int k, size_t count) {
    return d->ncclAllReduce(reinterpret_cast<const void *>(r.bufs[k]),
                            reinterpret_cast<void *>(r.bufs[k]), count,
                            ncclFloat32, ncclSum, r.comms[k], r.streams[k]);
  };
  // One rank of two, outside a group: a single process would wait forever.
  EXPECT_EQ(reduce(0, 16), ncclInvalidUsage);
  EXPECT_NE(d->ncclErrorText("ncclAllReduce", ncclInvalidUsage)
                .find("outside ncclGroupStart/ncclGroupEnd"),
            std::string::npos);
  // A group in which only one rank calls.
  ASSERT_EQ(d->ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(reduce(0, 16), ncclSuccess);
  EXPECT_EQ(d->ncclGroupEnd(), ncclInvalidUsage);
  EXPECT_NE(d->ncclErrorText("ncclGroupEnd", ncclInvalidUsage)
                .find("1 of 2 ranks called in the group"),
            std::string::npos);
  // Counts that differ between the ranks.
  ASSERT_EQ(d->ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(reduce(0, 16), ncclSuccess);
  EXPECT_EQ(reduce(1, 8), ncclSuccess);
  EXPECT_EQ(d->ncclGroupEnd(), ncclInvalidUsage);
  // A buffer past its allocation.
  ASSERT_EQ(d->ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(reduce(0, 17), ncclInvalidArgument);
  EXPECT_NE(d->ncclErrorText("ncclAllReduce", ncclInvalidArgument)
                .find("run past the end of an allocation"),
            std::string::npos);
  (void)d->ncclGroupEnd();
  // A stream on the other rank's GPU.
  EXPECT_EQ(d->ncclAllReduce(reinterpret_cast<const void *>(r.bufs[0]),
                             reinterpret_cast<void *>(r.bufs[0]), 16,
                             ncclFloat32, ncclSum, r.comms[0], r.streams[1]),
            ncclInvalidUsage);
  // Both ranks in one group: the sum lands in both buffers.
  std::vector<float> a(16, 1.5f), b(16, 2.0f), got(16, 0.0f);
  ASSERT_EQ(d->cuMemcpyHtoDAsync(r.bufs[0], a.data(), 64, r.streams[0]),
            CUDA_SUCCESS);
  ASSERT_EQ(d->cuMemcpyHtoDAsync(r.bufs[1], b.data(), 64, r.streams[1]),
            CUDA_SUCCESS);
  ASSERT_EQ(d->ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(reduce(0, 16), ncclSuccess);
  EXPECT_EQ(reduce(1, 16), ncclSuccess);
  EXPECT_EQ(d->ncclGroupEnd(), ncclSuccess);
  for (int k = 0; k < 2; ++k) {
    ASSERT_EQ(d->cuMemcpyDtoHAsync(got.data(), r.bufs[k], 64, r.streams[k]),
              CUDA_SUCCESS);
    ASSERT_EQ(d->cuStreamSynchronize(r.streams[k]), CUDA_SUCCESS);
    for (float x : got)
      EXPECT_EQ(x, 3.5f);
  }
}

// NCCL's ncclBroadcast copies the root's send buffer into every rank's
// receive buffer, the root's own too ("in place" only when they are the
// same): the emulation must not leave the root's receive buffer as it was.
TEST(EmulatedNccl, BroadcastFillsEveryRanksReceiveBufferTheRootsToo) {
  DTF_EMULATION_ONLY("the emulated NCCL's refusals and queueing");
  CudaDriver *d = emulatedProcess(2);
  ASSERT_NE(d, nullptr);
  TwoRanks r;
  setUpTwoRanks(*d, &r);
  CUcontext ctx = nullptr;
  ASSERT_EQ(d->cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
  ASSERT_EQ(d->cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  CUdeviceptr rootRecv = 0;
  ASSERT_EQ(d->cuMemAlloc(&rootRecv, 16 * sizeof(float)), CUDA_SUCCESS);
  std::vector<float> sent(16), zeros(16, 0.0f), got(16, -1.0f);
  for (size_t i = 0; i < sent.size(); ++i)
    sent[i] = 0.25f + float(i);
  ASSERT_EQ(d->cuMemcpyHtoDAsync(r.bufs[0], sent.data(), 64, r.streams[0]),
            CUDA_SUCCESS);
  ASSERT_EQ(d->cuMemcpyHtoDAsync(rootRecv, zeros.data(), 64, r.streams[0]),
            CUDA_SUCCESS);
  ASSERT_EQ(d->cuMemcpyHtoDAsync(r.bufs[1], zeros.data(), 64, r.streams[1]),
            CUDA_SUCCESS);
  ASSERT_EQ(d->ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(d->ncclBroadcast(reinterpret_cast<const void *>(r.bufs[0]),
                             reinterpret_cast<void *>(rootRecv), 16,
                             ncclFloat32, 0, r.comms[0], r.streams[0]),
            ncclSuccess);
  EXPECT_EQ(d->ncclBroadcast(nullptr, reinterpret_cast<void *>(r.bufs[1]), 16,
                             ncclFloat32, 0, r.comms[1], r.streams[1]),
            ncclSuccess);
  ASSERT_EQ(d->ncclGroupEnd(), ncclSuccess);
  const CUdeviceptr recvs[2] = {rootRecv, r.bufs[1]};
  for (int k = 0; k < 2; ++k) {
    ASSERT_EQ(d->cuMemcpyDtoHAsync(got.data(), recvs[k], 64, r.streams[k]),
              CUDA_SUCCESS);
    ASSERT_EQ(d->cuStreamSynchronize(r.streams[k]), CUDA_SUCCESS);
    EXPECT_EQ(got, sent) << "rank " << k << "'s receive buffer";
  }
}

// Under the emulation's default order a collective is queued on each
// rank's stream: nothing runs at ncclGroupEnd, and the host waiting for
// rank 1 alone runs rank 0's earlier work (the root's upload) first, then
// the broadcast once.
TEST(EmulatedNccl, ACollectiveIsQueuedAndRunsAfterEveryRanksEarlierWork) {
  DTF_EMULATION_ONLY("the emulated NCCL's refusals and queueing");
  CudaDriver *d = emulatedProcess(2);
  ASSERT_NE(d, nullptr);
  TwoRanks r;
  setUpTwoRanks(*d, &r);
  std::vector<float> sent(16), zeros(16, 0.0f), got(16, -1.0f);
  for (size_t i = 0; i < sent.size(); ++i)
    sent[i] = 1.5f + float(i);
  ASSERT_EQ(d->cuMemcpyHtoDAsync(r.bufs[0], sent.data(), 64, r.streams[0]),
            CUDA_SUCCESS);
  ASSERT_EQ(d->cuMemcpyHtoDAsync(r.bufs[1], zeros.data(), 64, r.streams[1]),
            CUDA_SUCCESS);
  const char *kBroadcasts = "NCCL broadcasts: (\\d+)";
  const uint64_t before = statsCounter(*d, kBroadcasts);
  ASSERT_EQ(d->ncclGroupStart(), ncclSuccess);
  for (int k = 0; k < 2; ++k)
    ASSERT_EQ(d->ncclBroadcast(reinterpret_cast<const void *>(r.bufs[0]),
                               reinterpret_cast<void *>(r.bufs[k]), 16,
                               ncclFloat32, 0, r.comms[k], r.streams[k]),
              ncclSuccess);
  ASSERT_EQ(d->ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(statsCounter(*d, kBroadcasts), before);
  ASSERT_EQ(d->cuMemcpyDtoHAsync(got.data(), r.bufs[1], 64, r.streams[1]),
            CUDA_SUCCESS);
  ASSERT_EQ(d->cuStreamSynchronize(r.streams[1]), CUDA_SUCCESS);
  EXPECT_EQ(got, sent);
  EXPECT_EQ(statsCounter(*d, kBroadcasts), before + 1);
  ASSERT_EQ(d->cuStreamSynchronize(r.streams[0]), CUDA_SUCCESS);
  EXPECT_EQ(statsCounter(*d, kBroadcasts), before + 1);
}

// NCCL refuses a buffer allocated on another GPU than its communicator's
// (the emulation accepted it, so a tower's model-parallel variable on its
// second GPU was "broadcast" through the first GPU's communicator).
TEST(EmulatedNccl, RefusesABufferOnAnotherGpuThanTheCommunicators) {
  DTF_EMULATION_ONLY("the emulated NCCL's refusals and queueing");
  CudaDriver *d = emulatedProcess(2);
  ASSERT_NE(d, nullptr);
  TwoRanks r;
  setUpTwoRanks(*d, &r);
  // r.bufs[1] is on GPU 1; communicator 0 is on GPU 0.
  ASSERT_EQ(d->ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(d->ncclAllReduce(reinterpret_cast<const void *>(r.bufs[1]),
                             reinterpret_cast<void *>(r.bufs[1]), 16,
                             ncclFloat32, ncclSum, r.comms[0], r.streams[0]),
            ncclInvalidArgument);
  EXPECT_NE(d->ncclErrorText("ncclAllReduce", ncclInvalidArgument)
                .find("the buffer is on GPU 1, the communicator on GPU 0"),
            std::string::npos)
      << d->ncclErrorText("ncclAllReduce", ncclInvalidArgument);
  EXPECT_EQ(d->ncclBroadcast(reinterpret_cast<const void *>(r.bufs[0]),
                             reinterpret_cast<void *>(r.bufs[0]), 16,
                             ncclFloat32, 0, r.comms[1], r.streams[1]),
            ncclInvalidArgument);
  (void)d->ncclGroupEnd();
}

} // namespace
} // namespace dtf::gpu
