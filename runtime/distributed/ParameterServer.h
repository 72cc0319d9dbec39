// A parameter-server task: holds its shard of the variables, answers pulls,
// applies pushed updates (at once in async mode; averaged over
// replicas_to_aggregate fresh gradients in sync mode), and stops when the
// chief says the job is done.
#pragma once

#include "schema/Status.h"
#include "runtime/distributed/Cluster.h"
#include "schema/Placement.h"

#include "plan.pb.h"

#include <cstddef>
#include <string>

namespace dtf::dist {

/// The largest message ps task `index` takes (gRPC refuses a larger one,
/// with its size): a chunk (`chunkBytes`, the
/// job's --chunk-bytes: larger transfers stream in chunks of it) or the ids
/// of a lookup of its largest table (each row at most once), whichever is
/// larger, plus a tensor header and framing.
size_t maxPsMessageBytes(const plan::Plan &plan,
                         const plan::Placement &placement, int index,
                         size_t chunkBytes);

/// The memory gRPC may hold for ps task `index` in messages on their way in
/// (a gRPC ResourceQuota): four of the largest message per task of the job,
/// at least 64 MiB. gRPC 1.51 reads a whole message before it checks its
/// size; past this bound it cuts streams (RST_STREAM ENHANCE_YOUR_CALM)
/// until it is back under it, so a message larger than the bound never
/// gets in whole.
size_t psMemoryBoundBytes(size_t maxMessage, size_t tasks);

/// Why a job cannot take --ps-replicas `replicas` over `numPs` ps tasks
/// (a sentence with the fix), or "" when it can: every ps mirrors its shard
/// on the next one, for between-graph jobs without dynamic tables or
/// exactly-once data (docs/elastic.md, "A replica of each ps's shard").
std::string psReplicasRefusal(const plan::Plan &plan, int replicas,
                              size_t numPs, bool exactlyOnce);

/// Runs ps task `index` until the chief shuts it down, the stop flag is set
/// or serving fails. Returns the process's exit status: 0 after a shutdown.
int runParameterServer(const plan::Plan &plan, const plan::Placement &placement,
                       int index, const TaskConfig &config);

} // namespace dtf::dist
