// What every worker-side mode shares: the links to the ps tasks, the
// connection wait, RPC deadlines, and how a failed call becomes a Status.
#pragma once

#include "runtime/distributed/Cluster.h"
#include "runtime/distributed/SharedRegion.h"
#include "runtime/distributed/TensorMessage.h"
#include "runtime/distributed/Wire.h"
#include "schema/Placement.h"

#include "service.grpc.pb.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dtf::dist {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

inline double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// An RPC deadline for calls that do not wait on purpose.
constexpr milliseconds kCallTimeout{30000};

// A transfer's deadline: the ordinary one plus a second per 20 MB, so that
// a gigabyte on a slow link is not cut off but a stuck call still ends.
milliseconds transferTimeout(uint64_t bytes);

/// One ps task as a worker sees it: the calls to it, and what it holds.
struct PsLink {
  TaskRef task;
  std::unique_ptr<rpc::ParameterServer::Stub> stub;
  std::unique_ptr<grpc::GenericStub> raw; // Pull and Push: tensors as bytes
  std::shared_ptr<grpc::Channel> channel;
  std::vector<plan::HeldTensor> pull;     // pulled from it each step
  std::vector<plan::HeldTensor> evalPull; // and before an evaluation
  std::vector<plan::Transfer> keys;       // the sends it takes
  bool servesLookups = false;             // holds rows a dtf.ps_gather reads
  // On this host (Transport::sharedMemoryTo): the shared-memory regions of
  // the pulls and pushes to it; null: their bytes go through the socket.
  std::shared_ptr<RegionPool> regions;
  int64_t pulledVersion = 0;
  int64_t pushedAt = -1;    // sync: the version the last accepted push was for
  int64_t incarnation = -1; // of the ps state the pulled values belong to

  /// A new channel (and stubs) to the ps: gRPC 1.51's TLS channel to a ps
  /// that was killed and restarted kept failing its connection attempts
  /// ("tcp handshaker shutdown") while a new channel connected at once.
  void connectAgain(const Transport &transport) {
    channel = transport.channel(task.address);
    stub = rpc::ParameterServer::NewStub(channel);
    raw = std::make_unique<grpc::GenericStub>(channel);
  }
};

/// This task's name and configuration, and the wait for its peers.
class Links {
public:
  Links(const TaskConfig &config, std::string self)
      : config_(config), self_(std::move(self)) {}

  rpc::Caller caller() const {
    rpc::Caller c;
    c.set_task(self_);
    c.set_plan_fingerprint(config_.planFingerprint);
    return c;
  }
  const std::string &self() const { return self_; }
  const TaskConfig &config() const { return config_; }

  void say(const std::string &line) const {
    // Under the launcher every line already carries the task's name.
    std::fprintf(config_.out, "%s\n", line.c_str());
    std::fflush(config_.out);
  }

  /// Waits until every task in `tasks` accepts a connection; an error naming
  /// the first that does not within the connect timeout.
  Status connect(const std::vector<std::shared_ptr<grpc::Channel>> &channels,
                 const std::vector<TaskRef> &tasks) const;
  /// The same for peers that each have a `channel` and a `task` (those
  /// without a channel, such as this task itself, are skipped).
  template <typename Peers> Status connectPeers(const Peers &peers) const {
    std::vector<std::shared_ptr<grpc::Channel>> channels;
    std::vector<TaskRef> tasks;
    for (const auto &p : peers)
      if (p.channel) {
        channels.push_back(p.channel);
        tasks.push_back(p.task);
      }
    return connect(channels, tasks);
  }

private:
  const TaskConfig &config_;
  std::string self_;
};

/// A failed call to `task` as a Status: its own message when the task
/// refused it, "TASK cut ..." when its gRPC cut the call to stay within
/// its memory bound, else "lost TASK at ADDRESS".
Status rpcError(const std::string &what, const TaskRef &task,
                const grpc::Status &status);

/// True for a call the peer's gRPC cut to stay within its memory bound.
bool cutForMemory(const grpc::Status &status);
/// What rpcError says of such a call (and the recovery looks for).
inline constexpr const char *kCutForMemory =
    " to stay within the memory it gives messages on their way in";

// A lost or restarted ps: worth waiting for (the launcher restarts it and
// the chief restores the last checkpoint), not a reason to stop; so is a
// call a ps cut for memory (the ps is up: the recovery finds it at once).
bool recoverable(const grpc::Status &status);

/// Prints `s` as this task's error and returns the exit code `code`.
int fail(const std::string &self, const Status &s, int code);

/// Starts a worker's Worker service (a stage's, or an in-graph tower's) on
/// its address.
Status serveWorker(grpc::Service &service, const TaskRef &task,
                   const Transport &transport,
                   std::unique_ptr<grpc::Server> *out);

} // namespace dtf::dist
