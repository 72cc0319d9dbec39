// Between-graph replication: a worker's driver of the ps tasks. Before each
// step it pulls the variables it reads, after it pushes the updates'
// operands (async, or sync with stale gradients dropped), through PsClient;
// the chief saves checkpoints and stops the job, a worker leases its data
// and says when it is done (PsDriverJob.cpp), and PsRecovery initializes
// the ps tasks and recovers a lost ps. The in-graph client and stage 0 of a model-parallel
// replica drive their ps traffic through it too.
#pragma once

#include "runtime/distributed/PsClient.h"
#include "runtime/distributed/Recovery.h"
#include "runtime/distributed/WorkerLinks.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/Rendezvous.h"
#include "runtime/train/CheckpointSchedule.h"
#include "runtime/train/Trainer.h"

#include "plan.pb.h"

#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace dtf::dist {

/// A worker's step driver over the ps tasks: pulls before each step,
/// pushes after it, saves checkpoints when due (the chief), and waits out a
/// lost ps. The calls themselves are PsClient's; initialization and
/// recovery PsRecovery's.
class PsDriver : public train::StepDriver, public exec::RowLookup {
public:
  /// `reads`: the program whose variable reads each step pulls (a stage of
  /// a model-parallel replica); null: the worker_step.
  PsDriver(const plan::Plan &plan, const plan::Placement &placement,
           Links &links, bool sync, bool push,
           const plan::Program *reads = nullptr);

  void setChief(bool chief) { chief_ = chief; }
  void say(const std::string &line) const { client_.links().say(line); }
  /// Per ps: the least version the next pulls take.
  void setMinVersions(std::vector<int64_t> v) {
    client_.setMinVersions(std::move(v));
  }

  void bind(exec::VariableStore *store) { client_.bind(store); }
  std::vector<PsLink> &ps() { return client_.ps(); }

  Status connect() { return client_.connect(); }

  /// The chief: initializes every ps that is not yet (from the latest
  /// checkpoint in the model dir when there is one). Others: wait for it.
  Status initializeOrWait(bool chief) {
    return recovery_.initializeOrWait(chief);
  }
  /// The last initialization or restore failed on the checkpoint, not on
  /// the cluster.
  bool checkpointRefused() const { return recovery_.checkpointRefused(); }

  /// The chief's checkpoint policy (the plan's `checkpoint every ...`).
  void setCheckpointPolicy(const plan::Training &t) {
    schedule_ = train::CheckpointSchedule(
        t, !client_.links().config().modelDir.empty(), -1);
  }
  bool checkpointDue(int64_t step) const { return schedule_.due(step); }

  /// The chief: every ps writes its shard of the checkpoint of `step`, then
  /// the chief writes the index (a checkpoint exists only once it does).
  Status save(int64_t step);

  Status beforeStep(int64_t *globalStep, bool *done) override;

  /// An in-graph tower does not wait for a lost ps itself: its client (the
  /// chief) drops the step and recovers.
  void setRecoverInPlace(bool recover) { recoverInPlace_ = recover; }
  /// Async (--overlap-push): each step's push and the next step's pull
  /// cross at once; beforeStep then takes that pull.
  void setOverlap(bool overlap) { overlap_ = overlap; }
  /// Async (--prefetch-pull): each step's pull for the next step starts as
  /// the step starts and runs beside its compute and its push; the next
  /// beforeStep takes it (staleness at most 1: it may lack this worker's
  /// own last gradient).
  void setPrefetch(bool prefetch) { prefetch_ = prefetch; }
  /// --prefetch-pull: how many steps took a prefetched pull; how many of
  /// those read the ps before this worker's own last push landed (the
  /// pulled global step below the one that push completed); the most
  /// global steps one was below it (measured, at most 1 by design).
  int64_t prefetchedPulls() const { return prefetchedPulls_; }
  int64_t prefetchesBehind() const { return prefetchesBehind_; }
  int64_t prefetchMaxLag() const { return prefetchMaxLag_; }
  /// Pushed values (sends, per ps) that went through shared memory: made in
  /// place by their ops (no copy), and copied into a region.
  int64_t pushedInPlace() const { return client_.pushedInPlace(); }
  int64_t pushedCopied() const { return client_.pushedCopied(); }
  /// The last pull, push or save failed because a ps is gone or restarted.
  bool lastRecoverable() const { return lostPs(); }

  using ValueOf = dist::ValueOf;

  Status afterStep(exec::Executor &e, int firstSend, bool withhold) override;

  /// Pushes (a lost ps: this step's update is dropped, the pull of the next
  /// step waits for the restore), then the chief saves when due (sync: after
  /// the next pull, once the update this push joined is applied).
  /// `place` as PsClient::PushOptions::place (unset: none placed).
  Status pushAndSave(
      const ValueOf &value,
      std::function<bool(const std::string &, Tensor)> place = nullptr);

  /// The global step of the last pull.
  int64_t lastStep() const { return client_.lastStep(); }

  Status beforeEval() override;

  /// A dtf.ps_gather: the rows of the step's unique ids, each from the ps
  /// that holds it (one call per shard that holds any).
  Status lookup(const std::string &variable, const Tensor &ids, bool create,
                Tensor *out) override {
    return client_.lookup(variable, ids, create, out);
  }
  /// A step whose lookup lost its ps is dropped; the next pull recovers.
  bool dropStep(const Status &failure) override;

  /// Tells the ps tasks this worker is done (or leaves the job: `leaving`);
  /// ps 0 says how many are done and how many live ones are not.
  Status done(int *workersDone, int *workersLive = nullptr,
              bool leaving = false);

  /// The chief at the end: stops every ps task.
  void shutdownAll(const std::string &reason);

  /// The global step the ps tasks reached with this worker's last push
  /// applied (sync: once the update it joined is, which may wait for other
  /// replicas' gradients): a pull, asked again while a stop request cuts
  /// its wait short, for at most `timeoutSeconds`.
  Status settle(double timeoutSeconds, int64_t *step);

  /// Pushes the ps found stale (computed at an older version).
  int64_t stale() const { return stale_; }

  /// Exactly-once data (--data exactly-once): each step's batch is leased
  /// from ps 0's split ledger, a split at a time (sync: one batch).
  bool leasesData() const override {
    return client_.links().config().exactlyOnce;
  }
  Status nextDataBatch(int64_t examples, int64_t batch, int64_t batchesPerEpoch,
                       int64_t steps, int64_t *number, bool *done) override;

private:
  // Every ps writes its shard of the checkpoint of `step` into `dir`.
  Status saveShards(const std::string &dir, int64_t step);
  bool lostPs() const { return client_.lastRecoverable() || saveLost_; }
  void clearRecoverable() {
    client_.clearRecoverable();
    saveLost_ = false;
  }
  // Asks ps 0 for the next split until it gives one or says the job's
  // batches are all applied; waits (saying for what) while others hold
  // the rest.
  Status leaseSplit(const rpc::LeaseRequest &req, bool *done);
  // Waits out a lost ps (PsRecovery::recover), the prefetch in flight
  // dropped first: the recovery changes the links it started from.
  Status recover(const Status &failure);

  PsClient client_;
  train::CheckpointSchedule schedule_{plan::Training(), false, -1};
  PsRecovery recovery_;
  bool sync_;
  bool push_;
  // Updates take this many replicas' batches (async: 1).
  int64_t replicas_;
  bool chief_ = false;
  bool recoverInPlace_ = true;
  bool overlap_ = false;
  bool prefetch_ = false;
  int64_t prefetchedPulls_ = 0;
  int64_t prefetchesBehind_ = 0;
  int64_t prefetchMaxLag_ = 0;
  // The global step the last push completed (-1: none yet).
  int64_t pushedStep_ = -1;
  // The next step's pull came with the last push (overlap_).
  bool prefetched_ = false;
  // Sync, the chief: a checkpoint came due at the last push; the next pull
  // (which waits for the update that push joined) saves it.
  bool saveAfterPull_ = false;
  int64_t prefetchedStep_ = 0;
  std::map<std::string, int> sendIndex_;
  // Exactly-once data: this process's run (new when it restarts) and what
  // is left of its split.
  uint64_t run_;
  std::deque<int64_t> split_;
  // The batches the next pushes carry (PushRequest.data_batches).
  std::vector<int64_t> batches_;
  // Ps 0 dropped a push of ours: its batches were no longer leased to us.
  bool leaseLost_ = false;
  // The last save failed because a ps is gone or restarted.
  bool saveLost_ = false;
  int64_t stale_ = 0;
};

} // namespace dtf::dist
