// dtf-transfer-bench: how fast a large tensor crosses between tasks. For each
// size, starts a ps task in this process on a free loopback port, holding
// one f32 variable of that size, and times a worker's pull of it and push of
// its gradient through the same gRPC services dtf-run uses: as one message
// (Pull, Push) and as a stream of chunks (PullStream, PushStream), beside a
// plain loopback TCP connection moving the same bytes into a buffer
// (bench/distributed.sh prints it).
//
//   dtf-transfer-bench [--mb 256,1024] [--repeat 5] [--chunk-bytes 4194304]
//                      [--tls-dir DIR [--same-host shm|unix|tcp]]
//                      [--fresh-buffers]
//
// Plaintext unless --tls-dir names the certificates `dtf-run certs` made for
// a cluster of ps.0 and worker.0: then as dtf-run's tasks on one host talk,
// over a Unix socket (--same-host unix), over it with the tensor bytes in a
// shared-memory region (--same-host shm, dtf-run's default: the worker
// copies the pulled value out of the region and the pushed one into it, as
// PsClient does; no streams then) or TLS over TCP.
//
// --fresh-buffers: the ps allocates each pull snapshot and pushed value
// anew (the path before it reused them; TaskConfig::reuseTransferBuffers).
//
// One message cannot carry 2 GiB or more (gRPC's limit): sizes from 2048 MB
// up are measured streamed only.
#include "runtime/distributed/ParameterServer.h"
#include "runtime/distributed/SharedRegion.h"
#include "runtime/distributed/Transport.h"
#include "runtime/distributed/TensorMessage.h"
#include "runtime/distributed/Wire.h"
#include "schema/Placement.h"
#include "runtime/plan/PlanReader.h"
#include "tests/support/OneVariablePs.h"

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
#include <vector>

using namespace dtf;

namespace {

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
      .count();
}

// Loopback TCP: `bytes` from one buffer through one connection into another,
// 4 MiB per send (what any runtime here can move between its tasks).
double tcpSeconds(size_t bytes) {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t n = sizeof a;
  if (bind(listener, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr *>(&a), &n) != 0) {
    close(listener);
    return -1;
  }
  std::vector<char> src(bytes, 1), dst(bytes);
  auto t0 = std::chrono::steady_clock::now();
  std::thread sender([&] {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0)
      for (size_t off = 0; off < bytes;) {
        ssize_t w = send(fd, src.data() + off,
                         std::min<size_t>(bytes - off, size_t(4) << 20), 0);
        if (w <= 0)
          break;
        off += size_t(w);
      }
    close(fd);
  });
  int fd = accept(listener, nullptr, nullptr);
  size_t got = 0;
  while (fd >= 0 && got < bytes) {
    ssize_t r = recv(fd, dst.data() + got, bytes - got, 0);
    if (r <= 0)
      break;
    got += size_t(r);
  }
  const double s = secondsSince(t0);
  sender.join();
  close(fd);
  close(listener);
  return got == bytes ? s : -1;
}

struct Figures {
  double pull = 1e9, push = 1e9, streamPull = 1e9, streamPush = 1e9, tcp = 1e9;
};

// Exits at once: the ps thread of the measurement is still running.
int fail(const std::string &what, const grpc::Status &st) {
  std::fprintf(stderr, "dtf-transfer-bench: %s failed: %s\n", what.c_str(),
               dist::describe(st).c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

// How the ps and the worker talk: plaintext, or with the TLS material of
// tlsDir, the same-host choice of dtf-run's --same-host.
struct Wiring {
  std::string tlsDir;
  dist::SameHost sameHost = dist::SameHost::kUnix;
  bool shm = false; // --same-host shm
  // --fresh-buffers: the ps allocates every pull snapshot and pushed value
  // anew, as before TransferBuffers (the old path, for a before/after).
  bool freshBuffers = false;
};

// A task's transport in the job {ps.0 at psAddress, worker.0}.
int transportOf(const Wiring &w, const std::string &task,
                const std::string &psAddress, dist::Transport *t) {
  t->taskAt[psAddress] = "ps.0";
  t->taskAt["127.0.0.1:1"] = "worker.0";
  if (w.tlsDir.empty())
    return 0;
  t->sameHost = w.sameHost;
  t->sharedMemory = w.shm;
  Status s = dist::loadTlsMaterial(w.tlsDir, task, t);
  if (s.isOk() && t->anyOverUnix())
    s = t->checkSocketDirectory();
  if (s.isOk() && w.shm)
    s = t->checkRegionDirectory();
  if (!s.isOk()) {
    std::fprintf(stderr, "dtf-transfer-bench: %s\n", s.message().c_str());
    return 2;
  }
  return 0;
}

// One size: a ps in this process, `repeat` rounds of each transfer, best of.
int measure(int64_t mb, int repeat, size_t chunkBytes, const Wiring &wiring,
            Figures *f) {
  const int64_t elements = mb * (1 << 20) / 4;
  const bool single = mb < 2048; // one message: below 2 GiB
  plan::Plan p = testing::oneVariableSgdPlan(elements, "transfer");
  plan::Placement placement;
  Status s = plan::placeVariables(p, 1, "round_robin", &placement);
  if (!s.isOk()) {
    std::fprintf(stderr, "dtf-transfer-bench: %s\n", s.message().c_str());
    return 1;
  }
  dist::TaskConfig config;
  const std::string address = "127.0.0.1:" + std::to_string(testing::freeLoopbackPort());
  config.roster.ps.push_back({"ps.0", address});
  config.roster.workers.push_back({"worker.0", "127.0.0.1:1"});
  config.planPath = "transfer";
  config.planFingerprint = 42;
  config.chunkBytes = chunkBytes;
  config.reuseTransferBuffers = !wiring.freshBuffers;
  std::FILE *quiet = std::fopen("/dev/null", "w");
  config.out = quiet;
  dist::Transport worker;
  if (int code = transportOf(wiring, "ps.0", address, &config.transport))
    return code;
  if (int code = transportOf(wiring, "worker.0", address, &worker))
    return code;
  std::thread ps([&] { dist::runParameterServer(p, placement, 0, config); });

  auto channel = worker.channel(address);
  auto stub = rpc::ParameterServer::NewStub(channel);
  grpc::GenericStub raw(channel);
  // The ps initializes its variable (and a copy for resets) first: seconds
  // for gigabytes.
  channel->WaitForConnected(std::chrono::system_clock::now() +
                            std::chrono::seconds(300));
  rpc::Caller caller;
  caller.set_task("worker.0");
  caller.set_plan_fingerprint(42);
  int64_t incarnation = 0;
  {
    grpc::ClientContext ctx;
    rpc::InitializeRequest req;
    *req.mutable_caller() = caller;
    rpc::InitializeReply reply;
    grpc::Status st = stub->Initialize(&ctx, req, &reply);
    if (!st.ok())
      return fail("initializing", st);
    incarnation = reply.incarnation();
  }
  // The pulled values double as the pushed gradient (one buffer less: the
  // 2.5 GB case has to fit beside the ps's own copies).
  Tensor local = Tensor::zeros(DType::F32, {elements});
  Tensor lr = Tensor::zeros(DType::F32, {});
  rpc::PullRequest pullReq;
  *pullReq.mutable_caller() = caller;
  pullReq.add_names("big");
  rpc::PushRequest pushReq;
  *pushReq.mutable_caller() = caller;
  pushReq.set_incarnation(incarnation);
  dist::describeTensor("big:grad", local, pushReq.add_values());
  dist::describeTensor("big:apply_sgd:2", lr, pushReq.add_values());
  auto deadline = [&](grpc::ClientContext *ctx) {
    dist::setDeadline(ctx, std::chrono::milliseconds(60000 + mb * 100));
  };
  // --same-host shm: one region for the pull and the push (one at a time),
  // the value and the learning rate each at its aligned place.
  std::unique_ptr<dist::SharedRegion> region;
  if (wiring.shm) {
    Status made = dist::SharedRegion::create(
        worker.regionDirectory(), "worker.0",
        dist::alignRegion(local.byteSize()) + dist::kRegionAlignment, &region);
    if (!made.isOk()) {
      std::fprintf(stderr, "dtf-transfer-bench: %s\n", made.message().c_str());
      return 2;
    }
    rpc::RegionSlice slice;
    slice.set_region(region->name());
    slice.set_region_bytes(region->size());
    slice.set_capacity(region->size());
    *pullReq.mutable_reply_into() = slice;
    *pushReq.mutable_values_in() = slice;
    pushReq.mutable_values(1)->set_offset(dist::alignRegion(local.byteSize()));
  }
  for (int r = 0; r < repeat; ++r) {
    for (bool stream : {false, true}) {
      if ((!stream && !single) || (stream && region))
        continue;
      // Pull, straight into `local`.
      auto t0 = std::chrono::steady_clock::now();
      grpc::ClientContext ctx;
      deadline(&ctx);
      rpc::PullReply reply;
      dist::ChunkReader reader(&reply,
                               [&](std::vector<dist::PayloadTarget> *targets) {
                                 if (reply.values_size() != 1 ||
                                     reply.values(0).size() != local.byteSize() ||
                                     reply.in_region() != bool(region))
                                   return errorStatus("an unexpected reply");
                                 if (region) // out of the region, as PsClient
                                   std::memcpy(local.rawData(),
                                               region->data() +
                                                   reply.values(0).offset(),
                                               local.byteSize());
                                 else
                                   targets->push_back(
                                       {local.rawData(), local.byteSize()});
                                 return Status::ok();
                               });
      Status refused = Status::ok();
      grpc::Status st;
      if (stream) {
        st = dist::receiveStream(raw, &ctx, dist::kPullStreamMethod,
                                 dist::serializeMessage(pullReq), &reader,
                                 &refused);
      } else {
        grpc::ByteBuffer response;
        st = dist::rawCall(raw, &ctx, dist::kPullMethod,
                           dist::serializeMessage(pullReq), &response);
        if (st.ok())
          refused = reader.add(response);
      }
      if (st.ok() && refused.isOk())
        refused = reader.finish();
      if (!st.ok() || !refused.isOk())
        return fail(std::string(stream ? "a streamed" : "a") + " pull" +
                        (refused.isOk() ? "" : " (" + refused.message() + ")"),
                    st);
      double &pull = stream ? f->streamPull : f->pull;
      pull = std::min(pull, secondsSince(t0));

      // Push, from `local`'s memory.
      t0 = std::chrono::steady_clock::now();
      grpc::ClientContext pctx;
      deadline(&pctx);
      grpc::ByteBuffer pushed;
      pushReq.set_version(reply.version());
      if (region) { // into the region, as PsClient
        std::memcpy(region->data(), local.rawData(), local.byteSize());
        std::memcpy(region->data() + pushReq.values(1).offset(), lr.rawData(),
                    lr.byteSize());
      }
      st = region ? dist::rawCall(raw, &pctx, dist::kPushMethod,
                                  dist::packTensors(pushReq, {}, false), &pushed)
           : stream ? dist::sendStream(raw, &pctx, dist::kPushStreamMethod,
                                     dist::packChunks(pushReq, {&local, &lr},
                                                      chunkBytes),
                                     &pushed)
                  : dist::rawCall(raw, &pctx, dist::kPushMethod,
                                  dist::packTensors(pushReq, {&local, &lr}, false),
                                  &pushed);
      rpc::PushReply pushReply;
      if (!st.ok() || !dist::parseMessage(pushed, &pushReply) ||
          !pushReply.applied())
        return fail(std::string(stream ? "a streamed" : "a") + " push", st);
      double &push = stream ? f->streamPush : f->push;
      push = std::min(push, secondsSince(t0));
    }
  }
  {
    grpc::ClientContext ctx;
    rpc::ShutdownRequest req;
    *req.mutable_caller() = caller;
    rpc::ShutdownReply reply;
    (void)stub->Shutdown(&ctx, req, &reply);
  }
  ps.join();
  std::fclose(quiet);
  region.reset();
  local = Tensor();
  for (int r = 0; r < repeat; ++r) {
    const double t = tcpSeconds(size_t(elements) * 4);
    if (t > 0)
      f->tcp = std::min(f->tcp, t);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  // As dtf-run: large buffers stay on the heap for reuse.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  std::vector<int64_t> sizes = {256, 1024};
  int repeat = 5;
  size_t chunkBytes = dist::kDefaultChunkBytes;
  Wiring wiring;
  auto usage = [] {
    std::fprintf(stderr, "usage: dtf-transfer-bench [--mb 256,1024] "
                         "[--repeat 5] [--chunk-bytes 4194304] [--tls-dir DIR "
                         "[--same-host shm|unix|tcp]] [--fresh-buffers]\n");
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage();
      return 0;
    }
    if (a == "--fresh-buffers") {
      wiring.freshBuffers = true;
      continue;
    }
    if (i + 1 >= argc) {
      usage();
      return 2;
    }
    std::string v = argv[++i];
    char *end = nullptr;
    if (a == "--mb") {
      sizes.clear();
      for (const char *q = v.c_str(); *q;) {
        long mb = std::strtol(q, &end, 10);
        if (end == q || mb <= 0 || mb > 8192 || (*end && *end != ',')) {
          std::fprintf(stderr, "dtf-transfer-bench: --mb expects sizes "
                               "1..8192 separated by commas, got '%s'\n",
                       v.c_str());
          return 2;
        }
        sizes.push_back(mb);
        q = *end ? end + 1 : end;
      }
    } else if (a == "--tls-dir") {
      wiring.tlsDir = v;
    } else if (a == "--same-host") {
      if (v != "shm" && v != "unix" && v != "tcp") {
        std::fprintf(stderr, "dtf-transfer-bench: --same-host expects shm, "
                             "unix or tcp, got '%s'\n", v.c_str());
        return 2;
      }
      wiring.sameHost = v == "tcp" ? dist::SameHost::kTcp : dist::SameHost::kUnix;
      wiring.shm = v == "shm";
    } else if (a == "--repeat" || a == "--chunk-bytes") {
      long long n = std::strtoll(v.c_str(), &end, 10);
      const long long lo = a == "--repeat" ? 1 : 4096;
      const long long hi = a == "--repeat" ? 100 : (1ll << 30);
      if (v.empty() || *end || n < lo || n > hi) {
        std::fprintf(stderr, "dtf-transfer-bench: %s expects %lld..%lld, got '%s'\n",
                     a.c_str(), lo, hi, v.c_str());
        return 2;
      }
      if (a == "--repeat")
        repeat = int(n);
      else
        chunkBytes = size_t(n);
    } else {
      usage();
      return 2;
    }
  }
  std::printf("| tensor | pull, one message | pull, streamed | push, one message "
              "| push, streamed | loopback TCP |\n"
              "| ---: | ---: | ---: | ---: | ---: | ---: |\n");
  std::fflush(stdout);
  for (int64_t mb : sizes) {
    Figures f;
    if (int code = measure(mb, repeat, chunkBytes, wiring, &f))
      return code;
    const double bytes = double(mb) * (1 << 20) / 1e6;
    auto cell = [&](double seconds) {
      if (seconds >= 1e9 && wiring.shm)
        return std::string("n/a (shared memory: no stream)");
      if (seconds >= 1e9)
        return std::string("n/a (2 GiB message limit)");
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.0f MB/s (%.3f s)", bytes / seconds,
                    seconds);
      return std::string(buf);
    };
    std::printf("| %lld MB | %s | %s | %s | %s | %s |\n", (long long)mb,
                cell(f.pull).c_str(), cell(f.streamPull).c_str(),
                cell(f.push).c_str(), cell(f.streamPush).c_str(),
                cell(f.tcp).c_str());
    std::fflush(stdout);
  }
  std::printf("best of %d; chunks of %zu bytes; a push includes the ps "
              "applying sgd to the variable; %s%s\n",
              repeat, chunkBytes,
              wiring.freshBuffers ? "fresh buffers (the old path), " : "",
              wiring.tlsDir.empty() ? "plaintext over TCP"
              : wiring.sameHost == dist::SameHost::kTcp
                  ? "mutual TLS over TCP"
              : wiring.shm ? "over a Unix socket, tensors in shared memory "
                             "(dtf-run's default on one host)"
                           : "over a Unix socket (--same-host unix)");
  return 0;
}
