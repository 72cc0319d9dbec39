// SplitLedger: exactly-once data (docs/elastic.md). Ps 0 hands the batches
// of the job's epochs out in splits, and counts a batch consumed only when
// the update that carries its examples is applied; a batch whose gradient
// was dropped, whose worker died or whose update was lost goes back to
// pending and is handed out again.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace dtf::dist::ps {

/// The data a ledger cuts: batch b of epoch e (positions [b*batch,
/// (b+1)*batch) of that epoch's shuffled order) is number e*batchesPerEpoch+b.
struct LedgerShape {
  int64_t examples = 0;
  int64_t batch = 0;
  int64_t batchesPerEpoch = 0;
  /// The job's batches: steps x replicas_to_aggregate (async: 1).
  int64_t totalBatches = 0;
};

class SplitLedger {
public:
  using Clock = std::chrono::steady_clock;
  /// Why a batch was handed out again.
  enum Reason { kDeadWorker, kDroppedGradient, kLostUpdate, kReasons };

  bool configured() const { return shape_.batch > 0; }
  const LedgerShape &shape() const { return shape_; }
  /// The first lease sets the shape; later ones (and a restored ledger) must
  /// cut the same data; the total may change (a run restarted with other
  /// --steps). Returns why a shape is refused, "" when it is taken.
  std::string configure(const LedgerShape &shape);

  /// Up to `max` batches for `task`'s process `run`: batches handed back
  /// first (lowest first), then the next ones never handed out. A new run
  /// of a task first returns what its previous run held (it died).
  void lease(const std::string &task, uint64_t run, int max,
             Clock::time_point now, std::vector<int64_t> *out);
  /// `task`'s run is alive (it pushed): its leases start their time again.
  void touch(const std::string &task, uint64_t run, Clock::time_point now);
  /// Every batch of the job is consumed.
  bool done() const { return configured() && base_ >= shape_.totalBatches; }
  /// Why a lease found nothing to hand out: who holds the rest.
  std::string waitingFor() const;

  /// Whether each of `batches` is leased to `task`'s `run` (a push that
  /// carries any other is dropped: its lease expired, or ps 0 restored).
  bool holds(const std::string &task, uint64_t run,
             const std::vector<int64_t> &batches) const;
  /// Async: the update carrying `batches` was applied.
  void consume(const std::vector<int64_t> &batches);
  /// Sync: `batches` joined the open update (no longer the worker's).
  void join(const std::vector<int64_t> &batches);
  /// Sync: the open update was applied / forgotten (a restore).
  void applyUpdate();
  void loseUpdate();
  /// Those of `batches` leased to `task`'s `run` back to pending (its
  /// gradient was dropped); others' leases stay.
  void release(const std::string &task, uint64_t run,
               const std::vector<int64_t> &batches, Reason why);
  /// Every lease of `task` back to pending (it left the job), counted with
  /// the dead workers'.
  void leave(const std::string &task);
  /// Leases older than `seconds` back to pending (a worker that died and
  /// was not restarted).
  void expire(Clock::time_point now, double seconds);

  /// The ledger as a checkpoint holds it: the consumed batches.
  std::vector<int64_t> save() const;
  /// Back to a checkpoint's ledger (empty: nothing consumed). Everything
  /// handed out past it is pending again (counted as lost with a ps).
  /// Returns why `saved` is refused, "" when it is taken.
  std::string restore(const std::vector<int64_t> &saved);

  /// One line per epoch whose every batch was applied since the last call:
  /// its examples and the batches re-sent, by reason (a restored ledger
  /// goes on from the checkpoint's counts).
  std::vector<std::string> takeEpochLines();
  /// Batches re-sent so far, by reason (all epochs).
  int64_t resent(Reason why) const { return resentTotal_[why]; }
  int64_t consumed() const { return base_ + int64_t(consumed_.size()); }

private:
  struct Lease {
    std::string task;
    uint64_t run = 0;
    Clock::time_point at;
  };
  // The batches of an epoch handed out again, by reason.
  struct EpochCount {
    int64_t resent[kReasons] = {};
  };
  void toPending(int64_t batch, Reason why);
  void markConsumed(int64_t batch);

  LedgerShape shape_;
  // Every batch below base_ is consumed; consumed_ holds those above it.
  int64_t base_ = 0;
  std::set<int64_t> consumed_;
  // Batches never handed out start at next_.
  int64_t next_ = 0;
  std::set<int64_t> pending_;
  std::map<int64_t, Lease> leased_;
  std::set<int64_t> inUpdate_;
  std::map<std::string, uint64_t> runs_;
  std::map<int64_t, EpochCount> epochs_;
  int64_t resentTotal_[kReasons] = {};
  std::vector<std::string> lines_;
};

} // namespace dtf::dist::ps
