// The bytes of a checkpoint on disk (docs/checkpoint-format.md): data files
// (a header, one record per tensor or axis-0 slice with CRC32Cs, a footer)
// and the index (a text file closed by its CRC32C), encoded and parsed.
#pragma once

#include "runtime/checkpoint/Checkpoint.h"

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace dtf::checkpoint::format {

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

// One record of a data file, as read back.
struct Record {
  TensorInfo info;
  Slice slice;
};

struct Index {
  int64_t step = 0;
  std::vector<File> files;
  std::map<std::string, Entry> entries;
};

inline constexpr char kDataMagic[8] = {'D', 'T', 'F', 'C', 'K', 'P', 'T', 'D'};
inline constexpr char kFooterMagic[8] = {'D', 'T', 'F', 'C',
                                         'K', 'E', 'N', 'D'};
inline constexpr uint32_t kDataVersion = 1;
inline constexpr size_t kHeaderSize = 36; // magic, 4 x u32, i64 step, u32 CRC
inline constexpr size_t kFooterSize = 20; // magic, u64 bytes before, u32 CRC
inline constexpr const char *kIndexMagic = "dtf-checkpoint-index 1";
inline constexpr int kMaxRank = 32;
inline constexpr uint32_t kMaxNameBytes = 1 << 16;

// Stable codes for the file format (DType's order is not a promise).
inline constexpr DType kDTypeCodes[] = {DType::F32, DType::F16, DType::BF16,
                                        DType::I32, DType::I64, DType::Bool,
                                        DType::F64};

uint8_t dtypeCode(DType t);

// Little-endian encoding.
void put32(std::string *s, uint32_t v);
void put64(std::string *s, uint64_t v);
uint32_t get32(const char *p);
uint64_t get64(const char *p);

/// Parses a file name "<prefix><digits><rest>" ("ckpt-300.index"): *step
/// gets the step, *rest what follows the digits.
bool parseStepName(const std::string &name, const std::string &prefix,
                   int64_t *step, std::string *rest);

/// The steps of a directory's checkpoint files among `names`: those with a
/// data file ("ckpt-S.data-K-of-N") and those with an index
/// ("ckpt-S.index").
void checkpointSteps(const std::vector<std::string> &names,
                     std::set<int64_t> *withData, std::set<int64_t> *withIndex);

/// The rows of a shape (a scalar has one).
int64_t rowsOf(const std::vector<int64_t> &shape);
/// Elements per row (along axis 0); false on overflow or a negative dim.
bool rowElements(const std::vector<int64_t> &shape, int64_t *out);

/// A data file record's metadata.
std::string encodeMeta(const SavedTensor &t, int64_t rowCount,
                       uint64_t byteSize);
/// Checks a tensor to save; *rowCount gets its rows.
Status checkSaved(const SavedTensor &t, int64_t *rowCount);
/// Reads a data file's header and the metadata of every record (skipping the
/// tensors' bytes) and checks its footer. Every field is checked before it
/// is used (magic, header CRC, version, shard within `numShards`, step, a
/// tensor count the file's size can hold, name sizes, dtypes, ranks, dims
/// and sizes that fit the file); a refusal names the file, the field and,
/// in a record, the tensor. `file` gets the size and footer CRC.
Status scanDataFile(const std::string &path, int64_t step, int shard,
                    int numShards, std::vector<Record> *records, File *file);
/// Checks that a data file has the size and footer CRC the index records
/// (cheap: the tensors' own CRCs are checked when they are read).
Status checkDataFile(const std::string &path, const File &expected);

/// Checks that the slices of `e` (sorted here) cover its rows exactly once.
Status checkCoverage(Entry *e, const std::string &where);
std::string encodeIndex(const Index &index);
/// Reads and checks the index of `step` in `path`.
Status parseIndex(const std::string &path, int64_t step, Index *index);

} // namespace dtf::checkpoint::format
