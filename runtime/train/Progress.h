// The training loop's output: progress lines, evaluation lines and the final
// line that scripts parse.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace dtf::train {

/// A metric's name and value.
struct Metric {
  std::string name;
  double value = 0;
};

/// "2m01s", "45s", "1h02m", "3d04h".
std::string formatDuration(double seconds);

/// A metric value: 4 decimals ("0.4312"), 4 significant digits when smaller
/// than 0.001 ("2.113e-05"), "nan" and "inf" as such.
std::string formatValue(double value);

/// "step 1200/5000  loss 0.4312  accuracy 0.8600  1873 img/s  ETA 2m01s".
std::string progressLine(int64_t step, int64_t steps,
                         const std::vector<Metric> &metrics,
                         double examplesPerSec, double etaSeconds);

/// "eval  step 5000  loss 0.3120  accuracy 0.8874".
std::string evalLine(int64_t step, const std::vector<Metric> &metrics);

/// "final: steps=5000 loss=0.3120 accuracy=0.8874 examples_per_sec=1873.2
/// seconds=133.5": key=value pairs separated by single spaces; a space in a
/// metric name becomes '_'.
std::string finalLine(int64_t steps, const std::vector<Metric> &metrics,
                      double examplesPerSec, double seconds);

/// Writes progress to a stream: redrawn in place ('\r', then clearing to the
/// end of the line) when the stream is a terminal, one line per report
/// otherwise.
class ProgressWriter {
public:
  /// `interactive` < 0: decide by isatty.
  ProgressWriter(std::FILE *out, int interactive = -1);

  /// A progress report (redrawn in place on a terminal).
  void progress(const std::string &line);
  /// A line that stays (evaluation, the final line, notes).
  void line(const std::string &line);

private:
  std::FILE *out_;
  bool interactive_;
  bool open_ = false; // a progress line is drawn and not ended yet
};

} // namespace dtf::train
