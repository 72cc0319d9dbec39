// runTask: reads the plan once and runs what the request asks for.
#include "runtime/task/Task.h"

#include "runtime/distributed/Wire.h"
#include "runtime/plan/PlanReader.h"
#include "runtime/task/Launch.h"
#include "runtime/task/Process.h"

#include <google/protobuf/stubs/logging.h>

#include <cstdio>

namespace dtf::task {
namespace {

int exitCodeOf(train::FailureKind kind) {
  switch (kind) {
  case train::FailureKind::kUsage:
    return kUsageError;
  case train::FailureKind::kUnavailable:
    return kNotAvailable;
  case train::FailureKind::kPlan:
  case train::FailureKind::kData:
    return kIoError;
  case train::FailureKind::kRuntime:
  case train::FailureKind::kNone:
    break;
  }
  return kRuntimeError;
}

// Reads and checks the plan; `bytes`, when given, gets the file's bytes.
// The plan reader reports every problem itself; protobuf's own log lines
// (invalid UTF-8 in a corrupted plan, say) would only add noise.
bool readPlan(const std::string &path, plan::Plan *plan, std::string *bytes) {
  google::protobuf::SetLogHandler(nullptr);
  Status s = plan::readPlanFile(path, plan, nullptr, bytes);
  if (!s.isOk()) {
    std::fprintf(stderr, "dtf-run: error: %s\n", s.message().c_str());
    return false;
  }
  return true;
}

// Trains on this machine: the embedded default.
int trainHere(const plan::Plan &plan, const train::TrainOptions &options) {
  train::TrainReport report;
  train::FailureKind kind = train::FailureKind::kNone;
  Status s = train::train(plan, options, &report, &kind);
  if (!s.isOk()) {
    std::fflush(stdout);
    std::fprintf(stderr, "dtf-run: error: %s\n", s.message().c_str());
    return exitCodeOf(kind);
  }
  return report.interrupted ? kInterrupted : kOk;
}

} // namespace

int runTask(const TaskRequest &request, int argc, char **argv) {
  const cluster::RunChoice &choice = request.choice;
  if (request.emulatedGpus > 0)
    useEmulatedGpus(request.emulatedGpus);
  plan::Plan plan;
  if (choice.mode == cluster::RunMode::kLauncher) {
    // Check the plan before starting anything.
    if (!readPlan(request.planPath, &plan, nullptr))
      return kIoError;
    return runLauncherMode(request, plan, argc, argv);
  }
  chooseOpenMpWaits(argv, choice.mode == cluster::RunMode::kLocal);

  // A task of a cluster checks that every task runs the same plan by the
  // fingerprint of its bytes: those just read, not the file read again.
  const bool oneTask = choice.mode == cluster::RunMode::kTask;
  std::string bytes;
  if (!readPlan(request.planPath, &plan, oneTask ? &bytes : nullptr))
    return kIoError;
  const uint64_t fingerprint = oneTask ? dist::fingerprint(bytes) : 0;
  std::string().swap(bytes);

  if (!request.predict.source.empty())
    return runPredict(plan, request.predict);
  train::TrainOptions options = request.train;
  // A worker of a cluster leaves the job on SIGUSR1 (the launcher scales
  // down so); the chief saves the current step and stops the ps tasks (the
  // launcher re-shards them so, docs/elastic.md).
  static std::atomic<bool> leave{false};
  const bool worker = oneTask && (choice.task.job == cluster::kWorkerJob ||
                                  choice.task.job == cluster::kChiefJob);
  options.stop = watchInterrupts(worker ? &leave : nullptr);
  if (oneTask)
    keepGrpcUntilExit();
  if (oneTask && choice.task.job == cluster::kEvaluatorJob)
    return cloudExitCode(
        choice, runEvaluator(plan, options, request.evaluator, options.stop));
  if (oneTask)
    return cloudExitCode(choice, runClusterTask(request.planPath, plan,
                                                fingerprint, choice, options,
                                                request.cluster, options.stop,
                                                &leave));
  return trainHere(plan, options);
}

} // namespace dtf::task
