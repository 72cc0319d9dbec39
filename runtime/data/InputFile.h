// A data file read as a stream of bytes: plain, or gzip decompressed as it is
// read, with bytes after the gzip stream refused rather than ignored.
#pragma once

#include "runtime/data/Expected.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

struct z_stream_s;

namespace dtf::data {

/// Reads a file front to back. A gzip file may hold several members one after
/// the other (what `cat a.gz b.gz` makes, and what gzip(1) and TensorFlow's
/// reader accept): their data is read as one stream. Anything else after the
/// last member is an error, not silently dropped as zlib's gzread() does, so a
/// damaged or appended-to file is noticed.
class InputFile {
public:
  enum class Compression {
    /// gzip when the file starts with gzip's magic bytes (1f 8b), else plain.
    kDetect,
    kNone,
    kGzip,
  };

  /// How a read stopped short.
  enum class Failure {
    kNone,
    /// The gzip stream ends inside a member: the file was cut short.
    kTruncated,
    /// Not valid gzip data (a bad header, block or checksum).
    kCorrupt,
    /// Bytes after the last gzip member that do not start another one.
    kTrailingBytes,
    /// The operating system could not read the file.
    kIo,
  };

  /// Opens `path` (a directory is refused). The error names the file.
  static Expected<std::unique_ptr<InputFile>> open(const std::string &path,
                                                   Compression compression);
  ~InputFile();
  InputFile(const InputFile &) = delete;
  InputFile &operator=(const InputFile &) = delete;

  const std::string &path() const { return path_; }
  /// Whether the data is decompressed.
  bool gzip() const { return gzip_; }
  /// Whether the file starts with gzip's magic bytes, whatever was asked.
  bool startsLikeGzip() const { return startsLikeGzip_; }
  /// The size of the file on disk.
  uint64_t fileSize() const { return fileSize_; }
  /// The bytes of data (decompressed for gzip) read so far.
  uint64_t position() const { return position_; }

  /// Reads up to `n` bytes; fewer only at the end of the data or on a
  /// failure, which failure() then describes.
  size_t read(void *out, size_t n);

  Failure failure() const { return failure_; }
  /// What went wrong, without the path: "gzip: unexpected end of file",
  /// "gzip: incorrect data check", "byte 1234 of the file: ...". Empty while
  /// nothing did.
  const std::string &failureMessage() const { return failureMessage_; }

private:
  InputFile();
  size_t readPlain(unsigned char *out, size_t n);
  size_t readGzip(unsigned char *out, size_t n);
  // Moves unread input to the front of the buffer and reads more after it;
  // false at the end of the file or on an error (then failure_ is set).
  bool refill();
  // After a member's end: another member, the end of the file, or trailing
  // bytes (a failure). False when reading is over.
  bool startNextMember();
  void fail(Failure f, std::string message);

  std::string path_;
  std::FILE *file_ = nullptr;
  std::unique_ptr<z_stream_s> zs_;
  // Read but not yet used bytes of the file are in_[inPos_, inEnd_).
  std::vector<unsigned char> in_;
  size_t inPos_ = 0;
  size_t inEnd_ = 0;
  bool gzip_ = false;
  bool startsLikeGzip_ = false;
  bool inMember_ = false;
  bool ended_ = false;
  uint64_t fileSize_ = 0;
  uint64_t fileRead_ = 0; // bytes taken from the file into in_
  uint64_t position_ = 0;
  Failure failure_ = Failure::kNone;
  std::string failureMessage_;
};

} // namespace dtf::data
