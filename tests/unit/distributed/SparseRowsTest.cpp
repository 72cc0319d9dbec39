// The embedding rows a worker pushes (SparseRows.h): a sparse gradient summed
// per unique id in position order, two sums merged by id, and the cut of a
// sum for one shard (ids relative to the shard's first row, its rows a view).
#include "runtime/distributed/SparseRows.h"

#include <gtest/gtest.h>

#include <vector>

namespace dtf::dist {
namespace {

Tensor ids64(std::vector<int64_t> v) {
  Tensor t = Tensor::allocate(DType::I64, {int64_t(v.size())});
  for (size_t i = 0; i < v.size(); ++i)
    t.data<int64_t>()[i] = v[i];
  return t;
}

Tensor rows2(std::vector<float> v) {
  Tensor t = Tensor::allocate(DType::F32, {int64_t(v.size() / 2), 2});
  for (size_t i = 0; i < v.size(); ++i)
    t.data<float>()[i] = v[i];
  return t;
}

std::vector<float> values(const Tensor &t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numElements());
}

plan::Transfer send(const std::string &key, int64_t rowOffset, int64_t rows) {
  plan::Transfer r;
  r.set_key(key);
  r.set_variable("emb");
  r.set_sparse(true);
  r.set_row_offset(rowOffset);
  r.set_rows(rows);
  return r;
}

TEST(SparseRows, SumsEachIdOnceInAscendingOrder) {
  const Tensor ids = ids64({7, 2, 7, 5});
  const Tensor rows = rows2({1, 2, 10, 20, 100, 200, 1000, 2000});
  ValueOf value = [&](const std::string &k) -> const Tensor * {
    return k == "emb:grad" ? &ids : k == "emb:grad#rows" ? &rows : nullptr;
  };
  SparseSum sum;
  ASSERT_TRUE(sumSparse(send("emb:grad", 0, 10), value, &sum).isOk());
  EXPECT_EQ(sum.ids, (std::vector<int64_t>{2, 5, 7}));
  EXPECT_EQ(values(sum.rows),
            (std::vector<float>{10, 20, 1000, 2000, 101, 202}));
}

TEST(SparseRows, RefusesAStepWithoutTheGradientOrWithRowsThatDoNotMatch) {
  const Tensor ids = ids64({1, 2, 3});
  const Tensor rows = rows2({1, 2, 3, 4});
  ValueOf none = [](const std::string &) -> const Tensor * { return nullptr; };
  SparseSum sum;
  Status s = sumSparse(send("emb:grad", 0, 10), none, &sum);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("no sparse gradient for 'emb:grad'"),
            std::string::npos)
      << s.message();
  ValueOf mismatched = [&](const std::string &k) -> const Tensor * {
    return k == "emb:grad" ? &ids : &rows;
  };
  s = sumSparse(send("emb:grad", 0, 10), mismatched, &sum);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("do not match its 3 ids"), std::string::npos)
      << s.message();
}

TEST(SparseRows, AddsTwoSumsById) {
  SparseSum a{{1, 4}, rows2({1, 1, 4, 4})};
  const SparseSum b{{2, 4}, rows2({2, 2, 40, 40})};
  ASSERT_TRUE(addSparse(&a, b).isOk());
  EXPECT_EQ(a.ids, (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(values(a.rows), (std::vector<float>{1, 1, 2, 2, 44, 44}));
}

TEST(SparseRows, CutsASumForOneShardWithIdsRelativeToItsFirstRow) {
  const SparseSum sum{{1, 5, 6, 9}, rows2({1, 1, 5, 5, 6, 6, 9, 9})};
  Tensor ids, rows;
  // Shard 1 of a table of 10 rows in two: rows 5 to 9.
  cutForShard(send("emb:grad/part_1", 5, 5), sum, PsTables(), &ids, &rows);
  ASSERT_EQ(ids.numElements(), 3);
  EXPECT_EQ((std::vector<int64_t>(ids.data<int64_t>(),
                                  ids.data<int64_t>() + 3)),
            (std::vector<int64_t>{0, 1, 4}));
  EXPECT_EQ(values(rows), (std::vector<float>{5, 5, 6, 6, 9, 9}));
  // Shard 0: rows 0 to 4.
  cutForShard(send("emb:grad/part_0", 0, 5), sum, PsTables(), &ids, &rows);
  ASSERT_EQ(ids.numElements(), 1);
  EXPECT_EQ(ids.data<int64_t>()[0], 1);
  EXPECT_EQ(values(rows), (std::vector<float>{1, 1}));
}

} // namespace
} // namespace dtf::dist
