// Row lookups: gather (embedding lookup), its gradient (a scatter-add), and
// one_hot.
#include "runtime/kernels/cpu/KernelUtil.h"

#include <cstring>

namespace dtf::cpu {
namespace {

// Every index must lie in [0, rows): the first one outside is the error.
template <typename I>
Status checkIndices(const char *name, const I *idx, int64_t count,
                    int64_t rows) {
  for (int64_t i = 0; i < count; ++i)
    if (idx[i] < 0 || idx[i] >= rows)
      return errorStatus(name, ": index ", int64_t(idx[i]), " at position ", i,
                         " is outside [0, ", rows, ")");
  return Status::ok();
}

// gather(params [V, ...], indices) = params[indices], of shape
// indices.shape + params.shape[1:]; any dtype.
Status gatherKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kGather;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 2));
  const Tensor &params = ctx.input(0), &indices = ctx.input(1);
  if (params.rank() == 0)
    return errorStatus(name,
                       " expects params [rows, ...] of rank 1 or more, got ",
                       params.describe());
  std::vector<int64_t> outShape = indices.shape();
  outShape.insert(outShape.end(), params.shape().begin() + 1,
                  params.shape().end());
  const int64_t rows = params.dim(0);
  const size_t rowBytes =
      size_t(params.numElements() / std::max<int64_t>(rows, 1)) *
      dtypeSize(params.dtype());
  return dispatchIndex(name, indices.dtype(), [&](auto tag) -> Status {
    using I = typename decltype(tag)::type;
    const I *idx = indices.data<I>();
    const int64_t count = indices.numElements();
    DTF_RETURN_IF_ERROR(checkIndices(name, idx, count, rows));
    Tensor *out;
    DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, params.dtype(), outShape, &out));
    const char *src = static_cast<const char *>(params.rawData());
    char *dst = static_cast<char *>(out->rawData());
    parallelFor(ctx.threadPool(), count,
                std::max<int64_t>(1, int64_t(4 * kCheapGrain / (rowBytes + 1))),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t i = lo; i < hi; ++i)
                    std::memcpy(dst + i * rowBytes, src + idx[i] * rowBytes,
                                rowBytes);
                });
    return Status::ok();
  });
}

// gather_grad(dy, indices) adds the rows of dy into zeros of `params_shape`
// at the indexed rows (repeated indices accumulate).
Status gatherGradKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kGatherGrad;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 2));
  const Tensor &dy = ctx.input(0), &indices = ctx.input(1);
  DTF_RETURN_IF_ERROR(requireFloat(name, "dy", dy));
  if (!ctx.hasAttr("params_shape"))
    return errorStatus(name, " needs the params_shape attribute");
  std::vector<int64_t> paramsShape = ctx.getInts("params_shape");
  if (paramsShape.empty())
    return errorStatus(name, " expects params_shape of rank 1 or more");
  for (int64_t d : paramsShape)
    if (d < 0)
      return errorStatus(name, ": params_shape ", shapeString(paramsShape),
                         " has a negative or unknown dimension");
  std::vector<int64_t> expected = indices.shape();
  expected.insert(expected.end(), paramsShape.begin() + 1, paramsShape.end());
  if (dy.shape() != expected)
    return errorStatus(name, " expects dy of shape ", shapeString(expected),
                       " (indices.shape + params_shape[1:]), got ",
                       dy.describe());
  const int64_t rows = paramsShape[0];
  const int64_t rowSize =
      numElementsOf(paramsShape) / std::max<int64_t>(rows, 1);
  return dispatchIndex(name, indices.dtype(), [&](auto tag) -> Status {
    using I = typename decltype(tag)::type;
    const I *idx = indices.data<I>();
    const int64_t count = indices.numElements();
    DTF_RETURN_IF_ERROR(checkIndices(name, idx, count, rows));
    return dispatchFloat(name, dy.dtype(), [&](auto ftag) -> Status {
      using T = typename decltype(ftag)::type;
      Tensor *out;
      DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, dy.dtype(), paramsShape, &out));
      T *po = out->data<T>();
      std::memset(po, 0, out->byteSize());
      const T *pdy = dy.data<T>();
      // Threads take disjoint column ranges of every row, so no two add to
      // the same element.
      parallelFor(
          ctx.threadPool(), rowSize,
          std::max<int64_t>(16, kCheapGrain / std::max<int64_t>(count, 1)),
          [&](int64_t lo, int64_t hi) {
            for (int64_t i = 0; i < count; ++i) {
              T *row = po + idx[i] * rowSize;
              const T *g = pdy + i * rowSize;
              for (int64_t j = lo; j < hi; ++j)
                row[j] += g[j];
            }
          });
      return Status::ok();
    });
  });
}

// one_hot(indices; depth, on_value, off_value): indices.shape + [depth] of
// the out_dtype (f32 by default); an index outside [0, depth) gives a row of
// off_value, as TensorFlow's one_hot does.
Status oneHotKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kOneHot;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 1));
  const Tensor &indices = ctx.input(0);
  if (!ctx.hasAttr("depth"))
    return errorStatus(name, " needs the depth attribute");
  const int64_t depth = ctx.getInt("depth");
  if (depth < 0)
    return errorStatus(name, " expects depth >= 0, got ", depth);
  DType outType = DType::F32;
  DTF_RETURN_IF_ERROR(resolveOutDType(ctx, name, 0, DType::F32, &outType));
  std::vector<int64_t> outShape = indices.shape();
  outShape.push_back(depth);
  const double on = ctx.getFloat("on_value", 1.0),
               off = ctx.getFloat("off_value", 0.0);
  return dispatchIndex(name, indices.dtype(), [&](auto itag) -> Status {
    using I = typename decltype(itag)::type;
    return dispatchNumeric(name, outType, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      Tensor *out;
      DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, outType, outShape, &out));
      const I *idx = indices.data<I>();
      T *po = out->data<T>();
      const T onV = static_cast<T>(on), offV = static_cast<T>(off);
      const int64_t count = indices.numElements();
      parallelFor(
          ctx.threadPool(), count,
          std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(depth, 1)),
          [&](int64_t lo, int64_t hi) {
            for (int64_t i = lo; i < hi; ++i) {
              T *row = po + i * depth;
              for (int64_t j = 0; j < depth; ++j)
                row[j] = offV;
              if (idx[i] >= 0 && idx[i] < depth)
                row[idx[i]] = onV;
            }
          });
      return Status::ok();
    });
  });
}

} // namespace

void registerGatherKernels(KernelRegistry &registry) {
  registry.add(dtf::ops::kGather, gatherKernel);
  registry.add(dtf::ops::kGatherGrad, gatherGradKernel);
  registry.add(dtf::ops::kOneHot, oneHotKernel);
}

} // namespace dtf::cpu
