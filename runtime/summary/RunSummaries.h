// RunSummaries: what a training loop writes to the run's directory, the
// TensorBoard scalars of one task and its plain-text log, and when.
#pragma once

#include "schema/Status.h"
#include "runtime/summary/EventWriter.h"
#include "runtime/summary/TrainLog.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dtf::plan {
class Training;
}

namespace dtf::summary {

/// When to write summaries and of what: the plan's `summary every N unit
/// [names]` (Training.summary_every, summary_unit, summaries).
struct SummaryPolicy {
  /// Every `every` global steps, or every `every` seconds of wall time.
  double every = 100;
  bool inSeconds = false;
  /// The fetches to write; empty: every fetch of the train step.
  std::vector<std::string> names;

  /// The plan's policy; without one (summary_every 0), every 100 steps with
  /// every fetch. An unknown unit counts steps.
  static SummaryPolicy fromPlan(const plan::Training &training);

  /// Whether `step` (the global step after a train step) is a summary step,
  /// `seconds` after the previous summary.
  bool due(int64_t step, double seconds) const;
};

struct RunSummariesOptions {
  /// The run's directory; scalars go to `<modelDir>/<task>/`, evaluations to
  /// `<modelDir>/eval/`, the log to `<modelDir>/<task>.log`.
  std::string modelDir;
  /// One event directory per task: "train" on one machine, "worker.0",
  /// "chief.0"... in a cluster.
  std::string task = "train";
  EventWriterOptions events;
};

/// A training loop's summaries: the fetches' means since the previous
/// summary, learning_rate, examples_per_sec and global_step/sec as scalars
/// at the steps the policy picks; evaluation metrics; the log's lines.
///
///   loop:  addStep(values, batch, seconds);
///          if (due(step)) write(step, learningRate);
///   eval:  writeEval(step, metrics);   every line: log(line)
class RunSummaries {
public:
  /// Opens `<modelDir>/<task>/events.out.tfevents.*` and
  /// `<modelDir>/<task>.log`. `fetchNames` are the train step's fetches, in
  /// the order addStep takes their values; policy names that are not among
  /// them are left out (see missingNames).
  static Status open(const RunSummariesOptions &options,
                     const SummaryPolicy &policy,
                     const std::vector<std::string> &fetchNames,
                     std::unique_ptr<RunSummaries> *out);
  ~RunSummaries();

  /// One train step: each fetch's value (a scalar, or a tensor's mean), the
  /// examples in its batch and the seconds it took (evaluation left out).
  void addStep(const std::vector<double> &fetchValues, double examples,
               double seconds);
  /// Whether the policy makes `step` a summary step.
  bool due(int64_t step) const;
  /// Writes the summary of the steps since the previous one at `step`: each
  /// chosen fetch's mean, `learning_rate` (left out when NaN),
  /// `examples_per_sec` and `global_step/sec`; then starts a new interval.
  /// Nothing when no step was added since.
  Status write(int64_t step, double learningRate);
  /// Evaluation metrics at `step`, to `<modelDir>/eval/` under their own
  /// names (TensorBoard draws them over the training curves of the same tag).
  Status writeEval(int64_t step, const std::vector<Scalar> &metrics);
  /// A line of the training log.
  Status log(const std::string &line);
  /// Flushes and closes the files; the first error of any write.
  Status close();

  /// Steps added since the last write.
  int64_t pendingSteps() const { return steps_; }
  /// Policy names that are not fetches (not written).
  const std::vector<std::string> &missingNames() const { return missing_; }
  const std::string &eventPath() const { return train_->path(); }
  const std::string &logPath() const { return log_->path(); }

private:
  RunSummaries() = default;

  RunSummariesOptions options_;
  SummaryPolicy policy_;
  std::vector<std::string> fetchNames_;
  std::vector<int> chosen_; // indices into fetchNames_
  std::vector<std::string> missing_;
  std::unique_ptr<EventWriter> train_, eval_;
  std::unique_ptr<TrainLog> log_;
  std::vector<double> sums_;
  int64_t steps_ = 0;
  double examples_ = 0, seconds_ = 0;
  std::chrono::steady_clock::time_point last_;
};

} // namespace dtf::summary
