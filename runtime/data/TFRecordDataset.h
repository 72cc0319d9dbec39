// Reading tf.train.Example records from TFRecord files (plain or gzip), with
// their CRCs checked, into an in-memory dataset of named feature columns.
#pragma once

#include "runtime/data/Dataset.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dtf::data {

/// One column of the dataset: the feature `feature` of every record, which
/// must hold `count` values, fed to the input `input`. Every value must be
/// finite; the input's type and use narrow them further.
struct TFRecordColumn {
  std::string input;
  std::string feature;
  int64_t count = 0;
  /// The input is an integer (ids, labels): values must be whole numbers of
  /// at most 2^24 in magnitude (what a float holds exactly).
  bool integer = false;
  /// When > 0, the input holds the labels of a loss over this many classes:
  /// values must lie in 0..classes-1.
  int64_t classes = 0;
};

/// The longest record a gzip file may announce. A plain file's records are
/// bounded by the file's size instead; a gzip stream's size is known only by
/// reading it, and a length field of 2^31 in a damaged file must not cost
/// 2 GB before the stream turns out to be short.
constexpr uint64_t kMaxGzipRecordBytes = uint64_t(256) << 20;

/// The most warnings a TFRecordReport keeps (the counts count them all).
constexpr size_t kMaxTFRecordWarnings = 20;

struct TFRecordOptions {
  /// A glob(3) pattern: "data/train-*.tfrecord"; the files it matches are
  /// read in name order.
  std::string pattern;
  /// The whole file is one gzip stream (TensorFlow's compression_type="GZIP").
  bool gzip = false;
  /// A record whose data CRC is wrong, that is not a tf.train.Example, or
  /// whose values its input cannot take (NaN, an infinity, a fractional or
  /// out-of-range label) is skipped (and counted) rather than fatal. A wrong
  /// length CRC, a length the file cannot hold, a truncated record, a corrupt
  /// gzip stream or bytes after it end the file either way (what follows
  /// cannot be found), skipped or fatal by the same flag.
  bool skipCorrupt = false;
  /// The features read, in this order: example i's features are the columns'
  /// values one after the other.
  std::vector<TFRecordColumn> columns;
  /// Worker shardIndex of shardCount: when at least shardCount files match,
  /// this worker reads only files shardIndex, shardIndex + shardCount, ...;
  /// otherwise every file (and the caller shards the records).
  size_t shardIndex = 0;
  size_t shardCount = 1;
};

/// What reading found besides the examples.
struct TFRecordReport {
  size_t files = 0;     // files matched
  size_t filesRead = 0; // files this shard read
  bool shardedByFile = false;
  size_t records = 0; // examples read
  /// Corrupt records skipped, and files whose rest was skipped.
  size_t corruptSkipped = 0;
  /// Records skipped for values their inputs cannot take.
  size_t invalidSkipped = 0;
  /// One line per skip, the first kMaxTFRecordWarnings of them: "FILE: offset
  /// N: ...".
  std::vector<std::string> warnings;
};

/// Reads the matching files into memory. Feature values become floats:
/// float_list as is, int64_list exactly when |v| <= 2^24, bytes_list (one
/// value of `count` bytes) byte by byte as 0..255. Labels are all 0 (the
/// columns carry every input, labels included). Errors name the file and the
/// record's byte offset (in the uncompressed stream for gzip), and the record's
/// number in the file (from 1) where a value is refused: "a.tfrecord: offset
/// 1234: data CRC mismatch (stored 0x..., computed 0x...)", "a.tfrecord:
/// offset 0: feature 'image' holds 783 values; input 'x' takes 784",
/// "a.tfrecord: offset 90: record 2: feature 'x' holds nan (value 3 of 4)...";
/// bytes after a gzip stream are named by their offset in the file. Feature
/// names from a file are printed with non-printable bytes escaped (\xNN).
Expected<InMemoryDataset> readTFRecords(const TFRecordOptions &options,
                                        TFRecordReport *report = nullptr);

/// What a log says of the skips in `report`: its warnings, then one line per
/// count ("SOURCE: skipped 3 corrupt records", "SOURCE: skipped 2 records
/// with values the inputs cannot take"); none when nothing was skipped.
std::vector<std::string> describeSkips(const std::string &source,
                                       const TFRecordReport &report);

} // namespace dtf::data
