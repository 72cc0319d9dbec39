// A parameter-server task: serves PsService on its address until the chief
// shuts it down.
#include "runtime/distributed/ParameterServer.h"

#include "runtime/distributed/PsService.h"
#include "runtime/distributed/TensorMessage.h"

#include <algorithm>
#include <climits>
#include <grpcpp/resource_quota.h>

namespace dtf::dist {

size_t maxPsMessageBytes(const plan::Plan &plan,
                         const plan::Placement &placement, int index,
                         size_t chunkBytes) {
  // Pulls, pushes and initial values over chunkBytes come in chunks of it;
  // a lookup names each row of a held table at most once.
  size_t largest = chunkBytes;
  for (const plan::HeldTensor &h : plan::heldBy(plan, placement, index))
    largest = std::max(largest, size_t(std::max<int64_t>(h.rows, 1)) *
                                    sizeof(int64_t));
  return largest + kMaxHeaderBytes + (size_t(64) << 10);
}

size_t psMemoryBoundBytes(size_t maxMessage, size_t tasks) {
  return std::max(size_t(64) << 20, 4 * maxMessage * std::max<size_t>(tasks, 1));
}

std::string psReplicasRefusal(const plan::Plan &plan, int replicas,
                              size_t numPs, bool exactlyOnce) {
  if (replicas < 2)
    return "";
  const plan::Training &t = plan.training();
  const std::string flag = "--ps-replicas " + std::to_string(replicas);
  if (numPs < 2)
    return flag +
           " keeps a replica of each ps's shard on another ps task, "
           "and this job runs over " +
           std::to_string(numPs) +
           " ps task; give it 2 or more (the cluster file's ps tasks, or "
           "--ps N) or leave the flag out";
  if (t.replication() == "in_graph" || plan::replicaSpan(plan) > 1)
    return flag +
           " needs between-graph replication with replicas of one "
           "task each (" +
           std::string(t.replication() == "in_graph"
                           ? "an in-graph job's client"
                           : "a model-parallel replica's stage 0") +
           " recovers a lost ps its own way: not built); leave the flag out";
  if (exactlyOnce)
    return flag + " does not replicate ps 0's split ledger (--data "
                  "exactly-once); use one of the two";
  for (const plan::Variable &v : plan.variables())
    if (v.dynamic().enabled())
      return flag + " does not replicate dynamic tables (the variable '" +
             v.name() +
             "' is one: its rows are made by lookups, which "
             "are not forwarded); leave the flag out";
  return "";
}

int runParameterServer(const plan::Plan &plan, const plan::Placement &placement,
                       int index, const TaskConfig &config) {
  ps::PsService service(plan, placement, index, config);
  Status s = service.setUp();
  if (!s.isOk()) {
    std::fprintf(stderr, "dtf-run: error: %s: %s\n",
                 config.roster.ps[index].name.c_str(), s.message().c_str());
    return 4;
  }
  const std::string &address = config.roster.ps[index].address;
  grpc::ServerBuilder builder;
  Listening ports;
  if (Status u = config.transport.addListeningPort(&builder, address, &ports);
      !u.isOk()) {
    std::fprintf(stderr, "dtf-run: error: %s: %s\n",
                 config.roster.ps[index].name.c_str(), u.message().c_str());
    return 4;
  }
  // gRPC refuses a larger message with its real size; but gRPC 1.51 (Debian
  // 12's) does so only once it holds the whole message, so the memory it
  // may hold is bounded apart: past the bound it cuts streams until it is
  // under it again, and a message larger than the bound is cut on its way
  // in (docs/security.md, "Messages and memory").
  const size_t maxMessage =
      maxPsMessageBytes(plan, placement, index, config.chunkBytes);
  builder.SetMaxReceiveMessageSize(int(std::min<size_t>(maxMessage, INT_MAX)));
  const size_t memoryBound = psMemoryBoundBytes(
      maxMessage, config.roster.ps.size() + config.roster.workers.size());
  grpc::ResourceQuota quota(config.roster.ps[index].name + " messages");
  quota.Resize(memoryBound);
  builder.SetResourceQuota(quota);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server && ports.port != 0 && ports.unixPort == 0) {
    std::fprintf(stderr,
                 "dtf-run: error: %s cannot listen on the Unix socket %s\n",
                 config.roster.ps[index].name.c_str(), ports.unixPath.c_str());
    return 4;
  }
  if (!server || ports.port == 0) {
    std::fprintf(stderr,
                 "dtf-run: error: %s cannot listen on %s (is the port in use "
                 "by another process, or is the address not one of this "
                 "machine's?)\n",
                 config.roster.ps[index].name.c_str(),
                 config.transport.listenAddress(address).c_str());
    return 4;
  }
  std::string held;
  for (const plan::HeldTensor &h : plan::heldBy(plan, placement, index))
    held += (held.empty() ? "" : ", ") + h.name;
  service.log(
      "serving on " + config.transport.listenAddress(address) +
      (config.transport.tls ? " (mutual TLS)" : " (plaintext, --insecure)") +
      (ports.unixPath.empty()
           ? std::string()
           : " and on " + ports.unixPath + " for the tasks on this host") +
      "; holds " + (held.empty() ? std::string("no variables") : held) +
      "; takes messages of up to " + std::to_string(maxMessage) +
      " bytes and holds at most " + std::to_string(memoryBound) +
      " bytes of them at once");
  std::string reason = service.waitForShutdown();
  service.stopParking();
  service.log(service.summary());
  if (std::string shm = service.regionSummary(); !shm.empty())
    service.log(shm);
  service.log("shutting down (" + reason + ")");
  server->Shutdown(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(500));
  return reason == "interrupted" ? 130 : 0;
}

} // namespace dtf::dist
