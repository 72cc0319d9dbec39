// Shared helpers of the CPU kernels.
#include "runtime/kernels/cpu/KernelUtil.h"

#include <cstring>

namespace dtf::cpu {

Status unsupportedDType(const char *op, DType dtype) {
  if (dtype == DType::F16 || dtype == DType::BF16)
    return errorStatus(op, ": ", dtypeName(dtype),
                       " tensors are not supported on CPU yet (cast to f32)");
  return errorStatus(op, " does not take ", dtypeName(dtype), " tensors");
}

Status checkNumInputs(const KernelContext &ctx, const char *op, int min,
                      int max) {
  int n = ctx.numInputs();
  if (max < 0)
    max = min;
  if (n >= min && n <= max) {
    for (int i = 0; i < n; ++i)
      if (!ctx.input(i).defined())
        return errorStatus(op, ": input ", i, " has no value");
    return Status::ok();
  }
  if (min == max)
    return errorStatus(op, " expects ", min, " input", min == 1 ? "" : "s",
                       ", got ", n);
  if (max == INT32_MAX)
    return errorStatus(op, " expects at least ", min, " inputs, got ", n);
  return errorStatus(op, " expects ", min, " to ", max, " inputs, got ", n);
}

Status requireFloat(const char *op, const char *what, const Tensor &t) {
  if (t.dtype() == DType::F32 || t.dtype() == DType::F64)
    return Status::ok();
  if (t.dtype() == DType::F16 || t.dtype() == DType::BF16)
    return unsupportedDType(op, t.dtype());
  return errorStatus(op, " expects ", what, " of a floating-point dtype, got ",
                     t.describe());
}

Status requireSameDType(const char *op, const Tensor &a, const Tensor &b) {
  if (a.dtype() == b.dtype())
    return Status::ok();
  return errorStatus(op, " expects operands of the same dtype, got ",
                     a.describe(), " and ", b.describe());
}

Status requireSameShape(const char *op, const char *aName, const Tensor &a,
                        const char *bName, const Tensor &b) {
  if (a.shape() == b.shape())
    return Status::ok();
  return errorStatus(op, " expects ", aName, " and ", bName,
                     " of the same shape, got ", a.describe(), " and ",
                     b.describe());
}

Status normalizeAxis(const char *op, int64_t axis, int rank, int *out) {
  if (axis < -rank || axis >= rank)
    return errorStatus(op, " expects an axis in [", -rank, ", ", rank,
                       "), got ", axis);
  *out = static_cast<int>(axis < 0 ? axis + rank : axis);
  return Status::ok();
}

Status resolveOutDType(const KernelContext &ctx, const char *op, int i,
                       std::optional<DType> dflt, DType *out) {
  if (ctx.hasAttr("out_dtype")) {
    std::string name = ctx.getString("out_dtype");
    std::optional<DType> d = parseDType(name);
    if (!d)
      return errorStatus(
          op, ": out_dtype '", name,
          "' is not a dtype (f32, f64, f16, bf16, i32, i64 or bool)");
    *out = *d;
    return Status::ok();
  }
  if (i < ctx.numOutputs() && ctx.output(i).defined()) {
    *out = ctx.output(i).dtype();
    return Status::ok();
  }
  if (!dflt)
    return errorStatus(op,
                       " needs the out_dtype attribute (the result's dtype)");
  *out = *dflt;
  return Status::ok();
}

Status parsePadding(const KernelContext &ctx, const char *op, bool *same) {
  std::string padding = ctx.getString("padding", "valid");
  if (padding != "same" && padding != "valid")
    return errorStatus(op, ": padding must be \"same\" or \"valid\", got \"",
                       padding, "\"");
  *same = padding == "same";
  return Status::ok();
}

std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    strides[d] = s;
    s *= shape[d];
  }
  return strides;
}

void copyElements(void *dst, const void *src, int64_t count, size_t elemSize) {
  if (count > 0)
    std::memcpy(dst, src, size_t(count) * elemSize);
}

Status BroadcastPlan::make(const char *op,
                           const std::vector<const Tensor *> &operands,
                           BroadcastPlan *plan) {
  const int n = static_cast<int>(operands.size());
  int rank = 0;
  for (const Tensor *t : operands)
    rank = std::max(rank, t->rank());
  if (rank > kMaxRank)
    return errorStatus(op, " supports tensors of rank up to ", kMaxRank,
                       ", got ", rank);
  auto fail = [&] {
    std::string list;
    for (int k = 0; k < n; ++k)
      list += (k == 0 ? "" : (k + 1 == n ? " and " : ", ")) +
              operands[k]->describe();
    return errorStatus(op, " expects shapes that broadcast, got ", list);
  };
  int64_t out[kMaxRank];
  int64_t aligned[kMaxOperands][kMaxRank];
  int64_t strides[kMaxOperands][kMaxRank];
  for (int k = 0; k < n; ++k) {
    const auto &shape = operands[k]->shape();
    int pad = rank - static_cast<int>(shape.size());
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t dim = d < pad ? 1 : shape[d - pad];
      aligned[k][d] = dim;
      strides[k][d] = dim == 1 ? 0 : s;
      s *= dim;
    }
  }
  plan->allSame_ = true;
  for (int d = 0; d < rank; ++d) {
    int64_t dim = 1;
    for (int k = 0; k < n; ++k) {
      int64_t a = aligned[k][d];
      if (a == 1)
        continue;
      if (dim != 1 && dim != a)
        return fail();
      dim = a;
    }
    out[d] = dim;
  }
  plan->outShape_.assign(out, out + rank);
  for (int k = 0; k < n; ++k)
    plan->allSame_ = plan->allSame_ && operands[k]->shape() == plan->outShape_;
  plan->numOperands_ = n;
  plan->total_ = numElementsOf(plan->outShape_);
  plan->rank_ = 0;
  for (int d = 0; d < rank; ++d) {
    if (out[d] == 1)
      continue;
    int r = plan->rank_;
    bool merge = r > 0;
    for (int k = 0; k < n && merge; ++k)
      merge = plan->strides_[k][r - 1] == strides[k][d] * out[d];
    if (merge) {
      plan->dims_[r - 1] *= out[d];
      for (int k = 0; k < n; ++k)
        plan->strides_[k][r - 1] = strides[k][d];
    } else {
      plan->dims_[r] = out[d];
      for (int k = 0; k < n; ++k)
        plan->strides_[k][r] = strides[k][d];
      ++plan->rank_;
    }
  }
  return Status::ok();
}

Status reductionFlags(const KernelContext &ctx, const char *op, int rank,
                      std::vector<bool> *reduced) {
  reduced->assign(rank, !ctx.hasAttr("axes"));
  if (!ctx.hasAttr("axes"))
    return Status::ok();
  for (int64_t axis : ctx.getInts("axes")) {
    int a = 0;
    DTF_RETURN_IF_ERROR(normalizeAxis(op, axis, rank, &a));
    if ((*reduced)[a])
      return errorStatus(op, " names axis ", a, " twice");
    (*reduced)[a] = true;
  }
  return Status::ok();
}

std::vector<int64_t> reducedShape(const std::vector<int64_t> &shape,
                                  const std::vector<bool> &reduced,
                                  bool keepDims) {
  std::vector<int64_t> out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d])
      out.push_back(shape[d]);
    else if (keepDims)
      out.push_back(1);
  }
  return out;
}

} // namespace dtf::cpu
