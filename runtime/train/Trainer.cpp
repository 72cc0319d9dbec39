// The single-machine training loop: steps, progress, evaluation, final line.
#include "runtime/train/Trainer.h"

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/gpu/GpuAllReduce.h"
#include "runtime/kernels/CpuKernels.h"
#include "runtime/plan/PlanReader.h"
#include "runtime/plan/PlanTypes.h"
#include "runtime/summary/RunSummaries.h"
#include "runtime/train/CheckpointSchedule.h"
#include "runtime/train/Initializers.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <map>
#include <thread>

namespace dtf::train {
namespace {

using Clock = std::chrono::steady_clock;

// The CPU of a cluster task ("worker.1"), as log_device_placement names it:
// /job:worker/replica:0/task:1/device:CPU:0.
std::string taskDevice(const std::string &task) {
  const std::string::size_type dot = task.rfind('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == task.size())
    return exec::kLocalCpuDevice;
  return "/job:" + task.substr(0, dot) + "/replica:0/task:" +
         task.substr(dot + 1) + "/device:CPU:0";
}

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void setKind(FailureKind *kind, FailureKind value) {
  if (kind)
    *kind = value;
}

// oneDNN runs its primitives on OpenMP threads of its own; the thread count
// the user asks for should hold for them too. Looked up at run time so that
// the runtime does not link OpenMP itself.
void setOpenMpThreads(int n) {
  using SetFn = void (*)(int);
  if (auto fn =
          reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads")))
    fn(n);
}

// True when some op of `program` has neither an executor implementation nor
// a kernel: the plan needs what this build lacks.
bool lacksKernel(const plan::Program &program, const KernelRegistry &kernels) {
  for (const plan::Op &op : program.ops()) {
    const std::string &n = op.name();
    if (n == "dtf.input" || n == "dtf.constant" || n == "dtf.read_variable" ||
        n == "dtf.assign_add" || n == "dtf.send" || n == "dtf.recv")
      continue;
    if (!kernels.lookup(n))
      return true;
  }
  return false;
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
                     int64_t done, bool last,
                     double examples, double seconds, FailureKind *kind) {
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

void setOpenMpThreadCount(int n) { setOpenMpThreads(n); }

const KernelRegistry &cpuKernelRegistry() {
  static const KernelRegistry *registry = [] {
    auto *r = new KernelRegistry();
    registerCpuKernels(*r);
    return r;
  }();
  return *registry;
}

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
                "per step)\n  by op kind:\n",
                (long long)steps, total, ops.size(), total * perStep);
  std::string s = buf;
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
    std::snprintf(buf, sizeof buf, "    %9.3f ms/step  %s\n",
                  slowest[i]->seconds * perStep, slowest[i]->where.c_str());
    s += buf;
  }
  return s;
}

Trainer::~Trainer() = default;

Status Trainer::create(const plan::Plan &plan, const TrainOptions &options,
                       std::unique_ptr<Trainer> *out, FailureKind *kind) {
  setKind(kind, FailureKind::kNone);
  std::unique_ptr<Trainer> t(new Trainer());
  t->options_ = options;
  DTF_RETURN_IF_ERROR(t->setUp(plan, kind));
  *out = std::move(t);
  return Status::ok();
}

Status Trainer::setUp(const plan::Plan &plan, FailureKind *kind) {
  training_ = plan.training();
  model_ = plan.model();
  steps_ = options_.steps >= 0 ? options_.steps : training_.steps();
  if (options_.steps < 0 && training_.steps() <= 0) {
    setKind(kind, FailureKind::kUsage);
    return errorStatus("the plan sets no step count; pass --steps N");
  }
  batch_ = options_.batch > 0 ? options_.batch : training_.batch();
  if (batch_ <= 0) {
    setKind(kind, FailureKind::kPlan);
    return errorStatus("the plan sets no batch size (train { batch = N })");
  }
  logEvery_ = options_.logEvery > 0 ? options_.logEvery : 100;
  if (options_.logEvery <= 0 && training_.summary_unit() == "steps" &&
      training_.summary_every() >= 1)
    logEvery_ = int64_t(training_.summary_every());
  evalEvery_ = training_.eval().every() > 0 ? training_.eval().every() : 0;

  // Threads: intra-op for our kernels and OpenMP for oneDNN's.
  int threads = options_.threads > 0 ? options_.threads
                                     : plan.session().intra_op_threads();
  if (threads > 0)
    setOpenMpThreads(threads);
  else
    threads = std::max(1u, std::thread::hardware_concurrency());
  threads_ = threads;
  // The intra-op pool runs on OpenMP's team, oneDNN's threads (ThreadPool.h).
  if (threads > 1)
    pool_ = std::make_unique<ThreadPool>(threads, nullptr,
                                         ThreadPool::Workers::kOpenMp);
  int interOp = options_.interOpThreads > 0
                    ? options_.interOpThreads
                    : plan.session().inter_op_threads();
  if (interOp <= 0)
    interOp = kDefaultInterOpThreads;
  interOpThreads_ = interOp;
  if (interOp > 1) {
    // OpenMP's thread count is per thread, and a new thread starts from the
    // default: oneDNN's kernels must see the count set above on every
    // inter-op thread, or they split (and sum) their work differently there
    // and the results would depend on the schedule.
    const int ompThreads = options_.threads > 0 ||
                                   plan.session().intra_op_threads() > 0
                               ? threads
                               : 0;
    interOpPool_ = std::make_unique<ThreadPool>(interOp, [ompThreads] {
      if (ompThreads > 0)
        setOpenMpThreads(ompThreads);
    });
  }

  const uint64_t seed = uint64_t(training_.seed()) + options_.seedOffset;
  // A worker holds only what its programs read (and the global step): an
  // embedding table looked up on the ps is never allocated here.
  plan::Plan held;
  if (options_.driver) {
    held = plan;
    std::set<std::string> read;
    for (const plan::Program *p :
         {options_.workerProgram ? options_.workerProgram : &plan.worker_step(),
          &plan.eval()})
      for (const plan::Op &op : p->ops())
        if (op.name() == "dtf.read_variable" && op.attrs().count("name"))
          read.insert(op.attrs().at("name").s());
    for (const plan::Variable &v : plan.variables())
      if (read.count(v.name()) && v.role() == "moving_average")
        read.insert(v.slot_of()); // an average starts at its variable
    held.clear_variables();
    for (const plan::Variable &v : plan.variables())
      if (read.count(v.name()) || v.role() == "global_step")
        *held.add_variables() = v;
  }
  Status s = initializeVariables(options_.driver ? held : plan,
                                 uint64_t(training_.seed()), &variables_);
  if (s.isOk())
    s = DynamicTables::create(plan, uint64_t(training_.seed()), &variables_,
                              &dynamicTables_);
  if (!s.isOk()) {
    setKind(kind, FailureKind::kPlan);
    return s;
  }
  if (dynamicTables_->empty())
    dynamicTables_.reset();
  else
    dynamicTables_->setThreadPool(pool_.get());

  // The data: the plan's sources unless the caller gave datasets.
  PlanData data;
  if (options_.trainData) {
    data.train = options_.trainData;
    data.trainLayout = options_.trainLayout;
    data.eval = options_.evalData;
    data.evalLayout = options_.evalLayout;
  } else {
    s = openPlanData(
        plan, &data,
        {options_.shardIndex, std::max<size_t>(options_.shardCount, 1)});
    if (!s.isOk()) {
      setKind(kind, FailureKind::kData);
      return s;
    }
  }

  const KernelRegistry &kernels = cpuKernelRegistry();
  auto build = [&](const plan::Program &program, const std::string &name,
                   std::unique_ptr<exec::Executor> *out,
                   int gpuOffset = 0) -> Status {
    exec::ExecutorOptions o;
    o.gpuOffset = gpuOffset;
    o.intraOpPool = pool_.get();
    o.interOpPool = interOpPool_.get();
    exec::applySessionOptions(plan, &o);
    if (options_.driver)
      o.device = taskDevice(options_.summaryTask);
    o.seed = seed;
    o.programName = name;
    o.rendezvous = options_.rendezvous;
    o.rowLookup = options_.rowLookup;
    o.dynamicRows = dynamicTables_.get();
    o.profile = options_.profile && name != "eval";
    if (name.rfind("worker_step (tower ", 0) == 0) {
      o.deviceFetches = towerDeviceSends_;
      // The variables the towers' GPUs read stay there: updated on GPU 0
      // and broadcast (one process), or uploaded to GPU 0 after each pull
      // and broadcast (a worker).
      o.residentReads = !towerDeviceSends_.empty();
    }
    if (name == "ps_update") {
      o.sharedResident = updateShared_;
      o.deviceFeeds = towerDeviceSends_;
    }
    Status st = exec::Executor::create(program, variables_, kernels, o, out);
    if (!st.isOk())
      setKind(kind, lacksKernel(program, kernels) ? FailureKind::kUnavailable
                                                  : FailureKind::kPlan);
    return st;
  };
  towers_ = options_.gpuTowers > 0 ? options_.gpuTowers
                                   : std::max(1, plan.session().gpu_towers());
  plan::Program worker; // with its sends as fetches
  if (options_.driver || towers_ > 1) {
    // The worker's part of the step; its sends become fetches after the
    // loss and metrics. Towers run it too, in one process as well.
    if (plan.worker_step().ops_size() == 0) {
      setKind(kind, FailureKind::kPlan);
      return errorStatus("the plan has no worker_step (format ",
                         plan.format_version(),
                         "); compile it again with this version's dtfc");
    }
    worker =
        options_.workerProgram ? *options_.workerProgram : plan.worker_step();
    numMetrics_ = worker.fetches_size();
    for (const plan::Transfer &send : worker.sends()) {
      plan::Fetch *f = worker.add_fetches();
      f->set_name(send.key());
      f->set_value(send.value());
      if (send.sparse()) { // its ids, then its rows
        f = worker.add_fetches();
        f->set_name(send.key() + "#rows");
        f->set_value(send.rows_value());
      }
    }
    if (towers_ > 1)
      towerDeviceSends_ = towerDeviceSends(worker, towers_);
    DTF_RETURN_IF_ERROR(
        build(worker, towers_ > 1 ? "worker_step (tower 0)" : "worker_step",
              &train_));
  } else {
    DTF_RETURN_IF_ERROR(build(plan.train_step(), "train_step", &train_));
    numMetrics_ = train_->numFetches();
  }
  s = BatchFeeder::bind(*train_, *data.train, data.trainLayout, &trainFeeder_);
  if (!s.isOk()) {
    setKind(kind, FailureKind::kData);
    return errorStatus("train_step: ", s.message());
  }
  trainData_ = data.train;
  trainShardedByFile_ = data.trainShardedByFile;
  if (towers_ > 1)
    DTF_RETURN_IF_ERROR(
        setUpTowers(plan, worker, *data.train, data.trainLayout, build, kind));
  if (trainFeeder_->fixedBatch() && trainFeeder_->fixedBatch() != batch_) {
    setKind(kind, FailureKind::kPlan);
    return errorStatus("train_step: the inputs take batches of ",
                       trainFeeder_->fixedBatch(), ", but the batch size is ",
                       batch_);
  }

  if (!options_.evaluate)
    data.eval = nullptr;
  if (data.eval && plan.eval().ops_size() > 0) {
    DTF_RETURN_IF_ERROR(build(plan.eval(), "eval", &eval_));
    s = BatchFeeder::bind(*eval_, *data.eval, data.evalLayout, &evalFeeder_);
    if (!s.isOk()) {
      setKind(kind, FailureKind::kData);
      return errorStatus("eval: ", s.message());
    }
    evalData_ = data.eval;
  } else if (data.eval && !options_.quiet) {
    std::fprintf(stderr, "dtf-run: warning: the plan has an eval source but "
                         "no eval program; skipping evaluation\n");
  }
  // In a cluster the ps tasks hold the variables; a worker's copies are
  // not what a checkpoint keeps.
  return options_.driver ? Status::ok() : restoreLatestCheckpoint(kind);
}

// --- Checkpoints ---------------------------------------------------------------

Status Trainer::restoreLatestCheckpoint(FailureKind *kind) {
  const std::string &dir = options_.modelDir;
  if (dir.empty())
    return Status::ok();
  if (options_.fresh) {
    std::string movedTo;
    Status s = checkpoint::moveCheckpointsAside(dir, &movedTo);
    if (!s.isOk()) {
      setKind(kind, FailureKind::kData);
      return errorStatus("--fresh: ", s.message());
    }
    if (!movedTo.empty())
      checkpointNote_ = "--fresh: moved the checkpoints of the previous run "
                        "to " + movedTo;
    return Status::ok();
  }
  int64_t step = -1;
  std::vector<std::string> skipped;
  Status s = checkpoint::findLatest(dir, &step, &skipped);
  for (const std::string &why : skipped)
    std::fprintf(stderr, "dtf-run: warning: %s: %s\n", dir.c_str(),
                 why.c_str());
  if (s.isOk() && step < 0)
    return Status::ok();
  std::unique_ptr<checkpoint::CheckpointReader> reader;
  if (s.isOk())
    s = checkpoint::CheckpointReader::open(dir, step, &reader);
  // Every variable of the model comes from the checkpoint, in place (the
  // executors point at the variables' buffers).
  for (const std::string &name : variables_.names()) {
    if (!s.isOk())
      break;
    if (dynamicTables_ && dynamicTables_->holdsVariable(name))
      continue; // its live rows, below
    if (!reader->find(name))
      s = errorStatus(
          "checkpoint ", checkpoint::checkpointName(step), " in ", dir,
          " has no variable '", name,
          "': it was saved by a different model; train in another "
          "--model-dir, or pass --fresh to start over here");
    else
      s = reader->readInto(name, variables_.find(name));
  }
  if (s.isOk() && dynamicTables_)
    s = dynamicTables_->restore(*reader, step);
  if (!s.isOk()) {
    setKind(kind, FailureKind::kData);
    // Point at an older whole checkpoint when there is one.
    std::vector<int64_t> steps;
    std::string hint;
    if (step >= 0 && checkpoint::listCheckpoints(dir, &steps).isOk())
      for (auto it = steps.rbegin(); it != steps.rend(); ++it)
        if (*it < step) {
          hint = strCat("; the previous checkpoint, ",
                        checkpoint::checkpointName(*it),
                        ", is complete: move ", dir, "/",
                        checkpoint::checkpointName(step),
                        ".* aside to restore from it, or pass --fresh to "
                        "start over");
          break;
        }
    return errorStatus("cannot restore from ", dir, ": ", s.message(), hint);
  }
  for (const checkpoint::TensorInfo &t : reader->tensors())
    if (!variables_.find(t.name) &&
        !(dynamicTables_ && dynamicTables_->savesTensor(t.name)))
      std::fprintf(stderr,
                   "dtf-run: warning: %s: checkpoint %s has a variable '%s' "
                   "that the model lacks; ignored\n",
                   dir.c_str(), checkpoint::checkpointName(step).c_str(),
                   t.name.c_str());
  startStep_ = step;
  restoredStep_ = step;
  if (train_)
    train_->reloadVariablesFromHost(); // resident variables: upload again
  for (auto &e : towerExecs_)
    e->reloadVariablesFromHost();
  if (update_)
    update_->reloadVariablesFromHost();
  checkpointNote_ = strCat("restored checkpoint ",
                           checkpoint::checkpointName(step), " from ", dir,
                           "; continuing at step ", step);
  return Status::ok();
}

Status Trainer::saveCheckpoint(int64_t step, TrainReport *report,
                               FailureKind *kind) {
  // Variables that live on a GPU between steps come down first.
  if (train_)
    DTF_RETURN_IF_ERROR(syncResidentVariables());
  std::vector<checkpoint::SavedTensor> tensors;
  for (const std::string &name : variables_.names())
    if (!dynamicTables_ || !dynamicTables_->holdsVariable(name))
      tensors.push_back(
          checkpoint::SavedTensor::whole(name, *variables_.find(name)));
  std::vector<std::unique_ptr<Tensor>> dynamicRows; // alive until written
  if (dynamicTables_)
    dynamicTables_->save(&tensors, &dynamicRows);
  const CheckpointSchedule schedule(training_, true, 0);
  Status s = checkpoint::saveCheckpoint(options_.modelDir, step, tensors,
                                        schedule.keep());
  if (!s.isOk()) {
    setKind(kind, FailureKind::kData);
    return errorStatus("cannot save a checkpoint at step ", step, ": ",
                       s.message());
  }
  report->checkpoints.push_back(step);
  return Status::ok();
}

std::string Trainer::describe() const {
  std::string s = (options_.taskName.empty() ? "" : options_.taskName + ": ") +
                  "training " +
                  (model_.empty() ? std::string("model") : model_) + ": " +
                  std::to_string(steps_) + " steps, batch " +
                  std::to_string(batch_) + ", " + std::to_string(threads_) +
                  (threads_ == 1 ? " thread" : " threads") +
                  (interOpThreads_ > 1
                       ? " (" + std::to_string(interOpThreads_) +
                             " inter-op)"
                       : std::string()) +
                  "\n  data: " + trainData_->description() + " (" +
                  trainFeeder_->describe() + ")";
  if (towers_ > 1)
    s += "\n  towers: " + towersNote_;
  if (eval_) {
    s += "\n  eval: " + evalData_->description() + " (" +
         evalFeeder_->describe() + "), ";
    s += evalEvery_ > 0 ? "every " + std::to_string(evalEvery_) + " steps"
                        : std::string("at the end");
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
  // The evaluation reads the store: resident variables come down first.
  DTF_RETURN_IF_ERROR(syncResidentVariables());
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
  while (std::optional<data::Batch> batch = (*it)->next()) {
    if (options_.stop && options_.stop->load())
      return errorStatus("interrupted");
    Status s = evalFeeder_->feed(*batch);
    if (s.isOk())
      s = feedLearningRate(*eval_, int64_t(step));
    if (s.isOk())
      s = eval_->run(step);
    if (!s.isOk()) {
      setKind(kind, FailureKind::kRuntime);
      return errorStatus("eval: ", s.message());
    }
    const double w = double(batch->size());
    for (int k = 0; k < n; ++k)
      sums[k] += w * meanValue(eval_->fetch(k));
    examples += w;
  }
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

Status Trainer::run(TrainReport *report, FailureKind *kind) {
  setKind(kind, FailureKind::kNone);
  *report = TrainReport();
  ProgressWriter writer(options_.out, options_.interactive);
  if (!options_.quiet)
    writer.line(describe());
  std::unique_ptr<summary::RunSummaries> summaries;
  DTF_RETURN_IF_ERROR(openSummaries(options_, training_, *train_, numMetrics_,
                                    &summaries, kind));
  DTF_RETURN_IF_ERROR(logLine(summaries.get(), describe(), kind));
  if (!options_.quiet && !checkpointNote_.empty())
    writer.line(checkpointNote_);
  report->restoredStep = restoredStep_;
  CheckpointSchedule checkpoints(training_,
                                 !options_.modelDir.empty() && !options_.driver,
                                 startStep_);

  const Clock::time_point start = Clock::now();
  int64_t skipBatches = 0;
  auto it = makeTrainBatches(&skipBatches);
  if (!it) {
    setKind(kind, FailureKind::kData);
    return errorStatus("data: ", it.error());
  }
  for (int64_t i = 0; i < skipBatches; ++i)
    if (!(*it)->next()) {
      setKind(kind, FailureKind::kData);
      auto err = (*it)->error();
      return errorStatus("data: ",
                         err ? err->message() : std::string("no more batches"));
    }

  const int numFetches = numMetrics_;
  std::vector<double> sums(numFetches, 0.0);
  int64_t intervalSteps = 0;
  double intervalExamples = 0, totalExamples = 0;
  double trainSeconds = 0; // time in steps, evaluation left out
  std::vector<Metric> lastTrain;
  for (int k = 0; k < numFetches; ++k)
    lastTrain.push_back({train_->fetchInfo(k).name, std::nan("")});
  if (options_.driver && !options_.quiet)
    writer.line("  program: " +
                (options_.workerProgram ? options_.workerProgram->name()
                                        : std::string("worker_step")) +
                " (" + std::to_string(train_->numRunOps()) +
                " ops), " + std::to_string(train_->numFetches() - numMetrics_) +
                " sends per step");
  Clock::time_point intervalStart = Clock::now();
  double intervalSeconds = 0;

  auto runEval = [&](int64_t step) -> Status {
    std::vector<Metric> metrics;
    Status s = options_.driver ? options_.driver->beforeEval() : Status::ok();
    if (s.isOk())
      s = evaluate(uint64_t(step), &metrics, kind);
    if (!s.isOk()) {
      if (options_.stop && options_.stop->load()) {
        setKind(kind, FailureKind::kNone);
        report->interrupted = true;
        return Status::ok();
      }
      return s;
    }
    report->evals.push_back({step, metrics});
    report->finalMetrics = metrics;
    report->finalFromEval = true;
    if (!options_.quiet)
      writer.line(evalLine(step, metrics));
    if (summaries) {
      std::vector<summary::Scalar> scalars;
      for (const Metric &m : metrics)
        scalars.push_back({m.name, m.value});
      Status w = summaries->writeEval(step, scalars);
      if (!w.isOk()) {
        setKind(kind, FailureKind::kData);
        return w;
      }
      DTF_RETURN_IF_ERROR(
          logLine(summaries.get(), evalLine(step, metrics), kind));
    }
    return Status::ok();
  };

  int64_t step = startStep_;
  // With a driver the job's global step (from the ps) counts, not this
  // process's steps: several workers advance it.
  int64_t globalStep = startStep_;
  for (;; ++step) {
    if (options_.stop && options_.stop->load()) {
      report->interrupted = true;
      break;
    }
    if (options_.driver) {
      bool jobDone = false;
      Status s = options_.driver->beforeStep(&globalStep, &jobDone);
      if (!s.isOk()) {
        setKind(kind, FailureKind::kRuntime);
        return s;
      }
      if (jobDone || globalStep >= steps_)
        break;
      s = options_.driver->startStep(globalStep);
      if (!s.isOk()) {
        setKind(kind, FailureKind::kRuntime);
        return s;
      }
    } else {
      if (step >= steps_)
        break;
      globalStep = step;
    }
    const Clock::time_point stepStart = Clock::now();
    std::optional<data::Batch> batch = (*it)->next();
    if (!batch) {
      setKind(kind, FailureKind::kData);
      auto err = (*it)->error();
      return errorStatus("data: ",
                         err ? err->message() : std::string("no more batches"));
    }
    Status s = runStep(*batch, globalStep);
    if (!s.isOk() && options_.driver && options_.driver->dropStep(s))
      continue;
    if (!s.isOk()) {
      setKind(kind, FailureKind::kRuntime);
      return errorStatus("step ", globalStep + 1, ": ", s.message());
    }
    if (dynamicTables_)
      dynamicTables_->sweep(globalStep + 1);
    if (options_.driver) {
      s = options_.driver->afterStep(*train_, numMetrics_);
      if (!s.isOk()) {
        setKind(kind, FailureKind::kRuntime);
        return s;
      }
    }
    for (int k = 0; k < numFetches; ++k)
      sums[k] += meanValue(train_->fetch(k));
    ++intervalSteps;
    intervalExamples += double(batch->size());
    totalExamples += double(batch->size());

    const int64_t done = globalStep + 1;
    if (summaries)
      DTF_RETURN_IF_ERROR(summarizeStep(*summaries, *train_, numMetrics_,
                                        training_, done, done == steps_,
                                        double(batch->size()),
                                        secondsSince(stepStart), kind));
    const bool logNow = options_.driver ? (step + 1) % logEvery_ == 0
                                        : done % logEvery_ == 0 || done == steps_;
    const bool evalNow =
        eval_ && evalEvery_ > 0 && done % evalEvery_ == 0 && done != steps_;
    const bool saveNow = checkpoints.due(done) && done != steps_;
    if (logNow || evalNow || saveNow) {
      const double dt = secondsSince(intervalStart);
      intervalSeconds += dt;
      trainSeconds += dt;
      intervalStart = Clock::now();
    }
    if (logNow) {
      for (int k = 0; k < numFetches; ++k)
        lastTrain[k].value = sums[k] / double(intervalSteps);
      report->progress.push_back({done, lastTrain});
      const double rate =
          intervalSeconds > 0 ? intervalExamples / intervalSeconds : 0;
      const double eta =
          trainSeconds / double(done - startStep_) * double(steps_ - done);
      if (!options_.quiet)
        writer.progress(progressLine(done, steps_, lastTrain, rate, eta));
      DTF_RETURN_IF_ERROR(
          logLine(summaries.get(),
                  progressLine(done, steps_, lastTrain, rate, eta), kind));
      std::fill(sums.begin(), sums.end(), 0.0);
      intervalSteps = 0;
      intervalExamples = 0;
      intervalSeconds = 0;
    }
    if (saveNow) {
      DTF_RETURN_IF_ERROR(saveCheckpoint(done, report, kind));
      checkpoints.saved(done);
      intervalStart = Clock::now();
    }
    if (evalNow) {
      DTF_RETURN_IF_ERROR(runEval(done));
      if (report->interrupted) {
        ++step;
        break;
      }
      intervalStart = Clock::now();
    }
  }
  if (intervalSteps > 0) {
    // Interrupted between reports: the partial interval's means.
    trainSeconds += secondsSince(intervalStart);
    for (int k = 0; k < numFetches; ++k)
      lastTrain[k].value = sums[k] / double(intervalSteps);
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
    DTF_RETURN_IF_ERROR(runEval(options_.driver ? globalStep : step));
  if (!report->finalFromEval || report->interrupted) {
    report->finalMetrics = lastTrain;
    report->finalFromEval = false;
  }
  report->seconds = secondsSince(start);
  report->examplesPerSec = trainSeconds > 0 ? totalExamples / trainSeconds : 0;
  report->finalLine = finalLine(report->steps, report->finalMetrics,
                                report->examplesPerSec, report->seconds);
  if (options_.profile) {
    std::fflush(options_.out);
    std::fputs(profileReport(train_->profile(), report->steps).c_str(), stderr);
  }
  if (dynamicTables_ && !options_.quiet)
    std::fprintf(stderr, "dtf-run: dynamic tables: %s\n",
                 dynamicTables_->describe().c_str());
  writer.line(report->finalLine);
  if (summaries) {
    // An interrupted run's last partial interval, then the final line.
    const int64_t last = options_.driver ? globalStep : step;
    Status s = summaries->write(last, summaryLearningRate(training_, last));
    if (s.isOk())
      s = logLine(summaries.get(), report->finalLine, kind);
    if (s.isOk())
      s = summaries->close();
    if (!s.isOk()) {
      setKind(kind, FailureKind::kData);
      return s;
    }
  }
  return Status::ok();
}

Status train(const plan::Plan &plan, const TrainOptions &options,
             TrainReport *report, FailureKind *kind) {
  std::unique_ptr<Trainer> trainer;
  DTF_RETURN_IF_ERROR(Trainer::create(plan, options, &trainer, kind));
  return trainer->run(report, kind);
}

} // namespace dtf::train
