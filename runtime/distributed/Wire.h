// Tensors on the wire (rpc::WireTensor), the plan's fingerprint, and the
// gRPC settings every task uses.
#pragma once

#include "schema/Status.h"
#include "runtime/core/Tensor.h"

#include "service.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace dtf::dist {

/// The plan's DType number of a runtime dtype.
int planDTypeOf(DType d);

/// Writes `t` into `out` under `name` (one copy of its bytes, into the
/// message that gRPC then serializes).
void toWire(const std::string &name, const Tensor &t, rpc::WireTensor *out);

/// A new tensor holding a wire tensor's bytes; an error naming it when the
/// dtype is unknown or the byte count does not match its dims.
Status fromWire(const rpc::WireTensor &w, Tensor *out);

/// The dtype and dims `w` declares, when they are valid and hold exactly
/// `bytes` bytes (its payload, inline or raw); false otherwise.
bool declaredType(const rpc::WireTensor &w, size_t bytes, DType *dtype,
                  std::vector<int64_t> *dims);

/// Copies a wire tensor into `dst` in place (a variable the executor
/// aliases); its dtype and dims must be dst's.
Status copyFromWire(const rpc::WireTensor &w, Tensor *dst);

/// Copies a wire tensor holding rows [rowOffset, rowOffset + rows) of `dst`
/// (a shard of a partitioned variable) into those rows.
Status copyRowsFromWire(const rpc::WireTensor &w, Tensor *dst,
                        int64_t rowOffset);

/// A view of rows [rowOffset, rowOffset + rows) of `t` (no copy).
Tensor rowsOf(const Tensor &t, int64_t rowOffset, int64_t rows);

/// FNV-1a of the plan's bytes: every task of a job must run the same plan.
uint64_t fingerprint(const std::string &bytes);

/// How this process talks to the other tasks of its job: mutual TLS with
/// the cluster's CA and this task's certificate (the default of dtf-run), or
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
};

/// Sets the transport, once, before any channel or server is made.
void setTransport(Transport transport);
const Transport &transport();

/// Reads this task's TLS material from `dir` (ca.pem, TASK.pem, TASK.key);
/// an error naming the missing file and how to make it.
Status loadTlsMaterial(const std::string &dir, const std::string &task,
                       Transport *out);

/// The credentials a task's server listens with: TLS that requires and
/// verifies a client certificate of the cluster's CA, or plaintext.
std::shared_ptr<grpc::ServerCredentials> serverCredentials();

/// The task that called, as its certificate names it (its subject CN); ""
/// when the transport is plaintext or the peer presented no name.
std::string peerTask(const grpc::ServerContextBase &ctx);

/// Lets in a task of this job only: under TLS the caller's certificate must
/// name one of the tasks (*who gets its name); a refusal says nothing about
/// the job. With --insecure anyone is let in and *who is "".
grpc::Status admitTask(const grpc::ServerContextBase &ctx, std::string *who);

/// Lets in only the task `allowed` (the chief, say): a task of the job that
/// is not is told so by `self` ("worker.1: only worker.0 may run a tower").
grpc::Status admitOnly(const grpc::ServerContextBase &ctx,
                       const std::string &allowed, const std::string &self,
                       const std::string &what);

/// Adds the listening port of a task whose cluster address is `address`
/// (or --bind's) with serverCredentials(), and the settings every server
/// of dtf shares; *port gets the bound port after BuildAndStart.
void addListeningPort(grpc::ServerBuilder *builder, const std::string &address,
                      int *port);

/// A channel to `address` with no message size limit (variables can be
/// large) and quick reconnects, with this task's credentials.
std::shared_ptr<grpc::Channel> makeChannel(const std::string &address);

/// The gRPC status as "UNAVAILABLE: failed to connect to all addresses".
std::string describe(const grpc::Status &status);

/// A context whose deadline is `timeout` from now.
void setDeadline(grpc::ClientContext *ctx, std::chrono::milliseconds timeout);

/// The listening address for a task's "host:port": --bind's when given,
/// else that very address (the interface its host resolves to), never every
/// interface.
std::string listenAddress(const std::string &address);

} // namespace dtf::dist
