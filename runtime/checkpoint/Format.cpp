// The bytes of a checkpoint on disk: data file records and the index.
#include "runtime/checkpoint/Format.h"

#include "runtime/checkpoint/DurableFile.h"
#include "runtime/core/Crc32c.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <iterator>
#include <optional>
#include <sstream>

namespace dtf::checkpoint::format {

using files::Fd;
using files::openForRead;
using files::preadAll;
using files::readWholeFile;

uint8_t dtypeCode(DType t) {
  for (uint8_t i = 0; i < std::size(kDTypeCodes); ++i)
    if (kDTypeCodes[i] == t)
      return i;
  return 0;
}

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

namespace {

// Reads fields from a metadata block; a read past its end gives 0 (parseMeta
// checks the block's size against the name size and rank before it reads
// what they announce).
class Cursor {
public:
  Cursor(const std::string &bytes)
      : p_(bytes.data()), end_(p_ + bytes.size()) {}
  bool take(size_t n, const char **out) {
    if (size_t(end_ - p_) < n)
      return false;
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

private:
  const char *p_, *end_;
};

} // namespace

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

void checkpointSteps(const std::vector<std::string> &names,
                     std::set<int64_t> *withData, std::set<int64_t> *withIndex) {
  for (const std::string &n : names) {
    int64_t s = 0;
    std::string rest;
    if (!parseStepName(n, "ckpt-", &s, &rest))
      continue;
    if (rest == ".index")
      withIndex->insert(s);
    else if (rest.rfind(".data-", 0) == 0)
      withData->insert(s);
  }
}

int64_t rowsOf(const std::vector<int64_t> &shape) {
  return shape.empty() ? 1 : shape[0];
}

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

namespace {

// The smallest record: its metadata size, the smallest metadata (a 1-byte
// name, a scalar), the metadata's CRC, no data and the data's CRC.
constexpr uint64_t kMinMetaBytes = 4 + 1 + 1 + 4 + 3 * 8;
constexpr uint64_t kMinRecordBytes = 4 + kMinMetaBytes + 4 + 4;
// The largest metadata: the longest name and the highest rank.
constexpr uint64_t kMaxMetaBytes =
    4 + kMaxNameBytes + 1 + 4 + 8 * uint64_t(kMaxRank) + 3 * 8;

// A data file refused: the file, then what is wrong with which field.
Status damaged(const std::string &path, const std::string &what) {
  return errorStatus("checkpoint data file ", path, " is damaged: ", what);
}

// Checks the header of the data file `fd` (`size` bytes) against the shard
// and step the index expects; *count gets its tensor count.
Status checkHeader(const Fd &fd, const std::string &path, uint64_t size,
                   int64_t step, int shard, int numShards, uint32_t *count) {
  char h[kHeaderSize];
  DTF_RETURN_IF_ERROR(preadAll(fd.get(), path, 0, h, kHeaderSize));
  if (std::memcmp(h, kDataMagic, 8) != 0)
    return errorStatus(path, " is not a dtf checkpoint data file: its header "
                             "field 'magic' is not DTFCKPTD");
  if (crc32c::unmask(get32(h + 32)) != crc32c::value(h, 32))
    return damaged(path, "the CRC32C of its header (field 'header CRC32C') "
                         "does not match its other fields");
  const uint32_t version = get32(h + 8), fShard = get32(h + 12),
                 fShards = get32(h + 16);
  const int64_t fStep = int64_t(get64(h + 24));
  *count = get32(h + 20);
  if (version != kDataVersion)
    return errorStatus("checkpoint data file ", path,
                       ": header field 'format version' is ", version,
                       "; this dtf reads version ", kDataVersion,
                       " (a file of another dtf, or damaged)");
  if (fShards != uint32_t(numShards))
    return damaged(path,
                   strCat("header field 'shard count' is ", fShards,
                          ", but the index lists ", numShards, " data files"));
  if (fShard >= fShards)
    return damaged(path, strCat("header field 'shard' is ", fShard,
                                ", outside its ", fShards, " shards"));
  if (fShard != uint32_t(shard))
    return damaged(path,
                   strCat("header field 'shard' is ", fShard,
                          ", but the index lists this file as shard ", shard));
  if (fStep < 0)
    return damaged(path, strCat("header field 'step' is ", fStep,
                                "; a step is never negative"));
  if (fStep != step)
    return damaged(path, strCat("header field 'step' is ", fStep,
                                ", but its index is of step ", step));
  // No count is trusted further than the file's bytes can hold.
  const uint64_t most = (size - kHeaderSize - kFooterSize) / kMinRecordBytes;
  if (*count > most)
    return damaged(path, strCat("header field 'tensor count' is ", *count,
                                ", but a file of ", size,
                                " bytes holds at most ", most, " tensors"));
  return Status::ok();
}

// The fields of one record's metadata (`meta`, CRC-checked), each checked
// before it is used; `left`: the file's bytes after the metadata's CRC,
// before the footer. `at` says which record in messages.
Status parseMeta(const std::string &path, const std::string &meta,
                 uint64_t left, const std::string &at, Record *r) {
  Cursor c(meta);
  const uint32_t nameSize = c.u32();
  const char *name = nullptr;
  if (nameSize == 0 || nameSize > kMaxNameBytes ||
      nameSize > meta.size() - (kMinMetaBytes - 1) || !c.take(nameSize, &name))
    return damaged(path, strCat(at, ": field 'name size' is ", nameSize,
                                " (1 to ", kMaxNameBytes, " bytes within its ",
                                meta.size(), "-byte metadata)"));
  r->info.name.assign(name, nameSize);
  const std::string of = strCat("tensor '", r->info.name, "' (", at, ")");
  const uint8_t code = c.u8();
  const uint32_t rank = c.u32();
  if (code >= std::size(kDTypeCodes))
    return damaged(path, strCat(of, ": field 'dtype' is ", int(code),
                                " (a code from 0 to ",
                                std::size(kDTypeCodes) - 1, ")"));
  if (rank > uint32_t(kMaxRank))
    return damaged(path, strCat(of, ": field 'rank' is ", rank, " (at most ",
                                kMaxRank, ")"));
  const uint64_t expected = 4 + nameSize + 1 + 4 + 8 * uint64_t(rank) + 3 * 8;
  if (meta.size() != expected)
    return damaged(path, strCat(of, ": field 'metadata size' is ", meta.size(),
                                ", but its name and rank ", rank, " make ",
                                expected));
  r->info.dtype = kDTypeCodes[code];
  for (uint32_t d = 0; d < rank; ++d) {
    r->info.shape.push_back(int64_t(c.u64()));
    if (r->info.shape.back() < 0)
      return damaged(path, strCat(of, ": field 'dim ", d, "' is ",
                                  r->info.shape.back(),
                                  "; a dimension is never negative"));
  }
  int64_t perRow = 0;
  if (!rowElements(r->info.shape, &perRow))
    return damaged(path,
                   strCat(of, ": field 'dims' ", shapeString(r->info.shape),
                          " holds too many elements per row"));
  r->slice.rowOffset = int64_t(c.u64());
  r->slice.rowCount = int64_t(c.u64());
  r->slice.byteSize = c.u64();
  const int64_t rows = rowsOf(r->info.shape);
  if (r->slice.rowOffset < 0 || r->slice.rowOffset > rows)
    return damaged(path,
                   strCat(of, ": field 'first row' is ", r->slice.rowOffset,
                          ", outside its ", rows, " rows"));
  if (r->slice.rowCount < 0 || r->slice.rowCount > rows - r->slice.rowOffset)
    return damaged(path, strCat(of, ": field 'rows' is ", r->slice.rowCount,
                                "; from row ", r->slice.rowOffset,
                                " that passes its ", rows, " rows"));
  // rows x elements per row x dtype size, without overflow.
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(uint64_t(r->slice.rowCount), uint64_t(perRow),
                             &bytes) ||
      __builtin_mul_overflow(bytes, uint64_t(dtypeSize(r->info.dtype)),
                             &bytes) ||
      r->slice.byteSize != bytes)
    return damaged(path, strCat(of, ": field 'byte size' is ",
                                r->slice.byteSize, ", but ", r->slice.rowCount,
                                " rows of ", dtypeName(r->info.dtype),
                                shapeString(r->info.shape), " take ", bytes));
  if (left < 4 || r->slice.byteSize > left - 4)
    return damaged(path, strCat(of, ": field 'byte size' is ",
                                r->slice.byteSize, ", but only ", left,
                                " bytes are left before the footer "
                                "(truncated?)"));
  return Status::ok();
}

// Reads and checks record `i` of `count` at `offset`, before the footer at
// `end`; *next gets the offset after it.
Status readRecord(const Fd &fd, const std::string &path, uint64_t offset,
                  uint64_t end, uint32_t i, uint32_t count, Record *r,
                  uint64_t *next) {
  const std::string at = strCat("tensor ", i, " of ", count);
  if (end - offset < kMinRecordBytes)
    return damaged(path, strCat(at, " would start at byte ", offset,
                                ", too near the footer at ", end,
                                " (truncated, or the header field 'tensor "
                                "count' is wrong)"));
  char sz[4];
  DTF_RETURN_IF_ERROR(preadAll(fd.get(), path, offset, sz, 4));
  const uint32_t metaSize = get32(sz);
  if (metaSize < kMinMetaBytes || metaSize > kMaxMetaBytes ||
      metaSize > end - offset - 12)
    return damaged(path,
                   strCat(at, ": field 'metadata size' is ", metaSize, " (",
                          kMinMetaBytes, " to ", kMaxMetaBytes, " bytes, and ",
                          end - offset - 12, " are left before the footer)"));
  std::string meta(4 + size_t(metaSize) + 4, '\0');
  DTF_RETURN_IF_ERROR(
      preadAll(fd.get(), path, offset, meta.data(), meta.size()));
  if (crc32c::unmask(get32(meta.data() + 4 + metaSize)) !=
      crc32c::value(meta.data(), 4 + metaSize))
    return damaged(path, strCat(at, ": the CRC32C of its metadata (field "
                                    "'metadata CRC32C') does not match"));
  r->slice.dataOffset = offset + 4 + metaSize + 4;
  DTF_RETURN_IF_ERROR(parseMeta(path, meta.substr(4, metaSize),
                                end - r->slice.dataOffset, at, r));
  char crc[4];
  DTF_RETURN_IF_ERROR(preadAll(
      fd.get(), path, r->slice.dataOffset + r->slice.byteSize, crc, 4));
  r->slice.crc = get32(crc);
  *next = r->slice.dataOffset + r->slice.byteSize + 4;
  return Status::ok();
}

} // namespace

// Reads a data file's header and the metadata of every record (skipping the
// tensors' bytes) and checks its footer. `file` gets the size and footer CRC.
Status scanDataFile(const std::string &path, int64_t step, int shard,
                    int numShards, std::vector<Record> *records, File *file) {
  Fd fd;
  uint64_t size = 0;
  DTF_RETURN_IF_ERROR(openForRead(path, &fd, &size));
  if (size < kHeaderSize + kFooterSize)
    return errorStatus("checkpoint data file ", path, " is truncated (", size,
                       " bytes; a data file has at least ",
                       kHeaderSize + kFooterSize, ")");
  uint32_t count = 0;
  DTF_RETURN_IF_ERROR(
      checkHeader(fd, path, size, step, shard, numShards, &count));
  uint64_t offset = kHeaderSize;
  const uint64_t end = size - kFooterSize;
  for (uint32_t i = 0; i < count; ++i) {
    Record r;
    r.slice.file = shard;
    DTF_RETURN_IF_ERROR(
        readRecord(fd, path, offset, end, i, count, &r, &offset));
    records->push_back(std::move(r));
  }
  char f[kFooterSize];
  if (offset != end)
    return damaged(path, strCat(end - offset,
                                " unexpected bytes after its last tensor, "
                                "before its footer (the header field "
                                "'tensor count' is ",
                                count, ")"));
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

namespace {

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

} // namespace

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

} // namespace dtf::checkpoint::format
