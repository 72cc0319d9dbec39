// PsRecovery: bringing the ps tasks to a known state: the chief initializes
// them (from the latest checkpoint, else the plan's initializers) and, after
// a ps was lost or restarted, sets every ps back to the last checkpoint; the
// other workers wait until it has.
#pragma once

#include "runtime/distributed/PsClient.h"
#include "runtime/train/CheckpointSchedule.h"

#include "plan.pb.h"

namespace dtf::dist {

/// A ps whose share of a checkpoint is at least this large restores it by
/// reading the checkpoint itself (InitializeRequest.restore) rather than
/// receiving it from the chief.
inline constexpr uint64_t kRestoreOnPsBytes = uint64_t(64) << 20;

class PsRecovery {
public:
  /// `schedule`: the chief's checkpoint schedule, told which checkpoint the
  /// ps tasks were restored from.
  PsRecovery(const plan::Plan &plan, PsClient &client,
             train::CheckpointSchedule &schedule)
      : plan_(plan), client_(client), links_(client.links()),
        schedule_(schedule) {}

  /// The chief: initializes every ps that is not yet (from the model dir's
  /// checkpoint that config().restore picks, checked whole, when there is
  /// one). Others: wait for it.
  Status initializeOrWait(bool chief);

  /// The chief: (re)initializes every ps, from the model dir's checkpoint
  /// that config().restore picks (checkpoint::chooseCheckpoint: checked
  /// whole; a damaged newest one, or only damaged ones, are refused) when
  /// there is one, else from the plan's initializers. With
  /// force, also the ones that are initialized (after a ps was lost, all go
  /// back to the same checkpoint).
  Status restoreAll(bool force);

  /// After a lost ps (or one that lost its state): waits until every ps
  /// answers again; the chief then sets them all back to the last
  /// checkpoint, the others wait until that happened.
  Status recover(bool chief, const Status &why);

  /// The last restoreAll failed on the checkpoint (damaged, or refused by a
  /// ps that read it), not on the cluster: dtf-run's exit code 4, which the
  /// launcher does not restart.
  bool checkpointRefused() const { return checkpointRefused_; }

private:
  /// --ps-replicas 2: initializes each ps in `replies` that lost its state
  /// from the replica its mirror holds (the others keep theirs); false,
  /// having said why, when one cannot be (its mirror lost too, or behind
  /// what this task pulled): the caller then restores every ps from the
  /// last checkpoint.
  bool restoreFromReplicas(const std::vector<rpc::StatusReply> &replies);
  // Asks ps `l` how it is, and checks it runs this task's plan.
  Status status(PsLink &l, rpc::StatusReply *reply);

  const plan::Plan &plan_;
  PsClient &client_;
  Links &links_;
  train::CheckpointSchedule &schedule_;
  bool checkpointRefused_ = false;
};

} // namespace dtf::dist
