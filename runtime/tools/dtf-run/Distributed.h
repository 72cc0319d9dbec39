// dtf-run as one task of a ps/worker cluster (--job/--task or TF_CONFIG).
#pragma once

#include "runtime/cluster/RunMode.h"
#include "runtime/train/Trainer.h"

#include "plan.pb.h"

#include <atomic>
#include <string>

namespace dtfrun {

struct DistributedFlags {
  double connectTimeoutSeconds = 15;
  double syncTimeoutSeconds = 120;
  double stallTimeoutSeconds = 30;     // --stall-timeout
  size_t chunkBytes = size_t(4) << 20; // --chunk-bytes
  std::string tlsDir;                  // --tls-dir (else $DTF_TLS_DIR)
  bool insecure = false;               // --insecure: plaintext, no identity
  std::string bind;                    // --bind HOST:PORT
};

/// dtf-run certs --cluster FILE --out DIR [--days N]: a new CA and a
/// certificate per task of the cluster (docs/security.md).
int runCertsCommand(int argc, char **argv);

/// Runs the task `choice.task` of `choice.cluster` and returns the exit code.
int runTask(const std::string &planPath, const dtf::plan::Plan &plan,
            const dtf::cluster::RunChoice &choice,
            const dtf::train::TrainOptions &options,
            const DistributedFlags &flags, const std::atomic<bool> *stop);

} // namespace dtfrun
