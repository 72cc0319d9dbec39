// TransferBuffers (the ps's reused transfer buffers) and the messages whose
// slices share a tensor's buffer (packShared, packChunksShared): a released
// buffer is lent again, the idle bound holds, and a buffer lives exactly as
// long as the last tensor or gRPC slice over it.
#include "runtime/distributed/TensorMessage.h"
#include "runtime/distributed/TransferBuffers.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

namespace dtf::dist {
namespace {

constexpr int64_t kMiB = int64_t(1) << 20;

TEST(TransferBuffers, AReleasedBufferIsLentAgain) {
  TransferBuffers pool(64 * kMiB);
  void *first = nullptr;
  {
    Tensor t = pool.allocate(DType::F32, {kMiB}); // 4 MiB
    ASSERT_TRUE(t.defined());
    EXPECT_EQ(t.byteSize(), size_t(4 * kMiB));
    EXPECT_GE(t.capacityBytes(), t.byteSize());
    first = t.rawData();
    std::memset(t.rawData(), 1, t.byteSize());
    EXPECT_EQ(pool.idleBytes(), 0u);
  }
  EXPECT_EQ(pool.idleBytes(), size_t(4 * kMiB));
  // Another shape of the same bytes takes the same buffer.
  Tensor again = pool.allocate(DType::I32, {2, kMiB / 2});
  EXPECT_EQ(again.rawData(), first);
  EXPECT_EQ(again.shape(), (std::vector<int64_t>{2, kMiB / 2}));
  EXPECT_EQ(pool.fresh(), 1u);
  EXPECT_EQ(pool.reused(), 1u);
  EXPECT_EQ(pool.idleBytes(), 0u);
}

TEST(TransferBuffers, SmallTensorsAndAZeroBoundAreNotPooled) {
  TransferBuffers pool(64 * kMiB);
  { Tensor small = pool.allocate(DType::F32, {1000}); }
  EXPECT_EQ(pool.idleBytes(), 0u);
  EXPECT_EQ(pool.fresh() + pool.reused(), 0u);

  TransferBuffers off(0); // dtf-transfer-bench --fresh-buffers
  { Tensor t = off.allocate(DType::F32, {kMiB}); }
  Tensor t = off.allocate(DType::F32, {kMiB});
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(off.idleBytes(), 0u);
  EXPECT_EQ(off.reused(), 0u);
}

TEST(TransferBuffers, IdleBytesStayWithinTheBound) {
  TransferBuffers pool(5 * kMiB);
  {
    Tensor a = pool.allocate(DType::F32, {kMiB / 2}); // 2 MiB each
    Tensor b = pool.allocate(DType::F32, {kMiB / 2});
    Tensor c = pool.allocate(DType::F32, {kMiB / 2});
  }
  // Three 2 MiB buffers released into 5 MiB: the oldest went.
  EXPECT_EQ(pool.idleBytes(), size_t(4 * kMiB));
  // One larger than the whole bound is never kept.
  { Tensor big = pool.allocate(DType::F32, {2 * kMiB}); }
  EXPECT_LE(pool.idleBytes(), size_t(5 * kMiB));
  EXPECT_EQ(pool.idleBytes(), size_t(4 * kMiB));
}

TEST(TransferBuffers, ABufferMuchLargerThanAskedIsNotLent) {
  TransferBuffers pool(64 * kMiB);
  void *large = nullptr;
  {
    Tensor t = pool.allocate(DType::F32, {4 * kMiB}); // 16 MiB
    large = t.rawData();
  }
  // 2 MiB wanted: a 16 MiB buffer would hold memory the transfer does not
  // need, so a fresh one is made and the large one stays idle.
  Tensor t = pool.allocate(DType::F32, {kMiB / 2});
  EXPECT_NE(t.rawData(), large);
  EXPECT_EQ(pool.reused(), 0u);
  EXPECT_EQ(pool.idleBytes(), size_t(16 * kMiB));
}

TEST(TransferBuffers, ATensorMayOutliveItsPool) {
  auto pool = std::make_unique<TransferBuffers>(64 * kMiB);
  Tensor t = pool->allocate(DType::F32, {kMiB});
  pool.reset();
  // Still its own memory (AddressSanitizer builds check the free).
  std::memset(t.rawData(), 7, t.byteSize());
  EXPECT_EQ(static_cast<unsigned char *>(t.rawData())[t.byteSize() - 1], 7);
}

std::string bytesOf(const grpc::ByteBuffer &b) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(b.Dump(&slices).ok());
  std::string all;
  for (const grpc::Slice &s : slices)
    all.append(reinterpret_cast<const char *>(s.begin()), s.size());
  return all;
}

TEST(TransferBuffers, SharedSlicesKeepTheSnapshotUntilGrpcReleasesThem) {
  TransferBuffers pool(64 * kMiB);
  rpc::PullReply header;
  header.set_version(3);
  std::vector<grpc::ByteBuffer> chunks;
  grpc::ByteBuffer whole;
  std::string expected;
  {
    std::vector<Tensor> snapshot;
    snapshot.push_back(pool.allocate(DType::F32, {kMiB / 2}));
    snapshot.push_back(pool.allocate(DType::I32, {7})); // malloc's
    for (Tensor &t : snapshot) {
      auto *p = static_cast<unsigned char *>(t.rawData());
      for (size_t i = 0; i < t.byteSize(); ++i)
        p[i] = (unsigned char)(i * 31 + t.byteSize());
      describeTensor("v", t, header.add_values());
    }
    std::vector<const Tensor *> refs = {&snapshot[0], &snapshot[1]};
    expected = bytesOf(packTensors(header, refs, /*copy=*/true));
    whole = packShared(header, snapshot);
    chunks = packChunksShared(header, snapshot, 100000);
  } // the snapshot's tensors are gone; the slices hold the buffers
  EXPECT_EQ(pool.idleBytes(), 0u);
  EXPECT_EQ(bytesOf(whole), expected);
  std::string cut;
  for (const grpc::ByteBuffer &c : chunks) {
    EXPECT_LE(c.Length(), 100000u);
    cut += bytesOf(c);
  }
  EXPECT_EQ(cut, expected);
  whole.Clear();
  EXPECT_EQ(pool.idleBytes(), 0u); // the chunks still share it
  chunks.clear();
  EXPECT_EQ(pool.idleBytes(), size_t(2 * kMiB));
}

} // namespace
} // namespace dtf::dist
