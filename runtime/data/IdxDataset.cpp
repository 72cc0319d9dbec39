// Reading IDX files, raw or gzip (InputFile), with sizes checked before
// anything is allocated.
#include "runtime/data/IdxDataset.h"
#include "runtime/core/Crc32c.h"

#include "runtime/data/InputFile.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cstdio>
#include <filesystem>
#include <system_error>

namespace dtf::data {
namespace {

uint32_t bigEndian32(const unsigned char *p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) |
         (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

std::string joinDims(const std::vector<uint32_t> &dims) {
  std::string out;
  for (size_t i = 0; i < dims.size(); ++i)
    out += (i ? " x " : "") + std::to_string(dims[i]);
  return out;
}

/// The error for a read that came up short: "truncated: <what>" when the file
/// (or its gzip stream) simply ended, or what went wrong instead.
Error shortRead(const InputFile &file, const std::string &what) {
  const std::string &path = file.path();
  const std::string &why = file.failureMessage();
  switch (file.failure()) {
  case InputFile::Failure::kNone:
  case InputFile::Failure::kTruncated:
    return Error(path + ": truncated: " + what +
                 (why.empty() ? "" : " (" + why + ")"));
  case InputFile::Failure::kTrailingBytes:
    return Error(path + ": " + why);
  default:
    return Error(path + ": cannot read: " + why);
  }
}

const char *kindOfRank(int rank) {
  switch (rank) {
  case 1:
    return "a labels file";
  case 3:
    return "an images file";
  default:
    return "an IDX file";
  }
}

/// The float value of every byte, so copying a pixel is a table lookup.
const std::array<float, 256> &byteScale() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i)
      t[i] = static_cast<float>(i) / 255.0f;
    return t;
  }();
  return table;
}

} // namespace

Expected<IdxArray> readIdxFile(const std::string &path, int rank) {
  assert(rank >= 1 && rank <= 255);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return Error(path + ": is a directory, not an IDX file");

  Expected<std::unique_ptr<InputFile>> opened =
      InputFile::open(path, InputFile::Compression::kDetect);
  if (!opened)
    return Error(opened.error());
  InputFile &file = **opened;

  unsigned char magicBytes[4];
  size_t got = file.read(magicBytes, 4);
  if (got == 0 && file.failure() == InputFile::Failure::kNone)
    return Error(path + ": the file is empty; expected an IDX header");
  if (got < 4)
    return shortRead(file, "the file ends inside the 4-byte magic number");
  uint32_t magic = bigEndian32(magicBytes);
  uint32_t expected = 0x800u | static_cast<uint32_t>(rank);
  if (magic != expected)
    return Error(path + ": wrong magic number " + hex32(magic) + ", expected " +
                 hex32(expected) + " (IDX of unsigned bytes in " +
                 std::to_string(rank) +
                 (rank == 1 ? " dimension: " : " dimensions: ") +
                 kindOfRank(rank) + ")");

  IdxArray array;
  array.dims.resize(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d) {
    unsigned char dimBytes[4];
    if (file.read(dimBytes, 4) < 4)
      return shortRead(file, "the file ends inside the header, at dimension " +
                                 std::to_string(d + 1) + " of " +
                                 std::to_string(rank));
    array.dims[static_cast<size_t>(d)] = bigEndian32(dimBytes);
  }

  uint64_t total = 1;
  for (uint32_t d : array.dims) {
    if (__builtin_mul_overflow(total, static_cast<uint64_t>(d), &total) ||
        total > array.data.max_size())
      return Error(
          path + ": dimensions " + joinDims(array.dims) +
          " overflow: their product does not fit in memory's size type");
  }
  auto promised = [&](uint64_t present) {
    return "the header says " + joinDims(array.dims) + " = " +
           std::to_string(total) + " bytes of data, the file ends after " +
           std::to_string(present);
  };
  // A raw file's size bounds the data before anything is allocated.
  // (A pipe has no size: its data is read as a gzip stream's is.)
  const uint64_t size = file.fileSize(), header = file.position();
  if (!file.gzip() && size >= header && total > size - header)
    return Error(path + ": truncated: " + promised(size - header));

  // A gzip stream's size is known only by reading it: the buffer grows by what
  // is already there, so a header that promises far more than the stream
  // holds fails as truncated after allocating at most twice the data.
  size_t have = 0;
  while (have < total) {
    size_t want =
        std::min<size_t>(total - have, std::max<size_t>(have, 1 << 20));
    array.data.resize(have + want);
    size_t n = file.read(array.data.data() + have, want);
    have += n;
    if (n < want)
      return shortRead(file, promised(have));
  }

  // Reading past the data also checks the gzip trailer's CRC and what follows
  // the stream.
  unsigned char extra;
  if (file.read(&extra, 1) != 0)
    return Error(path + ": has data after the " + std::to_string(total) +
                 " bytes its header (" + joinDims(array.dims) +
                 ") describes; is the header wrong?");
  if (file.failure() != InputFile::Failure::kNone)
    return shortRead(file, "the gzip stream ends after the data, before its "
                           "checksum");
  return array;
}

Expected<IdxDataset> IdxDataset::open(const std::string &imagesPath,
                                      const std::string &labelsPath,
                                      IdxOptions options) {
  Expected<IdxArray> images = readIdxImages(imagesPath);
  if (!images)
    return Error(images.error());
  Expected<IdxArray> labels = readIdxLabels(labelsPath);
  if (!labels)
    return Error(labels.error());

  uint32_t count = images->dims[0];
  uint32_t rows = images->dims[1];
  uint32_t cols = images->dims[2];
  if (labels->dims[0] != count)
    return Error(labelsPath + ": expected " + std::to_string(count) +
                 " labels as the images file says, found " +
                 std::to_string(labels->dims[0]));
  if (rows == 0 || cols == 0)
    return Error(imagesPath + ": images of " + std::to_string(rows) + " x " +
                 std::to_string(cols) + " pixels are empty");

  IdxDataset d;
  d.pixels_ = std::move(images->data);
  d.labels_.assign(labels->data.begin(), labels->data.end());
  d.rows_ = rows;
  d.cols_ = cols;
  if (options.flatten)
    d.shape_ = {int64_t(rows) * int64_t(cols)};
  else
    d.shape_ = {int64_t(rows), int64_t(cols)};
  if (options.numClasses) {
    for (size_t i = 0; i < d.labels_.size(); ++i)
      if (d.labels_[i] >= *options.numClasses)
        return Error(labelsPath + ": example " + std::to_string(i) +
                     " has label " + std::to_string(d.labels_[i]) +
                     ", outside the model's classes 0.." +
                     std::to_string(*options.numClasses - 1) +
                     " (its loss has " + std::to_string(*options.numClasses) +
                     " classes)");
    d.numClasses_ = options.numClasses;
  } else if (!d.labels_.empty()) {
    d.numClasses_ = *std::max_element(d.labels_.begin(), d.labels_.end()) + 1;
  }
  d.imagesPath_ = imagesPath;
  d.labelsPath_ = labelsPath;
  return d;
}

Expected<IdxDataset> IdxDataset::openSplit(const std::string &directory,
                                           const std::string &split,
                                           IdxOptions options) {
  std::string prefix;
  if (split == "train")
    prefix = "train";
  else if (split == "test" || split == "t10k")
    prefix = "t10k";
  else
    return Error(directory + ": unknown split '" + split +
                 "': expected 'train' or 'test'");

  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(directory, ec))
    return Error(directory + ": " +
                 (fs::exists(directory, ec) ? "is not a directory"
                                            : "no such directory") +
                 "; expected the IDX files of the '" + split + "' split in it");

  // Returns the first of `names` that exists in the directory, or an Error.
  auto find =
      [&](const char *what,
          std::initializer_list<std::string> names) -> Expected<std::string> {
    std::string looked;
    for (const std::string &name : names) {
      fs::path p = fs::path(directory) / name;
      if (fs::exists(p, ec))
        return p.string();
      looked += (looked.empty() ? "" : ", ") + name;
    }
    return Error(directory + ": no " + what + " file for the '" + split +
                 "' split: looked for " + looked);
  };
  Expected<std::string> images = find(
      "images", {prefix + "-images-idx3-ubyte.gz",
                 prefix + "-images-idx3-ubyte", prefix + "-images.idx3-ubyte"});
  if (!images)
    return Error(images.error());
  Expected<std::string> labels = find(
      "labels", {prefix + "-labels-idx1-ubyte.gz",
                 prefix + "-labels-idx1-ubyte", prefix + "-labels.idx1-ubyte"});
  if (!labels)
    return Error(labels.error());
  return open(*images, *labels, options);
}

int32_t IdxDataset::label(size_t i) const {
  assert(i < labels_.size());
  return labels_[i];
}

void IdxDataset::copyFeatures(size_t i, float *out) const {
  assert(i < labels_.size());
  const std::array<float, 256> &scale = byteScale();
  size_t n = static_cast<size_t>(rows_ * cols_);
  const uint8_t *in = pixels_.data() + i * n;
  for (size_t k = 0; k < n; ++k)
    out[k] = scale[in[k]];
}

std::string IdxDataset::description() const { return "idx:" + imagesPath_; }

} // namespace dtf::data
