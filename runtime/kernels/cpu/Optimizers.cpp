// Optimizer updates, in place on the variable and its slots, with
// TensorFlow's formulas (the raw ops ApplyGradientDescent, ApplyMomentum,
// ApplyAdam, ApplyAdagradV2, ApplyFtrlV2, ApplyRMSProp and
// ApplyCenteredRMSProp), plus clipping by global norm and moving averages.
//
// Hyperparameters are attributes (learning_rate, momentum, ...) or, for the
// learning rate (and Adam's step), trailing scalar inputs that override the
// attribute. Every kernel leaves an alias of the updated variable in output 0
// when the executor asked for an output.
#include "runtime/kernels/cpu/KernelUtil.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

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
                     const std::vector<const char *> &names) {
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

// The gradient of a dense update (`grad`, the variable's shape) or of a
// sparse one (pairs of indices and rows from input `first` on), and how an
// update rule visits the variable: rule(i, g) updates element i with its
// gradient g.
//
// Dense: every element; with the `lazy` attribute (the ps side of a sparse
// update, whose gradient travels dense) only the rows whose gradient is not
// all zero. Sparse: the rows present, each once, with the rows of duplicate
// ids summed first (in order within a pair, then pair by pair, so that the
// sum is the one dtf.gather_grad and dtf.add would make).
template <typename T> struct SparseRows {
  std::vector<int64_t> ids; // unique, ascending
  std::vector<T> sum;       // ids.size() rows, each row's gradient summed
};

template <typename T>
Status sumSparseRows(const KernelContext &ctx, const char *name, int first,
                     SparseRows<T> *out) {
  const Tensor &var = ctx.input(0);
  if (var.rank() < 1)
    return errorStatus(name, " expects a variable with rows, got ",
                       var.describe());
  const int64_t rows = var.dim(0);
  const int64_t width = var.numElements() / std::max<int64_t>(rows, 1);
  if (ctx.numInputs() <= first || (ctx.numInputs() - first) % 2 != 0)
    return errorStatus(name, " expects pairs of (indices, rows) from input ",
                       first, ", got ", ctx.numInputs() - first, " inputs");
  struct Entry {
    int64_t id;
    int pair;
    const T *row;
  };
  // A dynamic table's updates skip the first row of each shard (the
  // reserved row that ids without a row read: dtf.dynamic_rows).
  std::vector<int64_t> reserved;
  if (ctx.hasAttr("dynamic_shards")) {
    const int64_t parts = std::max<int64_t>(ctx.getInt("dynamic_shards"), 1);
    for (int64_t k = 0, at = 0; k < parts && at < rows; ++k) {
      reserved.push_back(at);
      at += rows / parts + (k < rows % parts ? 1 : 0);
    }
  }
  std::vector<Entry> entries;
  for (int k = first; k < ctx.numInputs(); k += 2) {
    const Tensor &indices = ctx.input(k), &values = ctx.input(k + 1);
    std::vector<int64_t> expected = indices.shape();
    expected.insert(expected.end(), var.shape().begin() + 1, var.shape().end());
    if (values.dtype() != var.dtype() || values.shape() != expected)
      return errorStatus(name, " expects rows of type ", dtypeName(var.dtype()),
                         shapeString(expected),
                         " (the indices' shape, then a row's) in input ",
                         k + 1, ", got ", values.describe());
    DTF_RETURN_IF_ERROR(
        dispatchIndex(name, indices.dtype(), [&](auto tag) -> Status {
          using I = typename decltype(tag)::type;
          const I *idx = indices.data<I>();
          const T *v = values.data<T>();
          for (int64_t i = 0; i < indices.numElements(); ++i) {
            if (idx[i] < 0 || idx[i] >= rows)
              return errorStatus(name, ": index ", int64_t(idx[i]),
                                 " at position ", i, " of input ", k,
                                 " is outside [0, ", rows, ")");
            if (!reserved.empty() &&
                std::binary_search(reserved.begin(), reserved.end(),
                                   int64_t(idx[i])))
              continue;
            entries.push_back({int64_t(idx[i]), k, v + i * width});
          }
          return Status::ok();
        }));
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry &x, const Entry &y) { return x.id < y.id; });
  std::vector<T> &sum = out->sum, partial(size_t(width), T(0));
  for (size_t e = 0; e < entries.size();) {
    const int64_t id = entries[e].id;
    const size_t base = sum.size();
    sum.resize(base + size_t(width), T(0));
    T *acc = sum.data() + base;
    bool firstPair = true;
    while (e < entries.size() && entries[e].id == id) {
      const int pair = entries[e].pair;
      std::fill(partial.begin(), partial.end(), T(0));
      for (; e < entries.size() && entries[e].id == id &&
             entries[e].pair == pair;
           ++e)
        for (int64_t j = 0; j < width; ++j)
          partial[size_t(j)] += entries[e].row[j];
      for (int64_t j = 0; j < width; ++j)
        acc[j] = firstPair ? partial[size_t(j)] : acc[j] + partial[size_t(j)];
      firstPair = false;
    }
    out->ids.push_back(id);
  }
  return Status::ok();
}

template <typename T, typename Rule>
Status visitEach(KernelContext &ctx, const char *name, bool sparse,
                 int gradIndex, int firstPair, Rule &&rule) {
  const Tensor &var = ctx.input(0);
  const int64_t n = var.numElements();
  const int64_t rows = var.rank() ? var.dim(0) : 1;
  const int64_t width = n / std::max<int64_t>(rows, 1);
  if (sparse) {
    SparseRows<T> present;
    DTF_RETURN_IF_ERROR(sumSparseRows<T>(ctx, name, firstPair, &present));
    const T *sum = present.sum.data();
    parallelFor(ctx.threadPool(), int64_t(present.ids.size()),
                std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(width, 1)),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t u = lo; u < hi; ++u) {
                    const int64_t at = present.ids[size_t(u)] * width;
                    for (int64_t j = 0; j < width; ++j)
                      rule(at + j, sum[u * width + j]);
                  }
                });
    return Status::ok();
  }
  const T *g = ctx.input(gradIndex).data<T>();
  if (!ctx.getBool("lazy") || var.rank() == 0) {
    parallelFor(ctx.threadPool(), n, kCheapGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        rule(i, g[i]);
    });
    return Status::ok();
  }
  parallelFor(ctx.threadPool(), rows,
              std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(width, 1)),
              [&](int64_t lo, int64_t hi) {
                for (int64_t r = lo; r < hi; ++r) {
                  const T *gr = g + r * width;
                  if (std::all_of(gr, gr + width, [](T x) { return x == T(0); }))
                    continue;
                  for (int64_t j = 0; j < width; ++j)
                    rule(r * width + j, gr[j]);
                }
              });
  return Status::ok();
}

// visitGradient, with Keras 3's decoupled weight decay when the update has
// a `weight_decay`: each element visited first becomes var - var * wd * lr
// (in T, as Keras computes it in the variable's dtype), then takes its
// update; the rows a sparse (or lazy) update skips are not decayed.
template <typename T, typename Rule>
Status visitGradient(KernelContext &ctx, const char *name, bool sparse,
                     int gradIndex, int firstPair, double lr, Rule &&rule) {
  const double decay = ctx.getFloat("weight_decay", 0.0);
  if (!(decay >= 0.0))
    return errorStatus(name, " expects weight_decay >= 0, got ", decay);
  if (decay == 0.0)
    return visitEach<T>(ctx, name, sparse, gradIndex, firstPair, rule);
  T *var = mut<T>(ctx, 0);
  const T wd = T(decay), a = T(lr);
  return visitEach<T>(ctx, name, sparse, gradIndex, firstPair,
                      [&](int64_t i, T g) {
                        var[i] = var[i] - var[i] * wd * a;
                        rule(i, g);
                      });
}

// The operands of an update: dense ones take the variable, its slots and
// the gradient (all of one type); sparse ones the variable and its slots,
// with the pairs checked when the rows are summed.
Status checkUpdateOperands(const KernelContext &ctx, const char *name,
                           bool sparse, std::vector<const char *> names) {
  if (!sparse)
    names.push_back("grad");
  return checkOperands(ctx, name, names);
}

// var -= lr * grad. Inputs: var, grad, lr (sparse: var, lr, pairs).
Status applySgd(KernelContext &ctx, bool sparse) {
  const char *name = sparse ? dtf::ops::kSparseApplySgd : dtf::ops::kApplySgd;
  DTF_RETURN_IF_ERROR(checkUpdateOperands(ctx, name, sparse, {"var"}));
  double lr = 0;
  DTF_RETURN_IF_ERROR(
      hyper(ctx, name, sparse ? 1 : 2, "learning_rate", std::nullopt, &lr));
  return dispatchFloat(name, ctx.input(0).dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    T *var = mut<T>(ctx, 0);
    const T a = T(lr);
    DTF_RETURN_IF_ERROR(visitGradient<T>(
        ctx, name, sparse, 1, 2, lr, [&](int64_t i, T g) { var[i] -= a * g; }));
    aliasVariable(ctx);
    return Status::ok();
  });
}

// accum = accum * momentum + grad; var -= lr * accum, or with use_nesterov
// var -= lr * grad + lr * momentum * accum. Inputs: var, accum, grad, lr
// (sparse: var, accum, lr, pairs).
Status applyMomentum(KernelContext &ctx, bool sparse) {
  const char *name =
      sparse ? dtf::ops::kSparseApplyMomentum : dtf::ops::kApplyMomentum;
  DTF_RETURN_IF_ERROR(
      checkUpdateOperands(ctx, name, sparse, {"var", "accum"}));
  double lr = 0, momentum = 0;
  DTF_RETURN_IF_ERROR(
      hyper(ctx, name, sparse ? 2 : 3, "learning_rate", std::nullopt, &lr));
  DTF_RETURN_IF_ERROR(
      hyper(ctx, name, -1, "momentum", std::nullopt, &momentum));
  const bool nesterov = ctx.getBool("use_nesterov");
  return dispatchFloat(name, ctx.input(0).dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    T *var = mut<T>(ctx, 0), *accum = mut<T>(ctx, 1);
    const T a = T(lr), mu = T(momentum);
    Status s = nesterov
                   ? visitGradient<T>(ctx, name, sparse, 2, 3, lr,
                                      [&](int64_t i, T g) {
                                        accum[i] = accum[i] * mu + g;
                                        var[i] -= g * a + accum[i] * mu * a;
                                      })
                   : visitGradient<T>(ctx, name, sparse, 2, 3, lr,
                                      [&](int64_t i, T g) {
                                        accum[i] = accum[i] * mu + g;
                                        var[i] -= accum[i] * a;
                                      });
    DTF_RETURN_IF_ERROR(s);
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
// f32 slots. Inputs: var, m, v, grad, lr, step (sparse: var, m, v, lr, step,
// pairs: lazy Adam, the rows present only).
Status applyAdam(KernelContext &ctx, bool sparse) {
  const char *name = sparse ? dtf::ops::kSparseApplyAdam : dtf::ops::kApplyAdam;
  DTF_RETURN_IF_ERROR(
      checkUpdateOperands(ctx, name, sparse, {"var", "m", "v"}));
  const int lrAt = sparse ? 3 : 4;
  double lr = 0, beta1 = 0, beta2 = 0, epsilon = 0, step = 0;
  DTF_RETURN_IF_ERROR(hyper(ctx, name, lrAt, "learning_rate", std::nullopt, &lr));
  DTF_RETURN_IF_ERROR(hyper(ctx, name, -1, "beta1", 0.9, &beta1));
  DTF_RETURN_IF_ERROR(hyper(ctx, name, -1, "beta2", 0.999, &beta2));
  DTF_RETURN_IF_ERROR(hyper(ctx, name, -1, "epsilon", 1e-8, &epsilon));
  DTF_RETURN_IF_ERROR(
      hyper(ctx, name, lrAt + 1, "step", double(ctx.step()), &step));
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
    DTF_RETURN_IF_ERROR(
        visitGradient<T>(ctx, name, sparse, 3, 5, lr, [&](int64_t i, T g) {
          m[i] += (g - m[i]) * (T(1) - b1);
          v[i] += (g * g - v[i]) * (T(1) - b2);
          const T num = nesterov ? m[i] * b1 + (T(1) - b1) * g : m[i];
          var[i] -= lrT * num / (std::sqrt(v[i]) + eps);
        }));
    aliasVariable(ctx);
    return Status::ok();
  });
}

// accum += grad^2; var -= lr * grad / (sqrt(accum) + epsilon). epsilon
// defaults to 0, which is ApplyAdagrad (TF1's AdagradOptimizer). Inputs:
// var, accum, grad, lr (sparse: var, accum, lr, pairs).
Status applyAdagrad(KernelContext &ctx, bool sparse) {
  const char *name = sparse ? dtf::ops::kSparseApplyAdagrad : dtf::ops::kApplyAdagrad;
  DTF_RETURN_IF_ERROR(
      checkUpdateOperands(ctx, name, sparse, {"var", "accum"}));
  double lr = 0, epsilon = 0;
  DTF_RETURN_IF_ERROR(
      hyper(ctx, name, sparse ? 2 : 3, "learning_rate", std::nullopt, &lr));
  DTF_RETURN_IF_ERROR(hyper(ctx, name, -1, "epsilon", 0.0, &epsilon));
  return dispatchFloat(name, ctx.input(0).dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    T *var = mut<T>(ctx, 0), *accum = mut<T>(ctx, 1);
    const T a = T(lr), eps = T(epsilon);
    DTF_RETURN_IF_ERROR(
        visitGradient<T>(ctx, name, sparse, 2, 3, lr, [&](int64_t i, T g) {
          accum[i] += g * g;
          var[i] -= a * g / (std::sqrt(accum[i]) + eps);
        }));
    aliasVariable(ctx);
    return Status::ok();
  });
}

// FTRL-proximal, TensorFlow's ApplyFtrlV2 with Keras' beta (Keras' Ftrl):
// with p = lr_power, g_s = grad + 2 * l2_shrinkage * var and l2' = l2 +
// beta / (2 * lr),
//   new_accum = accum + grad^2
//   linear += g_s - (new_accum^-p - accum^-p) / lr * var
//   var = |linear| > l1 ? (sign(linear) * l1 - linear) /
//                         (new_accum^-p / lr + 2 * l2') : 0
//   accum = new_accum
// in T, with square roots when p = -0.5 (as TensorFlow special-cases it).
// Every element visited is re-derived from its slots, so a dense update
// changes an element whose gradient is zero unless it was derived before
// (and l2_shrinkage is 0); the sparse form visits only the rows present.
// Inputs: var, accum, linear, grad, lr (sparse: var, accum, linear, lr,
// pairs).
Status applyFtrl(KernelContext &ctx, bool sparse) {
  const char *name = sparse ? dtf::ops::kSparseApplyFtrl : dtf::ops::kApplyFtrl;
  DTF_RETURN_IF_ERROR(
      checkUpdateOperands(ctx, name, sparse, {"var", "accum", "linear"}));
  double lr = 0, lrPower = 0, l1 = 0, l2 = 0, shrinkage = 0, beta = 0;
  DTF_RETURN_IF_ERROR(
      hyper(ctx, name, sparse ? 3 : 4, "learning_rate", std::nullopt, &lr));
  DTF_RETURN_IF_ERROR(hyper(ctx, name, -1, "lr_power", -0.5, &lrPower));
  DTF_RETURN_IF_ERROR(hyper(ctx, name, -1, "l1", 0.0, &l1));
  DTF_RETURN_IF_ERROR(hyper(ctx, name, -1, "l2", 0.0, &l2));
  DTF_RETURN_IF_ERROR(hyper(ctx, name, -1, "l2_shrinkage", 0.0, &shrinkage));
  DTF_RETURN_IF_ERROR(hyper(ctx, name, -1, "beta", 0.0, &beta));
  if (!(lr > 0))
    return errorStatus(name, " expects a positive learning rate, got ", lr);
  if (!(lrPower <= 0) || !(l1 >= 0) || !(l2 >= 0) || !(shrinkage >= 0) ||
      !(beta >= 0))
    return errorStatus(name, " expects lr_power <= 0 and l1, l2, "
                       "l2_shrinkage, beta >= 0, got ", lrPower, ", ", l1,
                       ", ", l2, ", ", shrinkage, ", ", beta);
  const bool halfPower = lrPower == -0.5;
  return dispatchFloat(name, ctx.input(0).dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    T *var = mut<T>(ctx, 0), *accum = mut<T>(ctx, 1), *linear = mut<T>(ctx, 2);
    const T a = T(lr), p = T(-lrPower), l1T = T(l1), two = T(2);
    const T twoShrink = two * T(shrinkage);
    const T twoL2 = two * (T(l2) + T(beta) / (two * a));
    auto power = [&](T x) { return halfPower ? std::sqrt(x) : std::pow(x, p); };
    DTF_RETURN_IF_ERROR(
        visitGradient<T>(ctx, name, sparse, 3, 4, lr, [&](int64_t i, T g) {
          const T gs = g + twoShrink * var[i];
          const T newAccum = accum[i] + g * g;
          const T newPower = power(newAccum);
          linear[i] += gs - (newPower - power(accum[i])) / a * var[i];
          const T l = linear[i];
          const T sign = l > T(0) ? T(1) : l < T(0) ? T(-1) : T(0);
          var[i] = std::abs(l) > l1T
                       ? (sign * l1T - l) / (newPower / a + twoL2)
                       : T(0);
          accum[i] = newAccum;
        }));
    aliasVariable(ctx);
    return Status::ok();
  });
}

// ms += (grad^2 - ms) * (1 - rho)
// mom = mom * momentum + lr * grad / sqrt(ms + epsilon); var -= mom
// With `centered` (inputs var, ms, mom, mg, grad): mg += (grad - mg) * (1 -
// rho) and the denominator is sqrt(ms - mg^2 + epsilon). rho (alias decay)
// defaults to 0.9, momentum to 0, epsilon to 1e-10 (TF1's RMSPropOptimizer).
// Sparse (not centered): var, ms, mom, lr, pairs.
Status applyRmsprop(KernelContext &ctx, bool sparse) {
  const char *name = sparse ? dtf::ops::kSparseApplyRmsprop : dtf::ops::kApplyRmsprop;
  const bool centered = !sparse && ctx.getBool("centered");
  if (centered)
    DTF_RETURN_IF_ERROR(
        checkUpdateOperands(ctx, name, false, {"var", "ms", "mom", "mg"}));
  else
    DTF_RETURN_IF_ERROR(
        checkUpdateOperands(ctx, name, sparse, {"var", "ms", "mom"}));
  const int gradIndex = centered ? 4 : 3;
  double lr = 0, rho = 0, momentum = 0, epsilon = 0;
  DTF_RETURN_IF_ERROR(hyper(ctx, name, sparse ? 3 : gradIndex + 1,
                            "learning_rate", std::nullopt, &lr));
  DTF_RETURN_IF_ERROR(
      hyper(ctx, name, -1, "rho", ctx.getFloat("decay", 0.9), &rho));
  DTF_RETURN_IF_ERROR(hyper(ctx, name, -1, "momentum", 0.0, &momentum));
  DTF_RETURN_IF_ERROR(hyper(ctx, name, -1, "epsilon", 1e-10, &epsilon));
  return dispatchFloat(name, ctx.input(0).dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    T *var = mut<T>(ctx, 0), *ms = mut<T>(ctx, 1), *mom = mut<T>(ctx, 2);
    T *mg = centered ? mut<T>(ctx, 3) : nullptr;
    const T a = T(lr), r = T(rho), mu = T(momentum), eps = T(epsilon);
    DTF_RETURN_IF_ERROR(visitGradient<T>(
        ctx, name, sparse, gradIndex, 4, lr, [&](int64_t i, T g) {
          ms[i] += (g * g - ms[i]) * (T(1) - r);
          T denom = ms[i] + eps;
          if (centered) {
            mg[i] += (g - mg[i]) * (T(1) - r);
            denom = ms[i] - mg[i] * mg[i] + eps;
          }
          mom[i] = mom[i] * mu + a * g / std::sqrt(denom);
          var[i] -= mom[i];
        }));
    aliasVariable(ctx);
    return Status::ok();
  });
}

// Outputs 0..N-1 are the N gradients scaled by clip_norm / max(norm,
// clip_norm), where norm = sqrt(sum of every squared element); output N is
// norm itself (f32, rank 0). A norm that is not finite gives NaN
// everywhere, as TensorFlow's clip_by_global_norm.
Status globalNormClipKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kGlobalNormClip;
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
  const char *name = dtf::ops::kMovingAverageUpdate;
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

// var -= (var - value) * (1 - momentum): a moving statistic of a value the
// step computed (batch_norm's moving mean and variance). Inputs: var, value.
Status assignMovingAverageKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kAssignMovingAverage;
  DTF_RETURN_IF_ERROR(checkOperands(ctx, name, {"var", "value"}));
  double momentum = 0;
  DTF_RETURN_IF_ERROR(hyper(ctx, name, -1, "momentum", std::nullopt, &momentum));
  return dispatchFloat(name, ctx.input(0).dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    T *var = mut<T>(ctx, 0);
    const T *value = ctx.input(1).data<T>();
    const T oneMinus = T(1.0 - momentum);
    forEachElement(ctx, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        var[i] -= (var[i] - value[i]) * oneMinus;
    });
    aliasVariable(ctx);
    return Status::ok();
  });
}

template <Status (*Apply)(KernelContext &, bool), bool Sparse>
Status kernelOf(KernelContext &ctx) {
  return Apply(ctx, Sparse);
}

} // namespace

void registerOptimizerKernels(KernelRegistry &registry) {
  // Each optimizer's dense and sparse forms share one update rule.
  registry.add(dtf::ops::kApplySgd, kernelOf<applySgd, false>);
  registry.add(dtf::ops::kSparseApplySgd, kernelOf<applySgd, true>);
  registry.add(dtf::ops::kApplyMomentum, kernelOf<applyMomentum, false>);
  registry.add(dtf::ops::kSparseApplyMomentum, kernelOf<applyMomentum, true>);
  registry.add(dtf::ops::kApplyAdam, kernelOf<applyAdam, false>);
  registry.add(dtf::ops::kSparseApplyAdam, kernelOf<applyAdam, true>);
  registry.add(dtf::ops::kApplyAdagrad, kernelOf<applyAdagrad, false>);
  registry.add(dtf::ops::kSparseApplyAdagrad, kernelOf<applyAdagrad, true>);
  registry.add(dtf::ops::kApplyFtrl, kernelOf<applyFtrl, false>);
  registry.add(dtf::ops::kSparseApplyFtrl, kernelOf<applyFtrl, true>);
  registry.add(dtf::ops::kApplyRmsprop, kernelOf<applyRmsprop, false>);
  registry.add(dtf::ops::kSparseApplyRmsprop, kernelOf<applyRmsprop, true>);
  registry.add(dtf::ops::kGlobalNormClip, globalNormClipKernel);
  registry.add(dtf::ops::kMovingAverageUpdate, movingAverageUpdateKernel);
  registry.add(dtf::ops::kAssignMovingAverage, assignMovingAverageKernel);
}

} // namespace dtf::cpu
