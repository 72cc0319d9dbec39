// runtime/core/F16.h bit for bit against a reference written from the
// definition of IEEE half precision (the nearest of the 63,488 finite
// values, ties to the even pattern, overflow to inf, subnormals kept, NaNs
// quiet), and the kernels' vectorized rounding (F16C) bit for bit with it.
#include "KernelTestUtil.h"

#include "runtime/core/F16.h"
#include "runtime/kernels/cpu/OneDnn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace dtf::test {
namespace {

// The value of a finite f16 pattern from its fields, in double.
double valueOfF16(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f, significand = h & 0x3ff;
  const double magnitude =
      exponent == 0 ? std::ldexp(double(significand), -24)
                    : std::ldexp(double(1024 + significand), exponent - 25);
  return (h & 0x8000) ? -magnitude : magnitude;
}

// The non-negative finite f16 values, by pattern (0x0000..0x7bff): they
// increase with the pattern.
const std::vector<double> &magnitudes() {
  static const std::vector<double> v = [] {
    std::vector<double> m;
    for (uint32_t h = 0; h <= 0x7bff; ++h)
      m.push_back(valueOfF16(uint16_t(h)));
    return m;
  }();
  return v;
}

uint16_t referenceF16(float x) {
  const uint32_t u = bitsOf(x);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000);
  if (std::isnan(x)) // quiet, payload's top bits kept
    return uint16_t(sign | 0x7e00 | ((u >> 13) & 0x3ff));
  const double a = std::fabs(double(x));
  // Beyond the largest (65504) by half its ulp (32) or more: inf.
  if (a >= 65520.0)
    return uint16_t(sign | 0x7c00);
  const std::vector<double> &m = magnitudes();
  const size_t up = size_t(std::lower_bound(m.begin(), m.end(), a) - m.begin());
  if (up < m.size() && m[up] == a)
    return uint16_t(sign | up);
  if (up == m.size()) // between 65504 and 65520: down
    return uint16_t(sign | (up - 1));
  const size_t down = up - 1;
  const double dDown = a - m[down], dUp = m[up] - a;
  const size_t pick = dDown < dUp       ? down
                      : dUp < dDown     ? up
                      : (down % 2 == 0) ? down
                                        : up;
  return uint16_t(sign | pick);
}

TEST(F16, WidensEveryPatternExactly) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = f32FromF16(uint16_t(h));
    const int exponent = (h >> 10) & 0x1f;
    if (exponent == 0x1f && (h & 0x3ff) != 0) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      // The payload moves up, the sign stays: narrowing gives it back
      // (quiet).
      ASSERT_EQ(f16FromF32(f), uint16_t(h | 0x200)) << std::hex << h;
    } else if (exponent == 0x1f) {
      ASSERT_TRUE(std::isinf(f)) << std::hex << h;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0);
    } else {
      ASSERT_EQ(double(f), valueOfF16(uint16_t(h))) << std::hex << h;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << h; // -0
      ASSERT_EQ(f16FromF32(f), uint16_t(h)) << std::hex << h; // round trip
    }
  }
}

std::vector<float> hardCases() {
  std::vector<float> xs;
  for (uint32_t p :
       {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, // +-0, +-inf
        0x7f800001u, 0xff812345u, 0x7fc00000u, 0x7fffffffu, // NaNs
        0x00000001u, 0x807fffffu,                           // f32 subnormals
        0x7f7fffffu, 0xff7fffffu})                          // f32's largest
    xs.push_back(floatOf(p));
  for (float v :
       {65504.0f,        65519.0f, 65519.996f,     65520.0f,        65536.0f,
        -65520.0f,       0x1p-14f, 0x1p-15f,       0x1p-24f,        0x1p-25f,
        0x1.000002p-25f, 0x1p-26f, 0x1.8p-24f,     0x1.4p-24f,      0x1.cp-24f,
        -0x1p-25f,       1.0f,     1.00048828125f, 1.000732421875f, 2049.0f,
        2051.0f})
    xs.push_back(v);
  // Every midpoint between neighbouring f16 values (a tie, when f32 holds
  // it exactly, which it does below 2^15) and its f32 neighbours.
  const std::vector<double> &m = magnitudes();
  for (size_t i = 0; i + 1 < m.size(); i += 7) {
    const float mid = float((m[i] + m[i + 1]) / 2);
    xs.push_back(mid);
    xs.push_back(std::nextafter(mid, 0.0f));
    xs.push_back(std::nextafter(mid, 1e9f));
    xs.push_back(-mid);
  }
  std::mt19937 gen(16);
  for (int i = 0; i < 200001; ++i) // any pattern, then f16's own range
    xs.push_back(floatOf(uint32_t(gen())));
  std::uniform_real_distribution<float> range(-70000.0f, 70000.0f);
  for (int i = 0; i < 100000; ++i)
    xs.push_back(range(gen) * (i % 2 ? 1.0f : 1e-6f));
  return xs;
}

TEST(F16, NarrowsToNearestEvenBitForBitIncludingSpecialValues) {
  int ties = 0, infinities = 0, subnormals = 0;
  for (float x : hardCases()) {
    const uint16_t want = referenceF16(x);
    ASSERT_EQ(f16FromF32(x), want)
        << std::hexfloat << x << " " << std::hex << bitsOf(x);
    infinities += (want & 0x7fff) == 0x7c00 && !std::isinf(x);
    subnormals += (want & 0x7c00) == 0 && (want & 0x3ff) != 0;
    const double a = std::fabs(double(x));
    const size_t up =
        size_t(std::lower_bound(magnitudes().begin(), magnitudes().end(), a) -
               magnitudes().begin());
    ties += up > 0 && up < magnitudes().size() &&
            a - magnitudes()[up - 1] == magnitudes()[up] - a;
  }
  // The cases reach what they are there for.
  EXPECT_GT(ties, 1000);
  EXPECT_GT(infinities, 1000);
  EXPECT_GT(subnormals, 100);
}

// The kernels' rounding (F16C's vcvtps2ph and back, the tail by F16.h):
// bit for bit with roundToF16, NaNs included.
TEST(F16, KernelRoundingMatchesF16hBitForBit) {
  const std::vector<float> xs = hardCases();
  Tensor t = Tensor::allocate(DType::F32, {int64_t(xs.size())});
  std::copy(xs.begin(), xs.end(), t.data<float>());
  Tensor r = cpu::roundedThroughF16(t, nullptr);
  for (size_t i = 0; i < xs.size(); ++i)
    ASSERT_EQ(bitsOf(r.data<float>()[i]), bitsOf(roundToF16(xs[i])))
        << std::hexfloat << xs[i] << " " << std::hex << bitsOf(xs[i]);
}

} // namespace
} // namespace dtf::test
