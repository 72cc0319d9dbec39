// Sparse optimizer updates (the gradient of a variable that is only
// gathered, as pairs of indices and rows): on the rows present they give the
// dense update's values bit for bit, with duplicate ids and several pairs
// summed as dtf.gather_grad and dtf.add sum them; the other rows and their
// slots keep their values; and the ps form of a sparse update (the dense op
// with `lazy`, fed the scattered gradient) gives the same bits.
#include "KernelTestUtil.h"

#include <set>

namespace dtf::test {
namespace {

const Shape kVarShape = {7, 3};
constexpr int64_t kRows = 7, kWidth = 3;

struct Case {
  const char *dense, *sparse;
  int slots;   // after the variable
  bool adam;   // takes the step after the learning rate
  AttrMap attrs;
};

const std::vector<Case> &cases() {
  static const std::vector<Case> all = {
      {"dtf.apply_sgd", "dtf.sparse_apply_sgd", 0, false, {}},
      {"dtf.apply_momentum", "dtf.sparse_apply_momentum", 1, false,
       {{"momentum", 0.9}}},
      {"dtf.apply_momentum", "dtf.sparse_apply_momentum", 1, false,
       {{"momentum", 0.9}, {"use_nesterov", true}}},
      {"dtf.apply_adam", "dtf.sparse_apply_adam", 2, true,
       {{"beta1", 0.9}, {"beta2", 0.999}, {"epsilon", 1e-8}}},
      {"dtf.apply_adagrad", "dtf.sparse_apply_adagrad", 1, false, {}},
      {"dtf.apply_rmsprop", "dtf.sparse_apply_rmsprop", 2, false,
       {{"decay", 0.9}, {"momentum", 0.5}, {"epsilon", 1e-10}}},
      // With Keras' decoupled weight decay: the rows present decay and take
      // the update as the dense op's; the absent rows do not decay.
      {"dtf.apply_sgd", "dtf.sparse_apply_sgd", 0, false,
       {{"weight_decay", 0.3}}},
      {"dtf.apply_momentum", "dtf.sparse_apply_momentum", 1, false,
       {{"momentum", 0.9}, {"weight_decay", 0.3}}},
      {"dtf.apply_adam", "dtf.sparse_apply_adam", 2, true,
       {{"beta1", 0.9}, {"beta2", 0.999}, {"epsilon", 1e-7},
        {"weight_decay", 0.004}}},
      {"dtf.apply_adagrad", "dtf.sparse_apply_adagrad", 1, false,
       {{"weight_decay", 0.3}}},
      {"dtf.apply_rmsprop", "dtf.sparse_apply_rmsprop", 2, false,
       {{"decay", 0.9}, {"momentum", 0.5}, {"epsilon", 1e-10},
        {"weight_decay", 0.3}}},
      // FTRL's dense update also re-derives the absent rows (FtrlTest.cpp).
      {"dtf.apply_ftrl", "dtf.sparse_apply_ftrl", 2, false,
       {{"lr_power", -0.5}, {"l1", 0.01}, {"l2", 0.1}, {"l2_shrinkage", 0.05},
        {"beta", 0.5}, {"weight_decay", 0.3}}},
  };
  return all;
}

// Two gathers of the table: ids with a duplicate, and ids sharing a row
// with the first; rows 0, 2, 3 and 5 are absent.
const Values kIds1 = {4, 1, 4}, kIds2 = {1, 6};
const std::set<int64_t> kPresent = {1, 4, 6};

Tensor scatter(DType idType, const Values &ids,
               const Tensor &rows) {
  KernelRun run("dtf.gather_grad");
  run.in(rows).in(tensorOf(idType, {int64_t(ids.size())}, ids));
  run.attr("params_shape", std::vector<int64_t>(kVarShape));
  EXPECT_EQ(errorOf(run), "");
  return run.out();
}

// Runs one update on fresh tensors holding `state`; returns the new state.
std::vector<Values> update(const Case &c, bool sparse, bool lazy, DType dtype,
                           DType idType, const std::vector<Values> &state,
                           const Tensor &rows1, const Tensor &rows2,
                           const Tensor &denseGrad) {
  std::vector<Tensor> vars;
  for (const Values &v : state)
    vars.push_back(tensorOf(dtype, kVarShape, v));
  KernelRun run(sparse ? c.sparse : c.dense);
  for (Tensor &t : vars)
    run.in(t);
  if (!sparse)
    run.in(denseGrad);
  run.in(tensorOf(dtype, {}, {0.05}));
  if (c.adam)
    run.in(tensorOf(DType::I64, {}, {3}));
  if (sparse) {
    run.in(tensorOf(idType, {int64_t(kIds1.size())}, kIds1)).in(rows1);
    run.in(tensorOf(idType, {int64_t(kIds2.size())}, kIds2)).in(rows2);
  }
  for (const auto &[k, v] : c.attrs)
    run.attr(k, v);
  if (lazy)
    run.attr("lazy", true);
  run.pool();
  EXPECT_EQ(errorOf(run), "") << (sparse ? c.sparse : c.dense);
  std::vector<Values> out;
  for (const Tensor &t : vars)
    out.push_back(valuesOf(t));
  return out;
}

TEST(SparseOptimizers, PresentRowsMatchTheDenseUpdateAndOthersStay) {
  for (DType dtype : {DType::F32, DType::F64})
    for (DType idType : {DType::I32, DType::I64})
      for (const Case &c : cases()) {
        SCOPED_TRACE(std::string(c.sparse) + " " + dtypeName(dtype) + " ids " +
                     dtypeName(idType));
        Rng rng;
        std::vector<Values> state = {rng.uniform(kRows * kWidth)};
        for (int k = 0; k < c.slots; ++k)
          state.push_back(rng.uniform(kRows * kWidth, 0.1, 1.0));
        Tensor rows1 = tensorOf(dtype, {3, kWidth}, rng.uniform(3 * kWidth));
        Tensor rows2 = tensorOf(dtype, {2, kWidth}, rng.uniform(2 * kWidth));
        // The dense gradient as the train step made it before: scattered,
        // then added.
        KernelRun add("dtf.add");
        add.in(scatter(idType, kIds1, rows1))
            .in(scatter(idType, kIds2, rows2));
        ASSERT_EQ(errorOf(add), "");
        Tensor grad = add.out();

        auto dense = update(c, false, false, dtype, idType, state, rows1,
                            rows2, grad);
        auto sparse = update(c, true, false, dtype, idType, state, rows1,
                             rows2, grad);
        auto psForm = update(c, false, true, dtype, idType, state, rows1,
                             rows2, grad);
        for (size_t k = 0; k < state.size(); ++k)
          for (int64_t r = 0; r < kRows; ++r)
            for (int64_t j = 0; j < kWidth; ++j) {
              const size_t i = size_t(r * kWidth + j);
              const double expected =
                  kPresent.count(r) ? dense[k][i] : state[k][i];
              ASSERT_EQ(sparse[k][i], expected)
                  << "tensor " << k << " row " << r << " column " << j;
              ASSERT_EQ(psForm[k][i], sparse[k][i])
                  << "ps form: tensor " << k << " row " << r;
            }
      }
}

TEST(SparseOptimizers, WeightDecayMovesTheAbsentRowsOfTheDenseUpdateOnly) {
  // The weight-decay cases above are not empty: dense SGD with a decay moves
  // a row whose gradient is zero (row 0 is absent), the sparse form does not,
  // and on a present row the decay changes the result.
  const Case &plain = cases()[0], &decayed = cases()[6];
  ASSERT_TRUE(decayed.attrs.count("weight_decay"));
  Rng rng;
  std::vector<Values> state = {rng.uniform(kRows * kWidth)};
  Tensor rows1 = rng.f32({3, kWidth}), rows2 = rng.f32({2, kWidth});
  KernelRun add("dtf.add");
  add.in(scatter(DType::I64, kIds1, rows1))
      .in(scatter(DType::I64, kIds2, rows2));
  ASSERT_EQ(errorOf(add), "");
  Tensor grad = add.out();
  auto dense = update(decayed, false, false, DType::F32, DType::I64, state,
                      rows1, rows2, grad);
  auto sparse = update(decayed, true, false, DType::F32, DType::I64, state,
                       rows1, rows2, grad);
  auto undecayed = update(plain, true, false, DType::F32, DType::I64, state,
                          rows1, rows2, grad);
  EXPECT_NE(dense[0][0], state[0][0]);
  EXPECT_EQ(sparse[0][0], state[0][0]);
  EXPECT_NE(sparse[0][size_t(kWidth)], undecayed[0][size_t(kWidth)]); // row 1
  // var - var * 0.3 * 0.05 - 0.05 * g on row 1, in f32.
  const float v = float(state[0][size_t(kWidth)]);
  const float g = float(valuesOf(grad)[size_t(kWidth)]);
  const float expected = (v - v * 0.3f * 0.05f) - 0.05f * g;
  EXPECT_NEAR(sparse[0][size_t(kWidth)], expected, 1e-6);
}

TEST(SparseOptimizers, AbsentRowsOfTheDenseUpdateDifferWhereSlotsDecay) {
  // The check above is not empty: dense Adam moves a row whose gradient is
  // zero (its slots decay, its variable follows), the sparse form does not.
  const Case &adam = cases()[3];
  Rng rng;
  std::vector<Values> state = {rng.uniform(kRows * kWidth),
                               rng.uniform(kRows * kWidth, 0.1, 1.0),
                               rng.uniform(kRows * kWidth, 0.1, 1.0)};
  Tensor rows1 = rng.f32({3, kWidth}), rows2 = rng.f32({2, kWidth});
  KernelRun add("dtf.add");
  add.in(scatter(DType::I64, kIds1, rows1))
      .in(scatter(DType::I64, kIds2, rows2));
  ASSERT_EQ(errorOf(add), "");
  auto dense = update(adam, false, false, DType::F32, DType::I64, state, rows1,
                      rows2, add.out());
  EXPECT_NE(dense[0][0], state[0][0]); // row 0 is absent
  EXPECT_NE(dense[1][0], state[1][0]);
}

// A dynamic table's update (dynamic_shards = P) leaves the first row of
// each of its P shards alone: the reserved row that ids without a row
// read, which must stay zero. Here 7 rows in 2 shards: rows 0 and 4.
TEST(SparseOptimizers, ADynamicTablesUpdateSkipsEachShardsReservedRow) {
  Rng rng;
  Tensor var = rng.f32(kVarShape);
  const Values before = valuesOf(var);
  KernelRun run("dtf.sparse_apply_sgd");
  run.in(var).in(f32({}, {0.5}));
  run.in(tensorOf(DType::I64, {4}, {0, 4, 1, 0})).in(rng.f32({4, kWidth}));
  run.attr("dynamic_shards", int64_t(2));
  ASSERT_EQ(errorOf(run), "");
  const Values after = valuesOf(var);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t j = 0; j < kWidth; ++j) {
      const size_t i = size_t(r * kWidth + j);
      if (r == 1)
        EXPECT_NE(after[i], before[i]) << "row 1 is updated";
      else
        EXPECT_EQ(after[i], before[i]) << "row " << r << " stays";
    }
}

TEST(SparseOptimizers, BadIdsAndRowsAreErrors) {
  Rng rng;
  Tensor var = rng.f32(kVarShape);
  {
    KernelRun run("dtf.sparse_apply_sgd");
    run.in(var).in(f32({}, {0.1}));
    run.in(tensorOf(DType::I64, {2}, {1, 7})).in(rng.f32({2, kWidth}));
    EXPECT_NE(errorOf(run).find("index 7 at position 1 of input 2 is outside "
                                "[0, 7)"),
              std::string::npos)
        << errorOf(run);
  }
  {
    KernelRun run("dtf.sparse_apply_sgd");
    run.in(var).in(f32({}, {0.1}));
    run.in(tensorOf(DType::I64, {2}, {1, 2})).in(rng.f32({2, kWidth + 1}));
    EXPECT_NE(errorOf(run).find("expects rows of type f32[2,3] (the indices' shape, then a row's) in "
                                "input 3, got f32[2,4]"),
              std::string::npos)
        << errorOf(run);
  }
  {
    KernelRun run("dtf.sparse_apply_sgd");
    run.in(var).in(f32({}, {0.1})).in(tensorOf(DType::I64, {2}, {1, 2}));
    EXPECT_NE(errorOf(run).find("expects pairs of (indices, rows)"),
              std::string::npos)
        << errorOf(run);
  }
}

} // namespace
} // namespace dtf::test
