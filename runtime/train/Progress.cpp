// Formatting of progress, evaluation and final lines.
#include "runtime/train/Progress.h"

#include <cmath>
#include <unistd.h>

namespace dtf::train {

std::string formatDuration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds))
    return "?";
  const int64_t s = int64_t(std::llround(seconds));
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%llds", (long long)s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", (long long)(s / 60),
                  (long long)(s % 60));
  else if (s < 86400)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", (long long)(s / 3600),
                  (long long)(s % 3600 / 60));
  else
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", (long long)(s / 86400),
                  (long long)(s % 86400 / 3600));
  return buf;
}

std::string formatValue(double value) {
  if (std::isnan(value))
    return "nan";
  if (std::isinf(value))
    return value > 0 ? "inf" : "-inf";
  char buf[64];
  if (value != 0 && std::fabs(value) < 1e-3)
    std::snprintf(buf, sizeof buf, "%.4g", value);
  else
    std::snprintf(buf, sizeof buf, "%.4f", value);
  return buf;
}

namespace {

std::string metricsText(const std::vector<Metric> &metrics, const char *sep,
                        const char *between) {
  std::string s;
  for (const Metric &m : metrics) {
    s += between;
    s += m.name;
    s += sep;
    s += formatValue(m.value);
  }
  return s;
}

std::string keyName(const std::string &name) {
  std::string k = name;
  for (char &c : k)
    if (c == ' ' || c == '=' || c == '\t')
      c = '_';
  return k;
}

} // namespace

std::string progressLine(int64_t step, int64_t steps,
                         const std::vector<Metric> &metrics,
                         double examplesPerSec, double etaSeconds) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "step %lld/%lld", (long long)step,
                (long long)steps);
  std::string s = buf;
  s += metricsText(metrics, " ", "  ");
  std::snprintf(buf, sizeof buf, "  %.0f img/s  ETA %s", examplesPerSec,
                formatDuration(etaSeconds).c_str());
  return s + buf;
}

std::string evalLine(int64_t step, const std::vector<Metric> &metrics) {
  return "eval  step " + std::to_string(step) + metricsText(metrics, " ", "  ");
}

std::string finalLine(int64_t steps, const std::vector<Metric> &metrics,
                      double examplesPerSec, double seconds) {
  std::string s = "final: steps=" + std::to_string(steps);
  for (const Metric &m : metrics)
    s += " " + keyName(m.name) + "=" + formatValue(m.value);
  char buf[96];
  std::snprintf(buf, sizeof buf, " examples_per_sec=%.1f seconds=%.1f",
                examplesPerSec, seconds);
  return s + buf;
}

ProgressWriter::ProgressWriter(std::FILE *out, int interactive)
    : out_(out), interactive_(interactive < 0 ? isatty(fileno(out)) != 0
                                              : interactive != 0) {}

void ProgressWriter::progress(const std::string &line) {
  if (interactive_) {
    std::fprintf(out_, "\r%s\x1b[K", line.c_str());
    open_ = true;
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

void ProgressWriter::line(const std::string &line) {
  if (open_) {
    std::fputc('\n', out_);
    open_ = false;
  }
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

} // namespace dtf::train
