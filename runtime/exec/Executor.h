// Executor: runs one program of a plan (train_step or eval) step after step,
// with one kernel context per op built once at load time.
#pragma once

#include "runtime/core/Tensor.h"
#include "runtime/exec/PlanKernels.h"
#include "runtime/exec/VariableStore.h"
#include "runtime/kernels/Kernel.h"
#include "schema/Status.h"

#include "plan.pb.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dtf {
class ThreadPool;
namespace device {
class CpuDevice;
class Device;
class Event;
class Graph;
} // namespace device
} // namespace dtf

namespace dtf::exec {

class Rendezvous;
class RowLookup;
class DynamicRows;

/// The one device of a single-machine dtf-run process, as
/// log_device_placement names it (TensorFlow's spelling).
inline constexpr const char *kLocalCpuDevice =
    "/job:localhost/replica:0/task:0/device:CPU:0";

struct ExecutorOptions {
  /// The intra-op pool handed to every kernel; null runs each kernel on the
  /// calling thread.
  ThreadPool *intraOpPool = nullptr;
  /// Inter-op parallelism: with a pool of more than one thread, ops whose
  /// dependencies are done run concurrently on its threads and the caller's.
  /// Null or one thread: the ops run in program order on the calling thread.
  /// Must not be the intra-op pool. Kernels running on its worker threads
  /// run their parallel-fors inline (ThreadPool's nesting rule), so the two
  /// pools never wait on each other.
  ThreadPool *interOpPool = nullptr;
  /// The run's seed (Training.seed), given to random ops with the step.
  uint64_t seed = 0;
  /// How messages name the program: "train_step", "plan.bin: eval".
  std::string programName = "program";
  /// Time every op (two clock reads per op and step); see profile().
  bool profile = false;
  /// The plan's generated kernels (applySessionOptions sets them): what
  /// dtf.fused ops run, or their bodies when these run op by op. A program
  /// with dtf.fused ops fails to load without them.
  std::shared_ptr<const PlanKernels> planKernels;

  /// Placement (SessionOptions; see applySessionOptions). An op placed on a
  /// device this process lacks (a GPU: this build has CPU kernels only), by
  /// its own device or its variable's, fails the load unless softPlacement,
  /// which runs it on `device` with a one-line note to `log`.
  bool softPlacement = false;
  /// Print each op of the program and its device to `log` once, at load.
  bool logDevicePlacement = false;
  /// GPU matmuls and convolutions may compute f32 in TF32 (the plan's
  /// session(allow_tf32 = true)).
  bool allowTf32 = false;
  /// The full name of the device the ops run on.
  std::string device = kLocalCpuDevice;
  /// Variable name -> Variable.device ("" or absent: not pinned).
  std::map<std::string, std::string, std::less<>> variableDevices;
  std::FILE *log = stderr;
  /// Where the program's dtf.send and dtf.recv ops (a stage of a
  /// model-parallel replica) meet the other stages; a program with such ops
  /// fails to load without one. Such a program runs in program order, which
  /// is what keeps the stages from deadlocking (plan::stageProgramFor).
  Rendezvous *rendezvous = nullptr;
  /// Where the program's dtf.ps_gather ops get their rows (between-graph
  /// training with tables looked up on the ps); a program with such ops
  /// fails to load without one.
  RowLookup *rowLookup = nullptr;
  /// Where the program's dtf.dynamic_rows ops get their rows (the tables of
  /// `embedding(vocab = dynamic)`); a program with such ops fails to load
  /// without one.
  DynamicRows *dynamicRows = nullptr;
  /// In-graph towers over a task's GPUs (train::Trainer): an op the plan
  /// places on GPU g runs on GPU g + gpuOffset (tower k's copy of the step).
  int gpuOffset = 0;
  /// Fetches (by name) to keep in device memory when a GPU op makes them:
  /// no copy down; deviceFetch() gives the device view (the towers' gradients,
  /// which the all-reduce packs on the GPU). Their host fetch() is then
  /// not written by the step.
  std::set<std::string> deviceFetches;
  /// Towers in one process (train::Trainer): a variable that only GPU ops of
  /// one GPU read (no CPU op, no fetch) stays resident in that GPU's memory
  /// though this program does not update it (another program updates it, or
  /// the towers broadcast it there; see sharedResident). With sharedResident
  /// (the evaluation, over the training's copies): only the variables it
  /// names, on their GPU.
  bool residentReads = false;
  /// Device copies of variables that another executor owns (tower 0's, for
  /// the towers' ps_update): variable name -> (GPU, device pointer). A
  /// generated in-place update of such a variable whose gradient is one of
  /// deviceFeeds and whose slots no other op reads runs on that GPU, in
  /// place in that copy; its slots stay there as this executor's resident
  /// variables.
  std::map<std::string, std::pair<int, uint64_t>, std::less<>> sharedResident;
  /// Feeds (by name) that may come in device memory (setDeviceFeed).
  std::set<std::string> deviceFeeds;
  /// Read each step's fetches one step late: run() queues the step's GPU
  /// work and returns without waiting for it; awaitFetches() waits for the
  /// oldest step run (its work only) and makes fetch() hold its values.
  /// Taken (fetchesLate()) only where every fetch comes down from a GPU op
  /// and no host op, nor another GPU, reads what a GPU op made; otherwise,
  /// and with DTF_GPU_SYNC_FETCH=1, run() waits for its step as before.
  bool lateFetches = false;
};

/// Copies the plan's SessionOptions placement flags (soft_placement,
/// log_device_placement), its variables' devices and its generated kernels
/// into `options`.
void applySessionOptions(const plan::Plan &plan, ExecutorOptions *options);

/// The time one op of a program took over all runs (with options.profile).
struct OpProfile {
  std::string where; // "model.dtf:12:9: dtf.matmul"
  std::string opName;
  double seconds = 0;
  uint64_t calls = 0;
  /// Timed on its GPU between CUDA events (device time), not by the host's
  /// clock; `device` names the GPU.
  bool onDevice = false;
  std::string device;
  /// The first op of a GPU segment: the host's time to enqueue the
  /// segment's ops and wait for them (--profile waits at each segment's end).
  double segmentHostSeconds = 0;
};

/// A model input the caller feeds before each run, or a value it fetches
/// after: its name and its declared type, -1 dims standing for the batch.
struct TensorSlotInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> dims;
};

/// Runs the ops of one plan::Program every step: in program order, or, with
/// an inter-op pool, each op as soon as the ops it depends on are done.
///
/// At load (create) it checks the program's structure, that every op has a
/// kernel (all missing ones are named at once, with their locations), and
/// the variables it reads; it converts the attributes once, and gives each
/// value a fixed place: a feed tensor, a constant, a variable (dtf.read_
/// variable aliases it, no copy), or a kernel context's output. Steady-state
/// steps allocate no tensor memory: kernels reuse their output buffers
/// (KernelContext::allocateOutput), and outputs that alias an input (reshape,
/// an optimizer's updated variable) are let go before the next step so that
/// the buffer they share has one owner again.
///
/// Dependencies (for the inter-op schedule, computed at load): an op follows
/// the producers of its inputs; and, per variable, the ops that read it
/// (through dtf.read_variable's value or an alias of it, a reshape of it say)
/// and the ops that update it in place (plan::updatedOperands) keep their
/// program order: a read before an update sees the old value, one after it
/// the new value, and updates of one variable do not overlap. Every
/// schedule therefore computes what the sequential one does, bit for bit.
///
/// Not thread-safe: one caller feeds, runs and fetches.
class Executor {
public:
  /// Loads `program`. `variables` and `kernels` must outlive the executor;
  /// the store's tensors must not be replaced while it lives.
  static Status create(const plan::Program &program, VariableStore &variables,
                       const KernelRegistry &kernels,
                       const ExecutorOptions &options,
                       std::unique_ptr<Executor> *out);

  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;
  ~Executor();

  /// The feeds: the program's Feed entries, then any dtf.input not among them
  /// (named by its `name` attribute).
  int numFeeds() const { return static_cast<int>(feeds_.size()); }
  const TensorSlotInfo &feedInfo(int i) const { return feeds_[i].info; }
  /// The index of the feed named `name`, or -1.
  int findFeed(std::string_view name) const;

  /// Shapes feed `i` for `batch` examples (each -1 of its declared dims
  /// becomes `batch`) and points `out` at it for the caller to fill. The
  /// buffer is reused whenever it is large enough, so feeding each step
  /// allocates nothing once the largest batch has been seen.
  Status prepareFeed(int i, int64_t batch, Tensor **out);
  /// Feeds `value` (sharing its buffer) to feed `i`; an error naming the feed
  /// when its dtype or shape does not fit the declared type.
  Status setFeed(int i, Tensor value);

  /// Runs every op once. `step` is the global step that random ops see.
  /// Errors name the op and its source location: "model.dtf:12:9:
  /// dtf.matmul expects ...". With fetchesLate(), the step's GPU work may
  /// still be queued when it returns: fetch() holds its values only after
  /// awaitFetches() (a third run first awaits the oldest step itself).
  Status run(uint64_t step);
  /// Whether run() returns before its step's fetches are down
  /// (options.lateFetches, taken).
  bool fetchesLate() const { return late_; }
  /// Steps run whose fetches were not awaited yet (0 to 2).
  int stepsInFlight() const { return int(inFlight_.size()); }
  /// Waits for the oldest step in flight (its GPU work, not the later
  /// step's), fails as run() would have on its ops' reports of bad input
  /// (a label outside the classes), and makes fetch() hold its values;
  /// `*step` gets its step. Nothing to do with no step in flight.
  Status awaitFetches(uint64_t *step = nullptr);

  int numFetches() const { return static_cast<int>(fetches_.size()); }
  const TensorSlotInfo &fetchInfo(int i) const { return fetches_[i].info; }
  /// The index of the fetch named `name`, or -1.
  int findFetch(std::string_view name) const;
  /// Fetch `i` after run(); valid until the next run. Read it in place: a
  /// copy kept across steps shares the buffer, which makes its op allocate
  /// a new one next step.
  const Tensor &fetch(int i) const { return *slots_[fetches_[i].value]; }
  /// Fetch `i`, writable until the next run (the towers write their combined
  /// metrics and gradients into tower 0's fetches).
  Tensor *mutableFetch(int i) { return slots_[fetches_[i].value]; }
  /// Gives fetch `i` the buffer of `buffer` (a tensor of the fetch's dtype
  /// and shape after the last run, over memory its deleter keeps alive) from
  /// the next run on: the CPU kernel that makes it writes it there while
  /// its shape stays (KernelContext::allocateOutput reuses a buffer nobody
  /// else holds). A worker's push region, so that a gradient needs no copy
  /// into it. False, and nothing changed, unless a CPU kernel's own output
  /// holds the fetch (not a variable, feed, constant, GPU op's output, or an
  /// output that may share an input's buffer).
  bool placeFetch(int i, Tensor buffer);
  /// Fetch `i` in device memory (a view over a device pointer, valid until
  /// the next run) when it is one of options.deviceFetches and a GPU op
  /// makes it; null otherwise (then fetch(i) holds it).
  const Tensor *deviceFetch(int i) const {
    return deviceFetch_[size_t(i)] ? &deviceFetchNow_[size_t(i)] : nullptr;
  }
  /// The GPU fetch `i` lives on when deviceFetch(i) is not null, else -1.
  int deviceFetchGpu(int i) const { return deviceFetchGpu_[size_t(i)]; }
  /// Feeds feed `i` (one of options.deviceFeeds) as a view over device
  /// memory on the GPU of options.sharedResident: the GPU ops that read it
  /// read it there. A host op that reads it needs setFeed too
  /// (feedReadOnHost).
  Status setDeviceFeed(int i, Tensor view);
  bool feedReadOnDevice(int i) const { return feedOnDevice_.count(i) > 0; }
  bool feedReadOnHost(int i) const { return !feedDeviceOnly_.count(i); }
  /// The device copy of resident variable `name`: its GPU (-1 when it is
  /// not resident here), pointer and size.
  struct ResidentBuffer {
    int gpu = -1;
    uint64_t ptr = 0;
    size_t bytes = 0;
  };
  ResidentBuffer residentBuffer(std::string_view name) const;
  /// The resident variable `name` changes on the host every step (its update
  /// runs there): upload it at every run.
  void uploadEveryRun(std::string_view name);
  /// The resident variable `name` is written into its device copy by
  /// another executor's GPU each step (a worker's towers: tower 0 uploads
  /// what the worker pulled and broadcasts it): this executor neither
  /// uploads nor downloads it.
  void receiveEveryRun(std::string_view name);
  /// The resident variables whose device copy holds their value between
  /// runs (read and updated in place there; neither uploaded every run nor
  /// written by another executor): name -> (GPU, device pointer). Another
  /// executor's GPU ops may read them in place (the evaluation, as
  /// options.sharedResident with residentReads) once residentUploaded().
  std::map<std::string, std::pair<int, uint64_t>, std::less<>>
  deviceCurrentVariables() const;
  /// The device copies hold the host's values: the first run (or
  /// uploadResidentBeforeRun) since creation or reloadVariablesFromHost.
  bool residentUploaded() const { return residentUploaded_; }
  /// The uploads run() starts with (every resident variable at the first
  /// run and after reloadVariablesFromHost, then those of uploadEveryRun),
  /// done now, before the next run, which then skips them: the towers
  /// broadcast tower 0's copies between the two.
  Status uploadResidentBeforeRun();
  /// Towers: this executor's batch is the global batch's `rows` examples
  /// from `first` on; random ops (dropout) draw the masks of those examples.
  void setBatchOffset(int64_t first, int64_t rows) {
    batchOffset_ = first;
    batchRows_ = rows;
  }
  /// Waits for the GPU work of the last run (before another stream reads
  /// its device values).
  Status synchronizeGpus();
  /// The next run's work on GPU `gpu` waits for `event` (recorded on
  /// another stream, e.g. the towers' all-reduce); nothing to do for a GPU
  /// this executor does not use or a null event.
  Status waitOnGpu(int gpu, const device::Event *event);

  /// Whether the program has dtf.skip_updates_unless (mixed_float16's
  /// dynamic loss scale), and whether the last run skipped its optimizer
  /// updates (its gradients were not all finite).
  bool guardsUpdates() const { return guardNode_ >= 0; }
  bool updatesSkipped() const { return skipUpdates_.load(); }

  /// The ops that run each step (kernel ops and dtf.assign_add; inputs,
  /// constants and variable reads cost nothing at run time).
  int numRunOps() const;

  /// Per op, in program order: time spent over all runs so far (empty
  /// unless options.profile). With inter-op threads, ops overlap, so the
  /// times add up to more than the steps took.
  std::vector<OpProfile> profile() const;

  /// The ops that run on a GPU (the plan placed them there and this
  /// machine has the GPU and a GPU kernel for them).
  int numGpuOps() const;
  /// The runs of consecutive GPU ops on one device that run as one unit
  /// (one device::Graph each: a CUDA graph once captured).
  int numGpuSegments() const { return int(segments_.size()); }

  /// Variables that live on a GPU between steps: each one whose every
  /// reader in this program, and its generated in-place update (which has
  /// no device of its own), run on one GPU, none fetched
  /// (DTF_GPU_RESIDENT_VARIABLES=0: none). They and their slots are
  /// uploaded at the first run (and the first run after
  /// reloadVariablesFromHost), then read and updated in device memory; the
  /// store's host tensors are stale until syncVariablesToHost.
  int numResidentVariables() const;
  /// Copies every resident variable down into the variable store (before a
  /// checkpoint, an evaluation, or the end of training). Nothing to do when
  /// there are none or no step has run.
  Status syncVariablesToHost();
  /// The store's values changed on the host (a restore): the next run
  /// uploads the resident variables again.
  void reloadVariablesFromHost() { residentUploaded_ = false; }

  /// True when steps after the first run ops concurrently: an inter-op pool
  /// of more than one thread and a program whose dependencies leave two ops
  /// free to overlap somewhere (a chain runs sequentially either way).
  bool runsConcurrently() const { return concurrent_; }
  /// The run ops (numRunOps() order) that op `i` waits for; for tests.
  std::vector<int> dependencies(int i) const;

private:
  struct Node;
  struct Slot {
    TensorSlotInfo info;
    int value = -1; // dense value index
  };

  struct Schedule;
  struct Loading;

  Executor();
  // Loading (ProgramLoader.cpp): values, feeds, one node per op, fetches.
  Status build(const plan::Program &program, VariableStore &variables,
               const KernelRegistry &kernels);
  void loadValues(Loading &l);
  Status loadFeeds(Loading &l);
  Status loadOp(Loading &l, int i);
  Status loadReadVariable(Loading &l, int i);
  Status loadAssignAdd(Loading &l, int i, Node &node);
  Status loadSendRecv(Loading &l, int i, Node &node);
  Status loadRowsOp(Loading &l, int i, Node &node);
  Status loadKernelOp(Loading &l, int i, Node &node);
  Status guardUpdates();
  Status opError(const Loading &l, int i, const std::string &message) const;
  Status kernelAttrs(const plan::Op &op, const Node &node,
                     AttrMap *attrs) const;
  // Placement (Placement.cpp): which ops run on which GPU.
  Status place(const plan::Program &program);
  struct PlacementLog;
  Status placeOp(const plan::Program &program, int i, PlacementLog &log);
  void logPlacement(const plan::Program &program, const PlacementLog &log);
  int residentUpdateGpu(const plan::Program &program, int i);
  bool gpuAvailable(int index, std::string *why);
  std::string fusedGpuCodeMissing(const plan::Op &op) const;
  int residentGpuOf(const plan::Program &program, int i) const;
  std::string placedDevice(const plan::Op &op) const;
  // Devices (DeviceWiring.cpp): GPU nodes, their graphs and their inputs.
  Status buildGpuNode(const plan::Op &op, int index, Node *node);
  void wireGpuNodes();
  void
  addGpuInputs(const std::unordered_map<int, std::pair<int, int>> &producer,
               std::set<int> &readOnHost);
  void logGpuSegments(const std::set<int> &readOnHost) const;
  // Resident variables (ResidentVariables.cpp).
  Status allocateResident();
  Status uploadResident(bool everyOne);
  // Scheduling (Scheduler.cpp).
  void planSchedule();
  // Gives the CPU kernels the versions of their inputs (planSchedule's
  // aliasing roots per value, and which resources some op updates in place).
  void wireVersions(const std::vector<std::vector<int>> &roots,
                    const std::vector<bool> &written);
  // A new version for every variable that `node` updates in place, and for
  // every variable (the start of a step).
  void bumpVersions(const Node &node);
  void renewAllVersions();
  Status runConcurrently(uint64_t step);
  void participate(Schedule &s);
  // Running a step (StepRunner.cpp).
  Status finishGpuStep();
  Status endLateStep(uint64_t step, int slot);
  Status segmentError(size_t segment, const Status &s) const;
  // Whether the step's fetches can be read late (options.lateFetches):
  // every fetch made by a GPU op and nothing made by one read on the host.
  bool
  takesLateFetches(const std::unordered_map<int, std::pair<int, int>> &producer,
                   const std::set<int> &readByOps) const;
  Status runNode(Node &node, uint64_t step);
  Status runGpuSegment(Node &node, uint64_t step);
  Status timedRunNode(Node &node, uint64_t step);
  Status checkOutputs(const Node &node) const;
  // Records whether node n's outputs share an input's buffer; true when it
  // does though the schedule did not expect it.
  bool noteAliasing(int n);

  ExecutorOptions options_;
  // Per dense value index: where the value lives, and its declared type.
  std::vector<Tensor *> slots_;
  std::vector<DType> valueDTypes_;
  std::vector<std::vector<int64_t>> valueDims_;
  std::vector<int32_t> valueIds_;
  std::vector<Slot> feeds_;
  std::vector<Tensor> feedTensors_; // sized once; slots_ point into it
  std::vector<Slot> fetches_;
  std::vector<const Tensor *> deviceFetch_; // per fetch; see deviceFetch()
  std::vector<int> deviceFetchGpu_;
  // Per device fetch: where it is after the last run (its op's output, or,
  // after a step that planned a new arena, which loses the buffers'
  // contents, its copy in deviceFetchKept_, an allocation of its own).
  std::vector<Tensor> deviceFetchNow_;
  std::vector<std::pair<uint64_t, size_t>> deviceFetchKept_;
  Status keepDeviceFetches(int gpu);
  std::deque<Tensor> constants_; // stable addresses
  // The host device, which makes the CPU ops, and the GPUs this program's
  // ops run on (before nodes_: their ops use them).
  std::unique_ptr<device::CpuDevice> cpu_;
  std::map<int, std::unique_ptr<device::Device>> gpus_;
  std::vector<int> opGpu_; // per program op: its GPU, or -1
  bool hasGpu_ = false;
  std::vector<Node> nodes_;
  // The GPU segments and, per segment, its nodes in program order (after
  // nodes_: they point at its GPU ops).
  std::vector<std::unique_ptr<device::Graph>> segments_;
  std::vector<std::vector<int>> segmentNodes_;
  // Nodes whose outputs alias an input, let go at the start of each step.
  std::vector<int> releaseBeforeRun_;
  // Per dense value: the variable (numbered in order of first read) that
  // dtf.read_variable aliases it to, or -1.
  std::vector<int> valueVariable_;
  int numVariables_ = 0;
  // Per resource (the variables, then the values): its VariableVersion,
  // which the kernels that read it see (KernelContext::inputVersion);
  // renewed at the start of each step and, for a variable, after each op
  // that updates it (bumpVersions).
  std::unique_ptr<VariableVersion[]> versions_;
  size_t numVersions_ = 0;
  // The inter-op schedule: dependencies per node, and the run-time state.
  std::unique_ptr<Schedule> schedule_;
  bool concurrent_ = false;
  bool hasRecv_ = false; // a dtf.recv: run in program order
  // dtf.skip_updates_unless: its node (-1: none), and whether this step's
  // guarded updates are skipped (set by that node, read by the updates
  // that wait for it).
  int guardNode_ = -1;
  std::atomic<bool> skipUpdates_{false};
  bool ranOnce_ = false;
  // Late fetches: runs so far (alternate runs stage into alternate slots of
  // the devices), and the steps whose fetches are not awaited yet.
  bool late_ = false;
  uint64_t runs_ = 0;
  struct InFlight {
    uint64_t step = 0;
    int slot = 0;
  };
  std::deque<InFlight> inFlight_;
  // Variables resident on a GPU (numResidentVariables): the updates that
  // keep them there (during place()), their names and GPUs, and per host
  // tensor of the store, its device copy.
  std::set<const plan::Op *> residentUpdates_;
  std::map<std::string, int> residentNames_;
  struct Resident {
    Tensor *host = nullptr;
    int gpu = -1;
    uint64_t ptr = 0; // its device address
    size_t bytes = 0;
    Tensor view;           // the device copy, as GPU ops read it
    bool constant = false; // a dtf.constant: uploaded, never downloaded
    bool shared = false;   // options.sharedResident's: another owns it
    bool everyRun = false; // uploadEveryRun
    bool received = false; // receiveEveryRun: another executor writes it
    std::string name;
  };
  std::map<const Tensor *, Resident> resident_;
  bool residentUploaded_ = false;
  bool uploadedBeforeRun_ = false; // uploadResidentBeforeRun
  int64_t batchOffset_ = 0;
  int64_t batchRows_ = 0;
  // Device feeds (options.deviceFeeds): per fed value its device view; the
  // feeds GPU ops read there, and those no host op reads.
  std::map<int, Tensor> deviceFeedViews_;
  std::set<int> feedOnDevice_, feedDeviceOnly_;
  int sharedUpdateGpu(const plan::Program &program, int i) const;
  int readOnlyResidentGpu(const plan::Program &program,
                          const std::string &name) const;
};

/// Converts a plan attribute to the kernel's form; a tensor attribute (only
/// dtf.constant takes one) is an error.
Status toKernelAttr(const plan::AttrValue &value, AttrValue *out);

} // namespace dtf::exec
