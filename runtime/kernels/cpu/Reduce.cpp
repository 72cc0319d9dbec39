// Reductions (sum, mean, max, argmax) and their gradients (sum_to_shape,
// reduce_grad, max_reduce_grad).
#include "runtime/kernels/ColumnChunks.h"
#include "runtime/kernels/cpu/KernelUtil.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace dtf::cpu {
namespace {

template <typename T, ReduceKind K> struct Reducer {
  static T identity() {
    if constexpr (K == ReduceKind::Sum)
      return T(0);
    else if constexpr (std::is_floating_point_v<T>)
      return -std::numeric_limits<T>::infinity();
    else
      return std::numeric_limits<T>::lowest();
  }
  // Integer sums wrap; max propagates NaN.
  static T combine(T a, T b) {
    if constexpr (K == ReduceKind::Sum) {
      if constexpr (std::is_integral_v<T>)
        return T(std::make_unsigned_t<T>(a) + std::make_unsigned_t<T>(b));
      else
        return a + b;
    } else {
      return (b > a || b != b) ? b : a;
    }
  }
  // Sixteen independent accumulators, so that the loop vectorizes without
  // -ffast-math (and sums in a better order than one accumulator would).
  static T reduceContig(const T *x, int64_t n) {
    constexpr int kLanes = 16;
    T acc[kLanes];
    for (int j = 0; j < kLanes; ++j)
      acc[j] = identity();
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int j = 0; j < kLanes; ++j)
        acc[j] = combine(acc[j], x[i + j]);
    T r = identity();
    for (int j = 0; j < kLanes; ++j)
      r = combine(r, acc[j]);
    for (; i < n; ++i)
      r = combine(r, x[i]);
    return r;
  }
};

// The input with adjacent dims of the same kind (reduced or kept) merged and
// dims of size 1 dropped.
struct Collapsed {
  int rank = 0;
  int64_t dims[kMaxRank];
  bool reduced[kMaxRank];
  int64_t inStride[kMaxRank];
  int64_t outStride[kMaxRank];
  bool reducesAnything = false;
};

Collapsed collapse(const std::vector<int64_t> &shape,
                   const std::vector<bool> &reduced) {
  Collapsed c;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    if (c.rank > 0 && c.reduced[c.rank - 1] == reduced[d]) {
      c.dims[c.rank - 1] *= shape[d];
    } else {
      c.dims[c.rank] = shape[d];
      c.reduced[c.rank] = reduced[d];
      ++c.rank;
    }
  }
  int64_t in = 1, out = 1;
  for (int d = c.rank - 1; d >= 0; --d) {
    c.inStride[d] = in;
    in *= c.dims[d];
    c.outStride[d] = c.reduced[d] ? 0 : out;
    if (!c.reduced[d])
      out *= c.dims[d];
    c.reducesAnything = c.reducesAnything || c.reduced[d];
  }
  return c;
}

template <typename T, ReduceKind K>
void reduceRec(const Collapsed &c, int d, const T *in, T *out) {
  using R = Reducer<T, K>;
  const int64_t n = c.dims[d];
  if (d == c.rank - 1) {
    if (c.reduced[d]) {
      out[0] = R::combine(out[0], R::reduceContig(in, n));
    } else {
      for (int64_t j = 0; j < n; ++j)
        out[j] = R::combine(out[j], in[j]);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    reduceRec<T, K>(c, d + 1, in + i * c.inStride[d], out + i * c.outStride[d]);
}

// A column reduction [O, R, N] whose rows are cut into chunks
// (ColumnChunks.h): each chunk's partial row, from identity, rows in order;
// then each output, from identity, combines the partials in chunk order.
// The generated kernels' `cpu_columns_symbol` computes the same, in the same
// order (docs/kernels.md).
template <typename T, ReduceKind K>
void reduceColumnChunks(const T *in, int64_t outer, int64_t reduced,
                        int64_t inner, int64_t rows, T *out, ThreadPool *pool) {
  using R = Reducer<T, K>;
  const int64_t chunks = columnChunkCount(reduced, rows);
  // Reused across calls on this thread: no allocation per step.
  thread_local std::vector<T> scratch;
  scratch.resize(size_t(outer * chunks * inner));
  T *partials = scratch.data();
  parallelFor(pool, outer * chunks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t u = lo; u < hi; ++u) {
      const int64_t o = u / chunks, c = u % chunks;
      T *p = partials + u * inner;
      for (int64_t j = 0; j < inner; ++j)
        p[j] = R::identity();
      const int64_t end = std::min(reduced, (c + 1) * rows);
      for (int64_t r = c * rows; r < end; ++r) {
        const T *row = in + (o * reduced + r) * inner;
        for (int64_t j = 0; j < inner; ++j)
          p[j] = R::combine(p[j], row[j]);
      }
    }
  });
  parallelFor(pool, outer * inner, std::max<int64_t>(64, kCheapGrain / chunks),
              [&](int64_t lo, int64_t hi) {
                for (int64_t t = lo; t < hi; ++t) {
                  const int64_t o = t / inner, j = t % inner;
                  for (int64_t c = 0; c < chunks; ++c)
                    out[t] = R::combine(out[t],
                                        partials[(o * chunks + c) * inner + j]);
                }
              });
}

template <typename T, ReduceKind K>
void reduceImpl(const T *in, const std::vector<int64_t> &shape,
                const std::vector<bool> &reduced, T *out, ThreadPool *pool) {
  using R = Reducer<T, K>;
  const int64_t inCount = numElementsOf(shape);
  int64_t outCount = 1;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!reduced[d])
      outCount *= shape[d];
  for (int64_t i = 0; i < outCount; ++i)
    out[i] = R::identity();
  if (inCount == 0)
    return;
  const Collapsed c = collapse(shape, reduced);
  if (!c.reducesAnything) { // every reduced dim has size 1
    std::memcpy(out, in, size_t(inCount) * sizeof(T));
    return;
  }
  // Columns, [R, N] or [O, R, N]: rows cut into chunks where the outputs
  // are few (ColumnChunks.h).
  if ((c.rank == 2 && c.reduced[0]) || (c.rank == 3 && !c.reduced[0])) {
    const int64_t outer = c.rank == 3 ? c.dims[0] : 1;
    const int64_t rows = c.dims[c.rank - 2], cols = c.dims[c.rank - 1];
    const int64_t chunkRows = columnChunkRows(outer, rows, cols);
    if (chunkRows < rows) {
      reduceColumnChunks<T, K>(in, outer, rows, cols, chunkRows, out, pool);
      return;
    }
  }
  if (!c.reduced[0] && c.dims[0] >= 2) {
    // Blocks of the leading kept dim write disjoint outputs.
    const int64_t per = inCount / c.dims[0];
    parallelFor(pool, c.dims[0], std::max<int64_t>(1, kCheapGrain / per),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t i = lo; i < hi; ++i)
                    reduceRec<T, K>(c, 1, in + i * c.inStride[0],
                                    out + i * c.outStride[0]);
                });
    return;
  }
  if (c.rank == 1) { // everything: per-thread partial results
    const int64_t n = c.dims[0];
    int64_t blocks =
        pool ? std::min<int64_t>(pool->numThreads(), n / kCheapGrain) : 1;
    if (blocks <= 1) {
      out[0] = R::reduceContig(in, n);
      return;
    }
    T partial[64];
    blocks = std::min<int64_t>(blocks, 64);
    const int64_t chunk = (n + blocks - 1) / blocks;
    parallelFor(pool, blocks, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t b = lo; b < hi; ++b) {
        int64_t begin = b * chunk, end = std::min(n, begin + chunk);
        partial[b] =
            R::reduceContig(in + begin, std::max<int64_t>(end - begin, 0));
      }
    });
    T r = R::identity();
    for (int64_t b = 0; b < blocks; ++b)
      r = R::combine(r, partial[b]);
    out[0] = r;
    return;
  }
  if (c.rank == 2) { // [reduced, kept]: column blocks write disjoint outputs
    const int64_t rows = c.dims[0], cols = c.dims[1];
    parallelFor(pool, cols, std::max<int64_t>(64, kCheapGrain / rows),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t r = 0; r < rows; ++r) {
                    const T *row = in + r * cols;
                    for (int64_t j = lo; j < hi; ++j)
                      out[j] = R::combine(out[j], row[j]);
                  }
                });
    return;
  }
  reduceRec<T, K>(c, 0, in, out);
}

} // namespace

template <typename T>
void reduceInto(const T *in, const std::vector<int64_t> &shape,
                const std::vector<bool> &reduced, T *out, ReduceKind kind,
                ThreadPool *pool) {
  if (kind == ReduceKind::Sum)
    reduceImpl<T, ReduceKind::Sum>(in, shape, reduced, out, pool);
  else
    reduceImpl<T, ReduceKind::Max>(in, shape, reduced, out, pool);
}

template void reduceInto<float>(const float *, const std::vector<int64_t> &,
                                const std::vector<bool> &, float *, ReduceKind,
                                ThreadPool *);
template void reduceInto<double>(const double *, const std::vector<int64_t> &,
                                 const std::vector<bool> &, double *,
                                 ReduceKind, ThreadPool *);
template void reduceInto<int32_t>(const int32_t *, const std::vector<int64_t> &,
                                  const std::vector<bool> &, int32_t *,
                                  ReduceKind, ThreadPool *);
template void reduceInto<int64_t>(const int64_t *, const std::vector<int64_t> &,
                                  const std::vector<bool> &, int64_t *,
                                  ReduceKind, ThreadPool *);

namespace {

int64_t reducedCount(const std::vector<int64_t> &shape,
                     const std::vector<bool> &reduced) {
  int64_t n = 1;
  for (size_t d = 0; d < shape.size(); ++d)
    if (reduced[d])
      n *= shape[d];
  return n;
}

// sum, mean and max over `axes` (all when absent), keeping reduced dims as 1
// with `keep_dims`. The mean of integers truncates, as TensorFlow's does.
Status reduceKernel(KernelContext &ctx, const char *name, ReduceKind kind,
                    bool mean) {
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 1));
  const Tensor &x = ctx.input(0);
  std::vector<bool> reduced;
  DTF_RETURN_IF_ERROR(reductionFlags(ctx, name, x.rank(), &reduced));
  if (x.rank() > kMaxRank)
    return errorStatus(name, " supports tensors of rank up to ", kMaxRank,
                       ", got ", x.describe());
  return dispatchNumeric(name, x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    Tensor *out;
    DTF_RETURN_IF_ERROR(ctx.allocateOutput(
        0, x.dtype(),
        reducedShape(x.shape(), reduced, ctx.getBool("keep_dims")), &out));
    T *po = out->data<T>();
    reduceInto<T>(x.data<T>(), x.shape(), reduced, po, kind, ctx.threadPool());
    if (mean) {
      const int64_t count = reducedCount(x.shape(), reduced);
      for (int64_t i = 0; i < out->numElements(); ++i) {
        if constexpr (std::is_floating_point_v<T>)
          po[i] = po[i] / T(count);
        else
          po[i] = count == 0 ? T(0) : T(po[i] / T(count));
      }
    }
    return Status::ok();
  });
}

Status sumKernel(KernelContext &ctx) {
  return reduceKernel(ctx, dtf::ops::kSum, ReduceKind::Sum, false);
}
Status meanKernel(KernelContext &ctx) {
  return reduceKernel(ctx, dtf::ops::kMean, ReduceKind::Sum, true);
}
Status maxKernel(KernelContext &ctx) {
  return reduceKernel(ctx, dtf::ops::kMax, ReduceKind::Max, false);
}

// The index of the first largest element along `axis`; i64 unless out_dtype
// (or the output the executor placed) says i32.
Status argmaxKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kArgmax;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 1));
  const Tensor &x = ctx.input(0);
  int axis = 0;
  DTF_RETURN_IF_ERROR(
      normalizeAxis(name, ctx.getInt("axis", 0), x.rank(), &axis));
  DType outType = DType::F32;
  DTF_RETURN_IF_ERROR(resolveOutDType(ctx, name, 0, DType::I64, &outType));
  if (outType != DType::I32 && outType != DType::I64)
    return errorStatus(name, " gives i32 or i64 indices, not ",
                       dtypeName(outType));
  const int64_t n = x.dim(axis);
  std::vector<int64_t> outShape = x.shape();
  outShape.erase(outShape.begin() + axis);
  if (n == 0 && numElementsOf(outShape) != 0)
    return errorStatus(name, " over an empty axis ", axis, " of ",
                       x.describe());
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d)
    outer *= x.dim(d);
  for (int d = axis + 1; d < x.rank(); ++d)
    inner *= x.dim(d);
  return dispatchNumeric(name, x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    Tensor *out;
    DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, outType, outShape, &out));
    const T *px = x.data<T>();
    return dispatchIndex(name, outType, [&](auto itag) -> Status {
      using I = typename decltype(itag)::type;
      I *po = out->data<I>();
      parallelFor(ctx.threadPool(), outer,
                  std::max<int64_t>(1, kCheapGrain / (n * inner + 1)),
                  [&](int64_t lo, int64_t hi) {
                    for (int64_t o = lo; o < hi; ++o) {
                      const T *base = px + o * n * inner;
                      I *res = po + o * inner;
                      for (int64_t j = 0; j < inner; ++j) {
                        T best = base[j];
                        int64_t at = 0;
                        for (int64_t k = 1; k < n; ++k) {
                          T v = base[k * inner + j];
                          if (v > best) {
                            best = v;
                            at = k;
                          }
                        }
                        res[j] = I(at);
                      }
                    }
                  });
      return Status::ok();
    });
  });
}

// The gradient of broadcasting: sums dy over the dims in which `like` was
// stretched, giving a tensor of like's shape.
Status sumToShapeKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kSumToShape;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 2));
  const Tensor &dy = ctx.input(0), &like = ctx.input(1);
  const int pad = dy.rank() - like.rank();
  std::vector<bool> reduced(dy.rank(), false);
  bool ok = pad >= 0;
  for (int d = 0; ok && d < dy.rank(); ++d) {
    if (d < pad) {
      reduced[d] = true;
      continue;
    }
    int64_t l = like.dim(d - pad);
    if (l == 1)
      reduced[d] = dy.dim(d) != 1;
    else
      ok = l == dy.dim(d);
  }
  if (!ok)
    return errorStatus(name, ": ", like.describe(), " does not broadcast to ",
                       dy.describe(), ", so dy cannot be summed back to it");
  if (dy.rank() > kMaxRank)
    return errorStatus(name, " supports tensors of rank up to ", kMaxRank);
  return dispatchNumeric(name, dy.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    Tensor *out;
    DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, dy.dtype(), like.shape(), &out));
    reduceInto<T>(dy.data<T>(), dy.shape(), reduced, out->data<T>(),
                  ReduceKind::Sum, ctx.threadPool());
    return Status::ok();
  });
}

// The gradient of tile: dy viewed as [m0, x0, m1, x1, ...] (each of dy's
// sizes m times x's) and summed over the m's, in the order of a sum.
Status tileGradKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kTileGrad;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 2));
  const Tensor &dy = ctx.input(0), &x = ctx.input(1);
  bool ok = dy.rank() == x.rank() && dy.dtype() == x.dtype();
  std::vector<int64_t> view;
  std::vector<bool> reduced;
  for (int d = 0; ok && d < x.rank(); ++d) {
    const int64_t n = dy.dim(d), size = x.dim(d);
    ok = size == 0 ? n == 0 : n % size == 0;
    const int64_t m = size == 0 ? 1 : n / size;
    if (m != 1) {
      view.push_back(m);
      reduced.push_back(true);
    }
    if (size != 1 || m == 1) {
      view.push_back(size);
      reduced.push_back(false);
    }
  }
  if (!ok)
    return errorStatus(name, " expects dy of x's dtype and rank with each size "
                             "a multiple of x's, got ",
                       dy.describe(), " for ", x.describe());
  if (static_cast<int>(view.size()) > kMaxRank)
    return errorStatus(name, " supports up to ", kMaxRank,
                       " repeated or copied dimensions, got ", dy.describe(),
                       " for ", x.describe());
  return dispatchNumeric(name, dy.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    Tensor *out;
    DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, x.dtype(), x.shape(), &out));
    reduceInto<T>(dy.data<T>(), view, reduced, out->data<T>(), ReduceKind::Sum,
                  ctx.threadPool());
    return Status::ok();
  });
}

// dy reshaped to x's rank (reduced dims as 1), after checking it has the
// reduction's result shape.
Status keepDimsShape(const KernelContext &ctx, const char *name,
                     const Tensor &x, const Tensor &dy,
                     std::vector<bool> *reduced, std::vector<int64_t> *keep) {
  DTF_RETURN_IF_ERROR(reductionFlags(ctx, name, x.rank(), reduced));
  std::vector<int64_t> expected =
      reducedShape(x.shape(), *reduced, ctx.getBool("keep_dims"));
  if (dy.shape() != expected)
    return errorStatus(name, " expects dy of shape ", shapeString(expected),
                       " (the reduction of ", x.describe(), "), got ",
                       dy.describe());
  *keep = reducedShape(x.shape(), *reduced, true);
  return Status::ok();
}

// The gradient of sum (and of mean, with `mean`): dy broadcast back over the
// reduced axes, divided by the number of reduced elements for a mean.
Status reduceGradKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kReduceGrad;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 2));
  const Tensor &dy = ctx.input(0), &x = ctx.input(1);
  DTF_RETURN_IF_ERROR(requireFloat(name, "dy", dy));
  std::vector<bool> reduced;
  std::vector<int64_t> keep;
  DTF_RETURN_IF_ERROR(keepDimsShape(ctx, name, x, dy, &reduced, &keep));
  return dispatchFloat(name, dy.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    Tensor dyKeep = dy.reshaped(keep),
           target = shapeOnly(dy.dtype(), x.shape());
    BroadcastPlan plan;
    DTF_RETURN_IF_ERROR(BroadcastPlan::make(name, {&dyKeep, &target}, &plan));
    Tensor *dx;
    DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, dy.dtype(), x.shape(), &dx));
    T *pdx = dx->data<T>();
    broadcastCopy(plan, dy.data<T>(), pdx, ctx.threadPool());
    if (ctx.getBool("mean")) {
      const T scale = T(1) / T(reducedCount(x.shape(), reduced));
      for (int64_t i = 0; i < dx->numElements(); ++i)
        pdx[i] *= scale;
    }
    return Status::ok();
  });
}

// The gradient of max: dy goes to the elements equal to the maximum, split
// evenly among ties (TensorFlow's gradient of reduce_max does the same).
Status maxReduceGradKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kMaxReduceGrad;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 3));
  const Tensor &dy = ctx.input(0), &x = ctx.input(1), &y = ctx.input(2);
  DTF_RETURN_IF_ERROR(requireFloat(name, "dy", dy));
  DTF_RETURN_IF_ERROR(requireSameDType(name, dy, x));
  DTF_RETURN_IF_ERROR(requireSameShape(name, "dy", dy, "y", y));
  DTF_RETURN_IF_ERROR(requireSameDType(name, x, y));
  std::vector<bool> reduced;
  std::vector<int64_t> keep;
  DTF_RETURN_IF_ERROR(keepDimsShape(ctx, name, x, dy, &reduced, &keep));
  return dispatchFloat(name, dy.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    Tensor dyKeep = dy.reshaped(keep), yKeep = y.reshaped(keep);
    Tensor *dx;
    DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, dy.dtype(), x.shape(), &dx));
    T *pdx = dx->data<T>();
    // Pass 1: dx = (x == y) as 0/1; counts = the ties per output.
    BroadcastPlan plan;
    DTF_RETURN_IF_ERROR(BroadcastPlan::make(name, {&x, &yKeep}, &plan));
    const T *px = x.data<T>(), *py = y.data<T>();
    plan.forEachSegment(0, plan.numElements(),
                        [&](int64_t o, const int64_t *offs, int64_t len) {
                          const int64_t sy = plan.innerStride(1);
                          for (int64_t i = 0; i < len; ++i)
                            pdx[o + i] = px[offs[0] + i] == py[offs[1] + i * sy]
                                             ? T(1)
                                             : T(0);
                        });
    Tensor counts = Tensor::allocate(dy.dtype(), keep);
    reduceInto<T>(pdx, x.shape(), reduced, counts.data<T>(), ReduceKind::Sum,
                  ctx.threadPool());
    // Pass 2: dx *= dy / counts.
    T *pc = counts.data<T>();
    const T *pdy = dy.data<T>();
    for (int64_t i = 0; i < counts.numElements(); ++i)
      pc[i] = pc[i] > T(0) ? pdy[i] / pc[i] : T(0);
    Tensor dxT = *dx;
    BroadcastPlan plan2;
    DTF_RETURN_IF_ERROR(BroadcastPlan::make(name, {&dxT, &counts}, &plan2));
    plan2.forEachSegment(0, plan2.numElements(),
                         [&](int64_t o, const int64_t *offs, int64_t len) {
                           const int64_t sc = plan2.innerStride(1);
                           for (int64_t i = 0; i < len; ++i)
                             pdx[o + i] *= pc[offs[1] + i * sc];
                         });
    return Status::ok();
  });
}

} // namespace

void registerReduceKernels(KernelRegistry &registry) {
  registry.add(dtf::ops::kSum, sumKernel);
  registry.add(dtf::ops::kMean, meanKernel);
  registry.add(dtf::ops::kMax, maxKernel);
  registry.add(dtf::ops::kArgmax, argmaxKernel);
  registry.add(dtf::ops::kSumToShape, sumToShapeKernel);
  registry.add(dtf::ops::kTileGrad, tileGradKernel);
  registry.add(dtf::ops::kReduceGrad, reduceGradKernel);
  registry.add(dtf::ops::kMaxReduceGrad, maxReduceGradKernel);
}

} // namespace dtf::cpu
