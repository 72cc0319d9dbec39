// The codecs of compressed pushes (dtf-run --compress-push): top-k keeps its
// values exactly, 1-bit sends each chunk's mean magnitude with the signs,
// the residual is what was not sent, error feedback delivers the whole
// gradient over the steps, and malformed encodings are refused.
#include "runtime/distributed/PushCompression.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace dtf::dist {
namespace {

std::vector<float> randomValues(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(size_t(n), 0.0f);
  for (float &x : v)
    x = dist(gen);
  return v;
}

std::vector<float> decoded(rpc::PushEncoding e, const Tensor &encoded,
                           int64_t n) {
  std::vector<float> dense(size_t(n), -7.0f);
  Status s =
      decodePush(e, encoded.rawData(), encoded.byteSize(), dense.data(), n);
  EXPECT_TRUE(s.isOk()) << s.message();
  return dense;
}

TEST(PushCompression, TopKSendsTheLargestValuesExactlyAndKeepsTheRest) {
  const int64_t n = 10000, k = topKCount(n, 0.01);
  ASSERT_EQ(k, 100);
  const std::vector<float> g = randomValues(n, 1);
  std::vector<float> a = g;
  Tensor enc = encodeTopK(a.data(), n, k);
  EXPECT_EQ(enc.byteSize(), topKBytes(k));
  EXPECT_EQ(enc.byteSize(), size_t(800)) << "1/50 of f32's 40000 bytes";
  const std::vector<float> d = decoded(rpc::PUSH_TOP_K, enc, n);
  // The k largest magnitudes: every sent one at least every one kept back.
  float smallestSent = std::numeric_limits<float>::infinity(), largestKept = 0;
  int64_t sent = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (d[size_t(i)] != 0) {
      ++sent;
      EXPECT_EQ(d[size_t(i)], g[size_t(i)]) << "sent values are exact, " << i;
      smallestSent = std::min(smallestSent, std::fabs(g[size_t(i)]));
    } else {
      largestKept = std::max(largestKept, std::fabs(g[size_t(i)]));
    }
    // The residual is exactly what was not sent.
    EXPECT_EQ(a[size_t(i)], g[size_t(i)] - d[size_t(i)]) << i;
  }
  EXPECT_EQ(sent, k);
  EXPECT_GE(smallestSent, largestKept);
}

// A large gradient's top-k looks for the k-th largest magnitude among the
// values above a threshold estimated from a sample: it must pick exactly
// what a full sort picks, ties (many here: values rounded to 1/16) to the
// lowest indices.
TEST(PushCompression, TopKOfALargeGradientPicksWhatAFullSortPicks) {
  const int64_t n = 300000, k = topKCount(n, 0.01);
  std::vector<float> g = randomValues(n, 3);
  for (float &v : g)
    v = std::round(v * 16) / 16;
  std::vector<uint32_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    order[size_t(i)] = uint32_t(i);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
    return std::fabs(g[x]) > std::fabs(g[y]);
  });
  std::vector<uint32_t> want(order.begin(), order.begin() + k);
  std::sort(want.begin(), want.end());
  std::vector<float> a = g;
  Tensor enc = encodeTopK(a.data(), n, k);
  const uint32_t *index = reinterpret_cast<const uint32_t *>(enc.rawData());
  ASSERT_EQ(enc.byteSize(), topKBytes(k));
  for (int64_t j = 0; j < k; ++j)
    ASSERT_EQ(index[j], want[size_t(j)]) << j;
}

TEST(PushCompression, TopKBreaksTiesByIndexAndAllZerosStillDecode) {
  std::vector<float> a(5000, 0.5f);
  a[4000] = -2.0f;
  Tensor enc = encodeTopK(a.data(), 5000, 3);
  const uint32_t *index = reinterpret_cast<const uint32_t *>(enc.rawData());
  EXPECT_EQ(index[0], 0u);
  EXPECT_EQ(index[1], 1u);
  EXPECT_EQ(index[2], 4000u) << "ascending, the largest among them";
  EXPECT_EQ(a[4000], 0.0f);
  EXPECT_EQ(a[2], 0.5f);
  std::vector<float> zeros(5000, 0.0f);
  Tensor none = encodeTopK(zeros.data(), 5000, 2);
  for (float v : decoded(rpc::PUSH_TOP_K, none, 5000))
    ASSERT_EQ(v, 0.0f);
}

TEST(PushCompression, OneBitSendsSignsAndEachChunksMeanMagnitude) {
  const int64_t n = 2 * kOneBitChunk + 100; // a short last chunk
  const std::vector<float> g = randomValues(n, 2);
  std::vector<float> a = g;
  Tensor enc = encodeOneBit(a.data(), n);
  EXPECT_EQ(enc.byteSize(), oneBitBytes(n));
  EXPECT_EQ(oneBitBytes(n), size_t(3 * 4 + (n + 31) / 32 * 4));
  const std::vector<float> d = decoded(rpc::PUSH_ONE_BIT, enc, n);
  for (int64_t c = 0; c < 3; ++c) {
    const int64_t lo = c * kOneBitChunk, hi = std::min(n, lo + kOneBitChunk);
    double mean = 0;
    for (int64_t i = lo; i < hi; ++i)
      mean += std::fabs(g[size_t(i)]);
    mean /= double(hi - lo);
    for (int64_t i = lo; i < hi; ++i) {
      ASSERT_NEAR(std::fabs(d[size_t(i)]), mean, 1e-5) << i;
      ASSERT_EQ(d[size_t(i)] < 0, g[size_t(i)] < 0) << i;
      ASSERT_EQ(a[size_t(i)], g[size_t(i)] - d[size_t(i)]) << i;
    }
  }
}

// Error feedback: whatever a push leaves out comes with a later one, so the
// decoded pushes plus the residual add up to the sum of the gradients.
TEST(PushCompression, ErrorFeedbackDeliversTheWholeGradientOverSteps) {
  for (PushCompression c :
       {PushCompression{PushCompression::Kind::kTopK, 0.01},
        PushCompression{PushCompression::Kind::kOneBit, 0}}) {
    PushCompressor compressor(c);
    const int64_t n = 8192;
    std::vector<double> truth(size_t(n), 0.0), delivered(size_t(n), 0.0);
    for (uint32_t step = 0; step < 50; ++step) {
      Tensor g = Tensor::zeros(DType::F32, {64, 128});
      std::vector<float> v = randomValues(n, 100 + step);
      std::memcpy(g.rawData(), v.data(), size_t(n) * 4);
      Tensor enc;
      rpc::PushEncoding e = rpc::PUSH_DENSE;
      ASSERT_TRUE(compressor.compress("W:grad/part_1", g, &enc, &e));
      EXPECT_EQ(e, c.kind == PushCompression::Kind::kTopK ? rpc::PUSH_TOP_K
                                                          : rpc::PUSH_ONE_BIT);
      const std::vector<float> d = decoded(e, enc, n);
      for (int64_t i = 0; i < n; ++i) {
        truth[size_t(i)] += v[size_t(i)];
        delivered[size_t(i)] += d[size_t(i)];
      }
    }
    const std::vector<float> r = compressor.residual("W:grad/part_1");
    ASSERT_EQ(int64_t(r.size()), n);
    double worst = 0, kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      worst = std::max(worst, std::fabs(delivered[size_t(i)] + r[size_t(i)] -
                                        truth[size_t(i)]));
      kept += std::fabs(r[size_t(i)]);
    }
    EXPECT_LT(worst, 1e-3) << "decoded + residual = the gradients' sum";
    EXPECT_GT(kept, 0.0) << "something is still held back";
  }
}

TEST(PushCompression, SmallOddOrNonFiniteValuesGoAsTheyAre) {
  PushCompressor compressor({PushCompression::Kind::kTopK, 0.01});
  Tensor enc;
  rpc::PushEncoding e = rpc::PUSH_DENSE;
  Tensor small = Tensor::zeros(DType::F32, {kMinCompressedValues - 1});
  EXPECT_FALSE(compressor.compress("b:grad", small, &enc, &e));
  Tensor big = Tensor::zeros(DType::F32, {kMinCompressedValues});
  EXPECT_TRUE(compressor.compress("W:grad", big, &enc, &e));
  EXPECT_FALSE(compressor.compress("W:apply_momentum:3", big, &enc, &e))
      << "not a gradient";
  EXPECT_FALSE(compressor.compress("emb:grad:0#rows", big, &enc, &e));
  Tensor f64 = Tensor::zeros(DType::F64, {kMinCompressedValues});
  EXPECT_FALSE(compressor.compress("V:grad", f64, &enc, &e));
  big.data<float>()[7] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(compressor.compress("U:grad", big, &enc, &e));
  EXPECT_TRUE(compressor.residual("U:grad").empty());
  EXPECT_TRUE(isDenseGradientKey("fully_connected/kernel:grad"));
  EXPECT_TRUE(isDenseGradientKey("W:grad/part_2"));
  EXPECT_FALSE(isDenseGradientKey(":grad"));
  EXPECT_FALSE(isDenseGradientKey("emb:grad:0"));
}

TEST(PushCompression, MalformedEncodingsAreRefused) {
  std::vector<float> dense(100, 0.0f);
  auto refusal = [&](rpc::PushEncoding e, const std::vector<uint32_t> &words) {
    Status s = decodePush(e, words.data(), words.size() * 4, dense.data(), 100);
    EXPECT_FALSE(s.isOk());
    return s.message();
  };
  const uint32_t one = 0x3f800000u; // 1.0f
  EXPECT_EQ(refusal(rpc::PUSH_TOP_K, {5, 3, one, one}),
            "top-k index 1 is 3, after 5 (indices must ascend, below 100)");
  EXPECT_EQ(refusal(rpc::PUSH_TOP_K, {100, one}),
            "top-k index 0 is 100 (indices must ascend, below 100)");
  EXPECT_EQ(refusal(rpc::PUSH_TOP_K, {1, 2, one}),
            "a top-k encoding of 100 values cannot be 12 bytes");
  // 100 values: one scale and 4 words of bits, 20 bytes.
  EXPECT_EQ(refusal(rpc::PUSH_ONE_BIT, {one, 0, 0, 0}),
            "a 1-bit encoding of 100 values cannot be 16 bytes");
  EXPECT_EQ(refusal(rpc::PUSH_ONE_BIT, {0xbf800000u, 0, 0, 0, 0}),
            "1-bit scale 0 is -1 (a scale is finite and not negative)");
  EXPECT_EQ(refusal(rpc::PushEncoding(9), {0}),
            "an unknown encoding (9) of 100 values cannot be 4 bytes");
  EXPECT_TRUE(decodePush(rpc::PUSH_ONE_BIT,
                         std::vector<uint32_t>{one, 1, 0, 0, 8}.data(), 20,
                         dense.data(), 100)
                  .isOk());
  EXPECT_EQ(dense[0], -1.0f);
  EXPECT_EQ(dense[1], 1.0f);
  EXPECT_EQ(dense[98], 1.0f);
  EXPECT_EQ(dense[99], -1.0f) << "bit 3 of word 3";
}

TEST(PushCompression, ParsesTheFlag) {
  PushCompression c;
  ASSERT_TRUE(parsePushCompression("topk:0.01", &c).isOk());
  EXPECT_EQ(c.kind, PushCompression::Kind::kTopK);
  EXPECT_EQ(c.ratio, 0.01);
  ASSERT_TRUE(parsePushCompression("onebit", &c).isOk());
  EXPECT_EQ(c.kind, PushCompression::Kind::kOneBit);
  for (const char *bad : {"topk", "topk:", "topk:0", "topk:0.5", "topk:1e-3x",
                          "topk:nan", "1bit", ""}) {
    Status s = parsePushCompression(bad, &c);
    EXPECT_FALSE(s.isOk()) << bad;
    EXPECT_EQ(s.message(),
              "--compress-push expects topk:R with 0 < R < 0.5 (the share of "
              "each gradient's values sent, e.g. topk:0.01) or onebit, got '" +
                  std::string(bad) + "'");
  }
}

} // namespace
} // namespace dtf::dist
