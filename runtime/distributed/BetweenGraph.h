// Between-graph replication: a worker's driver of the ps tasks. Before each
// step it pulls the variables it reads, after it pushes the updates'
// operands (async, or sync with stale gradients dropped); the chief
// initializes the ps tasks, saves checkpoints and recovers a lost ps. The
// in-graph client and stage 0 of a model-parallel replica drive their ps
// traffic through it too.
#pragma once

#include "runtime/distributed/WorkerLinks.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/Rendezvous.h"
#include "runtime/train/CheckpointSchedule.h"
#include "runtime/train/Trainer.h"

#include "plan.pb.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace dtf::dist {

/// A ps whose share of a checkpoint is at least this large restores it by
/// reading the checkpoint itself (InitializeRequest.restore) rather than
/// receiving it from the chief.
inline constexpr uint64_t kRestoreOnPsBytes = uint64_t(64) << 20;

/// Pulls and pushes for one worker (or tower).
class PsDriver : public train::StepDriver, public exec::RowLookup {
public:
  /// `reads`: the program whose variable reads each step pulls (a stage of
  /// a model-parallel replica); null: the worker_step.
  PsDriver(const plan::Plan &plan, const plan::Placement &placement,
           Links &links, bool sync, bool push,
           const plan::Program *reads = nullptr);

  void setChief(bool chief) { chief_ = chief; }
  void say(const std::string &line) const { links_.say(line); }
  /// Per ps: the least version the next pulls take.
  void setMinVersions(std::vector<int64_t> v) { minVersions_ = std::move(v); }

  void bind(exec::VariableStore *store) { store_ = store; }
  std::vector<PsLink> &ps() { return ps_; }

  Status connect();

  /// The chief: initializes every ps that is not yet (from the latest
  /// checkpoint in the model dir when there is one). Others: wait for it.
  Status initializeOrWait(bool chief);

  Status status(PsLink &l, rpc::StatusReply *reply);

  /// The chief: (re)initializes every ps, from the latest checkpoint of the
  /// model dir when there is one, else from the plan's initializers. With
  /// force, also the ones that are initialized (after a ps was lost, all go
  /// back to the same checkpoint).
  Status restoreAll(bool force);

  /// After a lost ps (or one that lost its state): waits until every ps
  /// answers again; the chief then sets them all back to the last
  /// checkpoint, the others wait until that happened.
  Status recover(bool chief, const Status &why);

  /// The chief's checkpoint policy (the plan's `checkpoint every ...`).
  void setCheckpointPolicy(const plan::Training &t) {
    schedule_ =
        train::CheckpointSchedule(t, !links_.config().modelDir.empty(), -1);
  }
  bool checkpointDue(int64_t step) const { return schedule_.due(step); }

  /// The chief: every ps writes its shard of the checkpoint of `step`, then
  /// the chief writes the index (a checkpoint exists only once it does).
  Status save(int64_t step);

  Status pull(bool forEval, int64_t *globalStep);

  Status beforeStep(int64_t *globalStep, bool *done) override;

  /// An in-graph tower does not wait for a lost ps itself: its client (the
  /// chief) drops the step and recovers.
  void setRecoverInPlace(bool recover) { recoverInPlace_ = recover; }
  /// The last pull, push or save failed because a ps is gone or restarted.
  bool lastRecoverable() const { return lastRecoverable_; }

  /// A step's value for a send's key; null when the step made none.
  using ValueOf = std::function<const Tensor *(const std::string &)>;

  /// Pushes the sends, `value(key)` giving each one's tensor.
  Status pushAll(const ValueOf &value);

  Status afterStep(exec::Executor &e, int firstSend) override;

  /// Pushes (a lost ps: this step's update is dropped, the pull of the next
  /// step waits for the restore), then the chief saves when due.
  Status pushAndSave(const ValueOf &value);

  /// The global step of the last pull.
  int64_t lastStep() const {
    const Tensor *t = store_ ? store_->find("global_step") : nullptr;
    return t ? t->data<int64_t>()[0] : 0;
  }

  Status beforeEval() override;

  /// A dtf.ps_gather: the rows of the step's unique ids, each from the ps
  /// that holds it (one call per shard that holds any).
  Status lookup(const std::string &variable, const Tensor &ids, bool create,
                Tensor *out) override;
  /// A step whose lookup lost its ps is dropped; the next pull recovers.
  bool dropStep(const Status &failure) override;

  /// Tells ps 0 this worker is done; returns how many are.
  Status done(int *workersDone);

  void shutdownAll(const std::string &reason);

  int64_t stale() const { return stale_; }

private:
  const plan::Plan &plan_;
  Links &links_;
  bool sync_;
  bool push_;
  bool chief_ = false;
  bool lastRecoverable_ = false;
  bool recoverInPlace_ = true;
  std::vector<std::vector<plan::HeldTensor>> heldBy_;
  train::CheckpointSchedule schedule_{plan::Training(), false, -1};
  exec::VariableStore *store_ = nullptr;
  std::vector<PsLink> ps_;
  std::map<std::string, int> sendIndex_;
  std::vector<int64_t> minVersions_;
  int64_t stale_ = 0;
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
  std::map<std::string, Table> tables_;
  bool lookupFailed_ = false;
  // A step's sparse gradient, its rows summed per unique id (ascending).
  struct SparseSum {
    std::vector<int64_t> ids;
    Tensor rows;
  };
  Status sumSparse(const plan::Transfer &send, const ValueOf &value,
                   SparseSum *out) const;
};

} // namespace dtf::dist
