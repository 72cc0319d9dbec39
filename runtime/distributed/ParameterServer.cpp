// A parameter-server task: serves PsService on its address until the chief
// shuts it down.
#include "runtime/distributed/ParameterServer.h"

#include "runtime/distributed/PsService.h"

namespace dtf::dist {

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
      "; holds " + (held.empty() ? std::string("no variables") : held));
  std::string reason = service.waitForShutdown();
  service.stopParking();
  service.log(service.summary());
  service.log("shutting down (" + reason + ")");
  server->Shutdown(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(500));
  return reason == "interrupted" ? 130 : 0;
}

} // namespace dtf::dist
