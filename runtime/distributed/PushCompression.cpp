// Compressed pushes: top-k and 1-bit codecs with error feedback, and their
// decoding on the ps.
#include "runtime/distributed/PushCompression.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>

namespace dtf::dist {

Status parsePushCompression(const std::string &text, PushCompression *out) {
  if (text == "onebit") {
    *out = {PushCompression::Kind::kOneBit, 0};
    return Status::ok();
  }
  if (text.rfind("topk:", 0) == 0 && text.size() > 5) {
    const char *start = text.c_str() + 5;
    char *end = nullptr;
    const double r = std::strtod(start, &end);
    if (end && *end == '\0' && std::isfinite(r) && r > 0 && r < 0.5) {
      *out = {PushCompression::Kind::kTopK, r};
      return Status::ok();
    }
  }
  return errorStatus("--compress-push expects topk:R with 0 < R < 0.5 (the "
                     "share of each gradient's values sent, e.g. topk:0.01) "
                     "or onebit, got '",
                     text, "'");
}

bool isDenseGradientKey(const std::string &key) {
  const size_t part = key.rfind("/part_");
  const std::string base =
      part == std::string::npos ? key : key.substr(0, part);
  return base.size() > 5 && base.compare(base.size() - 5, 5, ":grad") == 0;
}

int64_t topKCount(int64_t n, double ratio) {
  const int64_t k = int64_t(std::ceil(ratio * double(n)));
  return std::clamp<int64_t>(k, 1, std::max<int64_t>(n, 1));
}

size_t oneBitBytes(int64_t n) {
  const int64_t chunks = (n + kOneBitChunk - 1) / kOneBitChunk;
  return size_t(chunks) * 4 + size_t((n + 31) / 32) * 4;
}

bool encodedSizeFits(rpc::PushEncoding encoding, size_t size, int64_t n) {
  switch (encoding) {
  case rpc::PUSH_TOP_K:
    return size % 8 == 0 && int64_t(size / 8) <= n && n < (int64_t(1) << 32);
  case rpc::PUSH_ONE_BIT:
    return size == oneBitBytes(n);
  default:
    return false;
  }
}

namespace {

// The magnitude below which no value of `a` is among the k largest, and
// above which about 1.5 k are: a quantile of a sample of |a| (as Deep
// Gradient Compression estimates its threshold), so that the exact k-th
// largest is then found among the few candidates instead of all n values.
// 0 when the sample would be a large part of `a` (then all are candidates).
float candidateThreshold(const float *a, int64_t n, int64_t k) {
  const int64_t samples = std::max<int64_t>(
      16384, int64_t(std::ceil(200.0 * double(n) / double(k))));
  if (samples * 4 > n)
    return 0.0f;
  std::vector<float> sample(size_t(samples), 0.0f);
  uint64_t x = 0x9e3779b97f4a7c15ull; // a fixed sequence: runs repeat
  for (float &v : sample) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    v = std::fabs(a[int64_t(x % uint64_t(n))]);
  }
  const int64_t rank = std::min<int64_t>(
      samples - 1, int64_t(1.5 * double(k) * double(samples) / double(n)));
  std::nth_element(sample.begin(), sample.begin() + rank, sample.end(),
                   std::greater<float>());
  return sample[size_t(rank)];
}

} // namespace

Tensor encodeTopK(float *a, int64_t n, int64_t k) {
  // The candidates: every value at least the estimated threshold (all of
  // them when the estimate falls short of k, which the sample makes rare).
  std::vector<uint32_t> cand;
  const float estimate = candidateThreshold(a, n, k);
  if (estimate > 0) {
    cand.reserve(size_t(2 * k));
    for (int64_t i = 0; i < n; ++i)
      if (std::fabs(a[i]) >= estimate)
        cand.push_back(uint32_t(i));
  }
  if (int64_t(cand.size()) < k) {
    cand.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i)
      cand[size_t(i)] = uint32_t(i);
  }
  // The k-th largest magnitude among them (the k-th of all: every larger
  // value is a candidate), then every candidate above it and the first of
  // those equal to it, in index order (so the indices come out ascending).
  const int64_t m = int64_t(cand.size());
  std::vector<float> mag(size_t(m), 0.0f);
  for (int64_t j = 0; j < m; ++j)
    mag[size_t(j)] = std::fabs(a[cand[size_t(j)]]);
  std::nth_element(mag.begin(), mag.begin() + (m - k), mag.end());
  const float threshold = mag[size_t(m - k)];
  int64_t above = 0;
  for (int64_t j = 0; j < m; ++j)
    above += std::fabs(a[cand[size_t(j)]]) > threshold;
  int64_t ties = k - above;
  Tensor out = Tensor::allocate(DType::I32, {2 * k});
  uint32_t *index = reinterpret_cast<uint32_t *>(out.data<int32_t>());
  float *value = reinterpret_cast<float *>(index + k);
  int64_t j = 0;
  for (int64_t c = 0; c < m && j < k; ++c) {
    const uint32_t i = cand[size_t(c)];
    const float v = std::fabs(a[i]);
    if (v > threshold || (v == threshold && ties > 0)) {
      if (v == threshold)
        --ties;
      index[j] = i;
      value[j] = a[i];
      a[i] = 0.0f; // sent exactly: nothing of it stays behind
      ++j;
    }
  }
  return out;
}

Tensor encodeOneBit(float *a, int64_t n) {
  const int64_t chunks = (n + kOneBitChunk - 1) / kOneBitChunk;
  const int64_t words = (n + 31) / 32;
  Tensor out = Tensor::zeros(DType::I32, {chunks + words});
  float *scale = reinterpret_cast<float *>(out.data<int32_t>());
  uint32_t *bits = reinterpret_cast<uint32_t *>(out.data<int32_t>() + chunks);
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t lo = c * kOneBitChunk, hi = std::min(n, lo + kOneBitChunk);
    // The mean magnitude: the scale s that makes s * sign(a) closest to a
    // (summed in float lanes of 8, each at most 512 values: exact enough).
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = lo;
    for (; i + 8 <= hi; i += 8)
      for (int l = 0; l < 8; ++l)
        lane[l] += std::fabs(a[i + l]);
    double sum = 0;
    for (float l : lane)
      sum += l;
    for (; i < hi; ++i)
      sum += std::fabs(a[i]);
    const float s = float(sum / double(hi - lo));
    scale[c] = s;
    // Chunks are whole words (kOneBitChunk is a multiple of 32).
    for (int64_t w = lo / 32; w * 32 < hi; ++w) {
      const int64_t base = w * 32, end = std::min<int64_t>(32, hi - base);
      uint32_t word = 0;
      for (int64_t b = 0; b < end; ++b) {
        const float v = a[base + b];
        const bool negative = v < 0;
        word |= uint32_t(negative) << b;
        a[base + b] = v - (negative ? -s : s);
      }
      bits[w] = word;
    }
  }
  return out;
}

Status decodePush(rpc::PushEncoding encoding, const void *bytes, size_t size,
                  float *dense, int64_t n) {
  if (!encodedSizeFits(encoding, size, n))
    return errorStatus(encoding == rpc::PUSH_TOP_K ? "a top-k encoding"
                       : encoding == rpc::PUSH_ONE_BIT
                           ? "a 1-bit encoding"
                           : "an unknown encoding (" +
                                 std::to_string(int(encoding)) + ")",
                       " of ", n, " values cannot be ", size, " bytes");
  std::fill(dense, dense + n, 0.0f);
  if (encoding == rpc::PUSH_TOP_K) {
    const int64_t k = int64_t(size / 8);
    std::vector<uint32_t> index(static_cast<size_t>(k));
    std::memcpy(index.data(), bytes, size_t(k) * 4);
    const char *values = static_cast<const char *>(bytes) + size_t(k) * 4;
    for (int64_t j = 0; j < k; ++j) {
      if (index[size_t(j)] >= uint64_t(n) ||
          (j > 0 && index[size_t(j)] <= index[size_t(j - 1)]))
        return errorStatus("top-k index ", j, " is ", index[size_t(j)],
                           j > 0 ? ", after " +
                                       std::to_string(index[size_t(j - 1)])
                                 : std::string(),
                           " (indices must ascend, below ", n, ")");
      std::memcpy(&dense[index[size_t(j)]], values + size_t(j) * 4, 4);
    }
    return Status::ok();
  }
  const int64_t chunks = (n + kOneBitChunk - 1) / kOneBitChunk;
  std::vector<float> scale(static_cast<size_t>(chunks));
  std::memcpy(scale.data(), bytes, size_t(chunks) * 4);
  std::vector<uint32_t> bits(static_cast<size_t>((n + 31) / 32));
  std::memcpy(bits.data(),
              static_cast<const char *>(bytes) + size_t(chunks) * 4,
              bits.size() * 4);
  for (int64_t c = 0; c < chunks; ++c) {
    const float s = scale[size_t(c)];
    if (!std::isfinite(s) || s < 0)
      return errorStatus("1-bit scale ", c, " is ", s,
                         " (a scale is finite and not negative)");
    const int64_t lo = c * kOneBitChunk, hi = std::min(n, lo + kOneBitChunk);
    for (int64_t i = lo; i < hi; ++i)
      dense[i] = (bits[size_t(i / 32)] >> (i % 32)) & 1u ? -s : s;
  }
  return Status::ok();
}

bool PushCompressor::compress(const std::string &key, const Tensor &g,
                              Tensor *encoded, rpc::PushEncoding *encoding) {
  const int64_t n = g.numElements();
  if (!c_.enabled() || g.dtype() != DType::F32 || n < kMinCompressedValues ||
      n >= (int64_t(1) << 32) || !isDenseGradientKey(key))
    return false;
  const float *x = g.data<float>();
  // A gradient that is not finite goes as it is, so that the ps refuses it
  // as it refuses any other, and the residual stays finite.
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i]))
      return false;
  std::vector<float> *r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    r = &residuals_[key]; // nodes stay put: only this key's push touches it
  }
  if (int64_t(r->size()) != n)
    r->assign(size_t(n), 0.0f);
  float *a = r->data();
  for (int64_t i = 0; i < n; ++i)
    a[i] += x[i];
  if (c_.kind == PushCompression::Kind::kTopK) {
    *encoded = encodeTopK(a, n, topKCount(n, c_.ratio));
    *encoding = rpc::PUSH_TOP_K;
  } else {
    *encoded = encodeOneBit(a, n);
    *encoding = rpc::PUSH_ONE_BIT;
  }
  return true;
}

std::vector<float> PushCompressor::residual(const std::string &key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = residuals_.find(key);
  return it == residuals_.end() ? std::vector<float>() : it->second;
}

} // namespace dtf::dist
