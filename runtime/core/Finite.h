// Whether every float of a buffer is finite, at memory speed: the ps checks
// each pushed gradient with it before it applies one (a scalar loop that
// stops at the first bad value was a quarter of a ps's time on the seed
// CNN's cluster).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace dtf {

/// True when none of the `n` floats is NaN or an infinity (an exponent of
/// all ones). Branch-free within blocks of 4096, so that the compiler
/// vectorizes them; a bad value ends the scan at its block.
inline bool allFinite(const float *a, int64_t n) {
  constexpr int64_t kBlock = 4096;
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t end = std::min(n, i + kBlock);
    uint32_t bad = 0;
    for (int64_t j = i; j < end; ++j) {
      uint32_t u;
      std::memcpy(&u, &a[j], 4);
      bad |= uint32_t((u & 0x7f800000u) == 0x7f800000u);
    }
    if (bad)
      return false;
  }
  return true;
}

/// The same for doubles.
inline bool allFinite(const double *a, int64_t n) {
  constexpr int64_t kBlock = 2048;
  constexpr uint64_t kExp = 0x7ff0000000000000ull;
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t end = std::min(n, i + kBlock);
    uint64_t bad = 0;
    for (int64_t j = i; j < end; ++j) {
      uint64_t u;
      std::memcpy(&u, &a[j], 8);
      bad |= uint64_t((u & kExp) == kExp);
    }
    if (bad)
      return false;
  }
  return true;
}

} // namespace dtf
