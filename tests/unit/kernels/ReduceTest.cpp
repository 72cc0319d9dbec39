// Reductions and their gradients against float64 references and finite
// differences.
#include "KernelTestUtil.h"

#include <limits>
#include <optional>

namespace dtf::test {
namespace {

enum class Kind { Sum, Mean, Max };

// Reduces `x` over the flagged axes; the result keeps the dims (as 1).
Values refReduce(const Shape &shape, const Values &x,
                 const std::vector<bool> &reduced, Kind kind,
                 Shape *keepShape) {
  *keepShape = shape;
  for (size_t d = 0; d < shape.size(); ++d)
    if (reduced[d])
      (*keepShape)[d] = 1;
  const double init =
      kind == Kind::Max ? -std::numeric_limits<double>::infinity() : 0.0;
  Values out(numElementsOf(*keepShape), init);
  std::vector<int64_t> counts(out.size(), 0);
  for (int64_t i = 0; i < int64_t(x.size()); ++i) {
    int64_t o = broadcastSource(unravel(i, shape), *keepShape);
    out[o] = kind == Kind::Max ? std::max(out[o], x[i]) : out[o] + x[i];
    ++counts[o];
  }
  if (kind == Kind::Mean)
    for (size_t o = 0; o < out.size(); ++o)
      out[o] /= double(counts[o]);
  return out;
}

Shape dropReduced(const Shape &shape, const std::vector<bool> &reduced) {
  Shape s;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!reduced[d])
      s.push_back(shape[d]);
  return s;
}

std::vector<bool> flags(const Shape &shape, const std::optional<Shape> &axes) {
  std::vector<bool> r(shape.size(), !axes.has_value());
  if (axes)
    for (int64_t a : *axes)
      r[a < 0 ? a + int64_t(shape.size()) : a] = true;
  return r;
}

struct ReduceCase {
  Shape shape;
  std::optional<Shape> axes;
};

const std::vector<ReduceCase> kCases = {
    {{3, 5, 7}, std::nullopt},   {{3, 5, 7}, Shape{0}},
    {{3, 5, 7}, Shape{1}},       {{3, 5, 7}, Shape{-1}},
    {{3, 5, 7}, Shape{0, 2}},    {{3, 5, 7}, Shape{1, 2}},
    {{3, 5, 7}, Shape{}},        {{13}, Shape{0}},
    {{2, 1, 3, 1}, Shape{1, 2}}, {{}, std::nullopt},
    {{1000, 70}, Shape{0}},      {{70, 1000}, Shape{1}},
    {{300000}, std::nullopt},    {{4, 300, 60}, Shape{1}},
    {{2, 3, 4, 5}, Shape{0, 2}}};

KernelRun &reduceAttrs(KernelRun &run, const ReduceCase &c, bool keepDims) {
  if (c.axes)
    run.attr("axes", *c.axes);
  return run.attr("keep_dims", keepDims);
}

TEST(Reduce, SumMeanMaxOverAxesForEveryDtype) {
  Rng rng;
  for (DType dtype : {DType::F32, DType::I32, DType::I64})
    for (Kind kind : {Kind::Sum, Kind::Mean, Kind::Max})
      for (const ReduceCase &c : kCases)
        for (bool keepDims : {false, true}) {
          const char *op = kind == Kind::Sum    ? "dtf.sum"
                           : kind == Kind::Mean ? "dtf.mean"
                                                : "dtf.max";
          SCOPED_TRACE(std::string(op) + " " + dtypeName(dtype) + " " +
                       shapeString(c.shape) + " axes " +
                       (c.axes ? shapeString(*c.axes) : "none") +
                       (keepDims ? " keep_dims" : ""));
          if (dtype != DType::F32 && numElementsOf(c.shape) > 100000)
            continue; // the large cases exercise the float path
          const int64_t n = numElementsOf(c.shape);
          Values x = dtype == DType::F32 ? rng.uniform(n, -1, 1)
                                         : rng.integers(n, -100, 100);
          std::vector<bool> reduced = flags(c.shape, c.axes);
          Shape keep;
          Values want = refReduce(c.shape, x, reduced, kind, &keep);
          if (kind == Kind::Mean && dtype != DType::F32)
            for (double &v : want)
              v = std::trunc(v);
          KernelRun run(op);
          reduceAttrs(run, c, keepDims).pool().in(tensorOf(dtype, c.shape, x));
          ASSERT_EQ(errorOf(run), "");
          EXPECT_EQ(run.out().dtype(), dtype);
          Shape outShape = keepDims ? keep : dropReduced(c.shape, reduced);
          // Sums of up to 300000 floats of |x| <= 1: f32 rounding grows with n.
          double atol = dtype == DType::F32
                            ? 1e-5 * std::max<double>(1, std::sqrt(double(n)))
                            : 0;
          EXPECT_TRUE(near(run.out(), outShape, want, atol, 1e-5));
        }
}

TEST(Reduce, EmptyReductionsGiveTheIdentity) {
  KernelRun sum("dtf.sum"), max("dtf.max");
  sum.attr("axes", Shape{1}).in(f32({2, 0}, {}));
  max.attr("axes", Shape{1}).in(f32({2, 0}, {}));
  ASSERT_EQ(errorOf(sum), "");
  ASSERT_EQ(errorOf(max), "");
  EXPECT_TRUE(equal(sum.out(), {2}, {0, 0}));
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(equal(max.out(), {2}, {-inf, -inf}));
}

TEST(Reduce, BadAxesAreErrors) {
  KernelRun twice("dtf.sum");
  twice.attr("axes", Shape{1, -2}).in(f32({3, 5, 7}, Values(105)));
  EXPECT_EQ(errorOf(twice), "dtf.sum names axis 1 twice");
  KernelRun range("dtf.mean");
  range.attr("axes", Shape{3}).in(f32({3, 5, 7}, Values(105)));
  EXPECT_EQ(errorOf(range), "dtf.mean expects an axis in [-3, 3), got 3");
}

TEST(Reduce, ArgmaxAlongEveryAxis) {
  Rng rng;
  const Shape shape = {3, 5, 7};
  Values x = rng.integers(105, -20, 20); // ties: the first index wins
  for (int axis : {0, 1, 2, -1})
    for (DType outType : {DType::I32, DType::I64})
      for (DType inType : {DType::F32, DType::I32, DType::I64}) {
        SCOPED_TRACE(::testing::Message()
                     << "axis " << axis << " " << dtypeName(inType) << " -> "
                     << dtypeName(outType));
        int a = axis < 0 ? axis + 3 : axis;
        Shape outShape = shape;
        outShape.erase(outShape.begin() + a);
        Values want(numElementsOf(outShape));
        for (int64_t o = 0; o < int64_t(want.size()); ++o) {
          Shape idx = unravel(o, outShape);
          idx.insert(idx.begin() + a, 0);
          int64_t best = 0;
          for (int64_t k = 0; k < shape[a]; ++k) {
            idx[a] = k;
            Shape bi = idx;
            bi[a] = best;
            if (x[ravel(idx, shape)] > x[ravel(bi, shape)])
              best = k;
          }
          want[o] = double(best);
        }
        KernelRun run("dtf.argmax");
        run.attr("axis", int64_t(axis))
            .attr("out_dtype", std::string(dtypeName(outType)));
        run.in(tensorOf(inType, shape, x));
        ASSERT_EQ(errorOf(run), "");
        EXPECT_EQ(run.out().dtype(), outType);
        EXPECT_TRUE(equal(run.out(), outShape, want));
      }
  KernelRun bad("dtf.argmax");
  bad.attr("axis", int64_t(0))
      .attr("out_dtype", std::string("f32"))
      .in(f32({2}, {1, 2}));
  EXPECT_EQ(errorOf(bad), "dtf.argmax gives i32 or i64 indices, not f32");
}

TEST(Reduce, SumToShapeUndoesBroadcasting) {
  Rng rng;
  const Shape dyShape = {3, 5, 7};
  Values dy = rng.uniform(105);
  for (const Shape &like : {Shape{5, 1}, Shape{1}, Shape{3, 1, 7}, Shape{},
                            Shape{3, 5, 7}, Shape{7}, Shape{1, 5, 7}}) {
    SCOPED_TRACE(shapeString(like));
    // The reference: every dy element adds into the like element it came from.
    Values want(numElementsOf(like), 0.0);
    for (int64_t i = 0; i < 105; ++i)
      want[broadcastSource(unravel(i, dyShape), like)] += dy[i];
    KernelRun run("dtf.sum_to_shape");
    run.in(f32(dyShape, dy)).in(Tensor::zeros(DType::F32, like));
    ASSERT_EQ(errorOf(run), "");
    EXPECT_TRUE(near(run.out(), like, want));
  }
  KernelRun bad("dtf.sum_to_shape");
  bad.in(f32(dyShape, dy)).in(Tensor::zeros(DType::F32, {4, 1}));
  EXPECT_EQ(errorOf(bad),
            "dtf.sum_to_shape: f32[4,1] does not broadcast to f32[3,5,7], so "
            "dy cannot be summed back to it");
}

TEST(Reduce, ReduceGradMatchesFiniteDifferences) {
  Rng rng;
  for (bool mean : {false, true})
    for (const ReduceCase &c :
         std::vector<ReduceCase>{{{3, 5, 7}, std::nullopt},
                                 {{3, 5, 7}, Shape{1}},
                                 {{3, 5, 7}, Shape{0, 2}},
                                 {{13, 4}, Shape{-1}}})
      for (bool keepDims : {false, true}) {
        SCOPED_TRACE(shapeString(c.shape) + (mean ? " mean" : " sum") +
                     (keepDims ? " keep_dims" : ""));
        Values x = rng.uniform(numElementsOf(c.shape));
        std::vector<bool> reduced = flags(c.shape, c.axes);
        Shape keep;
        refReduce(c.shape, x, reduced, Kind::Sum, &keep);
        Shape dyShape = keepDims ? keep : dropReduced(c.shape, reduced);
        Values dy = rng.uniform(numElementsOf(dyShape));
        Values want = numericGrad(
            [&](const Values &xv) {
              Shape k;
              return refReduce(c.shape, xv, reduced,
                               mean ? Kind::Mean : Kind::Sum, &k);
            },
            x, dy, 1e-3);
        KernelRun run("dtf.reduce_grad");
        reduceAttrs(run, c, keepDims).attr("mean", mean);
        run.in(f32(dyShape, dy)).in(f32(c.shape, x));
        ASSERT_EQ(errorOf(run), "");
        EXPECT_TRUE(near(run.out(), c.shape, want, 1e-5, 1e-5));
      }
}

TEST(Reduce, ReduceGradChecksDyShape) {
  KernelRun bad("dtf.reduce_grad");
  bad.attr("axes", Shape{1})
      .in(f32({3, 5}, Values(15)))
      .in(f32({3, 5, 7}, Values(105)));
  EXPECT_EQ(errorOf(bad),
            "dtf.reduce_grad expects dy of shape [3,7] (the reduction of "
            "f32[3,5,7]), got f32[3,5]");
}

TEST(Reduce, MaxReduceGradMatchesFiniteDifferences) {
  Rng rng;
  for (const ReduceCase &c :
       std::vector<ReduceCase>{{{3, 5, 7}, std::nullopt},
                               {{3, 5, 7}, Shape{1}},
                               {{3, 5, 7}, Shape{0, 2}}}) {
    SCOPED_TRACE(shapeString(c.shape));
    Values x = rng.uniform(numElementsOf(c.shape));
    std::vector<bool> reduced = flags(c.shape, c.axes);
    Shape keep;
    Values y = refReduce(c.shape, x, reduced, Kind::Max, &keep);
    Shape yShape = dropReduced(c.shape, reduced);
    Values dy = rng.uniform(numElementsOf(yShape));
    Values want = numericGrad(
        [&](const Values &xv) {
          Shape k;
          return refReduce(c.shape, xv, reduced, Kind::Max, &k);
        },
        x, dy, 1e-6);
    KernelRun run("dtf.max_reduce_grad");
    if (c.axes)
      run.attr("axes", *c.axes);
    run.in(f32(yShape, dy)).in(f32(c.shape, x)).in(f32(yShape, y));
    ASSERT_EQ(errorOf(run), "");
    EXPECT_TRUE(near(run.out(), c.shape, want, 1e-5, 1e-5));
  }
}

TEST(Reduce, MaxReduceGradSplitsTiesEvenly) {
  // Rows [1, 3, 3] and [2, 2, 2]: max 3 twice and 2 three times.
  KernelRun run("dtf.max_reduce_grad");
  run.attr("axes", Shape{1});
  run.in(f32({2}, {6, 9}))
      .in(f32({2, 3}, {1, 3, 3, 2, 2, 2}))
      .in(f32({2}, {3, 2}));
  ASSERT_EQ(errorOf(run), "");
  EXPECT_TRUE(near(run.out(), {2, 3}, {0, 3, 3, 3, 3, 3}, 1e-6, 0));
}

} // namespace
} // namespace dtf::test
