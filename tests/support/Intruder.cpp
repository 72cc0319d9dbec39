// dtf-intruder: a client that attacks a running dtf job's ps, for the
// security e2e test (tests/e2e/security.sh): each attack is one or more real
// calls with the credentials given, and prints what the ps answered:
//   ATTACK: accepted
//   ATTACK: refused CODE: message
#include "runtime/distributed/TensorMessage.h"
#include "runtime/distributed/Transport.h"
#include "runtime/distributed/Wire.h"
#include "schema/Placement.h"
#include "runtime/plan/PlanReader.h"
#include "runtime/plan/PlanTypes.h"

#include <grpcpp/generic/generic_stub.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace dtf;

namespace {

constexpr const char *kUsage =
    R"(usage: dtf-intruder ATTACK --target HOST:PORT [options]

attacks: status, shutdown, initialize, save, push-nan, push-step, pull-repeat,
         park (many waiting pulls at once), streams (stalled push streams),
         push-huge (one unary push of --bytes bytes), mirror (an empty
         snapshot into the target's replica: --ps-replicas 2), replica (the
         replica the target holds)
credentials (default: plaintext):
  --ca FILE         TLS, verifying the server with this CA, no client certificate
  --cert FILE --key FILE   and this client certificate
  --server-name N   the name the server's certificate must carry (ps.0)
  --unix PATH       over the Unix socket PATH (--target still names the ps's
                    cluster address), showing --unix-task and the token of
                    --unix-ca's CA with every call when given
options:
  --plan FILE       the job's plan (its fingerprint; push and pull shapes)
  --claim TASK      the task the request says it comes from (worker.0)
  --dir DIR         save: where to ask the ps to write
  --count N         pull-repeat: how often the name repeats; park: pulls (40);
                    streams: streams (20)
  --hold S          streams: how long to hold them before finishing (5)
  --bytes N         push-huge: the push's size (1610612736, 1.5 GiB)
)";

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string outcome(const grpc::Status &st) {
  return st.ok() ? "accepted" : "refused " + dist::describe(st);
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string attack = argv[1];
  std::map<std::string, std::string> opt;
  for (int i = 2; i + 1 < argc; i += 2)
    opt[argv[i]] = argv[i + 1];
  const std::string target = opt["--target"];
  if (target.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (opt.count("--ca")) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = readFile(opt["--ca"]);
    if (opt.count("--cert")) {
      o.pem_cert_chain = readFile(opt["--cert"]);
      o.pem_private_key = readFile(opt["--key"]);
    }
    creds = grpc::SslCredentials(o);
    args.SetSslTargetNameOverride(
        opt.count("--server-name") ? opt["--server-name"] : "ps.0");
  } else if (!opt.count("--unix")) {
    creds = grpc::InsecureChannelCredentials();
  }
  std::shared_ptr<grpc::Channel> channel;
  if (opt.count("--unix")) {
    // The job's own credentials over its Unix socket, or some of them.
    dist::Transport t;
    t.tls = true;
    t.caPem = opt.count("--unix-ca") ? readFile(opt["--unix-ca"]) : "";
    t.self = opt["--unix-task"];
    t.socketDir = opt["--unix"].substr(0, opt["--unix"].rfind('/'));
    std::string file = opt["--unix"].substr(opt["--unix"].rfind('/') + 1);
    file = file.substr(0, file.size() - 5); // HOST_PORT
    const std::string address = "127.0.0.1:" + file.substr(file.rfind('_') + 1);
    if (opt.count("--unix-ca") && opt.count("--unix-task"))
      channel = t.channel(address);
    else
      channel = grpc::CreateCustomChannel(
          "unix:" + opt["--unix"],
          grpc::experimental::LocalCredentials(UDS), args);
  } else {
    channel = grpc::CreateCustomChannel(target, creds, args);
  }
  auto stub = rpc::ParameterServer::NewStub(channel);
  grpc::GenericStub raw(channel);

  plan::Plan plan;
  std::string planBytes;
  if (opt.count("--plan")) {
    planBytes = readFile(opt["--plan"]);
    if (!plan::readPlanFile(opt["--plan"], &plan).isOk()) {
      std::fprintf(stderr, "dtf-intruder: cannot read %s\n",
                   opt["--plan"].c_str());
      return 2;
    }
  }
  rpc::Caller caller;
  caller.set_task(opt.count("--claim") ? opt["--claim"] : "worker.0");
  caller.set_plan_fingerprint(dist::fingerprint(planBytes));
  auto context = [](grpc::ClientContext *ctx) {
    dist::setDeadline(ctx, std::chrono::milliseconds(5000));
  };

  grpc::Status st;
  if (attack == "status") {
    grpc::ClientContext ctx;
    context(&ctx);
    rpc::StatusRequest req;
    *req.mutable_caller() = caller;
    rpc::StatusReply reply;
    st = stub->GetStatus(&ctx, req, &reply);
  } else if (attack == "mirror") {
    grpc::ClientContext ctx;
    context(&ctx);
    rpc::MirrorRequest req;
    *req.mutable_caller() = caller;
    req.set_snapshot(true);
    grpc::ByteBuffer response;
    st = dist::sendStream(raw, &ctx, dist::kMirrorStreamMethod,
                          dist::asTensorChunks(dist::packChunks(req, {}, 4096)),
                          &response);
  } else if (attack == "replica") {
    grpc::ClientContext ctx;
    context(&ctx);
    rpc::ReplicaRequest req;
    *req.mutable_caller() = caller;
    rpc::PullReply header;
    dist::ChunkReader reader(
        &header, [&header](std::vector<dist::PayloadTarget> *targets) {
          for (const rpc::WireTensor &w : header.values())
            targets->push_back({nullptr, size_t(w.size())}); // dropped
          return Status::ok();
        });
    Status refused = Status::ok();
    st = dist::receiveStream(raw, &ctx, dist::kReplicaStreamMethod,
                             dist::serializeMessage(req), &reader, &refused);
  } else if (attack == "shutdown") {
    grpc::ClientContext ctx;
    context(&ctx);
    rpc::ShutdownRequest req;
    *req.mutable_caller() = caller;
    req.set_reason("an intruder");
    rpc::ShutdownReply reply;
    st = stub->Shutdown(&ctx, req, &reply);
  } else if (attack == "initialize") {
    grpc::ClientContext ctx;
    context(&ctx);
    rpc::InitializeRequest req;
    *req.mutable_caller() = caller;
    req.set_force(true);
    rpc::InitializeReply reply;
    st = stub->Initialize(&ctx, req, &reply);
  } else if (attack == "save") {
    grpc::ClientContext ctx;
    context(&ctx);
    rpc::SaveRequest req;
    *req.mutable_caller() = caller;
    req.set_dir(opt["--dir"]);
    req.set_step(1);
    req.set_num_shards(1);
    rpc::SaveReply reply;
    st = stub->Save(&ctx, req, &reply);
  } else if (attack == "push-nan" || attack == "push-step") {
    // A whole, well-formed push for ps 0: every key of its update, floats
    // NaN (push-nan) or 0 with the integer operands 2000000 (push-step).
    plan::Placement placement;
    plan::Program program;
    if (!plan::placeVariables(plan, 1, "", &placement).isOk() ||
        !plan::psProgramFor(plan, placement, 0, &program).isOk()) {
      std::fprintf(stderr, "dtf-intruder: %s: no ps program\n", attack.c_str());
      return 2;
    }
    rpc::PushRequest req;
    *req.mutable_caller() = caller;
    std::vector<Tensor> values;
    for (const plan::Transfer &r : program.recvs())
      for (const plan::Value &v : program.values())
        if (v.id() == r.value()) {
          DType dtype = DType::F32;
          (void)plan::toDType(v.type().dtype(), &dtype);
          std::vector<int64_t> dims = plan::dimsOf(v.type().shape());
          for (int64_t &d : dims)
            d = d < 0 ? 1 : d;
          Tensor t = Tensor::allocate(dtype, dims);
          for (int64_t i = 0; i < t.numElements(); ++i) {
            if (dtype == DType::F32)
              t.data<float>()[i] = attack == "push-nan"
                                       ? std::numeric_limits<float>::quiet_NaN()
                                       : 0.0f;
            else if (dtype == DType::I64)
              t.data<int64_t>()[i] = attack == "push-nan" ? 1 : 2000000;
            else if (dtype == DType::I32)
              t.data<int32_t>()[i] = attack == "push-nan" ? 1 : 2000000;
          }
          values.push_back(std::move(t));
          dist::describeTensor(r.key(), values.back(), req.add_values());
        }
    std::vector<const Tensor *> payload;
    for (const Tensor &t : values)
      payload.push_back(&t);
    // Pushes carry the version they were computed at; async takes any.
    for (int attempt = 0; attempt < 1; ++attempt) {
      grpc::ClientContext ctx;
      context(&ctx);
      grpc::ByteBuffer response;
      st = dist::rawCall(raw, &ctx, dist::kPushMethod,
                         dist::packTensors(req, payload, true), &response);
    }
  } else if (attack == "push-huge") {
    // One unary push of --bytes bytes (1.5 GB): its header names one f32
    // value that size. The ps must refuse it from its length, before it
    // holds it.
    const int64_t bytes = opt.count("--bytes") ? std::stoll(opt["--bytes"])
                                               : int64_t(1536) << 20;
    rpc::PushRequest req;
    *req.mutable_caller() = caller;
    req.set_version(0);
    Tensor t = Tensor::zeros(DType::F32, {bytes / 4});
    dist::describeTensor("huge:grad", t, req.add_values());
    grpc::ClientContext ctx;
    dist::setDeadline(&ctx, std::chrono::milliseconds(60000));
    grpc::ByteBuffer response;
    st = dist::rawCall(raw, &ctx, dist::kPushMethod,
                       dist::packTensors(req, {&t}, /*copy=*/false), &response);
  } else if (attack == "pull-repeat" || attack == "park") {
    const int count = opt.count("--count") ? std::stoi(opt["--count"]) : 40;
    std::string first;
    for (const plan::Variable &v : plan.variables())
      if (first.empty())
        first = v.name();
    rpc::PullRequest req;
    *req.mutable_caller() = caller;
    if (attack == "pull-repeat") {
      for (int i = 0; i < count; ++i)
        req.add_names(first);
      grpc::ClientContext ctx;
      context(&ctx);
      grpc::ByteBuffer response;
      st = dist::rawCall(raw, &ctx, dist::kPullMethod,
                         dist::serializeMessage(req), &response);
    } else {
      // Pulls that wait for an update far ahead, all at once; the incarnation
      // must be the ps's current one for a pull to wait.
      grpc::ClientContext sctx;
      context(&sctx);
      rpc::StatusRequest sreq;
      *sreq.mutable_caller() = caller;
      rpc::StatusReply status;
      st = stub->GetStatus(&sctx, sreq, &status);
      req.add_names(first);
      req.set_min_version(int64_t(1) << 50);
      req.set_wait_ms(4000);
      req.set_incarnation(status.incarnation());
      std::atomic<int> exhausted{0}, other{0};
      std::vector<std::thread> threads;
      for (int i = 0; i < count && st.ok(); ++i)
        threads.emplace_back([&] {
          grpc::ClientContext ctx;
          context(&ctx);
          grpc::ByteBuffer response;
          grpc::Status s =
              dist::rawCall(raw, &ctx, dist::kPullMethod,
                            dist::serializeMessage(req), &response);
          ++(s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ? exhausted
                                                                    : other);
        });
      for (std::thread &t : threads)
        t.join();
      std::printf("%s: %d of %d pulls refused RESOURCE_EXHAUSTED\n",
                  attack.c_str(), exhausted.load(), count);
      if (!st.ok())
        std::printf("%s: %s\n", attack.c_str(), outcome(st).c_str());
      return 0;
    }
  } else if (attack == "streams") {
    // Push streams that send the start of a 1 MiB header and then nothing:
    // the ps takes a bounded number from one caller, refuses the others,
    // and cuts the ones it took once they stall (--stall-timeout).
    const int count = opt.count("--count") ? std::stoi(opt["--count"]) : 20;
    const int hold = opt.count("--hold") ? std::stoi(opt["--hold"]) : 5;
    std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
    std::vector<std::unique_ptr<dist::RawStream>> streams;
    std::string head(4 + 1000, 'x');
    const uint32_t size = uint32_t(1) << 20;
    std::memcpy(head.data(), &size, 4);
    for (int i = 0; i < count; ++i) {
      contexts.push_back(std::make_unique<grpc::ClientContext>());
      dist::setDeadline(contexts.back().get(),
                        std::chrono::milliseconds(1000 * (hold + 10)));
      streams.push_back(std::make_unique<dist::RawStream>(
          raw, contexts.back().get(), dist::kPushStreamMethod));
      grpc::Slice slice(head);
      grpc::ByteBuffer chunk(&slice, 1);
      (void)streams.back()->write(chunk);
    }
    std::this_thread::sleep_for(std::chrono::seconds(hold));
    int exhausted = 0, cut = 0, other = 0;
    for (auto &stream : streams) {
      grpc::Status s = stream->finish();
      ++(s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ? exhausted
         : s.error_code() == grpc::StatusCode::CANCELLED        ? cut
                                                                : other);
    }
    std::printf("streams: %d refused RESOURCE_EXHAUSTED, %d cut, %d other, "
                "of %d\n",
                exhausted, cut, other, count);
    return 0;
  } else {
    std::fprintf(stderr, "dtf-intruder: unknown attack '%s'\n%s",
                 attack.c_str(), kUsage);
    return 2;
  }
  std::printf("%s: %s\n", attack.c_str(), outcome(st).c_str());
  return 0;
}
