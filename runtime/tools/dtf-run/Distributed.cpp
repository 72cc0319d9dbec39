#include "Distributed.h"

#include "runtime/distributed/ParameterServer.h"
#include "runtime/distributed/Wire.h"
#include "runtime/distributed/WorkerTask.h"
#include "runtime/plan/Partition.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace dtfrun {

using dtf::cluster::ClusterSpec;
using dtf::cluster::TaskId;

int runTask(const std::string &planPath, const dtf::plan::Plan &plan,
            const dtf::cluster::RunChoice &choice,
            const dtf::train::TrainOptions &options,
            const DistributedFlags &flags, const std::atomic<bool> *stop) {
  const ClusterSpec &spec = choice.cluster;
  const TaskId &task = choice.task;
  auto usage = [&](const std::string &message) {
    std::fprintf(stderr, "dtf-run: error: %s: %s\n", task.str().c_str(),
                 message.c_str());
    return 2;
  };
  if (plan.worker_step().ops_size() == 0)
    return usage(planPath + " has no worker_step (plan format " +
                 std::to_string(plan.format_version()) +
                 "); compile it again with this version's dtfc");

  dtf::dist::TaskConfig config;
  for (int i = 0; i < spec.numPs(); ++i) {
    TaskId t{dtf::cluster::kPsJob, i};
    config.roster.ps.push_back({t.str(), spec.address(t)});
  }
  // Workers in replica order: the chief first (chief.0, worker.0, or the
  // one --chief names), then the others in cluster order.
  const TaskId chief = spec.chief();
  if (spec.numTasks(chief.job) > chief.index)
    config.roster.workers.push_back({chief.str(), spec.address(chief)});
  for (const char *job : {dtf::cluster::kChiefJob, dtf::cluster::kWorkerJob})
    for (int i = 0; i < spec.numTasks(job); ++i) {
      TaskId t{job, i};
      if (t != chief)
        config.roster.workers.push_back({t.str(), spec.address(t)});
    }
  if (config.roster.ps.empty())
    return usage(spec.source() +
                 " has no ps job: ps/worker training needs at least one "
                 "parameter server (\"ps\": [\"host:port\"])");
  if (config.roster.workers.empty())
    return usage(spec.source() + " has no worker or chief job");
  if (plan.bound_ps_tasks() > 0 && plan.bound_ps_tasks() != spec.numPs())
    return usage(planPath + " was compiled for " +
                 std::to_string(plan.bound_ps_tasks()) +
                 " ps tasks (dtfc --cluster), but " + spec.source() +
                 " has " + std::to_string(spec.numPs()) +
                 "; compile it again without --cluster or for this cluster");

  dtf::plan::Placement placement;
  dtf::Status s = dtf::plan::placeVariables(plan, spec.numPs(), "", &placement);
  if (!s.isOk())
    return usage(planPath + ": " + s.message());
  for (const dtf::plan::PlacedShard &shard : placement.shards)
    if (shard.ps < 0)
      return usage("variable '" + shard.variable +
                   "' is placed on a worker; in a cluster dtf-run keeps "
                   "variables on the ps tasks (remove its `on` scope or "
                   "name a ps task)");

  std::ifstream in(planPath, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  config.planPath = planPath;
  config.planFingerprint = dtf::dist::fingerprint(bytes.str());
  config.modelDir = options.modelDir;
  config.connectTimeoutSeconds = flags.connectTimeoutSeconds;
  config.syncTimeoutSeconds = flags.syncTimeoutSeconds;
  config.chunkBytes = flags.chunkBytes;
  config.stop = stop;
  config.out = options.out;

  if (task.job == dtf::cluster::kPsJob)
    return dtf::dist::runParameterServer(plan, placement, task.index, config);
  if (task.job != dtf::cluster::kChiefJob && task.job != dtf::cluster::kWorkerJob)
    return usage("a " + task.job +
                 " task has nothing to do in ps/worker training (jobs: chief, "
                 "ps, worker)");
  int replica = 0;
  while (replica < int(config.roster.workers.size()) &&
         config.roster.workers[replica].name != task.str())
    ++replica;
  return dtf::dist::runWorker(plan, placement, replica, options, config);
}

} // namespace dtfrun
