// The Dataset interface (labelled examples by index) and an in-memory dataset.
#pragma once

#include "runtime/data/Expected.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtf::data {

/// One example: its features (row-major, exampleShape()) and its class label.
struct Example {
  std::vector<float> features;
  int32_t label = 0;
};

/// A fixed set of labelled examples, read by index. Implementations are
/// immutable once made, so every const method may be called from several
/// threads at once (the prefetch thread of a BatchIterator does).
class Dataset {
public:
  virtual ~Dataset() = default;

  /// The number of examples.
  virtual size_t size() const = 0;

  /// The shape of one example's features, e.g. {784} or {28, 28}.
  virtual const std::vector<int64_t> &exampleShape() const = 0;

  /// The number of classes when the source says (labels lie in 0..n-1).
  virtual std::optional<int32_t> numClasses() const = 0;

  /// Example i's label; i < size().
  virtual int32_t label(size_t i) const = 0;

  /// Writes example i's features, exampleElements() floats, to `out`; i <
  /// size().
  virtual void copyFeatures(size_t i, float *out) const = 0;

  /// Writes example i's features to `out` and returns its label: what batching
  /// calls, so a source that computes both at once (synthetic data) can.
  virtual int32_t copyExample(size_t i, float *out) const {
    copyFeatures(i, out);
    return label(i);
  }

  /// Where the data came from, for messages and logs ("idx:/path (train)").
  virtual std::string description() const = 0;

  /// The number of floats in one example: the product of exampleShape().
  size_t exampleElements() const;

  /// Example i as a value; for tests and tools (batches use copyFeatures).
  Example example(size_t i) const;
};

/// Examples held in memory as floats: what the CSV reader makes, and a simple
/// way to hand a BatchIterator any data (tests, evaluation sets built in code).
class InMemoryDataset : public Dataset {
public:
  /// `features` holds labels.size() examples of `exampleShape`, row-major.
  /// Fails when the sizes disagree or a label lies outside 0..numClasses-1.
  static Expected<InMemoryDataset> create(std::vector<float> features,
                                          std::vector<int32_t> labels,
                                          std::vector<int64_t> exampleShape,
                                          std::optional<int32_t> numClasses,
                                          std::string description);

  size_t size() const override { return labels_.size(); }
  const std::vector<int64_t> &exampleShape() const override { return shape_; }
  std::optional<int32_t> numClasses() const override { return numClasses_; }
  int32_t label(size_t i) const override;
  void copyFeatures(size_t i, float *out) const override;
  std::string description() const override { return description_; }

  /// All features, row-major [size(), exampleShape()...].
  const std::vector<float> &features() const { return features_; }
  const std::vector<int32_t> &labels() const { return labels_; }

private:
  InMemoryDataset() = default;

  std::vector<float> features_;
  std::vector<int32_t> labels_;
  std::vector<int64_t> shape_;
  std::optional<int32_t> numClasses_;
  std::string description_;
  size_t elements_ = 0;
};

} // namespace dtf::data
