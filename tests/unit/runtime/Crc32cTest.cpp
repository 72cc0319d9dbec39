#include "runtime/core/Crc32c.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dtf::crc32c {
namespace {

// RFC 3720 B.4 and the usual check value.
TEST(Crc32c, KnownValues) {
  EXPECT_EQ(value("123456789", 9), 0xe3069283u);
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xff), inc(32);
  for (int i = 0; i < 32; ++i)
    inc[i] = uint8_t(i);
  EXPECT_EQ(value(zeros.data(), 32), 0x8a9136aau);
  EXPECT_EQ(value(ones.data(), 32), 0x62a8ab43u);
  EXPECT_EQ(value(inc.data(), 32), 0x46dd794eu);
  EXPECT_EQ(value("", 0), 0u);
}

TEST(Crc32c, ExtendEqualsWhole) {
  std::string s = "The quick brown fox jumps over the lazy dog, twice over.";
  for (size_t cut = 0; cut <= s.size(); ++cut)
    EXPECT_EQ(extend(value(s.data(), cut), s.data() + cut, s.size() - cut),
              value(s.data(), s.size()))
        << cut;
}

TEST(Crc32c, MaskRoundTrips) {
  for (uint32_t c : {0u, 1u, 0xe3069283u, 0xffffffffu}) {
    EXPECT_EQ(unmask(mask(c)), c);
    EXPECT_NE(mask(c), c);
  }
}

} // namespace
} // namespace dtf::crc32c
