// RunMode: choosing between local training, the launcher and one task.
#include "runtime/cluster/RunMode.h"

#include <algorithm>
#include <climits>
#include <cstdlib>

namespace dtf::cluster {
namespace {

Status taskFromFlags(const ClusterFlags &flags, TaskId *task,
                     std::string *origin) {
  const std::string &text = *flags.task;
  const bool digits = !text.empty() && text.size() <= 9 &&
                      std::all_of(text.begin(), text.end(),
                                  [](char c) { return c >= '0' && c <= '9'; });
  if (!digits)
    return errorStatus("--task expects a task index (0, 1, ...), got '", text,
                       "'");
  task->job = *flags.job;
  task->index = std::stoi(text);
  *origin = "--job " + task->job + " --task " + text;
  return Status::ok();
}

} // namespace

Status chooseRunMode(const ClusterFlags &flags, const char *tfConfig,
                     RunChoice *choice, const EnvironmentReader &env) {
  *choice = RunChoice();
  if (flags.cluster && *flags.cluster == kSlurmCluster) {
    if (flags.job)
      return errorStatus("--cluster slurm takes each task's job from its "
                         "Slurm rank (--slurm-jobs); leave out --job and "
                         "--task");
    const EnvironmentReader read =
        env ? env : [](const char *name) -> const char * {
      return std::getenv(name);
    };
    DTF_RETURN_IF_ERROR(
        clusterFromSlurm(read, flags.slurm, &choice->cluster, &choice->task));
    choice->taskOrigin = "the Slurm rank";
    choice->mode = RunMode::kTask;
    return Status::ok();
  }
  if (flags.job && !flags.task)
    return errorStatus("--job ", *flags.job,
                       " needs --task N, the task's index within the job");
  if (flags.task && !flags.job)
    return errorStatus("--task ", *flags.task,
                       " needs --job NAME (chief, ps or worker)");
  if (flags.job && flags.job->empty())
    return errorStatus("--job needs a job name (chief, ps or worker)");
  TaskId flagTask;
  std::string flagOrigin;
  if (flags.job)
    DTF_RETURN_IF_ERROR(taskFromFlags(flags, &flagTask, &flagOrigin));

  std::optional<TaskId> specTask;
  if (flags.cluster) {
    if (flags.cluster->empty())
      return errorStatus("--cluster needs a cluster file (JSON: {\"ps\": "
                         "[\"host:port\", ...], \"worker\": [...]})");
    DTF_RETURN_IF_ERROR(
        ClusterSpec::parseFile(*flags.cluster, &choice->cluster, &specTask));
    choice->clusterFile = *flags.cluster;
    if (specTask)
      choice->taskOrigin = *flags.cluster + "'s task";
  } else {
    const bool set = tfConfig && std::string(tfConfig).find_first_not_of(
                                     " \t\r\n") != std::string::npos;
    if (!set) {
      if (flags.job)
        return errorStatus(flagOrigin,
                           ": no cluster to run the task in; give --cluster "
                           "FILE or set the TF_CONFIG environment variable");
      choice->mode = RunMode::kLocal;
      return Status::ok();
    }
    DTF_RETURN_IF_ERROR(ClusterSpec::parseJson(tfConfig, "TF_CONFIG",
                                               &choice->cluster, &specTask));
    if (!specTask && !flags.job)
      return errorStatus(
          "TF_CONFIG has a cluster but no task; add \"task\": {\"type\": "
          "\"worker\", \"index\": 0} to it, pass --job and --task, or write "
          "the cluster to a file and pass --cluster FILE to start its local "
          "tasks");
    if (specTask)
      choice->taskOrigin = "TF_CONFIG";
  }

  if (flags.job) {
    choice->task = flagTask;
    choice->taskOrigin = flagOrigin;
  } else if (specTask) {
    choice->task = *specTask;
  } else {
    choice->mode = RunMode::kLauncher;
    return Status::ok();
  }
  DTF_RETURN_IF_ERROR(
      choice->cluster.checkTask(choice->task, choice->taskOrigin));
  choice->mode = RunMode::kTask;
  return Status::ok();
}

} // namespace dtf::cluster
