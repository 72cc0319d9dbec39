// Launch: dtf-run's launcher mode, between main's options and runLauncher.
#include "runtime/task/Launch.h"

#include "runtime/cluster/Certificates.h"
#include "runtime/cluster/Launcher.h"
#include "runtime/distributed/ParameterServer.h"
#include "runtime/task/Task.h"
#include "schema/Placement.h"

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

// Which ps re-shards this job can take (docs/elastic.md). Every one goes
// through a checkpoint of the current step, after the other workers stopped
// and before the chief stops: between-graph replicas of one task each, with
// a model dir. Each ps count N must place the plan's variables.
void setReshardRules(const TaskRequest &request, const plan::Plan &plan,
                     cluster::LaunchOptions *options) {
  const plan::Training &t = plan.training();
  if (t.replication() == "in_graph" || plan::replicaSpan(plan) > 1)
    options->psRefusal =
        "re-sharding the ps tasks needs between-graph replication with "
        "replicas of one task each (the other workers stop first, then the "
        "chief saves the step; " +
        std::string(t.replication() == "in_graph"
                        ? "an in-graph job's towers stop with its client"
                        : "a model-parallel replica's stages stop as one") +
        "); stop the job (its chief saves nothing on Ctrl-C: wait for a "
        "checkpoint) and start it again with --ps N";
  else if (request.train.modelDir.empty())
    options->psRefusal = "re-sharding the ps tasks goes through a checkpoint "
                         "of the current step, and this job has no "
                         "--model-dir; start it with --model-dir DIR";
  const int slots = request.choice.cluster.numPs();
  const bool syncOnce = request.cluster.exactlyOnce && t.update() == "sync";
  std::vector<std::string> refusals(size_t(slots) + 1);
  for (int n = 1; n <= slots; ++n) {
    std::string &why = refusals[size_t(n)];
    plan::Placement placement;
    Status s = plan::placeVariables(plan, n, "", &placement);
    if (plan.bound_ps_tasks() > 0 && plan.bound_ps_tasks() != n)
      why =
          strCat(request.planPath, " was compiled for ", plan.bound_ps_tasks(),
                 " ps tasks (dtfc --cluster); compile it without --cluster "
                 "to re-shard it");
    else if (!s.isOk())
      why = strCat(request.planPath, ": ", s.message());
    else if (request.cluster.psReplicas > 1 && n < 2)
      why = "the job runs with --ps-replicas " +
            std::to_string(request.cluster.psReplicas) +
            ", which needs 2 ps tasks or more (a replica of each ps's shard "
            "on another)";
    else if (syncOnce && n > 1)
      why = "--data exactly-once with update = sync needs one ps task (each "
            "ps averages the first gradients it receives, and another ps "
            "could apply one whose batch ps 0 dropped)";
  }
  options->psCountRefusal = [refusals](int n) {
    return n >= 1 && size_t(n) < refusals.size() ? refusals[size_t(n)]
                                                 : std::string();
  };
}

} // namespace

int runLauncherMode(const TaskRequest &request, const plan::Plan &plan,
                    int argc, char **argv) {
  const cluster::RunChoice &choice = request.choice;
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
  // --ps-replicas: refused before any task starts (each would refuse too).
  if (std::string why = dist::psReplicasRefusal(
          plan, request.cluster.psReplicas,
          size_t(options.ps > 0 ? options.ps : choice.cluster.numPs()),
          request.cluster.exactlyOnce);
      !why.empty()) {
    std::fprintf(stderr, "dtf-run: error: %s\n", why.c_str());
    return cluster::kLauncherUsageError;
  }
  setReshardRules(request, plan, &options);
  // The local tasks share this machine's cores unless a thread count was
  // chosen: else two workers on 2 cores run 2 OpenMP threads each, which
  // contend at every parallel region (docs/deploy.md, "Threads per task").
  bool threadsChosen = plan.session().intra_op_threads() > 0 ||
                       std::getenv("OMP_NUM_THREADS") != nullptr;
  for (const std::string &a : options.passThroughArgs)
    threadsChosen = threadsChosen || a == "--threads" ||
                    a.rfind("--threads=", 0) == 0;
  options.shareCores = !threadsChosen;
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
