// Setting up a Trainer: threads, variables, data, the executors of its
// programs, and the start-up line.
#include "runtime/train/Trainer.h"
#include "schema/DeviceName.h"
#include "dtf/OpNames.h"

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
#include <map>
#include <set>
#include <thread>

namespace dtf::train {
namespace {

// The CPU of a cluster task ("worker.1"), as log_device_placement names it:
// /job:worker/replica:0/task:1/device:CPU:0.
std::string taskDevice(const std::string &task) {
  const std::string::size_type dot = task.rfind('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == task.size())
    return exec::kLocalCpuDevice;
  return "/job:" + task.substr(0, dot) +
         "/replica:0/task:" + task.substr(dot + 1) + "/device:CPU:0";
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
    if (n == dtf::ops::kInput || n == dtf::ops::kConstant ||
        n == dtf::ops::kReadVariable || n == dtf::ops::kAssignAdd ||
        n == dtf::ops::kSend || n == dtf::ops::kRecv)
      continue;
    if (!kernels.lookup(n))
      return true;
  }
  return false;
}

// The plan with only the variables a worker holds: those its programs read
// (and the global step). An embedding table looked up on the ps is never
// allocated there.
plan::Plan heldVariables(const plan::Plan &plan,
                         const plan::Program *workerProgram) {
  plan::Plan held = plan;
  std::set<std::string> read;
  for (const plan::Program *p :
       {workerProgram ? workerProgram : &plan.worker_step(), &plan.eval()})
    for (const plan::Op &op : p->ops())
      if (op.name() == dtf::ops::kReadVariable && op.attrs().count("name"))
        read.insert(op.attrs().at("name").s());
  for (const plan::Variable &v : plan.variables())
    if (read.count(v.name()) && v.role() == "moving_average")
      read.insert(v.slot_of()); // an average starts at its variable
  held.clear_variables();
  for (const plan::Variable &v : plan.variables())
    if (read.count(v.name()) || v.role() == "global_step")
      *held.add_variables() = v;
  return held;
}

// A worker's program with its sends as fetches after the loss and metrics
// (a sparse send: its ids, then its rows).
plan::Program withSendsAsFetches(const plan::Program &program) {
  plan::Program worker = program;
  for (const plan::Transfer &send : worker.sends()) {
    plan::Fetch *f = worker.add_fetches();
    f->set_name(send.key());
    f->set_value(send.value());
    if (send.sparse()) {
      f = worker.add_fetches();
      f->set_name(send.key() + "#rows");
      f->set_value(send.rows_value());
    }
  }
  return worker;
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
  // dtf-mixed-precision's products (compute_dtype "bf16"), said at start so
  // a log shows which precision a task trained in.
  // Those placed on a GPU run on cublasGemmEx and cuDNN's tensor ops.
  bf16Products_ = bf16OnGpu_ = lowRecurrent_ = 0;
  lowDtype_.clear();
  for (const plan::Op &op : plan.train_step().ops()) {
    auto it = op.attrs().find("compute_dtype");
    if (it == op.attrs().end() ||
        (it->second.s() != "bf16" && it->second.s() != "f16"))
      continue;
    lowDtype_ = it->second.s();
    DeviceNameParse device = parseDeviceName(op.device());
    if (device.name && device.name->type == DeviceType::GPU)
      ++bf16OnGpu_;
    else
      ++bf16Products_;
    lowRecurrent_ += plan::isRecurrentLayerOp(op.name());
  }
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

  setUpThreads(plan);
  DTF_RETURN_IF_ERROR(setUpVariables(plan, kind));
  PlanData data;
  DTF_RETURN_IF_ERROR(openData(plan, &data, kind));
  const BuildFn build =
      [&](const plan::Program &program, const std::string &name,
          std::unique_ptr<exec::Executor> *out, int gpuOffset) {
        return buildExecutor(plan, program, name, out, gpuOffset, kind);
      };
  DTF_RETURN_IF_ERROR(setUpTrainProgram(plan, data, build, kind));
  DTF_RETURN_IF_ERROR(setUpEval(plan, &data, build, kind));
  // In a cluster the ps tasks hold the variables; a worker's copies are
  // not what a checkpoint keeps.
  return options_.driver ? Status::ok() : restoreLatestCheckpoint(kind);
}

void Trainer::setUpThreads(const plan::Plan &plan) {
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
  int interOp = options_.interOpThreads > 0 ? options_.interOpThreads
                                            : plan.session().inter_op_threads();
  if (interOp <= 0)
    interOp = kDefaultInterOpThreads;
  interOpThreads_ = interOp;
  if (interOp > 1) {
    // OpenMP's thread count is per thread, and a new thread starts from the
    // default: oneDNN's kernels must see the count set above on every
    // inter-op thread, or they split (and sum) their work differently there
    // and the results would depend on the schedule.
    const int ompThreads =
        options_.threads > 0 || plan.session().intra_op_threads() > 0 ? threads
                                                                      : 0;
    interOpPool_ = std::make_unique<ThreadPool>(interOp, [ompThreads] {
      if (ompThreads > 0)
        setOpenMpThreads(ompThreads);
    });
  }
}

Status Trainer::setUpVariables(const plan::Plan &plan, FailureKind *kind) {
  plan::Plan held;
  if (options_.driver)
    held = heldVariables(plan, options_.workerProgram);
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
  return Status::ok();
}

Status Trainer::openData(const plan::Plan &plan, PlanData *data,
                         FailureKind *kind) {
  // The plan's sources unless the caller gave datasets.
  if (options_.trainData) {
    data->train = options_.trainData;
    data->trainLayout = options_.trainLayout;
    data->eval = options_.evalData;
    data->evalLayout = options_.evalLayout;
    return Status::ok();
  }
  Status s = openPlanData(
      plan, data,
      {options_.shardIndex, std::max<size_t>(options_.shardCount, 1)});
  if (!s.isOk())
    setKind(kind, FailureKind::kData);
  return s;
}

Status Trainer::buildExecutor(const plan::Plan &plan,
                              const plan::Program &program,
                              const std::string &name,
                              std::unique_ptr<exec::Executor> *out,
                              int gpuOffset, FailureKind *kind) {
  const KernelRegistry &kernels = cpuKernelRegistry();
  exec::ExecutorOptions o;
  o.gpuOffset = gpuOffset;
  o.intraOpPool = pool_.get();
  o.interOpPool = interOpPool_.get();
  exec::applySessionOptions(plan, &o);
  if (options_.driver)
    o.device = taskDevice(options_.summaryTask);
  o.seed = uint64_t(training_.seed()) + options_.seedOffset;
  o.programName = name;
  o.rendezvous = options_.rendezvous;
  o.rowLookup = options_.rowLookup;
  o.dynamicRows = dynamicTables_.get();
  o.profile = options_.profile && name != "eval";
  // One process, one executor of the step: the loss and metrics may come
  // down one step late (never a worker's sends nor the towers' gradients).
  // The evaluation's metrics likewise, one batch late (Trainer::evaluate
  // awaits every batch before it returns).
  o.lateFetches =
      (name == "train_step" && !options_.driver && towers_ <= 1) ||
      name == "eval";
  if (name.rfind("worker_step (tower ", 0) == 0) {
    o.deviceFetches = towerDeviceSends_;
    // The variables the towers' GPUs read stay there: updated on GPU 0
    // and broadcast (one process), or uploaded to GPU 0 after each pull
    // and broadcast (a worker).
    o.residentReads = !towerDeviceSends_.empty();
  }
  if (name == "eval" && !evalShared_.empty()) {
    o.residentReads = true;
    o.sharedResident = evalShared_;
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
}

Status Trainer::setUpTrainProgram(const plan::Plan &plan, const PlanData &data,
                                  const BuildFn &build, FailureKind *kind) {
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
    const plan::Program &step =
        options_.workerProgram ? *options_.workerProgram : plan.worker_step();
    // mixed_float16's dynamic loss scale: a ps/worker task runs it (the
    // worker withholds a non-finite step's gradients, the ps skips and
    // halves); towers and the stages of a model-parallel replica would need
    // the flag carried between them: not built.
    for (const plan::Op &op : step.ops())
      if (op.name() == dtf::ops::kSkipUpdatesUnless &&
          (towers_ > 1 || plan.stages_size() > 1 ||
           plan.training().replication() == "in_graph")) {
        setKind(kind, FailureKind::kPlan);
        return errorStatus(
            "this plan trains with mixed_float16's dynamic loss scale, which "
            "dtf-run runs in one process or on ps/worker tasks only for now (",
            towers_ > 1 ? "not on GPU towers"
            : plan.stages_size() > 1
                ? "not over the stages of a model-parallel replica"
                : "not with in_graph replication",
            "): run it without towers or stages, or compile with "
            "`loss_scale = 1024` (a fixed scale) or "
            "--precision=mixed_bfloat16");
      }
    numMetrics_ = step.fetches_size();
    worker = withSendsAsFetches(step);
    if (towers_ > 1)
      towerDeviceSends_ = towerDeviceSends(worker, towers_);
    DTF_RETURN_IF_ERROR(
        build(worker, towers_ > 1 ? "worker_step (tower 0)" : "worker_step",
              &train_, 0));
  } else {
    DTF_RETURN_IF_ERROR(build(plan.train_step(), "train_step", &train_, 0));
    numMetrics_ = train_->numFetches();
  }
  Status s =
      BatchFeeder::bind(*train_, *data.train, data.trainLayout, &trainFeeder_);
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
  return Status::ok();
}

Status Trainer::setUpEval(const plan::Plan &plan, PlanData *data,
                          const BuildFn &build, FailureKind *kind) {
  if (!options_.evaluate)
    data->eval = nullptr;
  if (data->eval && plan.eval().ops_size() > 0) {
    // Towers and workers upload or receive their copies every step: only
    // a lone GPU's copies (updated in place) are current between steps.
    if (towers_ <= 1 && !options_.driver && train_)
      evalShared_ = train_->deviceCurrentVariables();
    DTF_RETURN_IF_ERROR(build(plan.eval(), "eval", &eval_, 0));
    Status s =
        BatchFeeder::bind(*eval_, *data->eval, data->evalLayout, &evalFeeder_);
    if (!s.isOk()) {
      setKind(kind, FailureKind::kData);
      return errorStatus("eval: ", s.message());
    }
    evalData_ = data->eval;
  } else if (data->eval && !options_.quiet) {
    std::fprintf(stderr, "dtf-run: warning: the plan has an eval source but "
                         "no eval program; skipping evaluation\n");
  }
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
                       ? " (" + std::to_string(interOpThreads_) + " inter-op)"
                       : std::string()) +
                  "\n  data: " + trainData_->description() + " (" +
                  trainFeeder_->describe() + ")";
  if (bf16Products_ + bf16OnGpu_ > 0)
    s += "\n  precision: " +
         std::string(lowDtype_ == "f16" ? "mixed_float16" : "mixed_bfloat16") +
         ": " + plan::lowPrecisionOpsPhrase(bf16Products_ + bf16OnGpu_, lowRecurrent_) +
         " compute in " + lowDtype_ +
         " (f32 accumulation), variables and updates f32" +
         (bf16OnGpu_ ? "; " + std::to_string(bf16OnGpu_) +
                           " of them on a GPU (cuBLAS and cuDNN, tensor-op "
                           "math)"
                     : std::string());
  if (const Tensor *scale = variables_.find("loss_scale");
      scale && scale->dtype() == DType::F32) {
    // The scale the run starts from: the initial one, or a checkpoint's. A
    // worker has not pulled yet: its ps holds (and restores) the scale.
    char value[32];
    std::snprintf(value, sizeof value, "%.9g", double(*scale->data<float>()));
    s += std::string("\n  loss scale: ") +
         (options_.driver
              ? std::string("held by the ps (the plan starts it at ") + value +
                    ")"
              : std::string(value)) +
         (train_ && train_->guardsUpdates()
              ? " (dynamic: a step with a non-finite gradient is skipped and "
                "halves it)"
              : " (fixed)");
  }
  if (towers_ > 1)
    s += "\n  towers: " + towersNote_;
  if (eval_) {
    s += "\n  eval: " + evalData_->description() + " (" +
         evalFeeder_->describe() + "), ";
    s += evalEvery_ > 0 ? "every " + std::to_string(evalEvery_) + " steps"
                        : std::string("at the end");
    if (options_.evalSteps > 0)
      s += ", on its first " + std::to_string(options_.evalSteps) +
           " batches (--eval-steps)";
  }
  return s;
}

Status train(const plan::Plan &plan, const TrainOptions &options,
             TrainReport *report, FailureKind *kind) {
  std::unique_ptr<Trainer> trainer;
  DTF_RETURN_IF_ERROR(Trainer::create(plan, options, &trainer, kind));
  return trainer->run(report, kind);
}

} // namespace dtf::train