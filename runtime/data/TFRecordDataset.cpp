// TFRecord files of tf.train.Example: framing, CRC-32C, feature columns.
#include "runtime/data/TFRecordDataset.h"

#include "runtime/core/Crc32c.h"
#include "runtime/data/InputFile.h"
#include "schema/PlanSchema.h"

#include "example.pb.h"

#include <glob.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

namespace dtf::data {
namespace {

uint32_t maskedCrc(const void *data, size_t n) {
  return crc32c::mask(crc32c::value(data, n));
}

int64_t perRecord(const TFRecordOptions &o) {
  int64_t n = 0;
  for (const TFRecordColumn &c : o.columns)
    n += c.count;
  return n;
}

uint64_t readLe64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

uint32_t readLe32(const unsigned char *p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
         uint32_t(p[3]) << 24;
}

// A number as messages write it: 1.5, nan, inf, 1e+30.
std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Appends one feature's values to `out`, or says what is wrong.
std::string appendFeature(const tensorflow::Example &ex,
                          const TFRecordColumn &c, std::vector<float> &out) {
  const auto &map = ex.features().feature();
  auto it = map.find(c.feature);
  if (it == map.end()) {
    std::string names;
    for (const auto &kv : map)
      names += (names.empty() ? "" : ", ") + plan::printable(kv.first);
    return "has no feature '" + plan::printable(c.feature) + "' for input '" +
           c.input + "' (it has: " + (names.empty() ? "none" : names) + ")";
  }
  const std::string feature = plan::printable(c.feature);
  const tensorflow::Feature &f = it->second;
  auto wrongCount = [&](int64_t n, const char *kind) {
    return "feature '" + feature + "' (" + kind + ") holds " +
           std::to_string(n) + " values; input '" + c.input + "' takes " +
           std::to_string(c.count) + " per example";
  };
  switch (f.kind_case()) {
  case tensorflow::Feature::kFloatList: {
    const auto &v = f.float_list().value();
    if (v.size() != c.count)
      return wrongCount(v.size(), "float_list");
    out.insert(out.end(), v.begin(), v.end());
    return "";
  }
  case tensorflow::Feature::kInt64List: {
    const auto &v = f.int64_list().value();
    if (v.size() != c.count)
      return wrongCount(v.size(), "int64_list");
    for (int64_t x : v) {
      if (x > (int64_t(1) << 24) || x < -(int64_t(1) << 24))
        return "feature '" + feature + "' holds " + std::to_string(x) +
               ", beyond the integers dtf-run's data pipeline holds exactly "
               "(|v| <= 2^24)";
      out.push_back(float(x));
    }
    return "";
  }
  case tensorflow::Feature::kBytesList: {
    const auto &v = f.bytes_list().value();
    if (v.size() != 1 || int64_t(v[0].size()) != c.count)
      return "feature '" + feature + "' (bytes_list) holds " +
             std::to_string(v.size()) + " strings" +
             (v.size() == 1 ? " of " + std::to_string(v[0].size()) + " bytes"
                            : std::string()) +
             "; input '" + c.input + "' takes one string of " +
             std::to_string(c.count) + " bytes (one value per byte)";
    for (unsigned char b : v[0])
      out.push_back(float(b));
    return "";
  }
  default:
    return "feature '" + feature + "' holds no list";
  }
}

// Why the values `v` of column `c` cannot feed its input, or "".
std::string checkValues(const TFRecordColumn &c, const float *v) {
  for (int64_t k = 0; k < c.count; ++k) {
    const float x = v[k];
    std::string why;
    if (!std::isfinite(x))
      why = "; inputs take finite numbers only";
    else if (c.integer && (x != std::floor(x) || std::fabs(x) > 0x1p24f))
      why = ", but input '" + c.input +
            "' is an integer input: it takes whole numbers up to 2^24";
    else if (c.classes > 0 && (x < 0 || x >= float(c.classes)))
      why = ", but input '" + c.input + "' holds the labels of a loss over " +
            std::to_string(c.classes) + " classes: labels lie in 0.." +
            std::to_string(c.classes - 1);
    if (!why.empty())
      return "feature '" + plan::printable(c.feature) + "' holds " + number(x) +
             " (value " + std::to_string(k + 1) + " of " +
             std::to_string(c.count) + ")" + why;
  }
  return "";
}

// The reading of one file: where it is, and how problems are reported.
struct FileReader {
  const std::string &path;
  const TFRecordOptions &o;
  InputFile &file;
  TFRecordReport &report;

  std::string at(uint64_t offset) const {
    return path + ": offset " + std::to_string(offset) + ": ";
  }
  // Keeps a warning (the first few) for a skip.
  void warn(std::string line) {
    if (report.warnings.size() < kMaxTFRecordWarnings)
      report.warnings.push_back(std::move(line));
  }
  // A problem that makes the rest of the file unreadable: fatal, or the rest
  // skipped. Returns the error, or "".
  std::string endOfFile(const std::string &msg) {
    if (!o.skipCorrupt)
      return msg + " (on_corrupt = skip skips it)";
    warn(msg + "; the rest of the file is skipped");
    ++report.corruptSkipped;
    return "";
  }
  // The read stopped short at `offset`: what the file says went wrong, or
  // `truncated` when the data simply ended.
  std::string shortRead(uint64_t offset, const std::string &truncated) {
    const std::string &why = file.failureMessage();
    switch (file.failure()) {
    case InputFile::Failure::kIo:
      return at(offset) + why;
    case InputFile::Failure::kTrailingBytes:
      return endOfFile(path + ": " + why);
    case InputFile::Failure::kCorrupt:
      return endOfFile(at(offset) + why);
    default:
      return endOfFile(at(offset) + truncated +
                       (why.empty() ? "" : " (" + why + ")"));
    }
  }
  // Why a record of `length` bytes at `offset` cannot be in this file, or "".
  std::string lengthProblem(uint64_t offset, uint64_t length) const {
    // A plain file's size bounds its records (a pipe has no size).
    const uint64_t size = file.fileSize(), pos = file.position();
    if (!file.gzip() && size >= pos) {
      if (size - pos < 4 || length > size - pos - 4)
        return at(offset) + "truncated record: its length field announces " +
               std::to_string(length) + " data bytes and a 4-byte CRC, but " +
               std::to_string(size - pos) +
               " bytes of the file follow (the file is cut short, or not a "
               "TFRecord file)";
    } else if (length > kMaxGzipRecordBytes) {
      return at(offset) + "the length field announces a record of " +
             std::to_string(length) + " bytes, more than the " +
             std::to_string(kMaxGzipRecordBytes >> 20) +
             " MiB dtf-run reads from a gzip file: a corrupt file, or not a "
             "TFRecord file";
    }
    if (length > uint64_t(INT_MAX) - 4)
      return at(offset) + "a record of " + std::to_string(length) +
             " bytes, more than the 2 GiB a tf.train.Example may hold";
    return "";
  }
};

// Reads the next record's bytes into data[0, *length): kRecord; at the end of
// the file kEnd; kSkip when the rest of the file is skipped; else *error says
// why reading stops.
enum class Framing { kRecord, kEnd, kSkip, kError };
Framing readRecord(FileReader &r, bool first, std::vector<unsigned char> &data,
                   uint64_t *length, std::string *error) {
  const uint64_t offset = r.file.position();
  auto stop = [&](std::string err) {
    *error = std::move(err);
    return error->empty() ? Framing::kSkip : Framing::kError;
  };
  unsigned char header[12];
  const size_t got = r.file.read(header, sizeof header);
  if (got == 0 && r.file.failure() == InputFile::Failure::kNone)
    return Framing::kEnd;
  if (got < sizeof header)
    return stop(r.shortRead(offset, "truncated record header (" +
                                        std::to_string(got) + " of 12 bytes)"));
  *length = readLe64(header);
  const uint32_t lengthCrc = readLe32(header + 8);
  if (maskedCrc(header, 8) != lengthCrc) {
    if (first && !r.o.gzip && r.file.startsLikeGzip())
      return stop(r.path + ": is gzip-compressed; add compression = gzip to "
                           "the source");
    return stop(r.endOfFile(r.at(offset) + "length CRC mismatch (stored " +
                            hex32(lengthCrc) + ", computed " +
                            hex32(maskedCrc(header, 8)) +
                            "): not a TFRecord file, or a corrupt one"));
  }
  if (std::string why = r.lengthProblem(offset, *length); !why.empty())
    return stop(r.endOfFile(why));
  // The data and its CRC, read in pieces that grow with what has arrived:
  // a length that lies is found by the end of the stream, not by allocating.
  const size_t total = size_t(*length) + 4;
  size_t have = 0;
  while (have < total) {
    const size_t want =
        std::min(total - have, std::max<size_t>(have, size_t(1) << 20));
    if (data.size() < have + want)
      data.resize(have + want);
    const size_t n = r.file.read(data.data() + have, want);
    have += n;
    if (n < want)
      return stop(r.shortRead(
          offset, "truncated record: " + std::to_string(*length) +
                      " data bytes announced, " +
                      std::to_string(have > 4 ? have - 4 : 0) + " present"));
  }
  return Framing::kRecord;
}

// Reads one file's records into `features`. Returns an error message naming
// the file, or "".
std::string readFile(const std::string &path, const TFRecordOptions &o,
                     uint64_t plainBytes, std::vector<float> &features,
                     TFRecordReport &report) {
  Expected<std::unique_ptr<InputFile>> opened =
      InputFile::open(path, o.gzip ? InputFile::Compression::kGzip
                                   : InputFile::Compression::kNone);
  if (!opened)
    return opened.error();
  InputFile &file = **opened;
  if (o.gzip && !file.startsLikeGzip() && file.fileSize() > 0)
    return path + ": is not gzip-compressed, but the source says "
                  "compression = gzip";
  FileReader r{path, o, file, report};
  std::vector<unsigned char> data;
  tensorflow::Example ex;
  for (uint64_t record = 1;; ++record) {
    const uint64_t here = file.position();
    uint64_t length = 0;
    std::string err;
    switch (readRecord(r, record == 1, data, &length, &err)) {
    case Framing::kRecord:
      break;
    case Framing::kEnd:
    case Framing::kSkip:
      return "";
    case Framing::kError:
      return err;
    }
    const uint32_t stored = readLe32(data.data() + length);
    const uint32_t computed = maskedCrc(data.data(), size_t(length));
    std::string bad;
    if (stored != computed)
      bad = "data CRC mismatch (stored " + hex32(stored) + ", computed " +
            hex32(computed) + ")";
    else if (!ex.ParseFromArray(data.data(), int(length)))
      bad = "the record is not a tf.train.Example";
    if (!bad.empty()) {
      if (!o.skipCorrupt)
        return r.at(here) + bad + " (on_corrupt = skip skips such records)";
      r.warn(r.at(here) + bad + "; record skipped");
      ++report.corruptSkipped;
      continue;
    }
    const size_t before = features.size();
    std::string invalid;
    for (const TFRecordColumn &c : o.columns) {
      const size_t first = features.size();
      if (std::string why = appendFeature(ex, c, features); !why.empty()) {
        features.resize(before);
        return r.at(here) + why;
      }
      if (invalid.empty())
        invalid = checkValues(c, features.data() + first);
    }
    if (!invalid.empty()) {
      features.resize(before);
      const std::string msg =
          r.at(here) + "record " + std::to_string(record) + ": " + invalid;
      if (!o.skipCorrupt)
        return msg + " (correct the record, or on_corrupt = skip skips such "
                     "records)";
      r.warn(msg + "; record skipped");
      ++report.invalidSkipped;
      continue;
    }
    if (report.records == 0 && !o.gzip) {
      // Records of one source are about the same size: room for all of them
      // at once, rather than a vector that doubles (twice the data at its
      // peak). Asked for once the first record proved it holds its values
      // (a byte each at least), so the room stays near the files' size.
      const uint64_t records = plainBytes / (16 + length);
      features.reserve(size_t(std::min<uint64_t>(records + 1, 1u << 28)) *
                       size_t(perRecord(o)));
    }
    ++report.records;
  }
}

} // namespace

Expected<InMemoryDataset> readTFRecords(const TFRecordOptions &o,
                                        TFRecordReport *reportOut) {
  TFRecordReport report;
  if (o.columns.empty())
    return Error("tfrecord:" + o.pattern + ": no features to read");
  int64_t perExample = 0;
  for (const TFRecordColumn &c : o.columns) {
    if (c.count <= 0)
      return Error("tfrecord:" + o.pattern + ": input '" + c.input +
                   "' takes no values per example");
    perExample += c.count;
  }
  glob_t g{};
  const int rc = glob(o.pattern.c_str(), GLOB_ERR, nullptr, &g);
  std::vector<std::string> files;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i)
      files.push_back(g.gl_pathv[i]);
  globfree(&g);
  if (rc == GLOB_NOMATCH || (rc == 0 && files.empty()))
    return Error(o.pattern + ": no file matches this pattern");
  if (rc != 0)
    return Error(o.pattern + ": cannot list the files this pattern names");
  std::sort(files.begin(), files.end());
  report.files = files.size();

  const size_t n = std::max<size_t>(o.shardCount, 1);
  if (n > 1 && files.size() >= n) {
    std::vector<std::string> mine;
    for (size_t i = o.shardIndex; i < files.size(); i += n)
      mine.push_back(files[i]);
    files = std::move(mine);
    report.shardedByFile = true;
  }
  report.filesRead = files.size();

  // The bytes of the files, for a first guess at the number of records.
  uint64_t plainBytes = 0;
  for (const std::string &path : files) {
    std::error_code ec;
    const uintmax_t size = std::filesystem::file_size(path, ec);
    plainBytes += ec ? 0 : uint64_t(size);
  }
  std::vector<float> features;
  for (const std::string &path : files) {
    std::string err = readFile(path, o, plainBytes, features, report);
    if (!err.empty())
      return Error(err);
  }
  if (report.records == 0)
    return Error(o.pattern + ": the files hold no records");
  std::vector<int32_t> labels(report.records, 0);
  std::string description = "tfrecord:" + o.pattern;
  if (report.shardedByFile)
    description += " (files " + std::to_string(o.shardIndex) + " mod " +
                   std::to_string(n) + ")";
  Expected<InMemoryDataset> d = InMemoryDataset::create(
      std::move(features), std::move(labels), {perExample}, std::nullopt,
      std::move(description));
  if (d && reportOut)
    *reportOut = std::move(report);
  return d;
}

std::vector<std::string> describeSkips(const std::string &source,
                                       const TFRecordReport &r) {
  std::vector<std::string> lines = r.warnings;
  auto plural = [](size_t n, const char *what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  const size_t skips = r.corruptSkipped + r.invalidSkipped;
  if (skips > r.warnings.size())
    lines.push_back(source + ": " + plural(skips - r.warnings.size(), "skip") +
                    " more, not shown");
  if (r.corruptSkipped > 0)
    lines.push_back(source + ": skipped " +
                    plural(r.corruptSkipped, "corrupt record"));
  if (r.invalidSkipped > 0)
    lines.push_back(source + ": skipped " + plural(r.invalidSkipped, "record") +
                    " with values the inputs cannot take");
  return lines;
}

} // namespace dtf::data
