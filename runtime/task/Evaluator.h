// dtf-run as the evaluator task (TF_CONFIG type "evaluator", or --job
// evaluator): follows a job's checkpoints and evaluates each new one.
#pragma once

#include "runtime/train/Trainer.h"

#include "plan.pb.h"

#include <atomic>

namespace dtf::task {

struct EvaluatorOptions {
  /// Seconds without a new checkpoint after which the evaluator gives up
  /// (exit 6), so that it stops by itself when the job is gone.
  double idleTimeoutSeconds = 3600;
  /// How often the model directory is looked at.
  double pollSeconds = 1;
};

/// Evaluates the newest checkpoint of options.modelDir not yet evaluated,
/// again and again, until the checkpoint of the plan's last step (or
/// options.steps) is done. Writes each evaluation to
/// <modelDir>/evaluator/ (TensorBoard events: the eval metrics under their
/// own names) and a line to stdout and <modelDir>/evaluator.log. Runs at a
/// lower CPU priority (nice 10) with one intra-op thread unless --threads
/// says otherwise, and only reads the directory, so training never waits for
/// it. Returns the exit code.
int runEvaluator(const dtf::plan::Plan &plan,
                 const dtf::train::TrainOptions &options,
                 const EvaluatorOptions &flags, const std::atomic<bool> *stop);

} // namespace dtf::task
