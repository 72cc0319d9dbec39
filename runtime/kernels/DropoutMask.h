// The dropout mask's generator (counter-based SplitMix64), shared by the
// op-by-op kernels (cpu/Random.cpp) and by dtf-run's calls of generated
// dropout kernels, which it hands the stream key and the first element in a
// "dropout-key" word (GeneratedKernels.cpp, gpu/GpuDevice.cpp;
// docs/plan-format.md "Dropout kernels").
#pragma once

#include <cstdint>
#include <vector>

namespace dtf::dropout {

// SplitMix64's finalizer: a bijection on 64 bits with full avalanche.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The stream of one dropout op at one step: the run's seed, the op's `seed`
// attribute and the step, mixed. Element i of the mask is then the i-th
// output of SplitMix64 on that stream, so any element can be recomputed
// alone and in any order.
inline uint64_t streamKey(uint64_t runSeed, uint64_t opSeed, uint64_t step) {
  return mix64(mix64(mix64(runSeed ^ 0x243f6a8885a308d3ull) ^ opSeed) ^ step);
}

// SplitMix64's increment: element i of a stream mixes key + (i + 1) * this.
inline constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;

// A uniform float in [0, 1) with 24 random bits.
inline float uniformAt(uint64_t key, int64_t i) {
  uint64_t r = mix64(key + uint64_t(i + 1) * kGolden);
  return float(r >> 40) * (1.0f / 16777216.0f);
}

// The index in the whole batch's mask of element 0 of a tensor of `shape`
// that holds a tower's share of the batch: `rows` examples from `first` on
// (towers; 0 and 0 without them). An example's elements: the tensor's over
// the tower's examples when its first axis is a multiple of them (a
// [B * H, T, T] attention holds H rows per example), else a row's.
inline int64_t firstElement(const std::vector<int64_t> &shape, int64_t first,
                            int64_t rows) {
  int64_t elements = 1;
  for (int64_t d : shape)
    elements *= d;
  int64_t perExample = 0;
  if (!shape.empty() && rows > 0 && shape[0] % rows == 0)
    perExample = elements / rows;
  else if (!shape.empty() && shape[0] > 0)
    perExample = elements / shape[0];
  return first * perExample;
}

} // namespace dtf::dropout
