// The batch iterator: epoch orders, shards, batches and the prefetch thread.
#include "runtime/data/BatchIterator.h"

#include "runtime/data/Random.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <new>
#include <system_error>

namespace dtf::data {

Expected<std::unique_ptr<BatchIterator>>
BatchIterator::create(std::shared_ptr<const Dataset> dataset,
                      BatchOptions options) {
  if (!dataset)
    return Error("batches: no dataset");
  const std::string name = dataset->description();
  if (options.batchSize == 0)
    return Error(name + ": the batch size must be positive");
  if (options.shardCount == 0)
    return Error(name + ": the shard count must be positive");
  if (options.shardIndex >= options.shardCount)
    return Error(name + ": shard index " + std::to_string(options.shardIndex) +
                 " is outside 0.." + std::to_string(options.shardCount - 1) +
                 " (" + std::to_string(options.shardCount) + " shards)");
  size_t n = dataset->size();
  if (n == 0)
    return Error(name + ": the dataset has no examples");
  size_t shardSize = n / options.shardCount +
                     (options.shardIndex < n % options.shardCount ? 1 : 0);
  if (shardSize == 0)
    return Error(name + ": shard " + std::to_string(options.shardIndex) +
                 " of " + std::to_string(options.shardCount) +
                 " has no examples (the dataset has " + std::to_string(n) +
                 "); use fewer shards");
  if (options.dropRemainder && shardSize < options.batchSize)
    return Error(
        name + ": a batch of " + std::to_string(options.batchSize) +
        " with drop_remainder needs that many examples per epoch, but " +
        (options.shardCount > 1 ? "this shard has " : "the dataset has ") +
        std::to_string(shardSize));
  size_t elements = dataset->exampleElements();
  if (elements != 0 && options.batchSize > SIZE_MAX / sizeof(float) / elements)
    return Error(name + ": a batch of " + std::to_string(options.batchSize) +
                 " examples of " + std::to_string(elements) +
                 " features is too large");

  std::unique_ptr<BatchIterator> it(
      new BatchIterator(std::move(dataset), options, shardSize));
  if (options.prefetch > 0) {
    try {
      it->thread_ = std::thread([raw = it.get()] { raw->produce(); });
    } catch (const std::system_error &e) {
      return Error(name + ": cannot start the prefetch thread: " + e.what());
    }
  }
  return it;
}

BatchIterator::BatchIterator(std::shared_ptr<const Dataset> dataset,
                             BatchOptions options, size_t shardSize)
    : dataset_(std::move(dataset)), options_(options), shardSize_(shardSize),
      epoch_(options.firstEpoch) {}

BatchIterator::~BatchIterator() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  notFull_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

size_t BatchIterator::batchesPerEpoch() const {
  size_t full = shardSize_ / options_.batchSize;
  bool partial =
      shardSize_ % options_.batchSize != 0 && !options_.dropRemainder;
  return full + (partial ? 1 : 0);
}

void BatchIterator::startEpoch() {
  const size_t n = dataset_->size();
  const size_t stride = options_.shardCount;
  order_.clear();
  order_.reserve(shardSize_);
  if (options_.shuffle) {
    std::vector<uint64_t> all = epochOrder(n, options_.seed, epoch_);
    for (size_t p = options_.shardIndex; p < n; p += stride)
      order_.push_back(all[p]);
  } else {
    for (size_t p = options_.shardIndex; p < n; p += stride)
      order_.push_back(p);
  }
  position_ = 0;
  batchInEpoch_ = 0;
  epochStarted_ = true;
}

bool BatchIterator::makeBatch(Batch &out) {
  while (true) {
    if (options_.numEpochs != 0 &&
        epoch_ - options_.firstEpoch >= options_.numEpochs)
      return false;
    if (!epochStarted_)
      startEpoch();
    size_t left = shardSize_ - position_;
    if (left > 0 && (left >= options_.batchSize || !options_.dropRemainder))
      break;
    ++epoch_;
    epochStarted_ = false;
  }

  const size_t count = std::min(options_.batchSize, shardSize_ - position_);
  const size_t elements = dataset_->exampleElements();
  const std::vector<int64_t> &shape = dataset_->exampleShape();
  out.featureShape.clear();
  out.featureShape.push_back(static_cast<int64_t>(count));
  out.featureShape.insert(out.featureShape.end(), shape.begin(), shape.end());
  out.features.resize(count * elements);
  out.labels.resize(count);
  out.epoch = epoch_;
  out.indexInEpoch = batchInEpoch_;
  for (size_t k = 0; k < count; ++k) {
    // A large batch of slow examples should not hold up shutdown.
    if (stop_.load(std::memory_order_relaxed))
      return false;
    size_t example = static_cast<size_t>(order_[position_ + k]);
    out.labels[k] =
        dataset_->copyExample(example, out.features.data() + k * elements);
  }
  position_ += count;
  ++batchInEpoch_;
  return true;
}

std::optional<Error> BatchIterator::tryMakeBatch(Batch &out, bool &made) {
  made = false;
  try {
    made = makeBatch(out);
    return std::nullopt;
  } catch (const std::bad_alloc &) {
    return Error(dataset_->description() +
                 ": out of memory making a batch of " +
                 std::to_string(options_.batchSize));
  } catch (const std::exception &e) {
    return Error(dataset_->description() +
                 ": making a batch failed: " + e.what());
  }
}

void BatchIterator::produce() {
  while (true) {
    Batch batch;
    bool made = false;
    std::optional<Error> failure = tryMakeBatch(batch, made);
    std::unique_lock<std::mutex> lock(mutex_);
    if (!made) {
      failure_ = std::move(failure);
      producerDone_ = true;
      notEmpty_.notify_all();
      return;
    }
    notFull_.wait(lock, [&] {
      return stop_.load() || queue_.size() < options_.prefetch;
    });
    if (stop_.load())
      return;
    queue_.push_back(std::move(batch));
    notEmpty_.notify_one();
  }
}

std::optional<Batch> BatchIterator::next() {
  if (options_.prefetch == 0) {
    // No producer thread: only this one writes producerDone_ and failure_ (the
    // lock is for error()).
    if (producerDone_)
      return std::nullopt;
    Batch batch;
    bool made = false;
    std::optional<Error> failure = tryMakeBatch(batch, made);
    if (made)
      return batch;
    std::lock_guard<std::mutex> lock(mutex_);
    failure_ = std::move(failure);
    producerDone_ = true;
    return std::nullopt;
  }

  std::unique_lock<std::mutex> lock(mutex_);
  notEmpty_.wait(lock, [&] { return !queue_.empty() || producerDone_; });
  if (queue_.empty())
    return std::nullopt;
  Batch batch = std::move(queue_.front());
  queue_.pop_front();
  notFull_.notify_one();
  return batch;
}

std::optional<Error> BatchIterator::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

} // namespace dtf::data
