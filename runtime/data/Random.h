// Random numbers that are the same on every machine and standard library.
//
// The <random> engines are specified bit for bit, but its distributions are not
// (libstdc++ and libc++ give different uniform_int_distribution results), so
// the data pipeline draws from the engines' raw output only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace dtf::data {

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny generator whose every seed,
/// even 0, 1, 2, ..., gives an independent-looking stream; used to derive seeds
/// and to make synthetic examples without keeping a generator per example.
class SplitMix64 {
public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  /// Uniform in [-1, 1), on a grid of 2^-23, so exact in float32.
  float nextSigned() {
    return static_cast<float>(static_cast<int64_t>(next() >> 40) -
                              (int64_t(1) << 23)) *
           (1.0f / float(1 << 23));
  }

private:
  uint64_t state_;
};

/// A seed for stream `stream` of the generator family `seed`.
inline uint64_t deriveSeed(uint64_t seed, uint64_t stream) {
  SplitMix64 mix(seed ^ (stream * 0xd1b54a32d192ed03ull));
  mix.next();
  return mix.next();
}

/// Uniform in [0, bound), bound > 0, by rejection (no modulo bias).
inline uint64_t uniformBelow(std::mt19937_64 &engine, uint64_t bound) {
  // Values below `threshold` would make the low residues more likely.
  uint64_t threshold = (0 - bound) % bound;
  while (true) {
    uint64_t r = engine();
    if (r >= threshold)
      return r % bound;
  }
}

/// Fisher–Yates (Durstenfeld's form) shuffle of `items` with `engine`.
template <typename T>
void shuffle(std::vector<T> &items, std::mt19937_64 &engine) {
  for (size_t i = items.size(); i > 1; --i) {
    size_t j = static_cast<size_t>(uniformBelow(engine, i));
    std::swap(items[i - 1], items[j]);
  }
}

/// The order of examples 0..size-1 in epoch `epoch` of a run seeded with
/// `seed`: a permutation drawn by Fisher–Yates from std::mt19937_64 seeded with
/// deriveSeed(seed, epoch). Each epoch stands alone, so a run resumed at epoch
/// k sees the same orders as one that ran through.
inline std::vector<uint64_t> epochOrder(uint64_t size, uint64_t seed,
                                        uint64_t epoch) {
  std::vector<uint64_t> order(size);
  for (uint64_t i = 0; i < size; ++i)
    order[i] = i;
  std::mt19937_64 engine(deriveSeed(seed, epoch));
  shuffle(order, engine);
  return order;
}

} // namespace dtf::data
