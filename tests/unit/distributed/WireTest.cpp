// The bfloat16 wire (dtf-run --wire bf16): f32 values narrowed to the
// nearest bfloat16 (ties to even), NaN kept a NaN, overflow to infinity,
// and widened back exactly.
#include "runtime/distributed/Wire.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace dtf::dist {
namespace {

uint16_t bitsOf(float f) {
  Tensor t = Tensor::zeros(DType::F32, {1});
  t.data<float>()[0] = f;
  Tensor b = narrowToBf16(t);
  EXPECT_EQ(b.dtype(), DType::BF16);
  return static_cast<const uint16_t *>(b.rawData())[0];
}

float roundTrip(float f) {
  const uint16_t b = bitsOf(f);
  float out = 0;
  widenFromBf16(&b, 1, &out);
  return out;
}

TEST(Bfloat16Wire, RoundsToNearestWithTiesToEven) {
  EXPECT_EQ(bitsOf(1.0f), 0x3f80);
  EXPECT_EQ(roundTrip(1.0f), 1.0f);
  EXPECT_EQ(roundTrip(-2.5f), -2.5f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to the even one, 1.
  EXPECT_EQ(roundTrip(1.0f + 1.0f / 256), 1.0f);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: to 1 + 2^-6.
  EXPECT_EQ(roundTrip(1.0f + 3.0f / 256), 1.0f + 1.0f / 64);
  // Just above halfway rounds up.
  EXPECT_EQ(roundTrip(1.0f + 1.0f / 256 + 1.0f / 4096), 1.0f + 1.0f / 128);
  // The relative error is at most 2^-9.
  for (float f : {3.14159265f, 1e-20f, 6.02e23f, -0.1f})
    EXPECT_LE(std::fabs(roundTrip(f) - f), std::fabs(f) / 512) << f;
}

TEST(Bfloat16Wire, KeepsNaNsInfinitiesAndZeros) {
  EXPECT_TRUE(std::isnan(roundTrip(std::numeric_limits<float>::quiet_NaN())));
  // A NaN whose payload sits in the low bits only must not become inf.
  float lowNaN;
  const uint32_t bits = 0x7f800001u;
  std::memcpy(&lowNaN, &bits, 4);
  EXPECT_TRUE(std::isnan(roundTrip(lowNaN)));
  EXPECT_EQ(roundTrip(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  EXPECT_EQ(roundTrip(-std::numeric_limits<float>::infinity()),
            -std::numeric_limits<float>::infinity());
  EXPECT_EQ(roundTrip(std::numeric_limits<float>::max()),
            std::numeric_limits<float>::infinity());
  EXPECT_EQ(bitsOf(-0.0f), 0x8000);
  EXPECT_EQ(roundTrip(0.0f), 0.0f);
}

TEST(Bfloat16Wire, HalvesTheBytesOfAView) {
  Tensor t = Tensor::zeros(DType::F32, {4, 3});
  for (int i = 0; i < 12; ++i)
    t.data<float>()[i] = float(i);
  Tensor rows = rowsOf(t, 1, 2);
  Tensor b = narrowToBf16(rows);
  EXPECT_EQ(b.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(b.byteSize(), rows.byteSize() / 2);
  float back[6];
  widenFromBf16(static_cast<const uint16_t *>(b.rawData()), 6, back);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(back[i], float(i + 3));
}

} // namespace
} // namespace dtf::dist
