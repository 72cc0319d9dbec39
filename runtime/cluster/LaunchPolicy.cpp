// The launcher's roles, restart policy rows and command line (--workers,
// --ps, --max-restarts, --chief-failover; the cluster options dropped).
#include "runtime/cluster/Launcher.h"

#include <algorithm>

namespace dtf::cluster {

TaskRole roleOf(const ClusterSpec &cluster, const TaskId &task) {
  if (cluster.isChief(task))
    return TaskRole::kChief;
  return task.job == kPsJob ? TaskRole::kPs : TaskRole::kWorker;
}

const char *roleName(TaskRole role) {
  switch (role) {
  case TaskRole::kChief:
    return "chief";
  case TaskRole::kWorker:
    return "worker";
  case TaskRole::kPs:
    return "ps";
  }
  return "worker";
}

const RolePolicy &RestartPolicy::forRole(TaskRole role) const {
  switch (role) {
  case TaskRole::kChief:
    return chief;
  case TaskRole::kPs:
    return ps;
  case TaskRole::kWorker:
    break;
  }
  return worker;
}

Status parseLauncherArguments(const std::vector<std::string> &args,
                              LaunchOptions *options) {
  options->passThroughArgs.clear();
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    std::string name = arg, value;
    bool hasValue = false;
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      hasValue = true;
    }
    const bool clusterOption =
        name == "--cluster" || name == "--job" || name == "--task";
    if (name == "--workers" || name == "--ps") {
      if (!hasValue) {
        if (i + 1 >= args.size())
          return errorStatus(name, " needs a value");
        value = args[++i];
      }
      const bool digits = !value.empty() && value.size() <= 6 &&
                          value.find_first_not_of("0123456789") ==
                              std::string::npos;
      if (!digits || std::stoi(value) < 1)
        return errorStatus(name == "--ps"
                               ? "--ps expects how many ps tasks to start (1 "
                                 "or more), got '"
                               : "--workers expects how many worker tasks to "
                                 "start (1 or more, the chief counted), got '",
                           value, "'");
      (name == "--ps" ? options->ps : options->workers) = std::stoi(value);
      continue;
    }
    if (name == "--chief-failover") {
      options->chiefFailover = true;
      continue;
    }
    if (!clusterOption && name != "--max-restarts") {
      options->passThroughArgs.push_back(arg);
      continue;
    }
    if (!hasValue) {
      if (i + 1 >= args.size())
        return errorStatus(name, " needs a value");
      value = args[++i];
    }
    if (clusterOption)
      continue;
    const bool digits = !value.empty() && value.size() <= 4 &&
                        std::all_of(value.begin(), value.end(), [](char c) {
                          return c >= '0' && c <= '9';
                        });
    if (!digits)
      return errorStatus("--max-restarts expects a number of restarts per "
                         "task (0 to 9999), got '",
                         value, "'");
    options->policy.maxRestarts = std::stoi(value);
  }
  return Status::ok();
}

} // namespace dtf::cluster
