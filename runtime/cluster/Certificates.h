// Certificates: a cluster's own certificate authority and one certificate per
// task, for mutual TLS between the tasks (docs/security.md).
#pragma once

#include "schema/ClusterSpec.h"

#include <string>

namespace dtf::cluster {

/// The files of a TLS directory: ca.pem (the cluster's CA certificate) and,
/// for each task, TASK.pem and TASK.key ("worker.1.pem"), its certificate and
/// private key. `dtf-run certs` also writes ca.key.
inline constexpr const char *kCaCertFile = "ca.pem";
inline constexpr const char *kCaKeyFile = "ca.key";
std::string certFileOf(const TaskId &task); // "worker.1.pem"
std::string keyFileOf(const TaskId &task);  // "worker.1.key"

/// The environment variable that names a task's TLS directory when
/// --tls-dir is not given.
inline constexpr const char *kTlsDirEnv = "DTF_TLS_DIR";

/// Makes a new CA (EC P-256) and, signed by it, a certificate for every task
/// of `cluster` (EC P-256 keys, valid `days` days): its subject CN is the
/// task's name ("worker.1"), which is the identity the other tasks check;
/// its subjectAltNames are the URI dtf://job/worker/task/1, the DNS name
/// "worker.1" (what the other tasks verify when they dial it) and the host
/// of its address (an IP address or a DNS name). Writes them into `dir`
/// (created 0700 when missing; keys 0600); ca.key only when `keepCaKey`.
Status writeClusterCertificates(const ClusterSpec &cluster,
                                const std::string &dir, bool keepCaKey,
                                int days);

} // namespace dtf::cluster
