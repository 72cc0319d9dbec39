// Batches by number over a dataset's shuffled epochs (exactly-once data).
#include "runtime/data/EpochBatches.h"

#include "runtime/data/Random.h"

#include <algorithm>

namespace dtf::data {

EpochBatches::EpochBatches(std::shared_ptr<const Dataset> dataset,
                           size_t batchSize, uint64_t seed, bool dropRemainder)
    : dataset_(std::move(dataset)), batchSize_(std::max<size_t>(batchSize, 1)),
      seed_(seed) {
  const size_t n = dataset_->size();
  batchesPerEpoch_ = int64_t(dropRemainder ? n / batchSize_
                                           : (n + batchSize_ - 1) / batchSize_);
}

void EpochBatches::make(int64_t number, Batch *out) {
  const int64_t epoch = number / batchesPerEpoch_;
  const int64_t index = number % batchesPerEpoch_;
  if (epoch != orderEpoch_) {
    order_ = epochOrder(dataset_->size(), seed_, uint64_t(epoch));
    orderEpoch_ = epoch;
  }
  const size_t begin = size_t(index) * batchSize_;
  const size_t count = std::min(batchSize_, order_.size() - begin);
  const size_t elements = dataset_->exampleElements();
  const std::vector<int64_t> &shape = dataset_->exampleShape();
  out->featureShape.assign(1, int64_t(count));
  out->featureShape.insert(out->featureShape.end(), shape.begin(), shape.end());
  out->features.resize(count * elements);
  out->labels.resize(count);
  out->epoch = uint64_t(epoch);
  out->indexInEpoch = uint64_t(index);
  for (size_t k = 0; k < count; ++k)
    out->labels[k] = dataset_->copyExample(size_t(order_[begin + k]),
                                           out->features.data() + k * elements);
}

} // namespace dtf::data
