// Elementwise kernels against float64 references: broadcasting arithmetic,
// compare, select, unary math, cast, and the activation gradients.
#include "KernelTestUtil.h"

#include <limits>

namespace dtf::test {
namespace {

using BinaryFn = std::function<double(double, double)>;

// out[i] = f(a[bcast(i)], b[bcast(i)]), the reference of every binary op.
Values refBinary(const Shape &as, const Values &a, const Shape &bs,
                 const Values &b, const BinaryFn &f, Shape *outShape) {
  *outShape = broadcastShapes(as, bs);
  Values out(numElementsOf(*outShape));
  for (int64_t i = 0; i < int64_t(out.size()); ++i) {
    Shape idx = unravel(i, *outShape);
    out[i] = f(a[broadcastSource(idx, as)], b[broadcastSource(idx, bs)]);
  }
  return out;
}

const std::vector<std::pair<Shape, Shape>> kBroadcastPairs = {
    {{3, 5, 7}, {3, 5, 7}},
    {{3, 5, 7}, {7}},
    {{3, 1, 7}, {1, 5, 1}},
    {{}, {3, 5}},
    {{13, 1}, {1}},
    {{5, 7}, {3, 5, 7}},
    {{2, 3, 4, 5}, {3, 1, 5}},
    {{1, 1}, {1, 13}},
    {{3, 5, 7}, {3, 5, 1}}};

struct BinaryCase {
  const char *op;
  BinaryFn f;
};

double truncDiv(double a, double b) { return std::trunc(a / b); }

TEST(Elementwise, ArithmeticBroadcastsLikeNumPy) {
  const std::vector<BinaryCase> cases = {
      {"dtf.add", [](double a, double b) { return a + b; }},
      {"dtf.sub", [](double a, double b) { return a - b; }},
      {"dtf.mul", [](double a, double b) { return a * b; }},
      {"dtf.div", [](double a, double b) { return a / b; }},
      {"dtf.maximum", [](double a, double b) { return std::max(a, b); }},
      {"dtf.minimum", [](double a, double b) { return std::min(a, b); }}};
  Rng rng;
  for (DType dtype : {DType::F32, DType::I32, DType::I64}) {
    for (const BinaryCase &c : cases) {
      for (const auto &[as, bs] : kBroadcastPairs) {
        SCOPED_TRACE(std::string(c.op) + " " + dtypeName(dtype) + " " +
                     shapeString(as) + " " + shapeString(bs));
        const bool isFloat = dtype == DType::F32;
        const bool div = std::string(c.op) == "dtf.div";
        Values a = isFloat ? rng.uniform(numElementsOf(as), -3, 3)
                           : rng.integers(numElementsOf(as), -50, 50);
        Values b = isFloat ? rng.uniform(numElementsOf(bs), 0.5, 3)
                           : rng.integers(numElementsOf(bs), 1, 9);
        if (div || !isFloat) // negative divisors too, never zero
          for (double &v : b)
            v = rng.integers(1, 0, 1)[0] ? v : -v;
        Shape outShape;
        BinaryFn f = div && !isFloat ? BinaryFn(truncDiv) : c.f;
        Values want = refBinary(as, a, bs, b, f, &outShape);
        KernelRun run(c.op);
        run.in(tensorOf(dtype, as, a)).in(tensorOf(dtype, bs, b));
        ASSERT_EQ(errorOf(run), "");
        EXPECT_EQ(run.out().dtype(), dtype);
        EXPECT_TRUE(isFloat ? near(run.out(), outShape, want)
                            : equal(run.out(), outShape, want));
      }
    }
  }
}

TEST(Elementwise, PowOnFloats) {
  Rng rng;
  for (const auto &[as, bs] : kBroadcastPairs) {
    Values a = rng.uniform(numElementsOf(as), 0.1, 3),
           b = rng.uniform(numElementsOf(bs), -2, 2);
    Shape outShape;
    Values want = refBinary(
        as, a, bs, b, [](double x, double y) { return std::pow(x, y); },
        &outShape);
    KernelRun run("dtf.pow");
    run.in(f32(as, a)).in(f32(bs, b));
    ASSERT_EQ(errorOf(run), "");
    EXPECT_TRUE(near(run.out(), outShape, want, 1e-5, 1e-5));
  }
  KernelRun ints("dtf.pow");
  ints.in(tensorOf(DType::I32, {2}, {2, 3}))
      .in(tensorOf(DType::I32, {2}, {2, 3}));
  EXPECT_EQ(errorOf(ints),
            "dtf.pow expects operands of a floating-point dtype, got i32[2]");
}

TEST(Elementwise, LargeInputsSplitOverThreadsGiveTheSameResult) {
  Rng rng;
  for (const auto &[as, bs] :
       std::vector<std::pair<Shape, Shape>>{{{300, 257}, {257}},
                                            {{300, 257}, {300, 257}},
                                            {{300, 1, 257}, {7, 1}}}) {
    Values a = rng.uniform(numElementsOf(as)),
           b = rng.uniform(numElementsOf(bs));
    Shape outShape;
    Values want = refBinary(
        as, a, bs, b, [](double x, double y) { return x * y + 0.0; },
        &outShape);
    KernelRun run("dtf.mul");
    run.pool().in(f32(as, a)).in(f32(bs, b));
    ASSERT_EQ(errorOf(run), "");
    EXPECT_TRUE(near(run.out(), outShape, want));
  }
}

TEST(Elementwise, IntegerDivisionTruncatesWrapsAndRejectsZero) {
  KernelRun run("dtf.div");
  run.in(tensorOf(DType::I32, {5}, {7, -7, 7, -7, -2147483648.0}))
      .in(tensorOf(DType::I32, {5}, {2, 2, -2, -2, -1}));
  ASSERT_EQ(errorOf(run), "");
  EXPECT_TRUE(equal(run.out(), {5}, {3, -3, -3, 3, -2147483648.0}));

  KernelRun zero("dtf.div");
  zero.in(tensorOf(DType::I64, {3}, {1, 2, 3}))
      .in(tensorOf(DType::I64, {3}, {1, 0, 3}));
  EXPECT_EQ(
      errorOf(zero),
      "dtf.div: integer division by zero (element 1 of the divisor i64[3])");
}

TEST(Elementwise, IntegerArithmeticWrapsAround) {
  KernelRun add("dtf.add");
  add.in(tensorOf(DType::I32, {1}, {2147483647}))
      .in(tensorOf(DType::I32, {1}, {1}));
  ASSERT_EQ(errorOf(add), "");
  EXPECT_TRUE(equal(add.out(), {1}, {-2147483648.0}));
  KernelRun neg("dtf.neg");
  neg.in(tensorOf(DType::I32, {2}, {-2147483648.0, 5}));
  ASSERT_EQ(errorOf(neg), "");
  EXPECT_TRUE(equal(neg.out(), {2}, {-2147483648.0, -5}));
}

TEST(Elementwise, MaximumAndMinimumPropagateNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const char *op : {"dtf.maximum", "dtf.minimum"}) {
    KernelRun run(op);
    run.in(f32({3}, {nan, 1, 2})).in(f32({3}, {1, nan, 3}));
    ASSERT_EQ(errorOf(run), "");
    Values v = valuesOf(run.out());
    EXPECT_TRUE(std::isnan(v[0])) << op;
    EXPECT_TRUE(std::isnan(v[1])) << op;
    EXPECT_EQ(v[2], std::string(op) == "dtf.maximum" ? 3 : 2);
  }
}

TEST(Elementwise, CompareEveryPredicateAndDtype) {
  const std::vector<std::pair<const char *, BinaryFn>> preds = {
      {"eq", [](double a, double b) { return double(a == b); }},
      {"ne", [](double a, double b) { return double(a != b); }},
      {"lt", [](double a, double b) { return double(a < b); }},
      {"le", [](double a, double b) { return double(a <= b); }},
      {"gt", [](double a, double b) { return double(a > b); }},
      {"ge", [](double a, double b) { return double(a >= b); }}};
  Rng rng;
  const Shape as = {3, 1, 5}, bs = {4, 1};
  for (DType dtype : {DType::F32, DType::I32, DType::I64, DType::Bool}) {
    // Few distinct values, so every predicate sees equal pairs too.
    int64_t hi = dtype == DType::Bool ? 1 : 3;
    Values a = rng.integers(numElementsOf(as), 0, hi),
           b = rng.integers(numElementsOf(bs), 0, hi);
    for (const auto &[pred, f] : preds) {
      SCOPED_TRACE(std::string(pred) + " " + dtypeName(dtype));
      Shape outShape;
      Values want = refBinary(as, a, bs, b, f, &outShape);
      KernelRun run("dtf.compare");
      run.attr("predicate", std::string(pred))
          .in(tensorOf(dtype, as, a))
          .in(tensorOf(dtype, bs, b));
      ASSERT_EQ(errorOf(run), "");
      EXPECT_EQ(run.out().dtype(), DType::Bool);
      EXPECT_TRUE(equal(run.out(), outShape, want));
    }
  }
  KernelRun bad("dtf.compare");
  bad.attr("predicate", std::string("lte")).in(f32({1}, {1})).in(f32({1}, {1}));
  EXPECT_EQ(errorOf(bad), "dtf.compare: predicate must be one of eq, ne, lt, "
                          "le, gt, ge; got 'lte'");
}

TEST(Elementwise, SelectBroadcastsAllThreeOperands) {
  Rng rng;
  const Shape cs = {3, 1, 5}, ts = {4, 1}, fs = {};
  Values c = rng.integers(15, 0, 1), t = rng.integers(4, -100, 100), f = {7};
  Shape outShape = broadcastShapes(broadcastShapes(cs, ts), fs);
  Values want(numElementsOf(outShape));
  for (int64_t i = 0; i < int64_t(want.size()); ++i) {
    Shape idx = unravel(i, outShape);
    want[i] = c[broadcastSource(idx, cs)] ? t[broadcastSource(idx, ts)] : f[0];
  }
  for (DType dtype : {DType::F32, DType::I64}) {
    KernelRun run("dtf.select");
    run.in(tensorOf(DType::Bool, cs, c))
        .in(tensorOf(dtype, ts, t))
        .in(tensorOf(dtype, fs, f));
    ASSERT_EQ(errorOf(run), "");
    EXPECT_TRUE(equal(run.out(), outShape, want));
  }
  // Same shapes, many elements, on the pool.
  const Shape big = {200, 333};
  Values bc = rng.integers(numElementsOf(big), 0, 1),
         bt = rng.uniform(numElementsOf(big)),
         bf = rng.uniform(numElementsOf(big));
  Values bwant(bc.size());
  for (size_t i = 0; i < bc.size(); ++i)
    bwant[i] = bc[i] ? bt[i] : bf[i];
  KernelRun run("dtf.select");
  run.pool()
      .in(tensorOf(DType::Bool, big, bc))
      .in(f32(big, bt))
      .in(f32(big, bf));
  ASSERT_EQ(errorOf(run), "");
  EXPECT_TRUE(equal(run.out(), big, bwant));

  KernelRun notBool("dtf.select");
  notBool.in(f32({2}, {1, 0})).in(f32({2}, {1, 2})).in(f32({2}, {3, 4}));
  EXPECT_EQ(errorOf(notBool),
            "dtf.select expects a bool condition, got f32[2]");
}

TEST(Elementwise, UnaryMathMatchesLibm) {
  const std::vector<
      std::tuple<const char *, double, double, std::function<double(double)>>>
      cases = {
          {"dtf.neg", -3, 3, [](double x) { return -x; }},
          {"dtf.relu", -3, 3, [](double x) { return std::max(x, 0.0); }},
          {"dtf.exp", -10, 10, [](double x) { return std::exp(x); }},
          {"dtf.log", 1e-3, 100, [](double x) { return std::log(x); }},
          {"dtf.sqrt", 0, 100, [](double x) { return std::sqrt(x); }},
          {"dtf.rsqrt", 1e-3, 100, [](double x) { return 1 / std::sqrt(x); }},
          {"dtf.sigmoid", -20, 20,
           [](double x) { return 1 / (1 + std::exp(-x)); }},
          {"dtf.tanh", -5, 5, [](double x) { return std::tanh(x); }}};
  Rng rng;
  for (const auto &[op, lo, hi, f] : cases) {
    for (const Shape &shape : {Shape{3, 5, 7}, Shape{}, Shape{100, 97}}) {
      SCOPED_TRACE(std::string(op) + " " + shapeString(shape));
      Values x = rng.uniform(numElementsOf(shape), lo, hi), want(x.size());
      for (size_t i = 0; i < x.size(); ++i)
        want[i] = f(x[i]);
      KernelRun run(op);
      run.pool().in(f32(shape, x));
      ASSERT_EQ(errorOf(run), "");
      EXPECT_TRUE(near(run.out(), shape, want, 1e-6, 2e-6));
    }
  }
  // Saturation ends of sigmoid stay finite.
  KernelRun sig("dtf.sigmoid");
  sig.in(f32({2}, {-200, 200}));
  ASSERT_EQ(errorOf(sig), "");
  EXPECT_TRUE(equal(sig.out(), {2}, {0, 1}));
}

TEST(Elementwise, NegAndReluOnIntegers) {
  for (DType dtype : {DType::I32, DType::I64}) {
    KernelRun neg("dtf.neg"), relu("dtf.relu");
    neg.in(tensorOf(dtype, {4}, {-3, 0, 2, 9}));
    relu.in(tensorOf(dtype, {4}, {-3, 0, 2, 9}));
    ASSERT_EQ(errorOf(neg), "");
    ASSERT_EQ(errorOf(relu), "");
    EXPECT_TRUE(equal(neg.out(), {4}, {3, 0, -2, -9}));
    EXPECT_TRUE(equal(relu.out(), {4}, {0, 0, 2, 9}));
  }
}

TEST(Elementwise, FloatMathRejectsIntegers) {
  KernelRun run("dtf.exp");
  run.in(tensorOf(DType::I32, {2}, {1, 2}));
  EXPECT_EQ(errorOf(run),
            "dtf.exp expects an operand of a floating-point dtype, got i32[2]");
}

TEST(Elementwise, CastBetweenEveryDtype) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Values floats = {-2.7, -0.5, 0, 0.5, 3.9, 1e10, -1e10, nan};
  struct Case {
    DType from, to;
    Values in, want;
  };
  const double i32min = -2147483648.0, i32max = 2147483647.0;
  const std::vector<Case> cases = {
      {DType::F32, DType::I32, floats, {-2, 0, 0, 0, 3, i32max, i32min, 0}},
      {DType::F32, DType::I64, floats, {-2, 0, 0, 0, 3, 1e10, -1e10, 0}},
      {DType::F32, DType::Bool, floats, {1, 1, 0, 1, 1, 1, 1, 1}},
      {DType::F32, DType::F32, {1.5, -2}, {1.5, -2}},
      {DType::I32, DType::F32, {-7, 0, 16777217}, {-7, 0, 16777216}},
      {DType::I32, DType::I64, {-7, 0, i32max}, {-7, 0, i32max}},
      {DType::I32, DType::Bool, {-7, 0, 3}, {1, 0, 1}},
      {DType::I64, DType::I32, {-7, 4294967297.0, 5}, {-7, 1, 5}},
      {DType::I64, DType::F32, {-7, 1099511627776.0}, {-7, 1099511627776.0}},
      {DType::Bool, DType::F32, {1, 0}, {1, 0}},
      {DType::Bool, DType::I32, {1, 0}, {1, 0}},
      {DType::Bool, DType::I64, {0, 1}, {0, 1}}};
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string(dtypeName(c.from)) + " to " + dtypeName(c.to));
    Shape shape = {int64_t(c.in.size())};
    KernelRun run("dtf.cast");
    run.attr("out_dtype", std::string(dtypeName(c.to)))
        .in(tensorOf(c.from, shape, c.in));
    ASSERT_EQ(errorOf(run), "");
    EXPECT_EQ(run.out().dtype(), c.to);
    EXPECT_TRUE(equal(run.out(), shape, c.want));
  }
}

TEST(Elementwise, CastTakesItsDtypeFromAPlacedOutput) {
  KernelRun run("dtf.cast");
  run.in(f32({2}, {1.9, -1.9}));
  run.ctx().setOutput(0, Tensor::allocate(DType::I64, {2}));
  ASSERT_EQ(errorOf(run), "");
  EXPECT_EQ(run.out().dtype(), DType::I64);
  EXPECT_TRUE(equal(run.out(), {2}, {1, -1}));

  KernelRun none("dtf.cast");
  none.in(f32({1}, {1}));
  EXPECT_EQ(errorOf(none),
            "dtf.cast needs the out_dtype attribute (the result's dtype)");
  KernelRun bad("dtf.cast");
  bad.in(f32({1}, {1})).attr("out_dtype", std::string("f128"));
  EXPECT_EQ(errorOf(bad), "dtf.cast: out_dtype 'f128' is not a dtype (f32, "
                          "f64, f16, bf16, i32, i64 or bool)");
}

// d/dx sum(w * f(x)) by finite differences against the *_grad kernel.
void checkActivationGrad(const char *gradOp,
                         const std::function<double(double)> &f,
                         bool gradTakesOutput, Values x) {
  Rng rng(7);
  const Shape shape = {3, 5, 7};
  Values w = rng.uniform(numElementsOf(shape));
  auto forward = [&](const Values &in) {
    Values out(in.size());
    for (size_t i = 0; i < in.size(); ++i)
      out[i] = f(in[i]);
    return out;
  };
  Values want = numericGrad(forward, x, w, 1e-6);
  KernelRun run(gradOp);
  run.in(f32(shape, w)).in(f32(shape, gradTakesOutput ? forward(x) : x));
  ASSERT_EQ(errorOf(run), "");
  EXPECT_TRUE(near(run.out(), shape, want, 1e-5, 1e-4)) << gradOp;
}

TEST(Elementwise, ActivationGradientsMatchFiniteDifferences) {
  Rng rng;
  Values x = rng.uniform(105, -3, 3);
  for (double &v : x) // keep away from relu's kink
    if (std::abs(v) < 1e-2)
      v = 0.5;
  checkActivationGrad(
      "dtf.relu_grad", [](double v) { return std::max(v, 0.0); }, false, x);
  checkActivationGrad(
      "dtf.sigmoid_grad", [](double v) { return 1 / (1 + std::exp(-v)); }, true,
      x);
  checkActivationGrad(
      "dtf.tanh_grad", [](double v) { return std::tanh(v); }, true, x);
}

TEST(Elementwise, ReluGradIsZeroAtZero) {
  KernelRun run("dtf.relu_grad");
  run.in(f32({3}, {5, 5, 5})).in(f32({3}, {-1, 0, 1}));
  ASSERT_EQ(errorOf(run), "");
  EXPECT_TRUE(equal(run.out(), {3}, {0, 0, 5}));
}

TEST(Elementwise, ShapeAndDtypeMismatchesAreErrors) {
  KernelRun add("dtf.add");
  add.in(f32({3, 5}, Values(15))).in(f32({4, 5}, Values(20)));
  EXPECT_EQ(errorOf(add),
            "dtf.add expects shapes that broadcast, got f32[3,5] and f32[4,5]");
  KernelRun select("dtf.select");
  select.in(tensorOf(DType::Bool, {2}, {1, 0}))
      .in(f32({3}, Values(3)))
      .in(f32({2}, Values(2)));
  EXPECT_EQ(errorOf(select), "dtf.select expects shapes that broadcast, got "
                             "bool[2], f32[3] and f32[2]");
  KernelRun mixed("dtf.mul");
  mixed.in(f32({2}, {1, 2})).in(tensorOf(DType::I32, {2}, {1, 2}));
  EXPECT_EQ(
      errorOf(mixed),
      "dtf.mul expects operands of the same dtype, got f32[2] and i32[2]");
  KernelRun grad("dtf.tanh_grad");
  grad.in(f32({2}, {1, 2})).in(f32({3}, {1, 2, 3}));
  EXPECT_EQ(errorOf(grad), "dtf.tanh_grad expects dy and y of the same shape, "
                           "got f32[2] and f32[3]");
}

} // namespace
} // namespace dtf::test
