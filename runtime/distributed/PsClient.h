// PsClient: a worker's calls to the ps tasks, in the shape of ps-lite's
// KVWorker: Pull, Push and Lookup, each sliced over the ps shards that hold
// what it names, and Wait on a push in flight. What is not a call lives
// elsewhere: the sparse sums and their cut per shard in SparseRows, the
// job-level calls (save, done, shutdown, data leases) in PsDriver
// (PsDriverJob.cpp), a ps's status in PsRecovery. A pull keeps what it
// learns of each ps aside until it is taken (PsClientCalls.cpp), so that
// --prefetch-pull's pull (PsClientPrefetch.cpp) may run beside a push.
#pragma once

#include "runtime/distributed/PushCompression.h"
#include "runtime/distributed/SparseRows.h"
#include "runtime/distributed/WorkerLinks.h"
#include "runtime/exec/VariableStore.h"

#include "plan.pb.h"

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <set>
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
  ~PsClient();

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

  /// Pull: from each ps, the variables the step reads (and, `forEval`, the
  /// moving averages an evaluation reads), straight into the bound store.
  /// `sync`: waits on the ps until the update of the version this worker
  /// last pushed for is applied. *globalStep gets the pulled global step.
  Status pull(bool forEval, bool sync, int64_t *globalStep);

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

  /// What a push carries besides the step's values.
  struct PushOptions {
    bool sync = false;
    /// Exactly-once data: the batches of ps 0's ledger whose examples the
    /// push carries, and this process's run (PushRequest.data_batches).
    uint64_t run = 0;
    std::vector<int64_t> dataBatches;
    /// Puts the step's output `key` (a whole send) in `buffer` from the next
    /// step on (exec::Executor::placeFetch); false where it cannot. Called
    /// by wait() on its thread once every ps's call ended. Unset: every
    /// push copies its values into a region.
    std::function<bool(const std::string &key, Tensor buffer)> place;
  };
  /// What the ps tasks said of a push.
  struct PushResult {
    int64_t stale = 0;      // pushes found computed at an older version
    bool leaseLost = false; // ps 0 dropped it: its batches were not ours
  };
  /// A push in flight.
  using Request = int64_t;
  /// Push: to each ps at once, its sends, `value(key)` giving each one's
  /// tensor (a shard's rows of it; a sparse gradient summed per id and cut
  /// per shard); `value` must live until the Wait. Each push ends when its
  /// ps applied (or took) it.
  Request startPush(const ValueOf &value, const PushOptions &options);
  /// Wait: until the push `request` ended; its outcome and *result.
  Status wait(Request request, PushResult *result);
  /// startPush and wait (the first ps's push on this thread).
  Status push(const ValueOf &value, const PushOptions &options,
              PushResult *result);

  /// Lookup: the rows of `ids` of table `variable` into *out, one call per
  /// shard that holds any of the unique ids, all in flight at once.
  Status lookup(const std::string &variable, const Tensor &ids, bool create,
                Tensor *out);

  /// What was pulled and pushed before belongs to a state the ps lost.
  void forgetVersions();
  /// The global step of the last pull.
  int64_t lastStep() const {
    const Tensor *t = store_ ? store_->find("global_step") : nullptr;
    return t ? t->data<int64_t>()[0] : 0;
  }

  /// Values pushed through shared memory so far: those its op made in the
  /// push's region (no copy), and those copied into one.
  int64_t pushedInPlace() const { return pushedInPlace_.load(); }
  int64_t pushedCopied() const { return pushedCopied_.load(); }

  /// The last pull, push or lookup failed because a ps is gone or
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

private:
  struct PushOutcome {
    static constexpr int64_t kUnchanged = -2;
    Status status = Status::ok();
    bool recoverable = false;
    bool stale = false;
    bool leaseLost = false;
    /// The link's pushedAt after the push, applied once every call ended.
    int64_t pushedAt = kUnchanged;
    /// Step outputs to put in the link's push home (`into`) or move out of
    /// it, done by wait() once every call ended: no call then reads them.
    struct Placement {
      std::string key;
      Tensor buffer;
      bool into = false;
    };
    std::vector<Placement> placements;
  };
  struct Pending;
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

  /// A shared-memory region of at least `bytes` for one call to `l`, when
  /// it is on this host and one is free (a failure to make one is said
  /// once); none: the call sends bytes.
  RegionPool::Lease takeRegion(const PsLink &l, uint64_t bytes) const;
  /// Says once, when `failure` is not empty, that the tensors to `l` go
  /// through the socket (no region could be made).
  void sayNoRegion(const PsLink &l, const std::string &failure) const;
  /// One more region of `bytes` for `l` (a pull's or a push's home), or
  /// null, said as takeRegion says it.
  std::shared_ptr<SharedRegion> makeHome(const PsLink &l,
                                         uint64_t bytes) const;
  /// Whether `st` is `l`'s refusal of this worker's shared memory: then
  /// said once, and every later call to it sends bytes (this one again).
  bool regionRefused(const PsLink &l, const grpc::Status &st) const;
  /// The variables of `into` that `l`'s pulls fill, moved (once) into a
  /// shared-memory region of their own, each where the ps writes it when it
  /// answers a pull into that region (PsService::pullIntoRegion's layout),
  /// so that a pull lands in them without a copy. None (the pull takes a
  /// region per call and copies out of it) for an evaluation's pull, a
  /// prefetched one (into another store), --wire bf16, a variable of
  /// several ps (its shards), or no shared memory to this ps.
  std::shared_ptr<SharedRegion>
  homeFor(const PsLink &l, exec::VariableStore &into, bool forEval) const;
  /// Moves the variables out of `l`'s home region into memory of their own
  /// (a pull into it failed: the ps may still write there).
  void leaveHome(const PsLink &l, exec::VariableStore &into) const;
  /// One ps's pull into `into`, starting from what `*o` says of the ps.
  Status pullFrom(const PsLink &l, exec::VariableStore &into, bool forEval,
                  bool sync, PullOutcome *o) const;
  /// Every ps's pull into `into`, each from its entry of *outcomes (one per
  /// link, from linkStates(): those not asked keep it).
  Status pullAll(exec::VariableStore &into, bool forEval, bool sync,
                 std::vector<PullOutcome> *outcomes) const;
  std::vector<PullOutcome> linkStates() const;
  void applyPulls(const std::vector<PullOutcome> &outcomes);
  Request start(const ValueOf &value, const PushOptions &options,
                bool firstHere);
  /// One ps's push, computed at (version, incarnation); touches no state
  /// of the link (a pull may run beside it): *out says what changes.
  Status pushTo(const PsLink &l, int64_t version, int64_t incarnation,
                const SparseSums &sparse, const ValueOf &value,
                const PushOptions &options, PushOutcome *out);

  // Per ps: the region a step's values are pushed from, each at the
  // offset the ps reads it (the request's order, kRegionAlignment steps),
  // with the step's outputs made there (PushOptions::place), so that a
  // push copies nothing (PsPushHome.cpp).
  struct PushHome {
    std::shared_ptr<SharedRegion> region;
    std::vector<std::pair<std::string, uint64_t>> layout; // name, bytes
    std::set<std::string> placed; // outputs made in the region
    std::set<std::string> gaveUp; // outputs that did not stay there
    int misses = 0;               // regions made and left; at 3, none more
  };
  /// `l`'s push home when this push's values (the request's, in its
  /// order) have its layout, made at the first push; null (the push takes
  /// a region per call) for --compress-push, --wire bf16, no shared memory
  /// to this ps, or another set of values (a withheld step's).
  PushHome *pushHomeFor(const PsLink &l, const rpc::PushRequest &req,
                        const std::vector<Tensor> &views);
  /// After the ps read a push from `home` (at the offsets `req` gives):
  /// the whole outputs among `views` (`keys[i]` not empty) to be made in
  /// the region from the next step on (out->placements).
  void placeInPushHome(PushHome &home, const rpc::PushRequest &req,
                       const std::vector<Tensor> &views,
                       const std::vector<std::string> &keys,
                       PushOutcome *out) const;
  /// A push from `home` failed (the ps may still read it): the outputs
  /// made there to move to memory of their own (out->placements), and the
  /// home is left.
  void leavePushHome(PushHome &home, const std::vector<Tensor> &views,
                     const std::vector<std::string> &keys,
                     PushOutcome *out) const;
  /// `l`'s push's placements, through options.place, on the thread that
  /// waits for the push once every call ended.
  void settlePlacements(const PsLink &l, const PushOptions &options,
                        PushOutcome *out);

  Links &links_;
  std::vector<PsLink> ps_;
  std::vector<std::vector<plan::HeldTensor>> heldBy_;
  exec::VariableStore *store_ = nullptr;
  // Per ps: the home region of the variables pulled from it (homeFor), and
  // how often one was made again or could not be made (at 3, none more).
  mutable std::vector<std::shared_ptr<SharedRegion>> homes_;
  mutable std::vector<int> homeMisses_;
  // Sized before a push's threads start; each touches its own ps' entry.
  std::vector<PushHome> pushHomes_;
  std::atomic<int64_t> pushedInPlace_{0}, pushedCopied_{0};
  std::vector<int64_t> minVersions_;
  PsTables tables_;
  bool lastRecoverable_ = false;
  bool lookupFailed_ = false;
  bool withhold_ = false;
  // --compress-push: the residual of each dense gradient this worker pushes.
  std::unique_ptr<PushCompressor> compressor_;
  std::map<Request, std::unique_ptr<Pending>> pending_;
  Request nextRequest_ = 1;
  // --prefetch-pull: the thread of the pull in flight, the store it writes
  // (the pulled variables, made at the first prefetch), what it learnt.
  std::thread prefetch_;
  exec::VariableStore prefetchStore_;
  std::vector<PullOutcome> prefetchOutcomes_;
  Status prefetchStatus_ = Status::ok();
};

} // namespace dtf::dist
