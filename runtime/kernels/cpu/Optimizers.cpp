// Optimizer updates, in place on the variable and its slots, with
// TensorFlow's formulas (the raw ops ApplyGradientDescent, ApplyMomentum,
// ApplyAdam, ApplyAdagradV2, ApplyRMSProp and ApplyCenteredRMSProp), plus
// clipping by global norm and moving averages.
//
// Hyperparameters are attributes (learning_rate, momentum, ...) or, for the
// learning rate (and Adam's step), trailing scalar inputs that override the
// attribute. Every kernel leaves an alias of the updated variable in output 0
// when the executor asked for an output.
#include "runtime/kernels/cpu/KernelUtil.h"

#include <cmath>
#include <limits>
#include <optional>

namespace dtf::cpu {
namespace {

// A scalar hyperparameter: input `index` when there is one, else the
// attribute, else `dflt` (none: it is required).
Status hyper(const KernelContext &ctx, const char *name, int index,
             const char *attr, std::optional<double> dflt, double *out) {
  if (index >= 0 && index < ctx.numInputs()) {
    const Tensor &t = ctx.input(index);
    if (t.numElements() != 1)
      return errorStatus(name, " expects input ", index, " (", attr,
                         ") to be a scalar, got ", t.describe());
    switch (t.dtype()) {
    case DType::F32:
      *out = t.data<float>()[0];
      return Status::ok();
    case DType::F64:
      *out = t.data<double>()[0];
      return Status::ok();
    case DType::I32:
      *out = t.data<int32_t>()[0];
      return Status::ok();
    case DType::I64:
      *out = double(t.data<int64_t>()[0]);
      return Status::ok();
    default:
      return errorStatus(name, " expects input ", index, " (", attr,
                         ") to be f32, f64, i32 or i64, got ", t.describe());
    }
  }
  if (ctx.hasAttr(attr)) {
    *out = ctx.getFloat(attr);
    return Status::ok();
  }
  if (!dflt) {
    if (index >= 0)
      return errorStatus(name, " needs ", attr, " (an attribute, or input ",
                         index, " as a scalar tensor)");
    return errorStatus(name, " needs the ", attr, " attribute");
  }
  *out = *dflt;
  return Status::ok();
}

// The variable, its slots and the gradient: f32 or f64, all of one type.
Status checkOperands(const KernelContext &ctx, const char *name,
                     std::initializer_list<const char *> names) {
  const int n = static_cast<int>(names.size());
  if (ctx.numInputs() < n)
    return errorStatus(name, " expects at least ", n, " inputs, got ",
                       ctx.numInputs());
  const Tensor &var = ctx.input(0);
  DTF_RETURN_IF_ERROR(requireFloat(name, "a variable", var));
  int i = 0;
  for (const char *what : names) {
    const Tensor &t = ctx.input(i++);
    if (!t.defined())
      return errorStatus(name, ": ", what, " has no value");
    if (t.dtype() != var.dtype() || t.shape() != var.shape())
      return errorStatus(name, " expects ", what, " of the variable's type ",
                         var.describe(), ", got ", t.describe());
  }
  return Status::ok();
}

void aliasVariable(KernelContext &ctx) {
  if (ctx.numOutputs() >= 1)
    ctx.setOutput(0, ctx.mutableInput(0));
}

// Runs f(begin, end) over the variable's elements.
template <typename F> void forEachElement(KernelContext &ctx, F &&f) {
  parallelFor(ctx.threadPool(), ctx.input(0).numElements(), kCheapGrain, f);
}

template <typename T> T *mut(KernelContext &ctx, int i) {
  return ctx.mutableInput(i).data<T>();
}

// var -= lr * grad.
Status applySgdKernel(KernelContext &ctx) {
  const char *name = "dtf.apply_sgd";
  DTF_RETURN_IF_ERROR(checkOperands(ctx, name, {"var", "grad"}));
  double lr = 0;
  DTF_RETURN_IF_ERROR(hyper(ctx, name, 2, "learning_rate", std::nullopt, &lr));
  return dispatchFloat(name, ctx.input(0).dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    T *var = mut<T>(ctx, 0);
    const T *g = ctx.input(1).data<T>();
    const T a = T(lr);
    forEachElement(ctx, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        var[i] -= a * g[i];
    });
    aliasVariable(ctx);
    return Status::ok();
  });
}

// accum = accum * momentum + grad; var -= lr * accum, or with use_nesterov
// var -= lr * grad + lr * momentum * accum.
Status applyMomentumKernel(KernelContext &ctx) {
  const char *name = "dtf.apply_momentum";
  DTF_RETURN_IF_ERROR(checkOperands(ctx, name, {"var", "accum", "grad"}));
  double lr = 0, momentum = 0;
  DTF_RETURN_IF_ERROR(hyper(ctx, name, 3, "learning_rate", std::nullopt, &lr));
  DTF_RETURN_IF_ERROR(
      hyper(ctx, name, -1, "momentum", std::nullopt, &momentum));
  const bool nesterov = ctx.getBool("use_nesterov");
  return dispatchFloat(name, ctx.input(0).dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    T *var = mut<T>(ctx, 0), *accum = mut<T>(ctx, 1);
    const T *g = ctx.input(2).data<T>();
    const T a = T(lr), mu = T(momentum);
    forEachElement(ctx, [&](int64_t lo, int64_t hi) {
      if (nesterov) {
        for (int64_t i = lo; i < hi; ++i) {
          accum[i] = accum[i] * mu + g[i];
          var[i] -= g[i] * a + accum[i] * mu * a;
        }
      } else {
        for (int64_t i = lo; i < hi; ++i) {
          accum[i] = accum[i] * mu + g[i];
          var[i] -= accum[i] * a;
        }
      }
    });
    aliasVariable(ctx);
    return Status::ok();
  });
}

// With t = step + 1 (`step` counts the updates before this one: the global
// step, from input 5, the `step` attribute, or the context's step):
//   lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)
//   m += (grad - m) * (1 - beta1);  v += (grad^2 - v) * (1 - beta2)
//   var -= lr_t * m / (sqrt(v) + epsilon)
// or with use_nesterov var -= lr_t * (m * beta1 + (1 - beta1) * grad) /
// (sqrt(v) + epsilon). The powers are computed in double rather than kept as
// f32 slots.
Status applyAdamKernel(KernelContext &ctx) {
  const char *name = "dtf.apply_adam";
  DTF_RETURN_IF_ERROR(checkOperands(ctx, name, {"var", "m", "v", "grad"}));
  double lr = 0, beta1 = 0, beta2 = 0, epsilon = 0, step = 0;
  DTF_RETURN_IF_ERROR(hyper(ctx, name, 4, "learning_rate", std::nullopt, &lr));
  DTF_RETURN_IF_ERROR(hyper(ctx, name, -1, "beta1", 0.9, &beta1));
  DTF_RETURN_IF_ERROR(hyper(ctx, name, -1, "beta2", 0.999, &beta2));
  DTF_RETURN_IF_ERROR(hyper(ctx, name, -1, "epsilon", 1e-8, &epsilon));
  DTF_RETURN_IF_ERROR(hyper(ctx, name, 5, "step", double(ctx.step()), &step));
  if (step < 0)
    return errorStatus(name, " expects step >= 0 (updates so far), got ", step);
  const bool nesterov = ctx.getBool("use_nesterov");
  const double t = step + 1.0;
  return dispatchFloat(name, ctx.input(0).dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T lrT = T(lr * std::sqrt(1.0 - std::pow(beta2, t)) /
                    (1.0 - std::pow(beta1, t)));
    const T b1 = T(beta1), b2 = T(beta2), eps = T(epsilon);
    T *var = mut<T>(ctx, 0), *m = mut<T>(ctx, 1), *v = mut<T>(ctx, 2);
    const T *g = ctx.input(3).data<T>();
    forEachElement(ctx, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        m[i] += (g[i] - m[i]) * (T(1) - b1);
        v[i] += (g[i] * g[i] - v[i]) * (T(1) - b2);
        const T num = nesterov ? m[i] * b1 + (T(1) - b1) * g[i] : m[i];
        var[i] -= lrT * num / (std::sqrt(v[i]) + eps);
      }
    });
    aliasVariable(ctx);
    return Status::ok();
  });
}

// accum += grad^2; var -= lr * grad / (sqrt(accum) + epsilon). epsilon
// defaults to 0, which is ApplyAdagrad (TF1's AdagradOptimizer).
Status applyAdagradKernel(KernelContext &ctx) {
  const char *name = "dtf.apply_adagrad";
  DTF_RETURN_IF_ERROR(checkOperands(ctx, name, {"var", "accum", "grad"}));
  double lr = 0, epsilon = 0;
  DTF_RETURN_IF_ERROR(hyper(ctx, name, 3, "learning_rate", std::nullopt, &lr));
  DTF_RETURN_IF_ERROR(hyper(ctx, name, -1, "epsilon", 0.0, &epsilon));
  return dispatchFloat(name, ctx.input(0).dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    T *var = mut<T>(ctx, 0), *accum = mut<T>(ctx, 1);
    const T *g = ctx.input(2).data<T>();
    const T a = T(lr), eps = T(epsilon);
    forEachElement(ctx, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        accum[i] += g[i] * g[i];
        var[i] -= a * g[i] / (std::sqrt(accum[i]) + eps);
      }
    });
    aliasVariable(ctx);
    return Status::ok();
  });
}

// ms += (grad^2 - ms) * (1 - rho)
// mom = mom * momentum + lr * grad / sqrt(ms + epsilon); var -= mom
// With `centered` (inputs var, ms, mom, mg, grad): mg += (grad - mg) * (1 -
// rho) and the denominator is sqrt(ms - mg^2 + epsilon). rho (alias decay)
// defaults to 0.9, momentum to 0, epsilon to 1e-10 (TF1's RMSPropOptimizer).
Status applyRmspropKernel(KernelContext &ctx) {
  const char *name = "dtf.apply_rmsprop";
  const bool centered = ctx.getBool("centered");
  if (centered)
    DTF_RETURN_IF_ERROR(
        checkOperands(ctx, name, {"var", "ms", "mom", "mg", "grad"}));
  else
    DTF_RETURN_IF_ERROR(checkOperands(ctx, name, {"var", "ms", "mom", "grad"}));
  const int gradIndex = centered ? 4 : 3;
  double lr = 0, rho = 0, momentum = 0, epsilon = 0;
  DTF_RETURN_IF_ERROR(
      hyper(ctx, name, gradIndex + 1, "learning_rate", std::nullopt, &lr));
  DTF_RETURN_IF_ERROR(
      hyper(ctx, name, -1, "rho", ctx.getFloat("decay", 0.9), &rho));
  DTF_RETURN_IF_ERROR(hyper(ctx, name, -1, "momentum", 0.0, &momentum));
  DTF_RETURN_IF_ERROR(hyper(ctx, name, -1, "epsilon", 1e-10, &epsilon));
  return dispatchFloat(name, ctx.input(0).dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    T *var = mut<T>(ctx, 0), *ms = mut<T>(ctx, 1), *mom = mut<T>(ctx, 2);
    T *mg = centered ? mut<T>(ctx, 3) : nullptr;
    const T *g = ctx.input(gradIndex).data<T>();
    const T a = T(lr), r = T(rho), mu = T(momentum), eps = T(epsilon);
    forEachElement(ctx, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        ms[i] += (g[i] * g[i] - ms[i]) * (T(1) - r);
        T denom = ms[i] + eps;
        if (centered) {
          mg[i] += (g[i] - mg[i]) * (T(1) - r);
          denom = ms[i] - mg[i] * mg[i] + eps;
        }
        mom[i] = mom[i] * mu + a * g[i] / std::sqrt(denom);
        var[i] -= mom[i];
      }
    });
    aliasVariable(ctx);
    return Status::ok();
  });
}

// Outputs 0..N-1 are the N gradients scaled by clip_norm / max(norm,
// clip_norm), where norm = sqrt(sum of every squared element); output N is
// norm itself (f32, rank 0). A norm that is not finite gives NaN
// everywhere, as TensorFlow's clip_by_global_norm.
Status globalNormClipKernel(KernelContext &ctx) {
  const char *name = "dtf.global_norm_clip";
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 1, INT32_MAX));
  double clip = 0;
  DTF_RETURN_IF_ERROR(hyper(ctx, name, -1, "clip_norm", std::nullopt, &clip));
  if (!(clip > 0.0))
    return errorStatus(name, " expects clip_norm > 0, got ", clip);
  const int n = ctx.numInputs();
  double sumSq = 0.0;
  for (int k = 0; k < n; ++k) {
    const Tensor &g = ctx.input(k);
    DTF_RETURN_IF_ERROR(requireFloat(name, "gradients", g));
    DTF_RETURN_IF_ERROR(dispatchFloat(name, g.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *p = g.data<T>();
      double acc[8] = {};
      int64_t i = 0, count = g.numElements();
      for (; i + 8 <= count; i += 8)
        for (int j = 0; j < 8; ++j)
          acc[j] += double(p[i + j]) * p[i + j];
      for (; i < count; ++i)
        acc[0] += double(p[i]) * p[i];
      for (double a : acc)
        sumSq += a;
      return Status::ok();
    }));
  }
  const double norm = std::sqrt(sumSq);
  const double scale = std::isfinite(norm)
                           ? clip / std::max(norm, clip)
                           : std::numeric_limits<double>::quiet_NaN();
  for (int k = 0; k < n; ++k) {
    const Tensor &g = ctx.input(k);
    DTF_RETURN_IF_ERROR(dispatchFloat(name, g.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      Tensor *out;
      DTF_RETURN_IF_ERROR(ctx.allocateOutput(k, g.dtype(), g.shape(), &out));
      const T *p = g.data<T>();
      T *q = out->data<T>();
      const T s = T(scale);
      parallelFor(ctx.threadPool(), g.numElements(), kCheapGrain,
                  [&](int64_t lo, int64_t hi) {
                    for (int64_t i = lo; i < hi; ++i)
                      q[i] = p[i] * s;
                  });
      return Status::ok();
    }));
  }
  Tensor *normOut;
  DTF_RETURN_IF_ERROR(ctx.allocateOutput(n, DType::F32, {}, &normOut));
  normOut->data<float>()[0] = float(norm);
  return Status::ok();
}

// avg -= (avg - var) * (1 - decay), TensorFlow's assign_moving_average
// without zero debiasing; decay is the attribute or input 2.
Status movingAverageUpdateKernel(KernelContext &ctx) {
  const char *name = "dtf.moving_average_update";
  DTF_RETURN_IF_ERROR(checkOperands(ctx, name, {"avg", "var"}));
  double decay = 0;
  DTF_RETURN_IF_ERROR(hyper(ctx, name, 2, "decay", std::nullopt, &decay));
  return dispatchFloat(name, ctx.input(0).dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    T *avg = mut<T>(ctx, 0);
    const T *v = ctx.input(1).data<T>();
    const T oneMinus = T(1.0 - decay);
    forEachElement(ctx, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        avg[i] -= (avg[i] - v[i]) * oneMinus;
    });
    aliasVariable(ctx);
    return Status::ok();
  });
}

} // namespace

void registerOptimizerKernels(KernelRegistry &registry) {
  registry.add("dtf.apply_sgd", applySgdKernel);
  registry.add("dtf.apply_momentum", applyMomentumKernel);
  registry.add("dtf.apply_adam", applyAdamKernel);
  registry.add("dtf.apply_adagrad", applyAdagradKernel);
  registry.add("dtf.apply_rmsprop", applyRmspropKernel);
  registry.add("dtf.global_norm_clip", globalNormClipKernel);
  registry.add("dtf.moving_average_update", movingAverageUpdateKernel);
}

} // namespace dtf::cpu
