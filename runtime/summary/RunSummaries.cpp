// The summary policy and a training loop's scalars, evaluations and log.
#include "runtime/summary/RunSummaries.h"

#include "plan.pb.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace dtf::summary {

SummaryPolicy SummaryPolicy::fromPlan(const plan::Training &training) {
  SummaryPolicy p;
  if (training.summary_every() > 0 && std::isfinite(training.summary_every())) {
    const std::string &unit = training.summary_unit();
    p.every = training.summary_every();
    p.inSeconds = unit == "s" || unit == "min";
    if (unit == "min")
      p.every *= 60;
  }
  p.names.assign(training.summaries().begin(), training.summaries().end());
  return p;
}

bool SummaryPolicy::due(int64_t step, double seconds) const {
  if (inSeconds)
    return seconds >= every;
  const int64_t n = std::max<int64_t>(1, int64_t(std::llround(every)));
  return step % n == 0;
}

Status RunSummaries::open(const RunSummariesOptions &options,
                          const SummaryPolicy &policy,
                          const std::vector<std::string> &fetchNames,
                          std::unique_ptr<RunSummaries> *out) {
  if (options.modelDir.empty() || options.task.empty())
    return errorStatus("summaries need a model directory and a task name");
  std::unique_ptr<RunSummaries> r(new RunSummaries());
  r->options_ = options;
  r->policy_ = policy;
  r->fetchNames_ = fetchNames;
  if (policy.names.empty()) {
    for (size_t i = 0; i < fetchNames.size(); ++i)
      r->chosen_.push_back(int(i));
  } else {
    for (const std::string &name : policy.names) {
      auto it = std::find(fetchNames.begin(), fetchNames.end(), name);
      if (it == fetchNames.end())
        r->missing_.push_back(name);
      else
        r->chosen_.push_back(int(it - fetchNames.begin()));
    }
  }
  r->sums_.assign(fetchNames.size(), 0.0);
  const std::filesystem::path dir(options.modelDir);
  DTF_RETURN_IF_ERROR(EventWriter::open((dir / options.task).string(),
                                        &r->train_, options.events));
  DTF_RETURN_IF_ERROR(
      TrainLog::open((dir / (options.task + ".log")).string(), &r->log_));
  r->last_ = std::chrono::steady_clock::now();
  *out = std::move(r);
  return Status::ok();
}

RunSummaries::~RunSummaries() = default;

void RunSummaries::addStep(const std::vector<double> &fetchValues,
                           double examples, double seconds) {
  for (size_t i = 0; i < sums_.size() && i < fetchValues.size(); ++i)
    sums_[i] += fetchValues[i];
  ++steps_;
  examples_ += examples;
  seconds_ += seconds;
}

bool RunSummaries::due(int64_t step) const {
  return policy_.due(step, std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - last_)
                               .count());
}

Status RunSummaries::write(int64_t step, double learningRate) {
  if (steps_ == 0)
    return Status::ok();
  std::vector<Scalar> scalars;
  for (int i : chosen_)
    scalars.push_back({fetchNames_[i], sums_[i] / double(steps_)});
  if (!std::isnan(learningRate))
    scalars.push_back({"learning_rate", learningRate});
  if (seconds_ > 0) {
    scalars.push_back({"examples_per_sec", examples_ / seconds_});
    scalars.push_back({"global_step/sec", double(steps_) / seconds_});
  }
  std::fill(sums_.begin(), sums_.end(), 0.0);
  steps_ = 0;
  examples_ = seconds_ = 0;
  last_ = std::chrono::steady_clock::now();
  return train_->writeScalars(step, scalars);
}

Status RunSummaries::writeEval(int64_t step,
                               const std::vector<Scalar> &metrics) {
  if (!eval_)
    DTF_RETURN_IF_ERROR(EventWriter::open(
        (std::filesystem::path(options_.modelDir) / "eval").string(), &eval_,
        options_.events));
  return eval_->writeScalars(step, metrics);
}

Status RunSummaries::log(const std::string &line) { return log_->line(line); }

Status RunSummaries::close() {
  Status s = train_->close();
  if (eval_) {
    Status e = eval_->close();
    if (s.isOk())
      s = e;
  }
  return s;
}

} // namespace dtf::summary
