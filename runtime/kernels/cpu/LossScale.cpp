// mixed_float16's dynamic loss scale (TensorFlow's LossScaleOptimizer): the
// gradients divided by the scale with a finiteness check, and the scale's
// schedule. dtf.skip_updates_unless is the executor's (it skips nodes).
#include "runtime/kernels/cpu/KernelUtil.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

namespace dtf::cpu {
namespace {

Status requireScalar(const char *name, const char *what, const Tensor &t,
                     DType dtype) {
  if (t.dtype() != dtype || t.numElements() != 1 || t.rank() != 0)
    return errorStatus(name, " expects ", what, " as a ", dtypeName(dtype),
                       " scalar, got ", t.describe());
  return Status::ok();
}

// Inputs: the N gradients, then the scale (f32 scalar). Output 0: whether
// every unscaled element is finite (bool scalar); outputs 1..N: each
// gradient divided by the scale, in its dtype. A gradient multiplied by a
// finite scale of at least 1 is finite exactly when it was before the
// division, so one pass divides and checks.
Status unscaleGradientsKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kUnscaleGradients;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 2, INT32_MAX));
  const int n = ctx.numInputs() - 1;
  const Tensor &scaleTensor = ctx.input(n);
  DTF_RETURN_IF_ERROR(
      requireScalar(name, "the scale", scaleTensor, DType::F32));
  const float scale = scaleTensor.data<float>()[0];
  if (!(scale > 0) || !std::isfinite(scale))
    return errorStatus(name, " expects a positive finite scale, got ", scale);
  std::atomic<bool> finite{true};
  for (int k = 0; k < n; ++k) {
    const Tensor &g = ctx.input(k);
    DTF_RETURN_IF_ERROR(requireFloat(name, "gradients", g));
    DTF_RETURN_IF_ERROR(dispatchFloat(name, g.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      Tensor *out;
      DTF_RETURN_IF_ERROR(
          ctx.allocateOutput(k + 1, g.dtype(), g.shape(), &out));
      const T *p = g.data<T>();
      T *q = out->data<T>();
      const T s = T(scale);
      parallelFor(ctx.threadPool(), g.numElements(), kCheapGrain,
                  [&](int64_t lo, int64_t hi) {
                    bool ok = true;
                    for (int64_t i = lo; i < hi; ++i) {
                      q[i] = p[i] / s;
                      ok &= std::isfinite(q[i]);
                    }
                    if (!ok)
                      finite.store(false, std::memory_order_relaxed);
                  });
      return Status::ok();
    }));
  }
  Tensor *flag;
  DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, DType::Bool, {}, &flag));
  flag->data<bool>()[0] = finite.load();
  return Status::ok();
}

// Inputs: the scale (f32 scalar variable), the count of finite steps (i64
// scalar variable), finite (bool scalar); attribute growth_steps. TensorFlow
// 2's DynamicLossScale.update: finite: count + 1, and at growth_steps the
// scale doubles (kept when the double is not finite) and the count restarts;
// not finite: the scale halves, never below 1, and the count restarts.
Status adjustLossScaleKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kAdjustLossScale;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 3));
  DTF_RETURN_IF_ERROR(
      requireScalar(name, "the scale", ctx.input(0), DType::F32));
  DTF_RETURN_IF_ERROR(requireScalar(name, "the count of finite steps",
                                    ctx.input(1), DType::I64));
  DTF_RETURN_IF_ERROR(requireScalar(name, "finite", ctx.input(2), DType::Bool));
  const int64_t growth = ctx.getInt("growth_steps", 0);
  if (growth < 1)
    return errorStatus(name, " expects growth_steps >= 1, got ", growth);
  float &scale = ctx.mutableInput(0).data<float>()[0];
  int64_t &count = ctx.mutableInput(1).data<int64_t>()[0];
  if (ctx.input(2).data<bool>()[0]) {
    if (++count >= growth) {
      const float doubled = scale * 2.0f;
      if (std::isfinite(doubled))
        scale = doubled;
      count = 0;
    }
  } else {
    scale = std::max(scale / 2.0f, 1.0f);
    count = 0;
  }
  return Status::ok();
}

} // namespace

void registerLossScaleKernels(KernelRegistry &registry) {
  registry.add(dtf::ops::kUnscaleGradients, unscaleGradientsKernel);
  registry.add(dtf::ops::kAdjustLossScale, adjustLossScaleKernel);
}

} // namespace dtf::cpu
