// The towers' gradient all-reduce over the emulated NCCL (libdtf-cuda-emu.so):
// weighted sums in buckets, one ncclAllReduce per bucket, the host fallback
// without NCCL, and what the emulated NCCL refuses as the real one would hang
// or fail on.
#include "runtime/gpu/GpuAllReduce.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

namespace dtf::gpu {
namespace {

using namespace cuda;

CudaDriver *emulatedProcess(int gpus) {
  CudaLibraries libs;
  libs.driver = DTF_CUDA_EMU_PATH;
  libs.emulatedGpus = gpus;
  configureProcessGpus(libs);
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
  // Buckets of 4096 bytes (1024 floats): {1000, 10}, {300}, {5000} (a tensor
  // larger than a bucket is one of its own).
  const std::vector<int64_t> n = {1000, 10, 300, 5000};
  std::unique_ptr<TowerAllReduce> a;
  std::string note;
  Status s = TowerAllReduce::create({0, 1, 2}, n, &a, &note, 4096);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_TRUE(a->usesNccl()) << note;
  EXPECT_EQ(a->buckets(), 3);
  EXPECT_NE(note.find("in 3 buckets) are summed with emulated NCCL"),
            std::string::npos)
      << note;
  const uint64_t before = ncclAllReduces(*d);
  expectWeightedSums(*a, 3, n, {0.34f, 0.34f, 0.32f});
  expectWeightedSums(*a, 3, n, {0.5f, 0.25f, 0.25f});
  EXPECT_EQ(ncclAllReduces(*d) - before, 6u); // 3 buckets, 2 steps
}

TEST(TowerAllReduce, WithoutNcclSumsThroughTheHostAndSaysWhy) {
  ASSERT_EQ(setenv("DTF_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1), 0);
  CudaDriver *d = emulatedProcess(2);
  ASSERT_NE(d, nullptr);
  const std::vector<int64_t> n = {7, 70};
  std::unique_ptr<TowerAllReduce> a;
  std::string note;
  Status s = TowerAllReduce::create({0, 1}, n, &a, &note);
  unsetenv("DTF_NCCL_LIBRARY");
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_FALSE(a->usesNccl());
  EXPECT_NE(note.find("summed through the host, without NCCL: cannot load "
                      "NCCL from /nonexistent/libnccl.so.2"),
            std::string::npos)
      << note;
  expectWeightedSums(*a, 2, n, {0.5f, 0.5f});
  EXPECT_EQ(ncclAllReduces(*d), 0u);
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

} // namespace
} // namespace dtf::gpu
