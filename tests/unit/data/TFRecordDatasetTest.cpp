// Tests of the TFRecord reader: framing and CRCs, features to columns,
// sharding by file, and each error's wording. (TensorFlow-written files are
// read in tests/interop/tfrecord.sh.)
#include "runtime/data/TFRecordDataset.h"

#include "runtime/core/Crc32c.h"

#include "TestSupport.h"
#include "example.pb.h"

#include <gtest/gtest.h>

using namespace dtf::data;
using namespace dtf::data::testing;

namespace {

// One record's framing around `data`, as TensorFlow writes it.
void appendRecord(Bytes &out, const std::string &data) {
  auto put = [&](const void *p, size_t n) {
    const uint8_t *b = static_cast<const uint8_t *>(p);
    out.insert(out.end(), b, b + n);
  };
  const uint64_t length = data.size();
  const uint32_t lengthCrc =
      dtf::crc32c::mask(dtf::crc32c::value(&length, sizeof length));
  const uint32_t dataCrc =
      dtf::crc32c::mask(dtf::crc32c::value(data.data(), data.size()));
  put(&length, sizeof length); // little-endian on the machines dtf runs on
  put(&lengthCrc, sizeof lengthCrc);
  put(data.data(), data.size());
  put(&dataCrc, sizeof dataCrc);
}

// An Example with a float feature "x" of `values` and an int64 feature "y".
std::string example(const std::vector<float> &values, int64_t label) {
  tensorflow::Example ex;
  auto &features = *ex.mutable_features()->mutable_feature();
  for (float v : values)
    features["x"].mutable_float_list()->add_value(v);
  features["y"].mutable_int64_list()->add_value(label);
  return ex.SerializeAsString();
}

Bytes records(int first, int count) {
  Bytes out;
  for (int i = first; i < first + count; ++i)
    appendRecord(out, example({float(i), float(-i)}, i % 3));
  return out;
}

TFRecordOptions xy(const std::string &pattern) {
  TFRecordOptions o;
  o.pattern = pattern;
  o.columns = {{"x", "x", 2}, {"y", "y", 1}};
  return o;
}

std::string readError(const TFRecordOptions &o) {
  Expected<InMemoryDataset> d = readTFRecords(o);
  EXPECT_FALSE(d.ok());
  return d.ok() ? "" : d.error();
}

TEST(TFRecordDataset, ReadsShardsInNameOrderIntoColumns) {
  TempDir dir;
  writeRaw(dir.file("b.tfrecord"), records(3, 2));
  writeRaw(dir.file("a.tfrecord"), records(0, 3));
  TFRecordReport report;
  Expected<InMemoryDataset> d =
      readTFRecords(xy(dir.file("*.tfrecord")), &report);
  ASSERT_TRUE(d.ok()) << d.error();
  ASSERT_EQ(d->size(), 5u);
  EXPECT_EQ(d->exampleShape(), std::vector<int64_t>({3}));
  EXPECT_EQ(report.files, 2u);
  EXPECT_EQ(report.records, 5u);
  for (size_t i = 0; i < 5; ++i) {
    Example e = d->example(i);
    EXPECT_EQ(e.features,
              std::vector<float>({float(i), -float(i), float(i % 3)}))
        << "example " << i;
  }
}

TEST(TFRecordDataset, GzipAndTheWrongCompressionNamed) {
  TempDir dir;
  writeGzip(dir.file("a.tfrecord.gz"), records(0, 4));
  writeRaw(dir.file("plain.tfrecord"), records(0, 1));
  TFRecordOptions o = xy(dir.file("a.tfrecord.gz"));
  o.gzip = true;
  Expected<InMemoryDataset> d = readTFRecords(o);
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->size(), 4u);
  EXPECT_EQ(readError(xy(dir.file("a.tfrecord.gz"))),
            dir.file("a.tfrecord.gz") +
                ": is gzip-compressed; add compression = gzip to the source");
  o.pattern = dir.file("plain.tfrecord");
  EXPECT_EQ(readError(o), dir.file("plain.tfrecord") +
                              ": is not gzip-compressed, but the source says "
                              "compression = gzip");
}

TEST(TFRecordDataset, ShardsByFileWhenThereAreEnoughFiles) {
  TempDir dir;
  for (int k = 0; k < 5; ++k)
    writeRaw(dir.file("part-" + std::to_string(k)), records(10 * k, 2));
  TFRecordOptions o = xy(dir.file("part-*"));
  o.shardIndex = 1;
  o.shardCount = 2;
  TFRecordReport report;
  Expected<InMemoryDataset> d = readTFRecords(o, &report);
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_TRUE(report.shardedByFile);
  EXPECT_EQ(report.filesRead, 2u); // files 1 and 3
  ASSERT_EQ(d->size(), 4u);
  EXPECT_EQ(d->example(0).features[0], 10.0f);
  EXPECT_EQ(d->example(2).features[0], 30.0f);

  // More workers than files: every file, sharded by record later.
  o.shardIndex = 5;
  o.shardCount = 6;
  d = readTFRecords(o, &report);
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_FALSE(report.shardedByFile);
  EXPECT_EQ(d->size(), 10u);
}

TEST(TFRecordDataset, CorruptDataIsNamedOrSkipped) {
  TempDir dir;
  Bytes bytes = records(0, 3);
  const size_t second = bytes.size() / 3; // records of equal size
  bytes[second + 12 + 3] ^= 0x40;
  writeRaw(dir.file("c.tfrecord"), bytes);
  EXPECT_NE(readError(xy(dir.file("c.tfrecord")))
                .find(dir.file("c.tfrecord") + ": offset " +
                      std::to_string(second) + ": data CRC mismatch"),
            std::string::npos);
  TFRecordOptions o = xy(dir.file("c.tfrecord"));
  o.skipCorrupt = true;
  TFRecordReport report;
  Expected<InMemoryDataset> d = readTFRecords(o, &report);
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->size(), 2u);
  EXPECT_EQ(report.corruptSkipped, 1u);
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_EQ(d->example(1).features[0], 2.0f);
}

TEST(TFRecordDataset, TruncatedAndBadLengthCrcEndTheFile) {
  TempDir dir;
  Bytes bytes = records(0, 2);
  bytes.resize(bytes.size() - 5);
  writeRaw(dir.file("t.tfrecord"), bytes);
  const size_t second = (bytes.size() + 5) / 2;
  EXPECT_NE(
      readError(xy(dir.file("t.tfrecord")))
          .find(": offset " + std::to_string(second) + ": truncated record"),
      std::string::npos);
  Bytes bad = records(0, 1);
  bad[9] ^= 1; // the length's CRC
  writeRaw(dir.file("l.tfrecord"), bad);
  EXPECT_NE(readError(xy(dir.file("l.tfrecord")))
                .find(": offset 0: length CRC mismatch"),
            std::string::npos);
  TFRecordOptions o = xy(dir.file("t.tfrecord"));
  o.skipCorrupt = true;
  Expected<InMemoryDataset> d = readTFRecords(o);
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->size(), 1u);
}

TEST(TFRecordDataset, FeatureErrorsNameTheRecordAndInput) {
  TempDir dir;
  Bytes bytes = records(0, 1);
  appendRecord(bytes, example({1.0f}, 0)); // one value, the input takes 2
  writeRaw(dir.file("f.tfrecord"), bytes);
  std::string err = readError(xy(dir.file("f.tfrecord")));
  EXPECT_NE(err.find("f.tfrecord: offset "), std::string::npos) << err;
  EXPECT_NE(err.find("feature 'x' (float_list) holds 1 values; input 'x' "
                     "takes 2 per example"),
            std::string::npos)
      << err;

  TFRecordOptions o = xy(dir.file("f.tfrecord"));
  o.columns[1].feature = "label";
  EXPECT_NE(readError(o).find("offset 0: has no feature 'label' for input "
                              "'y' (it has: "),
            std::string::npos);

  Bytes big;
  tensorflow::Example ex;
  (*ex.mutable_features()->mutable_feature())["y"]
      .mutable_int64_list()
      ->add_value(int64_t(1) << 30);
  appendRecord(big, ex.SerializeAsString());
  writeRaw(dir.file("big.tfrecord"), big);
  o = xy(dir.file("big.tfrecord"));
  o.columns = {{"y", "y", 1}};
  EXPECT_NE(readError(o).find("feature 'y' holds 1073741824, beyond the "
                              "integers dtf-run's data pipeline holds "
                              "exactly"),
            std::string::npos);
  o.pattern = dir.file("none-*.tfrecord");
  EXPECT_EQ(readError(o), o.pattern + ": no file matches this pattern");
}

TEST(TFRecordDataset, BytesListFeedsOneValuePerByte) {
  TempDir dir;
  tensorflow::Example ex;
  (*ex.mutable_features()->mutable_feature())["image"]
      .mutable_bytes_list()
      ->add_value(std::string("\x00\x7f\xff", 3));
  Bytes bytes;
  appendRecord(bytes, ex.SerializeAsString());
  writeRaw(dir.file("b.tfrecord"), bytes);
  TFRecordOptions o;
  o.pattern = dir.file("b.tfrecord");
  o.columns = {{"x", "image", 3}};
  Expected<InMemoryDataset> d = readTFRecords(o);
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->example(0).features, std::vector<float>({0, 127, 255}));
  o.columns[0].count = 4;
  EXPECT_NE(readError(o).find("feature 'image' (bytes_list) holds 1 strings "
                              "of 3 bytes; input 'x' takes one string of 4 "
                              "bytes"),
            std::string::npos);
}

} // namespace
