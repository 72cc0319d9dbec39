// Synthetic examples made on demand from (seed, index).
#include "runtime/data/SyntheticDataset.h"

#include "runtime/data/Random.h"

#include <cassert>

namespace dtf::data {
namespace {

// Stream numbers for deriveSeed: the projection, and example i at
// kExampleStreams + i.
constexpr uint64_t kProjectionStream = 0;
constexpr uint64_t kExampleStreams = 1;

// A bound on the example size, so the projection stays a modest allocation.
constexpr size_t kMaxElements = size_t(1) << 24;

} // namespace

Expected<SyntheticDataset> SyntheticDataset::create(SyntheticOptions options) {
  if (options.numClasses < 2)
    return Error("synthetic data: needs at least 2 classes, got " +
                 std::to_string(options.numClasses));
  if (options.exampleShape.empty())
    return Error(
        "synthetic data: the example shape is empty; give at least one "
        "dimension, e.g. {16}");
  size_t elements = 1;
  for (int64_t d : options.exampleShape) {
    if (d <= 0)
      return Error("synthetic data: example dimensions must be positive, got " +
                   std::to_string(d));
    if (static_cast<uint64_t>(d) > kMaxElements / elements)
      return Error("synthetic data: examples of more than " +
                   std::to_string(kMaxElements) +
                   " features are not supported");
    elements *= static_cast<size_t>(d);
  }
  if (elements * static_cast<size_t>(options.numClasses) > kMaxElements * 16)
    return Error("synthetic data: the projection of " +
                 std::to_string(elements) + " features onto " +
                 std::to_string(options.numClasses) + " classes is too large");

  SyntheticDataset d;
  d.size_ = options.size;
  d.shape_ = std::move(options.exampleShape);
  d.numClasses_ = options.numClasses;
  d.seed_ = options.seed;
  d.elements_ = elements;
  d.projection_.resize(elements * static_cast<size_t>(options.numClasses));
  SplitMix64 rng(deriveSeed(options.seed, kProjectionStream));
  for (float &w : d.projection_)
    w = rng.nextSigned();
  return d;
}

int32_t SyntheticDataset::classify(const float *x) const {
  // Double accumulation in a fixed order: the same sums, so the same labels,
  // everywhere.
  int32_t best = 0;
  double bestScore = 0;
  for (int32_t c = 0; c < numClasses_; ++c) {
    const float *w = projection_.data() + static_cast<size_t>(c) * elements_;
    double score = 0;
    for (size_t k = 0; k < elements_; ++k)
      score += double(w[k]) * double(x[k]);
    if (c == 0 || score > bestScore) {
      best = c;
      bestScore = score;
    }
  }
  return best;
}

void SyntheticDataset::copyFeatures(size_t i, float *out) const {
  assert(i < size_);
  SplitMix64 rng(deriveSeed(seed_, kExampleStreams + i));
  for (size_t k = 0; k < elements_; ++k)
    out[k] = rng.nextSigned();
}

int32_t SyntheticDataset::copyExample(size_t i, float *out) const {
  copyFeatures(i, out);
  return classify(out);
}

int32_t SyntheticDataset::label(size_t i) const {
  std::vector<float> x(elements_);
  return copyExample(i, x.data());
}

std::string SyntheticDataset::description() const {
  std::string shape;
  for (int64_t d : shape_)
    shape += (shape.empty() ? "" : "x") + std::to_string(d);
  return "synthetic:" + std::to_string(size_) + " examples of " + shape + ", " +
         std::to_string(numClasses_) + " classes, seed " +
         std::to_string(seed_);
}

} // namespace dtf::data
