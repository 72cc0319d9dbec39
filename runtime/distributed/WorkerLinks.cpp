// What every worker-side mode shares: the connection wait, how a failed call
// becomes a Status, and starting a worker's own service.
#include "runtime/distributed/WorkerLinks.h"

#include <algorithm>
#include <cstdio>

namespace dtf::dist {

milliseconds transferTimeout(uint64_t bytes) {
  return kCallTimeout + milliseconds(int64_t(bytes / 20000));
}

Status
Links::connect(const std::vector<std::shared_ptr<grpc::Channel>> &channels,
               const std::vector<TaskRef> &tasks) const {
  const auto deadline =
      std::chrono::system_clock::now() +
      milliseconds(int64_t(config_.connectTimeoutSeconds * 1000));
  for (size_t i = 0; i < channels.size(); ++i) {
    bool said = false;
    while (!channels[i]->WaitForConnected(std::min(
        deadline, std::chrono::system_clock::now() + milliseconds(2000)))) {
      if (config_.stop && config_.stop->load())
        return errorStatus("interrupted");
      if (std::chrono::system_clock::now() >= deadline)
        return errorStatus(
            "cannot reach ", tasks[i].name, " at ", tasks[i].address,
            " (no answer within ", config_.connectTimeoutSeconds,
            " s): is it running, and is the address in the cluster file "
            "right? (--connect-timeout sets the wait)");
      if (!said)
        say("waiting for " + tasks[i].name + " at " + tasks[i].address);
      said = true;
    }
  }
  return Status::ok();
}
// A call the peer's gRPC cut to stay within its memory bound (gRPC turns
// its RST_STREAM ENHANCE_YOUR_CALM into RESOURCE_EXHAUSTED): it may hit any
// call in flight while a larger message comes in, and the peer lives on.
bool cutForMemory(const grpc::Status &status) {
  return status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
         status.error_message().find("RST_STREAM with error code 11") !=
             std::string::npos;
}

Status rpcError(const std::string &what, const TaskRef &task,
                const grpc::Status &status) {
  if (cutForMemory(status))
    return errorStatus(task.name, " cut ", what, kCutForMemory, " (",
                       describe(status), "); it is dropped");
  if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
      status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
      status.error_code() == grpc::StatusCode::INTERNAL)
    return errorStatus(what, " on ", task.name,
                       " failed: ", status.error_message());
  return errorStatus("lost ", task.name, " at ", task.address, " (", what,
                     " failed: ", describe(status), ")");
}

// A lost or restarted ps: worth waiting for (the launcher restarts it and
// the chief restores the last checkpoint), not a reason to stop.
bool recoverable(const grpc::Status &status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         cutForMemory(status) ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         status.error_code() == grpc::StatusCode::CANCELLED ||
         (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION &&
          status.error_message().find("not initialized") != std::string::npos);
}

int fail(const std::string &self, const Status &s, int code) {
  std::fflush(stdout);
  std::fprintf(stderr, "dtf-run: error: %s: %s\n", self.c_str(),
               s.message().c_str());
  return code;
}

Status serveWorker(grpc::Service &service, const TaskRef &task,
                   const Transport &transport,
                   std::unique_ptr<grpc::Server> *out) {
  grpc::ServerBuilder builder;
  Listening ports;
  if (Status s = transport.addListeningPort(&builder, task.address, &ports);
      !s.isOk())
    return s;
  builder.RegisterService(&service);
  *out = builder.BuildAndStart();
  if (!*out || ports.port == 0)
    return errorStatus("cannot listen on ",
                       transport.listenAddress(task.address),
                       " (is the port in use by another process, or is the "
                       "address not one of this machine's?)");
  if (ports.unixPort == 0)
    return errorStatus("cannot listen on the Unix socket ", ports.unixPath);
  return Status::ok();
}

/// The other stages of this task's replica, and the rendezvous the
/// executor's dtf.send and dtf.recv ops use: a send is a Transfer call to
} // namespace dtf::dist
