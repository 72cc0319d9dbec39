// SlurmCluster: the cluster of a Slurm job step (dtf-run --cluster slurm),
// derived from the variables srun sets for each task.
#pragma once

#include "schema/ClusterSpec.h"

#include <functional>
#include <string>
#include <vector>

namespace dtf::cluster {

/// Expands a Slurm host list as Slurm writes it (SLURM_JOB_NODELIST):
/// "n[1-2],m5" -> n1 n2 m5; "n[08-10]" keeps the zero padding (n08 n09 n10);
/// "r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2. The order is the list's own (Slurm
/// lays tasks out in it), never sorted.
Status expandHostList(const std::string &list, std::vector<std::string> *out);

/// Expands a tasks-per-node string (SLURM_STEP_TASKS_PER_NODE): "3(x2),2,1"
/// -> 3 3 2 1.
Status expandTasksPerNode(const std::string &text, std::vector<int> *out);

/// Expands a port list (SLURM_STEP_RESV_PORTS): "12000-12002,12010" ->
/// 12000 12001 12002 12010.
Status expandPortList(const std::string &text, std::vector<int> *out);

/// How the ranks of a step become jobs: `dtf-run --slurm-jobs ps=1,chief=1`.
/// Ranks are handed out in the order the jobs are listed (ps first by
/// default, as TensorFlow's SlurmClusterResolver does); the worker job takes
/// the ranks left over.
struct SlurmJobs {
  std::vector<std::pair<std::string, int>> counts{{kPsJob, 1}};
  /// Parses "ps=2,chief=1" (jobs ps, chief and evaluator; worker=N only when
  /// it takes exactly the ranks left).
  static Status parse(const std::string &text, SlurmJobs *out);
};

struct SlurmOptions {
  SlurmJobs jobs;
  /// Ports when srun reserved none (--resv-ports): base + the task's slot on
  /// its node (SLURM_LOCALID), as TensorFlow does.
  int portBase = 2222;
};

/// Reads a variable; nullptr when unset (std::getenv in dtf-run, a map in
/// tests).
using EnvironmentReader = std::function<const char *(const char *)>;

/// The cluster of the step this process is a task of, and its own task.
/// Reads SLURM_PROCID, SLURM_LOCALID, SLURMD_NODENAME, SLURM_STEP_NODELIST,
/// SLURM_STEP_TASKS_PER_NODE, SLURM_STEP_NUM_TASKS (or the job's
/// SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE, SLURM_NTASKS),
/// SLURM_DISTRIBUTION and SLURM_STEP_RESV_PORTS. Tasks are laid out over the
/// nodes as srun does for -m block (the default) and -m cyclic; any other
/// distribution is refused, and so is a layout that does not put this task
/// on SLURMD_NODENAME in slot SLURM_LOCALID.
Status clusterFromSlurm(const EnvironmentReader &env,
                        const SlurmOptions &options, ClusterSpec *out,
                        TaskId *task);

} // namespace dtf::cluster
