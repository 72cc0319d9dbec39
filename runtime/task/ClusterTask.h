// One task of a ps/worker cluster (--job/--task or TF_CONFIG): its roster,
// placement and transport, then the ps or worker loop.
#pragma once

#include "runtime/cluster/RunMode.h"
#include "runtime/distributed/PushCompression.h"
#include "runtime/train/Trainer.h"

#include "plan.pb.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace dtf::task {

struct ClusterTaskOptions {
  double connectTimeoutSeconds = 15;
  double syncTimeoutSeconds = 120;
  double stallTimeoutSeconds = 30;     // --stall-timeout
  size_t chunkBytes = size_t(4) << 20; // --chunk-bytes
  std::string tlsDir;                  // --tls-dir (else $DTF_TLS_DIR)
  bool insecure = false;               // --insecure: plaintext, no identity
  std::string bind;                    // --bind HOST:PORT
  bool wireBf16 = false;               // --wire bf16
  bool overlapPush = false;            // --overlap-push
  bool prefetchPull = false;           // --prefetch-pull
  dtf::dist::PushCompression compressPush; // --compress-push
  bool sameHostTcp = false;            // --same-host tcp (else unix)
  bool sharedMemory = true;            // --same-host shm (unix: sockets only)
  bool exactlyOnce = false;            // --data exactly-once
  int splitBatches = 4;                // --split-batches
  double leaseTimeoutSeconds = 60;     // --lease-timeout
  int startWorkers = 0;                // --workers
  int psReplicas = 1;                  // --ps-replicas
};

/// Runs the task `choice.task` of `choice.cluster` and returns the exit code.
/// `planFingerprint` is dist::fingerprint of the plan file's bytes, which
/// every task of the job compares.
int runClusterTask(const std::string &planPath, const dtf::plan::Plan &plan,
                   uint64_t planFingerprint,
                   const dtf::cluster::RunChoice &choice,
                   const dtf::train::TrainOptions &options,
                   const ClusterTaskOptions &flags,
                   const std::atomic<bool> *stop,
                   const std::atomic<bool> *leave = nullptr);

/// The exit code `code` as the task's process returns it: under a TF_CONFIG
/// whose environment is "cloud" (Kubeflow), the cluster failure 6 becomes
/// 166, a code that Kubernetes' `restartPolicy: ExitCode` retries; every
/// other code is kept.
int cloudExitCode(const dtf::cluster::RunChoice &choice, int code);

/// Waits until every host name in `tasks` resolves (pods start in any
/// order, and a peer's DNS name appears only once its pod runs), retrying
/// with backoff up to `timeoutSeconds` and naming the task and the name
/// while it waits. Numeric addresses pass at once. An error naming the
/// first name that never resolved.
dtf::Status waitForNames(const std::vector<std::pair<std::string, std::string>>
                             &tasks, // (name, host:port)
                         double timeoutSeconds, const std::atomic<bool> *stop,
                         std::FILE *out);

} // namespace dtf::task
