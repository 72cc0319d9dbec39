// max_pool and avg_pool and their gradients against a float64 reference and
// finite differences.
#include "KernelTestUtil.h"
#include "runtime/core/ThreadPool.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace dtf::test {
namespace {

struct PoolCase {
  Shape x; // NHWC
  int64_t kh, kw, sh, sw;
  bool same;
};

std::string describe(const PoolCase &c) {
  return ::testing::PrintToString(c.x) + " window " + std::to_string(c.kh) +
         "x" + std::to_string(c.kw) + " strides " + std::to_string(c.sh) + "," +
         std::to_string(c.sw) + (c.same ? " same" : " valid");
}

// Max or mean over the window's positions inside the input (TensorFlow
// excludes padding from both).
Values refPool(const PoolCase &c, const Values &x, bool isMax,
               Shape *outShape) {
  const int64_t n = c.x[0], h = c.x[1], w = c.x[2], ch = c.x[3];
  auto size = [&](int64_t in, int64_t k, int64_t s, int64_t *out,
                  int64_t *pad) {
    *out = c.same ? (in + s - 1) / s : (in - k) / s + 1;
    *pad = c.same ? std::max<int64_t>((*out - 1) * s + k - in, 0) / 2 : 0;
  };
  int64_t oh, ow, pt, pl;
  size(h, c.kh, c.sh, &oh, &pt);
  size(w, c.kw, c.sw, &ow, &pl);
  *outShape = {n, oh, ow, ch};
  Values y(n * oh * ow * ch);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t q = 0; q < ch; ++q) {
          double acc = isMax ? -std::numeric_limits<double>::infinity() : 0.0;
          int count = 0;
          for (int64_t ky = 0; ky < c.kh; ++ky)
            for (int64_t kx = 0; kx < c.kw; ++kx) {
              int64_t iy = i * c.sh - pt + ky, ix = j * c.sw - pl + kx;
              if (iy < 0 || iy >= h || ix < 0 || ix >= w)
                continue;
              double v = x[((b * h + iy) * w + ix) * ch + q];
              acc = isMax ? std::max(acc, v) : acc + v;
              ++count;
            }
          y[((b * oh + i) * ow + j) * ch + q] = isMax ? acc : acc / count;
        }
  return y;
}

KernelRun &poolAttrs(KernelRun &run, const PoolCase &c) {
  return run.attr("window", std::vector<int64_t>{c.kh, c.kw})
      .attr("strides", std::vector<int64_t>{c.sh, c.sw})
      .attr("padding", std::string(c.same ? "same" : "valid"));
}

const std::vector<PoolCase> kCases = {
    {{1, 7, 9, 3}, 2, 2, 2, 2, true},  {{13, 7, 5, 2}, 3, 2, 2, 2, true},
    {{2, 9, 8, 3}, 3, 3, 2, 1, false}, {{1, 6, 6, 1}, 2, 2, 2, 2, false},
    {{3, 5, 7, 4}, 3, 3, 1, 1, true},  {{2, 4, 5, 2}, 5, 5, 3, 3, true},
};

TEST(Pool, ForwardMatchesTheReference) {
  Rng rng;
  for (bool isMax : {true, false})
    for (const PoolCase &c : kCases) {
      SCOPED_TRACE(describe(c) + (isMax ? " max" : " avg"));
      Values x = rng.uniform(numElementsOf(c.x), -2, 2);
      Shape outShape;
      Values want = refPool(c, x, isMax, &outShape);
      KernelRun run(isMax ? "dtf.max_pool" : "dtf.avg_pool");
      poolAttrs(run, c).in(test::f32(c.x, x));
      ASSERT_EQ(errorOf(run), "");
      EXPECT_TRUE(near(run.out(), outShape, want, 1e-6, 1e-6));
    }
}

TEST(Pool, GradientsMatchFiniteDifferences) {
  Rng rng;
  for (bool isMax : {true, false})
    for (const PoolCase &c : kCases) {
      SCOPED_TRACE(describe(c) + (isMax ? " max" : " avg"));
      Values x = rng.uniform(numElementsOf(c.x), -2, 2);
      Shape outShape;
      refPool(c, x, isMax, &outShape);
      Values dy = rng.uniform(numElementsOf(outShape));
      Values want = numericGrad(
          [&](const Values &xv) {
            Shape s;
            return refPool(c, xv, isMax, &s);
          },
          x, dy, 1e-6);
      KernelRun run(isMax ? "dtf.max_pool_grad" : "dtf.avg_pool_grad");
      poolAttrs(run, c).in(test::f32(c.x, x)).in(test::f32(outShape, dy));
      ASSERT_EQ(errorOf(run), "");
      EXPECT_TRUE(near(run.out(), c.x, want, 1e-5, 1e-5));
    }
}

TEST(Pool, MaxPoolGradSendsTiesToTheFirstMaximum) {
  // One 2x2 window of equal values: all of dy goes to the first position.
  PoolCase c{{1, 2, 2, 1}, 2, 2, 2, 2, false};
  KernelRun run("dtf.max_pool_grad");
  poolAttrs(run, c)
      .in(test::f32(c.x, {1, 1, 1, 1}))
      .in(test::f32({1, 1, 1, 1}, {5}));
  ASSERT_EQ(errorOf(run), "");
  EXPECT_TRUE(equal(run.out(), c.x, {5, 0, 0, 0}));
}

// max_pool_grad with `relu` (dtf-fuse-library's fold of relu_grad(
// max_pool_grad(x, dy), x)) gives, bit for bit, the two ops one after the
// other, in f32 and f64: on a relu's output (zeros, whole windows of them),
// with overlapping and padded windows, and with a NaN in x.
TEST(Pool, MaxPoolGradWithReluEqualsReluGradAfterItBitForBit) {
  Rng rng;
  for (bool f64 : {false, true})
    for (const PoolCase &c : kCases) {
      SCOPED_TRACE(describe(c) + (f64 ? " f64" : " f32"));
      Values x = rng.uniform(numElementsOf(c.x), -2, 1);
      for (double &v : x)
        v = std::max(v, 0.0); // a relu's output: about two thirds zeros
      x[x.size() / 2] = std::numeric_limits<double>::quiet_NaN();
      Shape outShape;
      refPool(c, x, true, &outShape);
      Values dy = rng.uniform(numElementsOf(outShape), -1, 1);
      auto tensor = [&](const Shape &shape, const Values &v) {
        return f64 ? test::f64(shape, v) : test::f32(shape, v);
      };
      KernelRun pool("dtf.max_pool_grad");
      poolAttrs(pool, c).in(tensor(c.x, x)).in(tensor(outShape, dy));
      ASSERT_EQ(errorOf(pool), "");
      KernelRun relu("dtf.relu_grad");
      relu.in(pool.out()).in(tensor(c.x, x));
      ASSERT_EQ(errorOf(relu), "");
      KernelRun fused("dtf.max_pool_grad");
      poolAttrs(fused, c)
          .attr("relu", true)
          .in(tensor(c.x, x))
          .in(tensor(outShape, dy));
      ASSERT_EQ(errorOf(fused), "");
      const Tensor &want = relu.out(), &got = fused.out();
      ASSERT_EQ(got.shape(), want.shape());
      ASSERT_EQ(got.byteSize(), want.byteSize());
      EXPECT_EQ(std::memcmp(got.rawData(), want.rawData(), got.byteSize()), 0);
      // Not vacuous: the mask dropped some dy, and kept some.
      const Tensor &plain = pool.out();
      int64_t dropped = 0, kept = 0;
      for (int64_t i = 0; i < plain.numElements(); ++i) {
        const double p = f64 ? plain.data<double>()[i] : plain.data<float>()[i];
        const double g = f64 ? got.data<double>()[i] : got.data<float>()[i];
        dropped += p != 0 && g == 0;
        kept += g != 0;
      }
      EXPECT_GT(dropped, 0);
      EXPECT_GT(kept, 0);
    }
}

// max_pool_grad against the rule written out in the kernel's own type: dx
// starts at zero, and each window adds its dy at its first maximum in window
// order (a NaN first stays, a later NaN never wins; with `relu`, only where
// that maximum is positive). Geometries where the windows tile the input
// (max_pool_grad's own path: every dx written once) and where they overlap
// or are padded; batch 1 and odd channel counts; ties, NaNs and -0 in dy
// (0 + -0 is +0: the tiled path must not keep the sign).
struct Geometry {
  int64_t n = 0, ih = 0, iw = 0, c = 0, kh = 0, kw = 0, sh = 0, sw = 0;
  int64_t oh = 0, ow = 0, padTop = 0, padLeft = 0;
};

template <typename T>
std::vector<T> firstMaximumRule(const Geometry &w, const std::vector<T> &x,
                                const std::vector<T> &dy, bool relu) {
  std::vector<T> dx(x.size(), T(0));
  for (int64_t n = 0; n < w.n; ++n)
    for (int64_t oy = 0; oy < w.oh; ++oy)
      for (int64_t ox = 0; ox < w.ow; ++ox)
        for (int64_t q = 0; q < w.c; ++q) {
          T best = -std::numeric_limits<T>::infinity();
          int64_t at = -1;
          for (int64_t ky = 0; ky < w.kh; ++ky)
            for (int64_t kx = 0; kx < w.kw; ++kx) {
              const int64_t iy = oy * w.sh - w.padTop + ky,
                            ix = ox * w.sw - w.padLeft + kx;
              if (iy < 0 || iy >= w.ih || ix < 0 || ix >= w.iw)
                continue;
              const int64_t i = ((n * w.ih + iy) * w.iw + ix) * w.c + q;
              if (x[i] > best || at < 0) {
                best = x[i];
                at = i;
              }
            }
          if (at >= 0 && (!relu || best > T(0)))
            dx[at] += dy[((n * w.oh + oy) * w.ow + ox) * w.c + q];
        }
  return dx;
}

template <typename T> void checkFirstMaximumRule() {
  struct Case {
    Shape x;
    int64_t kh, kw, sh, sw;
    bool same, tiles;
  };
  const std::vector<Case> cases = {
      {{5, 28, 28, 32}, 2, 2, 2, 2, true, true}, // the seed CNN's pool
      {{1, 7, 9, 17}, 2, 2, 2, 2, false, true},  // a row and a column left
      {{3, 9, 7, 3}, 3, 2, 3, 2, false, true},   // uneven windows
      {{2, 6, 8, 1}, 1, 2, 1, 2, true, true},    // one channel
      {{2, 7, 9, 5}, 2, 2, 2, 2, true, false},   // same: padded at the end
      {{2, 7, 7, 4}, 3, 3, 2, 2, true, false},   // overlapping, padded
      {{1, 6, 6, 3}, 3, 3, 1, 1, false, false},  // stride 1
  };
  Rng rng;
  for (const Case &c : cases)
    for (bool relu : {false, true}) {
      SCOPED_TRACE(::testing::PrintToString(c.x) + " window " +
                   std::to_string(c.kh) + "x" + std::to_string(c.kw) +
                   (relu ? " relu" : ""));
      PoolCase pc{c.x, c.kh, c.kw, c.sh, c.sw, c.same};
      Values xv = rng.uniform(numElementsOf(c.x), -1, 1);
      for (size_t i = 0; i < xv.size(); i += 3)
        xv[i] = std::round(xv[i] * 2) / 2; // ties, zeros
      xv[1] = xv[xv.size() / 3] = std::numeric_limits<double>::quiet_NaN();
      Shape outShape;
      refPool(pc, Values(xv.size()), true, &outShape);
      Values dyv = rng.uniform(numElementsOf(outShape), -1, 1);
      for (size_t i = 0; i < dyv.size(); i += 5)
        dyv[i] = -0.0;
      Geometry w;
      w.n = c.x[0], w.ih = c.x[1], w.iw = c.x[2], w.c = c.x[3];
      w.kh = c.kh, w.kw = c.kw, w.sh = c.sh, w.sw = c.sw;
      w.oh = outShape[1], w.ow = outShape[2];
      if (c.same) {
        w.padTop = std::max<int64_t>((w.oh - 1) * w.sh + w.kh - w.ih, 0) / 2;
        w.padLeft = std::max<int64_t>((w.ow - 1) * w.sw + w.kw - w.iw, 0) / 2;
      }
      const bool tiles = w.sh == w.kh && w.sw == w.kw && w.padTop == 0 &&
                         w.padLeft == 0 && w.oh * w.kh <= w.ih &&
                         w.ow * w.kw <= w.iw;
      ASSERT_EQ(tiles, c.tiles); // both of the kernel's paths are covered
      std::vector<T> x(xv.begin(), xv.end()), dy(dyv.begin(), dyv.end());
      const std::vector<T> want = firstMaximumRule(w, x, dy, relu);
      auto tensor = [](const Shape &shape, const Values &v) {
        return std::is_same_v<T, double> ? test::f64(shape, v)
                                         : test::f32(shape, v);
      };
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        KernelRun run("dtf.max_pool_grad");
        run.pool(&pool);
        poolAttrs(run, pc)
            .attr("relu", relu)
            .in(tensor(c.x, xv))
            .in(tensor(outShape, dyv));
        ASSERT_EQ(errorOf(run), "");
        const Tensor &got = run.out();
        ASSERT_EQ(got.numElements(), int64_t(want.size()));
        EXPECT_EQ(std::memcmp(got.rawData(), want.data(), got.byteSize()), 0)
            << threads << " threads";
        // The same dx from max_pool_with_argmax's bytes and dy, and its y
        // is max_pool's, bit for bit.
        KernelRun kept("dtf.max_pool_with_argmax");
        kept.pool(&pool);
        poolAttrs(kept, pc).in(tensor(c.x, xv));
        ASSERT_EQ(errorOf(kept), "");
        KernelRun plain("dtf.max_pool");
        plain.pool(&pool);
        poolAttrs(plain, pc).in(tensor(c.x, xv));
        ASSERT_EQ(errorOf(plain), "");
        ASSERT_EQ(kept.out(0).shape(), plain.out().shape());
        EXPECT_EQ(std::memcmp(kept.out(0).rawData(), plain.out().rawData(),
                              plain.out().byteSize()),
                  0)
            << threads << " threads";
        KernelRun indexed("dtf.max_pool_grad_with_argmax");
        indexed.pool(&pool);
        poolAttrs(indexed, pc)
            .attr("relu", relu)
            .attr("input_shape", Shape{-1, c.x[1], c.x[2], c.x[3]})
            .in(kept.out(1))
            .in(tensor(outShape, dyv));
        ASSERT_EQ(errorOf(indexed), "");
        ASSERT_EQ(indexed.out().shape(), got.shape());
        EXPECT_EQ(
            std::memcmp(indexed.out().rawData(), want.data(), got.byteSize()),
            0)
            << threads << " threads, from the argmax";
      }
      // Not vacuous: some dy landed, and some -0 dy landed as +0.
      int64_t landed = 0, positiveZeros = 0;
      for (T v : want) {
        landed += v != T(0);
        positiveZeros += v == T(0) && !std::signbit(v);
      }
      EXPECT_GT(landed, 0);
      EXPECT_EQ(positiveZeros, int64_t(want.size()) - landed);
    }
}

TEST(Pool, MaxPoolGradFollowsTheFirstMaximumRuleBitForBit) {
  checkFirstMaximumRule<float>();
  checkFirstMaximumRule<double>();
}

// The argmax bytes: their layout (four to an i32, the window position in
// the low seven bits, the high bit where the maximum is not positive), and a
// byte edited to name no position of its window is an error, not a write
// outside dx.
TEST(Pool, MaxPoolArgmaxBytesAndBadOnesAreErrors) {
  // Two 2x2 windows side by side, 5 channels (a second i32 of padding
  // bytes): channel q's maximum at position q % 4, negative for channel 4.
  PoolCase c{{1, 2, 4, 5}, 2, 2, 2, 2, false};
  Values x(numElementsOf(c.x), -3.0);
  for (int64_t ox = 0; ox < 2; ++ox)
    for (int64_t q = 0; q < 5; ++q) {
      const int64_t j = q % 4, iy = j / 2, ix = ox * 2 + j % 2;
      x[(iy * 4 + ix) * 5 + q] = q == 4 ? -1.0 : 1.0 + q;
    }
  KernelRun kept("dtf.max_pool_with_argmax");
  poolAttrs(kept, c).in(test::f32(c.x, x));
  ASSERT_EQ(errorOf(kept), "");
  ASSERT_EQ(kept.out(1).dtype(), DType::I32);
  ASSERT_EQ(kept.out(1).shape(), (Shape{1, 1, 2, 2}));
  const auto *bytes = static_cast<const uint8_t *>(kept.out(1).rawData());
  const std::vector<uint8_t> want = {0, 1, 2, 3, 0x80, 0, 0, 0};
  EXPECT_EQ(std::vector<uint8_t>(bytes, bytes + 8), want);
  EXPECT_EQ(std::vector<uint8_t>(bytes + 8, bytes + 16), want);
  EXPECT_TRUE(
      equal(kept.out(0), {1, 1, 2, 5}, {1, 2, 3, 4, -1, 1, 2, 3, 4, -1}));

  for (bool tiles : {true, false}) {
    SCOPED_TRACE(tiles ? "windows that tile" : "overlapping windows");
    PoolCase g = tiles ? c : PoolCase{{1, 2, 4, 5}, 2, 2, 1, 2, false};
    Tensor edited = Tensor::allocate(DType::I32, {1, 1, 2, 2});
    std::memcpy(edited.rawData(), bytes, 16);
    static_cast<uint8_t *>(edited.rawData())[9] =
        4; // [0, 0, 1, 1]: 2x2 has 0..3
    KernelRun grad("dtf.max_pool_grad_with_argmax");
    poolAttrs(grad, g)
        .attr("input_shape", Shape{-1, 2, 4, 5})
        .in(edited)
        .in(test::f32({1, 1, 2, 5}, Values(10, 1.0)));
    EXPECT_EQ(errorOf(grad),
              "dtf.max_pool_grad_with_argmax: argmax byte 4 of output [0, 0, "
              "1, 1] names window position 4, which is not in its 2x2 window "
              "inside the input (the argmax of another pool, or edited?)");
  }

  KernelRun wrongType("dtf.max_pool_grad_with_argmax");
  poolAttrs(wrongType, c)
      .attr("input_shape", Shape{-1, 2, 4, 5})
      .in(test::f32({1, 1, 2, 2}, Values(4)))
      .in(test::f32({1, 1, 2, 5}, Values(10)));
  EXPECT_EQ(errorOf(wrongType),
            "dtf.max_pool_grad_with_argmax expects the argmax of type "
            "i32[1,1,2,2] (max_pool_with_argmax's of input [1,2,4,5]), got "
            "f32[1,1,2,2]");
  KernelRun wrongShape("dtf.max_pool_grad_with_argmax");
  poolAttrs(wrongShape, c)
      .attr("input_shape", Shape{-1, 2, 4, 5})
      .in(kept.out(1).reshaped({1, 1, 1, 4}))
      .in(test::f32({1, 1, 2, 5}, Values(10)));
  EXPECT_EQ(errorOf(wrongShape),
            "dtf.max_pool_grad_with_argmax expects the argmax of type "
            "i32[1,1,2,2] (max_pool_with_argmax's of input [1,2,4,5]), got "
            "i32[1,1,1,4]");
  KernelRun noShape("dtf.max_pool_grad_with_argmax");
  poolAttrs(noShape, c).in(kept.out(1)).in(test::f32({1, 1, 2, 5}, Values(10)));
  EXPECT_EQ(errorOf(noShape),
            "dtf.max_pool_grad_with_argmax needs the input_shape attribute "
            "(4 dimensions: the forward op's input shape)");
  KernelRun big("dtf.max_pool_with_argmax");
  big.attr("window", Shape{8, 16})
      .attr("strides", Shape{1, 1})
      .attr("padding", std::string("same"))
      .in(test::f32({1, 4, 4, 1}, Values(16)));
  EXPECT_EQ(errorOf(big),
            "dtf.max_pool_with_argmax keeps a window position in seven bits, "
            "so its window has at most 127 positions, got 8x16");
}

// max_pool_with_argmax's y is max_pool's bit for bit where the two
// maxima differ in what they do: NaNs (oneDNN's f32 pool passes over them,
// the f64 loop keeps them), windows of NaNs and of -inf only, +0 and -0.
TEST(Pool, MaxPoolWithArgmaxGivesMaxPoolsValuesForNaNsAndZeros) {
  const double nan = std::numeric_limits<double>::quiet_NaN(),
               inf = std::numeric_limits<double>::infinity();
  // Seven 1x2 windows over one row of 14, one channel.
  const Values x = {nan,  1,    2,   nan, nan,  nan,  -inf,
                    -inf, -0.0, 0.0, 0.0, -0.0, -inf, nan};
  // One channel (the scalar loop), and 8 and 9 (f32: 8 channels in AVX2
  // registers, then one scalar).
  for (int64_t channels : {1, 8, 9})
    for (bool f64 : {false, true}) {
      SCOPED_TRACE(std::string(f64 ? "f64, " : "f32, ") +
                   std::to_string(channels) + " channels");
      PoolCase c{{1, 1, 14, channels}, 1, 2, 1, 2, false};
      Values xc;
      for (double v : x)
        xc.insert(xc.end(), size_t(channels), v);
      Tensor in = f64 ? test::f64(c.x, xc) : test::f32(c.x, xc);
      KernelRun kept("dtf.max_pool_with_argmax");
      poolAttrs(kept, c).in(in);
      ASSERT_EQ(errorOf(kept), "");
      KernelRun plain("dtf.max_pool");
      poolAttrs(plain, c).in(in);
      ASSERT_EQ(errorOf(plain), "");
      const Values got = valuesOf(kept.out(0)), want = valuesOf(plain.out());
      ASSERT_EQ(got.size(), size_t(7 * channels));
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_EQ(std::memcmp(&got[i], &want[i], sizeof(double)), 0)
            << "element " << i << ": " << got[i] << " and max_pool's "
            << want[i];
    }
}

TEST(Pool, BadShapesAreErrors) {
  KernelRun rank("dtf.max_pool");
  rank.attr("window", Shape{2, 2}).in(test::f32({4, 4}, Values(16)));
  EXPECT_EQ(errorOf(rank),
            "dtf.max_pool expects an NHWC input of rank 4, got [4,4]");
  KernelRun dy("dtf.avg_pool_grad");
  dy.attr("window", Shape{2, 2}).attr("strides", Shape{2, 2});
  dy.in(test::f32({1, 4, 4, 1}, Values(16)))
      .in(test::f32({1, 3, 2, 1}, Values(6)));
  EXPECT_EQ(errorOf(dy),
            "dtf.avg_pool_grad expects dy of shape [1,2,2,1] (the pooling's "
            "output), got f32[1,3,2,1]");
  KernelRun window("dtf.avg_pool");
  window.attr("window", Shape{2}).in(test::f32({1, 4, 4, 1}, Values(16)));
  EXPECT_EQ(errorOf(window),
            "dtf.avg_pool expects window to be two positive integers, got [2]");
}

} // namespace
} // namespace dtf::test
