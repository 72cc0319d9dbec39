// TrainLog: the training log as a plain text file in the run's directory.
#pragma once

#include "schema/Status.h"

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

namespace dtf::summary {

/// Appends lines to a text file (a rerun in the same directory adds to it),
/// each flushed at once so that `tail -f` follows the run. Thread safe.
class TrainLog {
public:
  /// Creates the file's directory if needed and opens the file for appending.
  static Status open(const std::string &path, std::unique_ptr<TrainLog> *out);
  ~TrainLog();

  /// Writes `text` and a newline. Carriage returns and ANSI escape sequences
  /// (a terminal's redraw codes) are dropped, so the file holds plain lines.
  Status line(const std::string &text);

  const std::string &path() const { return path_; }

private:
  TrainLog() = default;

  std::string path_;
  std::mutex mu_;
  std::FILE *file_ = nullptr;
  Status error_;
};

/// `text` without carriage returns and ANSI escape sequences (ESC [ ... a
/// letter).
std::string plainText(const std::string &text);

} // namespace dtf::summary
