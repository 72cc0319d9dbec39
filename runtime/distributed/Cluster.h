// The tasks of a running job as the distributed runtime sees them: the ps
// addresses and the workers (the chief first), with the names messages use.
#pragma once

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/distributed/PushCompression.h"
#include "runtime/distributed/Transport.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace dtf::dist {

struct TaskRef {
  std::string name;    // "ps.0", "chief.0", "worker.1"
  std::string address; // "127.0.0.1:2222"
};

/// Workers in replica order: the chief (chief.0, or worker.0 when the
/// cluster has no chief job) is replica 0.
struct Roster {
  std::vector<TaskRef> ps;
  std::vector<TaskRef> workers;
};

/// The ring of --ps-replicas 2: ps `index` of `numPs` mirrors its shard on
/// the next ps, and holds the replica of the previous one's.
inline int mirrorOf(int index, int numPs) { return (index + 1) % numPs; }
inline int mirroredBy(int index, int numPs) {
  return (index + numPs - 1) % numPs;
}

/// What every task of a job shares.
struct TaskConfig {
  Roster roster;
  std::string planPath;
  uint64_t planFingerprint = 0;
  std::string modelDir;
  /// Which checkpoint of modelDir the chief restores onto the ps tasks
  /// (dtf-run --restore): the newest, refused when damaged, or the newest
  /// whole one.
  checkpoint::RestorePolicy restore = checkpoint::RestorePolicy::kLatest;
  /// How long to wait for another task to answer before naming it and
  /// giving up (dtf-run --connect-timeout).
  double connectTimeoutSeconds = 15;
  /// How long a sync-mode worker waits for the other replicas' gradients
  /// before it names them and gives up (dtf-run --sync-timeout).
  double syncTimeoutSeconds = 120;
  /// Transfers larger than this go in a stream of chunks of this size
  /// (dtf-run --chunk-bytes; the default is kDefaultChunkBytes, 4 MiB).
  size_t chunkBytes = size_t(4) << 20;
  /// A stream that moves no chunk for this long is cut by the ps
  /// (dtf-run --stall-timeout).
  double stallTimeoutSeconds = 30;
  /// The ps keeps the buffers of pull snapshots and pushed values for the
  /// next transfers (TransferBuffers); false frees each (dtf-transfer-bench
  /// --fresh-buffers measures the difference).
  bool reuseTransferBuffers = true;
  /// Pulls and pushes carry f32 values as bfloat16 (dtf-run --wire bf16);
  /// the ps keeps and updates its f32 variables.
  bool wireBf16 = false;
  /// Async: each step's push and the next step's pull at once (dtf-run
  /// --overlap-push; staleness at most 1).
  bool overlapPush = false;
  /// Async: each step's pull for the next step runs beside the step's
  /// compute and push (dtf-run --prefetch-pull; staleness at most 1).
  bool prefetchPull = false;
  /// Exactly-once data (dtf-run --data exactly-once, docs/elastic.md):
  /// workers lease splits of `splitBatches` batches from ps 0's ledger
  /// instead of reading a static shard; a lease not renewed (by a push or
  /// a lease) for `leaseTimeoutSeconds` goes to another worker.
  bool exactlyOnce = false;
  int splitBatches = 4;
  double leaseTimeoutSeconds = 60;
  /// The job starts with the first `startWorkers` workers of the roster
  /// (dtf-run --workers, which the launcher passes on); 0: all of them.
  /// The ps tasks count them live from the start (docs/elastic.md).
  int startWorkers = 0;
  /// 2: every ps keeps a replica of its shard on the next ps of the ring,
  /// updated with each update it applies, so that a lost ps is restored
  /// from it instead of every ps from the last checkpoint (dtf-run
  /// --ps-replicas, docs/elastic.md); 1: none.
  int psReplicas = 1;
  /// Dense f32 gradients pushed top-k or 1-bit with error feedback
  /// (dtf-run --compress-push); the ps decodes them.
  PushCompression compressPush;
  /// TLS or plaintext, who may call, where to listen: every channel and
  /// server of the task is made through it.
  Transport transport;
  const std::atomic<bool> *stop = nullptr;
  /// Set with `stop` when the worker is asked to leave the job (SIGUSR1,
  /// the launcher's scale-down): it tells the ps tasks and exits 0.
  const std::atomic<bool> *leave = nullptr;
  std::FILE *out = stdout;
};

} // namespace dtf::dist
