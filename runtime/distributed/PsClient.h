// PsClient: a worker's calls to the ps tasks, in the style of ps-lite's
// KVWorker: Pull, Push and Lookup, each sliced over the ps shards that hold
// what it names, and the job-level calls (Status, Save, Done, Shutdown).
#pragma once

#include "runtime/distributed/PushCompression.h"
#include "runtime/distributed/WorkerLinks.h"
#include "runtime/exec/VariableStore.h"

#include "plan.pb.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace dtf::dist {

/// The ps tasks as one worker (or tower, or stage) talks to them.
class PsClient {
public:
  /// `reads`: the program whose variable reads each pull brings (a stage of
  /// a model-parallel replica); null: the worker_step.
  PsClient(const plan::Plan &plan, const plan::Placement &placement,
           Links &links, const plan::Program *reads);

  Links &links() const { return links_; }
  std::vector<PsLink> &ps() { return ps_; }
  const std::vector<PsLink> &ps() const { return ps_; }
  /// What ps `k` holds (its variables and shards).
  const std::vector<plan::HeldTensor> &heldBy(size_t k) const {
    return heldBy_[k];
  }
  /// The variables pulls write into.
  void bind(exec::VariableStore *store) { store_ = store; }
  exec::VariableStore *store() const { return store_; }
  /// Per ps: the least version the next pulls take.
  void setMinVersions(std::vector<int64_t> v) { minVersions_ = std::move(v); }

  /// Waits until every ps accepts a connection.
  Status connect();
  /// Asks ps `l` how it is, and checks it runs this task's plan.
  Status status(PsLink &l, rpc::StatusReply *reply);

  /// Pull: from each ps, the variables the step reads (and, `forEval`, the
  /// moving averages an evaluation reads), straight into the bound store.
  /// `sync`: waits on the ps until the update of the version this worker
  /// last pushed for is applied. *globalStep gets the pulled global step.
  Status pull(bool forEval, bool sync, int64_t *globalStep);

  /// A step's value for a send's key; null when the step made none.
  using ValueOf = std::function<const Tensor *(const std::string &)>;
  /// Push: to each ps at once, its sends, `value(key)` giving each one's
  /// tensor (a shard's rows of it; a sparse gradient summed per id and cut
  /// per shard). Each push waits until its ps applied (or took) it.
  Status push(const ValueOf &value, bool sync);
  /// Async with --overlap-push: the push of a step and the pull of the
  /// next at once, both ways of every link busy; the pull may miss this
  /// worker's own push (staleness at most 1). *globalStep as pull's.
  Status pushAndPull(const ValueOf &value, int64_t *globalStep);

  /// --prefetch-pull: starts the next step's pull on a thread of its own,
  /// into a store of its own (a second copy of the pulled variables), while
  /// the step runs. It touches no state of the links: a push may run beside
  /// it.
  void startPrefetch();
  /// Waits for the prefetch started last; when it succeeded, copies its
  /// values into the bound store, applies what it learnt of each ps to the
  /// links, and sets *globalStep as pull's. *taken: whether one was in
  /// flight (false: nothing done). A failed one leaves the store as it was.
  Status takePrefetch(int64_t *globalStep, bool *taken);
  /// Waits for a prefetch in flight and forgets it (before a recovery
  /// changes the links; before the worker says it is done).
  void dropPrefetch();
  ~PsClient() { dropPrefetch(); }

  /// Lookup: the rows of `ids` of table `variable` into *out, one call per
  /// shard that holds any of the unique ids, all in flight at once.
  Status lookup(const std::string &variable, const Tensor &ids, bool create,
                Tensor *out);

  /// Every ps writes its shard of the checkpoint of `step` into `dir`.
  Status saveShards(const std::string &dir, int64_t step);
  /// Tells every ps this worker is done (`leaving`: it leaves the job
  /// before its end); from ps 0, *workersDone: how many are, *workersLive:
  /// how many live workers are not done yet (both may be null).
  Status done(int *workersDone, int *workersLive = nullptr,
              bool leaving = false);
  void shutdownAll(const std::string &reason);

  /// What was pulled and pushed before belongs to a state the ps lost.
  void forgetVersions();
  /// The global step of the last pull.
  int64_t lastStep() const {
    const Tensor *t = store_ ? store_->find("global_step") : nullptr;
    return t ? t->data<int64_t>()[0] : 0;
  }

  /// The last pull, push, lookup or save failed because a ps is gone or
  /// restarted.
  bool lastRecoverable() const { return lastRecoverable_; }
  void clearRecoverable() { lastRecoverable_ = false; }
  /// Whether a lookup failed since the last call (and forgets it).
  bool takeLookupFailure() {
    const bool failed = lookupFailed_;
    lookupFailed_ = false;
    return failed;
  }
  /// Whether the next pushes leave out the sends marked skippable (a step
  /// whose loss-scaled gradients are not finite: docs/protocol.md).
  void setWithhold(bool withhold) { withhold_ = withhold; }
  /// Pushes the ps found stale (computed at an older version).
  int64_t stale() const { return stale_; }

  /// Exactly-once data: the batches of ps 0's ledger whose examples the
  /// next pushes carry, and this process's run (PushRequest.data_batches).
  void setDataBatches(uint64_t run, std::vector<int64_t> batches) {
    run_ = run;
    dataBatches_ = std::move(batches);
  }
  /// Whether ps 0 dropped a push because its batches were no longer leased
  /// to this worker, since the last call (and forgets it).
  bool takeLeaseLost() {
    const bool lost = leaseLost_;
    leaseLost_ = false;
    return lost;
  }

private:
  // A step's sparse gradient, its rows summed per unique id (ascending).
  struct SparseSum {
    std::vector<int64_t> ids;
    Tensor rows;
  };
  using SparseSums = std::map<std::string, SparseSum>;
  // The tables looked up on the ps: their shards (ps, rows) and row shape.
  struct Table {
    std::vector<plan::PlacedShard> shards;
    int64_t rows = 0;
    std::vector<int64_t> rowDims;
    DType dtype = DType::F32;
    // A dynamic table: shards hold ids by hash (train::dynamicShardOf),
    // and the ids travel as they are.
    bool dynamic = false;
    int64_t parts = 1;
  };
  struct PushOutcome {
    static constexpr int64_t kUnchanged = -2;
    Status status = Status::ok();
    bool recoverable = false;
    bool stale = false;
    bool leaseLost = false;
    /// The link's pushedAt after the push, applied once every call ended.
    int64_t pushedAt = kUnchanged;
  };

  // What a pull learns of one ps (the incarnation of its state, the version
  // it read, whether pushes before it still count), kept apart from the
  // link until the pull is taken: a prefetch runs beside a push that reads
  // the link.
  struct PullOutcome {
    int64_t incarnation = -1;
    int64_t pushedAt = -1;
    int64_t version = 0;
    bool recoverable = false;
  };

  void findTables(const plan::Plan &plan, const plan::Placement &placement,
                  const plan::Program &reads);
  /// One ps's pull into `into`, starting from what `*o` says of the ps.
  Status pullFrom(const PsLink &l, exec::VariableStore &into, bool forEval,
                  bool sync, PullOutcome *o) const;
  /// Every ps's pull into `into`, each from its entry of *outcomes (one per
  /// link, from linkStates(): those not asked keep it).
  Status pullAll(exec::VariableStore &into, bool forEval, bool sync,
                 std::vector<PullOutcome> *outcomes) const;
  std::vector<PullOutcome> linkStates() const;
  void applyPulls(const std::vector<PullOutcome> &outcomes);
  /// sum += more, by id (both ascending): the rows of an id in both are
  /// added, sum's first.
  static Status addSparse(SparseSum *sum, const SparseSum &more);
  Status sumSparse(const plan::Transfer &send, const ValueOf &value,
                   SparseSum *out) const;
  Status sumSparseSends(const ValueOf &value, SparseSums *sparse) const;
  /// One ps's push, computed at (version, incarnation); touches no state
  /// of the link (a pull may run beside it): *out says what changes.
  Status pushTo(const PsLink &l, int64_t version, int64_t incarnation,
                const SparseSums &sparse, const ValueOf &value, bool sync,
                PushOutcome *out);
  Status pushAndMaybePull(const ValueOf &value, bool sync, int64_t *globalStep);

  Links &links_;
  std::vector<PsLink> ps_;
  std::vector<std::vector<plan::HeldTensor>> heldBy_;
  exec::VariableStore *store_ = nullptr;
  std::vector<int64_t> minVersions_;
  std::map<std::string, Table> tables_;
  bool lastRecoverable_ = false;
  bool withhold_ = false;
  // --compress-push: the residual of each dense gradient this worker pushes.
  std::unique_ptr<PushCompressor> compressor_;
  bool lookupFailed_ = false;
  int64_t stale_ = 0;
  uint64_t run_ = 0;
  std::vector<int64_t> dataBatches_;
  bool leaseLost_ = false;
  // --prefetch-pull: the thread of the pull in flight, the store it writes
  // (the pulled variables, made at the first prefetch), what it learnt.
  std::thread prefetch_;
  exec::VariableStore prefetchStore_;
  std::vector<PullOutcome> prefetchOutcomes_;
  Status prefetchStatus_ = Status::ok();
};

} // namespace dtf::dist
