// RunMode: what dtf-run does given --cluster, --job, --task and TF_CONFIG.
#pragma once

#include "schema/ClusterSpec.h"
#include "runtime/cluster/SlurmCluster.h"

#include <optional>
#include <string>

namespace dtf::cluster {

enum class RunMode {
  kLocal,    // no cluster: train on this machine (the embedded default)
  kLauncher, // a cluster and no task: start and supervise the local tasks
  kTask,     // one task of a cluster
};

/// The cluster options as given on the command line; unset when absent.
struct ClusterFlags {
  std::optional<std::string> cluster; // --cluster FILE
  std::optional<std::string> job;     // --job NAME
  std::optional<std::string> task;    // --task N, as typed
  /// --slurm-jobs and --slurm-port-base, for --cluster slurm.
  SlurmOptions slurm;
};

/// `--cluster slurm`: the cluster is the Slurm job step this process is a
/// task of (a file named slurm is given as ./slurm).
inline constexpr const char *kSlurmCluster = "slurm";

struct RunChoice {
  RunMode mode = RunMode::kLocal;
  ClusterSpec cluster;     // kLauncher, kTask
  std::string clusterFile; // the --cluster path; empty when from TF_CONFIG
  TaskId task;             // kTask
  /// Where the task came from, for messages: "--job worker --task 1",
  /// "cluster.json's task" or "TF_CONFIG".
  std::string taskOrigin;
};

/// Decides the mode. `tfConfig` is the TF_CONFIG variable's value (nullptr
/// when unset), which counts only when --cluster is not given:
///   --cluster slurm             -> kTask (the Slurm step's cluster and this
///                                  task's rank; see clusterFromSlurm)
///   --cluster F                 -> kLauncher (kTask when F is a full TF_CONFIG
///                                  with a task)
///   --cluster F --job J --task I -> kTask (J, I checked against F)
///   TF_CONFIG with a task       -> kTask (--job/--task override its task)
///   nothing                     -> kLocal
/// Errors: --job without --task or the reverse, a bad --task number, --job
/// with no cluster, TF_CONFIG without a task and no --job, and every error
/// of the cluster file or TF_CONFIG.
Status chooseRunMode(const ClusterFlags &flags, const char *tfConfig,
                     RunChoice *choice,
                     const EnvironmentReader &env = EnvironmentReader());

} // namespace dtf::cluster
