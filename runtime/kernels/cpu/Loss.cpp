// Softmax, log-softmax, the two softmax cross-entropy losses, and their
// gradients. Every normalization subtracts the maximum first, so large
// logits neither overflow nor lose the small terms.
#include "runtime/kernels/cpu/KernelUtil.h"

#include <cmath>
#include <limits>
#include <type_traits>

namespace dtf::cpu {
namespace {

// A tensor seen as [outer, n, inner] around the normalized axis: every
// (outer, inner) pair is one lane of n elements, `inner` apart.
struct Lanes {
  int64_t outer = 1, n = 1, inner = 1;
  int64_t count() const { return outer * inner; }
  int64_t base(int64_t lane) const {
    return (lane / inner) * n * inner + lane % inner;
  }
};

Status lanesOf(const KernelContext &ctx, const char *name, const Tensor &x,
               Lanes *l) {
  if (x.rank() == 0)
    return errorStatus(name, " expects a tensor of rank 1 or more, got ",
                       x.describe());
  int axis = 0;
  DTF_RETURN_IF_ERROR(
      normalizeAxis(name, ctx.getInt("axis", -1), x.rank(), &axis));
  *l = Lanes{};
  for (int d = 0; d < axis; ++d)
    l->outer *= x.dim(d);
  l->n = x.dim(axis);
  for (int d = axis + 1; d < x.rank(); ++d)
    l->inner *= x.dim(d);
  return Status::ok();
}

// Runs f(contig, base, stride) for every lane, where contig is
// std::true_type when the lane is contiguous (the last axis).
template <typename F>
void forEachLane(const Lanes &l, ThreadPool *pool, F &&f) {
  const int64_t grain =
      std::max<int64_t>(1, kExpensiveGrain / std::max<int64_t>(l.n, 1));
  parallelFor(pool, l.count(), grain, [&](int64_t lo, int64_t hi) {
    for (int64_t lane = lo; lane < hi; ++lane) {
      if (l.inner == 1)
        f(std::true_type{}, lane * l.n, int64_t(1));
      else
        f(std::false_type{}, l.base(lane), l.inner);
    }
  });
}

#define AT(i) (Contig ? (i) : (i)*s)

// max(x) and sum(exp(x - max)) over one lane.
template <bool Contig, typename T>
inline void maxAndSum(const T *x, int64_t n, int64_t s, T *maxOut, T *sumOut) {
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < n; ++i)
    m = std::max(m, x[AT(i)]);
  T sum = T(0);
  for (int64_t i = 0; i < n; ++i)
    sum += std::exp(x[AT(i)] - m);
  *maxOut = m;
  *sumOut = sum;
}

Status softmaxLike(KernelContext &ctx, const char *name, bool log) {
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 1));
  const Tensor &x = ctx.input(0);
  DTF_RETURN_IF_ERROR(requireFloat(name, "logits", x));
  Lanes l;
  DTF_RETURN_IF_ERROR(lanesOf(ctx, name, x, &l));
  return dispatchFloat(name, x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    Tensor *out;
    DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, x.dtype(), x.shape(), &out));
    const T *px = x.data<T>();
    T *py = out->data<T>();
    const int64_t n = l.n;
    forEachLane(l, ctx.threadPool(), [&](auto contig, int64_t base, int64_t s) {
      constexpr bool Contig = decltype(contig)::value;
      const T *xl = px + base;
      T *yl = py + base;
      T m = -std::numeric_limits<T>::infinity();
      for (int64_t i = 0; i < n; ++i)
        m = std::max(m, xl[AT(i)]);
      if (log) {
        T sum = T(0);
        for (int64_t i = 0; i < n; ++i)
          sum += std::exp(xl[AT(i)] - m);
        const T lse = m + std::log(sum);
        for (int64_t i = 0; i < n; ++i)
          yl[AT(i)] = xl[AT(i)] - lse;
      } else {
        T sum = T(0);
        for (int64_t i = 0; i < n; ++i) {
          T e = std::exp(xl[AT(i)] - m);
          yl[AT(i)] = e;
          sum += e;
        }
        const T inv = T(1) / sum;
        for (int64_t i = 0; i < n; ++i)
          yl[AT(i)] *= inv;
      }
    });
    return Status::ok();
  });
}

Status softmaxKernel(KernelContext &ctx) {
  return softmaxLike(ctx, dtf::ops::kSoftmax, false);
}
Status logSoftmaxKernel(KernelContext &ctx) {
  return softmaxLike(ctx, dtf::ops::kLogSoftmax, true);
}

// softmax_grad(dy, y) = y * (dy - sum(dy * y)); log_softmax_grad(dy, y) =
// dy - exp(y) * sum(dy), with y the forward result, along `axis`.
Status softmaxLikeGrad(KernelContext &ctx, const char *name, bool log) {
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 2));
  const Tensor &dy = ctx.input(0), &y = ctx.input(1);
  DTF_RETURN_IF_ERROR(requireFloat(name, "dy", dy));
  DTF_RETURN_IF_ERROR(requireSameDType(name, dy, y));
  DTF_RETURN_IF_ERROR(requireSameShape(name, "dy", dy, "y", y));
  Lanes l;
  DTF_RETURN_IF_ERROR(lanesOf(ctx, name, y, &l));
  return dispatchFloat(name, dy.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    Tensor *out;
    DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, dy.dtype(), y.shape(), &out));
    const T *pdy = dy.data<T>(), *py = y.data<T>();
    T *pdx = out->data<T>();
    const int64_t n = l.n;
    forEachLane(l, ctx.threadPool(), [&](auto contig, int64_t base, int64_t s) {
      constexpr bool Contig = decltype(contig)::value;
      const T *g = pdy + base, *yl = py + base;
      T *dx = pdx + base;
      T acc = T(0);
      if (log) {
        for (int64_t i = 0; i < n; ++i)
          acc += g[AT(i)];
        for (int64_t i = 0; i < n; ++i)
          dx[AT(i)] = g[AT(i)] - std::exp(yl[AT(i)]) * acc;
      } else {
        for (int64_t i = 0; i < n; ++i)
          acc += g[AT(i)] * yl[AT(i)];
        for (int64_t i = 0; i < n; ++i)
          dx[AT(i)] = yl[AT(i)] * (g[AT(i)] - acc);
      }
    });
    return Status::ok();
  });
}

Status softmaxGradKernel(KernelContext &ctx) {
  return softmaxLikeGrad(ctx, dtf::ops::kSoftmaxGrad, false);
}
Status logSoftmaxGradKernel(KernelContext &ctx) {
  return softmaxLikeGrad(ctx, dtf::ops::kLogSoftmaxGrad, true);
}

// logits [..., C] as rows of C classes; the loss has shape [...].
Status lossRows(const char *name, const Tensor &logits, int64_t *rows,
                int64_t *classes, std::vector<int64_t> *lossShape) {
  DTF_RETURN_IF_ERROR(requireFloat(name, "logits", logits));
  if (logits.rank() == 0)
    return errorStatus(name,
                       " expects logits [..., classes] of rank 1 or more, got ",
                       logits.describe());
  *classes = logits.dim(-1);
  if (*classes == 0)
    return errorStatus(name, " expects at least one class, got logits ",
                       logits.describe());
  *rows = logits.numElements() / *classes;
  lossShape->assign(logits.shape().begin(), logits.shape().end() - 1);
  return Status::ok();
}

Status checkDenseLabels(const char *name, const Tensor &logits,
                        const Tensor &labels) {
  DTF_RETURN_IF_ERROR(requireSameDType(name, logits, labels));
  return requireSameShape(name, "logits", logits, "labels", labels);
}

// Class indices must lie in [0, C): the first one outside is the error.
Status checkSparseLabels(const char *name, const Tensor &labels,
                         const std::vector<int64_t> &lossShape,
                         int64_t classes) {
  if (labels.shape() != lossShape)
    return errorStatus(
        name, " expects labels of shape ", shapeString(lossShape),
        " (the logits without the class dimension), got ", labels.describe());
  return dispatchIndex(name, labels.dtype(), [&](auto tag) -> Status {
    using I = typename decltype(tag)::type;
    const I *p = labels.data<I>();
    for (int64_t i = 0; i < labels.numElements(); ++i)
      if (p[i] < 0 || p[i] >= classes)
        return errorStatus(name, ": label ", int64_t(p[i]), " of example ", i,
                           " is outside the classes [0, ", classes, ")");
    return Status::ok();
  });
}

// Label i of row r as int64, for i32 or i64 labels.
inline int64_t labelAt(const Tensor &labels, int64_t r) {
  return labels.dtype() == DType::I32 ? labels.data<int32_t>()[r]
                                      : labels.data<int64_t>()[r];
}

// loss = sum_c labels_c * (logsumexp(x) - x_c) = -sum_c labels_c log
// softmax(x)_c.
Status softmaxCrossEntropyKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kSoftmaxCrossEntropy;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 2));
  const Tensor &logits = ctx.input(0), &labels = ctx.input(1);
  int64_t rows = 0, c = 0;
  std::vector<int64_t> lossShape;
  DTF_RETURN_IF_ERROR(lossRows(name, logits, &rows, &c, &lossShape));
  DTF_RETURN_IF_ERROR(checkDenseLabels(name, logits, labels));
  return dispatchFloat(name, logits.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    Tensor *out;
    DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, logits.dtype(), lossShape, &out));
    const T *px = logits.data<T>(), *pl = labels.data<T>();
    T *po = out->data<T>();
    parallelFor(ctx.threadPool(), rows,
                std::max<int64_t>(1, kExpensiveGrain / c),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t r = lo; r < hi; ++r) {
                    const T *x = px + r * c, *y = pl + r * c;
                    T m = 0, sum = 0;
                    maxAndSum<true>(x, c, 1, &m, &sum);
                    const T lse = m + std::log(sum);
                    T loss = T(0);
                    for (int64_t i = 0; i < c; ++i)
                      loss += y[i] * (lse - x[i]);
                    po[r] = loss;
                  }
                });
    return Status::ok();
  });
}

// loss = logsumexp(x) - x_label.
Status sparseSoftmaxCrossEntropyKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kSparseSoftmaxCrossEntropy;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 2));
  const Tensor &logits = ctx.input(0), &labels = ctx.input(1);
  int64_t rows = 0, c = 0;
  std::vector<int64_t> lossShape;
  DTF_RETURN_IF_ERROR(lossRows(name, logits, &rows, &c, &lossShape));
  DTF_RETURN_IF_ERROR(checkSparseLabels(name, labels, lossShape, c));
  return dispatchFloat(name, logits.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    Tensor *out;
    DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, logits.dtype(), lossShape, &out));
    const T *px = logits.data<T>();
    T *po = out->data<T>();
    parallelFor(ctx.threadPool(), rows,
                std::max<int64_t>(1, kExpensiveGrain / c),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t r = lo; r < hi; ++r) {
                    const T *x = px + r * c;
                    T m = 0, sum = 0;
                    maxAndSum<true>(x, c, 1, &m, &sum);
                    po[r] = m + std::log(sum) - x[labelAt(labels, r)];
                  }
                });
    return Status::ok();
  });
}

// dlogits = dloss[..., None] * (softmax(logits) - target), where target is
// the dense labels or the one-hot of the sparse ones. For dense labels this is
// TensorFlow's gradient, exact when each row of labels sums to 1.
Status crossEntropyGrad(KernelContext &ctx, const char *name, bool sparse) {
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 3));
  const Tensor &dloss = ctx.input(0), &logits = ctx.input(1),
               &labels = ctx.input(2);
  int64_t rows = 0, c = 0;
  std::vector<int64_t> lossShape;
  DTF_RETURN_IF_ERROR(lossRows(name, logits, &rows, &c, &lossShape));
  DTF_RETURN_IF_ERROR(requireSameDType(name, logits, dloss));
  if (dloss.shape() != lossShape)
    return errorStatus(name, " expects dloss of shape ", shapeString(lossShape),
                       " (one loss per example), got ", dloss.describe());
  if (sparse)
    DTF_RETURN_IF_ERROR(checkSparseLabels(name, labels, lossShape, c));
  else
    DTF_RETURN_IF_ERROR(checkDenseLabels(name, logits, labels));
  return dispatchFloat(name, logits.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    Tensor *out;
    DTF_RETURN_IF_ERROR(
        ctx.allocateOutput(0, logits.dtype(), logits.shape(), &out));
    const T *px = logits.data<T>(), *pg = dloss.data<T>();
    T *pd = out->data<T>();
    parallelFor(ctx.threadPool(), rows,
                std::max<int64_t>(1, kExpensiveGrain / c),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t r = lo; r < hi; ++r) {
                    const T *x = px + r * c;
                    T *d = pd + r * c;
                    T m = 0, sum = 0;
                    maxAndSum<true>(x, c, 1, &m, &sum);
                    const T scale = pg[r] / sum;
                    for (int64_t i = 0; i < c; ++i)
                      d[i] = std::exp(x[i] - m) * scale;
                    if (sparse) {
                      d[labelAt(labels, r)] -= pg[r];
                    } else {
                      const T *y = labels.data<T>() + r * c;
                      for (int64_t i = 0; i < c; ++i)
                        d[i] -= pg[r] * y[i];
                    }
                  }
                });
    return Status::ok();
  });
}

Status softmaxCrossEntropyGradKernel(KernelContext &ctx) {
  return crossEntropyGrad(ctx, dtf::ops::kSoftmaxCrossEntropyGrad, false);
}
Status sparseSoftmaxCrossEntropyGradKernel(KernelContext &ctx) {
  return crossEntropyGrad(ctx, dtf::ops::kSparseSoftmaxCrossEntropyGrad, true);
}

#undef AT

} // namespace

void registerLossKernels(KernelRegistry &registry) {
  registry.add(dtf::ops::kSoftmax, softmaxKernel);
  registry.add(dtf::ops::kLogSoftmax, logSoftmaxKernel);
  registry.add(dtf::ops::kSoftmaxGrad, softmaxGradKernel);
  registry.add(dtf::ops::kLogSoftmaxGrad, logSoftmaxGradKernel);
  registry.add(dtf::ops::kSoftmaxCrossEntropy, softmaxCrossEntropyKernel);
  registry.add(dtf::ops::kSparseSoftmaxCrossEntropy,
               sparseSoftmaxCrossEntropyKernel);
  registry.add(dtf::ops::kSoftmaxCrossEntropyGrad, softmaxCrossEntropyGradKernel);
  registry.add(dtf::ops::kSparseSoftmaxCrossEntropyGrad,
               sparseSoftmaxCrossEntropyGradKernel);
}

} // namespace dtf::cpu
