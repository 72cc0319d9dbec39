// IDX files (the MNIST format), gzip-compressed or raw, and datasets made of
// them.
#pragma once

#include "runtime/data/Dataset.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dtf::data {

/// The contents of an IDX file of unsigned bytes: its dimensions, outermost
/// first, and the bytes row-major.
struct IdxArray {
  std::vector<uint32_t> dims;
  std::vector<uint8_t> data;
};

/// Reads an IDX file whose magic number must be 0x0000080R: unsigned bytes in R
/// dimensions (R = `rank`). The file may be gzip-compressed (one member or
/// several, as `cat a.gz b.gz` makes) or raw, whatever its name. A wrong magic
/// number, a short or corrupt file, data left after the last element, bytes
/// after the gzip stream that are not another member, or dimensions whose
/// product overflows give an Error naming the file. A raw file's dimensions
/// are checked against its size before the data is allocated; a gzip file's
/// data buffer grows as the data arrives, so a header that lies costs at most
/// twice the bytes the stream really holds.
Expected<IdxArray> readIdxFile(const std::string &path, int rank);

/// An images file: magic 0x00000803, [count, rows, cols].
inline Expected<IdxArray> readIdxImages(const std::string &path) {
  return readIdxFile(path, 3);
}

/// A labels file: magic 0x00000801, [count].
inline Expected<IdxArray> readIdxLabels(const std::string &path) {
  return readIdxFile(path, 1);
}

struct IdxOptions {
  /// Features of shape {rows * cols} (the default), or {rows, cols} when false.
  bool flatten = true;
  /// When set, every label must lie in 0..numClasses-1 (the classes of the
  /// model's loss); the first outside is an error naming the labels file and
  /// the example.
  std::optional<int32_t> numClasses;
};

/// MNIST-style images and labels. Pixels stay bytes in memory (a quarter of the
/// float size) and become floats in [0, 1] (pixel / 255) when copied out;
/// labels are int32, and the number of classes is the largest label plus one,
/// or options.numClasses when set.
class IdxDataset : public Dataset {
public:
  /// Opens an images file and its labels file; their counts must agree.
  static Expected<IdxDataset> open(const std::string &imagesPath,
                                   const std::string &labelsPath,
                                   IdxOptions options = {});

  /// Opens a split of an MNIST-layout directory: "train" reads
  /// train-{images-idx3,labels-idx1}-ubyte, "test" (or "t10k") reads
  /// t10k-{images-idx3,labels-idx1}-ubyte; each name with ".gz" is tried first,
  /// then without it.
  static Expected<IdxDataset> openSplit(const std::string &directory,
                                        const std::string &split,
                                        IdxOptions options = {});

  size_t size() const override { return labels_.size(); }
  const std::vector<int64_t> &exampleShape() const override { return shape_; }
  std::optional<int32_t> numClasses() const override { return numClasses_; }
  int32_t label(size_t i) const override;
  void copyFeatures(size_t i, float *out) const override;
  std::string description() const override;

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  const std::string &imagesPath() const { return imagesPath_; }
  const std::string &labelsPath() const { return labelsPath_; }

private:
  IdxDataset() = default;

  std::vector<uint8_t> pixels_;
  std::vector<int32_t> labels_;
  std::vector<int64_t> shape_;
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  std::optional<int32_t> numClasses_;
  std::string imagesPath_;
  std::string labelsPath_;
};

} // namespace dtf::data
