// Trainer: the single-machine training loop of `dtf-run plan.bin` (the
// embedded default): variables, data, steps, progress, evaluation.
#pragma once

#include "runtime/core/Status.h"
#include "runtime/core/ThreadPool.h"
#include "runtime/data/BatchIterator.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/VariableStore.h"
#include "runtime/train/Feeding.h"
#include "runtime/train/Progress.h"

#include "plan.pb.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace dtf::train {

/// What kind of failure stopped training, for dtf-run's exit code.
enum class FailureKind {
  kNone,
  /// The options or the plan lack something the user must give (steps).
  kUsage,
  /// The plan breaks a rule (an invalid structure, a bad initializer).
  kPlan,
  /// The plan needs what this build lacks (an op with no CPU kernel).
  kUnavailable,
  /// A data source is missing, malformed, or does not fit the inputs; or the
  /// run's directory (--model-dir) cannot be written.
  kData,
  /// A kernel failed during a step.
  kRuntime,
};

struct TrainOptions {
  /// Steps to train; < 0: Training.steps.
  int64_t steps = -1;
  /// A progress line every N steps; <= 0: Training.summary_every when its
  /// unit is steps, else 100.
  int64_t logEvery = 0;
  /// Intra-op threads (also oneDNN's OpenMP threads); <= 0:
  /// SessionOptions.intra_op_threads, else every core.
  int threads = 0;
  /// Only the final line (and errors).
  bool quiet = false;
  /// Time every op of the train_step and print where the time went to
  /// stderr at the end.
  bool profile = false;
  std::FILE *out = stdout;
  /// The run's directory (dtf-run --model-dir): checkpoints, summaries
  /// (TensorBoard event files) and the training log go there; "" writes none.
  std::string modelDir;
  /// This task's name in the run's directory: scalars go to
  /// `<modelDir>/<summaryTask>/`, the log to `<modelDir>/<summaryTask>.log`
  /// ("worker.0"... in a cluster); evaluations go to `<modelDir>/eval/`.
  std::string summaryTask = "train";
  /// Redraw progress in place: 1 yes, 0 no, -1 when `out` is a terminal.
  int interactive = -1;
  /// Set (by a SIGINT handler) to stop after the current step.
  const std::atomic<bool> *stop = nullptr;
  /// Datasets that replace the plan's sources (tests); null: the plan's.
  std::shared_ptr<const data::Dataset> trainData;
  std::shared_ptr<const data::Dataset> evalData;
  FeedLayout trainLayout;
  FeedLayout evalLayout;
};

struct TrainReport {
  /// Steps run (fewer than asked when interrupted).
  int64_t steps = 0;
  bool interrupted = false;
  /// The metrics of the final line: the last evaluation's when there is an
  /// eval set, else the means over the last progress interval.
  std::vector<Metric> finalMetrics;
  bool finalFromEval = false;
  /// Training examples per second (evaluation time left out), and the wall
  /// time of the whole loop.
  double examplesPerSec = 0;
  double seconds = 0;
  std::string finalLine;
  /// Every progress report (step, means over its interval) and evaluation.
  std::vector<std::pair<int64_t, std::vector<Metric>>> progress;
  std::vector<std::pair<int64_t, std::vector<Metric>>> evals;
};

/// Loads a plan for training: initializes its variables, builds the
/// train_step (and eval) executors, opens the data and binds it to the feeds.
class Trainer {
public:
  static Status create(const plan::Plan &plan, const TrainOptions &options,
                       std::unique_ptr<Trainer> *out,
                       FailureKind *kind = nullptr);
  ~Trainer();

  /// Trains for the step count, printing progress, evaluations and the final
  /// line to options.out, and fills `report`.
  Status run(TrainReport *report, FailureKind *kind = nullptr);

  /// Runs the eval program over the whole eval set (no shuffle, the last
  /// partial batch kept): each fetch's mean, weighted by batch size.
  Status evaluate(uint64_t step, std::vector<Metric> *metrics,
                  FailureKind *kind = nullptr);

  /// The start-up line: model, steps, batch, data, threads.
  std::string describe() const;

  exec::VariableStore &variables() { return variables_; }
  exec::Executor &trainExecutor() { return *train_; }
  /// Null without an eval program and eval data.
  exec::Executor *evalExecutor() { return eval_.get(); }

private:
  Trainer() = default;
  Status setUp(const plan::Plan &plan, FailureKind *kind);
  Status feedLearningRate(exec::Executor &e, int64_t step);

  TrainOptions options_;
  plan::Training training_;
  std::string model_;
  int64_t steps_ = 0;
  int64_t batch_ = 0;
  int64_t logEvery_ = 100;
  int64_t evalEvery_ = 0;
  int threads_ = 1;
  std::unique_ptr<ThreadPool> pool_;
  exec::VariableStore variables_;
  std::unique_ptr<exec::Executor> train_, eval_;
  std::shared_ptr<const data::Dataset> trainData_, evalData_;
  std::unique_ptr<BatchFeeder> trainFeeder_, evalFeeder_;
};

/// Trainer::create and run in one call.
Status train(const plan::Plan &plan, const TrainOptions &options,
             TrainReport *report, FailureKind *kind = nullptr);

/// The registry of every CPU kernel, made once.
const KernelRegistry &cpuKernelRegistry();

/// The report of --profile: the train_step's time by op kind and its
/// slowest ops.
std::string profileReport(const std::vector<exec::OpProfile> &ops,
                          int64_t steps);

/// The mean of a fetched tensor's elements as a double (a scalar's value);
/// NaN for an empty or non-numeric tensor.
double meanValue(const Tensor &t);

} // namespace dtf::train
