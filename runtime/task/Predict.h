// dtf-run --predict: the model's outputs for every example of a data source,
// from the latest checkpoint.
#pragma once

#include "runtime/checkpoint/Checkpoint.h"

#include "plan.pb.h"

#include <string>

namespace dtf::task {

struct PredictOptions {
  /// eval, data, or KIND:PATH (idx:DIR, csv:FILE, tfrecord:PATTERN).
  std::string source;
  std::string modelDir;
  /// Which checkpoint of modelDir (dtf-run --restore): the newest, refused
  /// when damaged, or the newest whole one.
  dtf::checkpoint::RestorePolicy restore =
      dtf::checkpoint::RestorePolicy::kLatest;
  /// .csv or .npy.
  std::string output;
  int threads = 0;
};

/// Runs the prediction and returns dtf-run's exit code (0, 2 usage, 3 op
/// without a kernel, 4 I/O, data or checkpoint, 5 a kernel failed).
int runPredict(const dtf::plan::Plan &plan, const PredictOptions &flags);

} // namespace dtf::task
