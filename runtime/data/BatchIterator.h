// Batches from a Dataset: per-epoch shuffling, sharding across workers,
// repeating epochs, and a prefetch thread that makes the next batches while a
// step runs.
#pragma once

#include "runtime/data/Dataset.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace dtf::data {

/// A batch of examples, ready to copy into (or view as) the step's input
/// tensors.
struct Batch {
  /// Row-major [size(), exampleShape...].
  std::vector<float> features;
  /// {size(), exampleShape...}.
  std::vector<int64_t> featureShape;
  /// [size()].
  std::vector<int32_t> labels;
  /// The epoch the batch belongs to (batches never span two epochs).
  uint64_t epoch = 0;
  /// Its number within the epoch, from 0.
  uint64_t indexInEpoch = 0;

  size_t size() const { return labels.size(); }
};

struct BatchOptions {
  size_t batchSize = 32;
  /// Drop each epoch's last batch when it would be smaller than batchSize.
  bool dropRemainder = false;
  /// Shuffle the examples anew each epoch (see epochOrder in Random.h).
  bool shuffle = true;
  uint64_t seed = 0;
  /// The number of epochs to run; 0 repeats without end.
  uint64_t numEpochs = 1;
  /// The number of the first epoch. An epoch's order depends only on the seed
  /// and its number, so a run restored at epoch k continues with the same data.
  uint64_t firstEpoch = 0;
  /// Batches made ahead on a background thread (the bound of its queue); 0
  /// makes each batch on the caller's thread inside next().
  size_t prefetch = 2;
  /// Sharding for between-graph replication: worker shardIndex of shardCount
  /// takes positions shardIndex, shardIndex + shardCount, ... of each epoch's
  /// order (strided, after the shuffle). With the same seed on every worker,
  /// the shards of an epoch are disjoint and together cover the dataset once;
  /// shard sizes differ by at most one example.
  size_t shardCount = 1;
  size_t shardIndex = 0;
};

/// Hands out batches in order until the epochs run out. Not thread-safe: one
/// consumer calls next(). Destroying the iterator at any point, mid-epoch or
/// with the prefetch queue full, stops and joins its thread promptly.
class BatchIterator {
public:
  /// Fails when the options make no sense for the data: batch size 0, a shard
  /// index outside the shard count, a shard with no examples, or drop_remainder
  /// with fewer examples per shard than one batch (which would loop forever
  /// making no batches).
  static Expected<std::unique_ptr<BatchIterator>>
  create(std::shared_ptr<const Dataset> dataset, BatchOptions options);

  BatchIterator(const BatchIterator &) = delete;
  BatchIterator &operator=(const BatchIterator &) = delete;
  ~BatchIterator();

  /// The next batch, or nullopt when the last epoch has ended or making a batch
  /// failed; error() tells the two apart.
  std::optional<Batch> next();

  /// Why batches stopped early (a source that threw, or memory ran out);
  /// nullopt while all is well and after a normal end.
  std::optional<Error> error() const;

  /// The examples of this shard in one epoch.
  size_t examplesPerEpoch() const { return shardSize_; }
  /// The batches of this shard in one epoch.
  size_t batchesPerEpoch() const;

  const BatchOptions &options() const { return options_; }
  const Dataset &dataset() const { return *dataset_; }

private:
  BatchIterator(std::shared_ptr<const Dataset> dataset, BatchOptions options,
                size_t shardSize);

  /// Makes the next batch into `out`; false when the epochs have run out or
  /// stop_ was set. Called by one thread only (the producer, or next() without
  /// one).
  bool makeBatch(Batch &out);
  /// makeBatch with exceptions from the dataset turned into an Error.
  std::optional<Error> tryMakeBatch(Batch &out, bool &made);
  /// Draws the shard's order of examples for epoch_.
  void startEpoch();
  void produce();

  std::shared_ptr<const Dataset> dataset_;
  BatchOptions options_;
  size_t shardSize_;

  // The producer's position; touched only by the thread that makes batches.
  uint64_t epoch_ = 0;
  uint64_t batchInEpoch_ = 0;
  size_t position_ = 0;
  std::vector<uint64_t> order_; // this shard's examples for epoch_
  bool epochStarted_ = false;

  // Shared between the producer thread and the consumer.
  mutable std::mutex mutex_;
  std::condition_variable notEmpty_;
  std::condition_variable notFull_;
  std::deque<Batch> queue_;
  bool producerDone_ = false;
  std::atomic<bool> stop_{false};
  std::optional<Error> failure_;
  std::thread thread_;
};

} // namespace dtf::data
