// CRC-32C (Castagnoli), as TFRecord files and checkpoints carry it: the
// SSE4.2 instruction where the CPU has it, a table otherwise.
#pragma once

#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace dtf::crc32c {

/// Extends `crc` (the CRC of the bytes before) over `data`; value(p, n) ==
/// extend(0, p, n).
uint32_t extend(uint32_t crc, const void *data, size_t n);

inline uint32_t value(const void *data, size_t n) { return extend(0, data, n); }

/// The masked form TFRecord and LevelDB store, so that a CRC of data that
/// itself holds CRCs stays well distributed.
inline uint32_t mask(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
inline uint32_t unmask(uint32_t masked) {
  uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

} // namespace dtf::crc32c

namespace dtf {

/// v as 0x0000abcd, as messages print CRCs and magic numbers.
inline std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08" PRIx32, v);
  return buf;
}

} // namespace dtf
