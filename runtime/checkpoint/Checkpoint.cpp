// Sharded checkpoints: data files, the index, the state file, keep-N, and
// the reader that assembles axis-0 slices into whole tensors.
#include "runtime/checkpoint/Checkpoint.h"

#include "runtime/core/Crc32c.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <iterator>
#include <set>
#include <sstream>

namespace dtf::checkpoint {

namespace {

// One axis-0 slice of a variable, in one data file.
struct Slice {
  int file = 0;
  int64_t rowOffset = 0, rowCount = 0;
  uint64_t dataOffset = 0, byteSize = 0;
  uint32_t crc = 0; // masked CRC32C of the slice's bytes
};
struct File {
  std::string name; // relative to the directory
  uint64_t size = 0;
  uint32_t crc = 0; // the file's footer CRC
};
struct Entry {
  TensorInfo info;
  std::vector<Slice> slices; // sorted by rowOffset, covering every row once
};

constexpr char kDataMagic[8] = {'D', 'T', 'F', 'C', 'K', 'P', 'T', 'D'};
constexpr char kFooterMagic[8] = {'D', 'T', 'F', 'C', 'K', 'E', 'N', 'D'};
constexpr uint32_t kDataVersion = 1;
constexpr size_t kHeaderSize = 36; // magic, 4 x u32, i64 step, u32 CRC
constexpr size_t kFooterSize = 20; // magic, u64 bytes before, u32 CRC
constexpr const char *kIndexMagic = "dtf-checkpoint-index 1";
constexpr const char *kStateFile = "checkpoint";
constexpr int kMaxRank = 32;
constexpr uint32_t kMaxNameBytes = 1 << 16;

// Stable codes for the file format (DType's order is not a promise).
constexpr DType kDTypeCodes[] = {DType::F32, DType::F16, DType::BF16,
                                 DType::I32, DType::I64, DType::Bool,
                                 DType::F64};

uint8_t dtypeCode(DType t) {
  for (uint8_t i = 0; i < std::size(kDTypeCodes); ++i)
    if (kDTypeCodes[i] == t)
      return i;
  return 0;
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08" PRIx32, v);
  return buf;
}

std::string sysError(const std::string &what, const std::string &path) {
  return strCat(what, " ", path, ": ", std::strerror(errno));
}

std::string joinPath(const std::string &dir, const std::string &name) {
  if (dir.empty())
    return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

// --- Little-endian encoding ------------------------------------------------

void put32(std::string *s, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    s->push_back(char((v >> (8 * i)) & 0xff));
}
void put64(std::string *s, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    s->push_back(char((v >> (8 * i)) & 0xff));
}
uint32_t get32(const char *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= uint32_t(uint8_t(p[i])) << (8 * i);
  return v;
}
uint64_t get64(const char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= uint64_t(uint8_t(p[i])) << (8 * i);
  return v;
}

// Reads fields from a metadata block, remembering when it ran past the end.
class Cursor {
public:
  Cursor(const std::string &bytes)
      : p_(bytes.data()), end_(p_ + bytes.size()) {}
  bool take(size_t n, const char **out) {
    if (size_t(end_ - p_) < n) {
      bad_ = true;
      return false;
    }
    *out = p_;
    p_ += n;
    return true;
  }
  uint32_t u32() {
    const char *p;
    return take(4, &p) ? get32(p) : 0;
  }
  uint64_t u64() {
    const char *p;
    return take(8, &p) ? get64(p) : 0;
  }
  uint8_t u8() {
    const char *p;
    return take(1, &p) ? uint8_t(*p) : 0;
  }
  bool ok() const { return !bad_; }
  bool atEnd() const { return p_ == end_; }

private:
  const char *p_, *end_;
  bool bad_ = false;
};

// --- Files -----------------------------------------------------------------

class Fd {
public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  ~Fd() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = fd;
  }

private:
  int fd_;
};

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

// A file written under a hidden temporary name in its final directory and
// renamed into place by commit(); dropped (unlinked) when not committed. It
// keeps the CRC32C and the size of everything written.
class AtomicFile {
public:
  static Status create(const std::string &dir, const std::string &name,
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
  ~AtomicFile() {
    if (fd_ >= 0)
      ::close(fd_);
    if (!committed_)
      ::unlink(temp_.c_str());
  }

  Status write(const void *data, size_t n) {
    crc_ = crc32c::extend(crc_, data, n);
    size_ += n;
    if (n < 4096 && buffer_.size() + n <= kBuffer) {
      buffer_.append(static_cast<const char *>(data), n);
      return Status::ok();
    }
    DTF_RETURN_IF_ERROR(flush());
    return writeAll(static_cast<const char *>(data), n);
  }
  Status write(const std::string &s) { return write(s.data(), s.size()); }

  uint32_t crc() const { return crc_; }
  uint64_t size() const { return size_; }
  const std::string &path() const { return path_; }

  // Flushes, fsyncs, renames into place and fsyncs the directory.
  Status commit() {
    DTF_RETURN_IF_ERROR(flush());
    if (::fsync(fd_) != 0)
      return errorStatus(sysError("cannot fsync", temp_));
    if (::close(fd_) != 0) {
      fd_ = -1;
      return errorStatus(sysError("cannot close", temp_));
    }
    fd_ = -1;
    if (::rename(temp_.c_str(), path_.c_str()) != 0)
      return errorStatus(
          sysError(strCat("cannot rename ", temp_, " to"), path_));
    committed_ = true;
    return fsyncDir(dir_);
  }

private:
  static constexpr size_t kBuffer = 1 << 20;
  AtomicFile() = default;

  Status flush() {
    Status s = writeAll(buffer_.data(), buffer_.size());
    buffer_.clear();
    return s;
  }
  Status writeAll(const char *p, size_t n) {
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

  std::string dir_, path_, temp_;
  int fd_ = -1;
  bool committed_ = false;
  std::string buffer_;
  uint32_t crc_ = 0;
  uint64_t size_ = 0;
};

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

// --- Shapes ----------------------------------------------------------------

int64_t rowsOf(const std::vector<int64_t> &shape) {
  return shape.empty() ? 1 : shape[0];
}

// Elements per row (along axis 0); false on overflow or a negative dim.
bool rowElements(const std::vector<int64_t> &shape, int64_t *out) {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) {
    if (shape[i] < 0 || (shape[i] > 0 && n > (int64_t(1) << 50) / shape[i]))
      return false;
    n *= shape[i];
  }
  if (!shape.empty() && shape[0] < 0)
    return false;
  *out = n;
  return true;
}

// --- Data files ------------------------------------------------------------

std::string encodeMeta(const SavedTensor &t, int64_t rowCount,
                       uint64_t byteSize) {
  std::string m;
  put32(&m, uint32_t(t.name.size()));
  m += t.name;
  m.push_back(char(dtypeCode(t.value->dtype())));
  put32(&m, uint32_t(t.fullShape.size()));
  for (int64_t d : t.fullShape)
    put64(&m, uint64_t(d));
  put64(&m, uint64_t(t.rowOffset));
  put64(&m, uint64_t(rowCount));
  put64(&m, byteSize);
  return m;
}

Status checkSaved(const SavedTensor &t, int64_t *rowCount) {
  if (t.name.empty() || t.name.size() > kMaxNameBytes)
    return errorStatus("a checkpoint tensor needs a name of 1 to ",
                       kMaxNameBytes, " bytes");
  if (!t.value || !t.value->defined())
    return errorStatus("checkpoint tensor '", t.name, "' has no value");
  const Tensor &v = *t.value;
  if (t.fullShape.size() > size_t(kMaxRank))
    return errorStatus("checkpoint tensor '", t.name, "' has rank ",
                       t.fullShape.size(), " (at most ", kMaxRank, ")");
  int64_t perRow = 0;
  if (!rowElements(t.fullShape, &perRow))
    return errorStatus("checkpoint tensor '", t.name, "' has a bad shape ",
                       shapeString(t.fullShape));
  const bool scalar = t.fullShape.empty();
  *rowCount = scalar ? 1 : (v.rank() == 0 ? -1 : v.dim(0));
  bool fits = scalar
                  ? v.rank() == 0 && t.rowOffset == 0
                  : v.rank() == int(t.fullShape.size()) && t.rowOffset >= 0 &&
                        t.rowOffset + *rowCount <= t.fullShape[0];
  for (int i = 1; fits && i < v.rank(); ++i)
    fits = v.dim(i) == t.fullShape[size_t(i)];
  if (!fits)
    return errorStatus("checkpoint tensor '", t.name, "': a value of shape ",
                       shapeString(v.shape()), " at row ", t.rowOffset,
                       " is not a slice along axis 0 of ",
                       shapeString(t.fullShape));
  (void)perRow;
  return Status::ok();
}

// One record of a data file, as read back.
struct Record {
  TensorInfo info;
  Slice slice;
};

// Reads a data file's header and the metadata of every record (skipping the
// tensors' bytes) and checks its footer. `file` gets the size and footer CRC.
Status scanDataFile(const std::string &path, int64_t step, int shard,
                    int numShards, std::vector<Record> *records, File *file) {
  Fd fd;
  uint64_t size = 0;
  DTF_RETURN_IF_ERROR(openForRead(path, &fd, &size));
  if (size < kHeaderSize + kFooterSize)
    return errorStatus("checkpoint data file ", path, " is truncated (", size,
                       " bytes)");
  char h[kHeaderSize];
  DTF_RETURN_IF_ERROR(preadAll(fd.get(), path, 0, h, kHeaderSize));
  if (std::memcmp(h, kDataMagic, 8) != 0)
    return errorStatus(path, " is not a dtf checkpoint data file");
  if (crc32c::unmask(get32(h + 32)) != crc32c::value(h, 32))
    return errorStatus("checkpoint data file ", path,
                       " is damaged: the CRC32C of its header does not match");
  if (get32(h + 8) != kDataVersion)
    return errorStatus("checkpoint data file ", path, " has format version ",
                       get32(h + 8), "; this dtf reads version ", kDataVersion);
  const uint32_t fShard = get32(h + 12), fShards = get32(h + 16),
                 count = get32(h + 20);
  const int64_t fStep = int64_t(get64(h + 24));
  if (fShard != uint32_t(shard) || fShards != uint32_t(numShards) ||
      fStep != step)
    return errorStatus("checkpoint data file ", path, " holds shard ", fShard,
                       " of ", fShards, " of step ", fStep, ", not shard ",
                       shard, " of ", numShards, " of step ", step);
  uint64_t offset = kHeaderSize;
  const uint64_t end = size - kFooterSize;
  for (uint32_t i = 0; i < count; ++i) {
    char sz[4];
    if (offset + 4 > end)
      return errorStatus("checkpoint data file ", path,
                         " is truncated: ", count, " tensors announced, ", i,
                         " found");
    DTF_RETURN_IF_ERROR(preadAll(fd.get(), path, offset, sz, 4));
    const uint32_t metaSize = get32(sz);
    if (metaSize > 4 * kMaxNameBytes || offset + 8 + metaSize > end)
      return errorStatus("checkpoint data file ", path,
                         " is damaged or truncated at tensor ", i);
    std::string meta(4 + metaSize + 4, '\0');
    DTF_RETURN_IF_ERROR(
        preadAll(fd.get(), path, offset, meta.data(), meta.size()));
    if (crc32c::unmask(get32(meta.data() + 4 + metaSize)) !=
        crc32c::value(meta.data(), 4 + metaSize))
      return errorStatus("checkpoint data file ", path,
                         " is damaged: the CRC32C of the metadata of tensor ",
                         i, " does not match");
    const std::string body = meta.substr(4, metaSize);
    Cursor c(body);
    Record r;
    const uint32_t nameSize = c.u32();
    const char *name = nullptr;
    if (nameSize > kMaxNameBytes || !c.take(nameSize, &name))
      return errorStatus("checkpoint data file ", path, ": bad name in tensor ",
                         i);
    r.info.name.assign(name, nameSize);
    const uint8_t code = c.u8();
    const uint32_t rank = c.u32();
    if (code >= std::size(kDTypeCodes) || rank > uint32_t(kMaxRank))
      return errorStatus("checkpoint data file ", path, ": tensor '",
                         r.info.name, "' has a bad dtype or rank");
    r.info.dtype = kDTypeCodes[code];
    for (uint32_t d = 0; d < rank; ++d)
      r.info.shape.push_back(int64_t(c.u64()));
    r.slice.file = shard;
    r.slice.rowOffset = int64_t(c.u64());
    r.slice.rowCount = int64_t(c.u64());
    r.slice.byteSize = c.u64();
    int64_t perRow = 0;
    if (!c.ok() || !c.atEnd() || !rowElements(r.info.shape, &perRow) ||
        r.slice.rowOffset < 0 || r.slice.rowCount < 0 ||
        r.slice.rowOffset + r.slice.rowCount > rowsOf(r.info.shape) ||
        r.slice.byteSize != uint64_t(r.slice.rowCount) * uint64_t(perRow) *
                                dtypeSize(r.info.dtype))
      return errorStatus("checkpoint data file ", path, ": tensor '",
                         r.info.name, "' has inconsistent metadata");
    r.slice.dataOffset = offset + 4 + metaSize + 4;
    if (r.slice.dataOffset + r.slice.byteSize + 4 > end)
      return errorStatus("checkpoint data file ", path,
                         " is truncated in tensor '", r.info.name, "'");
    char crc[4];
    DTF_RETURN_IF_ERROR(preadAll(
        fd.get(), path, r.slice.dataOffset + r.slice.byteSize, crc, 4));
    r.slice.crc = get32(crc);
    offset = r.slice.dataOffset + r.slice.byteSize + 4;
    records->push_back(std::move(r));
  }
  char f[kFooterSize];
  if (offset != end)
    return errorStatus("checkpoint data file ", path, " has ",
                       int64_t(end) - int64_t(offset),
                       " unexpected bytes before its footer");
  DTF_RETURN_IF_ERROR(preadAll(fd.get(), path, end, f, kFooterSize));
  if (std::memcmp(f, kFooterMagic, 8) != 0 || get64(f + 8) != end)
    return errorStatus("checkpoint data file ", path,
                       " is truncated or damaged: no footer at its end");
  file->size = size;
  file->crc = get32(f + 16);
  return Status::ok();
}

// Checks that a data file has the size and footer CRC the index records
// (cheap: the tensors' own CRCs are checked when they are read).
Status checkDataFile(const std::string &path, const File &expected) {
  Fd fd;
  uint64_t size = 0;
  DTF_RETURN_IF_ERROR(openForRead(path, &fd, &size));
  if (size != expected.size)
    return errorStatus("checkpoint data file ", path, " has ", size,
                       " bytes; its index says ", expected.size,
                       " (truncated or replaced)");
  char f[kFooterSize];
  DTF_RETURN_IF_ERROR(
      preadAll(fd.get(), path, size - kFooterSize, f, kFooterSize));
  if (std::memcmp(f, kFooterMagic, 8) != 0 ||
      get64(f + 8) != size - kFooterSize || get32(f + 16) != expected.crc)
    return errorStatus("checkpoint data file ", path,
                       " does not match its index (damaged or replaced)");
  return Status::ok();
}

// --- The index -------------------------------------------------------------

// Names are written with bytes outside visible ASCII (and '%') escaped as
// %XX, so that a line splits on spaces.
std::string escapeName(const std::string &s) {
  std::string out;
  for (unsigned char c : s) {
    if (c <= ' ' || c >= 0x7f || c == '%') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    } else {
      out.push_back(char(c));
    }
  }
  return out;
}

bool unescapeName(const std::string &s, std::string *out) {
  out->clear();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out->push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size())
      return false;
    unsigned v = 0;
    if (std::sscanf(s.substr(i + 1, 2).c_str(), "%2x", &v) != 1)
      return false;
    out->push_back(char(v));
    i += 2;
  }
  return true;
}

bool parseShape(const std::string &s, std::vector<int64_t> *shape) {
  shape->clear();
  if (s.size() < 2 || s.front() != '[' || s.back() != ']')
    return false;
  std::string body = s.substr(1, s.size() - 2);
  if (body.empty())
    return true;
  std::stringstream parts(body);
  std::string part;
  while (std::getline(parts, part, ',')) {
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end || errno || v < 0)
      return false;
    shape->push_back(v);
  }
  return shape->size() <= size_t(kMaxRank);
}

struct Index {
  int64_t step = 0;
  std::vector<File> files;
  std::map<std::string, Entry> entries;
};

std::string encodeIndex(const Index &index) {
  std::ostringstream os;
  os << kIndexMagic << "\n";
  os << "step " << index.step << "\n";
  os << "shards " << index.files.size() << "\n";
  for (size_t k = 0; k < index.files.size(); ++k)
    os << "file " << k << " " << index.files[k].name << " "
       << index.files[k].size << " " << hex32(index.files[k].crc) << "\n";
  for (const auto &[name, e] : index.entries) {
    os << "tensor " << escapeName(name) << " " << dtypeName(e.info.dtype) << " "
       << shapeString(e.info.shape) << "\n";
    for (const Slice &s : e.slices)
      os << "slice " << s.file << " " << s.rowOffset << " " << s.rowCount << " "
         << s.dataOffset << " " << s.byteSize << " " << hex32(s.crc) << "\n";
  }
  std::string body = os.str();
  body += "end " +
          hex32(crc32c::mask(crc32c::value(body.data(), body.size()))) + "\n";
  return body;
}

bool parseHex32(const std::string &s, uint32_t *v) {
  if (s.size() != 10 || s.rfind("0x", 0) != 0)
    return false;
  char *end = nullptr;
  unsigned long x = std::strtoul(s.c_str() + 2, &end, 16);
  if (*end)
    return false;
  *v = uint32_t(x);
  return true;
}

// Checks that the slices of `e` (sorted here) cover its rows exactly once.
Status checkCoverage(Entry *e, const std::string &where) {
  std::sort(
      e->slices.begin(), e->slices.end(),
      [](const Slice &a, const Slice &b) { return a.rowOffset < b.rowOffset; });
  int64_t next = 0;
  for (const Slice &s : e->slices) {
    if (s.rowOffset != next)
      return errorStatus(where, ": the slices of tensor '", e->info.name, "' ",
                         s.rowOffset < next ? "overlap" : "leave a gap",
                         " at row ", std::min(next, s.rowOffset));
    next += s.rowCount;
  }
  if (next != rowsOf(e->info.shape))
    return errorStatus(where, ": the slices of tensor '", e->info.name,
                       "' cover ", next, " of its ", rowsOf(e->info.shape),
                       " rows");
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

Status parseIndex(const std::string &path, int64_t step, Index *index) {
  std::string text;
  DTF_RETURN_IF_ERROR(readWholeFile(path, &text));
  auto bad = [&](const std::string &why) {
    return errorStatus("checkpoint index ", path, " is damaged: ", why);
  };
  const size_t endPos = text.rfind("end ");
  if (endPos == std::string::npos || (endPos > 0 && text[endPos - 1] != '\n'))
    return bad("no end line (truncated)");
  uint32_t stored = 0;
  std::string endLine = text.substr(endPos + 4);
  if (!endLine.empty() && endLine.back() == '\n')
    endLine.pop_back();
  if (!parseHex32(endLine, &stored))
    return bad("a bad end line");
  if (crc32c::unmask(stored) != crc32c::value(text.data(), endPos))
    return bad("its CRC32C does not match");
  std::istringstream in(text.substr(0, endPos));
  std::string line;
  if (!std::getline(in, line) || line != kIndexMagic)
    return bad("not a dtf checkpoint index of format 1");
  size_t numShards = 0;
  Entry *current = nullptr;
  int lineNo = 1;
  while (std::getline(in, line)) {
    ++lineNo;
    std::istringstream ls(line);
    std::string kw;
    ls >> kw;
    const std::string at = strCat("line ", lineNo);
    if (kw == "step") {
      ls >> index->step;
      if (!ls || index->step != step)
        return bad(strCat(at, ": step ", index->step, ", expected ", step));
    } else if (kw == "shards") {
      ls >> numShards;
      if (!ls || numShards == 0 || numShards > 1000000)
        return bad(strCat(at, ": a bad shard count"));
    } else if (kw == "file") {
      size_t k = 0;
      File f;
      std::string crc;
      ls >> k >> f.name >> f.size >> crc;
      if (!ls || k != index->files.size() || k >= numShards ||
          !parseHex32(crc, &f.crc) || f.name.find('/') != std::string::npos)
        return bad(strCat(at, ": a bad file line"));
      index->files.push_back(f);
    } else if (kw == "tensor") {
      std::string name, dtype, shape;
      ls >> name >> dtype >> shape;
      Entry e;
      std::optional<DType> t = parseDType(dtype);
      if (!ls || !unescapeName(name, &e.info.name) || !t ||
          !parseShape(shape, &e.info.shape))
        return bad(strCat(at, ": a bad tensor line"));
      e.info.dtype = *t;
      auto [it, fresh] = index->entries.emplace(e.info.name, e);
      if (!fresh)
        return bad(strCat(at, ": tensor '", e.info.name, "' twice"));
      current = &it->second;
    } else if (kw == "slice") {
      Slice s;
      std::string crc;
      ls >> s.file >> s.rowOffset >> s.rowCount >> s.dataOffset >> s.byteSize >>
          crc;
      int64_t perRow = 0;
      if (!ls || !current || s.file < 0 ||
          size_t(s.file) >= index->files.size() || !parseHex32(crc, &s.crc) ||
          !rowElements(current->info.shape, &perRow) || s.rowCount < 0 ||
          s.byteSize != uint64_t(s.rowCount) * uint64_t(perRow) *
                            dtypeSize(current->info.dtype) ||
          s.dataOffset + s.byteSize + kFooterSize >
              index->files[size_t(s.file)].size)
        return bad(strCat(at, ": a bad slice line"));
      current->slices.push_back(s);
    } else {
      return bad(strCat(at, ": unknown line '", line, "'"));
    }
  }
  if (index->files.size() != numShards || numShards == 0)
    return bad(strCat("it lists ", index->files.size(), " data files for ",
                      numShards, " shards"));
  for (auto &[name, e] : index->entries)
    DTF_RETURN_IF_ERROR(checkCoverage(&e, "checkpoint index " + path));
  return Status::ok();
}

// --- Directory listing -----------------------------------------------------

// Parses "<prefix><digits><rest>" (the step); `rest` gets what follows.
bool parseStepName(const std::string &name, const std::string &prefix,
                   int64_t *step, std::string *rest) {
  if (name.rfind(prefix, 0) != 0)
    return false;
  size_t i = prefix.size(), j = i;
  while (j < name.size() && j - i < 19 && name[j] >= '0' && name[j] <= '9')
    ++j;
  if (j == i)
    return false;
  *step = std::stoll(name.substr(i, j - i));
  *rest = name.substr(j);
  return true;
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

Status writeStateFile(const std::string &dir, int64_t latest,
                      const std::vector<int64_t> &kept) {
  std::string text = "latest " + checkpointName(latest) + "\n";
  for (int64_t s : kept)
    text += "kept " + checkpointName(s) + "\n";
  std::unique_ptr<AtomicFile> f;
  DTF_RETURN_IF_ERROR(AtomicFile::create(dir, kStateFile, &f));
  DTF_RETURN_IF_ERROR(f->write(text));
  return f->commit();
}

} // namespace

std::string checkpointName(int64_t step) { return strCat("ckpt-", step); }

std::string indexPath(const std::string &dir, int64_t step) {
  return joinPath(dir, checkpointName(step) + ".index");
}

std::string dataPath(const std::string &dir, int64_t step, int shard,
                     int numShards) {
  return joinPath(
      dir, strCat(checkpointName(step), ".data-", shard, "-of-", numShards));
}

Status writeShard(const std::string &dir, int64_t step, int shard,
                  int numShards, const std::vector<SavedTensor> &tensors) {
  if (step < 0 || numShards < 1 || shard < 0 || shard >= numShards)
    return errorStatus("writeShard: bad step ", step, " or shard ", shard,
                       " of ", numShards);
  DTF_RETURN_IF_ERROR(makeDirs(dir));
  struct stat st;
  if (::stat(indexPath(dir, step).c_str(), &st) == 0)
    return errorStatus("checkpoint ", checkpointName(step),
                       " already exists in ", dir,
                       "; a finished checkpoint is not rewritten");
  // A ps may hold several shards of one partitioned variable: a name may
  // repeat with other rows.
  std::set<std::pair<std::string, int64_t>> names;
  std::vector<int64_t> rowCounts;
  for (const SavedTensor &t : tensors) {
    int64_t rows = 0;
    DTF_RETURN_IF_ERROR(checkSaved(t, &rows));
    if (!names.insert({t.name, t.rowOffset}).second)
      return errorStatus("checkpoint shard ", shard, " of step ", step,
                         " has tensor '", t.name, "' twice");
    rowCounts.push_back(rows);
  }

  std::unique_ptr<AtomicFile> f;
  const std::string name =
      strCat(checkpointName(step), ".data-", shard, "-of-", numShards);
  DTF_RETURN_IF_ERROR(AtomicFile::create(dir, name, &f));
  std::string h(kDataMagic, 8);
  put32(&h, kDataVersion);
  put32(&h, uint32_t(shard));
  put32(&h, uint32_t(numShards));
  put32(&h, uint32_t(tensors.size()));
  put64(&h, uint64_t(step));
  put32(&h, crc32c::mask(crc32c::value(h.data(), h.size())));
  DTF_RETURN_IF_ERROR(f->write(h));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const SavedTensor &t = tensors[i];
    const uint64_t bytes = t.value->byteSize();
    std::string meta = encodeMeta(t, rowCounts[i], bytes);
    std::string rec;
    put32(&rec, uint32_t(meta.size()));
    rec += meta;
    put32(&rec, crc32c::mask(crc32c::value(rec.data(), rec.size())));
    DTF_RETURN_IF_ERROR(f->write(rec));
    DTF_RETURN_IF_ERROR(f->write(t.value->rawData(), bytes));
    std::string crc;
    put32(&crc, crc32c::mask(crc32c::value(t.value->rawData(), bytes)));
    DTF_RETURN_IF_ERROR(f->write(crc));
  }
  std::string footer(kFooterMagic, 8);
  put64(&footer, f->size());
  put32(&footer, crc32c::mask(f->crc()));
  DTF_RETURN_IF_ERROR(f->write(footer));
  return f->commit();
}

Status writeIndex(const std::string &dir, int64_t step, int numShards,
                  int keep) {
  if (step < 0 || numShards < 1)
    return errorStatus("writeIndex: bad step ", step, " or shard count ",
                       numShards);
  Index index;
  index.step = step;
  for (int k = 0; k < numShards; ++k) {
    const std::string path = dataPath(dir, step, k, numShards);
    std::vector<Record> records;
    File file;
    Status s = scanDataFile(path, step, k, numShards, &records, &file);
    if (!s.isOk())
      return errorStatus("cannot write the index of ", checkpointName(step),
                         ": ", s.message());
    file.name = path.substr(path.rfind('/') + 1);
    index.files.push_back(file);
    for (Record &r : records) {
      auto [it, fresh] = index.entries.emplace(r.info.name, Entry());
      Entry &e = it->second;
      if (fresh)
        e.info = r.info;
      else if (e.info.dtype != r.info.dtype || e.info.shape != r.info.shape)
        return errorStatus("cannot write the index of ", checkpointName(step),
                           ": tensor '", r.info.name, "' is ",
                           dtypeName(e.info.dtype), shapeString(e.info.shape),
                           " in one shard and ", dtypeName(r.info.dtype),
                           shapeString(r.info.shape), " in ", path);
      e.slices.push_back(r.slice);
    }
  }
  for (auto &[name, e] : index.entries)
    DTF_RETURN_IF_ERROR(checkCoverage(
        &e, strCat("cannot write the index of ", checkpointName(step))));

  std::unique_ptr<AtomicFile> f;
  DTF_RETURN_IF_ERROR(
      AtomicFile::create(dir, checkpointName(step) + ".index", &f));
  DTF_RETURN_IF_ERROR(f->write(encodeIndex(index)));
  DTF_RETURN_IF_ERROR(f->commit());

  // The new checkpoint is durable; now the state file and the old ones.
  std::vector<std::string> names;
  bool missing = false;
  DTF_RETURN_IF_ERROR(listDir(dir, &names, &missing));
  std::vector<int64_t> indexed;
  for (const std::string &n : names) {
    int64_t s = 0;
    std::string rest;
    if (parseStepName(n, "ckpt-", &s, &rest) && rest == ".index")
      indexed.push_back(s);
  }
  std::sort(indexed.begin(), indexed.end());
  std::set<int64_t> kept(indexed.begin(), indexed.end());
  if (keep > 0) {
    // The newest `keep`, and always this one.
    kept.clear();
    kept.insert(step);
    for (auto it = indexed.rbegin();
         it != indexed.rend() && kept.size() < size_t(keep); ++it)
      kept.insert(*it);
  }
  DTF_RETURN_IF_ERROR(writeStateFile(
      dir, step, std::vector<int64_t>(kept.begin(), kept.end())));
  bool removed = false;
  for (int64_t s : indexed) {
    if (kept.count(s))
      continue;
    // The index goes first (and durably), so a crash midway leaves data
    // files without an index, never an index without its data.
    DTF_RETURN_IF_ERROR(unlinkIfThere(indexPath(dir, s)));
    removed = true;
  }
  if (removed)
    DTF_RETURN_IF_ERROR(fsyncDir(dir));
  for (const std::string &n : names) {
    int64_t s = 0;
    std::string rest;
    // Data files of deleted checkpoints (and orphans of unfinished saves
    // older than every kept checkpoint), and temporaries of older steps
    // left by a crash.
    if (parseStepName(n, "ckpt-", &s, &rest) && rest.rfind(".data-", 0) == 0 &&
        !kept.count(s) && s < step)
      DTF_RETURN_IF_ERROR(unlinkIfThere(joinPath(dir, n)));
    else if ((parseStepName(n, ".ckpt-", &s, &rest) &&
              rest.find(".tmp-") != std::string::npos && s < step) ||
             n.rfind(strCat(".", kStateFile, ".tmp-"), 0) == 0)
      DTF_RETURN_IF_ERROR(unlinkIfThere(joinPath(dir, n)));
  }
  return Status::ok();
}

Status saveCheckpoint(const std::string &dir, int64_t step,
                      const std::vector<SavedTensor> &tensors, int keep) {
  DTF_RETURN_IF_ERROR(writeShard(dir, step, 0, 1, tensors));
  return writeIndex(dir, step, 1, keep);
}

Status listCheckpoints(const std::string &dir, std::vector<int64_t> *steps,
                       std::vector<std::string> *skipped) {
  steps->clear();
  std::vector<std::string> names;
  bool missing = false;
  DTF_RETURN_IF_ERROR(listDir(dir, &names, &missing));
  std::set<int64_t> withData, withIndex;
  for (const std::string &n : names) {
    int64_t s = 0;
    std::string rest;
    if (!parseStepName(n, "ckpt-", &s, &rest))
      continue;
    if (rest == ".index")
      withIndex.insert(s);
    else if (rest.rfind(".data-", 0) == 0)
      withData.insert(s);
  }
  for (int64_t s : withIndex) {
    Index index;
    Status st = parseIndex(indexPath(dir, s), s, &index);
    for (size_t k = 0; st.isOk() && k < index.files.size(); ++k)
      st = checkDataFile(joinPath(dir, index.files[k].name), index.files[k]);
    if (st.isOk())
      steps->push_back(s);
    else if (skipped)
      skipped->push_back(
          strCat(checkpointName(s), " is incomplete: ", st.message()));
  }
  if (skipped && !withData.empty() && !withIndex.empty())
    for (int64_t s : withData)
      if (!withIndex.count(s) && s > *withIndex.rbegin())
        skipped->push_back(strCat(checkpointName(s),
                                  " has data files but no index (a save that "
                                  "did not finish)"));
  return Status::ok();
}

Status findLatest(const std::string &dir, int64_t *step,
                  std::vector<std::string> *skipped) {
  std::vector<int64_t> steps;
  DTF_RETURN_IF_ERROR(listCheckpoints(dir, &steps, skipped));
  *step = steps.empty() ? -1 : steps.back();
  return Status::ok();
}

struct CheckpointReader::Impl {
  std::string dir;
  int64_t step = 0;
  std::vector<File> files;
  std::map<std::string, Entry> entries;

  const Entry *entry(const std::string &name, Status *s) const {
    auto it = entries.find(name);
    if (it != entries.end())
      return &it->second;
    *s = errorStatus("checkpoint ", checkpointName(step), " in ", dir,
                     " has no tensor '", name, "'");
    return nullptr;
  }

  // Reads rows [begin, end) of `e` into `dst`, checking the CRC of every
  // slice it touches.
  Status readRowsInto(const Entry &e, int64_t begin, int64_t end,
                      char *dst) const {
    int64_t perRow = 0;
    rowElements(e.info.shape, &perRow);
    const uint64_t rowBytes = uint64_t(perRow) * dtypeSize(e.info.dtype);
    std::vector<char> buffer;
    for (const Slice &s : e.slices) {
      const int64_t lo = std::max(begin, s.rowOffset);
      const int64_t hi = std::min(end, s.rowOffset + s.rowCount);
      if (lo >= hi)
        continue;
      const std::string path = joinPath(dir, files[size_t(s.file)].name);
      Fd fd;
      uint64_t size = 0;
      DTF_RETURN_IF_ERROR(openForRead(path, &fd, &size));
      // A slice wholly inside the request is read in place; otherwise whole
      // into a buffer (its CRC covers all of it) and the overlap copied.
      const bool inPlace =
          s.rowOffset >= begin && s.rowOffset + s.rowCount <= end;
      char *p = dst + uint64_t(s.rowOffset - begin) * rowBytes;
      if (!inPlace) {
        buffer.resize(s.byteSize);
        p = buffer.data();
      }
      DTF_RETURN_IF_ERROR(
          preadAll(fd.get(), path, s.dataOffset, p, s.byteSize));
      const uint32_t crc = crc32c::value(p, s.byteSize);
      if (crc != crc32c::unmask(s.crc))
        return errorStatus(
            "checkpoint data file ", path, " is damaged: tensor '", e.info.name,
            "' (rows ", s.rowOffset, "..", s.rowOffset + s.rowCount, " of ",
            dtypeName(e.info.dtype), shapeString(e.info.shape), ") has CRC32C ",
            hex32(crc), ", but ", hex32(crc32c::unmask(s.crc)), " was saved");
      if (!inPlace)
        std::memcpy(dst + uint64_t(lo - begin) * rowBytes,
                    p + uint64_t(lo - s.rowOffset) * rowBytes,
                    uint64_t(hi - lo) * rowBytes);
    }
    return Status::ok();
  }
};

CheckpointReader::CheckpointReader(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
CheckpointReader::~CheckpointReader() = default;

Status CheckpointReader::open(const std::string &dir, int64_t step,
                              std::unique_ptr<CheckpointReader> *out) {
  Index index;
  DTF_RETURN_IF_ERROR(parseIndex(indexPath(dir, step), step, &index));
  for (const File &f : index.files)
    DTF_RETURN_IF_ERROR(checkDataFile(joinPath(dir, f.name), f));
  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  impl->step = step;
  impl->files = std::move(index.files);
  impl->entries = std::move(index.entries);
  out->reset(new CheckpointReader(std::move(impl)));
  return Status::ok();
}

int64_t CheckpointReader::step() const { return impl_->step; }
int CheckpointReader::numShards() const { return int(impl_->files.size()); }

std::vector<TensorInfo> CheckpointReader::tensors() const {
  std::vector<TensorInfo> out;
  for (const auto &[name, e] : impl_->entries)
    out.push_back(e.info);
  return out;
}

const TensorInfo *CheckpointReader::find(const std::string &name) const {
  auto it = impl_->entries.find(name);
  return it == impl_->entries.end() ? nullptr : &it->second.info;
}

Status CheckpointReader::readRows(const std::string &name, int64_t begin,
                                  int64_t end, Tensor *out) const {
  Status s;
  const Entry *e = impl_->entry(name, &s);
  if (!e)
    return s;
  if (begin < 0 || end < begin || end > rowsOf(e->info.shape))
    return errorStatus("rows ", begin, "..", end, " of tensor '", name,
                       "' are outside its ", rowsOf(e->info.shape), " rows");
  std::vector<int64_t> shape = e->info.shape;
  if (!shape.empty())
    shape[0] = end - begin;
  else if (end - begin != 1)
    return errorStatus("tensor '", name, "' is a scalar: read its row 0..1");
  Tensor t = Tensor::allocate(e->info.dtype, shape);
  if (!t.defined() && numElementsOf(shape) > 0)
    return errorStatus("out of memory reading tensor '", name, "' (",
                       dtypeName(e->info.dtype), shapeString(shape), ")");
  if (t.defined())
    DTF_RETURN_IF_ERROR(
        impl_->readRowsInto(*e, begin, end, static_cast<char *>(t.rawData())));
  *out = std::move(t);
  return Status::ok();
}

Status CheckpointReader::read(const std::string &name, Tensor *out) const {
  Status s;
  const Entry *e = impl_->entry(name, &s);
  if (!e)
    return s;
  return readRows(name, 0, rowsOf(e->info.shape), out);
}

Status CheckpointReader::readInto(const std::string &name, Tensor *dst) const {
  Status s;
  const Entry *e = impl_->entry(name, &s);
  if (!e)
    return s;
  const TensorInfo &info = e->info;
  if (!dst->defined() || dst->dtype() != info.dtype ||
      dst->shape() != info.shape)
    return errorStatus("checkpoint ", checkpointName(impl_->step), " in ",
                       impl_->dir, ": tensor '", name, "' is ",
                       dtypeName(info.dtype), shapeString(info.shape),
                       ", but the model's is ",
                       dst->defined() ? dst->describe() : "undefined");
  return impl_->readRowsInto(*e, 0, rowsOf(info.shape),
                             static_cast<char *>(dst->rawData()));
}

Status CheckpointReader::readRowsInto(const std::string &name, int64_t begin,
                                      Tensor *dst) const {
  Status s;
  const Entry *e = impl_->entry(name, &s);
  if (!e)
    return s;
  const TensorInfo &info = e->info;
  std::vector<int64_t> shape = info.shape;
  const int64_t rows = dst->defined() ? (dst->rank() ? dst->dim(0) : 1) : 0;
  if (!shape.empty())
    shape[0] = rows;
  if (!dst->defined() || dst->dtype() != info.dtype ||
      dst->shape() != shape || begin < 0 ||
      begin + rows > rowsOf(info.shape))
    return errorStatus("checkpoint ", checkpointName(impl_->step), " in ",
                       impl_->dir, ": tensor '", name, "' is ",
                       dtypeName(info.dtype), shapeString(info.shape),
                       "; it has no rows ", begin, "..", begin + rows,
                       " of the model's ",
                       dst->defined() ? dst->describe() : "undefined");
  return impl_->readRowsInto(*e, begin, begin + rows,
                             static_cast<char *>(dst->rawData()));
}

Status readCheckpoint(const std::string &dir, int64_t step,
                      std::map<std::string, Tensor> *out) {
  std::unique_ptr<CheckpointReader> reader;
  DTF_RETURN_IF_ERROR(CheckpointReader::open(dir, step, &reader));
  out->clear();
  for (const TensorInfo &info : reader->tensors())
    DTF_RETURN_IF_ERROR(reader->read(info.name, &(*out)[info.name]));
  return Status::ok();
}

Status moveCheckpointsAside(const std::string &dir, std::string *movedTo) {
  movedTo->clear();
  std::vector<std::string> names;
  bool missing = false;
  DTF_RETURN_IF_ERROR(listDir(dir, &names, &missing));
  std::vector<std::string> moving;
  for (const std::string &n : names)
    if (n.rfind("ckpt-", 0) == 0 || n.rfind(".ckpt-", 0) == 0 ||
        n == kStateFile)
      moving.push_back(n);
  if (moving.empty())
    return Status::ok();
  std::string target;
  for (int k = 1;; ++k) {
    target = joinPath(dir, strCat("previous-run-", k));
    if (::mkdir(target.c_str(), 0755) == 0)
      break;
    if (errno != EEXIST)
      return errorStatus(sysError("cannot create", target));
  }
  for (const std::string &n : moving)
    if (::rename(joinPath(dir, n).c_str(), joinPath(target, n).c_str()) != 0)
      return errorStatus(
          sysError(strCat("cannot move ", joinPath(dir, n), " to"), target));
  DTF_RETURN_IF_ERROR(fsyncDir(target));
  DTF_RETURN_IF_ERROR(fsyncDir(dir));
  *movedTo = target;
  return Status::ok();
}

} // namespace dtf::checkpoint
