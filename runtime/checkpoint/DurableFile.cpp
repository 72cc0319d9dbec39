// Durable files of a checkpoint directory: atomic writes, reads, listing.
#include "runtime/checkpoint/DurableFile.h"

#include "runtime/core/Crc32c.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <sstream>

namespace dtf::checkpoint::files {

std::string sysError(const std::string &what, const std::string &path) {
  return strCat(what, " ", path, ": ", std::strerror(errno));
}

std::string joinPath(const std::string &dir, const std::string &name) {
  if (dir.empty())
    return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

Fd::~Fd() {
  if (fd_ >= 0)
    ::close(fd_);
}

void Fd::reset(int fd) {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = fd;
}

Status fsyncDir(const std::string &dir) {
  Fd fd(::open(dir.empty() ? "." : dir.c_str(),
               O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0)
    return errorStatus(sysError("cannot open the directory", dir));
  if (::fsync(fd.get()) != 0 && errno != EINVAL)
    return errorStatus(sysError("cannot fsync the directory", dir));
  return Status::ok();
}

Status makeDirs(const std::string &dir) {
  if (dir.empty())
    return Status::ok();
  std::string path;
  std::stringstream parts(dir);
  std::string part;
  if (dir[0] == '/')
    path = "/";
  while (std::getline(parts, part, '/')) {
    if (part.empty())
      continue;
    path += part;
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
      return errorStatus(sysError("cannot create the directory", path));
    path += "/";
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return errorStatus("checkpoint directory ", dir, " is not a directory");
  return Status::ok();
}

Status AtomicFile::create(const std::string &dir, const std::string &name,
                          std::unique_ptr<AtomicFile> *out) {
  static std::atomic<unsigned> counter{0};
  std::unique_ptr<AtomicFile> f(new AtomicFile());
  f->dir_ = dir;
  f->path_ = joinPath(dir, name);
  f->temp_ = joinPath(
      dir, strCat(".", name, ".tmp-", ::getpid(), "-", counter.fetch_add(1)));
  int fd =
      ::open(f->temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return errorStatus(sysError("cannot create", f->temp_));
  f->fd_ = fd;
  *out = std::move(f);
  return Status::ok();
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0)
    ::close(fd_);
  if (!committed_)
    ::unlink(temp_.c_str());
}

Status AtomicFile::write(const void *data, size_t n) {
  crc_ = crc32c::extend(crc_, data, n);
  size_ += n;
  if (n < 4096 && buffer_.size() + n <= kBuffer) {
    buffer_.append(static_cast<const char *>(data), n);
    return Status::ok();
  }
  DTF_RETURN_IF_ERROR(flush());
  return writeAll(static_cast<const char *>(data), n);
}

Status AtomicFile::commit() {
  DTF_RETURN_IF_ERROR(flush());
  if (::fsync(fd_) != 0)
    return errorStatus(sysError("cannot fsync", temp_));
  if (::close(fd_) != 0) {
    fd_ = -1;
    return errorStatus(sysError("cannot close", temp_));
  }
  fd_ = -1;
  if (::rename(temp_.c_str(), path_.c_str()) != 0)
    return errorStatus(sysError(strCat("cannot rename ", temp_, " to"), path_));
  committed_ = true;
  return fsyncDir(dir_);
}

Status AtomicFile::flush() {
  Status s = writeAll(buffer_.data(), buffer_.size());
  buffer_.clear();
  return s;
}

Status AtomicFile::writeAll(const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd_, p, std::min(n, size_t(1) << 30));
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return errorStatus(sysError("cannot write", temp_));
    }
    p += w;
    n -= size_t(w);
  }
  return Status::ok();
}

Status preadAll(int fd, const std::string &path, uint64_t offset, void *out,
                size_t n) {
  char *p = static_cast<char *>(out);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, std::min(n, size_t(1) << 30), off_t(offset));
    if (r < 0) {
      if (errno == EINTR)
        continue;
      return errorStatus(sysError("cannot read", path));
    }
    if (r == 0)
      return errorStatus("checkpoint file ", path,
                         " is truncated: it ends at byte ", offset,
                         " where more data was expected");
    p += r;
    n -= size_t(r);
    offset += uint64_t(r);
  }
  return Status::ok();
}

Status openForRead(const std::string &path, Fd *fd, uint64_t *size) {
  int f = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f < 0)
    return errorStatus(sysError("cannot open checkpoint file", path));
  Fd owned(f);
  struct stat st;
  if (::fstat(f, &st) != 0)
    return errorStatus(sysError("cannot stat", path));
  *size = uint64_t(st.st_size);
  fd->reset(owned.release());
  return Status::ok();
}

Status readWholeFile(const std::string &path, std::string *out) {
  Fd fd;
  uint64_t size = 0;
  DTF_RETURN_IF_ERROR(openForRead(path, &fd, &size));
  if (size > (uint64_t(1) << 32))
    return errorStatus(path, " is too large for a checkpoint index");
  out->assign(size, '\0');
  return preadAll(fd.get(), path, 0, out->data(), out->size());
}

Status listDir(const std::string &dir, std::vector<std::string> *names,
               bool *missing) {
  *missing = false;
  DIR *d = ::opendir(dir.empty() ? "." : dir.c_str());
  if (!d) {
    if (errno == ENOENT) {
      *missing = true;
      return Status::ok();
    }
    return errorStatus(sysError("cannot read the checkpoint directory", dir));
  }
  while (struct dirent *e = ::readdir(d))
    names->push_back(e->d_name);
  ::closedir(d);
  std::sort(names->begin(), names->end());
  return Status::ok();
}

Status unlinkIfThere(const std::string &path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return errorStatus(sysError("cannot delete", path));
  return Status::ok();
}

} // namespace dtf::checkpoint::files
