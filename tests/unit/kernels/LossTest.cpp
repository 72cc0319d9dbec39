// Softmax, log-softmax, the cross-entropy losses and their gradients against
// float64 references and finite differences.
#include "KernelTestUtil.h"

namespace dtf::test {
namespace {

// Applies f to every lane (all elements along `axis`) of x.
Values perLane(const Shape &shape, int axis, const Values &x,
               const std::function<Values(const Values &)> &f) {
  Values out(x.size());
  Shape lanes = shape;
  lanes[axis] = 1;
  for (int64_t l = 0; l < numElementsOf(lanes); ++l) {
    Shape idx = unravel(l, lanes);
    Values lane;
    for (int64_t k = 0; k < shape[axis]; ++k) {
      idx[axis] = k;
      lane.push_back(x[ravel(idx, shape)]);
    }
    Values r = f(lane);
    for (int64_t k = 0; k < shape[axis]; ++k) {
      idx[axis] = k;
      out[ravel(idx, shape)] = r[k];
    }
  }
  return out;
}

Values refSoftmax(const Values &x) {
  double m = *std::max_element(x.begin(), x.end()), s = 0;
  for (double v : x)
    s += std::exp(v - m);
  Values y;
  for (double v : x)
    y.push_back(std::exp(v - m) / s);
  return y;
}

Values refLogSoftmax(const Values &x) {
  double m = *std::max_element(x.begin(), x.end()), s = 0;
  for (double v : x)
    s += std::exp(v - m);
  Values y;
  for (double v : x)
    y.push_back(v - m - std::log(s));
  return y;
}

TEST(Softmax, ForwardAlongEveryAxis) {
  Rng rng;
  const Shape shape = {3, 5, 7};
  for (bool log : {false, true})
    for (int axis : {-1, 0, 1, 2}) {
      SCOPED_TRACE(::testing::Message()
                   << (log ? "log_softmax" : "softmax") << " axis " << axis);
      Values x = rng.uniform(105, -5, 5);
      int a = axis < 0 ? axis + 3 : axis;
      Values want = perLane(shape, a, x, log ? refLogSoftmax : refSoftmax);
      KernelRun run(log ? "dtf.log_softmax" : "dtf.softmax");
      run.attr("axis", int64_t(axis)).in(f32(shape, x));
      ASSERT_EQ(errorOf(run), "");
      EXPECT_TRUE(near(run.out(), shape, want, 1e-6, 1e-5));
    }
}

TEST(Softmax, LargeLogitsStayFinite) {
  KernelRun soft("dtf.softmax"), logSoft("dtf.log_softmax");
  soft.in(f32({2, 3}, {1000, 1001, 1002, -1000, -1001, -1002}));
  logSoft.in(f32({2, 3}, {1000, 1001, 1002, -1000, -1001, -1002}));
  ASSERT_EQ(errorOf(soft), "");
  ASSERT_EQ(errorOf(logSoft), "");
  Values row = refSoftmax({0, 1, 2}), rev = refSoftmax({0, -1, -2});
  Values lrow = refLogSoftmax({0, 1, 2}), lrev = refLogSoftmax({0, -1, -2});
  EXPECT_TRUE(near(soft.out(), {2, 3},
                   {row[0], row[1], row[2], rev[0], rev[1], rev[2]}, 1e-6,
                   1e-5));
  EXPECT_TRUE(near(logSoft.out(), {2, 3},
                   {lrow[0], lrow[1], lrow[2], lrev[0], lrev[1], lrev[2]}, 1e-5,
                   1e-5));
}

TEST(Softmax, GradientsMatchFiniteDifferences) {
  Rng rng;
  const Shape shape = {3, 5, 7};
  for (bool log : {false, true})
    for (int axis : {-1, 1, 0}) {
      SCOPED_TRACE(::testing::Message()
                   << (log ? "log_softmax" : "softmax") << " axis " << axis);
      int a = axis < 0 ? axis + 3 : axis;
      auto f = log ? refLogSoftmax : refSoftmax;
      Values x = rng.uniform(105, -3, 3), dy = rng.uniform(105);
      Values y = perLane(shape, a, x, f);
      Values want = numericGrad(
          [&](const Values &xv) { return perLane(shape, a, xv, f); }, x, dy,
          1e-5);
      KernelRun run(log ? "dtf.log_softmax_grad" : "dtf.softmax_grad");
      run.attr("axis", int64_t(axis)).in(f32(shape, dy)).in(f32(shape, y));
      ASSERT_EQ(errorOf(run), "");
      EXPECT_TRUE(near(run.out(), shape, want, 1e-5, 1e-4));
    }
}

// Per-row losses over the last axis.
Values refDenseLoss(int64_t rows, int64_t c, const Values &x,
                    const Values &labels) {
  Values loss(rows);
  for (int64_t r = 0; r < rows; ++r) {
    Values lane(x.begin() + r * c, x.begin() + (r + 1) * c);
    Values ls = refLogSoftmax(lane);
    double s = 0;
    for (int64_t i = 0; i < c; ++i)
      s -= labels[r * c + i] * ls[i];
    loss[r] = s;
  }
  return loss;
}

Values refSparseLoss(int64_t rows, int64_t c, const Values &x,
                     const Values &labels) {
  Values loss(rows);
  for (int64_t r = 0; r < rows; ++r) {
    Values lane(x.begin() + r * c, x.begin() + (r + 1) * c);
    loss[r] = -refLogSoftmax(lane)[int64_t(labels[r])];
  }
  return loss;
}

// Rows of non-negative labels that sum to 1.
Values distributions(Rng &rng, int64_t rows, int64_t c) {
  Values p = rng.uniform(rows * c, 0, 1);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t i = 0; i < c; ++i)
      s += p[r * c + i];
    for (int64_t i = 0; i < c; ++i)
      p[r * c + i] = double(float(p[r * c + i] / s));
  }
  return p;
}

TEST(CrossEntropy, DenseAndSparseLossesMatchTheReference) {
  Rng rng;
  for (const Shape &shape :
       {Shape{13, 10}, Shape{1, 10}, Shape{3, 5, 7}, Shape{4}}) {
    SCOPED_TRACE(shapeString(shape));
    const int64_t c = shape.back(), rows = numElementsOf(shape) / c;
    Shape lossShape(shape.begin(), shape.end() - 1);
    Values x = rng.uniform(numElementsOf(shape), -4, 4);
    Values dense = distributions(rng, rows, c);
    KernelRun d("dtf.softmax_cross_entropy");
    d.in(f32(shape, x)).in(f32(shape, dense));
    ASSERT_EQ(errorOf(d), "");
    EXPECT_TRUE(
        near(d.out(), lossShape, refDenseLoss(rows, c, x, dense), 1e-5, 1e-5));
    for (DType labelType : {DType::I32, DType::I64}) {
      Values labels = rng.integers(rows, 0, c - 1);
      KernelRun s("dtf.sparse_softmax_cross_entropy");
      s.in(f32(shape, x)).in(tensorOf(labelType, lossShape, labels));
      ASSERT_EQ(errorOf(s), "");
      EXPECT_TRUE(near(s.out(), lossShape, refSparseLoss(rows, c, x, labels),
                       1e-5, 1e-5));
    }
  }
}

TEST(CrossEntropy, LargeLogitsStayFinite) {
  KernelRun s("dtf.sparse_softmax_cross_entropy");
  s.in(f32({2, 3}, {1000, 0, -1000, 50, 60, 70}))
      .in(tensorOf(DType::I32, {2}, {2, 2}));
  ASSERT_EQ(errorOf(s), "");
  EXPECT_TRUE(near(s.out(), {2},
                   {2000, refSparseLoss(1, 3, {50, 60, 70}, {2})[0]}, 1e-3,
                   1e-6));
}

TEST(CrossEntropy, GradientsMatchFiniteDifferences) {
  Rng rng;
  for (const Shape &shape : {Shape{13, 10}, Shape{3, 5, 7}}) {
    SCOPED_TRACE(shapeString(shape));
    const int64_t c = shape.back(), rows = numElementsOf(shape) / c;
    Shape lossShape(shape.begin(), shape.end() - 1);
    Values x = rng.uniform(numElementsOf(shape), -3, 3),
           dloss = rng.uniform(rows);
    Values dense = distributions(rng, rows, c);
    Values want = numericGrad(
        [&](const Values &xv) { return refDenseLoss(rows, c, xv, dense); }, x,
        dloss, 1e-5);
    KernelRun d("dtf.softmax_cross_entropy_grad");
    d.in(f32(lossShape, dloss)).in(f32(shape, x)).in(f32(shape, dense));
    ASSERT_EQ(errorOf(d), "");
    EXPECT_TRUE(near(d.out(), shape, want, 1e-5, 1e-4));

    Values labels = rng.integers(rows, 0, c - 1);
    Values wantSparse = numericGrad(
        [&](const Values &xv) { return refSparseLoss(rows, c, xv, labels); }, x,
        dloss, 1e-5);
    KernelRun s("dtf.sparse_softmax_cross_entropy_grad");
    s.in(f32(lossShape, dloss))
        .in(f32(shape, x))
        .in(tensorOf(DType::I64, lossShape, labels));
    ASSERT_EQ(errorOf(s), "");
    EXPECT_TRUE(near(s.out(), shape, wantSparse, 1e-5, 1e-4));
  }
}

TEST(CrossEntropy, LabelsOutsideTheClassesAreErrors) {
  KernelRun high("dtf.sparse_softmax_cross_entropy");
  high.in(f32({4, 10}, Values(40)))
      .in(tensorOf(DType::I32, {4}, {0, 9, 3, 12}));
  EXPECT_EQ(
      errorOf(high),
      "dtf.sparse_softmax_cross_entropy: label 12 of example 3 is outside "
      "the classes [0, 10)");
  KernelRun negative("dtf.sparse_softmax_cross_entropy_grad");
  negative.in(f32({2}, {1, 1}))
      .in(f32({2, 3}, Values(6)))
      .in(tensorOf(DType::I64, {2}, {-1, 0}));
  EXPECT_EQ(errorOf(negative),
            "dtf.sparse_softmax_cross_entropy_grad: label -1 of example 0 is "
            "outside the classes [0, 3)");
  KernelRun shape("dtf.sparse_softmax_cross_entropy");
  shape.in(f32({4, 10}, Values(40))).in(tensorOf(DType::I32, {5}, Values(5)));
  EXPECT_EQ(errorOf(shape),
            "dtf.sparse_softmax_cross_entropy expects labels of shape [4] (the "
            "logits without the class dimension), got i32[5]");
  KernelRun floats("dtf.sparse_softmax_cross_entropy");
  floats.in(f32({4, 10}, Values(40))).in(f32({4}, Values(4)));
  EXPECT_EQ(
      errorOf(floats),
      "dtf.sparse_softmax_cross_entropy expects i32 or i64 indices, got f32");
  KernelRun dense("dtf.softmax_cross_entropy");
  dense.in(f32({4, 10}, Values(40))).in(f32({4, 9}, Values(36)));
  EXPECT_EQ(errorOf(dense),
            "dtf.softmax_cross_entropy expects logits and labels of the same "
            "shape, got f32[4,10] and f32[4,9]");
}

} // namespace
} // namespace dtf::test
