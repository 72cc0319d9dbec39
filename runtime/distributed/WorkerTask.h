// A worker task: trains with the plan's worker_step, pulling variables from
// the ps tasks before each step and pushing the updates' operands after it
// (between-graph replication, async or sync), or, in in-graph replication,
// either drives the towers (the chief, the client) or serves one.
#pragma once

#include "runtime/distributed/Cluster.h"
#include "schema/Placement.h"
#include "runtime/train/Trainer.h"

#include "plan.pb.h"

namespace dtf::dist {

/// Runs worker `replica` of config.roster.workers (0 is the chief) and
/// returns the process's exit status.
int runWorker(const plan::Plan &plan, const plan::Placement &placement,
              int replica, const train::TrainOptions &base,
              const TaskConfig &config);

} // namespace dtf::dist
