// conv2d and its gradients against a float64 reference and finite differences.
#include "KernelTestUtil.h"

#include "runtime/kernels/cpu/Winograd.h"

namespace dtf::test {
namespace {

struct ConvCase {
  Shape x, f; // NHWC, HWIO
  int64_t sh, sw, dh, dw;
  bool same;
};

std::string describe(const ConvCase &c) {
  return ::testing::PrintToString(c.x) + " * " + ::testing::PrintToString(c.f) +
         " strides " + std::to_string(c.sh) + "," + std::to_string(c.sw) +
         " dilations " + std::to_string(c.dh) + "," + std::to_string(c.dw) +
         (c.same ? " same" : " valid");
}

// TensorFlow's output size and leading padding, written out independently.
void outSize(int64_t in, int64_t k, int64_t s, int64_t d, bool same,
             int64_t *out, int64_t *padBefore) {
  int64_t eff = (k - 1) * d + 1;
  if (same) {
    *out = (in + s - 1) / s;
    *padBefore = std::max<int64_t>((*out - 1) * s + eff - in, 0) / 2;
  } else {
    *out = (in - eff) / s + 1;
    *padBefore = 0;
  }
}

Values refConv(const ConvCase &c, const Values &x, const Values &f,
               Shape *outShape) {
  const int64_t n = c.x[0], h = c.x[1], w = c.x[2], ch = c.x[3];
  const int64_t kh = c.f[0], kw = c.f[1], oc = c.f[3];
  int64_t oh, ow, pt, pl;
  outSize(h, kh, c.sh, c.dh, c.same, &oh, &pt);
  outSize(w, kw, c.sw, c.dw, c.same, &ow, &pl);
  *outShape = {n, oh, ow, oc};
  Values y(n * oh * ow * oc, 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t o = 0; o < oc; ++o) {
          double s = 0;
          for (int64_t ky = 0; ky < kh; ++ky)
            for (int64_t kx = 0; kx < kw; ++kx) {
              int64_t iy = i * c.sh - pt + ky * c.dh,
                      ix = j * c.sw - pl + kx * c.dw;
              if (iy < 0 || iy >= h || ix < 0 || ix >= w)
                continue;
              for (int64_t q = 0; q < ch; ++q)
                s += x[((b * h + iy) * w + ix) * ch + q] *
                     f[((ky * kw + kx) * ch + q) * oc + o];
            }
          y[((b * oh + i) * ow + j) * oc + o] = s;
        }
  return y;
}

KernelRun &convAttrs(KernelRun &run, const ConvCase &c) {
  return run.attr("strides", std::vector<int64_t>{c.sh, c.sw})
      .attr("dilations", std::vector<int64_t>{c.dh, c.dw})
      .attr("padding", std::string(c.same ? "same" : "valid"));
}

const std::vector<ConvCase> kCases = {
    {{1, 7, 9, 3}, {3, 3, 3, 4}, 1, 1, 1, 1, true},
    {{13, 8, 7, 2}, {3, 2, 2, 5}, 2, 2, 1, 1, true},
    {{2, 9, 9, 3}, {3, 3, 3, 2}, 2, 1, 1, 1, false},
    {{2, 11, 10, 2}, {3, 3, 2, 3}, 1, 1, 2, 2, true},
    {{1, 10, 11, 1}, {5, 5, 1, 4}, 2, 2, 1, 1, false},
    {{3, 6, 6, 4}, {1, 1, 4, 3}, 1, 1, 1, 1, false},
    {{2, 9, 8, 2}, {2, 3, 2, 2}, 2, 2, 2, 2, false},
    {{1, 5, 4, 2}, {4, 4, 2, 3}, 3, 2, 1, 1, true}, // window larger than half
                                                    // the input
};

TEST(Conv2D, MatchesTheReferenceForStridesDilationsAndPadding) {
  Rng rng;
  for (const ConvCase &c : kCases) {
    SCOPED_TRACE(describe(c));
    Values x = rng.uniform(numElementsOf(c.x)),
           f = rng.uniform(numElementsOf(c.f));
    Shape outShape;
    Values want = refConv(c, x, f, &outShape);
    KernelRun run("dtf.conv2d");
    convAttrs(run, c).in(test::f32(c.x, x)).in(test::f32(c.f, f));
    ASSERT_EQ(errorOf(run), "");
    EXPECT_TRUE(near(run.out(), outShape, want, 1e-5, 1e-5));
  }
}

TEST(Conv2D, BackpropInputMatchesFiniteDifferences) {
  Rng rng;
  for (const ConvCase &c : kCases) {
    SCOPED_TRACE(describe(c));
    Values x = rng.uniform(numElementsOf(c.x)),
           f = rng.uniform(numElementsOf(c.f));
    Shape outShape;
    refConv(c, x, f, &outShape);
    Values dy = rng.uniform(numElementsOf(outShape));
    Values want = numericGrad(
        [&](const Values &xv) {
          Shape s;
          return refConv(c, xv, f, &s);
        },
        x, dy, 1e-3);
    KernelRun run("dtf.conv2d_backprop_input");
    Shape inputShape = c.x;
    inputShape[0] = -1; // the batch comes from dy
    convAttrs(run, c).attr("input_shape", inputShape);
    run.in(test::f32(outShape, dy)).in(test::f32(c.f, f));
    ASSERT_EQ(errorOf(run), "");
    EXPECT_TRUE(near(run.out(), c.x, want, 1e-4, 1e-4));
  }
}

TEST(Conv2D, BackpropFilterMatchesFiniteDifferences) {
  Rng rng;
  for (const ConvCase &c : kCases) {
    SCOPED_TRACE(describe(c));
    Values x = rng.uniform(numElementsOf(c.x)),
           f = rng.uniform(numElementsOf(c.f));
    Shape outShape;
    refConv(c, x, f, &outShape);
    Values dy = rng.uniform(numElementsOf(outShape));
    Values want = numericGrad(
        [&](const Values &fv) {
          Shape s;
          return refConv(c, x, fv, &s);
        },
        f, dy, 1e-3);
    KernelRun run("dtf.conv2d_backprop_filter");
    convAttrs(run, c).attr("filter_shape", c.f);
    run.in(test::f32(c.x, x)).in(test::f32(outShape, dy));
    ASSERT_EQ(errorOf(run), "");
    EXPECT_TRUE(near(run.out(), c.f, want, 2e-4, 1e-4));
  }
}

TEST(Conv2D, RepeatedCallsReuseTheCachedPrimitiveAndOutput) {
  Rng rng;
  const ConvCase &c = kCases[1];
  Values x = rng.uniform(numElementsOf(c.x)),
         f = rng.uniform(numElementsOf(c.f));
  Shape outShape;
  Values want = refConv(c, x, f, &outShape);
  KernelRun run("dtf.conv2d");
  convAttrs(run, c).in(test::f32(c.x, x)).in(test::f32(c.f, f));
  ASSERT_EQ(errorOf(run), "");
  void *first = run.out().rawData();
  ASSERT_EQ(errorOf(run), "");
  EXPECT_EQ(run.out().rawData(), first) << "the output buffer should be reused";
  EXPECT_TRUE(near(run.out(), outShape, want, 1e-5, 1e-5));
}

// 5x5 convolutions of stride 1 with channels in multiples of 16, which go to
// Winograd's F(2x2, 5x5) on AVX-512 (runtime/kernels/cpu/Winograd.h): the
// seed CNN's second layer, odd sizes (tiles past the edge), valid padding,
// 48 and 80 output channels (partial blocks of 64), padding past the window;
// the last is past Winograd's channel limit and checks oneDNN's path.
const std::vector<ConvCase> kWinogradCases = {
    {{2, 14, 14, 32}, {5, 5, 32, 64}, 1, 1, 1, 1, true},
    {{1, 7, 9, 16}, {5, 5, 16, 48}, 1, 1, 1, 1, true},
    {{2, 9, 8, 16}, {5, 5, 16, 16}, 1, 1, 1, 1, false},
    {{1, 6, 11, 32}, {5, 5, 32, 80}, 1, 1, 1, 1, true},
    {{3, 3, 2, 16}, {5, 5, 16, 32}, 1, 1, 1, 1, true},
    {{1, 3, 4, 272}, {5, 5, 272, 256}, 1, 1, 1, 1, true}, // past 256 x 256
};

// conv2d_bias (dtf-fuse-library's conv + bias [+ relu] as one oneDNN call
// with post-ops, or Winograd's kernels adding the bias to the finished sum)
// gives, bit for bit, conv2d followed by the bias add and relu in float32;
// f64 runs the reference loops; a bias of the wrong size is an error naming
// the expected shape.
TEST(Conv2D, BiasAndReluPostOpsEqualTheSeparateOpsBitForBit) {
  Rng rng;
  std::vector<ConvCase> cases = kCases;
  cases.insert(cases.end(), kWinogradCases.begin(), kWinogradCases.end());
  for (const ConvCase &c : cases)
    for (bool relu : {false, true}) {
      SCOPED_TRACE(describe(c) + (relu ? " relu" : ""));
      Values x = rng.uniform(numElementsOf(c.x)),
             f = rng.uniform(numElementsOf(c.f)), b = rng.uniform(c.f[3]);
      KernelRun conv("dtf.conv2d");
      convAttrs(conv, c).in(test::f32(c.x, x)).in(test::f32(c.f, f));
      ASSERT_EQ(errorOf(conv), "");
      KernelRun fused("dtf.conv2d_bias");
      convAttrs(fused, c)
          .attr("relu", relu)
          .in(test::f32(c.x, x))
          .in(test::f32(c.f, f))
          .in(test::f32({c.f[3]}, b));
      ASSERT_EQ(errorOf(fused), "");
      const Tensor &y = conv.out(), &got = fused.out();
      ASSERT_EQ(got.shape(), y.shape());
      const int64_t oc = c.f[3];
      int64_t negatives = 0;
      for (int64_t i = 0; i < y.numElements(); ++i) {
        float want = y.data<float>()[i] + float(b[size_t(i % oc)]);
        negatives += want < 0;
        if (relu && want < 0)
          want = 0;
        ASSERT_EQ(got.data<float>()[i], want) << "element " << i;
      }
      EXPECT_GT(negatives, 0) << "no negative sum: relu went untested";

      Shape outShape;
      Values ref = refConv(c, x, f, &outShape);
      for (size_t i = 0; i < ref.size(); ++i) {
        ref[i] += b[i % size_t(oc)];
        if (relu && ref[i] < 0)
          ref[i] = 0;
      }
      KernelRun f64Run("dtf.conv2d_bias");
      convAttrs(f64Run, c)
          .attr("relu", relu)
          .in(test::f64(c.x, x))
          .in(test::f64(c.f, f))
          .in(test::f64({c.f[3]}, b));
      ASSERT_EQ(errorOf(f64Run), "");
      EXPECT_TRUE(near(f64Run.out(), outShape, ref, 1e-12, 1e-12));
    }
  KernelRun bad("dtf.conv2d_bias");
  convAttrs(bad, kCases[0])
      .in(test::f32(kCases[0].x, Values(numElementsOf(kCases[0].x), 1.0)))
      .in(test::f32(kCases[0].f, Values(numElementsOf(kCases[0].f), 1.0)))
      .in(test::f32({3}, Values(3, 1.0)));
  EXPECT_NE(errorOf(bad).find("expects a bias of shape [4]"), std::string::npos)
      << errorOf(bad);
}

// Runs `op` on f32 operands, on one thread and on the two-thread pool, and
// on f64 operands (the f64 kernels are the reference loops), and compares;
// returns the one-thread f32 result.
std::vector<float> f32AgainstF64(const std::string &op, const ConvCase &c,
                   const std::vector<std::pair<Shape, Values>> &inputs,
                   const std::function<void(KernelRun &)> &attrs) {
  KernelRun f32Run(op), pooled(op), f64Run(op);
  pooled.pool();
  for (KernelRun *run : {&f32Run, &pooled, &f64Run}) {
    convAttrs(*run, c);
    attrs(*run);
  }
  for (const auto &[shape, values] : inputs) {
    f32Run.in(test::f32(shape, values));
    pooled.in(test::f32(shape, values));
    f64Run.in(test::f64(shape, values));
  }
  EXPECT_EQ(errorOf(f32Run), "");
  EXPECT_EQ(errorOf(pooled), "");
  EXPECT_EQ(errorOf(f64Run), "");
  if (!f32Run.out().defined() || !f64Run.out().defined())
    return {};
  double scale = 0;
  Values want = valuesOf(f64Run.out());
  for (double v : want)
    scale = std::max(scale, std::abs(v));
  // Winograd's transforms round more than a direct sum: within 2e-5 of
  // the largest value, where single rounding of a sum of ~800 products
  // lands about 1e-6 off.
  EXPECT_TRUE(near(f32Run.out(), f64Run.out().shape(), want, 2e-5 * scale, 0))
      << op;
  EXPECT_TRUE(near(pooled.out(), f64Run.out().shape(), want, 2e-5 * scale, 0))
      << op << " on two threads";
  const Tensor &got = f32Run.out();
  return {got.data<float>(), got.data<float>() + got.numElements()};
}

std::vector<float> floats(const Values &v) { return {v.begin(), v.end()}; }

// Each pass of the kernels on Winograd's shapes within rounding of the f64
// reference loops; where Winograd runs, the kernels' results are those of
// Winograd.h's own functions bit for bit (so the comparison above checked
// Winograd, not oneDNN).
TEST(Conv2D, WinogradShapesMatchTheF64ReferenceInAllThreePasses) {
  std::cout << "[ NOTE     ] Winograd's F(2x2, 5x5) runs here: "
            << (cpu::winogradAvailable()
                    ? "yes"
                    : "no (no AVX-512 or DTF_CONV_WINOGRAD=0): oneDNN's "
                      "kernels are checked on these shapes instead")
            << "\n";
  Rng rng;
  int winograd = 0;
  for (const ConvCase &c : kWinogradCases) {
    SCOPED_TRACE(describe(c));
    const bool runs = cpu::winogradSuits(c.f[0], c.f[1], c.sh, c.sw, c.dh,
                                         c.dw, c.f[2], c.f[3], 16);
    EXPECT_EQ(runs,
              cpu::winogradAvailable() && c.f[2] * c.f[3] <= 256 * 256);
    Values x = rng.uniform(numElementsOf(c.x)),
           f = rng.uniform(numElementsOf(c.f)), b = rng.uniform(c.f[3]);
    Shape outShape;
    refConv(c, x, f, &outShape);
    Values dy = rng.uniform(numElementsOf(outShape));
    const std::vector<float> y = f32AgainstF64(
        "dtf.conv2d", c, {{c.x, x}, {c.f, f}}, [](KernelRun &) {});
    std::vector<float> yBias;
    for (bool relu : {false, true})
      yBias = f32AgainstF64("dtf.conv2d_bias", c,
                            {{c.x, x}, {c.f, f}, {{c.f[3]}, b}},
                            [&](KernelRun &r) { r.attr("relu", relu); });
    const std::vector<float> dx = f32AgainstF64(
        "dtf.conv2d_backprop_input", c, {{outShape, dy}, {c.f, f}},
        [&](KernelRun &r) { r.attr("input_shape", c.x); });
    const std::vector<float> df = f32AgainstF64(
        "dtf.conv2d_backprop_filter", c, {{c.x, x}, {outShape, dy}},
        [&](KernelRun &r) { r.attr("filter_shape", c.f); });
    if (!runs)
      continue;
    ++winograd;
    cpu::WinogradShape s;
    s.n = c.x[0];
    s.ih = c.x[1];
    s.iw = c.x[2];
    s.c = c.x[3];
    s.oc = c.f[3];
    outSize(s.ih, 5, 1, 1, c.same, &s.oh, &s.padTop);
    outSize(s.iw, 5, 1, 1, c.same, &s.ow, &s.padLeft);
    const std::vector<float> xs = floats(x), fs = floats(f), bs = floats(b),
                             dys = floats(dy);
    std::vector<float> want(y.size());
    cpu::winogradForward(s, xs.data(), fs.data(), nullptr, false, want.data(),
                         nullptr);
    EXPECT_EQ(y, want) << "conv2d did not run Winograd's kernel";
    cpu::winogradForward(s, xs.data(), fs.data(), bs.data(), true, want.data(),
                         nullptr);
    EXPECT_EQ(yBias, want) << "conv2d_bias did not run Winograd's kernel";
    want.assign(dx.size(), 0);
    cpu::winogradInputGrad(s, dys.data(), fs.data(), want.data(), nullptr);
    EXPECT_EQ(dx, want) << "conv2d_backprop_input did not run Winograd's";
    want.assign(df.size(), 0);
    cpu::winogradFilterGrad(s, xs.data(), dys.data(), want.data(), nullptr);
    EXPECT_EQ(df, want) << "conv2d_backprop_filter did not run Winograd's";
  }
  EXPECT_EQ(winograd, cpu::winogradAvailable() ? 5 : 0);
}

TEST(Conv2D, BadShapesAndAttributesAreErrors) {
  KernelRun channels("dtf.conv2d");
  channels.in(test::f32({1, 5, 5, 3}, Values(75)))
      .in(test::f32({3, 3, 2, 4}, Values(72)));
  EXPECT_EQ(errorOf(channels), "dtf.conv2d expects the filter's input channels "
                               "(dimension 2, 2) to match the "
                               "input's channels (dimension 3, 3), got input "
                               "[1,5,5,3] and filter [3,3,2,4]");
  KernelRun small("dtf.conv2d");
  small.attr("padding", std::string("valid"))
      .attr("dilations", std::vector<int64_t>{2, 2});
  small.in(test::f32({1, 4, 9, 1}, Values(36)))
      .in(test::f32({3, 3, 1, 1}, Values(9)));
  EXPECT_EQ(errorOf(small),
            "dtf.conv2d with valid padding needs an input height of at "
            "least 5 (the dilated window), got 4");
  KernelRun strides("dtf.conv2d");
  strides.attr("strides", std::vector<int64_t>{0, 1});
  strides.in(test::f32({1, 4, 4, 1}, Values(16)))
      .in(test::f32({1, 1, 1, 1}, {1}));
  EXPECT_EQ(
      errorOf(strides),
      "dtf.conv2d expects strides to be two positive integers, got [0,1]");
  KernelRun padding("dtf.conv2d");
  padding.attr("padding", std::string("full"));
  padding.in(test::f32({1, 4, 4, 1}, Values(16)))
      .in(test::f32({1, 1, 1, 1}, {1}));
  EXPECT_EQ(errorOf(padding),
            "dtf.conv2d: padding must be \"same\" or \"valid\", got \"full\"");
  KernelRun dy("dtf.conv2d_backprop_input");
  dy.attr("padding", std::string("same"))
      .attr("input_shape", Shape{-1, 4, 4, 1});
  dy.in(test::f32({1, 3, 4, 2}, Values(24)))
      .in(test::f32({3, 3, 1, 2}, Values(18)));
  EXPECT_EQ(errorOf(dy),
            "dtf.conv2d_backprop_input expects dy of shape [1,4,4,2] (the "
            "convolution's output), got f32[1,3,4,2]");
  KernelRun noShape("dtf.conv2d_backprop_filter");
  noShape.in(test::f32({1, 4, 4, 1}, Values(16)))
      .in(test::f32({1, 4, 4, 1}, Values(16)));
  EXPECT_EQ(errorOf(noShape),
            "dtf.conv2d_backprop_filter needs the filter_shape attribute");
}

} // namespace
} // namespace dtf::test
