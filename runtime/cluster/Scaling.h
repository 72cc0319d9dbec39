// Scaling a running job (docs/elastic.md): `dtf-run ctl --cluster FILE
// scale worker=N|ps=N` writes the request beside the cluster file and
// signals the launcher (SIGUSR1), whose pid file is there too.
#pragma once

#include "schema/ClusterSpec.h"

#include <string>

namespace dtf::cluster {

/// Where the launcher of `clusterFile` on this machine writes its pid, and
/// where `dtf-run ctl` puts its request: FILE.launcher, FILE.scale.
std::string launcherPidPath(const std::string &clusterFile);
std::string scaleRequestPath(const std::string &clusterFile);

/// The worker tasks of `cluster` on this machine a scale counts, in the
/// order the launcher starts them: the chief first (it never stops), then
/// the chief and worker jobs' other tasks in cluster order.
std::vector<TaskId> scalableTasks(const ClusterSpec &cluster);

/// A scale request: how many tasks of one job run.
struct ScaleRequest {
  std::string job; // kWorkerJob or kPsJob
  int count = 0;
};

/// "worker=N" (N from 1 to the scalable tasks of `cluster`) or "ps=N" (N
/// from 1 to the ps tasks of `cluster`). A precise error for anything else
/// (other jobs, numbers out of range, bad syntax).
Status parseScaleRequest(const std::string &text, const ClusterSpec &cluster,
                         ScaleRequest *out);

/// Writes the launcher's pid file (0600, this user's: its pid and start
/// time, then one line per ps re-shard it refuses, so that `dtf-run ctl`
/// refuses it at once: "ps: WHY" for every N, "ps=N: WHY" for one) /
/// removes it.
Status writeLauncherPid(const std::string &clusterFile,
                        const std::vector<std::string> &psRefusals = {});
void removeLauncherPid(const std::string &clusterFile);

/// Why the launcher's pid file says `request` is refused ("" when it does
/// not): the lines after its first, as writeLauncherPid wrote them.
std::string refusalFor(const std::vector<std::string> &lines,
                       const ScaleRequest &request);

/// dtf-run ctl: `argv[1]` is "ctl". Returns the exit code.
int runControlCommand(int argc, char **argv);

} // namespace dtf::cluster
