// The training loop of a Trainer: steps, progress, evaluation, summaries,
// the final line and the --profile report.
#include "runtime/summary/RunSummaries.h"
#include "runtime/train/CheckpointSchedule.h"
#include "runtime/train/Trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <map>
#include <set>
#include <optional>

namespace dtf::train {

namespace {
// A loss scale as dtf-run prints it: 32768, 0.5, 1e+10.
std::string scaleText(float scale) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", double(scale));
  return buf;
}
} // namespace
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// --- Summaries: TensorBoard scalars and the training log (--model-dir) ---

// Opens the summaries of a run with a model directory; null without one.
Status openSummaries(const TrainOptions &options,
                     const plan::Training &training,
                     const exec::Executor &train, int numMetrics,
                     std::unique_ptr<summary::RunSummaries> *out,
                     FailureKind *kind) {
  out->reset();
  if (options.modelDir.empty())
    return Status::ok();
  summary::RunSummariesOptions o;
  o.modelDir = options.modelDir;
  o.task = options.summaryTask.empty() ? "train" : options.summaryTask;
  std::vector<std::string> fetches;
  for (int k = 0; k < numMetrics; ++k)
    fetches.push_back(train.fetchInfo(k).name);
  Status s = summary::RunSummaries::open(
      o, summary::SummaryPolicy::fromPlan(training), fetches, out);
  if (!s.isOk()) {
    setKind(kind, FailureKind::kData);
    return errorStatus("--model-dir: ", s.message());
  }
  for (const std::string &name : (*out)->missingNames())
    if (!options.quiet)
      std::fprintf(stderr,
                   "dtf-run: warning: the summary value '%s' is not a fetch "
                   "of the train_step; it is not written\n",
                   name.c_str());
  return Status::ok();
}

// The learning rate the plan's schedule gave the step before global step
// `done` (a plan that computes it in the graph from global_step follows the
// same schedule); NaN without an optimizer.
double summaryLearningRate(const plan::Training &training, int64_t done) {
  if (!training.has_optimizer() || training.optimizer().kind().empty())
    return std::nan("");
  return scheduledLearningRate(training.optimizer().learning_rate(),
                               std::max<int64_t>(0, done - 1));
}

// After each step: adds it to the summary interval and writes the scalars
// when the policy says so, and after the last step.
Status summarizeStep(summary::RunSummaries &summaries, exec::Executor &train,
                     int numMetrics, const plan::Training &training,
                     int64_t done, bool last, double examples, double seconds,
                     FailureKind *kind) {
  std::vector<double> values(static_cast<size_t>(numMetrics));
  for (int k = 0; k < numMetrics; ++k)
    values[size_t(k)] = meanValue(train.fetch(k));
  summaries.addStep(values, examples, seconds);
  if (!last && !summaries.due(done))
    return Status::ok();
  Status s = summaries.write(done, summaryLearningRate(training, done));
  if (!s.isOk())
    setKind(kind, FailureKind::kData);
  return s;
}

// A line of the training log; a write error fails the run, as TensorFlow's
// does, rather than leaving a silently partial log.
Status logLine(summary::RunSummaries *summaries, const std::string &line,
               FailureKind *kind) {
  if (!summaries)
    return Status::ok();
  Status s = summaries->log(line);
  if (!s.isOk())
    setKind(kind, FailureKind::kData);
  return s;
}

} // namespace

double meanValue(const Tensor &t) {
  const int64_t n = t.numElements();
  if (!t.defined() || n == 0)
    return std::nan("");
  double sum = 0;
  switch (t.dtype()) {
  case DType::F32:
    for (int64_t i = 0; i < n; ++i)
      sum += t.data<float>()[i];
    break;
  case DType::F64:
    for (int64_t i = 0; i < n; ++i)
      sum += t.data<double>()[i];
    break;
  case DType::I32:
    for (int64_t i = 0; i < n; ++i)
      sum += t.data<int32_t>()[i];
    break;
  case DType::I64:
    for (int64_t i = 0; i < n; ++i)
      sum += double(t.data<int64_t>()[i]);
    break;
  case DType::Bool:
    for (int64_t i = 0; i < n; ++i)
      sum += t.data<bool>()[i] ? 1 : 0;
    break;
  default:
    return std::nan("");
  }
  return sum / double(n);
}

std::string profileReport(const std::vector<exec::OpProfile> &ops,
                          int64_t steps) {
  double total = 0;
  std::map<std::string, std::pair<double, int>> byKind;
  for (const exec::OpProfile &op : ops) {
    total += op.seconds;
    auto &k = byKind[op.opName];
    k.first += op.seconds;
    ++k.second;
  }
  const double perStep = steps > 0 ? 1e3 / double(steps) : 0;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "profile: train_step, %lld steps, %.3f s in %zu ops (%.3f ms "
                "per step)\n",
                (long long)steps, total, ops.size(), total * perStep);
  std::string s = buf;
  // Ops on a GPU: their device time between CUDA events, their segments run
  // op by op (no CUDA graphs) and waited for at each segment's end.
  size_t onDevice = 0, segments = 0;
  double deviceSeconds = 0, segmentHost = 0;
  std::set<std::string> devices;
  for (const exec::OpProfile &op : ops) {
    if (!op.onDevice)
      continue;
    ++onDevice;
    deviceSeconds += op.seconds;
    devices.insert(op.device);
    if (op.segmentHostSeconds > 0) {
      ++segments;
      segmentHost += op.segmentHostSeconds;
    }
  }
  if (onDevice > 0) {
    std::string names;
    for (const std::string &d : devices)
      names += (names.empty() ? "" : ", ") + d;
    std::snprintf(buf, sizeof buf,
                  "  %zu ops on %s timed on the GPU by CUDA events: %.3f ms "
                  "per step (run without CUDA graphs, and each of their %zu "
                  "segment%s waited for at its end: %.3f ms per step of host "
                  "time to enqueue and wait); the other ops by the host's "
                  "clock\n",
                  onDevice, names.c_str(), deviceSeconds * perStep, segments,
                  segments == 1 ? "" : "s", segmentHost * perStep);
    s += buf;
  }
  s += "  by op kind:\n";
  std::vector<std::pair<double, std::string>> kinds;
  for (const auto &[name, t] : byKind)
    kinds.push_back({t.first, name});
  std::sort(kinds.rbegin(), kinds.rend());
  for (const auto &[seconds, name] : kinds) {
    std::snprintf(buf, sizeof buf, "    %-40s x%-3d %9.3f ms/step %5.1f%%\n",
                  name.c_str(), byKind[name].second, seconds * perStep,
                  total > 0 ? 100 * seconds / total : 0.0);
    s += buf;
  }
  std::vector<const exec::OpProfile *> slowest;
  for (const exec::OpProfile &op : ops)
    slowest.push_back(&op);
  std::sort(slowest.begin(), slowest.end(),
            [](const exec::OpProfile *a, const exec::OpProfile *b) {
              return a->seconds > b->seconds;
            });
  s += "  slowest ops:\n";
  for (size_t i = 0; i < slowest.size() && i < 10; ++i) {
    std::snprintf(buf, sizeof buf, "    %9.3f ms/step  %s%s\n",
                  slowest[i]->seconds * perStep, slowest[i]->where.c_str(),
                  slowest[i]->onDevice ? " (GPU)" : "");
    s += buf;
  }
  return s;
}

Status Trainer::feedLearningRate(exec::Executor &e, int64_t step) {
  int i = e.findFeed(kLearningRateFeed);
  if (i < 0)
    return Status::ok();
  Tensor *t = nullptr;
  DTF_RETURN_IF_ERROR(e.prepareFeed(i, 1, &t));
  if (t->numElements() != 1 ||
      (t->dtype() != DType::F32 && t->dtype() != DType::F64))
    return errorStatus(
        "the learning_rate input must be an f32 or f64 scalar, not ",
        t->describe());
  const double lr =
      scheduledLearningRate(training_.optimizer().learning_rate(), step);
  if (t->dtype() == DType::F64)
    t->data<double>()[0] = lr;
  else
    t->data<float>()[0] = float(lr);
  return Status::ok();
}

Status Trainer::evaluate(uint64_t step, std::vector<Metric> *metrics,
                         FailureKind *kind) {
  setKind(kind, FailureKind::kNone);
  metrics->clear();
  if (!eval_)
    return Status::ok();
  // The evaluation's host ops read the store: resident variables come down
  // first. Its GPU ops read the training's device copies (evalShared_),
  // which an evaluation before the first step (or after a restore) uploads.
  DTF_RETURN_IF_ERROR(syncResidentVariables());
  if (!evalShared_.empty() && !train_->residentUploaded())
    DTF_RETURN_IF_ERROR(train_->uploadResidentBeforeRun());
  data::BatchOptions o;
  o.batchSize =
      size_t(evalFeeder_->fixedBatch() ? evalFeeder_->fixedBatch() : batch_);
  o.shuffle = false;
  o.numEpochs = 1;
  o.prefetch = 2;
  o.dropRemainder = evalFeeder_->fixedBatch() != 0;
  auto it = data::BatchIterator::create(evalData_, o);
  if (!it) {
    setKind(kind, FailureKind::kData);
    return errorStatus("eval data: ", it.error());
  }
  const int n = eval_->numFetches();
  std::vector<double> sums(n, 0.0);
  double examples = 0;
  int64_t batches = 0;
  // With late fetches (every metric comes down from a GPU op), batch N+1 is
  // queued before batch N's metrics are read, so that the GPU is not left
  // idle while the host waits; the sums take the batches in the same order.
  std::deque<double> weights; // the sizes of the batches in flight
  auto take = [&](double w) {
    for (int k = 0; k < n; ++k)
      sums[k] += w * meanValue(eval_->fetch(k));
    examples += w;
  };
  auto takeOldest = [&]() -> Status {
    DTF_RETURN_IF_ERROR(eval_->awaitFetches());
    take(weights.front());
    weights.pop_front();
    return Status::ok();
  };
  auto failed = [&](const Status &s) {
    setKind(kind, FailureKind::kRuntime);
    // The batches still queued end before the error is told.
    while (eval_->stepsInFlight() > 0)
      (void)eval_->awaitFetches();
    return errorStatus("eval: ", s.message());
  };
  while (options_.evalSteps <= 0 || batches++ < options_.evalSteps) {
    std::optional<data::Batch> batch = (*it)->next();
    if (!batch)
      break;
    if (options_.stop && options_.stop->load()) {
      while (eval_->stepsInFlight() > 0)
        (void)eval_->awaitFetches();
      return errorStatus("interrupted");
    }
    Status s = evalFeeder_->feed(*batch);
    if (s.isOk())
      s = feedLearningRate(*eval_, int64_t(step));
    if (s.isOk())
      s = eval_->run(step);
    if (!s.isOk())
      return failed(s);
    const double w = double(batch->size());
    if (!eval_->fetchesLate()) {
      take(w);
      continue;
    }
    weights.push_back(w);
    // The batch before this one is done or nearly: its metrics now, while
    // this one runs.
    if (eval_->stepsInFlight() >= 2)
      if (Status t = takeOldest(); !t.isOk())
        return failed(t);
  }
  while (!weights.empty())
    if (Status t = takeOldest(); !t.isOk())
      return failed(t);
  if (auto err = (*it)->error()) {
    setKind(kind, FailureKind::kData);
    return errorStatus("eval data: ", err->message());
  }
  for (int k = 0; k < n; ++k)
    metrics->push_back({eval_->fetchInfo(k).name,
                        examples > 0 ? sums[k] / examples : std::nan("")});
  return Status::ok();
}

data::Expected<std::unique_ptr<data::BatchIterator>>
Trainer::makeTrainBatches(int64_t *skipBatches) {
  data::BatchOptions o;
  o.batchSize = size_t(batch_);
  o.shuffle = true;
  o.seed = uint64_t(training_.seed());
  o.numEpochs = 0; // repeat; the step count ends training
  o.prefetch = 2;
  o.dropRemainder = trainFeeder_->fixedBatch() != 0;
  o.shardCount =
      trainShardedByFile_ ? 1 : std::max<size_t>(options_.shardCount, 1);
  o.shardIndex = trainShardedByFile_ ? 0 : options_.shardIndex;
  // A restored run goes on with the batches an uninterrupted one would have
  // had: an epoch's order depends only on the seed and its number.
  *skipBatches = 0;
  const size_t examples = trainData_->size() / o.shardCount;
  const int64_t batchesPerEpoch =
      int64_t(o.dropRemainder ? examples / o.batchSize
                              : (examples + o.batchSize - 1) / o.batchSize);
  if (startStep_ > 0 && batchesPerEpoch > 0 && startStep_ < steps_) {
    o.firstEpoch = uint64_t(startStep_ / batchesPerEpoch);
    *skipBatches = startStep_ % batchesPerEpoch;
  }
  return data::BatchIterator::create(trainData_, o);
}

Status Trainer::runTowerStep(int64_t *globalStep, int64_t *examples) {
  if (!towerBatches_) {
    int64_t skip = 0;
    auto it = makeTrainBatches(&skip);
    if (!it)
      return errorStatus("data: ", it.error());
    towerBatches_ = std::move(*it);
  }
  bool done = false;
  *globalStep = 0;
  if (options_.driver)
    DTF_RETURN_IF_ERROR(options_.driver->beforeStep(globalStep, &done));
  std::optional<data::Batch> batch = towerBatches_->next();
  if (!batch) {
    auto err = towerBatches_->error();
    return errorStatus("data: ",
                       err ? err->message() : std::string("no more batches"));
  }
  Status s = runStep(*batch, *globalStep);
  if (!s.isOk())
    return errorStatus("step ", *globalStep + 1, ": ", s.message());
  *examples = int64_t(batch->size());
  return Status::ok();
}

// What run() carries from step to step: where its lines go, its batches, and
// the means of the current progress interval. Made once per run: a step adds
// to these vectors, it allocates nothing.
struct Trainer::RunState {
  RunState(const TrainOptions &options, TrainReport *report, FailureKind *kind)
      : report(report), kind(kind), writer(options.out, options.interactive) {}

  // Adds a step's fetches and examples to the interval.
  void addStep(const exec::Executor &train, size_t examples) {
    for (size_t k = 0; k < sums.size(); ++k)
      sums[k] += meanValue(train.fetch(int(k)));
    ++intervalSteps;
    intervalExamples += double(examples);
    totalExamples += double(examples);
  }
  // Counts the time since the clock last started as training time.
  void stopClock() {
    const double dt = secondsSince(intervalStart);
    intervalSeconds += dt;
    trainSeconds += dt;
    intervalStart = Clock::now();
  }
  // The interval's means, into lastTrain.
  void takeMeans() {
    for (size_t k = 0; k < sums.size(); ++k)
      lastTrain[k].value = sums[k] / double(intervalSteps);
  }

  TrainReport *report;
  FailureKind *kind;
  ProgressWriter writer;
  std::unique_ptr<summary::RunSummaries> summaries;
  std::unique_ptr<data::BatchIterator> batches;
  // The loop's start, and the time in steps (evaluation left out).
  Clock::time_point start;
  double trainSeconds = 0;
  double totalExamples = 0;
  // The interval since the last progress line: each fetch's sum over its
  // steps, and the means of the last one that ended.
  std::vector<double> sums;
  std::vector<Metric> lastTrain;
  int64_t intervalSteps = 0;
  double intervalExamples = 0;
  double intervalSeconds = 0;
  Clock::time_point intervalStart;
};

Status Trainer::nextBatch(RunState &r, data::Batch *batch, bool *finished) {
  *finished = false;
  if (ledgerBatches_) {
    int64_t number = 0;
    Status s = options_.driver->nextDataBatch(
        ledgerBatches_->examples(), batch_, ledgerBatches_->batchesPerEpoch(),
        steps_, &number, finished);
    if (!s.isOk()) {
      setKind(r.kind, FailureKind::kRuntime);
      return s;
    }
    if (!*finished)
      ledgerBatches_->make(number, batch);
    return Status::ok();
  }
  std::optional<data::Batch> next = r.batches->next();
  if (!next) {
    setKind(r.kind, FailureKind::kData);
    auto err = r.batches->error();
    return errorStatus("data: ",
                       err ? err->message() : std::string("no more batches"));
  }
  *batch = std::move(*next);
  return Status::ok();
}

Status Trainer::startRun(RunState &r) {
  if (!options_.quiet)
    r.writer.line(describe());
  DTF_RETURN_IF_ERROR(openSummaries(options_, training_, *train_, numMetrics_,
                                    &r.summaries, r.kind));
  DTF_RETURN_IF_ERROR(logLine(r.summaries.get(), describe(), r.kind));
  if (!options_.quiet && !checkpointNote_.empty())
    r.writer.line(checkpointNote_);
  r.report->restoredStep = restoredStep_;
  return Status::ok();
}

Status Trainer::openRunBatches(RunState &r) {
  if (options_.driver && options_.driver->leasesData()) {
    // Exactly-once data: ps 0's ledger says which batch each step takes.
    ledgerBatches_ = std::make_unique<data::EpochBatches>(
        trainData_, size_t(batch_), uint64_t(training_.seed()),
        trainFeeder_->fixedBatch() != 0);
    if (ledgerBatches_->batchesPerEpoch() == 0) {
      setKind(r.kind, FailureKind::kData);
      return errorStatus("data: ", trainData_->description(), " has ",
                         trainData_->size(), " examples, not one batch of ",
                         batch_);
    }
    return Status::ok();
  }
  int64_t skipBatches = 0;
  auto it = makeTrainBatches(&skipBatches);
  if (!it) {
    setKind(r.kind, FailureKind::kData);
    return errorStatus("data: ", it.error());
  }
  r.batches = std::move(*it);
  for (int64_t i = 0; i < skipBatches; ++i)
    if (!r.batches->next()) {
      setKind(r.kind, FailureKind::kData);
      auto err = r.batches->error();
      return errorStatus("data: ",
                         err ? err->message() : std::string("no more batches"));
    }
  return Status::ok();
}

void Trainer::startIntervals(RunState &r) {
  r.sums.assign(size_t(numMetrics_), 0.0);
  for (int k = 0; k < numMetrics_; ++k)
    r.lastTrain.push_back({train_->fetchInfo(k).name, std::nan("")});
  if (options_.driver && !options_.quiet)
    r.writer.line("  program: " +
                  (options_.workerProgram ? options_.workerProgram->name()
                                          : std::string("worker_step")) +
                  " (" + std::to_string(train_->numRunOps()) + " ops), " +
                  std::to_string(train_->numFetches() - numMetrics_) +
                  " sends per step");
  r.intervalStart = Clock::now();
}

Status Trainer::nextGlobalStep(int64_t step, int64_t *globalStep,
                               bool *finished, FailureKind *kind) {
  *finished = false;
  if (!options_.driver) {
    if (step >= steps_)
      *finished = true;
    else
      *globalStep = step;
    return Status::ok();
  }
  bool jobDone = false;
  Status s = options_.driver->beforeStep(globalStep, &jobDone);
  if (s.isOk() && (jobDone || *globalStep >= steps_)) {
    *finished = true;
    return Status::ok();
  }
  if (s.isOk())
    s = options_.driver->startStep(*globalStep);
  if (!s.isOk())
    setKind(kind, FailureKind::kRuntime);
  return s;
}

struct Trainer::StepDone {
  int64_t step = 0, globalStep = 0;
  size_t examples = 0;
  Clock::time_point start;
  double seconds = -1; // its share of the loop's time; -1: until now
  bool saveNow = false, evalNow = false;
  // dtf.skip_updates_unless found a gradient not finite (the push withholds
  // the gradients).
  bool skipped = false;
};

// Takes a step's results: its fetches (awaited, when they come down late),
// the driver's after-step, the progress interval and summaries, then the
// progress line, checkpoint and evaluation due at it.
Status Trainer::finishStep(RunState &r, const StepDone &d, bool *stop) {
  *stop = false;
  if (train_->fetchesLate() && train_->stepsInFlight() > 0) {
    Status s = train_->awaitFetches();
    if (!s.isOk()) {
      setKind(r.kind, FailureKind::kRuntime);
      return errorStatus("step ", d.globalStep + 1, ": ", s.message());
    }
  }
  if (options_.driver) {
    Status s = options_.driver->afterStep(*train_, numMetrics_, d.skipped);
    if (!s.isOk()) {
      setKind(r.kind, FailureKind::kRuntime);
      return s;
    }
  }
  r.addStep(*train_, d.examples);

  const int64_t done = d.globalStep + 1;
  if (r.summaries)
    DTF_RETURN_IF_ERROR(summarizeStep(
        *r.summaries, *train_, numMetrics_, training_, done, done == steps_,
        double(d.examples), d.seconds >= 0 ? d.seconds : secondsSince(d.start),
        r.kind));
  const bool logNow = options_.driver ? (d.step + 1) % logEvery_ == 0
                                      : done % logEvery_ == 0 || done == steps_;
  if (logNow || d.evalNow || d.saveNow)
    r.stopClock();
  if (logNow)
    DTF_RETURN_IF_ERROR(reportProgress(r, done));
  if (d.saveNow) {
    DTF_RETURN_IF_ERROR(saveCheckpoint(done, r.report, r.kind));
    r.intervalStart = Clock::now();
  }
  if (d.evalNow) {
    DTF_RETURN_IF_ERROR(reportEval(r, done));
    *stop = r.report->interrupted;
    r.intervalStart = Clock::now();
  }
  return Status::ok();
}

Status Trainer::reportProgress(RunState &r, int64_t done) {
  r.takeMeans();
  r.report->progress.push_back({done, r.lastTrain});
  const double rate =
      r.intervalSeconds > 0 ? r.intervalExamples / r.intervalSeconds : 0;
  const double eta =
      r.trainSeconds / double(done - startStep_) * double(steps_ - done);
  if (!options_.quiet)
    r.writer.progress(progressLine(done, steps_, r.lastTrain, rate, eta));
  DTF_RETURN_IF_ERROR(
      logLine(r.summaries.get(),
              progressLine(done, steps_, r.lastTrain, rate, eta), r.kind));
  std::fill(r.sums.begin(), r.sums.end(), 0.0);
  r.intervalSteps = 0;
  r.intervalExamples = 0;
  r.intervalSeconds = 0;
  return Status::ok();
}

Status Trainer::reportEval(RunState &r, int64_t step) {
  std::vector<Metric> metrics;
  Status s = options_.driver ? options_.driver->beforeEval() : Status::ok();
  if (s.isOk())
    s = evaluate(uint64_t(step), &metrics, r.kind);
  if (!s.isOk()) {
    if (options_.stop && options_.stop->load()) {
      setKind(r.kind, FailureKind::kNone);
      r.report->interrupted = true;
      return Status::ok();
    }
    return s;
  }
  r.report->evals.push_back({step, metrics});
  r.report->finalMetrics = metrics;
  r.report->finalFromEval = true;
  if (!options_.quiet)
    r.writer.line(evalLine(step, metrics));
  if (r.summaries) {
    std::vector<summary::Scalar> scalars;
    for (const Metric &m : metrics)
      scalars.push_back({m.name, m.value});
    Status w = r.summaries->writeEval(step, scalars);
    if (!w.isOk()) {
      setKind(r.kind, FailureKind::kData);
      return w;
    }
    DTF_RETURN_IF_ERROR(
        logLine(r.summaries.get(), evalLine(step, metrics), r.kind));
  }
  return Status::ok();
}

Status Trainer::finishRun(RunState &r, int64_t lastStep) {
  TrainReport *report = r.report;
  if (!report->finalFromEval || report->interrupted) {
    report->finalMetrics = r.lastTrain;
    report->finalFromEval = false;
  }
  report->seconds = secondsSince(r.start);
  report->examplesPerSec =
      r.trainSeconds > 0 ? r.totalExamples / r.trainSeconds : 0;
  report->finalLine = finalLine(report->steps, report->finalMetrics,
                                report->examplesPerSec, report->seconds);
  if (options_.profile) {
    std::fflush(options_.out);
    std::fputs(profileReport(train_->profile(), report->steps).c_str(), stderr);
  }
  if (dynamicTables_ && !options_.quiet)
    std::fprintf(stderr, "dtf-run: dynamic tables: %s\n",
                 dynamicTables_->describe().c_str());
  r.writer.line(report->finalLine);
  if (!r.summaries)
    return Status::ok();
  // An interrupted run's last partial interval, then the final line.
  Status s =
      r.summaries->write(lastStep, summaryLearningRate(training_, lastStep));
  if (s.isOk())
    s = logLine(r.summaries.get(), report->finalLine, r.kind);
  if (s.isOk())
    s = r.summaries->close();
  if (!s.isOk())
    setKind(r.kind, FailureKind::kData);
  return s;
}

Status Trainer::run(TrainReport *report, FailureKind *kind) {
  setKind(kind, FailureKind::kNone);
  *report = TrainReport();
  RunState r(options_, report, kind);
  DTF_RETURN_IF_ERROR(startRun(r));
  CheckpointSchedule checkpoints(
      training_, !options_.modelDir.empty() && !options_.driver, startStep_);
  r.start = Clock::now();
  DTF_RETURN_IF_ERROR(openRunBatches(r));
  startIntervals(r);

  int64_t step = startStep_;
  // With a driver the job's global step (from the ps) counts, not this
  // process's steps: several workers advance it.
  int64_t globalStep = startStep_;
  // With late fetches, the step before the last one run, whose results
  // the loop takes once the next step is queued.
  std::optional<StepDone> pending;
  bool stop = false;
  for (;; ++step) {
    if (options_.stop && options_.stop->load()) {
      report->interrupted = true;
      break;
    }
    bool finished = false;
    DTF_RETURN_IF_ERROR(nextGlobalStep(step, &globalStep, &finished, kind));
    if (finished)
      break;
    StepDone d;
    d.start = Clock::now();
    d.step = step;
    d.globalStep = globalStep;
    std::optional<data::Batch> batch(std::in_place);
    DTF_RETURN_IF_ERROR(nextBatch(r, &*batch, &finished));
    if (finished)
      break;
    const Tensor *lossScale = variables_.find("loss_scale");
    const float scaleBefore = lossScale ? *lossScale->data<float>() : 0.0f;
    Status s = runStep(*batch, globalStep);
    if (!s.isOk() && options_.driver && options_.driver->dropStep(s))
      continue;
    if (!s.isOk()) {
      setKind(kind, FailureKind::kRuntime);
      return errorStatus("step ", globalStep + 1, ": ", s.message());
    }
    d.skipped = lossScale && train_->updatesSkipped();
    // TensorFlow's LossScaleOptimizer skips such a step without a word;
    // dtf-run says each one, with the scale it halved. A worker's ps halves
    // it (the worker sees it with its next pull).
    if (d.skipped && options_.driver)
      r.writer.line("step " + std::to_string(globalStep + 1) +
                    ": a gradient is not finite at loss scale " +
                    scaleText(scaleBefore) +
                    ": push skipped (gradients withheld; the ps skips the "
                    "update and halves the scale)");
    else if (d.skipped)
      r.writer.line("step " + std::to_string(globalStep + 1) +
                    ": a gradient is not finite at loss scale " +
                    scaleText(scaleBefore) +
                    ": step skipped (no variable updated), loss scale now " +
                    scaleText(*lossScale->data<float>()));
    if (dynamicTables_)
      dynamicTables_->sweep(globalStep + 1);
    d.examples = batch->size();
    // A checkpoint or an evaluation after this step needs it done: decided
    // now, before the next step is queued.
    const int64_t done = globalStep + 1;
    d.saveNow = checkpoints.due(done) && done != steps_;
    d.evalNow =
        eval_ && evalEvery_ > 0 && done % evalEvery_ == 0 && done != steps_;
    if (pending) {
      // This step is queued behind it: the host waits for the step before
      // only (its loss and metrics), the GPU keeps working.
      DTF_RETURN_IF_ERROR(finishStep(r, *pending, &stop));
      pending.reset();
    }
    if (train_->fetchesLate() && !d.saveNow && !d.evalNow) {
      d.seconds = secondsSince(d.start);
      pending = d;
      continue;
    }
    DTF_RETURN_IF_ERROR(finishStep(r, d, &stop));
    if (d.saveNow)
      checkpoints.saved(done);
    if (stop) {
      ++step;
      break;
    }
  }
  if (pending)
    DTF_RETURN_IF_ERROR(finishStep(r, *pending, &stop));
  if (r.intervalSteps > 0) {
    // Interrupted between reports: the partial interval's means.
    r.trainSeconds += secondsSince(r.intervalStart);
    r.takeMeans();
  }
  report->steps = step;
  // The store holds the trained values at the end (resident variables).
  DTF_RETURN_IF_ERROR(syncResidentVariables());
  // The end of training and Ctrl-C save too (unless this step is saved).
  if (checkpoints.unsaved(step)) {
    DTF_RETURN_IF_ERROR(saveCheckpoint(step, report, kind));
    checkpoints.saved(step);
  }
  if (eval_ && !report->interrupted)
    DTF_RETURN_IF_ERROR(reportEval(r, options_.driver ? globalStep : step));
  return finishRun(r, options_.driver ? globalStep : step);
}

} // namespace dtf::train
