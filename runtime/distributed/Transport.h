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

/// How tasks whose cluster addresses are on this host (a loopback address)
/// talk under TLS: over a Unix domain socket in a directory only this user
/// may enter (the kernel refuses anyone else's connect), each call naming
/// its task and the job's CA (kUnix, the default: no encryption on the same
/// host); or TLS over TCP, as between hosts (kTcp, --same-host tcp).
enum class SameHost { kUnix, kTcp };

/// A server's listening ports after BuildAndStart: the TCP port (0: not
/// bound) and, when one was asked for, the Unix socket's (0: not bound).
struct Listening {
  int port = 0;
  int unixPort = -1;
  std::string unixPath;
  bool ok() const { return port != 0 && unixPort != 0; }
};

/// How this task talks to the other tasks of its job: mutual TLS with the
/// cluster's CA and this task's certificate (the default of dtf-run), or
/// plaintext (--insecure, and tests that set nothing).
struct Transport {
  bool tls = false;
  std::string caPem, certPem, keyPem;
  /// This task's name ("worker.1"), the one its certificate holds.
  std::string self;
  SameHost sameHost = SameHost::kUnix;
  /// The directory of the Unix sockets; "" means $DTF_SOCKET_DIR, else
  /// /tmp/dtf-UID.
  std::string socketDir;
  /// Every task of the job by address ("127.0.0.1:2222" -> "ps.0"): a
  /// channel to an address verifies that the server's certificate names
  /// that task.
  std::map<std::string, std::string> taskAt;
  /// Where this task listens instead of its cluster address (--bind).
  std::string bind;
  /// Between tasks that talk over a Unix socket, tensor bytes go through
  /// shared memory (SharedRegion.h; --same-host shm, the default); false:
  /// through the socket (--same-host unix).
  bool sharedMemory = true;
  /// The directory of the shared-memory regions; "" means $DTF_SHM_DIR,
  /// else /dev/shm/dtf-UID (tmpfs: a region in a directory on disk would
  /// be written back to it).
  std::string shmDir;

  /// The credentials a task's server listens with: TLS that requires and
  /// verifies a client certificate of the cluster's CA, or plaintext.
  std::shared_ptr<grpc::ServerCredentials> serverCredentials() const;

  /// The task that called, as its certificate names it (its subject CN), or
  /// over a Unix socket as its calls do (checked against the job's tasks
  /// and CA before any call is served); "" when the transport is plaintext
  /// or the peer presented no name.
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
  /// of dtf shares; *port gets the bound port after BuildAndStart. Under
  /// overUnix(address) also its Unix socket: an error when the socket
  /// directory is not this user's alone, or another live task listens on
  /// the socket.
  Status addListeningPort(grpc::ServerBuilder *builder,
                          const std::string &address, Listening *ports) const;

  /// A channel to `address` with no message size limit (variables can be
  /// large) and quick reconnects, with this task's credentials (over its
  /// Unix socket when overUnix(address)).
  std::shared_ptr<grpc::Channel> channel(const std::string &address) const;

  /// Whether calls to the task at `address` go over a Unix socket: TLS,
  /// --same-host unix, and a loopback host (127.0.0.0/8, localhost, ::1).
  bool overUnix(const std::string &address) const;
  /// The Unix socket of the task at `address`: DIR/HOST_PORT.sock.
  std::string socketPath(const std::string &address) const;
  /// The socket directory (see socketDir).
  std::string socketDirectory() const;
  /// Makes the socket directory (mode 0700) or checks it is a directory of
  /// this user that no one else may enter; an error saying what is wrong.
  Status checkSocketDirectory() const;
  /// Whether calls to the task at `address` carry their tensors through
  /// shared memory: overUnix(address) and sharedMemory.
  bool sharedMemoryTo(const std::string &address) const {
    return sharedMemory && overUnix(address);
  }
  /// The region directory (see shmDir).
  std::string regionDirectory() const;
  /// Makes the region directory (mode 0700) or checks it is this user's
  /// alone, as checkSocketDirectory does the socket directory.
  Status checkRegionDirectory() const;
  /// Whether any task of the job is reached over a Unix socket.
  bool anyOverUnix() const;
  /// What every call over a Unix socket shows besides its task's name: a
  /// fingerprint of the job's CA certificate (each job has its own CA).
  std::string jobToken() const;

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
