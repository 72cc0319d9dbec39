// Sharded checkpoints: writing a shard and the index, keep-N and the state
// file, listing, the reader that checks every data file against the index and
// assembles axis-0 slices into whole tensors, and setting a run's (or damaged)
// checkpoints aside. The bytes are Format's, the files DurableFile's; which
// checkpoint a run restores is Restore.cpp's.
#include "runtime/checkpoint/Checkpoint.h"

#include "runtime/checkpoint/DurableFile.h"
#include "runtime/checkpoint/Format.h"
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

using namespace files;
using namespace format;

namespace {

constexpr const char *kStateFile = "checkpoint";

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

std::string checkpointPath(const std::string &dir, int64_t step) {
  return joinPath(dir, checkpointName(step));
}

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
  format::checkpointSteps(names, &withData, &withIndex);
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

namespace {

// A slice whose bytes do not have the CRC32C its index records.
Status sliceDamage(const std::string &path, const Entry &e, const Slice &s,
                   uint32_t crc) {
  return errorStatus("checkpoint data file ", path, " is damaged: tensor '",
                     e.info.name, "' (rows ", s.rowOffset, "..",
                     s.rowOffset + s.rowCount, " of ", dtypeName(e.info.dtype),
                     shapeString(e.info.shape), ") has CRC32C ", hex32(crc),
                     ", but ", hex32(crc32c::unmask(s.crc)), " was saved");
}

// One field of a record that differs from the index's slice: "" when none.
std::string differingField(const Record &r, const Entry &e, const Slice &s) {
  if (r.info.dtype != e.info.dtype)
    return strCat("dtype ", dtypeName(r.info.dtype),
                  " (the index: ", dtypeName(e.info.dtype), ")");
  if (r.info.shape != e.info.shape)
    return strCat("dims ", shapeString(r.info.shape),
                  " (the index: ", shapeString(e.info.shape), ")");
  if (r.slice.rowCount != s.rowCount)
    return strCat("rows ", r.slice.rowCount, " (the index: ", s.rowCount, ")");
  if (r.slice.dataOffset != s.dataOffset)
    return strCat("offset ", r.slice.dataOffset, " (the index: ", s.dataOffset,
                  ")");
  if (r.slice.byteSize != s.byteSize)
    return strCat("byte size ", r.slice.byteSize, " (the index: ", s.byteSize,
                  ")");
  if (r.slice.crc != s.crc)
    return strCat("CRC32C ", hex32(crc32c::unmask(r.slice.crc)),
                  " (the index: ", hex32(crc32c::unmask(s.crc)), ")");
  return "";
}

// Checks each data file of `index` whole against it: its header and every
// record (scanDataFile), its size and footer CRC, and that its records are
// exactly the slices the index places in it.
Status checkDataFiles(const std::string &dir, const Index &index) {
  const int numShards = int(index.files.size());
  for (int k = 0; k < numShards; ++k) {
    const File &want = index.files[size_t(k)];
    const std::string path = joinPath(dir, want.name);
    std::vector<Record> records;
    File got;
    DTF_RETURN_IF_ERROR(
        scanDataFile(path, index.step, k, numShards, &records, &got));
    if (got.size != want.size || got.crc != want.crc)
      return errorStatus("checkpoint data file ", path, " has ", got.size,
                         " bytes and footer CRC32C ", hex32(got.crc),
                         "; its index records ", want.size, " and ",
                         hex32(want.crc), " (truncated or replaced)");
    size_t inIndex = 0;
    for (const auto &[name, e] : index.entries)
      for (const Slice &sl : e.slices)
        inIndex += sl.file == k;
    std::set<std::pair<std::string, int64_t>> seen;
    for (const Record &r : records) {
      auto it = index.entries.find(r.info.name);
      const Slice *match = nullptr;
      for (size_t i = 0;
           it != index.entries.end() && i < it->second.slices.size() && !match;
           ++i) {
        const Slice &sl = it->second.slices[i];
        if (sl.file == k && sl.rowOffset == r.slice.rowOffset)
          match = &sl;
      }
      const std::string of =
          strCat("checkpoint data file ", path, " is damaged: tensor '",
                 r.info.name, "' (from row ", r.slice.rowOffset, ")");
      if (!match || !seen.insert({r.info.name, r.slice.rowOffset}).second)
        return errorStatus(of, " is ", match ? "in it twice" : "not",
                           match ? "" : " in its index");
      const std::string field = differingField(r, it->second, *match);
      if (!field.empty())
        return errorStatus(of, " does not match its index: field ", field);
    }
    if (records.size() != inIndex)
      return errorStatus("checkpoint data file ", path, " holds ",
                         records.size(), " tensor slices; its index places ",
                         inIndex, " in it");
  }
  return Status::ok();
}

} // namespace

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
        return sliceDamage(path, e, s, crc);
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
  // The cheap checks first: a truncated or replaced file is named as such.
  for (const File &f : index.files)
    DTF_RETURN_IF_ERROR(checkDataFile(joinPath(dir, f.name), f));
  DTF_RETURN_IF_ERROR(checkDataFiles(dir, index));
  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  impl->step = step;
  impl->files = std::move(index.files);
  impl->entries = std::move(index.entries);
  std::unique_ptr<CheckpointReader> reader(
      new CheckpointReader(std::move(impl)));
  // A negative step would restart the learning rate schedule and the data
  // order somewhere no run has been.
  const TensorInfo *gs = reader->find("global_step");
  if (gs && gs->shape.empty() &&
      (gs->dtype == DType::I64 || gs->dtype == DType::I32)) {
    Tensor t;
    DTF_RETURN_IF_ERROR(reader->read("global_step", &t));
    const int64_t v = gs->dtype == DType::I64 ? t.data<int64_t>()[0]
                                              : int64_t(t.data<int32_t>()[0]);
    if (v < 0)
      return errorStatus("checkpoint ", checkpointName(step), " in ", dir,
                         " is damaged: its variable 'global_step' is ", v,
                         "; a step is never negative");
  }
  *out = std::move(reader);
  return Status::ok();
}

Status CheckpointReader::verify() const {
  constexpr uint64_t kChunk = uint64_t(4) << 20;
  std::vector<char> buffer;
  for (const auto &[name, e] : impl_->entries)
    for (const Slice &s : e.slices) {
      const std::string path =
          joinPath(impl_->dir, impl_->files[size_t(s.file)].name);
      Fd fd;
      uint64_t size = 0;
      DTF_RETURN_IF_ERROR(openForRead(path, &fd, &size));
      buffer.resize(
          size_t(std::min(kChunk, std::max<uint64_t>(s.byteSize, 1))));
      uint32_t crc = 0;
      for (uint64_t done = 0; done < s.byteSize;) {
        const uint64_t n = std::min<uint64_t>(buffer.size(), s.byteSize - done);
        DTF_RETURN_IF_ERROR(
            preadAll(fd.get(), path, s.dataOffset + done, buffer.data(), n));
        crc = crc32c::extend(crc, buffer.data(), n);
        done += n;
      }
      if (crc != crc32c::unmask(s.crc))
        return sliceDamage(path, e, s, crc);
    }
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
  if (!dst->defined() || dst->dtype() != info.dtype || dst->shape() != shape ||
      begin < 0 || begin + rows > rowsOf(info.shape))
    return errorStatus(
        "checkpoint ", checkpointName(impl_->step), " in ", impl_->dir,
        ": tensor '", name, "' is ", dtypeName(info.dtype),
        shapeString(info.shape), "; it has no rows ", begin, "..", begin + rows,
        " of the model's ", dst->defined() ? dst->describe() : "undefined");
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

namespace {

// Moves `names` (files of `dir`) into a new subdirectory `dir/PREFIX-K`, the
// first K unused, in that order; `movedTo` gets its path, "" when `names`
// is empty.
Status moveIntoNewDir(const std::string &dir,
                      const std::vector<std::string> &names,
                      const std::string &prefix, std::string *movedTo) {
  movedTo->clear();
  if (names.empty())
    return Status::ok();
  std::string target;
  for (int k = 1;; ++k) {
    target = joinPath(dir, strCat(prefix, "-", k));
    if (::mkdir(target.c_str(), 0755) == 0)
      break;
    if (errno != EEXIST)
      return errorStatus(sysError("cannot create", target));
  }
  for (const std::string &n : names)
    if (::rename(joinPath(dir, n).c_str(), joinPath(target, n).c_str()) != 0)
      return errorStatus(
          sysError(strCat("cannot move ", joinPath(dir, n), " to"), target));
  DTF_RETURN_IF_ERROR(fsyncDir(target));
  DTF_RETURN_IF_ERROR(fsyncDir(dir));
  *movedTo = target;
  return Status::ok();
}

} // namespace

Status moveCheckpointsAside(const std::string &dir, std::string *movedTo) {
  std::vector<std::string> names;
  bool missing = false;
  DTF_RETURN_IF_ERROR(listDir(dir, &names, &missing));
  std::vector<std::string> moving;
  for (const std::string &n : names)
    if (n.rfind("ckpt-", 0) == 0 || n.rfind(".ckpt-", 0) == 0 ||
        n == kStateFile)
      moving.push_back(n);
  return moveIntoNewDir(dir, moving, "previous-run", movedTo);
}

Status moveDamagedAside(const std::string &dir,
                        const std::vector<int64_t> &steps,
                        std::string *movedTo) {
  std::vector<std::string> names;
  bool missing = false;
  DTF_RETURN_IF_ERROR(listDir(dir, &names, &missing));
  const std::set<int64_t> damaged(steps.begin(), steps.end());
  // The indexes first: a crash midway leaves data files without an index
  // (not a checkpoint), never an index without its data.
  std::vector<std::string> indexes, data;
  for (const std::string &n : names) {
    int64_t s = 0;
    std::string rest;
    if (parseStepName(n, "ckpt-", &s, &rest) && damaged.count(s))
      (rest == ".index" ? indexes : data).push_back(n);
  }
  indexes.insert(indexes.end(), data.begin(), data.end());
  DTF_RETURN_IF_ERROR(moveIntoNewDir(dir, indexes, "damaged", movedTo));
  // The state file then names only what stays: a step it names without an
  // index counts as damaged (chooseCheckpoint).
  std::vector<std::string> after;
  DTF_RETURN_IF_ERROR(listDir(dir, &after, &missing));
  std::vector<int64_t> left;
  for (const std::string &n : after) {
    int64_t s = 0;
    std::string rest;
    if (parseStepName(n, "ckpt-", &s, &rest) && rest == ".index")
      left.push_back(s);
  }
  std::sort(left.begin(), left.end());
  if (left.empty())
    return unlinkIfThere(joinPath(dir, kStateFile));
  return writeStateFile(dir, left.back(), left);
}

} // namespace dtf::checkpoint
