// Shape ops: reshape (a view), transpose, concat, slice, broadcast_to, tile. They
// move bytes, so they take every dtype, f16 and bf16 included.
#include "runtime/kernels/cpu/KernelUtil.h"

#include <cstring>

namespace dtf::cpu {
namespace {

// Calls f(TypeTag<U>{}) with an unsigned type of the dtype's size.
template <typename F> Status dispatchBytes(DType dtype, F &&f) {
  switch (dtypeSize(dtype)) {
  case 1:
    return f(TypeTag<uint8_t>{});
  case 2:
    return f(TypeTag<uint16_t>{});
  case 4:
    return f(TypeTag<uint32_t>{});
  default:
    return f(TypeTag<uint64_t>{});
  }
}

// A contiguous output whose element at multi-index i comes from
// src[sum(i[d] * srcStride[d])], with the dims collapsed where the source
// is contiguous across them.
struct Gather {
  int rank = 0;
  int64_t dims[kMaxRank];
  int64_t srcStride[kMaxRank];
};

Gather makeGather(const std::vector<int64_t> &dims,
                  const std::vector<int64_t> &strides) {
  Gather g;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1)
      continue;
    if (g.rank > 0 && g.srcStride[g.rank - 1] == strides[d] * dims[d]) {
      g.dims[g.rank - 1] *= dims[d];
      g.srcStride[g.rank - 1] = strides[d];
    } else {
      g.dims[g.rank] = dims[d];
      g.srcStride[g.rank] = strides[d];
      ++g.rank;
    }
  }
  return g;
}

template <typename E>
void runGather(const Gather &g, const E *src, E *dst, int64_t total,
               ThreadPool *pool) {
  if (g.rank == 0) {
    if (total > 0)
      dst[0] = src[0];
    return;
  }
  const int last = g.rank - 1;
  const int64_t inner = g.dims[last], s = g.srcStride[last];
  parallelFor(pool, total, kCheapGrain, [&](int64_t begin, int64_t end) {
    int64_t row = begin / inner, col = begin % inner;
    int64_t idx[kMaxRank] = {};
    int64_t base = 0;
    for (int d = last - 1; d >= 0; --d) {
      idx[d] = row % g.dims[d];
      row /= g.dims[d];
      base += idx[d] * g.srcStride[d];
    }
    for (int64_t pos = begin; pos < end;) {
      int64_t len = std::min(inner - col, end - pos);
      const E *p = src + base + col * s;
      E *q = dst + pos;
      if (s == 1)
        std::memcpy(q, p, size_t(len) * sizeof(E));
      else
        for (int64_t j = 0; j < len; ++j)
          q[j] = p[j * s];
      pos += len;
      col = 0;
      for (int d = last - 1; d >= 0; --d) {
        base += g.srcStride[d];
        if (++idx[d] < g.dims[d])
          break;
        base -= g.srcStride[d] * g.dims[d];
        idx[d] = 0;
      }
    }
  });
}

Status copyGather(KernelContext &ctx, const Tensor &x, int64_t offset,
                  const std::vector<int64_t> &outShape,
                  const std::vector<int64_t> &strides) {
  Tensor *out;
  DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, x.dtype(), outShape, &out));
  Gather g = makeGather(outShape, strides);
  return dispatchBytes(x.dtype(), [&](auto tag) {
    using E = typename decltype(tag)::type;
    runGather(g, static_cast<const E *>(x.rawData()) + offset,
              static_cast<E *>(out->rawData()), out->numElements(),
              ctx.threadPool());
    return Status::ok();
  });
}

// The target shape of reshape and broadcast_to: `out_shape`, where -1 means
// "from `like`" (an optional second input) at the same position, else from
// the input: reshape infers the one -1 left from the element count (a
// second -1 takes the input's first dimension, the batch); broadcast_to
// takes the input's dimension aligned at the right.
Status targetShape(const KernelContext &ctx, const char *name, bool isReshape,
                   std::vector<int64_t> *out) {
  const Tensor &x = ctx.input(0);
  if (!ctx.hasAttr("out_shape")) {
    if (ctx.numInputs() < 2)
      return errorStatus(name,
                         " needs the out_shape attribute or a second input of "
                         "the target shape");
    *out = ctx.input(1).shape();
    return Status::ok();
  }
  *out = ctx.getInts("out_shape");
  const std::vector<int64_t> written = *out;
  auto &shape = *out;
  const int rank = static_cast<int>(shape.size());
  if (ctx.numInputs() >= 2) {
    const Tensor &like = ctx.input(1);
    for (int d = 0; d < rank; ++d)
      if (shape[d] == -1 && d < like.rank())
        shape[d] = like.dim(d);
  }
  int unknown = 0;
  for (int d = 0; d < rank; ++d) {
    if (shape[d] < -1)
      return errorStatus(name, ": out_shape ", shapeString(written),
                         " has a negative dimension");
    unknown += shape[d] == -1;
  }
  if (isReshape) {
    if (unknown > 1 && x.rank() > 0)
      for (int d = 0; d < rank; ++d)
        if (shape[d] == -1) {
          shape[d] = x.dim(0);
          --unknown;
          break;
        }
    if (unknown > 1)
      return errorStatus(name, ": out_shape ", shapeString(written),
                         " has more than one unknown dimension");
    if (unknown == 1) {
      int64_t known = 1;
      for (int64_t d : shape)
        if (d != -1)
          known *= d;
      if (known == 0 || x.numElements() % known != 0)
        return errorStatus(name, " cannot reshape ", x.describe(), " to ",
                           shapeString(written), ": ", x.numElements(),
                           " elements do not divide into rows of ", known);
      for (int64_t &d : shape)
        if (d == -1)
          d = x.numElements() / known;
    }
    return Status::ok();
  }
  const int pad = rank - x.rank();
  for (int d = 0; d < rank; ++d) {
    if (shape[d] != -1)
      continue;
    if (d < pad)
      return errorStatus(name, ": cannot infer dimension ", d, " of out_shape ",
                         shapeString(written), " from ", x.describe(),
                         "; pass the target as a second input");
    shape[d] = x.dim(d - pad);
  }
  return Status::ok();
}

// The result shares the input's buffer: no copy. An executor that keeps
// outputs between steps should know that the input's buffer then has two
// holders until the reshape's output is replaced.
Status reshapeKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kReshape;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 1, 2));
  const Tensor &x = ctx.input(0);
  std::vector<int64_t> shape;
  DTF_RETURN_IF_ERROR(targetShape(ctx, name, true, &shape));
  if (numElementsOf(shape) != x.numElements())
    return errorStatus(name, " cannot reshape ", x.describe(), " (",
                       x.numElements(), " elements) to ", shapeString(shape),
                       " (", numElementsOf(shape), " elements)");
  ctx.setOutput(0, x.reshaped(std::move(shape)));
  return Status::ok();
}

Status broadcastToKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kBroadcastTo;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 1, 2));
  const Tensor &x = ctx.input(0);
  std::vector<int64_t> shape;
  DTF_RETURN_IF_ERROR(targetShape(ctx, name, false, &shape));
  Tensor target = shapeOnly(x.dtype(), shape);
  BroadcastPlan plan;
  DTF_RETURN_IF_ERROR(BroadcastPlan::make(name, {&x, &target}, &plan));
  if (plan.outShape() != shape)
    return errorStatus(name, " cannot broadcast ", x.describe(), " to ",
                       shapeString(shape));
  Tensor *out;
  DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, x.dtype(), shape, &out));
  return dispatchBytes(x.dtype(), [&](auto tag) {
    using E = typename decltype(tag)::type;
    broadcastCopy(plan, static_cast<const E *>(x.rawData()),
                  static_cast<E *>(out->rawData()), ctx.threadPool());
    return Status::ok();
  });
}

// tf.tile: dimension d of the result is multiples[d] copies of x's. A
// multiple of -1 repeats a dimension of size 1 over the batch: the result's
// size there is the second input's (`batch_of`) at the same position. The
// result is a gather from x viewed as [m0, x0, m1, x1, ...] with stride 0
// along each m.
Status tileKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kTile;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 1, 2));
  const Tensor &x = ctx.input(0);
  std::vector<int64_t> multiples = ctx.getInts("multiples");
  if (static_cast<int>(multiples.size()) != x.rank())
    return errorStatus(name, " expects one multiple per dimension of ",
                       x.describe(), ", got ", shapeString(multiples));
  std::vector<int64_t> strides = contiguousStrides(x.shape()), outShape,
                       viewDims, viewStrides;
  for (int d = 0; d < x.rank(); ++d) {
    int64_t m = multiples[d];
    if (m == -1) {
      if (ctx.numInputs() < 2 || ctx.input(1).rank() <= d)
        return errorStatus(name, ": multiple -1 (the batch) in dimension ", d,
                           " needs a second input with that dimension");
      if (x.dim(d) != 1)
        return errorStatus(name, " repeats only a dimension of size 1 over "
                                 "the batch, got ",
                           x.describe());
      m = ctx.input(1).dim(d);
    } else if (m < 0) {
      return errorStatus(name, ": multiples ", shapeString(multiples),
                         " has a negative entry");
    }
    outShape.push_back(x.dim(d) * m);
    viewDims.insert(viewDims.end(), {m, x.dim(d)});
    viewStrides.insert(viewStrides.end(), {0, strides[d]});
  }
  int kept = 0; // the gather's rank before merging, bounded by kMaxRank
  for (int64_t d : viewDims)
    kept += d != 1;
  if (kept > kMaxRank)
    return errorStatus(name, " supports up to ", kMaxRank,
                       " repeated or copied dimensions, got ", x.describe(),
                       " with multiples ", shapeString(multiples));
  Gather g = makeGather(viewDims, viewStrides);
  Tensor *out;
  DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, x.dtype(), outShape, &out));
  if (out->numElements() == 0)
    return Status::ok();
  return dispatchBytes(x.dtype(), [&](auto tag) {
    using E = typename decltype(tag)::type;
    runGather(g, static_cast<const E *>(x.rawData()),
              static_cast<E *>(out->rawData()), out->numElements(),
              ctx.threadPool());
    return Status::ok();
  });
}

Status transposeKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kTranspose;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 1));
  const Tensor &x = ctx.input(0);
  std::vector<int64_t> perm = ctx.getInts("permutation");
  bool valid = static_cast<int>(perm.size()) == x.rank();
  std::vector<bool> seen(x.rank(), false);
  for (size_t i = 0; valid && i < perm.size(); ++i) {
    valid = perm[i] >= 0 && perm[i] < x.rank() && !seen[perm[i]];
    if (valid)
      seen[perm[i]] = true;
  }
  if (!valid)
    return errorStatus(name, ": permutation ", shapeString(perm),
                       " is not a permutation of the ", x.rank(),
                       " dimensions of ", x.describe());
  if (x.rank() > kMaxRank)
    return errorStatus(name, " supports tensors of rank up to ", kMaxRank);
  std::vector<int64_t> inStrides = contiguousStrides(x.shape()),
                       outShape(x.rank()), strides(x.rank());
  for (int i = 0; i < x.rank(); ++i) {
    outShape[i] = x.dim(static_cast<int>(perm[i]));
    strides[i] = inStrides[perm[i]];
  }
  return copyGather(ctx, x, 0, outShape, strides);
}

Status sliceKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kSlice;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 1));
  const Tensor &x = ctx.input(0);
  std::vector<int64_t> begin = ctx.getInts("begin"), size = ctx.getInts("size");
  if (static_cast<int>(begin.size()) != x.rank() ||
      static_cast<int>(size.size()) != x.rank())
    return errorStatus(name,
                       " expects begin and size with one entry per dimension (",
                       x.rank(), "), got begin ", shapeString(begin),
                       " and size ", shapeString(size));
  if (x.rank() > kMaxRank)
    return errorStatus(name, " supports tensors of rank up to ", kMaxRank);
  std::vector<int64_t> strides = contiguousStrides(x.shape());
  int64_t offset = 0;
  for (int d = 0; d < x.rank(); ++d) {
    if (begin[d] < 0 || size[d] < -1)
      return errorStatus(name, " expects begin >= 0 and size >= -1, got begin ",
                         shapeString(begin), " and size ", shapeString(size));
    if (size[d] == -1)
      size[d] = std::max<int64_t>(x.dim(d) - begin[d], 0);
    if (begin[d] + size[d] > x.dim(d))
      return errorStatus(name, " of dimension ", d, " (size ", x.dim(d),
                         ") from ", begin[d], " with size ", size[d],
                         " goes past the end of ", x.describe());
    offset += begin[d] * strides[d];
  }
  if (numElementsOf(size) == 0)
    offset = 0;
  return copyGather(ctx, x, offset, size, strides);
}

// The gradient of slice: dy written at `begin` into zeros shaped like x.
Status sliceGradKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kSliceGrad;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 2));
  const Tensor &dy = ctx.input(0), &x = ctx.input(1);
  std::vector<int64_t> begin = ctx.getInts("begin");
  if (dy.dtype() != x.dtype() || dy.rank() != x.rank() ||
      static_cast<int>(begin.size()) != x.rank())
    return errorStatus(
        name,
        " expects dy and x of one dtype and rank and a begin per "
        "dimension, got ",
        dy.describe(), ", ", x.describe(), " and begin ", shapeString(begin));
  for (int d = 0; d < x.rank(); ++d)
    if (begin[d] < 0 || begin[d] + dy.dim(d) > x.dim(d))
      return errorStatus(name, ": a block ", dy.describe(), " at ",
                         shapeString(begin), " does not fit in ", x.describe());
  Tensor *out = nullptr;
  DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, x.dtype(), x.shape(), &out));
  const size_t elementSize = dtypeSize(x.dtype());
  auto *dst = static_cast<char *>(out->rawData());
  const auto *src = static_cast<const char *>(dy.rawData());
  std::memset(dst, 0, out->byteSize());
  std::vector<int64_t> outStrides = contiguousStrides(x.shape());
  std::vector<int64_t> index(x.rank(), 0);
  for (int64_t i = 0, n = dy.numElements(); i < n; ++i) {
    int64_t offset = 0;
    for (int d = 0; d < x.rank(); ++d)
      offset += (begin[d] + index[d]) * outStrides[d];
    std::memcpy(dst + offset * elementSize, src + i * elementSize, elementSize);
    for (int d = x.rank() - 1; d >= 0 && ++index[d] == dy.dim(d); --d)
      index[d] = 0;
  }
  return Status::ok();
}

Status concatKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kConcat;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 1, INT32_MAX));
  const Tensor &first = ctx.input(0);
  if (first.rank() == 0)
    return errorStatus(name, " expects inputs of rank 1 or more, got ",
                       first.describe());
  int axis = 0;
  DTF_RETURN_IF_ERROR(
      normalizeAxis(name, ctx.getInt("axis", 0), first.rank(), &axis));
  std::vector<int64_t> outShape = first.shape();
  outShape[axis] = 0;
  for (int i = 0; i < ctx.numInputs(); ++i) {
    const Tensor &t = ctx.input(i);
    if (t.dtype() != first.dtype() || t.rank() != first.rank())
      return errorStatus(name,
                         " expects inputs of the same dtype and rank, got ",
                         first.describe(), " and ", t.describe());
    for (int d = 0; d < t.rank(); ++d)
      if (d != axis && t.dim(d) != first.dim(d))
        return errorStatus(
            name, " expects inputs of equal sizes except along axis ", axis,
            ", got ", first.describe(), " and ", t.describe());
    outShape[axis] += t.dim(axis);
  }
  Tensor *out;
  DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, first.dtype(), outShape, &out));
  int64_t outer = 1, inner = dtypeSize(first.dtype());
  for (int d = 0; d < axis; ++d)
    outer *= outShape[d];
  for (int d = axis + 1; d < first.rank(); ++d)
    inner *= outShape[d];
  const int64_t outRow = outShape[axis] * inner;
  char *dst = static_cast<char *>(out->rawData());
  const int n = ctx.numInputs();
  parallelFor(ctx.threadPool(), outer,
              std::max<int64_t>(1, 4 * kCheapGrain / (outRow + 1)),
              [&](int64_t lo, int64_t hi) {
                for (int64_t o = lo; o < hi; ++o) {
                  char *q = dst + o * outRow;
                  for (int i = 0; i < n; ++i) {
                    const Tensor &t = ctx.input(i);
                    const int64_t row = t.dim(axis) * inner;
                    std::memcpy(
                        q, static_cast<const char *>(t.rawData()) + o * row,
                        size_t(row));
                    q += row;
                  }
                }
              });
  return Status::ok();
}

} // namespace

void registerShapeKernels(KernelRegistry &registry) {
  registry.add(dtf::ops::kReshape, reshapeKernel);
  registry.add(dtf::ops::kBroadcastTo, broadcastToKernel);
  registry.add(dtf::ops::kTile, tileKernel);
  registry.add(dtf::ops::kTranspose, transposeKernel);
  registry.add(dtf::ops::kSlice, sliceKernel);
  registry.add(dtf::ops::kSliceGrad, sliceGradKernel);
  registry.add(dtf::ops::kConcat, concatKernel);
}

} // namespace dtf::cpu
