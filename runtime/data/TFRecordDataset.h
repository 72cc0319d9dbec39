// Reading tf.train.Example records from TFRecord files (plain or gzip), with
// their CRCs checked, into an in-memory dataset of named feature columns.
#pragma once

#include "runtime/data/Dataset.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dtf::data {

/// One column of the dataset: the feature `feature` of every record, which
/// must hold `count` values, fed to the input `input`.
struct TFRecordColumn {
  std::string input;
  std::string feature;
  int64_t count = 0;
};

struct TFRecordOptions {
  /// A glob(3) pattern: "data/train-*.tfrecord"; the files it matches are
  /// read in name order.
  std::string pattern;
  /// The whole file is one gzip stream (TensorFlow's compression_type="GZIP").
  bool gzip = false;
  /// A record whose data CRC is wrong is skipped (and counted) rather than
  /// fatal. A wrong length CRC or a truncated record ends the file either way
  /// (what follows cannot be found), skipped or fatal by the same flag.
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
  size_t corruptSkipped = 0;
  /// One line per skipped corruption: "FILE: offset N: ...".
  std::vector<std::string> warnings;
};

/// Reads the matching files into memory. Feature values become floats:
/// float_list as is, int64_list exactly when |v| <= 2^24, bytes_list (one
/// value of `count` bytes) byte by byte as 0..255. Labels are all 0 (the
/// columns carry every input, labels included). Errors name the file and the
/// record's byte offset (in the uncompressed stream for gzip): "a.tfrecord:
/// offset 1234: data CRC mismatch (stored 0x..., computed 0x...)",
/// "a.tfrecord: offset 0: feature 'image' holds 783 values; input 'x' takes
/// 784".
Expected<InMemoryDataset> readTFRecords(const TFRecordOptions &options,
                                        TFRecordReport *report = nullptr);

} // namespace dtf::data
