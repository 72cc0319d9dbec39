// --ps-replicas 2 against two ps tasks in this process (runParameterServer
// on loopback ports, chunks of a few hundred bytes): ps.0 holds `big` and
// mirrors it on ps.1. Every update ps.0 applies reaches ps.1's replica, in
// order, before the push is answered; ps.0 started again comes back from
// that replica bit for bit at its version; and only ps.0 may mirror onto
// ps.1 (a replica at another version refuses an update).
#include "runtime/distributed/ParameterServer.h"
#include "runtime/distributed/TensorMessage.h"
#include "runtime/distributed/Wire.h"
#include "schema/Placement.h"
#include "tests/support/OneVariablePs.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <thread>

namespace dtf::dist {
namespace {

constexpr int64_t kElements = 1000;
constexpr size_t kChunk = 300;

class PsReplica : public ::testing::Test {
protected:
  void SetUp() override {
    plan_ = testing::oneVariableSgdPlan(kElements, "replica");
    ASSERT_TRUE(
        plan::placeVariables(plan_, 2, "round_robin", &placement_).isOk());
    // Two ports, distinct (a port freed a moment ago may come again).
    int ports[2] = {testing::freeLoopbackPort(), testing::freeLoopbackPort()};
    while (ports[1] == ports[0])
      ports[1] = testing::freeLoopbackPort();
    for (int k = 0; k < 2; ++k)
      config_.roster.ps.push_back(
          {"ps." + std::to_string(k), "127.0.0.1:" + std::to_string(ports[k])});
    config_.roster.workers.push_back({"worker.0", "127.0.0.1:1"});
    config_.planPath = "replica.plan";
    config_.planFingerprint = 42;
    config_.chunkBytes = kChunk;
    config_.psReplicas = 2;
    quiet_ = std::fopen("/dev/null", "w");
    config_.out = quiet_;
    caller_.set_task("worker.0");
    caller_.set_plan_fingerprint(42);
    for (int k = 0; k < 2; ++k)
      start(k);
  }
  void TearDown() override {
    for (int k = 0; k < 2; ++k)
      stop(k);
    std::fclose(quiet_);
  }

  void start(int k) {
    ps_[k] = std::thread([this, k] {
      code_[k] = runParameterServer(plan_, placement_, k, config_);
    });
    auto channel = Transport().channel(config_.roster.ps[size_t(k)].address);
    stub_[k] = rpc::ParameterServer::NewStub(channel);
    raw_[k] = std::make_unique<grpc::GenericStub>(channel);
    ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() +
                                          std::chrono::seconds(20)));
  }
  void stop(int k) {
    if (!ps_[k].joinable())
      return;
    grpc::ClientContext ctx;
    setDeadline(&ctx, std::chrono::milliseconds(5000));
    rpc::ShutdownRequest req;
    *req.mutable_caller() = caller_;
    rpc::ShutdownReply reply;
    (void)stub_[k]->Shutdown(&ctx, req, &reply);
    ps_[k].join();
    EXPECT_EQ(code_[k], 0) << k;
  }

  rpc::StatusReply status(int k) {
    grpc::ClientContext ctx;
    setDeadline(&ctx, std::chrono::milliseconds(5000));
    rpc::StatusRequest req;
    rpc::StatusReply reply;
    EXPECT_TRUE(stub_[k]->GetStatus(&ctx, req, &reply).ok());
    return reply;
  }

  grpc::Status initialize(int k, rpc::InitializeRequest req) {
    *req.mutable_caller() = caller_;
    req.set_force(true);
    grpc::ClientContext ctx;
    setDeadline(&ctx, std::chrono::milliseconds(10000));
    rpc::InitializeReply reply;
    return stub_[k]->Initialize(&ctx, req, &reply);
  }

  // ps.0's `big`, pulled in chunks.
  Tensor pull() {
    rpc::PullRequest req;
    *req.mutable_caller() = caller_;
    req.add_names("big");
    rpc::PullReply reply;
    Tensor out = Tensor::zeros(DType::F32, {kElements});
    ChunkReader reader(&reply, [&](std::vector<PayloadTarget> *targets) {
      targets->push_back({out.rawData(), out.byteSize()});
      return Status::ok();
    });
    grpc::ClientContext ctx;
    setDeadline(&ctx, std::chrono::milliseconds(10000));
    Status refused = Status::ok();
    grpc::Status st = receiveStream(*raw_[0], &ctx, kPullStreamMethod,
                                    serializeMessage(req), &reader, &refused);
    EXPECT_TRUE(st.ok() && refused.isOk()) << describe(st);
    return out;
  }

  // A push of gradient `g` (each element g + i / 1000) and rate 0.01 to
  // ps.0, in chunks; whether it was applied.
  bool push(float g) {
    Tensor grad = Tensor::zeros(DType::F32, {kElements});
    for (int64_t i = 0; i < kElements; ++i)
      grad.data<float>()[i] = g + float(i) / 1000.0f;
    Tensor lr = Tensor::zeros(DType::F32, {});
    lr.data<float>()[0] = 0.01f;
    rpc::StatusReply s = status(0);
    rpc::PushRequest req;
    *req.mutable_caller() = caller_;
    req.set_version(s.version());
    req.set_incarnation(s.incarnation());
    describeTensor("big:grad", grad, req.add_values());
    describeTensor("big:apply_sgd:2", lr, req.add_values());
    grpc::ClientContext ctx;
    setDeadline(&ctx, std::chrono::milliseconds(10000));
    grpc::ByteBuffer response;
    grpc::Status st =
        sendStream(*raw_[0], &ctx, kPushStreamMethod,
                   packChunks(req, {&grad, &lr}, kChunk), &response);
    rpc::PushReply reply;
    EXPECT_TRUE(st.ok()) << describe(st);
    return st.ok() && parseMessage(response, &reply) && reply.applied();
  }

  // A MirrorStream to ps.1 as `task`, from a snapshot of `big` (values
  // given) or an update at `version`.
  grpc::Status mirror(const std::string &task, bool snapshot, int64_t version,
                      int values) {
    rpc::MirrorRequest req;
    req.mutable_caller()->set_task(task);
    req.mutable_caller()->set_plan_fingerprint(42);
    req.set_snapshot(snapshot);
    req.set_version(version);
    Tensor t = Tensor::zeros(DType::F32, {kElements});
    Tensor lr = Tensor::zeros(DType::F32, {});
    std::vector<const Tensor *> payloads;
    for (int i = 0; i < values; ++i) {
      describeTensor(snapshot ? "big" : "big:grad", t, req.add_values());
      payloads.push_back(&t);
    }
    if (!snapshot) { // an update carries the rate too
      describeTensor("big:apply_sgd:2", lr, req.add_values());
      payloads.push_back(&lr);
    }
    grpc::ClientContext ctx;
    setDeadline(&ctx, std::chrono::milliseconds(10000));
    grpc::ByteBuffer response;
    return sendStream(*raw_[1], &ctx, kMirrorStreamMethod,
                      asTensorChunks(packChunks(req, payloads, kChunk)),
                      &response);
  }

  plan::Plan plan_;
  plan::Placement placement_;
  TaskConfig config_;
  std::FILE *quiet_ = nullptr;
  std::thread ps_[2];
  int code_[2] = {-1, -1};
  std::unique_ptr<rpc::ParameterServer::Stub> stub_[2];
  std::unique_ptr<grpc::GenericStub> raw_[2];
  rpc::Caller caller_;
};

TEST_F(PsReplica, UpdatesReachTheMirrorInOrderAndALostPsComesBackFromIt) {
  ASSERT_TRUE(initialize(1, {}).ok());
  rpc::InitializeRequest ones;
  Tensor t = Tensor::zeros(DType::F32, {kElements});
  for (int64_t i = 0; i < kElements; ++i)
    t.data<float>()[i] = 1.0f;
  toWire("big", t, ones.add_values());
  ASSERT_TRUE(initialize(0, ones).ok());
  rpc::StatusReply mirror = status(1);
  EXPECT_EQ(mirror.replica_of(), 0);
  EXPECT_EQ(mirror.replica_version(), 0); // the snapshot after initialize
  // Each update is on the replica before ps.0 answers its push.
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(push(float(i % 7) - 3.0f)) << i;
    ASSERT_EQ(status(1).replica_version(), i + 1) << i;
  }
  const Tensor before = pull();

  // ps.0 lost: started again, it holds the plan's zeros, uninitialized.
  stop(0);
  start(0);
  ASSERT_FALSE(status(0).initialized());
  rpc::InitializeRequest back;
  back.set_from_replica(true);
  grpc::Status st = initialize(0, back);
  ASSERT_TRUE(st.ok()) << describe(st);
  rpc::StatusReply again = status(0);
  EXPECT_TRUE(again.initialized());
  EXPECT_EQ(again.version(), 20);
  const Tensor after = pull();
  EXPECT_EQ(std::memcmp(before.rawData(), after.rawData(), before.byteSize()),
            0)
      << "ps.0 did not come back bit for bit from its replica";
  // It mirrors again from there.
  EXPECT_EQ(status(1).replica_version(), 20);
  ASSERT_TRUE(push(0.5f));
  EXPECT_EQ(status(1).replica_version(), 21);
}

TEST_F(PsReplica, OnlyThePsWhoseShardItMirrorsMayMirrorAndInStep) {
  ASSERT_TRUE(initialize(1, {}).ok());
  // Not ps.0 (--insecure: the claim is checked).
  grpc::Status st = mirror("worker.0", true, 0, 1);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << describe(st);
  EXPECT_NE(st.error_message().find("ps.1 mirrors ps.0's shard, not "
                                    "worker.0's"),
            std::string::npos)
      << st.error_message();
  // An update before any snapshot: the replica is at no version.
  st = mirror("ps.0", false, 0, 1);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << describe(st);
  // A snapshot, then an update at another version than the replica's.
  st = mirror("ps.0", true, 5, 1);
  ASSERT_TRUE(st.ok()) << describe(st);
  EXPECT_EQ(status(1).replica_version(), 5);
  st = mirror("ps.0", false, 7, 1);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << describe(st);
  EXPECT_NE(st.error_message().find("is at update 5, not 7"), std::string::npos)
      << st.error_message();
  EXPECT_EQ(status(1).replica_version(), 5);
  // A snapshot that lacks a tensor, or has one twice, changes nothing.
  EXPECT_EQ(mirror("ps.0", true, 9, 2).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status(1).replica_version(), 5);
}

} // namespace
} // namespace dtf::dist
