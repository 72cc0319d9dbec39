// gather, gather_grad and one_hot.
#include "KernelTestUtil.h"

namespace dtf::test {
namespace {

TEST(Gather, RowsByIndexForEveryIndexDtype) {
  Rng rng;
  const Shape params = {10, 3, 4};
  Values p = rng.uniform(120);
  for (DType idxType : {DType::I32, DType::I64})
    for (const Shape &idxShape : {Shape{2, 5}, Shape{7}, Shape{}}) {
      SCOPED_TRACE(std::string(dtypeName(idxType)) + shapeString(idxShape));
      Values idx = rng.integers(numElementsOf(idxShape), 0, 9);
      Shape outShape = idxShape;
      outShape.insert(outShape.end(), {3, 4});
      Values want;
      for (double i : idx)
        want.insert(want.end(), p.begin() + int64_t(i) * 12,
                    p.begin() + int64_t(i) * 12 + 12);
      KernelRun run("dtf.gather");
      run.in(f32(params, p)).in(tensorOf(idxType, idxShape, idx));
      ASSERT_EQ(errorOf(run), "");
      EXPECT_TRUE(equal(run.out(), outShape, want));
    }
  // Integer params, many rows on the pool.
  Values table = rng.integers(1000 * 64, -50, 50),
         ids = rng.integers(4000, 0, 999);
  Values want;
  for (double i : ids)
    want.insert(want.end(), table.begin() + int64_t(i) * 64,
                table.begin() + int64_t(i) * 64 + 64);
  KernelRun run("dtf.gather");
  run.pool()
      .in(tensorOf(DType::I64, {1000, 64}, table))
      .in(tensorOf(DType::I32, {4000}, ids));
  ASSERT_EQ(errorOf(run), "");
  EXPECT_TRUE(equal(run.out(), {4000, 64}, want));
}

TEST(Gather, IndexOutOfRangeIsAnError) {
  KernelRun run("dtf.gather");
  run.in(f32({5, 2}, Values(10))).in(tensorOf(DType::I64, {4}, {0, 4, 5, 1}));
  EXPECT_EQ(errorOf(run),
            "dtf.gather: index 5 at position 2 is outside [0, 5)");
  KernelRun grad("dtf.gather_grad");
  grad.attr("params_shape", Shape{5, 2});
  grad.in(f32({2, 2}, Values(4))).in(tensorOf(DType::I32, {2}, {-1, 0}));
  EXPECT_EQ(errorOf(grad),
            "dtf.gather_grad: index -1 at position 0 is outside [0, 5)");
}

TEST(Gather, GradMatchesFiniteDifferencesWithRepeatedIndices) {
  Rng rng;
  const Shape params = {6, 3};
  Values p = rng.uniform(18);
  const Shape idxShape = {2, 4};
  Values idx = {0, 5, 5, 2, 0, 0, 3, 5}; // repeats accumulate
  Shape outShape = {2, 4, 3};
  Values dy = rng.uniform(24);
  auto gather = [&](const Values &pv) {
    Values out;
    for (double i : idx)
      out.insert(out.end(), pv.begin() + int64_t(i) * 3,
                 pv.begin() + int64_t(i) * 3 + 3);
    return out;
  };
  Values want = numericGrad(gather, p, dy, 1e-3);
  KernelRun run("dtf.gather_grad");
  run.attr("params_shape", params)
      .in(f32(outShape, dy))
      .in(tensorOf(DType::I32, idxShape, idx));
  ASSERT_EQ(errorOf(run), "");
  EXPECT_TRUE(near(run.out(), params, want, 1e-5, 1e-5));

  KernelRun bad("dtf.gather_grad");
  bad.attr("params_shape", params)
      .in(f32({2, 4, 2}, Values(16)))
      .in(tensorOf(DType::I32, idxShape, idx));
  EXPECT_EQ(errorOf(bad),
            "dtf.gather_grad expects dy of shape [2,4,3] (indices.shape + "
            "params_shape[1:]), got f32[2,4,2]");
}

TEST(OneHot, OnAndOffValuesAndOutOfRangeRows) {
  KernelRun run("dtf.one_hot");
  run.attr("depth", int64_t(4)).attr("on_value", 5.0).attr("off_value", -1.0);
  run.in(tensorOf(DType::I64, {2, 3}, {0, 3, 4, -1, 2, 1}));
  ASSERT_EQ(errorOf(run), "");
  EXPECT_TRUE(equal(run.out(), {2, 3, 4},
                    {5,  -1, -1, -1, -1, -1, -1, 5,  -1, -1, -1, -1,
                     -1, -1, -1, -1, -1, -1, 5,  -1, -1, 5,  -1, -1}));
  EXPECT_EQ(run.out().dtype(), DType::F32);

  KernelRun ints("dtf.one_hot");
  ints.attr("depth", int64_t(3)).attr("out_dtype", std::string("i32"));
  ints.in(tensorOf(DType::I32, {2}, {2, 0}));
  ASSERT_EQ(errorOf(ints), "");
  EXPECT_EQ(ints.out().dtype(), DType::I32);
  EXPECT_TRUE(equal(ints.out(), {2, 3}, {0, 0, 1, 1, 0, 0}));

  KernelRun noDepth("dtf.one_hot");
  noDepth.in(tensorOf(DType::I32, {1}, {0}));
  EXPECT_EQ(errorOf(noDepth), "dtf.one_hot needs the depth attribute");
}

} // namespace
} // namespace dtf::test
