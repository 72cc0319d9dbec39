// Durable files of a checkpoint directory: a file written under a hidden
// temporary name, fsynced and renamed into place (AtomicFile), reads that
// name the file, directory listing and removal.
#pragma once

#include "schema/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dtf::checkpoint::files {

/// "WHAT PATH: strerror(errno)".
std::string sysError(const std::string &what, const std::string &path);
std::string joinPath(const std::string &dir, const std::string &name);

/// A file descriptor, closed when it goes.
class Fd {
public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  ~Fd();
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd);

private:
  int fd_;
};

Status fsyncDir(const std::string &dir);
/// Creates `dir` and its parents when missing.
Status makeDirs(const std::string &dir);

/// A file written under a hidden temporary name in its final directory and
/// renamed into place by commit(); dropped (unlinked) when not committed. It
/// keeps the CRC32C and the size of everything written.
class AtomicFile {
public:
  static Status create(const std::string &dir, const std::string &name,
                       std::unique_ptr<AtomicFile> *out);
  ~AtomicFile();

  Status write(const void *data, size_t n);
  Status write(const std::string &s) { return write(s.data(), s.size()); }

  uint32_t crc() const { return crc_; }
  uint64_t size() const { return size_; }
  const std::string &path() const { return path_; }

  /// Flushes, fsyncs, renames into place and fsyncs the directory.
  Status commit();

private:
  static constexpr size_t kBuffer = 1 << 20;
  AtomicFile() = default;
  Status flush();
  Status writeAll(const char *p, size_t n);

  std::string dir_, path_, temp_;
  int fd_ = -1;
  bool committed_ = false;
  std::string buffer_;
  uint32_t crc_ = 0;
  uint64_t size_ = 0;
};

/// Reads `n` bytes at `offset`; a file that ends early is named truncated.
Status preadAll(int fd, const std::string &path, uint64_t offset, void *out,
                size_t n);
Status openForRead(const std::string &path, Fd *fd, uint64_t *size);
/// A checkpoint index's bytes (at most 4 GiB).
Status readWholeFile(const std::string &path, std::string *out);
/// The names in `dir`, sorted; *missing when it does not exist.
Status listDir(const std::string &dir, std::vector<std::string> *names,
               bool *missing);
Status unlinkIfThere(const std::string &path);

} // namespace dtf::checkpoint::files
