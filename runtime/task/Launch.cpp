// Launch: dtf-run's launcher mode, between main's options and runLauncher.
#include "runtime/task/Launch.h"

#include "runtime/cluster/Certificates.h"
#include "runtime/cluster/Launcher.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <unistd.h>

namespace dtf::task {
namespace {

// Removes a directory of certificates the launcher made, and its files.
void removeTlsDir(const std::string &dir) {
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
        unlink((dir + "/" + e->d_name).c_str());
    closedir(d);
  }
  rmdir(dir.c_str());
}

} // namespace

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
  // Unless told otherwise (--tls-dir, DTF_TLS_DIR, --insecure), the tasks
  // talk mutual TLS with certificates of a CA made for this run alone; its
  // key is never written, and the directory goes when the launcher does.
  bool given = std::getenv(cluster::kTlsDirEnv) != nullptr;
  for (const std::string &a : options.passThroughArgs)
    given = given || a == "--insecure" || a == "--tls-dir" ||
            a.rfind("--tls-dir=", 0) == 0;
  std::string ephemeral;
  if (!given) {
    char dir[] = "/tmp/dtf-tls-XXXXXX";
    if (!mkdtemp(dir)) {
      std::perror("dtf-run: error: cannot make a directory for the job's "
                  "certificates");
      return cluster::kLauncherCannotStart;
    }
    ephemeral = dir;
    s = cluster::writeClusterCertificates(choice.cluster, ephemeral,
                                          /*keepCaKey=*/false, /*days=*/30);
    if (!s.isOk()) {
      removeTlsDir(ephemeral);
      std::fprintf(stderr, "dtf-run: error: %s\n", s.message().c_str());
      return cluster::kLauncherCannotStart;
    }
    options.passThroughArgs.push_back("--tls-dir");
    options.passThroughArgs.push_back(ephemeral);
  }
  const int code = cluster::runLauncher(choice.cluster, options);
  if (!ephemeral.empty())
    removeTlsDir(ephemeral);
  return code;
}

} // namespace dtf::task
