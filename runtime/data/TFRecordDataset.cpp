// TFRecord files of tf.train.Example: framing, CRC-32C, feature columns.
#include "runtime/data/TFRecordDataset.h"

#include "runtime/core/Crc32c.h"

#include "example.pb.h"

#include <glob.h>
#include <zlib.h>

#include <algorithm>
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

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
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

struct GzCloser {
  void operator()(gzFile_s *f) const { gzclose(f); }
};

// Reads exactly n bytes; returns the count read (< n at the end of the file),
// or -1 on a read error.
int64_t readFully(gzFile f, void *out, size_t n) {
  size_t done = 0;
  while (done < n) {
    const unsigned chunk = unsigned(std::min<size_t>(n - done, 1u << 30));
    int r = gzread(f, static_cast<char *>(out) + done, chunk);
    if (r < 0)
      return -1;
    if (r == 0)
      break;
    done += size_t(r);
  }
  return int64_t(done);
}

// Appends one feature's values to `out`, or says what is wrong.
std::string appendFeature(const tensorflow::Example &ex,
                          const TFRecordColumn &c, std::vector<float> &out) {
  const auto &map = ex.features().feature();
  auto it = map.find(c.feature);
  if (it == map.end()) {
    std::string names;
    for (const auto &kv : map)
      names += (names.empty() ? "" : ", ") + kv.first;
    return "has no feature '" + c.feature + "' for input '" + c.input +
           "' (it has: " + (names.empty() ? "none" : names) + ")";
  }
  const tensorflow::Feature &f = it->second;
  auto wrongCount = [&](int64_t n, const char *kind) {
    return "feature '" + c.feature + "' (" + kind + ") holds " +
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
        return "feature '" + c.feature + "' holds " + std::to_string(x) +
               ", beyond the integers dtf-run's data pipeline holds exactly "
               "(|v| <= 2^24)";
      out.push_back(float(x));
    }
    return "";
  }
  case tensorflow::Feature::kBytesList: {
    const auto &v = f.bytes_list().value();
    if (v.size() != 1 || int64_t(v[0].size()) != c.count)
      return "feature '" + c.feature + "' (bytes_list) holds " +
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
    return "feature '" + c.feature + "' holds no list";
  }
}

// Reads one file's records into `features`. Returns an error message naming
// the file, or "".
std::string readFile(const std::string &path, const TFRecordOptions &o,
                     uint64_t plainBytesLeft, std::vector<float> &features,
                     TFRecordReport &report) {
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
  if (!f)
    return path + ": cannot open: " + std::strerror(errno);
  gzbuffer(f.get(), 1 << 17);
  std::vector<unsigned char> data;
  tensorflow::Example ex;
  uint64_t offset = 0;
  bool first = true;
  for (;;) {
    unsigned char header[12];
    const int64_t got = readFully(f.get(), header, sizeof header);
    if (first) {
      first = false;
      const bool direct = gzdirect(f.get()) != 0;
      if (got > 0 && o.gzip && direct)
        return path + ": is not gzip-compressed, but the source says "
                      "compression = gzip";
      if (!o.gzip && !direct)
        return path + ": is gzip-compressed; add compression = gzip to the "
                      "source";
    }
    if (got < 0)
      return path + ": offset " + std::to_string(offset) +
             ": cannot read: " + gzerror(f.get(), nullptr);
    if (got == 0)
      return "";
    // A problem that makes the rest of the file unreadable.
    auto endOfFile = [&](const std::string &what) -> std::string {
      std::string msg =
          path + ": offset " + std::to_string(offset) + ": " + what;
      if (!o.skipCorrupt)
        return msg + " (on_corrupt = skip skips it)";
      report.warnings.push_back(msg + "; the rest of the file is skipped");
      ++report.corruptSkipped;
      return "";
    };
    if (got < int64_t(sizeof header))
      return endOfFile("truncated record header (" + std::to_string(got) +
                       " of 12 bytes)");
    const uint64_t length = readLe64(header);
    const uint32_t lengthCrc = readLe32(header + 8);
    if (maskedCrc(header, 8) != lengthCrc)
      return endOfFile("length CRC mismatch (stored " + hex32(lengthCrc) +
                       ", computed " + hex32(maskedCrc(header, 8)) +
                       "): not a TFRecord file, or a corrupt one");
    if (length > (uint64_t(1) << 31))
      return endOfFile("record of " + std::to_string(length) +
                       " bytes, more than 2 GiB");
    data.resize(size_t(length) + 4);
    const int64_t body = readFully(f.get(), data.data(), data.size());
    if (body < 0)
      return path + ": offset " + std::to_string(offset) +
             ": cannot read: " + gzerror(f.get(), nullptr);
    if (uint64_t(body) < data.size())
      return endOfFile("truncated record: " + std::to_string(length) +
                       " data bytes announced, " +
                       std::to_string(std::max<int64_t>(body - 4, 0)) +
                       " present");
    const uint64_t here = offset;
    offset += 12 + data.size();
    const uint32_t stored = readLe32(data.data() + length);
    const uint32_t computed = maskedCrc(data.data(), size_t(length));
    std::string bad;
    if (stored != computed)
      bad = "data CRC mismatch (stored " + hex32(stored) + ", computed " +
            hex32(computed) + ")";
    else if (!ex.ParseFromArray(data.data(), int(length)))
      bad = "the record is not a tf.train.Example";
    if (!bad.empty()) {
      std::string msg = path + ": offset " + std::to_string(here) + ": " + bad;
      if (!o.skipCorrupt)
        return msg + " (on_corrupt = skip skips such records)";
      report.warnings.push_back(msg + "; record skipped");
      ++report.corruptSkipped;
      continue;
    }
    const size_t before = features.size();
    if (before == 0 && !o.gzip) {
      // Records of one source are about the same size: room for all of them
      // at once, rather than a vector that doubles (twice the data at its
      // peak).
      const uint64_t records = plainBytesLeft / (16 + length);
      features.reserve(size_t(std::min<uint64_t>(records + 1, 1u << 28)) *
                       size_t(perRecord(o)));
    }
    for (const TFRecordColumn &c : o.columns) {
      std::string why = appendFeature(ex, c, features);
      if (!why.empty()) {
        features.resize(before);
        return path + ": offset " + std::to_string(here) + ": " + why;
      }
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

} // namespace dtf::data
