// Synthetic classification data from a seed, learnable by a linear model or
// more.
#pragma once

#include "runtime/data/Dataset.h"

#include <cstdint>
#include <vector>

namespace dtf::data {

struct SyntheticOptions {
  /// The number of examples (made on demand, so any number costs no memory).
  size_t size = 1024;
  std::vector<int64_t> exampleShape = {16};
  int32_t numClasses = 10;
  uint64_t seed = 0;
};

/// Example i has features uniform in [-1, 1) drawn from a stream seeded by
/// (seed, i), and the label argmax_c (W x)_c for a projection W [classes,
/// features] drawn from the seed. Labels are thus a function of the features
/// (linearly separable), so a model can learn them, and the same seed gives the
/// same examples on every machine.
class SyntheticDataset : public Dataset {
public:
  static Expected<SyntheticDataset> create(SyntheticOptions options);

  size_t size() const override { return size_; }
  const std::vector<int64_t> &exampleShape() const override { return shape_; }
  std::optional<int32_t> numClasses() const override { return numClasses_; }
  int32_t label(size_t i) const override;
  void copyFeatures(size_t i, float *out) const override;
  int32_t copyExample(size_t i, float *out) const override;
  std::string description() const override;

private:
  SyntheticDataset() = default;

  /// argmax of the projection of `features`.
  int32_t classify(const float *features) const;

  size_t size_ = 0;
  std::vector<int64_t> shape_;
  int32_t numClasses_ = 0;
  uint64_t seed_ = 0;
  size_t elements_ = 0;
  std::vector<float> projection_; // [numClasses, elements]
};

} // namespace dtf::data
