// Reading a plain or gzip file through zlib's inflate, member by member.
#include "runtime/data/InputFile.h"

#include <zlib.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace dtf::data {
namespace {

constexpr size_t kBufferBytes = size_t(1) << 17;

bool gzipMagic(const unsigned char *p) { return p[0] == 0x1f && p[1] == 0x8b; }

} // namespace

InputFile::InputFile() = default;

InputFile::~InputFile() {
  if (zs_)
    inflateEnd(zs_.get());
  if (file_)
    std::fclose(file_);
}

Expected<std::unique_ptr<InputFile>> InputFile::open(const std::string &path,
                                                     Compression compression) {
  errno = 0;
  std::unique_ptr<InputFile> f(new InputFile());
  f->path_ = path;
  f->file_ = std::fopen(path.c_str(), "rb");
  if (!f->file_)
    return Error(path + ": cannot open: " +
                 (errno ? std::strerror(errno) : "unknown error"));
  struct stat st {};
  if (fstat(fileno(f->file_), &st) != 0)
    return Error(path + ": cannot read: " + std::strerror(errno));
  if (S_ISDIR(st.st_mode))
    return Error(path + ": is a directory, not a file");
  f->fileSize_ = S_ISREG(st.st_mode) ? uint64_t(st.st_size) : 0;
  f->in_.resize(kBufferBytes);
  // The first two bytes say whether this is gzip; they stay in the buffer.
  while (f->inEnd_ < 2 && f->refill()) {
  }
  if (f->failure_ != Failure::kNone)
    return Error(path + ": " + f->failureMessage_);
  f->startsLikeGzip_ = f->inEnd_ >= 2 && gzipMagic(f->in_.data());
  f->gzip_ = compression == Compression::kGzip ||
             (compression == Compression::kDetect && f->startsLikeGzip_);
  if (!f->gzip_)
    return f;
  f->zs_ = std::make_unique<z_stream>();
  // 16 + 15: a gzip header and trailer (CRC-32 and length checked), the
  // largest window.
  if (inflateInit2(f->zs_.get(), 16 + MAX_WBITS) != Z_OK) {
    f->zs_.reset();
    return Error(path + ": cannot start gzip decompression (out of memory)");
  }
  // An empty file holds no members, so no data.
  f->inMember_ = f->inEnd_ > 0;
  f->ended_ = f->inEnd_ == 0;
  return f;
}

void InputFile::fail(Failure f, std::string message) {
  if (failure_ != Failure::kNone)
    return;
  failure_ = f;
  failureMessage_ = std::move(message);
}

bool InputFile::refill() {
  if (inPos_ > 0) {
    std::memmove(in_.data(), in_.data() + inPos_, inEnd_ - inPos_);
    inEnd_ -= inPos_;
    inPos_ = 0;
  }
  if (inEnd_ == in_.size())
    return true;
  const size_t got =
      std::fread(in_.data() + inEnd_, 1, in_.size() - inEnd_, file_);
  inEnd_ += got;
  fileRead_ += got;
  if (got == 0 && std::ferror(file_))
    fail(Failure::kIo, std::string("cannot read: ") + std::strerror(errno));
  return got > 0;
}

size_t InputFile::read(void *out, size_t n) {
  auto *bytes = static_cast<unsigned char *>(out);
  const size_t done = gzip_ ? readGzip(bytes, n) : readPlain(bytes, n);
  position_ += done;
  return done;
}

size_t InputFile::readPlain(unsigned char *out, size_t n) {
  size_t done = std::min(n, inEnd_ - inPos_);
  std::memcpy(out, in_.data() + inPos_, done);
  inPos_ += done;
  while (done < n && failure_ == Failure::kNone) {
    const size_t got = std::fread(out + done, 1, n - done, file_);
    done += got;
    fileRead_ += got;
    if (got == 0) {
      if (std::ferror(file_))
        fail(Failure::kIo, std::string("cannot read: ") + std::strerror(errno));
      break;
    }
  }
  return done;
}

bool InputFile::startNextMember() {
  // Two bytes (or the end of the file) tell another member from anything
  // else.
  while (inEnd_ - inPos_ < 2 && refill()) {
  }
  if (failure_ != Failure::kNone)
    return false;
  const size_t have = inEnd_ - inPos_;
  if (have == 0) {
    ended_ = true;
    return false;
  }
  const uint64_t at = fileRead_ - have;
  if (have >= 2 && gzipMagic(in_.data() + inPos_)) {
    inflateReset(zs_.get());
    inMember_ = true;
    return true;
  }
  fail(Failure::kTrailingBytes,
       "byte " + std::to_string(at) +
           " of the file: the gzip stream ends "
           "there, and the " +
           std::to_string(fileSize_ > at ? fileSize_ - at : have) +
           " bytes after it are not another gzip member (the file is damaged "
           "or something was appended to it; cut it at byte " +
           std::to_string(at) + " or write it again)");
  return false;
}

size_t InputFile::readGzip(unsigned char *out, size_t n) {
  size_t done = 0;
  while (done < n && !ended_ && failure_ == Failure::kNone) {
    if (!inMember_) {
      if (!startNextMember())
        break;
      continue;
    }
    if (inPos_ == inEnd_ && !refill()) {
      fail(Failure::kTruncated, "gzip: unexpected end of file");
      break;
    }
    z_stream &zs = *zs_;
    zs.next_in = in_.data() + inPos_;
    zs.avail_in = unsigned(inEnd_ - inPos_);
    zs.next_out = out + done;
    zs.avail_out = unsigned(std::min<size_t>(n - done, UINT_MAX));
    const int rc = inflate(&zs, Z_NO_FLUSH);
    done = size_t(zs.next_out - out);
    inPos_ = size_t(zs.next_in - in_.data());
    if (rc == Z_STREAM_END)
      inMember_ = false;
    else if (rc == Z_MEM_ERROR)
      fail(Failure::kIo, "gzip: out of memory");
    else if (rc != Z_OK && rc != Z_BUF_ERROR)
      fail(Failure::kCorrupt,
           std::string("gzip: ") +
               (zs.msg ? zs.msg : "invalid compressed data"));
  }
  return done;
}

} // namespace dtf::data
