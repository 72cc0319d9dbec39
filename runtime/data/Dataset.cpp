// The Dataset helpers and the in-memory dataset.
#include "runtime/data/Dataset.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace dtf::data {

size_t Dataset::exampleElements() const {
  size_t n = 1;
  for (int64_t d : exampleShape())
    n *= static_cast<size_t>(d);
  return n;
}

Example Dataset::example(size_t i) const {
  Example e;
  e.features.resize(exampleElements());
  copyFeatures(i, e.features.data());
  e.label = label(i);
  return e;
}

Expected<InMemoryDataset> InMemoryDataset::create(
    std::vector<float> features, std::vector<int32_t> labels,
    std::vector<int64_t> exampleShape, std::optional<int32_t> numClasses,
    std::string description) {
  size_t elements = 1;
  for (int64_t d : exampleShape) {
    if (d <= 0)
      return Error(description + ": example dimensions must be positive, got " +
                   std::to_string(d));
    if (elements > SIZE_MAX / static_cast<uint64_t>(d))
      return Error(description + ": the example shape overflows the size type");
    elements *= static_cast<size_t>(d);
  }
  if (labels.size() != 0 && elements > SIZE_MAX / labels.size())
    return Error(description +
                 ": the number of features overflows the size type");
  if (features.size() != labels.size() * elements)
    return Error(description + ": " + std::to_string(labels.size()) +
                 " examples of " + std::to_string(elements) +
                 " features need " + std::to_string(labels.size() * elements) +
                 " values, got " + std::to_string(features.size()));
  if (numClasses && *numClasses <= 0)
    return Error(description +
                 ": the number of classes must be positive, got " +
                 std::to_string(*numClasses));
  for (size_t i = 0; i < labels.size(); ++i) {
    int32_t l = labels[i];
    if (l < 0)
      return Error(description + ": example " + std::to_string(i) +
                   " has the negative label " + std::to_string(l));
    if (numClasses && l >= *numClasses)
      return Error(description + ": example " + std::to_string(i) +
                   " has label " + std::to_string(l) + ", outside 0.." +
                   std::to_string(*numClasses - 1));
  }
  InMemoryDataset d;
  d.features_ = std::move(features);
  d.labels_ = std::move(labels);
  d.shape_ = std::move(exampleShape);
  d.numClasses_ = numClasses;
  d.description_ = std::move(description);
  d.elements_ = elements;
  return d;
}

int32_t InMemoryDataset::label(size_t i) const {
  assert(i < labels_.size());
  return labels_[i];
}

void InMemoryDataset::copyFeatures(size_t i, float *out) const {
  assert(i < labels_.size());
  if (elements_ != 0)
    std::memcpy(out, features_.data() + i * elements_,
                elements_ * sizeof(float));
}

} // namespace dtf::data
