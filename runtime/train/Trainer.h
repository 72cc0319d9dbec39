// Trainer: the single-machine training loop of `dtf-run plan.bin` (the
// embedded default): variables, data, steps, progress, evaluation.
#pragma once

#include "runtime/core/ThreadPool.h"
#include "runtime/data/BatchIterator.h"
#include "runtime/data/EpochBatches.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/VariableStore.h"
#include "runtime/train/DynamicTable.h"
#include "runtime/train/Feeding.h"
#include "runtime/train/Progress.h"
#include "runtime/train/Schedule.h"
#include "schema/Status.h"

#include "plan.pb.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace dtf::gpu {
class TowerAllReduce;
} // namespace dtf::gpu

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

/// Sets *kind when the caller asked for it (kind may be null).
inline void setKind(FailureKind *kind, FailureKind value) {
  if (kind)
    *kind = value;
}

/// What a distributed task plugs into the training loop: it brings the
/// variables in before each step (a pull from the ps tasks) and ships the
/// step's sends out after it (a push), and says when the job is done.
class StepDriver {
public:
  virtual ~StepDriver() = default;
  /// Before a step: fills the trainer's variable store with the variables the
  /// step reads. Sets *globalStep to the job's step these values belong to,
  /// and *done once the job has reached its step count (no step is run).
  virtual Status beforeStep(int64_t *globalStep, bool *done) = 0;
  /// After the step ran: its sends are fetches [firstSend, numFetches) of
  /// `executor`, named by their rendezvous keys. `withhold`: the step's
  /// dtf.skip_updates_unless found a gradient not finite (mixed_float16's
  /// dynamic loss scale), so the sends marked skippable stay here.
  virtual Status afterStep(exec::Executor &executor, int firstSend,
                           bool withhold) = 0;
  /// Before an evaluation: the variables the eval program reads.
  virtual Status beforeEval() { return Status::ok(); }
  /// The trainer will run a step at `globalStep` (called after beforeStep
  /// when the job is not done).
  virtual Status startStep(int64_t globalStep) {
    (void)globalStep;
    return Status::ok();
  }
  /// A step whose run failed with `failure`: true drops it (no afterStep)
  /// and goes on with the next, whose beforeStep recovers; false fails.
  virtual bool dropStep(const Status &failure) {
    (void)failure;
    return false;
  }
  /// Exactly-once data (docs/elastic.md): whether the driver says which
  /// batch each step trains on, instead of the worker's static shard.
  virtual bool leasesData() const { return false; }
  /// The number of the batch the next step trains on (batch b of epoch e is
  /// e * batchesPerEpoch + b of the epochs' shuffled orders), leased for this
  /// step; *done when every batch of the job (`steps` updates) is applied.
  virtual Status nextDataBatch(int64_t examples, int64_t batch,
                               int64_t batchesPerEpoch, int64_t steps,
                               int64_t *number, bool *done) {
    (void)examples, (void)batch, (void)batchesPerEpoch, (void)steps;
    (void)number, (void)done;
    return errorStatus("this driver hands out no data");
  }
};

/// The inter-op threads when neither dtf-run --inter-op-threads nor the plan's
/// session sets them: 1 (program order). Measured on 2 cores (bench/results/
/// inter-op.md), a second inter-op thread did not speed up the seed CNN: its
/// ops are mostly a chain, and the large ones already use the intra-op
/// threads, so extra threads only compete for the same cores.
constexpr int kDefaultInterOpThreads = 1;

struct TrainOptions {
  /// Steps to train; < 0: Training.steps.
  int64_t steps = -1;
  /// A progress line every N steps; <= 0: Training.summary_every when its
  /// unit is steps, else 100.
  int64_t logEvery = 0;
  /// Intra-op threads (also oneDNN's OpenMP threads); <= 0:
  /// SessionOptions.intra_op_threads, else every core.
  int threads = 0;
  /// Inter-op threads: ops of a step that do not depend on each other run
  /// concurrently on this many threads (the caller's included); 1 runs them
  /// in program order. <= 0: SessionOptions.inter_op_threads, and when that
  /// is 0 too, kDefaultInterOpThreads.
  int interOpThreads = 0;
  /// Only the final line (and errors).
  bool quiet = false;
  /// Time every op of the train_step and print where the time went to
  /// stderr at the end.
  bool profile = false;
  std::FILE *out = stdout;
  /// The run's directory (dtf-run --model-dir): checkpoints, summaries
  /// (TensorBoard event files) and the training log go there; "" writes none.
  std::string modelDir;
  /// With a modelDir that holds checkpoints: start from the initializers
  /// anyway, after moving the old checkpoints into modelDir/previous-run-K
  /// (never deleting them). Without: restore the latest and continue.
  bool fresh = false;
  /// Which checkpoint of modelDir to restore (dtf-run --restore): the newest,
  /// which must be whole (a damaged one stops the run), or with kLatestValid
  /// the newest whole one (with a warning naming each one passed over).
  checkpoint::RestorePolicy restore = checkpoint::RestorePolicy::kLatest;
  /// This task's name in the run's directory: scalars go to
  /// `<modelDir>/<summaryTask>/`, the log to `<modelDir>/<summaryTask>.log`
  /// ("worker.0"... in a cluster); evaluations go to `<modelDir>/eval/`.
  std::string summaryTask = "train";
  /// Redraw progress in place: 1 yes, 0 no, -1 when `out` is a terminal.
  int interactive = -1;
  /// Set (by a SIGINT handler) to stop after the current step.
  const std::atomic<bool> *stop = nullptr;
  /// Distributed training (ps/worker): the loop runs the plan's worker_step
  /// and the driver moves variables and updates; null: train_step alone.
  StepDriver *driver = nullptr;
  /// With a driver: the program to run instead of the plan's worker_step
  /// (stage 0 of a model-parallel replica), and where its dtf.send and
  /// dtf.recv ops meet the other stages.
  const plan::Program *workerProgram = nullptr;
  exec::Rendezvous *rendezvous = nullptr;
  /// Where the worker_step's dtf.ps_gather ops get their rows (the ps
  /// driver, between-graph).
  exec::RowLookup *rowLookup = nullptr;
  /// Examples per step instead of the plan's batch (an in-graph tower's
  /// share); 0: the plan's.
  int64_t batch = 0;
  /// In-graph towers over this task's GPUs (dtf-run --gpu-towers); 0: the
  /// plan's SessionOptions.gpu_towers. With N > 1 the worker_step runs once
  /// per tower on its share of each batch, tower k's GPU ops on GPU
  /// k * span (span: the GPUs one copy of the model uses), and the towers'
  /// gradients are averaged (NCCL over 2 or more GPUs) before the one update
  /// or push of the step (runtime/train/Towers.cpp).
  int gpuTowers = 0;
  /// Added to the plan's seed for dropout, so that workers draw different
  /// masks.
  uint64_t seedOffset = 0;
  /// Between-graph replication: this worker reads shard shardIndex of
  /// shardCount of every epoch (disjoint shards, the same shuffle).
  size_t shardIndex = 0;
  size_t shardCount = 1;
  /// Evaluate (every N steps and at the end) when the plan has an eval set;
  /// in a cluster only the chief does.
  bool evaluate = true;
  /// Evaluate on the eval set's first N batches (Keras' evaluate(steps=N),
  /// an EvalSpec's steps); 0: all of it.
  int64_t evalSteps = 0;
  /// What the start-up line calls this process ("worker.1"); "" for one.
  std::string taskName;
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
  /// The step of the checkpoint the run continued from, or -1.
  int64_t restoredStep = -1;
  /// The steps of the checkpoints this run saved, in order.
  std::vector<int64_t> checkpoints;
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

  /// One step outside run()'s loop (an in-graph tower): pulls through the
  /// driver, feeds the next batch, runs, and leaves the fetches in the
  /// executor. *examples is the batch's size.
  Status runTowerStep(int64_t *globalStep, int64_t *examples);
  /// The fetches before the sends (loss and metrics).
  int numMetrics() const { return numMetrics_; }

  /// The start-up line: model, steps, batch, data, threads.
  std::string describe() const;

  exec::VariableStore &variables() { return variables_; }
  /// The dynamic tables among the variables; null when there are none.
  DynamicTables *dynamicTables() { return dynamicTables_.get(); }
  exec::Executor &trainExecutor() { return *train_; }
  /// In-graph towers over the task's GPUs (1: none), and the executor of
  /// tower k (0: trainExecutor()).
  int numTowers() const { return towers_; }
  exec::Executor &towerExecutor(int k) {
    return k == 0 ? *train_ : *towerExecs_[size_t(k - 1)];
  }
  /// Null without an eval program and eval data.
  exec::Executor *evalExecutor() { return eval_.get(); }

private:
  Trainer() = default;
  using BuildFn =
      std::function<Status(const plan::Program &, const std::string &,
                           std::unique_ptr<exec::Executor> *, int)>;
  // Set-up (Trainer.cpp): setUp reads the options and calls the others in
  // this order.
  Status setUp(const plan::Plan &plan, FailureKind *kind);
  void setUpThreads(const plan::Plan &plan);
  Status setUpVariables(const plan::Plan &plan, FailureKind *kind);
  Status openData(const plan::Plan &plan, PlanData *data, FailureKind *kind);
  // An executor of `program` on this trainer's variables and threads, its
  // GPU ops `gpuOffset` GPUs further (a tower's).
  Status buildExecutor(const plan::Plan &plan, const plan::Program &program,
                       const std::string &name,
                       std::unique_ptr<exec::Executor> *out, int gpuOffset,
                       FailureKind *kind);
  // train_ (the train_step, or the worker_step with its sends as fetches),
  // its feeder, and the towers.
  Status setUpTrainProgram(const plan::Plan &plan, const PlanData &data,
                           const BuildFn &build, FailureKind *kind);
  // eval_ and its feeder, when there are an eval program and eval data.
  Status setUpEval(const plan::Plan &plan, PlanData *data, const BuildFn &build,
                   FailureKind *kind);

  // The loop (TrainLoop.cpp): run() carries a RunState from step to step.
  struct RunState;
  // The start-up line, the summaries and the restored checkpoint's note.
  Status startRun(RunState &r);
  // The train batches, past those a restored run already used.
  Status openRunBatches(RunState &r);
  // The first progress interval (and a worker's line on its program).
  void startIntervals(RunState &r);
  // The global step of loop step `step`: the job's with a driver, else
  // `step`. *finished once the job has reached its step count.
  Status nextGlobalStep(int64_t step, int64_t *globalStep, bool *finished,
                        FailureKind *kind);
  // A step that ran and whose results the loop has not taken yet; with
  // late fetches (exec::Executor::fetchesLate) the loop takes step N's
  // after step N+1 is queued. *stop: an evaluation was interrupted.
  struct StepDone;
  Status finishStep(RunState &r, const StepDone &d, bool *stop);
  // The progress line at global step `done`; a new interval starts.
  Status reportProgress(RunState &r, int64_t done);
  // An evaluation at `step`, printed and written to the summaries.
  Status reportEval(RunState &r, int64_t step);
  // The report's final metrics and line, --profile's report, and the
  // summaries' last interval at `lastStep`.
  Status finishRun(RunState &r, int64_t lastStep);
  Status feedLearningRate(exec::Executor &e, int64_t step);
  // Downloads the variables (and slots) that live on GPUs into the store:
  // train_'s, and with towers ps_update's.
  Status syncResidentVariables();
  // Towers (Towers.cpp): builds towers 1..N-1 beside train_ (tower 0), their
  // feeders, the all-reduce and, in one process, the update program.
  Status setUpTowers(const plan::Plan &plan, const plan::Program &worker,
                     const data::Dataset &data, const FeedLayout &layout,
                     const BuildFn &build, FailureKind *kind);
  // A worker's towers: which pulled variables go up to tower 0's GPU and
  // from there to the others' (ncclBroadcast), and which up to every tower.
  void shareTowerPulls(const std::vector<int> &gpus);
  // One process's towers: the update program (the plan's ps_update) that
  // applies the averaged sends, and which variables stay on the GPUs.
  Status setUpTowerUpdate(const plan::Plan &plan, const std::vector<int> &gpus,
                          const BuildFn &build);
  // The float32 sends of `worker` that the towers keep on their GPUs for
  // the all-reduce (none when the sum runs on the host).
  static std::set<std::string> towerDeviceSends(const plan::Program &worker,
                                                int towers);
  // One step's feed and run: train_ alone, or every tower on its share of
  // `batch`, their metrics and gradients combined into train_'s fetches and,
  // without a driver, the update applied.
  Status runStep(const data::Batch &batch, int64_t globalStep);
  // The next step's batch: the driver's leased one (exactly-once data), or
  // the next of r.batches. *finished when the driver has none left.
  Status nextBatch(RunState &r, data::Batch *batch, bool *finished);
  data::Expected<std::unique_ptr<data::BatchIterator>>
  makeTrainBatches(int64_t *skipBatches);
  // Checkpoints (options_.modelDir, Checkpoints.cpp): restore at set-up,
  // save during run().
  Status restoreLatestCheckpoint(FailureKind *kind);
  Status saveCheckpoint(int64_t step, TrainReport *report, FailureKind *kind);

  TrainOptions options_;
  plan::Training training_;
  std::string model_;
  int64_t steps_ = 0;
  int64_t batch_ = 0;
  int64_t logEvery_ = 100;
  int64_t evalEvery_ = 0;
  int threads_ = 1;
  int interOpThreads_ = 1;
  int numMetrics_ = 0;
  std::unique_ptr<data::BatchIterator> towerBatches_;
  // Exactly-once data: batches by the numbers the driver leases.
  std::unique_ptr<data::EpochBatches> ledgerBatches_;
  std::unique_ptr<ThreadPool> pool_;
  // Separate from pool_: a kernel's parallel-for on the intra-op pool never
  // waits for an inter-op thread (ThreadPool runs nested work inline).
  std::unique_ptr<ThreadPool> interOpPool_;
  exec::VariableStore variables_;
  // The dynamic tables among them (embedding(vocab = dynamic)); null when
  // the model has none.
  std::unique_ptr<DynamicTables> dynamicTables_;
  std::unique_ptr<exec::Executor> train_, eval_;
  std::shared_ptr<const data::Dataset> trainData_, evalData_;
  bool trainShardedByFile_ = false;
  std::unique_ptr<BatchFeeder> trainFeeder_, evalFeeder_;
  // Towers: 1 without; towers 1..N-1 and their feeders (tower 0 is train_
  // with trainFeeder_), the gradients' all-reduce, and in one process the
  // update program (the plan's ps_update) that applies the averaged sends.
  int towers_ = 1;
  std::vector<std::unique_ptr<exec::Executor>> towerExecs_;
  std::vector<std::unique_ptr<BatchFeeder>> towerFeeders_;
  /// One thread per tower: the towers' steps run at the same time, each
  /// queueing its own GPU's work.
  std::unique_ptr<ThreadPool> towerPool_;
  std::unique_ptr<gpu::TowerAllReduce> allReduce_;
  std::vector<int> reducedSends_;          // fetch indices of the f32 sends
  std::set<std::string> towerDeviceSends_; // kept on the towers' GPUs
  // One process with NCCL: tower 0's device copies of the variables, which
  // ps_update updates in place (name -> GPU, pointer); per variable that
  // the update writes there, its copy on every tower's GPU (broadcast from
  // tower 0's after each update) and its size. A worker with NCCL: the
  // pulled variables every tower keeps on its first GPU, broadcast from
  // tower 0's copy before each step.
  std::map<std::string, std::pair<int, uint64_t>, std::less<>> updateShared_;
  // One process on one GPU: the training's resident variables (updated in
  // place on the GPU), which the evaluation's GPU ops read there instead of
  // uploading every variable for every eval batch.
  std::map<std::string, std::pair<int, uint64_t>, std::less<>> evalShared_;
  std::vector<std::vector<uint64_t>> broadcast_;
  std::vector<size_t> broadcastBytes_;
  std::unique_ptr<exec::Executor> update_;
  // (fetch index of a send, update_'s feed of it), found once at load.
  std::vector<std::pair<int, int>> updateFeeds_;
  std::string towersNote_;
  // The training step's ops marked bf16 (mixed precision): on the CPU, and
  // placed on a GPU (where they compute in f32).
  int bf16Products_ = 0, bf16OnGpu_ = 0; // bf16 or f16 products
  int lowRecurrent_ = 0;                  // of them LSTM/GRU ops
  std::string lowDtype_;                   // "bf16", "f16" or none
  // Checkpoints: the step training starts from (the restored one, else 0)
  // and what restoreLatestCheckpoint did, for run() to print.
  int64_t startStep_ = 0;
  int64_t restoredStep_ = -1;
  std::string checkpointNote_;
};

/// Trainer::create and run in one call.
Status train(const plan::Plan &plan, const TrainOptions &options,
             TrainReport *report, FailureKind *kind = nullptr);

/// The registry of every CPU kernel, made once.
const KernelRegistry &cpuKernelRegistry();

/// Sets oneDNN's OpenMP thread count (when OpenMP is loaded at all).
void setOpenMpThreadCount(int n);

/// The report of --profile: the train_step's time by op kind and its
/// slowest ops.
std::string profileReport(const std::vector<exec::OpProfile> &ops,
                          int64_t steps);

/// The mean of a fetched tensor's elements as a double (a scalar's value);
/// NaN for an empty or non-numeric tensor.
double meanValue(const Tensor &t);

} // namespace dtf::train
