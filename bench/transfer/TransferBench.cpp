// dtf-transfer-bench: how fast a large tensor crosses between tasks. Starts a
// ps task in this process on a free loopback port, holding one f32 variable
// of the given size, and times a worker's Pull of it and Push of its
// gradient through the same gRPC services dtf-run uses (bench/distributed.sh
// prints it beside raw loopback TCP).
//
//   dtf-transfer-bench [--mb 256] [--repeat 5]
#include "runtime/distributed/ParameterServer.h"
#include "runtime/distributed/TensorMessage.h"
#include "runtime/distributed/Wire.h"
#include "runtime/plan/Partition.h"
#include "runtime/plan/PlanReader.h"

#include <malloc.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

using namespace dtf;

namespace {

int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
  socklen_t n = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr *>(&a), &n);
  int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

plan::Plan transferPlan(int64_t elements) {
  plan::Plan p;
  p.set_format_version(plan::kPlanFormatVersion);
  p.set_model("transfer");
  plan::Variable *v = p.add_variables();
  v->set_name("big");
  v->mutable_type()->set_dtype(plan::F32);
  v->mutable_type()->mutable_shape()->add_dims(elements);
  v->mutable_initializer()->set_kind("zeros");
  v->set_trainable(true);
  v->set_partitions(1);
  v->set_role("model");
  plan::Program *t = p.mutable_train_step();
  auto value = [&](int id, std::vector<int64_t> dims) {
    plan::Value *val = t->add_values();
    val->set_id(id);
    val->mutable_type()->set_dtype(plan::F32);
    for (int64_t d : dims)
      val->mutable_type()->mutable_shape()->add_dims(d);
  };
  value(0, {elements});
  value(1, {elements});
  value(2, {});
  plan::Op *read = t->add_ops();
  read->set_name("dtf.read_variable");
  read->add_outputs(0);
  (*read->mutable_attrs())["name"].set_s("big");
  plan::Op *grad = t->add_ops();
  grad->set_name("dtf.input");
  grad->add_outputs(1);
  (*grad->mutable_attrs())["name"].set_s("g");
  plan::Op *lr = t->add_ops();
  lr->set_name("dtf.input");
  lr->add_outputs(2);
  (*lr->mutable_attrs())["name"].set_s("lr");
  plan::Op *apply = t->add_ops();
  apply->set_name("dtf.apply_sgd");
  apply->add_inputs(0);
  apply->add_inputs(1);
  apply->add_inputs(2);
  p.mutable_training()->set_seed(1);
  (void)plan::partitionTrainStep(&p);
  return p;
}

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
      .count();
}

} // namespace

int main(int argc, char **argv) {
  // As dtf-run: large buffers stay on the heap for reuse.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  int64_t mb = 256;
  int repeat = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--mb" || a == "--repeat") && i + 1 < argc) {
      long v = std::strtol(argv[++i], nullptr, 10);
      if (v <= 0 || v > 4096) {
        std::fprintf(stderr, "dtf-transfer-bench: %s expects 1..4096\n", a.c_str());
        return 2;
      }
      if (a == "--mb")
        mb = v;
      else
        repeat = int(v);
      continue;
    }
    std::fprintf(stderr, "usage: dtf-transfer-bench [--mb 256] [--repeat 5]\n");
    return a == "--help" || a == "-h" ? 0 : 2;
  }
  const int64_t elements = mb * (1 << 20) / 4;
  plan::Plan p = transferPlan(elements);
  plan::Placement placement;
  Status s = plan::placeVariables(p, 1, "round_robin", &placement);
  if (!s.isOk()) {
    std::fprintf(stderr, "dtf-transfer-bench: %s\n", s.message().c_str());
    return 1;
  }
  dist::TaskConfig config;
  const std::string address = "127.0.0.1:" + std::to_string(freePort());
  config.roster.ps.push_back({"ps.0", address});
  config.roster.workers.push_back({"worker.0", "127.0.0.1:1"});
  config.planPath = "transfer";
  config.planFingerprint = 42;
  std::FILE *quiet = std::fopen("/dev/null", "w");
  config.out = quiet;
  std::thread ps([&] { dist::runParameterServer(p, placement, 0, config); });

  auto channel = dist::makeChannel(address);
  auto stub = rpc::ParameterServer::NewStub(channel);
  grpc::GenericStub raw(channel);
  channel->WaitForConnected(std::chrono::system_clock::now() +
                            std::chrono::seconds(10));
  rpc::Caller caller;
  caller.set_task("worker.0");
  caller.set_plan_fingerprint(42);
  {
    grpc::ClientContext ctx;
    rpc::InitializeRequest req;
    *req.mutable_caller() = caller;
    rpc::InitializeReply reply;
    grpc::Status st = stub->Initialize(&ctx, req, &reply);
    if (!st.ok()) {
      std::fprintf(stderr, "dtf-transfer-bench: %s\n", dist::describe(st).c_str());
      return 1;
    }
  }
  Tensor local = Tensor::zeros(DType::F32, {elements});
  Tensor grad = Tensor::zeros(DType::F32, {elements});
  Tensor lr = Tensor::zeros(DType::F32, {});
  double bestPull = 1e9, bestPush = 1e9;
  for (int r = 0; r < repeat; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    grpc::ClientContext ctx;
    rpc::PullRequest req;
    *req.mutable_caller() = caller;
    req.add_names("big");
    rpc::PullReply reply;
    grpc::ByteBuffer response;
    grpc::Status st = dist::rawCall(raw, &ctx, dist::kPullMethod,
                                    dist::serializeMessage(req), &response);
    dist::TensorReader reader;
    if (!st.ok() || !reader.open(response, &reply).isOk() ||
        reply.values_size() != 1 ||
        reply.values(0).size() != local.byteSize() ||
        !reader.read(local.rawData(), local.byteSize()).isOk()) {
      std::fprintf(stderr, "dtf-transfer-bench: pull failed: %s\n",
                   dist::describe(st).c_str());
      return 1;
    }
    bestPull = std::min(bestPull, secondsSince(t0));

    t0 = std::chrono::steady_clock::now();
    grpc::ClientContext pctx;
    rpc::PushRequest push;
    *push.mutable_caller() = caller;
    dist::describeTensor("big:grad", grad, push.add_values());
    dist::describeTensor("big:apply_sgd:2", lr, push.add_values());
    grpc::ByteBuffer pushed;
    st = dist::rawCall(raw, &pctx, dist::kPushMethod,
                       dist::packTensors(push, {&grad, &lr}, false), &pushed);
    if (!st.ok()) {
      std::fprintf(stderr, "dtf-transfer-bench: push failed: %s\n",
                   dist::describe(st).c_str());
      return 1;
    }
    bestPush = std::min(bestPush, secondsSince(t0));
  }
  {
    grpc::ClientContext ctx;
    rpc::ShutdownRequest req;
    *req.mutable_caller() = caller;
    rpc::ShutdownReply reply;
    (void)stub->Shutdown(&ctx, req, &reply);
  }
  ps.join();
  const double bytes = double(elements) * 4 / 1e6;
  std::printf("tensor %lld MB: pull %.0f MB/s (%.3f s), push %.0f MB/s "
              "(%.3f s, the ps applies sgd), best of %d\n",
              (long long)mb, bytes / bestPull, bestPull, bytes / bestPush,
              bestPush, repeat);
  return 0;
}
