// Launch: dtf-run's launcher mode, between main's options and runLauncher.
#include "runtime/tools/dtf-run/Launch.h"

#include "runtime/cluster/Launcher.h"

#include <climits>
#include <cstdio>
#include <unistd.h>

namespace dtf::run {

int runLauncherMode(const cluster::RunChoice &choice, int argc, char **argv) {
  cluster::LaunchOptions options;
  Status s = cluster::parseLauncherArguments(
      std::vector<std::string>(argv + 1, argv + argc), &options);
  if (!s.isOk()) {
    std::fprintf(stderr, "dtf-run: error: %s\n", s.message().c_str());
    return cluster::kLauncherUsageError;
  }
  // The tasks run this very binary, wherever argv[0] pointed.
  char self[PATH_MAX + 1] = {};
  ssize_t n = readlink("/proc/self/exe", self, PATH_MAX);
  options.program = n > 0 ? std::string(self, size_t(n)) : argv[0];
  options.clusterFile = choice.clusterFile;
  // A dead chief takes the job down cleanly and the launcher starts it all
  // again: the chief restores the last checkpoint onto fresh ps tasks.
  options.policy.chief.onFailure = cluster::FailureAction::kRestartJob;
  return cluster::runLauncher(choice.cluster, options);
}

} // namespace dtf::run
