// Scaling a running job (docs/elastic.md): `dtf-run ctl --cluster FILE
// scale worker=N` writes the request beside the cluster file and signals the
// launcher (SIGUSR1), whose pid file is there too.
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

/// "worker=N": N from 1 to the scalable tasks of `cluster`. A precise error
/// for anything else (other jobs, numbers out of range, bad syntax).
Status parseScaleRequest(const std::string &text, const ClusterSpec &cluster,
                         int *workers);

/// Writes the launcher's pid file (0600, this user's: its pid and start
/// time) / removes it.
Status writeLauncherPid(const std::string &clusterFile);
void removeLauncherPid(const std::string &clusterFile);

/// dtf-run ctl: `argv[1]` is "ctl". Returns the exit code.
int runControlCommand(int argc, char **argv);

} // namespace dtf::cluster
