// bfloat16 <-> f32: round to nearest even, written once for the bf16 wire,
// the cast kernel and the mixed precision products.
#pragma once

#include <cstdint>
#include <cstring>

namespace dtf {

/// f32 to bfloat16, round to nearest, ties to even; a NaN stays a NaN and
/// becomes quiet (its payload's top bits kept); a value beyond bf16's range
/// rounds into the exponent, to inf; subnormals round like any value (no
/// flush to zero).
inline uint16_t bf16FromF32(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return (u & 0x7fffffffu) > 0x7f800000u
             ? uint16_t((u >> 16) | 0x40u)
             : uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/// bfloat16 to f32, exactly.
inline float f32FromBf16(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// `n` floats to bfloat16 as bf16FromF32 rounds them; branch-free, so the
/// compiler vectorizes the loop.
inline void narrowToBf16(const float *src, int64_t n, uint16_t *dst) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &src[i], 4);
    const uint16_t rounded = uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    const uint16_t quiet = uint16_t((u >> 16) | 0x40u);
    dst[i] = (u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded;
  }
}

/// `n` bfloat16 values to floats, exactly.
inline void widenFromBf16(const uint16_t *src, int64_t n, float *dst) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = uint32_t(src[i]) << 16;
    std::memcpy(&dst[i], &u, 4);
  }
}

} // namespace dtf
