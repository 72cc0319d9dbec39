// Launch: dtf-run's launcher mode (--cluster without --job), kept apart from
// main so that the ps/worker runtime and the launcher evolve separately.
#pragma once

#include "plan.pb.h"
#include "runtime/cluster/RunMode.h"

namespace dtf::task {

struct TaskRequest;

/// Starts and supervises the local tasks of choice.cluster, each running
/// this dtf-run with the user's arguments (argv minus --cluster, --job,
/// --task and --max-restarts) plus --cluster FILE --job J --task I. Returns
/// dtf-run's exit code: 0, 130 after Ctrl-C, 2 for a usage error, else the
/// code of the task that ended the job. `request` and `plan` (read and
/// checked) say which ps re-shards the job can take (docs/elastic.md).
int runLauncherMode(const TaskRequest &request, const plan::Plan &plan,
                    int argc, char **argv);

} // namespace dtf::task
