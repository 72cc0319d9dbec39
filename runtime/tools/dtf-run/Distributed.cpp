#include "Distributed.h"

#include "runtime/cluster/Certificates.h"
#include "runtime/distributed/ParameterServer.h"
#include "runtime/distributed/Wire.h"
#include "runtime/distributed/WorkerTask.h"
#include "schema/Placement.h"
#include "runtime/plan/PlanTypes.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <netdb.h>
#include <sstream>
#include <sys/socket.h>
#include <thread>

namespace dtfrun {

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

using dtf::cluster::ClusterSpec;
using dtf::cluster::TaskId;

int runTask(const std::string &planPath, const dtf::plan::Plan &compiled,
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
  // Between-graph training looks its embedding tables up on the ps (only
  // the rows of a step's ids travel): dtfc's lookup cut (Plan.lookups),
  // which it makes only where it applies. In-graph and model-parallel
  // training keep the dense cut.
  // DTF_EMBEDDING_LOOKUPS=pull keeps the dense cut (for comparisons).
  dtf::plan::Plan plan = compiled;
  const char *lookups = std::getenv("DTF_EMBEDDING_LOOKUPS");
  if (lookups && std::string(lookups) != "ps" && std::string(lookups) != "pull")
    return usage(std::string("DTF_EMBEDDING_LOOKUPS is ps (the default: an "
                             "embedding table's rows are looked up on its ps) "
                             "or pull (every step pulls whole tables), not '") +
                 lookups + "'");
  if (!lookups || std::string(lookups) == "ps")
    dtf::plan::selectLookupCut(&plan);
  // A dynamic table's rows exist only on the ps that holds it.
  for (const dtf::plan::Program *p : {&plan.worker_step(), &plan.eval()})
    for (const dtf::plan::Op &op : p->ops())
      if (op.name() == "dtf.dynamic_rows")
        return usage(
            planPath + ": " + op.location() + ": the dynamic table '" +
            dtf::plan::printable(op.attrs().count("table")
                                     ? op.attrs().at("table").s()
                                     : std::string()) +
            "' is looked up on the ps that holds it, which needs "
            "between-graph replication with one task per replica and every "
            "use of the table a gather (not in-graph or model-parallel "
            "training, nor DTF_EMBEDDING_LOOKUPS=pull); train it so, or in "
            "one process");
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
  config.stallTimeoutSeconds = flags.stallTimeoutSeconds;
  config.stop = stop;
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
      return s.message() == "interrupted" ? 130 : 6;
    }
  }
  // Mutual TLS with the cluster's CA unless --insecure: every peer must
  // show a certificate naming a task of this cluster.
  dtf::dist::Transport transport;
  for (const TaskId &t : spec.allTasks())
    transport.taskAt[spec.address(t)] = t.str();
  transport.bind = flags.bind;
  if (flags.insecure) {
    std::fprintf(stderr,
                 "dtf-run: warning: %s: --insecure: plaintext between the "
                 "tasks, and any process that reaches this task's port can "
                 "call it as any task (docs/security.md)\n",
                 task.str().c_str());
  } else {
    std::string dir = flags.tlsDir;
    if (dir.empty())
      if (const char *env = std::getenv(dtf::cluster::kTlsDirEnv))
        dir = env;
    if (dir.empty())
      return usage("no TLS certificates: give --tls-dir DIR (or set " +
                   std::string(dtf::cluster::kTlsDirEnv) +
                   "), where DIR holds what `dtf-run certs --cluster " +
                   (choice.clusterFile.empty() ? std::string("FILE")
                                               : choice.clusterFile) +
                   " --out DIR` made; or --insecure for plaintext without "
                   "authentication");
    dtf::Status loaded =
        dtf::dist::loadTlsMaterial(dir, task.str(), &transport);
    if (!loaded.isOk()) {
      std::fprintf(stderr, "dtf-run: error: %s: %s\n", task.str().c_str(),
                   loaded.message().c_str());
      return 4;
    }
  }
  dtf::dist::setTransport(std::move(transport));

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

int runCertsCommand(int argc, char **argv) {
  std::string clusterFile, out;
  long days = 365;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: dtf-run certs --cluster FILE --out DIR [--days N]\n\n"
          "Makes a new certificate authority for the cluster in FILE and, "
          "signed by it,\na certificate and key for every task: DIR/ca.pem, "
          "DIR/ca.key and, per task,\nDIR/TASK.pem and DIR/TASK.key "
          "(\"worker.1.pem\"). Give each machine ca.pem and\nits own "
          "tasks' files (never ca.key), and start each task with --tls-dir "
          "DIR\n(or DTF_TLS_DIR=DIR). See docs/security.md.\n\n"
          "  --cluster FILE  the cluster spec (or a whole TF_CONFIG)\n"
          "  --out DIR       where to write (created 0700; keys are 0600)\n"
          "  --days N        how long the certificates are valid (365)\n");
      return 0;
    }
    if (arg != "--cluster" && arg != "--out" && arg != "--days") {
      std::fprintf(stderr,
                   "dtf-run: error: certs: unknown option '%s' (see dtf-run "
                   "certs --help)\n",
                   arg.c_str());
      return 2;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "dtf-run: error: certs: %s needs a value\n",
                   arg.c_str());
      return 2;
    }
    const char *value = argv[++i];
    if (arg == "--cluster")
      clusterFile = value;
    else if (arg == "--out")
      out = value;
    else {
      char *end = nullptr;
      days = std::strtol(value, &end, 10);
      if (!*value || *end || days < 1 || days > 36500) {
        std::fprintf(stderr,
                     "dtf-run: error: certs: --days expects 1 to 36500, got "
                     "'%s'\n",
                     value);
        return 2;
      }
    }
  }
  if (clusterFile.empty() || out.empty()) {
    std::fprintf(stderr, "dtf-run: error: certs needs --cluster FILE and "
                         "--out DIR (see dtf-run certs --help)\n");
    return 2;
  }
  ClusterSpec spec;
  dtf::Status s = ClusterSpec::parseFile(clusterFile, &spec);
  if (!s.isOk()) {
    std::fprintf(stderr, "dtf-run: error: %s\n", s.message().c_str());
    return 2;
  }
  s = dtf::cluster::writeClusterCertificates(spec, out, /*keepCaKey=*/true,
                                             int(days));
  if (!s.isOk()) {
    std::fprintf(stderr, "dtf-run: error: certs: %s\n", s.message().c_str());
    return 4;
  }
  std::printf("wrote a new CA and certificates for %zu tasks into %s "
              "(valid %ld days)\n",
              spec.allTasks().size(), out.c_str(), days);
  return 0;
}

} // namespace dtfrun
