// Dynamic tables (embedding(vocab = dynamic)): rows made on first sight or
// after N sightings, the reserved row, eviction, a full shard, ids of
// another shard, the rows a checkpoint holds, and their restore.
#include "runtime/train/DynamicTable.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <unistd.h>

namespace dtf::testing {
namespace {

constexpr int64_t kWidth = 4;

struct Fixture {
  plan::Variable var, slot;
  Tensor value, accum;
  std::unique_ptr<train::DynamicTable> table;

  // A table of `rows` rows in `parts` shards, all held (one process).
  Fixture(int64_t rows, int64_t parts, int64_t admit, int64_t evict) {
    var.set_name("t/embeddings");
    var.mutable_type()->set_dtype(plan::F32);
    var.mutable_type()->mutable_shape()->add_dims(rows);
    var.mutable_type()->mutable_shape()->add_dims(kWidth);
    var.mutable_initializer()->set_kind("normal");
    (*var.mutable_initializer()->mutable_params())["stddev"] = 0.5;
    var.set_partitions(parts);
    var.mutable_dynamic()->set_enabled(true);
    var.mutable_dynamic()->set_admit_after(admit);
    var.mutable_dynamic()->set_evict_after(evict);
    slot = var;
    slot.set_name("t/embeddings/Adagrad");
    slot.set_slot_of(var.name());
    slot.mutable_initializer()->set_kind("constant");
    (*slot.mutable_initializer()->mutable_params())["value"] = 0.1;
    value = Tensor::reserveZeros(DType::F32, {rows, kWidth});
    accum = Tensor::reserveZeros(DType::F32, {rows, kWidth});
    std::vector<int> index;
    std::vector<int64_t> offsets, counts;
    for (int64_t k = 0, at = 0; k < parts; ++k) {
      const int64_t n = rows / parts + (k < rows % parts ? 1 : 0);
      index.push_back(int(k));
      offsets.push_back(at);
      counts.push_back(n);
      at += n;
    }
    table = std::make_unique<train::DynamicTable>(
        var, 7, &value, std::vector<std::pair<const plan::Variable *, Tensor *>>{
                            {&slot, &accum}},
        index, offsets, counts);
  }

  std::vector<int64_t> rows(std::vector<int64_t> ids, bool create,
                            int64_t step) {
    std::vector<int64_t> out(ids.size(), -7);
    Status s = table->rows(ids.data(), int64_t(ids.size()), create, step,
                           out.data());
    EXPECT_TRUE(s.isOk()) << s.message();
    return out;
  }
  std::vector<float> row(int64_t r) const {
    const float *p = value.data<float>() + r * kWidth;
    return {p, p + kWidth};
  }
};

TEST(DynamicTable, RowsAreMadeOnFirstSightAndLookedUpAfter) {
  Fixture f(101, 1, 1, 0);
  const int64_t big = int64_t(1) << 60;
  std::vector<int64_t> r = f.rows({big, -5, big, 42}, true, 1);
  EXPECT_EQ(r[0], r[2]);
  std::set<int64_t> distinct(r.begin(), r.end());
  EXPECT_EQ(distinct.size(), 3u);
  EXPECT_EQ(distinct.count(0), 0u) << "row 0 is reserved";
  EXPECT_EQ(f.table->stats().live, 3);
  // Drawn from the initializer, not zero; the slot at its constant.
  EXPECT_NE(f.row(r[0]), std::vector<float>(kWidth, 0.f));
  EXPECT_EQ(f.accum.data<float>()[r[0] * kWidth], 0.1f);
  // Evaluation finds them and makes none for a new id.
  std::vector<int64_t> e = f.rows({42, 1000}, false, 2);
  EXPECT_EQ(e[0], r[3]);
  EXPECT_EQ(e[1], 0);
  EXPECT_EQ(f.row(0), std::vector<float>(kWidth, 0.f));
  EXPECT_EQ(f.table->stats().live, 3);
}

TEST(DynamicTable, ARowIsTheSameWhicheverShardOrTableMakesIt) {
  Fixture one(101, 1, 1, 0), four(101, 4, 1, 0);
  for (int64_t id : {int64_t(3), int64_t(99), int64_t(-1234567), int64_t(1) << 50}) {
    const int64_t a = one.rows({id}, true, 1)[0];
    const int64_t b = four.rows({id}, true, 1)[0];
    EXPECT_EQ(one.row(a), four.row(b)) << "id " << id;
  }
  // The shards split the ids: each lands in its shard's rows.
  int64_t offsets[5] = {0, 26, 51, 76, 101};
  for (int64_t id = 0; id < 40; ++id) {
    const int k = train::dynamicShardOf(id, 4);
    const int64_t r = four.rows({id}, true, 2)[0];
    EXPECT_GT(r, offsets[k]) << "id " << id << " (row 0 of a shard is reserved)";
    EXPECT_LT(r, offsets[k + 1]) << "id " << id;
  }
}

TEST(DynamicTable, AnIdIsAdmittedAtItsNthSightingCountedOncePerStep) {
  Fixture f(11, 1, 3, 0);
  EXPECT_EQ(f.rows({5, 5, 5}, true, 1)[0], 0) << "three sightings in one step are one";
  EXPECT_EQ(f.rows({5}, true, 2)[0], 0);
  EXPECT_GT(f.rows({5}, true, 3)[0], 0) << "the third step that sees it admits it";
  EXPECT_EQ(f.table->stats().created, 1);
}

TEST(DynamicTable, RowsUnusedForEvictAfterStepsAreEvictedAndReused) {
  Fixture f(11, 1, 1, 8);
  const int64_t a = f.rows({1}, true, 1)[0];
  const int64_t b = f.rows({2}, true, 1)[0];
  for (int64_t step = 2; step <= 12; ++step) {
    f.rows({2}, true, step); // 2 stays in use
    f.table->sweep(step);
  }
  EXPECT_EQ(f.table->stats().evicted, 1);
  EXPECT_EQ(f.rows({1}, false, 13)[0], 0) << "1 was evicted";
  EXPECT_EQ(f.rows({2}, false, 13)[0], b);
  // Its row goes to the next new id, initialized for that id.
  const int64_t c = f.rows({77}, true, 13)[0];
  EXPECT_EQ(c, a);
  Fixture fresh(11, 1, 1, 8);
  EXPECT_EQ(f.row(c), fresh.row(fresh.rows({77}, true, 1)[0]));
}

TEST(DynamicTable, AFullShardReadsZerosForNewIdsAndSaysSo) {
  Fixture f(4, 1, 1, 0); // 3 rows besides the reserved one
  std::vector<int64_t> r = f.rows({1, 2, 3, 4, 5}, true, 1);
  EXPECT_EQ(r[3], 0);
  EXPECT_EQ(r[4], 0);
  EXPECT_EQ(f.table->stats().refused, 2);
  EXPECT_EQ(f.row(0), std::vector<float>(kWidth, 0.f));
}

TEST(DynamicTable, AnIdOfAShardNotHeldIsAnError) {
  Fixture all(40, 2, 1, 0);
  // A ps holding only shard 1 of 2.
  Tensor value = Tensor::reserveZeros(DType::F32, {20, kWidth});
  train::DynamicTable half(all.var, 7, &value, {}, {1}, {0}, {20});
  int64_t id = 0;
  while (train::dynamicShardOf(id, 2) != 0)
    ++id;
  int64_t out = -1;
  Status s = half.rows(&id, 1, true, 1, &out);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("belongs to shard 0"), std::string::npos)
      << s.message();
  EXPECT_FALSE(half.holdsShardOf(id));
}

TEST(DynamicTable, ACheckpointHoldsTheLiveRowsAndRestoresThem) {
  const std::string dir = ::testing::TempDir() + "/dynamic_table_" +
                          std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  Fixture f(61, 2, 1, 4);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 20; ++i)
    ids.push_back(i * 1000003);
  f.rows(ids, true, 1);
  f.rows({ids[0], ids[1]}, true, 9); // the others go unused
  f.table->sweep(9);
  const int64_t live = f.table->stats().live;
  EXPECT_EQ(live, 2);
  f.rows({555, 666}, true, 9); // into the holes eviction left
  std::map<int64_t, std::vector<float>> before;
  for (int64_t id : {ids[0], ids[1], int64_t(555), int64_t(666)}) {
    const int64_t r = f.rows({id}, false, 9)[0];
    f.value.data<float>()[r * kWidth] += 1.f; // as an update would
    f.accum.data<float>()[r * kWidth] = float(id % 97);
    before[id] = f.row(r);
  }
  std::vector<checkpoint::SavedTensor> tensors;
  std::vector<std::unique_ptr<Tensor>> owned;
  f.table->save(&tensors, &owned);
  int64_t saved = 0;
  for (const checkpoint::SavedTensor &t : tensors)
    if (t.name.size() > 5 && t.name.substr(t.name.size() - 5) == "-keys")
      saved += t.value->numElements();
  EXPECT_EQ(saved, 4) << "only the live rows";
  EXPECT_EQ(tensors.size(), 6u) << "keys, value and slot per shard";
  Status s = checkpoint::saveCheckpoint(dir, 9, tensors, 0);
  ASSERT_TRUE(s.isOk()) << s.message();
  std::unique_ptr<checkpoint::CheckpointReader> reader;
  s = checkpoint::CheckpointReader::open(dir, 9, &reader);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_TRUE(reader->find("t/embeddings/part_1-keys"));
  EXPECT_TRUE(f.table->savesTensor("t/embeddings/Adagrad/part_0"));

  Fixture g(61, 2, 1, 4);
  s = g.table->restore(*reader, 9);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(g.table->stats().live, 4);
  for (const auto &[id, row] : before) {
    const int64_t r = g.rows({id}, false, 10)[0];
    ASSERT_GT(r, 0) << "id " << id;
    EXPECT_EQ(g.row(r), row) << "id " << id;
    EXPECT_EQ(g.accum.data<float>()[r * kWidth], float(id % 97));
  }
  // A smaller capacity cannot take them.
  Fixture small(5, 2, 1, 4);
  s = small.table->restore(*reader, 9);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("raise capacity"), std::string::npos)
      << s.message();
  std::filesystem::remove_all(dir);
}

} // namespace
} // namespace dtf::testing
