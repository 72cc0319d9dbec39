// Dropout and its gradient, with masks from a counter-based generator so
// that the gradient recomputes the forward pass's mask instead of storing it.
#include "runtime/kernels/DropoutMask.h"
#include "runtime/kernels/cpu/KernelUtil.h"

namespace dtf::cpu {
namespace {

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
    const uint64_t key = dropout::streamKey(
        ctx.seed(), uint64_t(ctx.getInt("seed", 0)), ctx.step());
    // The mask is the same for f32 and f64 (compared in float), so an f64
    // model drops the same elements as its f32 twin.
    const float r = float(rate);
    const T scale = T(1.0 / (1.0 - rate));
    const T *px = x.data<T>();
    T *po = out->data<T>();
    // A tower's share of a batch (batchRows() examples from batchOffset()
    // on) takes the elements those examples have in the whole batch's mask
    // (dropout::firstElement). The generated dropout kernels draw the same
    // mask from the same key and first element (DropoutMask.h).
    const int64_t first =
        dropout::firstElement(x.shape(), ctx.batchOffset(), ctx.batchRows());
    parallelFor(ctx.threadPool(), x.numElements(), kExpensiveGrain,
                [&](int64_t lo, int64_t hi) {
                  for (int64_t i = lo; i < hi; ++i)
                    po[i] = dropout::uniformAt(key, first + i) >= r
                                ? px[i] * scale
                                : T(0);
                });
    return Status::ok();
  });
}

Status dropoutKernel(KernelContext &ctx) {
  return dropoutLike(ctx, dtf::ops::kDropout);
}
Status dropoutGradKernel(KernelContext &ctx) {
  return dropoutLike(ctx, dtf::ops::kDropoutGrad);
}

} // namespace

void registerRandomKernels(KernelRegistry &registry) {
  registry.add(dtf::ops::kDropout, dropoutKernel);
  registry.add(dtf::ops::kDropoutGrad, dropoutGradKernel);
}

} // namespace dtf::cpu
