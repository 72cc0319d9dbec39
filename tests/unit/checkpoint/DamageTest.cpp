// Damaged checkpoints: every header and record field of a data file checked
// on restore (real checkpoints written by the library, then patched with
// their CRCs made to match, so that the field's own check must refuse), a
// negative or mismatching step, and which checkpoint chooseCheckpoint takes
// under each policy.
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/Format.h"
#include "runtime/core/Crc32c.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

// Asserts an ok Status, printing its message otherwise.
#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    ::dtf::Status s_ = (expr);                                                 \
    ASSERT_TRUE(s_.isOk()) << s_.message();                                    \
  } while (false)

namespace dtf::checkpoint {
namespace {

using format::get32;
using format::get64;

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

void put32At(std::string *s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    (*s)[at + size_t(i)] = char((v >> (8 * i)) & 0xff);
}
void put64At(std::string *s, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    (*s)[at + size_t(i)] = char((v >> (8 * i)) & 0xff);
}

// A data file's bytes, with the places of its fields and a way to make its
// CRCs match again after a patch.
struct DataFile {
  std::string bytes;

  // The header CRC over the 32 bytes before it.
  void fixHeaderCrc() {
    put32At(&bytes, 32, crc32c::mask(crc32c::value(bytes.data(), 32)));
  }
  // Where record `i` starts (its metadata size field).
  size_t record(int i) const {
    size_t at = format::kHeaderSize;
    for (int k = 0; k < i; ++k) {
      const uint32_t meta = get32(bytes.data() + at);
      const uint64_t data = get64(bytes.data() + at + 4 + meta - 8);
      at += 4 + meta + 4 + data + 4;
    }
    return at;
  }
  // Where a field of record `i`'s metadata lies: 0 the name size, then the
  // name, the dtype, the rank, the dims, first row, rows, byte size.
  size_t nameSize(int i) const { return record(i) + 4; }
  size_t dtype(int i) const {
    return nameSize(i) + 4 + get32(bytes.data() + nameSize(i));
  }
  size_t rank(int i) const { return dtype(i) + 1; }
  size_t dim(int i, int d) const { return rank(i) + 4 + 8 * size_t(d); }
  size_t firstRow(int i) const {
    return dim(i, int(get32(bytes.data() + rank(i))));
  }
  size_t rows(int i) const { return firstRow(i) + 8; }
  size_t byteSize(int i) const { return rows(i) + 8; }
  // The metadata CRC of record `i` over its size field and metadata.
  void fixMetaCrc(int i) {
    const size_t at = record(i);
    const uint32_t meta = get32(bytes.data() + at);
    put32At(&bytes, at + 4 + meta,
            crc32c::mask(crc32c::value(bytes.data() + at, 4 + meta)));
  }
};

class DamageTest : public ::testing::Test {
protected:
  void SetUp() override {
    const char *tmp = std::getenv("TMPDIR");
    std::string base =
        std::string(tmp && *tmp ? tmp : "/tmp") + "/dtf-ckpt-damage-XXXXXX";
    ASSERT_NE(::mkdtemp(base.data()), nullptr);
    dir_ = base;
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }

  // Saves checkpoint `step` of a small model in `dir`: W f32[4,3], b
  // f32[3] and global_step (i64, = `globalStep`), sorted W, b, global_step
  // in the file ('W' < 'b' < 'g').
  void save(const std::string &dir, int64_t step, int64_t globalStep) {
    Tensor w = Tensor::allocate(DType::F32, {4, 3});
    Tensor b = Tensor::allocate(DType::F32, {3});
    Tensor gs = Tensor::allocate(DType::I64, {});
    for (int64_t i = 0; i < 12; ++i)
      w.data<float>()[i] = float(i) + 0.5f;
    for (int64_t i = 0; i < 3; ++i)
      b.data<float>()[i] = -float(i);
    gs.data<int64_t>()[0] = globalStep;
    ASSERT_OK(
        saveCheckpoint(dir, step,
                       {SavedTensor::whole("W", w), SavedTensor::whole("b", b),
                        SavedTensor::whole("global_step", gs)},
                       0));
  }

  // A fresh checkpoint 7 in its own directory, patched by `patch`; expects
  // CheckpointReader::open to refuse it naming the data file and `field`.
  void expectRefused(const std::string &name,
                     const std::function<void(DataFile *)> &patch,
                     const std::string &field) {
    SCOPED_TRACE(name);
    const std::string dir = dir_ + "/" + name;
    save(dir, 7, 7);
    const std::string path = dir + "/ckpt-7.data-0-of-1";
    DataFile f{readFile(path)};
    patch(&f);
    writeFile(path, f.bytes);
    std::unique_ptr<CheckpointReader> reader;
    Status s = CheckpointReader::open(dir, 7, &reader);
    ASSERT_FALSE(s.isOk()) << "a damaged '" << field << "' was accepted";
    EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(field), std::string::npos) << s.message();
  }

  std::string dir_;
};

TEST_F(DamageTest, EveryHeaderFieldIsChecked) {
  expectRefused(
      "magic", [](DataFile *f) { f->bytes[0] = 'X'; }, "field 'magic'");
  // A flipped header byte without a matching CRC: the CRC says so.
  expectRefused(
      "crc", [](DataFile *f) { f->bytes[12] ^= 1; }, "field 'header CRC32C'");
  expectRefused(
      "version",
      [](DataFile *f) {
        put32At(&f->bytes, 8, 2);
        f->fixHeaderCrc();
      },
      "header field 'format version' is 2");
  expectRefused(
      "shard",
      [](DataFile *f) {
        put32At(&f->bytes, 12, 1);
        f->fixHeaderCrc();
      },
      "header field 'shard' is 1, outside its 1 shards");
  expectRefused(
      "shard-count",
      [](DataFile *f) {
        put32At(&f->bytes, 16, 3);
        f->fixHeaderCrc();
      },
      "header field 'shard count' is 3, but the index lists 1");
  expectRefused(
      "tensor-count-huge",
      [](DataFile *f) {
        put32At(&f->bytes, 20, 0xffffffffu);
        f->fixHeaderCrc();
      },
      "header field 'tensor count' is 4294967295, but a file of");
  expectRefused(
      "tensor-count-short",
      [](DataFile *f) {
        put32At(&f->bytes, 20, 2);
        f->fixHeaderCrc();
      },
      "unexpected bytes after its last tensor");
  expectRefused(
      "step-negative",
      [](DataFile *f) {
        put64At(&f->bytes, 24, uint64_t(-5));
        f->fixHeaderCrc();
      },
      "header field 'step' is -5; a step is never negative");
  expectRefused(
      "step-other",
      [](DataFile *f) {
        put64At(&f->bytes, 24, 8);
        f->fixHeaderCrc();
      },
      "header field 'step' is 8, but its index is of step 7");
}

TEST_F(DamageTest, EveryRecordFieldIsChecked) {
  expectRefused(
      "meta-size",
      [](DataFile *f) { put32At(&f->bytes, f->record(0), 0x00ffffff); },
      "tensor 0 of 3: field 'metadata size' is 16777215");
  expectRefused(
      "meta-crc", [](DataFile *f) { f->bytes[f->dtype(1)] ^= 1; },
      "tensor 1 of 3: the CRC32C of its metadata (field 'metadata CRC32C')");
  expectRefused(
      "name-size-zero",
      [](DataFile *f) {
        put32At(&f->bytes, f->nameSize(0), 0);
        f->fixMetaCrc(0);
      },
      "tensor 0 of 3: field 'name size' is 0");
  expectRefused(
      "name-size-huge",
      [](DataFile *f) {
        put32At(&f->bytes, f->nameSize(2), 70000);
        f->fixMetaCrc(2);
      },
      "tensor 2 of 3: field 'name size' is 70000");
  expectRefused(
      "dtype",
      [](DataFile *f) {
        f->bytes[f->dtype(0)] = 9;
        f->fixMetaCrc(0);
      },
      "tensor 'W' (tensor 0 of 3): field 'dtype' is 9");
  expectRefused(
      "rank-huge",
      [](DataFile *f) {
        put32At(&f->bytes, f->rank(1), 40);
        f->fixMetaCrc(1);
      },
      "tensor 'b' (tensor 1 of 3): field 'rank' is 40 (at most 32)");
  expectRefused(
      "rank-other",
      [](DataFile *f) {
        put32At(&f->bytes, f->rank(0), 3);
        f->fixMetaCrc(0);
      },
      "tensor 'W' (tensor 0 of 3): field 'metadata size' is");
  expectRefused(
      "dim-negative",
      [](DataFile *f) {
        put64At(&f->bytes, f->dim(0, 1), uint64_t(-3));
        f->fixMetaCrc(0);
      },
      "tensor 'W' (tensor 0 of 3): field 'dim 1' is -3");
  expectRefused(
      "dims-overflow",
      [](DataFile *f) {
        put64At(&f->bytes, f->dim(0, 1), uint64_t(1) << 62);
        f->fixMetaCrc(0);
      },
      "tensor 'W' (tensor 0 of 3): field 'dims'");
  expectRefused(
      "first-row",
      [](DataFile *f) {
        put64At(&f->bytes, f->firstRow(0), uint64_t(-1));
        f->fixMetaCrc(0);
      },
      "tensor 'W' (tensor 0 of 3): field 'first row' is -1");
  expectRefused(
      "rows",
      [](DataFile *f) {
        put64At(&f->bytes, f->rows(0), 5);
        f->fixMetaCrc(0);
      },
      "tensor 'W' (tensor 0 of 3): field 'rows' is 5");
  expectRefused(
      "byte-size",
      [](DataFile *f) {
        put64At(&f->bytes, f->byteSize(0), 47);
        f->fixMetaCrc(0);
      },
      "field 'byte size' is 47, but 4 rows of f32[4,3] take 48");
  // Dims, rows and byte size that agree, but the file is far too small.
  expectRefused(
      "size-past-the-file",
      [](DataFile *f) {
        const uint64_t rows = uint64_t(1) << 40;
        put64At(&f->bytes, f->dim(0, 0), rows);
        put64At(&f->bytes, f->rows(0), rows);
        put64At(&f->bytes, f->byteSize(0), rows * 12);
        f->fixMetaCrc(0);
      },
      "field 'byte size' is 13194139533312, but only");
  // A record that is well formed but not the one the index lists.
  expectRefused(
      "not-in-index",
      [](DataFile *f) {
        f->bytes[f->nameSize(1) + 4] = 'c';
        f->fixMetaCrc(1);
      },
      "tensor 'c' (from row 0) is not in its index");
  expectRefused(
      "data-crc",
      [](DataFile *f) {
        const size_t at = f->byteSize(1) + 8 + 4 + 3 * 4;
        put32At(&f->bytes, at, get32(f->bytes.data() + at) ^ 1);
      },
      "tensor 'b' (from row 0) does not match its index: field CRC32C");
}

TEST_F(DamageTest, ShardOfAnotherPlaceIsRefused) {
  Tensor a = Tensor::zeros(DType::F32, {2}), b = Tensor::zeros(DType::F32, {2});
  ASSERT_OK(writeShard(dir_, 3, 0, 2, {SavedTensor::whole("a", a)}));
  ASSERT_OK(writeShard(dir_, 3, 1, 2, {SavedTensor::whole("b", b)}));
  ASSERT_OK(writeIndex(dir_, 3, 2, 0));
  // Shard 1 says it is shard 0 (a copy in the wrong place, CRC intact).
  const std::string path = dir_ + "/ckpt-3.data-1-of-2";
  DataFile f{readFile(path)};
  put32At(&f.bytes, 12, 0);
  f.fixHeaderCrc();
  writeFile(path, f.bytes);
  std::unique_ptr<CheckpointReader> reader;
  Status s = CheckpointReader::open(dir_, 3, &reader);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find(path + " is damaged: header field 'shard' is 0, "
                                    "but the index lists this file as shard 1"),
            std::string::npos)
      << s.message();
}

TEST_F(DamageTest, NegativeGlobalStepIsRefused) {
  // Written whole by the library, every CRC right: only the value is wrong.
  save(dir_, 10, -5);
  std::unique_ptr<CheckpointReader> reader;
  Status s = CheckpointReader::open(dir_, 10, &reader);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("checkpoint ckpt-10 in " + dir_ +
                             " is damaged: its variable 'global_step' is -5"),
            std::string::npos)
      << s.message();
  RestoreChoice choice;
  EXPECT_FALSE(
      chooseCheckpoint(dir_, RestorePolicy::kLatestValid, "--fresh", &choice)
          .isOk());
  EXPECT_EQ(choice.step, -1);
}

TEST_F(DamageTest, DamagedNewestIsRefusedUnlessLatestValid) {
  save(dir_, 5, 5);
  save(dir_, 6, 6);
  // A flipped byte in b's values: the file's size and footer are intact.
  const std::string path = dir_ + "/ckpt-6.data-0-of-1";
  DataFile f{readFile(path)};
  f.bytes[f.byteSize(1) + 8 + 4 + 2] ^= 0x40;
  writeFile(path, f.bytes);

  RestoreChoice choice;
  Status s = chooseCheckpoint(dir_, RestorePolicy::kLatest, "--fresh", &choice);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(choice.step, -1);
  for (const std::string &part :
       {"its newest checkpoint, ckpt-6, is damaged: checkpoint data file " +
            path + " is damaged: tensor 'b'",
        std::string("pass --restore=latest-valid to restore ckpt-5"),
        std::string("--fresh to start over"),
        "repair or remove the files of ckpt-6 (" + dir_ + "/ckpt-6.*)"})
    EXPECT_NE(s.message().find(part), std::string::npos)
        << "no '" << part << "' in: " << s.message();

  ASSERT_OK(
      chooseCheckpoint(dir_, RestorePolicy::kLatestValid, "--fresh", &choice));
  EXPECT_EQ(choice.step, 5);
  ASSERT_EQ(choice.passedOver.size(), 1u);
  EXPECT_NE(choice.passedOver[0].find("checkpoint ckpt-6 in " + dir_ +
                                      " is damaged (checkpoint data file " +
                                      path),
            std::string::npos)
      << choice.passedOver[0];
  EXPECT_NE(choice.passedOver[0].find("restoring ckpt-5, the newest whole one"),
            std::string::npos)
      << choice.passedOver[0];
  EXPECT_EQ(choice.passedOverSteps, (std::vector<int64_t>{6}));

  // A run that goes on from ckpt-5 sets ckpt-6 aside, and can save step 6.
  std::string movedTo;
  ASSERT_OK(moveDamagedAside(dir_, choice.passedOverSteps, &movedTo));
  EXPECT_EQ(movedTo, dir_ + "/damaged-1");
  struct stat st;
  EXPECT_EQ(::stat((movedTo + "/ckpt-6.index").c_str(), &st), 0);
  EXPECT_EQ(::stat((movedTo + "/ckpt-6.data-0-of-1").c_str(), &st), 0);
  EXPECT_EQ(::stat((dir_ + "/ckpt-5.index").c_str(), &st), 0);
  ASSERT_OK(chooseCheckpoint(dir_, RestorePolicy::kLatest, "--fresh", &choice));
  EXPECT_EQ(choice.step, 5);
  save(dir_, 6, 6);
  ASSERT_OK(chooseCheckpoint(dir_, RestorePolicy::kLatest, "--fresh", &choice));
  EXPECT_EQ(choice.step, 6);
}

TEST_F(DamageTest, OnlyDamagedCheckpointsAreRefusedUnderEitherPolicy) {
  save(dir_, 4, 4);
  const std::string index = dir_ + "/ckpt-4.index";
  std::string text = readFile(index);
  text[text.find("tensor W") + 7] = 'V';
  writeFile(index, text);
  for (RestorePolicy p :
       {RestorePolicy::kLatest, RestorePolicy::kLatestValid}) {
    RestoreChoice choice;
    Status s = chooseCheckpoint(dir_, p, "--fresh", &choice);
    ASSERT_FALSE(s.isOk()) << "a directory of damaged checkpoints was taken "
                              "for an empty one";
    EXPECT_EQ(choice.step, -1);
    EXPECT_NE(s.message().find("none is whole: the newest, ckpt-4, is "
                               "damaged: checkpoint index " +
                               index),
              std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("pass --fresh to start over"), std::string::npos)
        << s.message();
  }
  // A tool without --fresh does not offer it.
  RestoreChoice choice;
  Status s = chooseCheckpoint(dir_, RestorePolicy::kLatest, nullptr, &choice);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message().find("--fresh"), std::string::npos) << s.message();
}

TEST_F(DamageTest, UnfinishedSaveIsNotDamage) {
  RestoreChoice choice;
  ASSERT_OK(chooseCheckpoint(dir_, RestorePolicy::kLatest, "--fresh", &choice));
  EXPECT_EQ(choice.step, -1); // an empty directory holds none
  save(dir_, 5, 5);
  // A crash after the shards, before the index: the previous one stays.
  Tensor a = Tensor::zeros(DType::F32, {2});
  ASSERT_OK(writeShard(dir_, 9, 0, 1, {SavedTensor::whole("a", a)}));
  ASSERT_OK(chooseCheckpoint(dir_, RestorePolicy::kLatest, "--fresh", &choice));
  EXPECT_EQ(choice.step, 5);
  EXPECT_TRUE(choice.passedOver.empty());
  ASSERT_EQ(choice.unfinished.size(), 1u);
  EXPECT_NE(choice.unfinished[0].find("ckpt-9 in " + dir_ +
                                      " has data files but no index"),
            std::string::npos)
      << choice.unfinished[0];
}

// The `checkpoint` file is written after the index it names: a step it names
// without an index lost its index (a disk, a hand), unlike a save that did not
// finish; it is damage, never a reason to start from the initializers.
TEST_F(DamageTest, AnIndexLostUnderTheStateFileIsDamage) {
  save(dir_, 4, 4);
  save(dir_, 6, 6);
  ASSERT_NE(readFile(dir_ + "/checkpoint").find("latest ckpt-6"),
            std::string::npos);
  ASSERT_EQ(::unlink((dir_ + "/ckpt-6.index").c_str()), 0);
  RestoreChoice choice;
  Status s = chooseCheckpoint(dir_, RestorePolicy::kLatest, "--fresh", &choice);
  ASSERT_FALSE(s.isOk()) << "the lost index was taken for an unfinished save";
  EXPECT_NE(s.message().find("its newest checkpoint, ckpt-6, is damaged: its "
                             "index ckpt-6.index is missing"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(choice.unfinished.empty());
  ASSERT_OK(
      chooseCheckpoint(dir_, RestorePolicy::kLatestValid, "--fresh", &choice));
  EXPECT_EQ(choice.step, 4);
  // The only checkpoint: refused under either policy.
  ASSERT_EQ(::unlink((dir_ + "/ckpt-4.index").c_str()), 0);
  EXPECT_FALSE(
      chooseCheckpoint(dir_, RestorePolicy::kLatestValid, "--fresh", &choice)
          .isOk());
}

TEST_F(DamageTest, RestorePolicyNames) {
  RestorePolicy p = RestorePolicy::kLatestValid;
  EXPECT_TRUE(parseRestorePolicy("latest", &p));
  EXPECT_EQ(p, RestorePolicy::kLatest);
  EXPECT_TRUE(parseRestorePolicy("latest-valid", &p));
  EXPECT_EQ(p, RestorePolicy::kLatestValid);
  EXPECT_FALSE(parseRestorePolicy("newest", &p));
  EXPECT_EQ(p, RestorePolicy::kLatestValid);
}

} // namespace
} // namespace dtf::checkpoint
