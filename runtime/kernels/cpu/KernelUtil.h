// Shared helpers of the CPU kernels: argument checks, dtype dispatch,
// NumPy broadcasting over strided row segments, axis handling.
#pragma once

#include "runtime/core/ThreadPool.h"
#include "runtime/kernels/Kernel.h"

#include "dtf/OpNames.h" // every kernel file names its ops through the table

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtf::cpu {

/// The largest rank the kernels index with fixed arrays.
constexpr int kMaxRank = 12;

/// Chunk sizes (in elements) below which a loop runs on one thread: a wake-up
/// of the pool costs about as much as this much work.
constexpr int64_t kCheapGrain = 32768;    // add, mul, copies
constexpr int64_t kExpensiveGrain = 4096; // exp, tanh, pow

template <typename T> struct TypeTag { using type = T; };

/// "f16 tensors are not supported on CPU yet" or "does not take i32 tensors".
Status unsupportedDType(const char *op, DType dtype);

/// Calls f(TypeTag<T>{}) for the float dtypes with CPU kernels: T in
/// {float, double}. f16 and bf16 get unsupportedDType's message.
template <typename F> Status dispatchFloat(const char *op, DType dtype, F &&f) {
  switch (dtype) {
  case DType::F32:
    return f(TypeTag<float>{});
  case DType::F64:
    return f(TypeTag<double>{});
  default:
    return unsupportedDType(op, dtype);
  }
}

/// Calls f(TypeTag<T>{}) for T in {float, double, int32_t, int64_t}.
template <typename F>
Status dispatchNumeric(const char *op, DType dtype, F &&f) {
  switch (dtype) {
  case DType::F32:
    return f(TypeTag<float>{});
  case DType::F64:
    return f(TypeTag<double>{});
  case DType::I32:
    return f(TypeTag<int32_t>{});
  case DType::I64:
    return f(TypeTag<int64_t>{});
  default:
    return unsupportedDType(op, dtype);
  }
}

/// As dispatchNumeric, plus bool.
template <typename F> Status dispatchAny(const char *op, DType dtype, F &&f) {
  if (dtype == DType::Bool)
    return f(TypeTag<bool>{});
  return dispatchNumeric(op, dtype, f);
}

/// Calls f(TypeTag<T>{}) for the index dtypes i32 and i64.
template <typename F> Status dispatchIndex(const char *op, DType dtype, F &&f) {
  switch (dtype) {
  case DType::I32:
    return f(TypeTag<int32_t>{});
  case DType::I64:
    return f(TypeTag<int64_t>{});
  default:
    return errorStatus(op, " expects i32 or i64 indices, got ",
                       dtypeName(dtype));
  }
}

/// "dtf.add expects 2 inputs, got 1".
Status checkNumInputs(const KernelContext &ctx, const char *op, int min,
                      int max = -1);
/// Fails unless `t` is f32 or f64 (the float dtypes with CPU kernels).
Status requireFloat(const char *op, const char *what, const Tensor &t);
/// Fails unless the two tensors have the same dtype.
Status requireSameDType(const char *op, const Tensor &a, const Tensor &b);
/// Fails unless the two tensors have the same shape.
Status requireSameShape(const char *op, const char *aName, const Tensor &a,
                        const char *bName, const Tensor &b);

/// `axis` in [-rank, rank) made non-negative.
Status normalizeAxis(const char *op, int64_t axis, int rank, int *out);

/// The dtype of output `i`: the `out_dtype` attribute, else the dtype of an
/// output tensor the executor already placed there, else `dflt`.
Status resolveOutDType(const KernelContext &ctx, const char *op, int i,
                       std::optional<DType> dflt, DType *out);

/// Parses `same`/`valid`; true for same.
Status parsePadding(const KernelContext &ctx, const char *op, bool *same);

/// NumPy broadcasting of up to three operands to one output, with the
/// dimensions collapsed as far as possible. Row segments of the output are
/// contiguous; along a segment operand k advances by `innerStride(k)` (0 or 1).
class BroadcastPlan {
public:
  static constexpr int kMaxOperands = 3;

  /// Fails with "`op` expects shapes that broadcast, got ..." when they don't.
  static Status make(const char *op,
                     const std::vector<const Tensor *> &operands,
                     BroadcastPlan *plan);

  const std::vector<int64_t> &outShape() const { return outShape_; }
  int64_t numElements() const { return total_; }
  int64_t innerStride(int k) const {
    return rank_ ? strides_[k][rank_ - 1] : 0;
  }
  /// True when every operand has the output's shape (a flat loop suffices).
  bool allSameShape() const { return allSame_; }

  /// Calls fn(outOffset, offsets, len) for the row segments covering
  /// [begin, end) of the output, where offsets[k] is operand k's element
  /// offset at outOffset.
  template <typename F>
  void forEachSegment(int64_t begin, int64_t end, F &&fn) const;

private:
  int numOperands_ = 0;
  int rank_ = 0;
  int64_t dims_[kMaxRank] = {};
  int64_t strides_[kMaxOperands][kMaxRank] = {};
  int64_t total_ = 0;
  bool allSame_ = false;
  std::vector<int64_t> outShape_;
};

template <typename F>
void BroadcastPlan::forEachSegment(int64_t begin, int64_t end, F &&fn) const {
  int64_t offsets[kMaxOperands] = {};
  if (begin >= end)
    return;
  if (rank_ == 0) {
    if (begin < end)
      fn(begin, offsets, end - begin);
    return;
  }
  const int last = rank_ - 1;
  const int64_t inner = dims_[last];
  int64_t row = begin / inner, col = begin % inner;
  int64_t idx[kMaxRank] = {};
  int64_t base[kMaxOperands] = {};
  for (int d = last - 1; d >= 0; --d) {
    idx[d] = row % dims_[d];
    row /= dims_[d];
    for (int k = 0; k < numOperands_; ++k)
      base[k] += idx[d] * strides_[k][d];
  }
  int64_t pos = begin;
  while (pos < end) {
    int64_t len = std::min(inner - col, end - pos);
    for (int k = 0; k < numOperands_; ++k)
      offsets[k] = base[k] + col * strides_[k][last];
    fn(pos, offsets, len);
    pos += len;
    col = 0;
    for (int d = last - 1; d >= 0; --d) { // odometer over the outer dims
      for (int k = 0; k < numOperands_; ++k)
        base[k] += strides_[k][d];
      if (++idx[d] < dims_[d])
        break;
      for (int k = 0; k < numOperands_; ++k)
        base[k] -= strides_[k][d] * dims_[d];
      idx[d] = 0;
    }
  }
}

/// Contiguous (row-major) strides of `shape`, in elements.
std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &shape);

/// Copies `count` elements of `elemSize` bytes; `src` and `dst` don't overlap.
void copyElements(void *dst, const void *src, int64_t count, size_t elemSize);

/// Reduction axes: the normalized, sorted `axes` attribute (all axes when
/// absent) as per-dimension flags.
Status reductionFlags(const KernelContext &ctx, const char *op, int rank,
                      std::vector<bool> *reduced);
/// The shape after reducing the flagged dims (kept as 1 with keepDims).
std::vector<int64_t> reducedShape(const std::vector<int64_t> &shape,
                                  const std::vector<bool> &reduced,
                                  bool keepDims);

/// A binary reduction over flagged dims of a contiguous input into a
/// contiguous output of the kept dims. Kind: sum or max.
enum class ReduceKind { Sum, Max };
template <typename T>
void reduceInto(const T *in, const std::vector<int64_t> &shape,
                const std::vector<bool> &reduced, T *out, ReduceKind kind,
                ThreadPool *pool);

} // namespace dtf::cpu

namespace dtf::cpu {
// One registration function per op family (see CpuKernels.cpp).
void registerElementwiseKernels(KernelRegistry &registry);
void registerMatmulKernels(KernelRegistry &registry);
void registerConvKernels(KernelRegistry &registry);
void registerRecurrentKernels(KernelRegistry &registry);
void registerPoolKernels(KernelRegistry &registry);
void registerReduceKernels(KernelRegistry &registry);
void registerShapeKernels(KernelRegistry &registry);
void registerLossKernels(KernelRegistry &registry);
void registerGatherKernels(KernelRegistry &registry);
void registerRandomKernels(KernelRegistry &registry);
void registerOptimizerKernels(KernelRegistry &registry);
void registerLossScaleKernels(KernelRegistry &registry);
} // namespace dtf::cpu

namespace dtf::cpu {

/// Writes operand 0 of `plan` broadcast to the plan's output shape into dst.
template <typename T>
void broadcastCopy(const BroadcastPlan &plan, const T *src, T *dst,
                   ThreadPool *pool) {
  const int64_t s = plan.innerStride(0);
  parallelFor(pool, plan.numElements(), kCheapGrain,
              [&](int64_t lo, int64_t hi) {
                plan.forEachSegment(
                    lo, hi, [&](int64_t o, const int64_t *offs, int64_t len) {
                      const T *p = src + offs[0];
                      T *q = dst + o;
                      if (s) {
                        for (int64_t i = 0; i < len; ++i)
                          q[i] = p[i];
                      } else {
                        const T v = *p;
                        for (int64_t i = 0; i < len; ++i)
                          q[i] = v;
                      }
                    });
              });
}

/// A tensor that carries only a shape, for broadcasting to that shape.
inline Tensor shapeOnly(DType dtype, std::vector<int64_t> shape) {
  return Tensor::view(dtype, std::move(shape), nullptr);
}

} // namespace dtf::cpu
