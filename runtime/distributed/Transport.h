// Transport: how a task talks to the other tasks of its job (mutual TLS or
// plaintext, who may call, where it listens). An object handed to whoever
// makes channels and servers (TaskConfig::transport), not process state.
#pragma once

#include "schema/Status.h"

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <string>

namespace dtf::dist {

/// How this task talks to the other tasks of its job: mutual TLS with the
/// cluster's CA and this task's certificate (the default of dtf-run), or
/// plaintext (--insecure, and tests that set nothing).
struct Transport {
  bool tls = false;
  std::string caPem, certPem, keyPem;
  /// Every task of the job by address ("127.0.0.1:2222" -> "ps.0"): a
  /// channel to an address verifies that the server's certificate names
  /// that task.
  std::map<std::string, std::string> taskAt;
  /// Where this task listens instead of its cluster address (--bind).
  std::string bind;

  /// The credentials a task's server listens with: TLS that requires and
  /// verifies a client certificate of the cluster's CA, or plaintext.
  std::shared_ptr<grpc::ServerCredentials> serverCredentials() const;

  /// The task that called, as its certificate names it (its subject CN);
  /// "" when the transport is plaintext or the peer presented no name.
  std::string peerTask(const grpc::ServerContextBase &ctx) const;

  /// Lets in a task of this job only: under TLS the caller's certificate
  /// must name one of the tasks (*who gets its name); a refusal says
  /// nothing about the job. With --insecure anyone is let in and *who is "".
  grpc::Status admitTask(const grpc::ServerContextBase &ctx,
                         std::string *who) const;

  /// Lets in only the task `allowed` (the chief, say): a task of the job
  /// that is not is told so by `self` ("worker.1: only worker.0 may run a
  /// tower").
  grpc::Status admitOnly(const grpc::ServerContextBase &ctx,
                         const std::string &allowed, const std::string &self,
                         const std::string &what) const;

  /// Adds the listening port of a task whose cluster address is `address`
  /// (or --bind's) with serverCredentials(), and the settings every server
  /// of dtf shares; *port gets the bound port after BuildAndStart.
  void addListeningPort(grpc::ServerBuilder *builder,
                        const std::string &address, int *port) const;

  /// A channel to `address` with no message size limit (variables can be
  /// large) and quick reconnects, with this task's credentials.
  std::shared_ptr<grpc::Channel> channel(const std::string &address) const;

  /// The listening address for a task's "host:port": --bind's when given,
  /// else that very address (the interface its host resolves to), never
  /// every interface.
  std::string listenAddress(const std::string &address) const;
};

/// Reads this task's TLS material from `dir` (ca.pem, TASK.pem, TASK.key);
/// an error naming the missing file and how to make it.
Status loadTlsMaterial(const std::string &dir, const std::string &task,
                       Transport *out);

} // namespace dtf::dist
