// The f64 kernels against their f32 twins: each op runs on the same inputs
// (values rounded to f32, so both see exactly the same numbers) in f32 and
// in f64, and the results must agree within f32's accuracy. matmul, conv2d
// and pooling take separate paths in f64 (reference loops; oneDNN has no f64
// on CPU), so they get several geometries each; the other kernels are
// templates over the float type and get one call each. Where an exact
// answer is cheap (matmul), the f64 result is also checked to 1e-12.
#include "KernelTestUtil.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

namespace dtf::test {
namespace {

/// One input of a comparison: float inputs follow the dtype under test,
/// others (labels, indices) stay as given.
struct Input {
  Input(Shape shape, Values values) : shape(shape), values(values) {}
  Input(Shape shape, Values values, DType fixed)
      : shape(shape), values(values), fixed(fixed) {}
  Shape shape;
  Values values;
  std::optional<DType> fixed; // none: the float dtype under test
};

/// Runs `op` with `inputs` in f32 and in f64 (attributes set by `attrs`) and
/// checks output `out` of both: the f64 one is f64 and within atol + rtol *
/// |f32| of the f32 one.
void expectSameInF64(const std::string &op, const std::vector<Input> &inputs,
                     const std::function<void(KernelRun &)> &attrs,
                     double atol = 1e-4, double rtol = 1e-4, int out = 0,
                     int numOutputs = 1) {
  SCOPED_TRACE(op);
  Tensor results[2];
  const DType dtypes[2] = {DType::F32, DType::F64};
  for (int k = 0; k < 2; ++k) {
    KernelRun run(op);
    run.pool().outputs(numOutputs);
    for (const Input &in : inputs)
      run.in(tensorOf(in.fixed ? *in.fixed : dtypes[k], in.shape, in.values));
    attrs(run);
    ASSERT_EQ(errorOf(run), "") << dtypeName(dtypes[k]);
    results[k] = run.out(out);
  }
  ASSERT_EQ(results[1].dtype(), DType::F64) << results[1].describe();
  EXPECT_TRUE(
      near(results[1], results[0].shape(), valuesOf(results[0]), atol, rtol));
}

void noAttrs(KernelRun &) {}

TEST(F64, MatmulMatchesF32AndIsExact) {
  Rng rng(7);
  struct Case {
    Shape a, b;
    bool ta, tb;
  };
  const Case cases[] = {
      {{3, 5}, {5, 7}, false, false},     {{5, 3}, {5, 7}, true, false},
      {{3, 5}, {7, 5}, false, true},      {{5, 3}, {7, 5}, true, true},
      {{2, 3, 5}, {5, 4}, false, false},  {{2, 3, 5}, {2, 5, 4}, false, false},
      {{33, 17}, {17, 65}, false, false}, {{1, 1}, {1, 1}, false, false},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.a) + " x " +
                 ::testing::PrintToString(c.b) + (c.ta ? " ta" : "") +
                 (c.tb ? " tb" : ""));
    Values a = rng.uniform(numElementsOf(c.a)),
           b = rng.uniform(numElementsOf(c.b));
    auto attrs = [&](KernelRun &run) {
      run.attr("transpose_a", c.ta).attr("transpose_b", c.tb);
    };
    expectSameInF64("dtf.matmul", {{c.a, a}, {c.b, b}}, attrs, 1e-5, 1e-5);
    if (c.a.size() != 2)
      continue;
    // Exact in double: the products of f32 values are exact, and the sums
    // of at most 17 terms of this size round at about 1e-16.
    const int64_t m = c.ta ? c.a[1] : c.a[0], k = c.ta ? c.a[0] : c.a[1];
    const int64_t n = c.tb ? c.b[0] : c.b[1];
    Values want(m * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t p = 0; p < k; ++p)
          want[i * n + j] += (c.ta ? a[p * m + i] : a[i * k + p]) *
                             (c.tb ? b[j * k + p] : b[p * n + j]);
    KernelRun run("dtf.matmul");
    attrs(run.pool().in(f64(c.a, a)).in(f64(c.b, b)));
    ASSERT_EQ(errorOf(run), "");
    EXPECT_TRUE(near(run.out(), {m, n}, want, 1e-12, 1e-12));
  }
}

struct ConvCase {
  Shape x, f;
  int64_t sh, sw, dh, dw;
  bool same;
};

TEST(F64, Conv2DAndItsGradientsMatchF32) {
  Rng rng(8);
  const ConvCase cases[] = {
      {{2, 5, 5, 2}, {3, 3, 2, 3}, 1, 1, 1, 1, false},
      {{1, 7, 6, 1}, {3, 2, 1, 2}, 2, 1, 1, 1, true},
      {{3, 9, 9, 2}, {3, 3, 2, 1}, 1, 1, 2, 2, false},
      {{1, 8, 7, 3}, {5, 5, 3, 4}, 2, 3, 1, 1, true},
      {{2, 6, 6, 1}, {3, 3, 1, 2}, 2, 2, 1, 1, true},
  };
  for (const ConvCase &c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.x) + " * " +
                 ::testing::PrintToString(c.f) + (c.same ? " same" : " valid"));
    auto geometry = [&](KernelRun &run) {
      run.attr("strides", Shape{c.sh, c.sw})
          .attr("dilations", Shape{c.dh, c.dw})
          .attr("padding", std::string(c.same ? "same" : "valid"));
    };
    Values x = rng.uniform(numElementsOf(c.x)),
           f = rng.uniform(numElementsOf(c.f));
    expectSameInF64("dtf.conv2d", {{c.x, x}, {c.f, f}}, geometry);
    // The output shape, from the f32 kernel.
    KernelRun fwd("dtf.conv2d");
    geometry(fwd.in(test::f32(c.x, x)).in(test::f32(c.f, f)));
    ASSERT_EQ(errorOf(fwd), "");
    const Shape yShape = fwd.out().shape();
    Values dy = rng.uniform(numElementsOf(yShape));
    expectSameInF64("dtf.conv2d_backprop_input", {{yShape, dy}, {c.f, f}},
                    [&](KernelRun &run) {
                      geometry(run);
                      run.attr("input_shape", c.x);
                    });
    expectSameInF64("dtf.conv2d_backprop_filter", {{c.x, x}, {yShape, dy}},
                    [&](KernelRun &run) {
                      geometry(run);
                      run.attr("filter_shape", c.f);
                    });
  }
}

TEST(F64, PoolingAndItsGradientsMatchF32) {
  Rng rng(9);
  struct PoolCase {
    Shape x;
    int64_t kh, kw, sh, sw;
    bool same;
  };
  const PoolCase cases[] = {
      {{1, 7, 9, 3}, 2, 2, 2, 2, true},  {{3, 7, 5, 2}, 3, 2, 2, 2, true},
      {{2, 9, 8, 3}, 3, 3, 2, 1, false}, {{2, 4, 5, 2}, 5, 5, 3, 3, true},
      {{1, 5, 5, 1}, 3, 3, 1, 1, true},
  };
  for (const PoolCase &c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.x) + (c.same ? " same" : " valid"));
    auto window = [&](KernelRun &run) {
      run.attr("window", Shape{c.kh, c.kw})
          .attr("strides", Shape{c.sh, c.sw})
          .attr("padding", std::string(c.same ? "same" : "valid"));
    };
    Values x = rng.uniform(numElementsOf(c.x), -2, 2);
    for (bool isMax : {true, false}) {
      const std::string op = isMax ? "dtf.max_pool" : "dtf.avg_pool";
      expectSameInF64(op, {{c.x, x}}, window, 1e-6, 1e-6);
      KernelRun fwd(op);
      window(fwd.in(test::f32(c.x, x)));
      ASSERT_EQ(errorOf(fwd), "");
      Values dy = rng.uniform(fwd.out().numElements());
      expectSameInF64(op + "_grad", {{c.x, x}, {fwd.out().shape(), dy}}, window,
                      1e-6, 1e-6);
    }
  }
}

TEST(F64, FloatKernelsTakeF64) {
  Rng rng(10);
  const Shape s = {3, 5};
  Values x = rng.uniform(15), y = rng.uniform(15),
         pos = rng.uniform(15, 0.5, 2);
  for (const char *op :
       {"dtf.exp", "dtf.tanh", "dtf.sigmoid", "dtf.relu", "dtf.neg"})
    expectSameInF64(op, {{s, x}}, noAttrs, 1e-6, 1e-6);
  for (const char *op : {"dtf.log", "dtf.sqrt", "dtf.rsqrt"})
    expectSameInF64(op, {{s, pos}}, noAttrs, 1e-6, 1e-6);
  for (const char *op :
       {"dtf.add", "dtf.sub", "dtf.mul", "dtf.maximum", "dtf.minimum"})
    expectSameInF64(op, {{s, x}, {{5}, rng.uniform(5)}}, noAttrs, 1e-6, 1e-6);
  expectSameInF64("dtf.div", {{s, x}, {s, pos}}, noAttrs, 1e-6, 1e-6);
  expectSameInF64("dtf.pow", {{s, pos}, {s, x}}, noAttrs, 1e-6, 1e-6);
  for (const char *op : {"dtf.relu_grad", "dtf.sigmoid_grad", "dtf.tanh_grad"})
    expectSameInF64(op, {{s, x}, {s, y}}, noAttrs, 1e-6, 1e-6);
  // Reductions and their gradients.
  auto axis1 = [](KernelRun &run) { run.attr("axes", Shape{1}); };
  for (const char *op : {"dtf.sum", "dtf.mean", "dtf.max"})
    expectSameInF64(op, {{s, x}}, axis1, 1e-6, 1e-6);
  expectSameInF64(
      "dtf.reduce_grad", {{{3}, rng.uniform(3)}, {s, x}},
      [](KernelRun &run) { run.attr("axes", Shape{1}).attr("mean", true); });
  Values maxes(3);
  for (int r = 0; r < 3; ++r)
    maxes[r] = *std::max_element(x.begin() + r * 5, x.begin() + r * 5 + 5);
  expectSameInF64("dtf.max_reduce_grad",
                  {{{3}, rng.uniform(3)}, {s, x}, {{3}, maxes}}, axis1);
  expectSameInF64("dtf.sum_to_shape", {{s, x}, {{5}, Values(5)}}, noAttrs);
  // Softmax and the losses.
  for (const char *op : {"dtf.softmax", "dtf.log_softmax"})
    expectSameInF64(op, {{s, x}}, noAttrs, 1e-6, 1e-6);
  expectSameInF64("dtf.softmax_grad", {{s, y}, {s, x}}, noAttrs);
  expectSameInF64("dtf.log_softmax_grad", {{s, y}, {s, x}}, noAttrs);
  const Input labels{{3}, {0, 4, 2}, DType::I32};
  expectSameInF64("dtf.sparse_softmax_cross_entropy", {{s, x}, labels}, noAttrs,
                  1e-6, 1e-6);
  expectSameInF64("dtf.sparse_softmax_cross_entropy_grad",
                  {{{3}, rng.uniform(3)}, {s, x}, labels}, noAttrs);
  expectSameInF64("dtf.softmax_cross_entropy", {{s, x}, {s, pos}}, noAttrs);
  expectSameInF64("dtf.softmax_cross_entropy_grad",
                  {{{3}, rng.uniform(3)}, {s, x}, {s, pos}}, noAttrs);
  // Rows, dropout and the optimizer updates.
  expectSameInF64("dtf.gather", {{s, x}, {{4}, {2, 0, 2, 1}, DType::I64}},
                  noAttrs, 0, 0);
  expectSameInF64("dtf.gather_grad",
                  {{{4, 5}, rng.uniform(20)}, {{4}, {2, 0, 2, 1}, DType::I64}},
                  [](KernelRun &run) {
                    run.attr("params_shape", Shape{3, 5});
                  });
  expectSameInF64("dtf.dropout", {{s, x}}, [](KernelRun &run) {
    run.attr("rate", 0.5).attr("seed", int64_t(3)).step(4, 5);
  });
  expectSameInF64("dtf.apply_sgd", {{s, x}, {s, y}},
                  [](KernelRun &run) { run.attr("learning_rate", 0.1); });
  expectSameInF64("dtf.apply_adam", {{s, x}, {s, pos}, {s, pos}, {s, y}},
                  [](KernelRun &run) { run.attr("learning_rate", 0.01); });
  expectSameInF64("dtf.apply_momentum", {{s, x}, {s, y}, {s, y}},
                  [](KernelRun &run) {
                    run.attr("learning_rate", 0.1).attr("momentum", 0.9);
                  });
  expectSameInF64("dtf.apply_adagrad", {{s, x}, {s, pos}, {s, y}},
                  [](KernelRun &run) { run.attr("learning_rate", 0.1); });
  expectSameInF64("dtf.apply_rmsprop", {{s, x}, {s, pos}, {s, y}, {s, y}},
                  [](KernelRun &run) { run.attr("learning_rate", 0.1); });
  expectSameInF64(
      "dtf.global_norm_clip", {{s, x}, {{5}, rng.uniform(5)}},
      [](KernelRun &run) { run.attr("clip_norm", 0.5); }, 1e-6, 1e-6, 1, 3);
  expectSameInF64("dtf.moving_average_update", {{s, x}, {s, y}},
                  [](KernelRun &run) { run.attr("decay", 0.9); });
}

TEST(F64, LearningRateInputMayBeF64) {
  KernelRun run("dtf.apply_sgd");
  run.in(f64({2}, {1, 2})).in(f64({2}, {0.5, -1})).in(f64({}, {0.25}));
  ASSERT_EQ(errorOf(run), "");
  EXPECT_TRUE(near(run.input(0), {2}, {0.875, 2.25}, 0, 0));
}

TEST(F64, CastConvertsBothWays) {
  KernelRun wide("dtf.cast");
  wide.attr("out_dtype", std::string("f64"))
      .in(test::f32({3}, {0.1, -2, 3e38}));
  ASSERT_EQ(errorOf(wide), "");
  EXPECT_EQ(wide.out().dtype(), DType::F64);
  EXPECT_TRUE(equal(wide.out(), {3}, {double(0.1f), -2, double(3e38f)}));
  KernelRun narrow("dtf.cast");
  narrow.attr("out_dtype", std::string("f32")).in(f64({2}, {0.1, 1e300}));
  ASSERT_EQ(errorOf(narrow), "");
  EXPECT_TRUE(equal(narrow.out(), {2},
                    {double(0.1f), std::numeric_limits<double>::infinity()}));
  // f64 to integers saturates, and NaN becomes 0, as from f32.
  KernelRun toInt("dtf.cast");
  toInt.attr("out_dtype", std::string("i32"))
      .in(f64({4}, {1e10, -1e10, std::nan(""), -7.9}));
  ASSERT_EQ(errorOf(toInt), "");
  EXPECT_TRUE(equal(toInt.out(), {4}, {2147483647, -2147483648.0, 0, -7}));
}

TEST(F64, MixedDTypesAndF16StayErrors) {
  KernelRun mixed("dtf.add");
  mixed.in(test::f32({2}, {1, 2})).in(f64({2}, {1, 2}));
  EXPECT_EQ(errorOf(mixed), "dtf.add expects operands of the same dtype, got "
                            "f32[2] and f64[2]");
  KernelRun half("dtf.exp");
  half.in(Tensor::zeros(DType::F16, {2}));
  EXPECT_EQ(errorOf(half),
            "dtf.exp: f16 tensors are not supported on CPU yet (cast to f32)");
  KernelRun conv("dtf.conv2d");
  conv.in(Tensor::zeros(DType::BF16, {1, 2, 2, 1}))
      .in(Tensor::zeros(DType::BF16, {1, 1, 1, 1}));
  EXPECT_EQ(errorOf(conv), "dtf.conv2d: bf16 tensors are not supported on "
                           "CPU yet (cast to f32)");
  KernelRun ints("dtf.exp");
  ints.in(tensorOf(DType::I32, {1}, {1}));
  EXPECT_EQ(errorOf(ints), "dtf.exp expects an operand of a floating-point "
                           "dtype, got i32[1]");
}

} // namespace
} // namespace dtf::test
