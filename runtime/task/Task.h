// runTask: what dtf-run does once its flags are parsed: train on this
// machine, start and supervise a cluster's local tasks, run one task of a
// cluster (ps, worker, chief or evaluator), or predict.
#pragma once

#include "runtime/cluster/RunMode.h"
#include "runtime/task/ClusterTask.h"
#include "runtime/task/Evaluator.h"
#include "runtime/task/Predict.h"
#include "runtime/train/Trainer.h"

#include <string>

namespace dtf::task {

/// dtf-run's exit codes, distinct per kind of failure (dtf-run --help).
enum ExitCode {
  kOk = 0,
  kUsageError = 2,
  kNotAvailable = 3,
  kIoError = 4,
  kRuntimeError = 5,
  kClusterError = 6,
  kInterrupted = 130,
};

/// Everything runTask needs, as the command line gave it.
struct TaskRequest {
  /// The plan file (plan.bin).
  std::string planPath;
  /// The mode and, for a cluster, its spec and this task
  /// (cluster::chooseRunMode, with --chief applied).
  cluster::RunChoice choice;
  /// Steps, threads, model directory, output; `stop` is set by runTask.
  train::TrainOptions train;
  ClusterTaskOptions cluster;
  EvaluatorOptions evaluator;
  /// predict.source empty: train, not predict.
  PredictOptions predict;
  /// --emulate-gpus N: run GPU ops on N emulated GPUs (0: none).
  int emulatedGpus = 0;
};

/// Runs `request` and returns dtf-run's exit code. `argv` is the command
/// line: the launcher passes it on to the tasks it starts, and the process
/// may start itself again with it to set OpenMP's wait policy.
int runTask(const TaskRequest &request, int argc, char **argv);

} // namespace dtf::task
