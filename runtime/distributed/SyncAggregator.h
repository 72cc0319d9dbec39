// SyncAggregator: the sync core of a ps task (SyncReplicasOptimizer): sums
// the gradients of the open update, one per replica, until
// replicas_to_aggregate have come, then hands their average to apply; counts
// the stale ones dropped.
#pragma once

#include "runtime/core/Tensor.h"
#include "runtime/distributed/Cluster.h"

#include <cstdio>
#include <string>
#include <vector>

namespace dtf::dist::ps {

class SyncAggregator {
public:
  /// `tracePath`: where each applied update's contributors are logged ("":
  /// nowhere).
  SyncAggregator(int64_t replicas, std::string tracePath)
      : replicas_(replicas), tracePath_(std::move(tracePath)) {}
  ~SyncAggregator() {
    if (trace_)
      std::fclose(trace_);
  }
  SyncAggregator(const SyncAggregator &) = delete;
  SyncAggregator &operator=(const SyncAggregator &) = delete;

  int64_t replicas() const { return replicas_; }
  /// Whether `who` already gave a gradient to the open update (a restarted
  /// worker pushing again for the update its dead self joined).
  bool joined(const std::string &who) const;
  /// A gradient computed at an older version (or before a restore), or a
  /// second one of a replica: dropped and counted.
  void dropStale() { ++stale_; }
  int64_t stale() const { return stale_; }
  /// Updates applied with fewer than `replicas` gradients (fewer live
  /// workers).
  int64_t shortUpdates() const { return short_; }

  /// Adds a replica's values (taken from `values`): summed, or for a key
  /// that `concat` marks, concatenated; a bool (mixed_float16's loss-scale
  /// flag) is the AND of the replicas'; a value a replica withheld (its
  /// flag false) is left out.
  void add(std::vector<Tensor> &values, const std::string &who,
           const std::vector<bool> &concat);
  /// The open update has `needed` gradients (the membership's rule:
  /// min(replicas, live workers), which can fall while it is open).
  bool complete(int64_t needed) const {
    return !contributors_.empty() && int64_t(contributors_.size()) >= needed;
  }
  /// The complete update's average over the gradients it has (its sums
  /// scaled in place).
  std::vector<Tensor> &average();
  /// Logs the applied update computed at `at`, then starts the next one.
  void applied(int64_t at);
  /// Forgets the open update (the ps was initialized again).
  void clear();

  /// "2 of 3 gradients for update 8; not yet from: worker.2", for a pull
  /// that waits at `version` for `needed` gradients from the `live` workers.
  std::string waitingFor(int64_t version, int64_t needed,
                         const std::vector<std::string> &live) const;

private:
  static void accumulate(Tensor &sum, const Tensor &t);
  /// A sparse key: the replicas' ids (or rows) one after another.
  static Tensor concatRows(const Tensor &a, const Tensor &b);
  static void scale(Tensor &t, double f);

  const int64_t replicas_;
  const std::string tracePath_;
  std::vector<Tensor> sums_;
  std::vector<std::string> contributors_;
  int64_t stale_ = 0;
  int64_t short_ = 0;
  std::FILE *trace_ = nullptr;
};

} // namespace dtf::dist::ps
