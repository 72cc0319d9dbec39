// Tests of the IDX reader: round trips (gzip and raw, one member or several),
// every error, sizes bounded before allocation, real data.
#include "runtime/data/IdxDataset.h"

#include "TestSupport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

using namespace dtf::data;
using namespace dtf::data::testing;

namespace {

// Three 2x3 images and their labels.
const Bytes kPixels = {0,  1,  2, 3, 4, 5, 255, 128, 64,
                       32, 16, 8, 7, 6, 5, 4,   3,   200};
const Bytes kLabels = {4, 0, 9};

Bytes imagesFile(uint32_t count = 3, const Bytes &pixels = kPixels) {
  return idxBytes(0x803, {count, 2, 3}, pixels);
}
Bytes labelsFile(uint32_t count = 3, const Bytes &labels = kLabels) {
  return idxBytes(0x801, {count}, labels);
}

/// The error from opening images and labels written raw into `dir`.
std::string openError(const TempDir &dir, const Bytes &images,
                      const Bytes &labels) {
  writeRaw(dir.file("images"), images);
  writeRaw(dir.file("labels"), labels);
  Expected<IdxDataset> d =
      IdxDataset::open(dir.file("images"), dir.file("labels"));
  EXPECT_FALSE(d.ok());
  return d.ok() ? "" : d.error();
}

void expectExactContents(const IdxDataset &d) {
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d.rows(), 2);
  EXPECT_EQ(d.cols(), 3);
  EXPECT_EQ(d.numClasses(), 10);
  for (size_t i = 0; i < 3; ++i) {
    Example e = d.example(i);
    EXPECT_EQ(e.label, kLabels[i]);
    ASSERT_EQ(e.features.size(), 6u);
    for (size_t k = 0; k < 6; ++k)
      EXPECT_EQ(e.features[k], static_cast<float>(kPixels[i * 6 + k]) / 255.0f);
  }
}

TEST(IdxDataset, RawFilesRoundTrip) {
  TempDir dir;
  writeRaw(dir.file("img"), imagesFile());
  writeRaw(dir.file("lab"), labelsFile());
  Expected<IdxDataset> d = IdxDataset::open(dir.file("img"), dir.file("lab"));
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->exampleShape(), (std::vector<int64_t>{6}));
  expectExactContents(*d);
  Example first = d->example(0);
  EXPECT_EQ(first.features[0], 0.0f);
  Example second = d->example(1);
  EXPECT_EQ(second.features[0], 1.0f); // 255 scales to exactly 1
}

// Told the model's classes, the reader refuses the first label outside them,
// naming the labels file and the example; labels inside them set the count.
TEST(IdxDataset, ALabelOutsideTheModelsClassesIsRefused) {
  TempDir dir;
  writeRaw(dir.file("img"), imagesFile());
  writeRaw(dir.file("lab"), labelsFile());
  IdxOptions nine;
  nine.numClasses = 9;
  Expected<IdxDataset> d =
      IdxDataset::open(dir.file("img"), dir.file("lab"), nine);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error(), dir.file("lab") +
                           ": example 2 has label 9, outside the model's "
                           "classes 0..8 (its loss has 9 classes)");
  IdxOptions twelve;
  twelve.numClasses = 12;
  d = IdxDataset::open(dir.file("img"), dir.file("lab"), twelve);
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->numClasses(), 12);
}

TEST(IdxDataset, GzipSplitRoundTripKeepsImageShape) {
  TempDir dir;
  writeGzip(dir.file("train-images-idx3-ubyte.gz"), imagesFile());
  writeGzip(dir.file("train-labels-idx1-ubyte.gz"), labelsFile());
  IdxOptions options;
  options.flatten = false;
  Expected<IdxDataset> d = IdxDataset::openSplit(dir.path(), "train", options);
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->exampleShape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(d->imagesPath(), dir.file("train-images-idx3-ubyte.gz"));
  expectExactContents(*d);
}

TEST(IdxDataset, SplitAcceptsUncompressedNames) {
  TempDir dir;
  writeRaw(dir.file("t10k-images-idx3-ubyte"), imagesFile());
  writeGzip(dir.file("t10k-labels-idx1-ubyte.gz"), labelsFile());
  Expected<IdxDataset> d = IdxDataset::openSplit(dir.path(), "test");
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->labelsPath(), dir.file("t10k-labels-idx1-ubyte.gz"));
  expectExactContents(*d);
}

TEST(IdxDataset, GzipContentUnderARawNameStillReads) {
  // zlib detects compression from the content, not from the name.
  TempDir dir;
  writeGzip(dir.file("t10k-images-idx3-ubyte"), imagesFile());
  writeRaw(dir.file("t10k-labels-idx1-ubyte"), labelsFile());
  Expected<IdxDataset> d = IdxDataset::openSplit(dir.path(), "t10k");
  ASSERT_TRUE(d.ok()) << d.error();
  expectExactContents(*d);
}

TEST(IdxDataset, MissingSplitFilesAreNamed) {
  TempDir dir;
  writeGzip(dir.file("train-images-idx3-ubyte.gz"), imagesFile());
  Expected<IdxDataset> d = IdxDataset::openSplit(dir.path(), "train");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error(),
            dir.path() + ": no labels file for the 'train' split: looked for "
                         "train-labels-idx1-ubyte.gz, train-labels-idx1-ubyte, "
                         "train-labels.idx1-ubyte");
}

TEST(IdxDataset, MissingDirectoryAndUnknownSplit) {
  TempDir dir;
  Expected<IdxDataset> d = IdxDataset::openSplit(dir.file("nope"), "train");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error(), dir.file("nope") +
                           ": no such directory; expected the IDX "
                           "files of the 'train' split in it");
  Expected<IdxDataset> v = IdxDataset::openSplit(dir.path(), "validation");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error(),
            dir.path() +
                ": unknown split 'validation': expected 'train' or 'test'");
}

TEST(IdxDataset, MissingFileSaysSo) {
  TempDir dir;
  Expected<IdxArray> a = readIdxImages(dir.file("absent.gz"));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error(),
            dir.file("absent.gz") + ": cannot open: No such file or directory");
}

TEST(IdxDataset, WrongMagicNamesBothNumbers) {
  TempDir dir;
  std::string message = openError(dir, labelsFile(), labelsFile());
  EXPECT_EQ(message,
            dir.file("images") +
                ": wrong magic number 0x00000801, expected 0x00000803 (IDX of "
                "unsigned bytes in 3 dimensions: an images file)");
  message = openError(dir, imagesFile(), imagesFile());
  EXPECT_EQ(message,
            dir.file("labels") +
                ": wrong magic number 0x00000803, expected 0x00000801 (IDX of "
                "unsigned bytes in 1 dimension: a labels file)");
  // Float data (type 0x0d) is not images of bytes either.
  message = openError(dir, idxBytes(0xd03, {3, 2, 3}, kPixels), labelsFile());
  EXPECT_NE(message.find("wrong magic number 0x00000d03"), std::string::npos)
      << message;
}

TEST(IdxDataset, CountMismatchNamesTheLabelsFile) {
  TempDir dir;
  std::string message = openError(dir, imagesFile(), labelsFile(2, {4, 0}));
  EXPECT_EQ(message,
            dir.file("labels") +
                ": expected 3 labels as the images file says, found 2");
}

TEST(IdxDataset, TruncatedRawData) {
  TempDir dir;
  Bytes images = imagesFile();
  images.pop_back();
  std::string message = openError(dir, images, labelsFile());
  EXPECT_EQ(message, dir.file("images") +
                         ": truncated: the header says 3 x 2 x 3 = 18 "
                         "bytes of data, the file ends after 17");
}

TEST(IdxDataset, TruncatedHeaderAndEmptyFile) {
  TempDir dir;
  Bytes images = imagesFile();
  images.resize(10); // magic, first dimension, half of the second
  EXPECT_EQ(
      openError(dir, images, labelsFile()),
      dir.file("images") +
          ": truncated: the file ends inside the header, at dimension 2 of 3");
  EXPECT_EQ(openError(dir, Bytes{0, 0}, labelsFile()),
            dir.file("images") +
                ": truncated: the file ends inside the 4-byte magic number");
  EXPECT_EQ(openError(dir, Bytes{}, labelsFile()),
            dir.file("images") + ": the file is empty; expected an IDX header");
}

TEST(IdxDataset, TruncatedGzipStream) {
  TempDir dir;
  // Enough varied data that the compressed stream is long, then cut it in half.
  Bytes pixels(100 * 2 * 3);
  for (size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = static_cast<uint8_t>((i * 7919) ^ (i >> 3));
  writeGzip(dir.file("img.gz"), idxBytes(0x803, {100, 2, 3}, pixels));
  Bytes compressed = readRaw(dir.file("img.gz"));
  compressed.resize(compressed.size() / 2);
  writeRaw(dir.file("img.gz"), compressed);
  Expected<IdxArray> a = readIdxImages(dir.file("img.gz"));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().rfind(dir.file("img.gz") +
                                ": truncated: the header says 100 x 2 "
                                "x 3 = 600 bytes of data, the file ends after ",
                            0),
            0u)
      << a.error();
  EXPECT_NE(a.error().find("(gzip: unexpected end of file)"), std::string::npos)
      << a.error();
}

TEST(IdxDataset, GzipStreamCutBeforeItsTrailer) {
  TempDir dir;
  writeGzip(dir.file("lab.gz"), labelsFile());
  Bytes compressed = readRaw(dir.file("lab.gz"));
  compressed.resize(compressed.size() - 8); // drop CRC-32 and length
  writeRaw(dir.file("lab.gz"), compressed);
  Expected<IdxArray> a = readIdxLabels(dir.file("lab.gz"));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error(),
            dir.file("lab.gz") +
                ": truncated: the gzip stream ends after the data, before "
                "its checksum (gzip: unexpected end of file)");
}

TEST(IdxDataset, CorruptGzipChecksum) {
  TempDir dir;
  writeGzip(dir.file("lab.gz"), labelsFile());
  Bytes compressed = readRaw(dir.file("lab.gz"));
  // The gzip trailer is CRC-32 then length; spoil the CRC.
  compressed[compressed.size() - 8] ^= 0xff;
  writeRaw(dir.file("lab.gz"), compressed);
  Expected<IdxArray> a = readIdxLabels(dir.file("lab.gz"));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error(),
            dir.file("lab.gz") + ": cannot read: gzip: incorrect data check");
}

TEST(IdxDataset, OverflowingDimensions) {
  TempDir dir;
  std::string message = openError(
      dir, idxBytes(0x803, {0xffffffffu, 0xffffffffu, 0xffffffffu}, {}),
      labelsFile());
  EXPECT_EQ(message,
            dir.file("images") +
                ": dimensions 4294967295 x 4294967295 x 4294967295 overflow: "
                "their product does not fit in memory's size type");
}

TEST(IdxDataset, HugeHeaderOnASmallFileIsTruncatedNotAllocated) {
  TempDir dir;
  // Promises 4 GB of pixels; the reader must fail on the data, not allocate it.
  std::string message = openError(
      dir, idxBytes(0x803, {0xffffffffu, 1, 1}, kPixels), labelsFile());
  EXPECT_EQ(message,
            dir.file("images") +
                ": truncated: the header says 4294967295 x 1 x 1 = 4294967295 "
                "bytes of data, the file ends after 18");
}

TEST(IdxDataset, HugeHeaderInAGzipStreamGrowsOnlyWithTheData) {
  TempDir dir;
  // 4 GB promised inside a gzip stream of 34 bytes: the size is unknown until
  // the stream ends, and the buffer must not jump ahead of the data.
  writeGzip(dir.file("img.gz"), idxBytes(0x803, {0xffffffffu, 1, 1}, kPixels));
  const std::string expected =
      dir.file("img.gz") +
      ": truncated: the header says 4294967295 x 1 x 1 = 4294967295 bytes of "
      "data, the file ends after 18";
  Expected<IdxArray> a = readIdxImages(dir.file("img.gz"));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error(), expected);
  // 32 MiB of room: the reader that grew in 64 MiB steps failed here.
  const int status = exitStatusUnderMemoryLimit(32 << 20, [&] {
    Expected<IdxArray> b = readIdxImages(dir.file("img.gz"));
    return !b.ok() && b.error() == expected ? 0 : 1;
  });
  EXPECT_EQ(status, 0) << "99: an allocation failed under the limit";
}

TEST(IdxDataset, GzipMembersReadAsOneStream) {
  TempDir dir;
  // `cat header.gz data.gz`: the header in one member, the labels in another.
  Bytes labels = labelsFile();
  writeGzip(dir.file("a.gz"), Bytes(labels.begin(), labels.begin() + 8));
  writeGzip(dir.file("b.gz"), Bytes(labels.begin() + 8, labels.end()));
  Bytes both = readRaw(dir.file("a.gz"));
  Bytes second = readRaw(dir.file("b.gz"));
  both.insert(both.end(), second.begin(), second.end());
  writeRaw(dir.file("lab.gz"), both);
  Expected<IdxArray> a = readIdxLabels(dir.file("lab.gz"));
  ASSERT_TRUE(a.ok()) << a.error();
  EXPECT_EQ(a->data, kLabels);
}

TEST(IdxDataset, BytesAfterTheGzipStreamAreNamedWithTheirOffset) {
  TempDir dir;
  writeGzip(dir.file("lab.gz"), labelsFile());
  Bytes compressed = readRaw(dir.file("lab.gz"));
  const size_t end = compressed.size();
  compressed.insert(compressed.end(), {0, 0, 0, 0, 0});
  writeRaw(dir.file("lab.gz"), compressed);
  Expected<IdxArray> a = readIdxLabels(dir.file("lab.gz"));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error(),
            dir.file("lab.gz") + ": byte " + std::to_string(end) +
                " of the file: the gzip stream ends there, and the 5 bytes "
                "after it are not another gzip member (the file is damaged or "
                "something was appended to it; cut it at byte " +
                std::to_string(end) + " or write it again)");
}

TEST(IdxDataset, TrailingDataMeansAWrongHeader) {
  TempDir dir;
  Bytes labels = labelsFile();
  labels.push_back(3);
  EXPECT_EQ(openError(dir, imagesFile(), labels),
            dir.file("labels") + ": has data after the 3 bytes its header (3) "
                                 "describes; is the header wrong?");
}

TEST(IdxDataset, EmptyImagesAreRejected) {
  TempDir dir;
  EXPECT_EQ(openError(dir, idxBytes(0x803, {3, 0, 28}, {}), labelsFile()),
            dir.file("images") + ": images of 0 x 28 pixels are empty");
}

TEST(IdxDataset, DirectoryInsteadOfFile) {
  TempDir dir;
  Expected<IdxArray> a = readIdxLabels(dir.path());
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error(), dir.path() + ": is a directory, not an IDX file");
}

TEST(IdxDataset, FashionMnistTestSplit) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  // scripts/setup.sh installs it: its absence is a broken set-up, not a
  // reason to pass.
  ASSERT_TRUE(std::filesystem::is_directory(dir))
      << dir << " is not installed (Debian package dataset-fashion-mnist; "
      << "scripts/setup.sh installs it)";
  Expected<IdxDataset> d = IdxDataset::openSplit(dir, "test");
  ASSERT_TRUE(d.ok()) << d.error();
  ASSERT_EQ(d->size(), 10000u);
  EXPECT_EQ(d->exampleShape(), (std::vector<int64_t>{784}));
  EXPECT_EQ(d->numClasses(), 10);
  std::set<int32_t> classes;
  std::vector<float> x(784);
  float lo = 1, hi = 0;
  for (size_t i = 0; i < d->size(); ++i) {
    int32_t label = d->copyExample(i, x.data());
    ASSERT_GE(label, 0);
    ASSERT_LE(label, 9);
    classes.insert(label);
    auto [mn, mx] = std::minmax_element(x.begin(), x.end());
    lo = std::min(lo, *mn);
    hi = std::max(hi, *mx);
  }
  EXPECT_EQ(classes.size(), 10u);
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);
}

} // namespace
