// One task of a ps/worker cluster: checks the plan and the cluster, then
// runs the ps or the worker.
#include "runtime/task/ClusterTask.h"
#include "runtime/task/Task.h"
#include "dtf/OpNames.h"

#include "runtime/cluster/Certificates.h"
#include "runtime/distributed/ParameterServer.h"
#include "runtime/distributed/Transport.h"
#include "runtime/distributed/WorkerTask.h"
#include "runtime/plan/PlanTypes.h"
#include "schema/Placement.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <netdb.h>
#include <sys/socket.h>
#include <thread>

namespace dtf::task {

int cloudExitCode(const dtf::cluster::RunChoice &choice, int code) {
  constexpr int kCluster = 6, kClusterRetryable = 166;
  return choice.cluster.environment() == "cloud" && code == kCluster
             ? kClusterRetryable
             : code;
}

dtf::Status
waitForNames(const std::vector<std::pair<std::string, std::string>> &tasks,
             double timeoutSeconds, const std::atomic<bool> *stop,
             std::FILE *out) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(int64_t(timeoutSeconds * 1000));
  for (const auto &[name, address] : tasks) {
    dtf::cluster::HostPort hp;
    if (!dtf::cluster::parseHostPort(address, name, &hp).isOk())
      continue; // the cluster's own checks name it
    double backoff = 0.25;
    for (;;) {
      struct addrinfo hints = {};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      struct addrinfo *found = nullptr;
      const int rc = getaddrinfo(hp.host.c_str(), nullptr, &hints, &found);
      if (found)
        freeaddrinfo(found);
      if (rc == 0)
        break;
      const std::string why =
          rc == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(rc);
      if (stop && stop->load())
        return dtf::errorStatus("interrupted");
      const double left =
          std::chrono::duration<double>(deadline - Clock::now()).count();
      if (left <= 0)
        return dtf::errorStatus(
            "cannot reach ", name, ": its host name '", hp.host,
            "' did not resolve within ", timeoutSeconds, " s (", why,
            "); is its pod or host up, and is the name in the cluster "
            "right? (--connect-timeout sets the wait)");
      const double wait = std::min(backoff, left);
      std::fprintf(out,
                   "waiting for %s: its host name '%s' does not resolve yet "
                   "(%s); trying again in %.2g s\n",
                   name.c_str(), hp.host.c_str(), why.c_str(), wait);
      std::fflush(out);
      std::this_thread::sleep_for(
          std::chrono::milliseconds(int64_t(wait * 1000)));
      backoff = std::min(backoff * 2, 8.0);
    }
  }
  return dtf::Status::ok();
}

using dtf::errorStatus;
using dtf::Status;
using dtf::cluster::ClusterSpec;
using dtf::cluster::TaskId;

namespace {

// The plan a task runs: between-graph training looks its embedding tables
// up on the ps (only the rows of a step's ids travel): dtfc's lookup cut
// (Plan.lookups), which it makes only where it applies; in-graph and
// model-parallel training keep the dense cut. DTF_EMBEDDING_LOOKUPS=pull
// keeps the dense cut (for comparisons). An error says what the task cannot
// run.
Status selectPrograms(const std::string &planPath, dtf::plan::Plan *plan) {
  if (plan->format_version() < dtf::plan::kPlanFormatVersion)
    return errorStatus(
        planPath, " was written by an older dtfc (plan format ",
        plan->format_version(), "; this dtf-run trains format ",
        dtf::plan::kPlanFormatVersion,
        " in a cluster); compile it again with this version's dtfc");
  const char *lookups = std::getenv("DTF_EMBEDDING_LOOKUPS");
  if (lookups && std::string(lookups) != "ps" && std::string(lookups) != "pull")
    return errorStatus("DTF_EMBEDDING_LOOKUPS is ps (the default: an "
                       "embedding table's rows are looked up on its ps) "
                       "or pull (every step pulls whole tables), not '",
                       lookups, "'");
  if (!lookups || std::string(lookups) == "ps")
    dtf::plan::selectLookupCut(plan);
  // A dynamic table's rows exist only on the ps that holds it.
  for (const dtf::plan::Program *p : {&plan->worker_step(), &plan->eval()})
    for (const dtf::plan::Op &op : p->ops())
      if (op.name() == dtf::ops::kDynamicRows)
        return errorStatus(
            planPath, ": ", op.location(), ": the dynamic table '",
            dtf::plan::printable(op.attrs().count("table")
                                     ? op.attrs().at("table").s()
                                     : std::string()),
            "' is looked up on the ps that holds it, which needs "
            "between-graph replication with one task per replica and every "
            "use of the table a gather (not in-graph or model-parallel "
            "training, nor DTF_EMBEDDING_LOOKUPS=pull); train it so, or in "
            "one process");
  if (plan->worker_step().ops_size() == 0)
    return errorStatus(planPath, " has no worker_step (plan format ",
                       plan->format_version(),
                       "); compile it again with this version's dtfc");
  return Status::ok();
}

// The job's tasks as every task lists them: the ps tasks, then the workers
// in replica order: the chief first (chief.0, worker.0, or the one --chief
// names), then the others in cluster order.
Status makeRoster(const ClusterSpec &spec, dtf::dist::Roster *roster) {
  for (int i = 0; i < spec.numPs(); ++i) {
    TaskId t{dtf::cluster::kPsJob, i};
    roster->ps.push_back({t.str(), spec.address(t)});
  }
  const TaskId chief = spec.chief();
  if (spec.numTasks(chief.job) > chief.index)
    roster->workers.push_back({chief.str(), spec.address(chief)});
  for (const char *job : {dtf::cluster::kChiefJob, dtf::cluster::kWorkerJob})
    for (int i = 0; i < spec.numTasks(job); ++i) {
      TaskId t{job, i};
      if (t != chief)
        roster->workers.push_back({t.str(), spec.address(t)});
    }
  if (roster->ps.empty())
    return errorStatus(spec.source(),
                       " has no ps job: ps/worker training needs at least one "
                       "parameter server (\"ps\": [\"host:port\"])");
  if (roster->workers.empty())
    return errorStatus(spec.source(), " has no worker or chief job");
  return Status::ok();
}

// The variables over the cluster's ps tasks, as every task places them.
Status placeOnPs(const std::string &planPath, const dtf::plan::Plan &plan,
                 const ClusterSpec &spec, dtf::plan::Placement *placement) {
  if (plan.bound_ps_tasks() > 0 && plan.bound_ps_tasks() != spec.numPs())
    return errorStatus(planPath, " was compiled for ", plan.bound_ps_tasks(),
                       " ps tasks (dtfc --cluster), but ", spec.source(),
                       " has ", spec.numPs(),
                       "; compile it again without --cluster or for this "
                       "cluster");
  Status s = dtf::plan::placeVariables(plan, spec.numPs(), "", placement);
  if (!s.isOk())
    return errorStatus(planPath, ": ", s.message());
  for (const dtf::plan::PlacedShard &shard : placement->shards)
    if (shard.ps < 0)
      return errorStatus("variable '", shard.variable,
                         "' is placed on a worker; in a cluster dtf-run keeps "
                         "variables on the ps tasks (remove its `on` scope or "
                         "name a ps task)");
  return Status::ok();
}

// How this task talks to the others: mutual TLS with the cluster's CA
// unless --insecure, where every peer must show a certificate naming a task
// of this cluster. Returns 0, or the exit code after saying why not.
int makeTransport(const dtf::cluster::RunChoice &choice,
                  const ClusterTaskOptions &flags,
                  dtf::dist::Transport *transport) {
  const ClusterSpec &spec = choice.cluster;
  const std::string task = choice.task.str();
  for (const TaskId &t : spec.allTasks())
    transport->taskAt[spec.address(t)] = t.str();
  transport->bind = flags.bind;
  if (flags.insecure) {
    std::fprintf(stderr,
                 "dtf-run: warning: %s: --insecure: plaintext between the "
                 "tasks, and any process that reaches this task's port can "
                 "call it as any task (docs/security.md)\n",
                 task.c_str());
    return 0;
  }
  std::string dir = flags.tlsDir;
  if (dir.empty())
    if (const char *env = std::getenv(dtf::cluster::kTlsDirEnv))
      dir = env;
  if (dir.empty()) {
    std::fprintf(
        stderr,
        "dtf-run: error: %s: no TLS certificates: give --tls-dir DIR (or set "
        "%s), where DIR holds what `dtf-run certs --cluster %s --out DIR` "
        "made; or --insecure for plaintext without authentication\n",
        task.c_str(), dtf::cluster::kTlsDirEnv,
        choice.clusterFile.empty() ? "FILE" : choice.clusterFile.c_str());
    return kUsageError;
  }
  Status loaded = dtf::dist::loadTlsMaterial(dir, task, transport);
  if (!loaded.isOk()) {
    std::fprintf(stderr, "dtf-run: error: %s: %s\n", task.c_str(),
                 loaded.message().c_str());
    return kIoError;
  }
  transport->sameHost = flags.sameHostTcp ? dtf::dist::SameHost::kTcp
                                          : dtf::dist::SameHost::kUnix;
  transport->sharedMemory = flags.sharedMemory && !flags.sameHostTcp;
  // Shared memory is a shortcut, not a need: without a private region
  // directory the tensors go through the sockets, and the task says so.
  if (transport->sharedMemory && transport->anyOverUnix())
    if (Status d = transport->checkRegionDirectory(); !d.isOk()) {
      std::fprintf(stderr,
                   "dtf-run: %s: %s; the tensors between the tasks on this "
                   "host go through the Unix sockets instead\n",
                   task.c_str(), d.message().c_str());
      transport->sharedMemory = false;
    }
  // The tasks on this host talk through the socket directory: it must be
  // this user's alone before any of them connects or listens.
  if (transport->anyOverUnix())
    if (Status d = transport->checkSocketDirectory(); !d.isOk()) {
      std::fprintf(stderr, "dtf-run: error: %s: %s\n", task.c_str(),
                   d.message().c_str());
      return kUsageError;
    }
  return 0;
}

} // namespace

int runClusterTask(const std::string &planPath, const dtf::plan::Plan &compiled,
                   uint64_t planFingerprint,
                   const dtf::cluster::RunChoice &choice,
                   const dtf::train::TrainOptions &options,
                   const ClusterTaskOptions &flags,
                   const std::atomic<bool> *stop,
                   const std::atomic<bool> *leave) {
  const ClusterSpec &spec = choice.cluster;
  const TaskId &task = choice.task;
  auto usage = [&](const std::string &message) {
    std::fprintf(stderr, "dtf-run: error: %s: %s\n", task.str().c_str(),
                 message.c_str());
    return kUsageError;
  };
  dtf::plan::Plan plan = compiled;
  Status s = selectPrograms(planPath, &plan);
  if (!s.isOk())
    return usage(s.message());
  dtf::dist::TaskConfig config;
  s = makeRoster(spec, &config.roster);
  if (!s.isOk())
    return usage(s.message());
  dtf::plan::Placement placement;
  s = placeOnPs(planPath, plan, spec, &placement);
  if (!s.isOk())
    return usage(s.message());

  // --compress-push: a replica's gradients must be its own task's (every
  // task of the job refuses, so that none waits for the others).
  const bool inGraph = plan.training().replication() == "in_graph";
  if (flags.compressPush.enabled() &&
      (inGraph || dtf::plan::replicaSpan(plan) > 1))
    return usage(std::string("--compress-push needs between-graph replication "
                             "with replicas on one task each (") +
                 (inGraph ? "in-graph towers send their gradients to the "
                            "chief, which averages them and pushes once"
                          : "a model-parallel replica's stages send their "
                            "gradients to stage 0, which pushes them") +
                 "); drop the flag for this plan");

  // --ps-replicas 2: refused alike by every task, so that none waits for
  // a replica another refuses to keep.
  if (std::string why = dtf::dist::psReplicasRefusal(
          plan, flags.psReplicas, config.roster.ps.size(), flags.exactlyOnce);
      !why.empty())
    return usage(why);

  config.planPath = planPath;
  config.planFingerprint = planFingerprint;
  config.modelDir = options.modelDir;
  config.restore = options.restore;
  config.connectTimeoutSeconds = flags.connectTimeoutSeconds;
  config.syncTimeoutSeconds = flags.syncTimeoutSeconds;
  config.chunkBytes = flags.chunkBytes;
  config.wireBf16 = flags.wireBf16;
  config.overlapPush = flags.overlapPush;
  config.prefetchPull = flags.prefetchPull;
  config.exactlyOnce = flags.exactlyOnce;
  config.splitBatches = flags.splitBatches;
  config.leaseTimeoutSeconds = flags.leaseTimeoutSeconds;
  config.startWorkers = flags.startWorkers;
  config.psReplicas = flags.psReplicas;
  config.compressPush = flags.compressPush;
  config.stallTimeoutSeconds = flags.stallTimeoutSeconds;
  config.stop = stop;
  config.leave = leave;
  config.out = options.out;

  if (task.job != dtf::cluster::kPsJob) {
    // A worker needs the ps tasks; a name that does not resolve yet is a
    // peer that is not up yet, not a wrong cluster.
    std::vector<std::pair<std::string, std::string>> peers;
    for (const dtf::dist::TaskRef &ps : config.roster.ps)
      peers.emplace_back(ps.name, ps.address);
    s = waitForNames(peers, flags.connectTimeoutSeconds, stop, options.out);
    if (!s.isOk()) {
      std::fprintf(stderr, "dtf-run: error: %s: %s\n", task.str().c_str(),
                   s.message().c_str());
      return s.message() == "interrupted" ? kInterrupted : kClusterError;
    }
  }
  if (int code = makeTransport(choice, flags, &config.transport))
    return code;

  if (task.job == dtf::cluster::kPsJob)
    return dtf::dist::runParameterServer(plan, placement, task.index, config);
  if (task.job != dtf::cluster::kChiefJob &&
      task.job != dtf::cluster::kWorkerJob)
    return usage("a " + task.job +
                 " task has nothing to do in ps/worker training (jobs: chief, "
                 "ps, worker)");
  int replica = 0;
  while (replica < int(config.roster.workers.size()) &&
         config.roster.workers[replica].name != task.str())
    ++replica;
  return dtf::dist::runWorker(plan, placement, replica, options, config);
}

} // namespace dtf::task
