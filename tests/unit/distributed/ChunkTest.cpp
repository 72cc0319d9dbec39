// The chunk framing of streamed tensors (TensorMessage.h): a packed message
// cut into chunks at any byte reads back whole, and a truncated, overlong or
// corrupt stream is refused with a message, never a crash or an allocation
// the stream asks for.
#include "runtime/distributed/TensorMessage.h"
#include "runtime/plan/PlanTypes.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

namespace dtf::dist {
namespace {

struct Message {
  rpc::PushRequest header;
  std::vector<Tensor> tensors;
  std::vector<const Tensor *> payload() const {
    std::vector<const Tensor *> p;
    for (const Tensor &t : tensors)
      p.push_back(&t);
    return p;
  }
};

// Three tensors of awkward sizes (an empty one among them), each byte
// distinct, so that a byte in the wrong place shows.
Message sample() {
  Message m;
  m.header.set_version(17);
  m.header.mutable_caller()->set_task("worker.3");
  m.tensors.push_back(Tensor::allocate(DType::F32, {7, 3}));
  m.tensors.push_back(Tensor::allocate(DType::I64, {0}));
  m.tensors.push_back(Tensor::allocate(DType::Bool, {1001}));
  m.tensors.push_back(Tensor::allocate(DType::I32, {5}));
  int b = 1;
  for (Tensor &t : m.tensors) {
    auto *p = static_cast<unsigned char *>(t.rawData());
    for (size_t i = 0; i < t.byteSize(); ++i)
      p[i] = (unsigned char)(b++ * 7);
    describeTensor("t" + std::to_string(&t - m.tensors.data()), t,
                   m.header.add_values());
  }
  return m;
}

// The message's bytes, flat.
std::string flatten(const std::vector<grpc::ByteBuffer> &chunks) {
  std::string all;
  for (const grpc::ByteBuffer &c : chunks) {
    std::vector<grpc::Slice> slices;
    EXPECT_TRUE(c.Dump(&slices).ok());
    for (const grpc::Slice &s : slices)
      all.append(reinterpret_cast<const char *>(s.begin()), s.size());
  }
  return all;
}

grpc::ByteBuffer bufferOf(const std::string &bytes) {
  grpc::Slice s(bytes.data(), bytes.size());
  return grpc::ByteBuffer(&s, 1);
}

// A reader that puts every payload into a fresh tensor of the header's type.
struct Receiver {
  rpc::PushRequest header;
  std::vector<Tensor> out;
  ChunkReader reader{&header, [this](std::vector<PayloadTarget> *targets) {
                       for (const rpc::WireTensor &w : header.values()) {
                         std::vector<int64_t> dims(w.dims().begin(),
                                                   w.dims().end());
                         DType d = DType::F32;
                         EXPECT_TRUE(plan::toDType(w.dtype(), &d).isOk());
                         out.push_back(Tensor::allocate(d, dims));
                         EXPECT_EQ(out.back().byteSize(), w.size());
                         targets->push_back({out.back().rawData(), w.size()});
                       }
                       return Status::ok();
                     }};
};

void expectSame(const Message &m, const Receiver &r) {
  EXPECT_EQ(r.header.SerializeAsString(), m.header.SerializeAsString());
  ASSERT_EQ(r.out.size(), m.tensors.size());
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    ASSERT_EQ(r.out[i].byteSize(), m.tensors[i].byteSize());
    EXPECT_EQ(0, std::memcmp(r.out[i].rawData(), m.tensors[i].rawData(),
                             m.tensors[i].byteSize()))
        << "tensor " << i;
  }
}

TEST(Chunks, EveryChunkSizeReadsBackWhole) {
  const Message m = sample();
  const std::string whole = flatten({packTensors(m.header, m.payload(), true)});
  for (size_t chunk : {size_t(1), size_t(2), size_t(3), size_t(5), size_t(13),
                       size_t(64), size_t(85), size_t(1000), size_t(4096),
                       kDefaultChunkBytes}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    std::vector<grpc::ByteBuffer> chunks =
        packChunks(m.header, m.payload(), chunk);
    // The same bytes as one message, none of them in a chunk too large.
    EXPECT_EQ(flatten(chunks), whole);
    EXPECT_EQ(chunks.size(), (whole.size() + chunk - 1) / chunk);
    for (const grpc::ByteBuffer &c : chunks)
      EXPECT_LE(c.Length(), chunk);
    Receiver r;
    for (const grpc::ByteBuffer &c : chunks)
      ASSERT_TRUE(r.reader.add(c).isOk());
    ASSERT_TRUE(r.reader.finish().isOk()) << r.reader.finish().message();
    EXPECT_EQ(r.reader.bytes(), whole.size());
    expectSame(m, r);
  }
}

TEST(Chunks, AnyCutOfTheBytesReadsBack) {
  // The receiver does not depend on where the sender cut: every split of the
  // message into two pieces, and one piece per byte.
  const Message m = sample();
  const std::string whole = flatten({packTensors(m.header, m.payload(), true)});
  for (size_t cut = 0; cut <= whole.size(); cut += 3) {
    Receiver r;
    ASSERT_TRUE(r.reader.add(bufferOf(whole.substr(0, cut))).isOk());
    ASSERT_TRUE(r.reader.add(bufferOf(whole.substr(cut))).isOk());
    ASSERT_TRUE(r.reader.finish().isOk()) << "cut at " << cut;
    expectSame(m, r);
  }
  Receiver r;
  for (char c : whole)
    ASSERT_TRUE(r.reader.add(bufferOf(std::string(1, c))).isOk());
  ASSERT_TRUE(r.reader.finish().isOk());
  expectSame(m, r);
}

TEST(Chunks, TruncatedStreamIsRefused) {
  const Message m = sample();
  std::vector<grpc::ByteBuffer> chunks = packChunks(m.header, m.payload(), 100);
  ASSERT_GT(chunks.size(), 3u);
  // Without its last chunk: the payload is short.
  Receiver r;
  for (size_t i = 0; i + 1 < chunks.size(); ++i)
    ASSERT_TRUE(r.reader.add(chunks[i]).isOk());
  Status s = r.reader.finish();
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("ended after"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("payload bytes its header announces"),
            std::string::npos)
      << s.message();
  // Inside the header, and with nothing at all.
  const std::string whole = flatten(chunks);
  Receiver h;
  ASSERT_TRUE(h.reader.add(bufferOf(whole.substr(0, 9))).isOk());
  EXPECT_FALSE(h.reader.headerDone());
  s = h.reader.finish();
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("inside its header"), std::string::npos)
      << s.message();
  Receiver none;
  EXPECT_FALSE(none.reader.finish().isOk());
}

TEST(Chunks, BytesBeyondTheHeaderAreRefused) {
  const Message m = sample();
  std::string whole = flatten({packTensors(m.header, m.payload(), true)});
  Receiver r;
  ASSERT_TRUE(r.reader.add(bufferOf(whole)).isOk());
  Status s = r.reader.add(bufferOf("xyz"));
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("3 bytes more than"), std::string::npos)
      << s.message();
}

TEST(Chunks, CorruptHeaderIsRefusedWithoutAllocating) {
  // A size word of 4 GiB: refused at once, nothing reserved for it.
  Receiver huge;
  Status s = huge.reader.add(bufferOf(std::string("\xff\xff\xff\xff", 4)));
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("not a dtf tensor message"), std::string::npos)
      << s.message();
  // A header that is not a protobuf message.
  Receiver bad;
  std::string junk("\x06\x00\x00\x00\xff\xff\xff\xff\xff\xff", 10);
  s = bad.reader.add(bufferOf(junk));
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("malformed header"), std::string::npos)
      << s.message();
  EXPECT_TRUE(bad.out.empty());
}

TEST(Chunks, TheReceiversRefusalStopsTheStream) {
  const Message m = sample();
  std::vector<grpc::ByteBuffer> chunks = packChunks(m.header, m.payload(), 16);
  rpc::PushRequest header;
  int calls = 0;
  ChunkReader reader(&header, [&](std::vector<PayloadTarget> *) {
    ++calls;
    return errorStatus("no such key");
  });
  Status s = Status::ok();
  size_t i = 0;
  for (; i < chunks.size() && s.isOk(); ++i)
    s = reader.add(chunks[i]);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "no such key");
  EXPECT_EQ(calls, 1);
  EXPECT_LT(i, chunks.size());
}

TEST(Chunks, DroppedPayloadsAreSkipped) {
  // A null target skips its bytes (the reader still counts them).
  const Message m = sample();
  std::vector<grpc::ByteBuffer> chunks = packChunks(m.header, m.payload(), 7);
  rpc::PushRequest header;
  Tensor last = Tensor::allocate(DType::I32, {5});
  ChunkReader reader(&header, [&](std::vector<PayloadTarget> *targets) {
    for (int i = 0; i + 1 < header.values_size(); ++i)
      targets->push_back({nullptr, header.values(i).size()});
    targets->push_back({last.rawData(), last.byteSize()});
    return Status::ok();
  });
  for (const grpc::ByteBuffer &c : chunks)
    ASSERT_TRUE(reader.add(c).isOk());
  ASSERT_TRUE(reader.finish().isOk());
  EXPECT_EQ(0, std::memcmp(last.rawData(), m.tensors.back().rawData(),
                           last.byteSize()));
}

} // namespace
} // namespace dtf::dist
