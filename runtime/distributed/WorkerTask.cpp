// A worker task: picks its replication mode from the plan and the cluster
// (between-graph, in-graph client or tower, a model-parallel stage), sets up
// its trainer and drivers, and runs until the job is done.
#include "runtime/distributed/WorkerTask.h"

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/distributed/BetweenGraph.h"
#include "runtime/distributed/InGraph.h"
#include "runtime/distributed/ModelParallel.h"

#include <random>
#include <thread>

namespace dtf::dist {
namespace {

// The chief's model directory: said when there is none; with --fresh, the
// earlier checkpoints moved aside.
Status prepareModelDir(Links &links, const TaskConfig &config, bool fresh) {
  if (config.modelDir.empty()) {
    links.say("no --model-dir: this job writes no checkpoints");
    return Status::ok();
  }
  if (!fresh)
    return Status::ok();
  std::string moved;
  DTF_RETURN_IF_ERROR(
      checkpoint::moveCheckpointsAside(config.modelDir, &moved));
  if (!moved.empty())
    links.say("--fresh: moved the earlier checkpoints to " + moved);
  return Status::ok();
}

// The chief at the end: waits for the other workers (the ps tasks stop when
// every worker is done, so that none loses its ps mid-step), writes the last
// checkpoint, of the state every worker's updates reached, and stops the ps
// tasks. 0, or the exit code of a failure. Between-graph replicas of one task
// each (`elastic`) wait for the workers ps 0 counts live (docs/elastic.md:
// a worker that left or went silent is not waited for); the others for
// `expected` workers.
int finishJob(PsDriver &ps, Links &links, const TaskConfig &config,
              int expected, bool elastic, int workersDone, int workersLive,
              const std::string &self) {
  const Clock::time_point start = Clock::now();
  double lastSaid = -100;
  auto waiting = [&] {
    return elastic ? workersLive : expected - workersDone;
  };
  while (waiting() > 0 && !(config.stop && config.stop->load())) {
    const double waited = secondsSince(start);
    if (waited > config.syncTimeoutSeconds) {
      links.say("gave up waiting for the other workers to finish");
      break;
    }
    if (waited - lastSaid >= 5) {
      links.say("waiting for " + std::to_string(waiting()) +
                " more worker(s) to finish");
      lastSaid = waited;
    }
    std::this_thread::sleep_for(milliseconds(200));
    if (!ps.done(&workersDone, &workersLive).isOk())
      break;
  }
  Status s = ps.beforeEval(); // a plain pull: no wait for a sync update
  if (s.isOk())
    s = ps.save(ps.lastStep());
  if (!s.isOk()) {
    ps.shutdownAll("the final checkpoint failed");
    return fail(self, s, 6);
  }
  ps.shutdownAll("training finished");
  return 0;
}

// --overlap-push: only for async between-graph replicas of one task each.
Status overlapPushes(bool asked, bool refused, PsDriver *ps) {
  if (asked && refused)
    return errorStatus("--overlap-push needs between-graph replication with "
                       "update = async and replicas on one task each (a sync "
                       "pull waits for the update the push completes)");
  ps->setOverlap(asked);
  return Status::ok();
}

// --prefetch-pull: as --overlap-push, and not both (each starts the next
// step's pull early, at a different point).
Status prefetchPulls(bool asked, bool overlap, bool refused, PsDriver *ps) {
  if (asked && refused)
    return errorStatus("--prefetch-pull needs between-graph replication with "
                       "update = async and replicas on one task each (a sync "
                       "pull waits for the update the push completes)");
  if (asked && overlap)
    return errorStatus("--prefetch-pull and --overlap-push both start the "
                       "next step's pull early (beside the step, or beside "
                       "its push); give one of them");
  ps->setPrefetch(asked);
  return Status::ok();
}

// --data exactly-once: only for between-graph replicas of one task each,
// and in sync mode with one ps (ps 0 decides which gradients an update
// averages; another ps would average its own choice, which may hold a
// gradient ps 0 dropped and whose batch it hands out again).
Status exactlyOnceData(bool asked, bool refused, bool sync, size_t numPs) {
  if (asked && refused)
    return errorStatus("--data exactly-once needs between-graph replication "
                       "with replicas on one task each (an in-graph client or "
                       "a model-parallel replica reads its data itself); "
                       "leave it out to read static shards");
  if (asked && sync && numPs > 1)
    return errorStatus(
        "--data exactly-once with update = sync needs one ps task, not ", numPs,
        ": each ps averages the first replicas_to_aggregate gradients it "
        "receives, so another ps could apply a gradient whose batch ps 0 "
        "dropped and hands out again (that batch would count twice); train "
        "with one ps, with update = async, or with --data static");
  return Status::ok();
}

// The flags that only between-graph replicas of one task each take
// (`notOneTask`: refused): --overlap-push and --prefetch-pull (async only)
// and --data exactly-once.
Status pushAndDataModes(const TaskConfig &config, bool sync, bool notOneTask,
                        PsDriver *ps) {
  DTF_RETURN_IF_ERROR(
      overlapPushes(config.overlapPush, sync || notOneTask, ps));
  DTF_RETURN_IF_ERROR(prefetchPulls(config.prefetchPull, config.overlapPush,
                                    sync || notOneTask, ps));
  return exactlyOnceData(config.exactlyOnce, notOneTask, sync,
                         config.roster.ps.size());
}

// At the end of a worker's steps: its gradients dropped as stale (sync),
// what its prefetched pulls read (--prefetch-pull), and how its pushes
// went through shared memory.
void sayStaleness(const PsDriver &ps, const Links &links, bool sync) {
  if (sync && ps.stale() > 0)
    links.say(std::to_string(ps.stale()) +
              " of this worker's gradients arrived after their update and "
              "were dropped (stale)");
  if (ps.prefetchedPulls() > 0)
    links.say("--prefetch-pull: " + std::to_string(ps.prefetchedPulls()) +
              " steps took the pull started during the step before; " +
              std::to_string(ps.prefetchesBehind()) +
              " of those lacked this worker's own last gradient, by at most " +
              std::to_string(ps.prefetchMaxLag()) + " global step(s)");
  if (const int64_t n = ps.pushedInPlace() + ps.pushedCopied(); n > 0)
    links.say("pushed through shared memory: " + std::to_string(n) +
              " values, " + std::to_string(ps.pushedInPlace()) +
              " of them made in place by their ops (no copy)");
}

// Scaled down (SIGUSR1, docs/elastic.md), whether the step loop ended or a
// wait in it (a sync pull, a lease) was cut short: the ps tasks stop
// counting this worker (sync updates stop waiting for it) and ps 0 hands
// its leased batches out again. Only a between-graph replica of one task
// that is not the chief leaves; SIGUSR1 stops the others like Ctrl-C.
bool leaving(const TaskConfig &config, bool chief, bool oneTask) {
  return config.leave && config.leave->load() && !chief && oneTask;
}
int leaveJob(PsDriver &ps, Links &links, const std::string &self) {
  if (Status left = ps.done(nullptr, nullptr, /*leaving=*/true); !left.isOk())
    return fail(self, left, 6);
  links.say("left the job (asked to: SIGUSR1)");
  return 0;
}

// Asked to pause (SIGUSR1 to the chief of between-graph replicas of one
// task each): the launcher re-shards the ps tasks (docs/elastic.md) and has
// stopped the other workers first, so no push lands after this save. Saves
// the step the ps tasks reached (sync: once the update of the chief's last
// push is applied), stops them, and exits 130 (stopped before its steps
// were done); the job starts again from that checkpoint, the global step
// where it was.
bool pausing(const TaskConfig &config, bool chief, bool oneTask) {
  return config.leave && config.leave->load() && chief && oneTask;
}
int pauseJob(PsDriver &ps, Links &links, const TaskConfig &config,
             const std::string &self) {
  if (config.modelDir.empty())
    return fail(self,
                errorStatus("asked to pause the job (SIGUSR1), but there is "
                            "no --model-dir to save its step in"),
                2);
  int64_t step = 0;
  Status s = ps.settle(config.syncTimeoutSeconds, &step);
  if (s.isOk())
    s = ps.save(step);
  if (!s.isOk())
    return fail(self, s, 6);
  const std::string at = std::to_string(step);
  links.say("paused at global step " + at + " (asked to: SIGUSR1): " +
            checkpoint::checkpointName(step) + " in " + config.modelDir +
            " holds every update the ps tasks applied; stopping them");
  ps.shutdownAll("the chief paused the job at global step " + at);
  return 130;
}

} // namespace

int runWorker(const plan::Plan &plan, const plan::Placement &placement,
              int replica, const train::TrainOptions &base,
              const TaskConfig &config) {
  const Roster &roster = config.roster;
  const std::string self = roster.workers[replica].name;
  const bool chief = replica == 0;
  const plan::Training &t = plan.training();
  const bool inGraph = t.replication() == "in_graph";
  const bool sync = t.update() == "sync" && !inGraph;
  const int numWorkers = int(roster.workers.size());
  // Model parallelism: a replica spans `span` worker tasks, its stages.
  const int span = plan::replicaSpan(plan);
  int numReplicas = 1;
  if (Status s = plan::replicasFor(plan, numWorkers, &numReplicas); !s.isOk())
    return fail(self, s, 2);
  const int stage = replica % span;
  const int group = replica / span; // the replica this task is a stage of
  plan::Program stageProgram;
  if (span > 1) {
    Status split = plan::stageProgramFor(plan, stage, &stageProgram);
    if (!split.isOk())
      return fail(self, split, 4);
    if (stage > 0)
      return runLaterStage(plan, placement, stageProgram, group, stage, span,
                           base, config, sync);
  }

  Links links(config, self);
  PsDriver ps(plan, placement, links, sync, /*push=*/!inGraph || chief,
              span > 1 ? &stageProgram : nullptr);
  ps.setRecoverInPlace(!inGraph || chief);
  if (Status o = pushAndDataModes(config, sync, inGraph || span > 1, &ps);
      !o.isOk())
    return fail(self, o, 2);
  train::TrainOptions options = base;
  options.taskName = std::getenv("DTF_RESTART_COUNT") ? "" : self;
  options.summaryTask = self; // one directory (and log) per task
  options.evaluate = chief;
  options.seedOffset = uint64_t(group);
  options.shardIndex = size_t(group);
  options.shardCount = size_t(numReplicas);
  if (inGraph) {
    const int64_t batch = base.batch > 0 ? base.batch : t.batch();
    options.batch = std::max<int64_t>(batch / numWorkers, 1);
  }
  std::unique_ptr<InGraphDriver> client;
  options.driver = &ps;
  options.rowLookup = &ps;
  // Stage 0 of a model-parallel replica: serves the transfers sent to it,
  // and starts each step on the other stages.
  exec::RendezvousTable table;
  std::unique_ptr<StageService> stageService;
  std::unique_ptr<grpc::Server> stageServer;
  std::unique_ptr<StageLinks> stages;
  std::unique_ptr<StageLeadDriver> lead;
  if (span > 1) {
    std::random_device entropy;
    const uint64_t run = (uint64_t(entropy()) << 32) ^ entropy() ^ 1;
    stageService = std::make_unique<StageService>(
        links, table, int64_t(run >> 1) | 1, stageProgram);
    Status served = serveWorker(*stageService, roster.workers[replica],
                                config.transport, &stageServer);
    if (!served.isOk())
      return fail(self, served, 4);
    stages = std::make_unique<StageLinks>(links, table, group, 0, span);
    stages->setAbandoned([&] { return config.stop && config.stop->load(); });
    lead = std::make_unique<StageLeadDriver>(ps, *stages, run);
    stageService->setRun(run);
    (void)stages->setStep(run, 0, 0);
    options.driver = lead.get();
    options.workerProgram = &stageProgram;
    options.rendezvous = stages.get();
  }
  if (inGraph && chief) {
    client = std::make_unique<InGraphDriver>(ps, links);
    options.driver = client.get();
  }

  std::unique_ptr<train::Trainer> trainer;
  train::FailureKind kind = train::FailureKind::kNone;
  Status s = train::Trainer::create(plan, options, &trainer, &kind);
  if (!s.isOk())
    return fail(self, s, kind == train::FailureKind::kUsage ? 2 : 4);
  ps.bind(&trainer->variables());
  ps.setChief(chief);
  if (chief) {
    ps.setCheckpointPolicy(t);
    s = prepareModelDir(links, config, base.fresh);
    if (!s.isOk())
      return fail(self, s, 4);
  }

  s = ps.connect();
  if (s.isOk())
    s = ps.initializeOrWait(chief);
  if (!s.isOk()) // a damaged checkpoint is not fixed by a restart
    return fail(self, s, ps.checkpointRefused() ? 4 : 6);

  if (inGraph && !chief)
    return serveTowers(*trainer, links, ps, replica);
  if (client) {
    s = client->connect();
    if (!s.isOk())
      return fail(self, s, 6);
  }
  if (stages) {
    s = stages->connect();
    if (!s.isOk())
      return fail(self, s, 6);
    std::string others;
    for (int k = 1; k < span; ++k)
      others += (k > 1 ? ", " : "") + stages->task(k).name;
    links.say("stage 0 of replica " + std::to_string(group) + ", with " +
              others);
  }

  train::TrainReport report;
  s = trainer->run(&report, &kind);
  if (stages) // the other stages stop with this one
    (void)stages->begin(/*done=*/true, {});
  if (leaving(config, chief, !inGraph && span == 1))
    return leaveJob(ps, links, self);
  if (pausing(config, chief, !inGraph && span == 1))
    return pauseJob(ps, links, config, self);
  if (!s.isOk()) {
    if (client)
      client->shutdownTowers();
    // Stopped (Ctrl-C, SIGTERM) while its ps went away: an interruption.
    return fail(self, s,
                config.stop && config.stop->load()     ? 130
                : kind == train::FailureKind::kRuntime ? 5
                                                       : 4);
  }
  if (report.interrupted)
    return 130;
  if (!options.quiet)
    sayStaleness(ps, links, sync);
  int workersDone = 0, workersLive = 0;
  s = ps.done(&workersDone, &workersLive);
  if (!s.isOk())
    return fail(self, s, 6);
  if (chief) {
    if (client)
      client->shutdownTowers();
    return finishJob(ps, links, config, inGraph ? 1 : numWorkers,
                     !inGraph && span == 1, workersDone, workersLive, self);
  }
  return 0; // an interrupted run returned above
}

} // namespace dtf::dist
