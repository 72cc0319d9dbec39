// IEEE half precision (f16) <-> f32: round to nearest even, written once for
// mixed_float16's products (the kernels' rounding and its unit tests).
#pragma once

#include <cstdint>
#include <cstring>

namespace dtf {

/// f32 to f16, round to nearest, ties to even. A NaN stays a NaN and
/// becomes quiet (its payload's top bits kept); a magnitude of 65520 or more
/// (halfway past f16's largest, 65504) becomes an infinity of its sign;
/// magnitudes below 2^-14 become f16 subnormals (no flush to zero), those
/// at most 2^-25 a zero of their sign.
inline uint16_t f16FromF32(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) // NaN: quiet, payload's top 9 bits kept
    return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) // 65520 and above (and inf): inf
    return uint16_t(sign | 0x7c00u);
  if (a >= 0x38800000u) { // 2^-14 and above: normal; rebias 127 -> 15
    uint32_t m = a - 0x38000000u;
    m += 0xfffu + ((m >> 13) & 1u);
    return uint16_t(sign | (m >> 13));
  }
  if (a <= 0x33000000u) // at most 2^-25 (a tie with 0, which is even): 0
    return sign;
  // Subnormal: the significand with its implicit bit, in units of 2^-24.
  const uint32_t exponent = a >> 23; // 102..112
  const uint32_t significand = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exponent; // 14..24
  uint32_t q = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (q & 1u)))
    ++q; // may carry into the smallest normal, 0x400, which is right
  return uint16_t(sign | q);
}

/// f16 to f32, exactly (subnormals, infinities and NaN payloads kept).
inline float f32FromF16(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t significand = h & 0x3ffu;
  uint32_t u;
  if (exponent == 0x1fu) {
    u = sign | 0x7f800000u | (significand << 13);
  } else if (exponent != 0) {
    u = sign | ((exponent + 112u) << 23) | (significand << 13);
  } else {
    // Zero or subnormal: significand * 2^-24, exact in f32.
    float f = float(significand) * (1.0f / 16777216.0f);
    std::memcpy(&u, &f, 4);
    u |= sign;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// `f` rounded to the nearest f16 (as f16FromF32), as an f32.
inline float roundToF16(float f) { return f32FromF16(f16FromF32(f)); }

} // namespace dtf
