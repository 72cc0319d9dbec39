// Tests of the TFRecord reader: framing and CRCs, features to columns,
// sharding by file, lengths bounded before allocation, values checked against
// their inputs, gzip members and trailing bytes, and each error's wording.
// (TensorFlow-written files are read in tests/interop/tfrecord.sh.)
#include "runtime/data/TFRecordDataset.h"

#include "runtime/core/Crc32c.h"

#include "TestSupport.h"
#include "example.pb.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

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

// A record header announcing `length` bytes, its length CRC right: what a
// damaged or hostile file may start with.
Bytes header(uint64_t length) {
  Bytes out;
  appendRecord(out, "");
  const uint32_t lengthCrc =
      dtf::crc32c::mask(dtf::crc32c::value(&length, sizeof length));
  std::memcpy(out.data(), &length, 8);
  std::memcpy(out.data() + 8, &lengthCrc, 4);
  out.resize(12);
  return out;
}

// An Example with a float feature "x" of `values` and a float feature "y" of
// `label`.
std::string floatLabelled(const std::vector<float> &values, float label) {
  tensorflow::Example ex;
  auto &features = *ex.mutable_features()->mutable_feature();
  for (float v : values)
    features["x"].mutable_float_list()->add_value(v);
  features["y"].mutable_float_list()->add_value(label);
  return ex.SerializeAsString();
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

// xy with y an integer input holding the labels of 3 classes, as dtf-run
// reads it for a model whose loss is over 3 classes.
TFRecordOptions xLabels(const std::string &pattern) {
  TFRecordOptions o = xy(pattern);
  o.columns[1].integer = true;
  o.columns[1].classes = 3;
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

// The outside trial's file: 250 bytes whose first length field says 2^31 with
// a valid CRC. The plain reader compares it with the file's size; the old
// reader allocated 2 GB first (bad_alloc under a 1 GB limit).
TEST(TFRecordDataset, LengthBeyondThePlainFileIsRefusedBeforeAllocating) {
  TempDir dir;
  Bytes bytes = header(uint64_t(1) << 31);
  bytes.resize(250, 0x55);
  writeRaw(dir.file("lie.tfrecord"), bytes);
  const TFRecordOptions o = xy(dir.file("lie.tfrecord"));
  const std::string expected =
      dir.file("lie.tfrecord") +
      ": offset 0: truncated record: its length field announces 2147483648 "
      "data bytes and a 4-byte CRC, but 238 bytes of the file follow (the "
      "file is cut short, or not a TFRecord file) (on_corrupt = skip skips "
      "it)";
  EXPECT_EQ(readError(o), expected);
  // 64 MiB of room: enough to read, far from the 2 GB the field promises.
  const int status = exitStatusUnderMemoryLimit(64 << 20, [&] {
    Expected<InMemoryDataset> d = readTFRecords(o);
    return !d.ok() && d.error() == expected ? 0 : 1;
  });
  EXPECT_EQ(status, 0) << "99: the reader allocated what the length promised";
}

// A gzip stream's size is unknown until read: a length under the limit that
// the stream does not hold is found by its end, with the buffer grown only
// as far as the data that arrived.
TEST(TFRecordDataset, GzipLengthLieIsFoundByTheEndNotByAllocating) {
  TempDir dir;
  Bytes bytes = header(200u << 20);
  bytes.resize(12 + 100, 0x55);
  writeGzip(dir.file("lie.tfrecord.gz"), bytes);
  TFRecordOptions o = xy(dir.file("lie.tfrecord.gz"));
  o.gzip = true;
  // The stream ends cleanly after its 112 bytes: the record is short.
  EXPECT_EQ(readError(o), dir.file("lie.tfrecord.gz") +
                              ": offset 0: truncated record: 209715200 data "
                              "bytes announced, 96 present (on_corrupt = skip "
                              "skips it)");
  {
    const int status = exitStatusUnderMemoryLimit(64 << 20, [&] {
      Expected<InMemoryDataset> d = readTFRecords(o);
      return !d.ok() && d.error().find("truncated record") != std::string::npos
                 ? 0
                 : 1;
    });
    EXPECT_EQ(status, 0) << "99: the reader allocated the announced 200 MiB";
  }

  // Beyond the stated maximum, the length alone is refused.
  writeGzip(dir.file("huge.tfrecord.gz"), header(uint64_t(1) << 31));
  o.pattern = dir.file("huge.tfrecord.gz");
  EXPECT_EQ(readError(o),
            dir.file("huge.tfrecord.gz") +
                ": offset 0: the length field announces a record of "
                "2147483648 bytes, more than the 256 MiB dtf-run reads from a "
                "gzip file: a corrupt file, or not a TFRecord file (on_corrupt "
                "= skip skips it)");
}

TEST(TFRecordDataset, NonFiniteFeaturesAreRefusedWithFileAndRecord) {
  TempDir dir;
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::pair<float, std::string>> cases = {
      {std::nanf(""), "nan"}, {inf, "inf"}, {-inf, "-inf"}};
  for (const auto &[bad, printed] : cases) {
    Bytes bytes = records(0, 2);
    const size_t third = bytes.size();
    appendRecord(bytes, example({1.0f, bad}, 0));
    writeRaw(dir.file("n.tfrecord"), bytes);
    EXPECT_EQ(readError(xy(dir.file("n.tfrecord"))),
              dir.file("n.tfrecord") + ": offset " + std::to_string(third) +
                  ": record 3: feature 'x' holds " + printed +
                  " (value 2 of 2); inputs take finite numbers only (correct "
                  "the record, or on_corrupt = skip skips such records)");
  }
}

TEST(TFRecordDataset, FractionalAndOutOfRangeLabelsAreRefused) {
  TempDir dir;
  Bytes bytes;
  appendRecord(bytes, floatLabelled({1, 2}, 1.5f));
  writeRaw(dir.file("f.tfrecord"), bytes);
  EXPECT_EQ(readError(xLabels(dir.file("f.tfrecord"))),
            dir.file("f.tfrecord") +
                ": offset 0: record 1: feature 'y' holds 1.5 (value 1 of 1), "
                "but input 'y' is an integer input: it takes whole numbers up "
                "to 2^24 (correct the record, or on_corrupt = skip skips such "
                "records)");
  // A float input takes 1.5: the check follows the input's type.
  Expected<InMemoryDataset> d = readTFRecords(xy(dir.file("f.tfrecord")));
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->example(0).features[2], 1.5f);

  for (int64_t label : {int64_t(-1), int64_t(3)}) {
    Bytes labelled = records(0, 1);
    appendRecord(labelled, example({1, 2}, label));
    writeRaw(dir.file("l.tfrecord"), labelled);
    const std::string err = readError(xLabels(dir.file("l.tfrecord")));
    EXPECT_EQ(err, dir.file("l.tfrecord") + ": offset " +
                       std::to_string(records(0, 1).size()) +
                       ": record 2: feature 'y' holds " +
                       std::to_string(label) +
                       " (value 1 of 1), but input 'y' holds the labels of a "
                       "loss over 3 classes: labels lie in 0..2 (correct the "
                       "record, or on_corrupt = skip skips such records)");
  }
  // Label 2 of 3 classes is fine.
  Bytes good;
  appendRecord(good, example({1, 2}, 2));
  writeRaw(dir.file("g.tfrecord"), good);
  d = readTFRecords(xLabels(dir.file("g.tfrecord")));
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->example(0).features[2], 2.0f);
}

TEST(TFRecordDataset, SkipModeSkipsAndCountsBadValuesApartFromCorruption) {
  TempDir dir;
  Bytes bytes;
  appendRecord(bytes, example({1, 1}, 0));
  const size_t second = bytes.size();
  appendRecord(bytes, example({std::nanf(""), 1}, 0)); // record 2
  appendRecord(bytes, floatLabelled({1, 1}, 1.5f));    // record 3
  appendRecord(bytes, example({1, 1}, 7));             // record 4: 7 >= 3
  const size_t fifth = bytes.size();
  appendRecord(bytes, example({5, 5}, 1));
  bytes[fifth + 12 + 3] ^= 0x40; // record 5's data CRC
  appendRecord(bytes, example({6, 6}, 2));
  writeRaw(dir.file("s.tfrecord"), bytes);
  TFRecordOptions o = xLabels(dir.file("s.tfrecord"));
  o.skipCorrupt = true;
  TFRecordReport report;
  Expected<InMemoryDataset> d = readTFRecords(o, &report);
  ASSERT_TRUE(d.ok()) << d.error();
  ASSERT_EQ(d->size(), 2u);
  EXPECT_EQ(d->example(1).features, std::vector<float>({6, 6, 2}));
  EXPECT_EQ(report.records, 2u);
  EXPECT_EQ(report.invalidSkipped, 3u);
  EXPECT_EQ(report.corruptSkipped, 1u);
  ASSERT_EQ(report.warnings.size(), 4u);
  EXPECT_NE(report.warnings[0].find(
                "s.tfrecord: offset " + std::to_string(second) +
                ": record 2: feature 'x' holds nan (value 1 of 2); inputs take "
                "finite numbers only; record skipped"),
            std::string::npos)
      << report.warnings[0];
  EXPECT_NE(report.warnings[1].find("record 3: feature 'y' holds 1.5"),
            std::string::npos)
      << report.warnings[1];
  EXPECT_NE(report.warnings[2].find("record 4: feature 'y' holds 7"),
            std::string::npos)
      << report.warnings[2];
  EXPECT_NE(report.warnings[3].find("data CRC mismatch"), std::string::npos);

  // Many bad records: all counted, the first few kept as warnings.
  Bytes many;
  for (int i = 0; i < 30; ++i)
    appendRecord(many, example({std::nanf(""), 0}, 0));
  appendRecord(many, example({1, 1}, 1));
  writeRaw(dir.file("s.tfrecord"), many);
  d = readTFRecords(o, &report);
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->size(), 1u);
  EXPECT_EQ(report.invalidSkipped, 30u);
  EXPECT_EQ(report.warnings.size(), kMaxTFRecordWarnings);
}

TEST(TFRecordDataset, GzipTrailingBytesAreRefusedAndFurtherMembersRead) {
  TempDir dir;
  writeGzip(dir.file("a.gz"), records(0, 2));
  writeGzip(dir.file("b.gz"), records(2, 2));
  Bytes first = readRaw(dir.file("a.gz"));
  Bytes both = first;
  const Bytes second = readRaw(dir.file("b.gz"));
  both.insert(both.end(), second.begin(), second.end());

  // `cat a.gz b.gz`: two members, one stream of records, as gzip -d and
  // TensorFlow read it.
  writeRaw(dir.file("cat.tfrecord.gz"), both);
  TFRecordOptions o = xy(dir.file("cat.tfrecord.gz"));
  o.gzip = true;
  Expected<InMemoryDataset> d = readTFRecords(o);
  ASSERT_TRUE(d.ok()) << d.error();
  ASSERT_EQ(d->size(), 4u);
  EXPECT_EQ(d->example(3).features[0], 3.0f);

  // Bytes that are not another member: named with their offset in the file.
  Bytes garbage = first;
  const std::string tail = "garbage\n";
  garbage.insert(garbage.end(), tail.begin(), tail.end());
  writeRaw(dir.file("g.tfrecord.gz"), garbage);
  o.pattern = dir.file("g.tfrecord.gz");
  EXPECT_EQ(readError(o),
            dir.file("g.tfrecord.gz") + ": byte " +
                std::to_string(first.size()) +
                " of the file: the gzip stream ends there, and the 8 bytes "
                "after it are not another gzip member (the file is damaged or "
                "something was appended to it; cut it at byte " +
                std::to_string(first.size()) +
                " or write it again) (on_corrupt = skip skips it)");
  // Skipped: the records before them count, the rest of the file is skipped.
  o.skipCorrupt = true;
  TFRecordReport report;
  d = readTFRecords(o, &report);
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->size(), 2u);
  EXPECT_EQ(report.corruptSkipped, 1u);
}

TEST(TFRecordDataset, FeatureNamesFromTheFileArePrintedEscaped) {
  TempDir dir;
  tensorflow::Example ex;
  (*ex.mutable_features()->mutable_feature())[std::string("a\0b\x1b", 4)]
      .mutable_float_list()
      ->add_value(1);
  Bytes bytes;
  appendRecord(bytes, ex.SerializeAsString());
  writeRaw(dir.file("e.tfrecord"), bytes);
  const std::string err = readError(xy(dir.file("e.tfrecord")));
  EXPECT_EQ(err, dir.file("e.tfrecord") +
                     ": offset 0: has no feature 'x' for input 'x' (it has: "
                     "a\\x00b\\x1b)");
  EXPECT_EQ(err.find('\0'), std::string::npos);
}

} // namespace
