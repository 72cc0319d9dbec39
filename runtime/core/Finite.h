// Whether every float of a buffer is finite, at memory speed: the ps checks
// each pushed gradient with it before it applies one (a scalar loop that
// stops at the first bad value was a quarter of a ps's time on the seed
// CNN's cluster).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace dtf {

/// True when none of the `n` values (float or double) is NaN or an infinity
/// (an exponent of all ones). Branch-free within blocks of 16 KB, so that
/// the compiler vectorizes them; a bad value ends the scan at its block.
template <typename T> bool allFinite(const T *a, int64_t n) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  constexpr Bits kExponent =
      sizeof(T) == 4 ? Bits(0x7f800000u) : Bits(0x7ff0000000000000ull);
  constexpr int64_t kBlock = 16384 / int64_t(sizeof(T));
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t end = std::min(n, i + kBlock);
    Bits bad = 0;
    for (int64_t j = i; j < end; ++j) {
      Bits u;
      std::memcpy(&u, &a[j], sizeof(T));
      bad |= Bits((u & kExponent) == kExponent);
    }
    if (bad)
      return false;
  }
  return true;
}

} // namespace dtf
