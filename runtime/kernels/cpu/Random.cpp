// Dropout and its gradient, with masks from a counter-based generator so
// that the gradient recomputes the forward pass's mask instead of storing it.
#include "runtime/kernels/cpu/KernelUtil.h"

namespace dtf::cpu {
namespace {

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

// A uniform float in [0, 1) with 24 random bits.
inline float uniformAt(uint64_t key, int64_t i) {
  uint64_t r = mix64(key + uint64_t(i + 1) * 0x9e3779b97f4a7c15ull);
  return float(r >> 40) * (1.0f / 16777216.0f);
}

// out = keep ? x / (1 - rate) : 0 where keep = uniform >= rate (TensorFlow's
// rule). dropout_grad applies the same mask to dy, so both share this.
Status dropoutLike(KernelContext &ctx, const char *name) {
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 1));
  const Tensor &x = ctx.input(0);
  DTF_RETURN_IF_ERROR(requireFloat(name, "an input", x));
  if (!ctx.hasAttr("rate"))
    return errorStatus(name, " needs the rate attribute");
  const double rate = ctx.getFloat("rate");
  if (!(rate >= 0.0 && rate < 1.0))
    return errorStatus(name, " expects a rate in [0, 1), got ", rate);
  return dispatchFloat(name, x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    Tensor *out;
    DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, x.dtype(), x.shape(), &out));
    const uint64_t key =
        streamKey(ctx.seed(), uint64_t(ctx.getInt("seed", 0)), ctx.step());
    // The mask is the same for f32 and f64 (compared in float), so an f64
    // model drops the same elements as its f32 twin.
    const float r = float(rate);
    const T scale = T(1.0 / (1.0 - rate));
    const T *px = x.data<T>();
    T *po = out->data<T>();
    // A tower's share of a batch (batchRows() examples from batchOffset()
    // on) takes the elements those examples have in the whole batch's mask.
    // An example's elements: the tensor's over the tower's examples when its
    // first axis is a multiple of them (a [B * H, T, T] attention holds H
    // rows per example), else a row's.
    const int64_t examples = ctx.batchRows();
    int64_t perExample = 0;
    if (x.rank() > 0 && examples > 0 && x.dim(0) % examples == 0)
      perExample = x.numElements() / examples;
    else if (x.rank() > 0 && x.dim(0) > 0)
      perExample = x.numElements() / x.dim(0);
    const int64_t first = ctx.batchOffset() * perExample;
    parallelFor(ctx.threadPool(), x.numElements(), kExpensiveGrain,
                [&](int64_t lo, int64_t hi) {
                  for (int64_t i = lo; i < hi; ++i)
                    po[i] =
                        uniformAt(key, first + i) >= r ? px[i] * scale : T(0);
                });
    return Status::ok();
  });
}

Status dropoutKernel(KernelContext &ctx) {
  return dropoutLike(ctx, "dtf.dropout");
}
Status dropoutGradKernel(KernelContext &ctx) {
  return dropoutLike(ctx, "dtf.dropout_grad");
}

} // namespace

void registerRandomKernels(KernelRegistry &registry) {
  registry.add("dtf.dropout", dropoutKernel);
  registry.add("dtf.dropout_grad", dropoutGradKernel);
}

} // namespace dtf::cpu
