// The math kernels of issue 36 against TensorFlow's definitions: erf, floor,
// ceil, round (halves to even), abs, floor_mod (the divisor's sign, integers
// and floats) and bucketize (std::upper_bound over sorted boundaries).
#include "KernelTestUtil.h"

#include <cmath>
#include <limits>

namespace dtf::test {
namespace {

TEST(MathOps, ErfMatchesStdErf) {
  Rng rng;
  for (DType dtype : {DType::F32, DType::F64}) {
    SCOPED_TRACE(dtypeName(dtype));
    Values x = rng.uniform(1000, -5, 5), want(x.size());
    x.insert(x.end(), {0, -0.5, 0.5, 1e-8, 30, -30});
    if (dtype == DType::F32)
      for (double &v : x)
        v = double(float(v));
    want.resize(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      want[i] = std::erf(x[i]);
    KernelRun run("dtf.erf");
    run.pool().in(tensorOf(dtype, {int64_t(x.size())}, x));
    ASSERT_EQ(errorOf(run), "");
    EXPECT_TRUE(near(run.out(), {int64_t(x.size())}, want,
                     dtype == DType::F32 ? 1e-7 : 1e-15, 1e-6));
  }
}

TEST(MathOps, RoundHalvesToEvenAsTensorFlow) {
  // tf.round([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, -2.6]) =
  // [0, 2, 2, -0, -2, -2, 2, -3].
  const Values x = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, -2.6, 3.5};
  const Values want = {0, 2, 2, -0.0, -2, -2, 2, -3, 4};
  for (DType dtype : {DType::F32, DType::F64}) {
    KernelRun run("dtf.round");
    run.in(tensorOf(dtype, {9}, x));
    ASSERT_EQ(errorOf(run), "");
    EXPECT_TRUE(equal(run.out(), {9}, want)) << dtypeName(dtype);
    EXPECT_TRUE(std::signbit(valuesOf(run.out())[3])) << "round(-0.5) is -0";
  }
}

TEST(MathOps, FloorCeilAbs) {
  const Values x = {-2.5, -1, -0.25, 0, 0.75, 3};
  for (DType dtype : {DType::F32, DType::F64}) {
    SCOPED_TRACE(dtypeName(dtype));
    KernelRun floor("dtf.floor"), ceil("dtf.ceil"), abs("dtf.abs");
    floor.in(tensorOf(dtype, {6}, x));
    ceil.in(tensorOf(dtype, {6}, x));
    abs.in(tensorOf(dtype, {6}, x));
    ASSERT_EQ(errorOf(floor), "");
    ASSERT_EQ(errorOf(ceil), "");
    ASSERT_EQ(errorOf(abs), "");
    EXPECT_TRUE(equal(floor.out(), {6}, {-3, -1, -1, 0, 0, 3}));
    EXPECT_TRUE(equal(ceil.out(), {6}, {-2, -1, -0.0, 0, 1, 3}));
    EXPECT_TRUE(equal(abs.out(), {6}, {2.5, 1, 0.25, 0, 0.75, 3}));
  }
  for (DType dtype : {DType::I32, DType::I64}) {
    KernelRun abs("dtf.abs");
    abs.in(tensorOf(dtype, {4}, {-7, 0, 5, -1}));
    ASSERT_EQ(errorOf(abs), "");
    EXPECT_TRUE(equal(abs.out(), {4}, {7, 0, 5, 1})) << dtypeName(dtype);
  }
  // The smallest integer has no positive twin: it wraps, as TensorFlow's.
  KernelRun wrap("dtf.abs");
  wrap.in(tensorOf(DType::I32, {1}, {-2147483648.0}));
  ASSERT_EQ(errorOf(wrap), "");
  EXPECT_TRUE(equal(wrap.out(), {1}, {-2147483648.0}));
  KernelRun ints("dtf.floor");
  ints.in(tensorOf(DType::I32, {1}, {1}));
  EXPECT_NE(errorOf(ints), "");
}

TEST(MathOps, FloorModTakesTheDivisorsSign) {
  // tf.math.floormod([7, -7, 7, -7, 6], [3, 3, -3, -3, 3]) = [1, 2, -2, -1, 0]
  for (DType dtype : {DType::I32, DType::I64, DType::F32, DType::F64}) {
    SCOPED_TRACE(dtypeName(dtype));
    KernelRun run("dtf.floor_mod");
    run.in(tensorOf(dtype, {5}, {7, -7, 7, -7, 6}))
        .in(tensorOf(dtype, {5}, {3, 3, -3, -3, 3}));
    ASSERT_EQ(errorOf(run), "");
    EXPECT_TRUE(equal(run.out(), {5}, {1, 2, -2, -1, 0}));
  }
  // Floats: fractional operands and broadcasting, against x - floor(x/y) y.
  KernelRun f("dtf.floor_mod");
  f.in(f64({2, 3}, {5.5, -5.5, 0.75, -0.75, 7.25, -7.25}))
      .in(f64({3}, {2, -2, 0.5}));
  ASSERT_EQ(errorOf(f), "");
  EXPECT_TRUE(
      near(f.out(), {2, 3}, {1.5, -1.5, 0.25, 1.25, -0.75, 0.25}, 1e-15, 0));
  // MIN % -1 is 0 (no trap); a zero integer divisor is an error, a float
  // one gives NaN.
  KernelRun wrap("dtf.floor_mod");
  wrap.in(tensorOf(DType::I32, {2}, {-2147483648.0, -5}))
      .in(tensorOf(DType::I32, {2}, {-1, 1}));
  ASSERT_EQ(errorOf(wrap), "");
  EXPECT_TRUE(equal(wrap.out(), {2}, {0, 0}));
  KernelRun zero("dtf.floor_mod");
  zero.in(tensorOf(DType::I64, {2}, {1, 2}))
      .in(tensorOf(DType::I64, {2}, {3, 0}));
  EXPECT_EQ(errorOf(zero), "dtf.floor_mod: integer division by zero "
                           "(element 1 of the divisor i64[2])");
  KernelRun fzero("dtf.floor_mod");
  fzero.in(f32({1}, {1})).in(f32({1}, {0}));
  ASSERT_EQ(errorOf(fzero), "");
  EXPECT_TRUE(std::isnan(valuesOf(fzero.out())[0]));
}

TEST(MathOps, BucketizeAsTensorFlow) {
  // tf.raw_ops.Bucketize's own example: boundaries [0, 10, 100],
  // [[-5, 10000], [150, 10], [5, 100]] -> [[0, 3], [3, 2], [1, 3]].
  for (DType dtype : {DType::I32, DType::I64, DType::F32, DType::F64}) {
    SCOPED_TRACE(dtypeName(dtype));
    KernelRun run("dtf.bucketize");
    run.attr("boundaries", std::vector<double>{0, 10, 100})
        .in(tensorOf(dtype, {3, 2}, {-5, 10000, 150, 10, 5, 100}));
    ASSERT_EQ(errorOf(run), "");
    EXPECT_EQ(run.out().dtype(), DType::I32);
    EXPECT_TRUE(equal(run.out(), {3, 2}, {0, 3, 3, 2, 1, 3}));
  }
  // NaN goes past every boundary (upper_bound); no boundaries: bucket 0.
  KernelRun nan("dtf.bucketize");
  nan.attr("boundaries", std::vector<double>{-1, 1})
      .in(f32({2}, {std::numeric_limits<double>::quiet_NaN(), 1}));
  ASSERT_EQ(errorOf(nan), "");
  EXPECT_TRUE(equal(nan.out(), {2}, {2, 2}));
  KernelRun none("dtf.bucketize");
  none.attr("boundaries", std::vector<double>{}).in(f32({2}, {-3, 3}));
  ASSERT_EQ(errorOf(none), "");
  EXPECT_TRUE(equal(none.out(), {2}, {0, 0}));
  KernelRun unsorted("dtf.bucketize");
  unsorted.attr("boundaries", std::vector<double>{1, 0}).in(f32({1}, {0}));
  EXPECT_EQ(errorOf(unsorted),
            "dtf.bucketize: boundaries must be sorted ascending");
}

} // namespace
} // namespace dtf::test
