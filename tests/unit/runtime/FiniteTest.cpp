#include "runtime/core/Finite.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace dtf {
namespace {

template <typename T> T fromBits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

// Every kind of value, at every place of a buffer that spans several blocks
// (the first, a block's last and next, the very last; a block is 4,096
// floats or 2,048 doubles), against std::isfinite.
template <typename T> void checkAgainstIsfinite(const std::vector<T> &specials) {
  const int64_t n = 3 * 4096 + 7;
  std::vector<T> a(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    a[size_t(i)] = T(i % 97) * T(-1.5e3) + T(1e-30);
  EXPECT_TRUE(allFinite(a.data(), n));
  EXPECT_TRUE(allFinite(a.data(), 0));
  for (T v : specials)
    for (int64_t at : {int64_t(0), int64_t(2047), int64_t(2048), int64_t(4095),
                       int64_t(4096), n - 1}) {
      std::vector<T> b = a;
      b[size_t(at)] = v;
      EXPECT_EQ(allFinite(b.data(), n), bool(std::isfinite(v)))
          << "value " << v << " at " << at;
      // A prefix that ends before it never sees it.
      EXPECT_TRUE(allFinite(b.data(), at));
    }
}

TEST(Finite, FloatsAgainstIsfinite) {
  using L = std::numeric_limits<float>;
  checkAgainstIsfinite<float>(
      {L::infinity(), -L::infinity(), L::quiet_NaN(), -L::quiet_NaN(),
       L::signaling_NaN(), fromBits<float>(0x7f800001u), // smallest NaN payload
       fromBits<float>(0xffffffffu), L::max(), -L::max(), L::denorm_min(),
       -L::denorm_min(), L::min(), 0.0f, -0.0f});
}

TEST(Finite, DoublesAgainstIsfinite) {
  using L = std::numeric_limits<double>;
  checkAgainstIsfinite<double>(
      {L::infinity(), -L::infinity(), L::quiet_NaN(), L::signaling_NaN(),
       fromBits<double>(0x7ff0000000000001ull), L::max(), -L::max(),
       L::denorm_min(), 0.0, -0.0});
}

} // namespace
} // namespace dtf
