// A ps task in this process (runParameterServer on a loopback port) holding
// one f32 variable of 1000 elements, driven over gRPC the way workers do,
// with chunks of a few hundred bytes: initial values, pulls and pushes in
// streams arrive whole; a truncated or cancelled push stream, or one whose
// header asks for a huge tensor, changes nothing and says why; a prefetched
// pull (--prefetch-pull) lands only when taken.
#include "runtime/core/Bf16.h"
#include "runtime/distributed/ParameterServer.h"
#include "runtime/distributed/PsClient.h"
#include "runtime/distributed/PushCompression.h"
#include "runtime/distributed/TensorMessage.h"
#include "runtime/distributed/Wire.h"
#include "schema/Placement.h"
#include "runtime/plan/PlanReader.h"
#include "tests/support/OneVariablePs.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <thread>

namespace dtf::dist {
namespace {

constexpr int64_t kElements = 1000;
constexpr size_t kChunk = 300; // bytes: a value crosses several chunks

class PsStream : public ::testing::Test {
protected:
  void SetUp() override {
    plan_ = testing::oneVariableSgdPlan(kElements, "stream");
    ASSERT_TRUE(plan::placeVariables(plan_, 1, "round_robin", &placement_).isOk());
    const std::string address = "127.0.0.1:" + std::to_string(testing::freeLoopbackPort());
    config_.roster.ps.push_back({"ps.0", address});
    config_.roster.workers.push_back({"worker.0", "127.0.0.1:1"});
    config_.planPath = "stream.plan";
    config_.planFingerprint = 42;
    config_.chunkBytes = kChunk;
    quiet_ = std::fopen("/dev/null", "w");
    config_.out = quiet_;
    ps_ = std::thread(
        [this] { code_ = runParameterServer(plan_, placement_, 0, config_); });
    channel_ = Transport().channel(address);
    stub_ = rpc::ParameterServer::NewStub(channel_);
    raw_ = std::make_unique<grpc::GenericStub>(channel_);
    ASSERT_TRUE(channel_->WaitForConnected(std::chrono::system_clock::now() +
                                           std::chrono::seconds(20)));
    caller_.set_task("worker.0");
    caller_.set_plan_fingerprint(42);
  }
  void TearDown() override {
    grpc::ClientContext ctx;
    setDeadline(&ctx, std::chrono::milliseconds(5000));
    rpc::ShutdownRequest req;
    *req.mutable_caller() = caller_;
    rpc::ShutdownReply reply;
    (void)stub_->Shutdown(&ctx, req, &reply);
    if (ps_.joinable())
      ps_.join();
    EXPECT_EQ(code_, 0);
    std::fclose(quiet_);
  }

  int64_t version() {
    grpc::ClientContext ctx;
    setDeadline(&ctx, std::chrono::milliseconds(5000));
    rpc::StatusRequest req;
    rpc::StatusReply reply;
    EXPECT_TRUE(stub_->GetStatus(&ctx, req, &reply).ok());
    incarnation_ = reply.incarnation();
    return reply.version();
  }

  // The variable through PullStream.
  Tensor pull(size_t *chunks = nullptr) {
    rpc::PullRequest req;
    *req.mutable_caller() = caller_;
    req.add_names("big");
    rpc::PullReply reply;
    Tensor out = Tensor::zeros(DType::F32, {kElements});
    ChunkReader reader(&reply, [&](std::vector<PayloadTarget> *targets) {
      EXPECT_EQ(reply.values_size(), 1);
      for (const rpc::WireTensor &w : reply.values()) {
        EXPECT_EQ(w.size(), out.byteSize());
        targets->push_back({out.rawData(), out.byteSize()});
      }
      return Status::ok();
    });
    grpc::ClientContext ctx;
    setDeadline(&ctx, std::chrono::milliseconds(10000));
    Status refused = Status::ok();
    grpc::Status st = receiveStream(*raw_, &ctx, kPullStreamMethod,
                                    serializeMessage(req), &reader, &refused);
    EXPECT_TRUE(st.ok()) << describe(st);
    EXPECT_TRUE(refused.isOk()) << refused.message();
    EXPECT_TRUE(reader.finish().isOk()) << reader.finish().message();
    EXPECT_TRUE(reply.ready());
    if (chunks)
      *chunks = size_t(reader.bytes() + kChunk - 1) / kChunk;
    return out;
  }

  // A push of (grad, lr), in chunks; `keep` of them sent (all by default).
  std::vector<grpc::ByteBuffer> pushChunks(float grad, float lr,
                                           int64_t gradElements = kElements) {
    grad_ = Tensor::zeros(DType::F32, {gradElements});
    for (int64_t i = 0; i < gradElements; ++i)
      grad_.data<float>()[i] = grad;
    lr_ = Tensor::zeros(DType::F32, {});
    lr_.data<float>()[0] = lr;
    rpc::PushRequest req;
    *req.mutable_caller() = caller_;
    req.set_version(version());
    req.set_incarnation(incarnation_); // else stale: from before a restore
    describeTensor("big:grad", grad_, req.add_values());
    describeTensor("big:apply_sgd:2", lr_, req.add_values());
    return packChunks(req, {&grad_, &lr_}, kChunk);
  }

  grpc::Status push(const std::vector<grpc::ByteBuffer> &chunks,
                    rpc::PushReply *reply) {
    grpc::ClientContext ctx;
    setDeadline(&ctx, std::chrono::milliseconds(10000));
    grpc::ByteBuffer response;
    grpc::Status st =
        sendStream(*raw_, &ctx, kPushStreamMethod, chunks, &response);
    if (st.ok()) {
      EXPECT_TRUE(parseMessage(response, reply));
    }
    return st;
  }

  // Initial values of `value` for the whole variable, streamed.
  grpc::Status initialize(float value) {
    Tensor t = Tensor::zeros(DType::F32, {kElements});
    for (int64_t i = 0; i < kElements; ++i)
      t.data<float>()[i] = value;
    rpc::InitializeRequest req;
    *req.mutable_caller() = caller_;
    req.set_force(true);
    describeTensor("big", t, req.add_values());
    grpc::ClientContext ctx;
    setDeadline(&ctx, std::chrono::milliseconds(10000));
    grpc::ByteBuffer response;
    return sendStream(*raw_, &ctx, kInitializeStreamMethod,
                      packChunks(req, {&t}, kChunk), &response);
  }

  plan::Plan plan_;
  plan::Placement placement_;
  TaskConfig config_;
  std::FILE *quiet_ = nullptr;
  std::thread ps_;
  int code_ = -1;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rpc::ParameterServer::Stub> stub_;
  std::unique_ptr<grpc::GenericStub> raw_;
  rpc::Caller caller_;
  Tensor grad_, lr_;
  int64_t incarnation_ = -1;
};

TEST_F(PsStream, InitializePullAndPushInChunks) {
  grpc::Status st = initialize(1.0f);
  ASSERT_TRUE(st.ok()) << describe(st);
  size_t chunks = 0;
  Tensor v = pull(&chunks);
  EXPECT_GE(chunks, 4000 / kChunk);
  for (int64_t i = 0; i < kElements; ++i)
    ASSERT_EQ(v.data<float>()[i], 1.0f) << i;
  rpc::PushReply reply;
  std::vector<grpc::ByteBuffer> c = pushChunks(1.0f, 0.25f);
  EXPECT_GT(c.size(), 10u);
  st = push(c, &reply);
  ASSERT_TRUE(st.ok()) << describe(st);
  EXPECT_TRUE(reply.applied());
  EXPECT_EQ(reply.version(), 1);
  v = pull();
  for (int64_t i = 0; i < kElements; ++i)
    ASSERT_EQ(v.data<float>()[i], 0.75f) << i;
}

// --prefetch-pull's client side: a prefetched pull writes a store of its
// own and reaches the worker's variables only when taken (so a step that
// runs meanwhile reads what it was given, whatever the prefetch receives),
// with the values the ps held when it ran: a push after it is missing until
// the next pull (staleness 1); the version it read reaches the link only
// then too.
TEST_F(PsStream, PrefetchedPullLandsOnlyWhenTaken) {
  ASSERT_TRUE(initialize(1.0f).ok());
  Links links(config_, "worker.0");
  // The test plan's worker_step reads nothing; its train_step reads big.
  PsClient client(plan_, placement_, links, &plan_.train_step());
  exec::VariableStore store;
  ASSERT_TRUE(store.add("big", Tensor::zeros(DType::F32, {kElements})).isOk());
  client.bind(&store);
  ASSERT_TRUE(client.connect().isOk());
  ASSERT_EQ(client.ps().size(), 1u);
  ASSERT_FALSE(client.ps()[0].pull.empty()) << "the train_step reads big";
  const float *big = store.find("big")->data<float>();

  int64_t step = -1;
  bool taken = true;
  ASSERT_TRUE(client.takePrefetch(&step, &taken).isOk());
  EXPECT_FALSE(taken) << "none was started";

  client.startPrefetch();
  ASSERT_TRUE(client.takePrefetch(&step, &taken).isOk());
  EXPECT_TRUE(taken);
  EXPECT_EQ(big[0], 1.0f);
  EXPECT_EQ(big[kElements - 1], 1.0f);

  // A prefetch, then the variable changed under it (as the worker's own
  // store may be) and the ps updated after the prefetch was taken: the
  // next take brings what the ps held when the prefetch ran.
  client.startPrefetch();
  for (int64_t i = 0; i < kElements; ++i)
    store.find("big")->data<float>()[i] = 7.0f;
  ASSERT_TRUE(client.takePrefetch(&step, &taken).isOk());
  EXPECT_EQ(big[0], 1.0f);
  const int64_t before = client.ps()[0].pulledVersion;
  rpc::PushReply reply;
  ASSERT_TRUE(push(pushChunks(1.0f, 0.5f), &reply).ok());
  ASSERT_TRUE(reply.applied());
  EXPECT_EQ(big[0], 1.0f) << "a push changes no pulled value by itself";
  client.startPrefetch();
  ASSERT_TRUE(client.takePrefetch(&step, &taken).isOk());
  EXPECT_EQ(big[0], 0.5f);
  EXPECT_EQ(big[kElements - 1], 0.5f);
  EXPECT_EQ(client.ps()[0].pulledVersion, before + 1);

  // Dropped: waited for and forgotten, the store untouched.
  client.startPrefetch();
  for (int64_t i = 0; i < kElements; ++i)
    store.find("big")->data<float>()[i] = 3.0f;
  client.dropPrefetch();
  ASSERT_TRUE(client.takePrefetch(&step, &taken).isOk());
  EXPECT_FALSE(taken);
  EXPECT_EQ(big[0], 3.0f);
}

// --wire bf16: a pull asking for bfloat16 gets the f32 variable rounded to
// the nearest bf16, in half the bytes; a push of bf16 values is widened and
// applied to the f32 variable, which keeps every f32 bit (a later f32 pull
// sees them). Streamed and in one message alike.
TEST_F(PsStream, Bfloat16WireHalvesTheBytesAndTheVariableStaysF32) {
  const float start = 1.0f + 1.0f / 512; // not a bf16: rounds to 1
  ASSERT_TRUE(initialize(start).ok());
  auto pullBf16 = [&](bool streamed) {
    rpc::PullRequest req;
    *req.mutable_caller() = caller_;
    req.add_names("big");
    req.set_wire_dtype(plan::BF16);
    rpc::PullReply reply;
    Tensor out = Tensor::zeros(DType::BF16, {kElements});
    ChunkReader reader(&reply, [&](std::vector<PayloadTarget> *targets) {
      EXPECT_EQ(reply.values_size(), 1);
      EXPECT_EQ(reply.values(0).dtype(), plan::BF16);
      EXPECT_EQ(reply.values(0).size(), size_t(2 * kElements));
      targets->push_back({out.rawData(), out.byteSize()});
      return Status::ok();
    });
    grpc::ClientContext ctx;
    setDeadline(&ctx, std::chrono::milliseconds(10000));
    Status refused = Status::ok();
    grpc::Status st;
    if (streamed) {
      st = receiveStream(*raw_, &ctx, kPullStreamMethod, serializeMessage(req),
                         &reader, &refused);
    } else {
      grpc::ByteBuffer response;
      st = rawCall(*raw_, &ctx, kPullMethod, serializeMessage(req), &response);
      if (st.ok())
        refused = reader.add(response);
    }
    EXPECT_TRUE(st.ok()) << describe(st);
    EXPECT_TRUE(refused.isOk()) << refused.message();
    EXPECT_TRUE(reader.finish().isOk());
    Tensor wide = Tensor::zeros(DType::F32, {kElements});
    widenFromBf16(static_cast<const uint16_t *>(out.rawData()), kElements,
                  wide.data<float>());
    return wide;
  };
  for (bool streamed : {false, true}) {
    Tensor v = pullBf16(streamed);
    for (int64_t i = 0; i < kElements; ++i)
      ASSERT_EQ(v.data<float>()[i], 1.0f) << i;
  }
  // grad 1 and lr 0.25, both as bf16 (exact): the f32 variable becomes
  // start - 0.25, which bf16 cannot hold either.
  Tensor one = Tensor::zeros(DType::F32, {kElements});
  for (int64_t i = 0; i < kElements; ++i)
    one.data<float>()[i] = 1.0f;
  grad_ = narrowToBf16(one);
  Tensor lr = Tensor::zeros(DType::F32, {});
  lr.data<float>()[0] = 0.25f;
  lr_ = narrowToBf16(lr);
  rpc::PushRequest req;
  *req.mutable_caller() = caller_;
  req.set_version(version());
  req.set_incarnation(incarnation_);
  describeTensor("big:grad", grad_, req.add_values());
  describeTensor("big:apply_sgd:2", lr_, req.add_values());
  rpc::PushReply reply;
  grpc::Status st = push(packChunks(req, {&grad_, &lr_}, kChunk), &reply);
  ASSERT_TRUE(st.ok()) << describe(st);
  EXPECT_TRUE(reply.applied());
  Tensor exact = pull();
  for (int64_t i = 0; i < kElements; ++i)
    ASSERT_EQ(exact.data<float>()[i], start - 0.25f) << i;
  Tensor rounded = pullBf16(false);
  EXPECT_EQ(rounded.data<float>()[0], 0.75f) << "a tie rounds to even";
}

// --compress-push: a top-k or 1-bit gradient, streamed or in one message,
// is decoded and applied as the dense gradient it encodes; a malformed one,
// or an encoded value under a key that is no dense gradient, is refused
// with nothing applied.
TEST_F(PsStream, CompressedPushesApplyTheDecodedGradient) {
  ASSERT_TRUE(initialize(1.0f).ok());
  auto pushEncoded = [&](const Tensor &encoded, rpc::PushEncoding e,
                         bool streamed, const char *key = "big:grad") {
    lr_ = Tensor::zeros(DType::F32, {});
    lr_.data<float>()[0] = 0.5f;
    rpc::PushRequest req;
    *req.mutable_caller() = caller_;
    req.set_version(version());
    req.set_incarnation(incarnation_);
    rpc::WireTensor *w = req.add_values();
    describeTensor(key, Tensor::zeros(DType::F32, {kElements}), w);
    w->set_size(encoded.byteSize());
    w->set_encoding(e);
    describeTensor("big:apply_sgd:2", lr_, req.add_values());
    rpc::PushReply reply;
    if (streamed)
      return push(packChunks(req, {&encoded, &lr_}, kChunk), &reply);
    grpc::ClientContext ctx;
    setDeadline(&ctx, std::chrono::milliseconds(10000));
    grpc::ByteBuffer response;
    return rawCall(*raw_, &ctx, kPushMethod,
                   packTensors(req, {&encoded, &lr_}, /*copy=*/true),
                   &response);
  };
  // Top-k of 2: -4 at 7, 2 at 900; lr 0.5.
  std::vector<float> g(size_t(kElements), 0.01f);
  g[7] = -4.0f;
  g[900] = 2.0f;
  Tensor topk = encodeTopK(g.data(), kElements, 2);
  grpc::Status st = pushEncoded(topk, rpc::PUSH_TOP_K, /*streamed=*/true);
  ASSERT_TRUE(st.ok()) << describe(st);
  Tensor v = pull();
  EXPECT_EQ(v.data<float>()[7], 3.0f);
  EXPECT_EQ(v.data<float>()[900], 0.0f);
  EXPECT_EQ(v.data<float>()[8], 1.0f) << "not sent: unchanged";
  // 1-bit: the mean magnitude 1 with each value's sign.
  std::vector<float> signs(size_t(kElements), 1.0f);
  signs[8] = -1.0f;
  Tensor onebit = encodeOneBit(signs.data(), kElements);
  st = pushEncoded(onebit, rpc::PUSH_ONE_BIT, /*streamed=*/false);
  ASSERT_TRUE(st.ok()) << describe(st);
  v = pull();
  EXPECT_EQ(v.data<float>()[7], 2.5f);
  EXPECT_EQ(v.data<float>()[8], 1.5f);
  EXPECT_EQ(version(), 2);
  // Malformed: indices out of order (found once the bytes arrived).
  uint32_t *index = reinterpret_cast<uint32_t *>(topk.rawData());
  std::swap(index[0], index[1]);
  st = pushEncoded(topk, rpc::PUSH_TOP_K, /*streamed=*/true);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find(
                "ps.0: pushed value 'big:grad' is malformed: top-k index 1 "
                "is 7, after 900 (indices must ascend, below 1000) (nothing "
                "applied)"),
            std::string::npos)
      << st.error_message();
  // A size that fits no encoding of f32[1000], refused from the header.
  st = pushEncoded(Tensor::zeros(DType::I32, {3}), rpc::PUSH_ONE_BIT, false);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find(
                "pushed value 'big:grad' (f32[1000]) announces 12 bytes, which "
                "fit no 1-bit encoding of its 1000 values"),
            std::string::npos)
      << st.error_message();
  // An encoded value under the learning rate's key.
  st = pushEncoded(onebit, rpc::PUSH_ONE_BIT, false, "big:apply_sgd:2");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find(
                "pushed value 'big:apply_sgd:2' is compressed, but only a "
                "dense f32 gradient may be (the update takes f32[] under it)"),
            std::string::npos)
      << st.error_message();
  EXPECT_EQ(version(), 2);
  EXPECT_EQ(pull().data<float>()[7], 2.5f);
}

// Lookup (an embedding's rows, here the 1-element rows of "big"): the rows
// at the ids, in their order; a lookup out of bounds, larger than the
// table, malformed or of an unknown tensor is refused and answers nothing.
TEST_F(PsStream, LookupAnswersRowsAndRefusesWhatIsOutOfBounds) {
  ASSERT_TRUE(initialize(0.0f).ok());
  rpc::PushReply pushed;
  ASSERT_TRUE(push(pushChunks(-1.0f, 2.0f), &pushed).ok()); // every row 2
  auto lookup = [&](const std::string &name, std::vector<int64_t> ids,
                    rpc::LookupReply *reply, size_t extraBytes = 0) {
    rpc::LookupRequest req;
    *req.mutable_caller() = caller_;
    req.set_name(name);
    std::string bytes(reinterpret_cast<const char *>(ids.data()),
                      ids.size() * sizeof(int64_t));
    bytes.append(extraBytes, '\0');
    req.set_ids(bytes);
    grpc::ClientContext ctx;
    setDeadline(&ctx, std::chrono::milliseconds(5000));
    return stub_->Lookup(&ctx, req, reply);
  };
  rpc::LookupReply reply;
  grpc::Status st = lookup("big", {999, 3, 3}, &reply);
  ASSERT_TRUE(st.ok()) << describe(st);
  ASSERT_EQ(reply.rows().size(), 3 * sizeof(float));
  const float *rows = reinterpret_cast<const float *>(reply.rows().data());
  EXPECT_EQ(rows[0], 2.0f);
  EXPECT_EQ(rows[2], 2.0f);
  EXPECT_EQ(reply.version(), 1);
  struct Bad {
    std::string name;
    std::vector<int64_t> ids;
    size_t extra;
    grpc::StatusCode code;
    const char *says;
  };
  for (const Bad &bad : std::vector<Bad>{
           {"big", {0, 1000}, 0, grpc::StatusCode::INVALID_ARGUMENT,
            "id 1000 at position 1 is outside [0, 1000)"},
           {"big", {-1}, 0, grpc::StatusCode::INVALID_ARGUMENT,
            "id -1 at position 0"},
           {"big", std::vector<int64_t>(1001, 0), 0,
            grpc::StatusCode::INVALID_ARGUMENT, "a lookup of 1001 ids"},
           {"big", {1}, 3, grpc::StatusCode::INVALID_ARGUMENT,
            "not a whole number of int64s"},
           {"nope", {1}, 0, grpc::StatusCode::NOT_FOUND,
            "holds no table 'nope'"}}) {
    rpc::LookupReply r;
    st = lookup(bad.name, bad.ids, &r, bad.extra);
    EXPECT_EQ(st.error_code(), bad.code) << bad.says;
    EXPECT_NE(st.error_message().find(bad.says), std::string::npos)
        << st.error_message();
  }
}

// --wire bf16 for lookups: an embedding's rows asked for as bfloat16 come
// rounded to the nearest bf16 (ties to even) in half the bytes, the reply
// says so; a lookup without it still gets every f32 bit of the same rows.
TEST_F(PsStream, Bfloat16WireLookupHalvesTheRowsBytes) {
  const float start = 1.0f + 3.0f / 256; // not a bf16: rounds to 1 + 1/64
  ASSERT_TRUE(initialize(start).ok());
  auto lookup = [&](bool bf16, rpc::LookupReply *reply) {
    rpc::LookupRequest req;
    *req.mutable_caller() = caller_;
    req.set_name("big");
    const std::vector<int64_t> ids{7, 0, 999};
    req.set_ids(std::string(reinterpret_cast<const char *>(ids.data()),
                            ids.size() * sizeof(int64_t)));
    if (bf16)
      req.set_wire_dtype(plan::BF16);
    grpc::ClientContext ctx;
    setDeadline(&ctx, std::chrono::milliseconds(5000));
    return stub_->Lookup(&ctx, req, reply);
  };
  rpc::LookupReply narrow, wide;
  grpc::Status st = lookup(true, &narrow);
  ASSERT_TRUE(st.ok()) << describe(st);
  EXPECT_EQ(narrow.rows_dtype(), plan::BF16);
  ASSERT_EQ(narrow.rows().size(), 3 * sizeof(uint16_t));
  const auto *b = reinterpret_cast<const uint16_t *>(narrow.rows().data());
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(b[i], dtf::bf16FromF32(start)) << i; // 0x3f82: 1 + 1/64
  EXPECT_EQ(dtf::f32FromBf16(b[0]), 1.0f + 1.0f / 64);
  st = lookup(false, &wide);
  ASSERT_TRUE(st.ok()) << describe(st);
  EXPECT_EQ(wide.rows_dtype(), plan::DType(0));
  ASSERT_EQ(wide.rows().size(), 3 * sizeof(float));
  EXPECT_EQ(reinterpret_cast<const float *>(wide.rows().data())[1], start);
}

TEST_F(PsStream, TruncatedPushAppliesNothing) {
  ASSERT_TRUE(initialize(1.0f).ok());
  std::vector<grpc::ByteBuffer> c = pushChunks(1.0f, 0.5f);
  c.pop_back();
  rpc::PushReply reply;
  grpc::Status st = push(c, &reply);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("ps.0: refused a push stream: incomplete "
                                    "(nothing applied): it ended after"),
            std::string::npos)
      << st.error_message();
  EXPECT_EQ(version(), 0);
  Tensor v = pull();
  EXPECT_EQ(v.data<float>()[0], 1.0f);
  // The next complete push goes through.
  ASSERT_TRUE(push(pushChunks(1.0f, 0.5f), &reply).ok());
  EXPECT_EQ(version(), 1);
  EXPECT_EQ(pull().data<float>()[kElements - 1], 0.5f);
}

TEST_F(PsStream, CancelledPushAppliesNothing) {
  ASSERT_TRUE(initialize(1.0f).ok());
  std::vector<grpc::ByteBuffer> c = pushChunks(1.0f, 0.5f);
  {
    grpc::ClientContext ctx;
    setDeadline(&ctx, std::chrono::milliseconds(10000));
    RawStream call(*raw_, &ctx, kPushStreamMethod);
    for (size_t i = 0; i < c.size() / 2; ++i)
      ASSERT_TRUE(call.write(c[i]));
    ctx.TryCancel(); // the worker died mid-push
    EXPECT_EQ(call.finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // The ps may see the cancellation a moment later.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(version(), 0);
  EXPECT_EQ(pull().data<float>()[0], 1.0f);
}

TEST_F(PsStream, HugeOrWrongTensorIsRefusedBeforeAllocation) {
  ASSERT_TRUE(initialize(1.0f).ok());
  // The header announces a 4 TB gradient; only a few bytes follow. Refused
  // from the header (the test would run out of memory otherwise).
  rpc::PushRequest req;
  *req.mutable_caller() = caller_;
  Tensor small = Tensor::zeros(DType::F32, {4});
  describeTensor("big:grad", small, req.add_values());
  req.mutable_values(0)->set_dims(0, int64_t(1) << 40);
  req.mutable_values(0)->set_size(uint64_t(4) << 40);
  Tensor lr = Tensor::zeros(DType::F32, {});
  describeTensor("big:apply_sgd:2", lr, req.add_values());
  rpc::PushReply reply;
  grpc::Status st = push(packChunks(req, {&small, &lr}, kChunk), &reply);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("'big:grad' is f32[1099511627776], but the "
                                    "update takes f32[1000]"),
            std::string::npos)
      << st.error_message();
  // Sized right but not what the update takes (a 2000-element gradient).
  st = push(pushChunks(1.0f, 0.5f, 2 * kElements), &reply);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error_message().find("but the update takes f32[1000]"),
            std::string::npos)
      << st.error_message();
  EXPECT_EQ(version(), 0);
  // Another plan's caller: FAILED_PRECONDITION, as for a single message.
  caller_.set_plan_fingerprint(7);
  st = push(pushChunks(1.0f, 0.5f), &reply);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << describe(st);
  caller_.set_plan_fingerprint(42);
}

TEST_F(PsStream, InitializeWithTheWrongTypeChangesNothing) {
  ASSERT_TRUE(initialize(2.0f).ok());
  Tensor t = Tensor::zeros(DType::F32, {kElements + 1});
  rpc::InitializeRequest req;
  *req.mutable_caller() = caller_;
  req.set_force(true);
  describeTensor("big", t, req.add_values());
  grpc::ClientContext ctx;
  setDeadline(&ctx, std::chrono::milliseconds(10000));
  grpc::ByteBuffer response;
  grpc::Status st = sendStream(*raw_, &ctx, kInitializeStreamMethod,
                               packChunks(req, {&t}, kChunk), &response);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error_message().find("variable 'big' arrived as f32[1001]"),
            std::string::npos)
      << st.error_message();
  EXPECT_EQ(pull().data<float>()[0], 2.0f);
}

} // namespace
} // namespace dtf::dist
