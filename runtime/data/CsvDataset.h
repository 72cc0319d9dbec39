// Reading labelled examples from CSV files: numeric feature columns and a
// label.
#pragma once

#include "runtime/data/Dataset.h"

#include <optional>
#include <string>
#include <vector>

namespace dtf::data {

struct CsvOptions {
  /// Whether the first non-blank line names the columns.
  bool hasHeader = true;
  char delimiter = ',';
  /// The label column by name (needs the header); when empty, labelIndex picks
  /// it.
  std::string labelColumn;
  /// The label column by 0-based index; negative counts from the end, so the
  /// default -1 is the last column.
  int labelIndex = -1;
  /// The feature columns by name, in this order (needs the header); when empty,
  /// every column but the label, in file order.
  std::vector<std::string> featureColumns;
  /// Labels must lie in 0..numClasses-1 when set; otherwise the number of
  /// classes is the largest label plus one.
  std::optional<int32_t> numClasses;
};

/// Reads a CSV file into memory: each data line is one example whose features
/// are the feature columns (as float32, shape {number of feature columns}) and
/// whose label is the label column (a non-negative integer; "3" and "3.0" both
/// read as class 3). Fields may be double-quoted; blank lines are skipped; CRLF
/// line ends and a UTF-8 byte-order mark are accepted. A feature that is NaN
/// or infinite ("nan", "inf") is refused, as is a label that is fractional or
/// negative. Errors name the file, the 1-based line and the column:
/// "data.csv:17: column 'x3': 'abc' is not a number"; the text they quote
/// from the file has control bytes (a NUL included) and bytes >= 0x7f written
/// as \xNN, so a message is never cut short where it is printed.
Expected<InMemoryDataset> readCsv(const std::string &path,
                                  const CsvOptions &options = {});

/// The same, from text already in memory; `name` stands for the file in
/// messages.
Expected<InMemoryDataset> parseCsv(const std::string &text,
                                   const std::string &name,
                                   const CsvOptions &options = {});

} // namespace dtf::data
