// Compressed pushes (dtf-run --compress-push): the top-k and 1-bit codecs of
// a dense f32 gradient, the worker's error feedback (what a push did not
// carry is added to the next gradient), and the ps's decoding.
#pragma once

#include "runtime/core/Tensor.h"
#include "schema/Status.h"

#include "service.pb.h"

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace dtf::dist {

/// What --compress-push asks for.
struct PushCompression {
  enum class Kind { kNone, kTopK, kOneBit };
  Kind kind = Kind::kNone;
  double ratio = 0; // top-k: the share of a gradient's values sent
  bool enabled() const { return kind != Kind::kNone; }
};

/// "topk:R" (0 < R < 0.5: beyond that top-k is no smaller than f32) or
/// "onebit"; an error saying what is accepted otherwise.
Status parsePushCompression(const std::string &text, PushCompression *out);

/// Gradients of fewer values go as they are (biases, small kernels: the
/// bytes saved would not pay for the error they add).
inline constexpr int64_t kMinCompressedValues = 4096;
/// 1-bit: the values that share one scale (a multiple of 32: chunks are
/// whole words of bits). Smaller chunks follow the gradient's magnitude
/// more closely (a row of zeros decodes to zeros): the MLP of
/// models/mlp.dtf reached 0.784 test accuracy at 300 sync steps with 4096,
/// 0.813 with 1024 and 0.811 with 256 (f32: 0.846), for 3% more bytes.
inline constexpr int64_t kOneBitChunk = 1024;

/// Whether a push key is a dense gradient's ("VAR:grad", or a shard's
/// "VAR:grad/part_K"): the only values an encoding may carry.
bool isDenseGradientKey(const std::string &key);

/// The values top-k sends of `n` at ratio `ratio`: ceil(ratio * n), at
/// least 1.
int64_t topKCount(int64_t n, double ratio);
/// The bytes of each encoding: top-k of `k` values, 1-bit of `n`.
inline size_t topKBytes(int64_t k) { return size_t(k) * 8; }
size_t oneBitBytes(int64_t n);
/// Whether `size` bytes can be `encoding`'s form of `n` values.
bool encodedSizeFits(rpc::PushEncoding encoding, size_t size, int64_t n);

/// Top-k: the `k` values of `a` largest in magnitude (ties: the lowest
/// indices), as [k u32 indices, ascending][k f32 values] in I32 words; `a`
/// becomes the residual (the kept values zero). `n` < 2^32.
Tensor encodeTopK(float *a, int64_t n, int64_t k);
/// 1-bit: per chunk of kOneBitChunk values the mean magnitude m, then one
/// bit per value (set: negative), as [chunks f32 scales][ceil(n / 32) u32
/// words, value i in bit i % 32 of word i / 32]; the value decodes to -m
/// or +m, and `a` becomes the residual (a - decoded).
Tensor encodeOneBit(float *a, int64_t n);

/// Decodes `size` bytes of `encoding` into `dense` (n values); an error
/// saying what is malformed (indices out of order or range, a scale that is
/// not finite and non-negative, a size that fits no encoding of n values).
Status decodePush(rpc::PushEncoding encoding, const void *bytes, size_t size,
                  float *dense, int64_t n);

/// The worker's side: the residual of each dense gradient it compresses.
/// Pushes to several ps run at once; each key belongs to one of them.
class PushCompressor {
public:
  explicit PushCompressor(PushCompression c) : c_(c) {}

  /// `g` plus the residual of `key`, encoded, when `key` is a dense
  /// gradient's and `g` is f32, finite, of at least kMinCompressedValues
  /// values, and the encoding is smaller; the residual keeps the rest.
  /// False (nothing changed) when `g` goes as it is.
  bool compress(const std::string &key, const Tensor &g, Tensor *encoded,
                rpc::PushEncoding *encoding);

  /// The residual kept for `key` (empty when none).
  std::vector<float> residual(const std::string &key) const;

private:
  const PushCompression c_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::vector<float>> residuals_;
};

} // namespace dtf::dist
