// Batches by number: batch b of epoch e of a dataset's shuffled epochs, for
// exactly-once data, where ps 0's ledger says which batch a step trains on.
#pragma once

#include "runtime/data/BatchIterator.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace dtf::data {

/// Batch `number` is positions [b*batchSize, (b+1)*batchSize) of epoch
/// number / batchesPerEpoch()'s order (epochOrder: the same seed and epoch
/// give every worker the same order, as for BatchIterator's shards), b =
/// number % batchesPerEpoch(). With dropRemainder an epoch's last partial
/// batch is left out.
class EpochBatches {
public:
  EpochBatches(std::shared_ptr<const Dataset> dataset, size_t batchSize,
               uint64_t seed, bool dropRemainder);

  int64_t batchesPerEpoch() const { return batchesPerEpoch_; }
  int64_t examples() const { return int64_t(dataset_->size()); }
  /// Makes batch `number` into *out (its epoch and index in the epoch set).
  void make(int64_t number, Batch *out);

private:
  std::shared_ptr<const Dataset> dataset_;
  size_t batchSize_;
  uint64_t seed_;
  int64_t batchesPerEpoch_;
  // The order of the last epoch asked for (a worker's batches are mostly of
  // one epoch, so it is drawn once per epoch).
  int64_t orderEpoch_ = -1;
  std::vector<uint64_t> order_;
};

} // namespace dtf::data
