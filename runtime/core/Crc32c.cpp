#include "runtime/core/Crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace dtf::crc32c {
namespace {

constexpr uint32_t kPoly = 0x82f63b78u; // reflected Castagnoli polynomial

std::array<uint32_t, 256> makeTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[i] = c;
  }
  return t;
}

uint32_t extendTable(uint32_t crc, const uint8_t *p, size_t n) {
  static const std::array<uint32_t, 256> table = makeTable();
  uint32_t c = ~crc;
  for (size_t i = 0; i < n; ++i)
    c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return ~c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t extendHardware(uint32_t crc,
                                                           const uint8_t *p,
                                                           size_t n) {
  uint64_t c = ~crc;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = uint32_t(c);
  while (n--)
    c32 = _mm_crc32_u8(c32, *p++);
  return ~c32;
}

bool hasSse42() { return __builtin_cpu_supports("sse4.2"); }
#endif

} // namespace

uint32_t extend(uint32_t crc, const void *data, size_t n) {
  const auto *p = static_cast<const uint8_t *>(data);
#if defined(__x86_64__)
  static const bool hardware = hasSse42();
  if (hardware)
    return extendHardware(crc, p, n);
#endif
  return extendTable(crc, p, n);
}

} // namespace dtf::crc32c
