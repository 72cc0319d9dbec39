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

namespace dtf::dist {

/// The largest message ps task `index` takes (gRPC refuses a larger one,
/// with its size): a chunk (`chunkBytes`, the
/// job's --chunk-bytes: larger transfers stream in chunks of it) or the ids
/// of a lookup of its largest table (each row at most once), whichever is
/// larger, plus a tensor header and framing.
size_t maxPsMessageBytes(const plan::Plan &plan,
                         const plan::Placement &placement, int index,
                         size_t chunkBytes);

/// Runs ps task `index` until the chief shuts it down, the stop flag is set
/// or serving fails. Returns the process's exit status: 0 after a shutdown.
int runParameterServer(const plan::Plan &plan, const plan::Placement &placement,
                       int index, const TaskConfig &config);

} // namespace dtf::dist
