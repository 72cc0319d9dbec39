// Elementwise kernels: broadcasting arithmetic (floor_mod too), compare,
// select, unary math (erf, floor, ceil, round, abs too), cast, bucketize, and
// the gradients of relu, sigmoid and tanh.
#include "runtime/kernels/cpu/KernelUtil.h"
#include "runtime/core/Bf16.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

namespace dtf::cpu {
namespace {

// Integer arithmetic wraps around (two's complement), as TensorFlow's does on
// CPU in practice; going through unsigned keeps it defined behaviour.
template <typename T> using Unsigned = std::make_unsigned_t<T>;

struct AddOp {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return T(Unsigned<T>(a) + Unsigned<T>(b));
    else
      return a + b;
  }
};
struct SubOp {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return T(Unsigned<T>(a) - Unsigned<T>(b));
    else
      return a - b;
  }
};
struct MulOp {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return T(Unsigned<T>(a) * Unsigned<T>(b));
    else
      return a * b;
  }
};
// Integer division truncates toward zero (C++ and TensorFlow's Div); a zero
// divisor is reported before the loop runs; MIN / -1 wraps to MIN.
struct DivOp {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return b == -1 ? T(Unsigned<T>(0) - Unsigned<T>(a)) : T(a / b);
    else
      return a / b;
  }
};
// Maximum and minimum propagate NaN, as TensorFlow's do.
struct MaximumOp {
  template <typename T> T operator()(T a, T b) const {
    return (a > b || a != a) ? a : b;
  }
};
struct MinimumOp {
  template <typename T> T operator()(T a, T b) const {
    return (a < b || a != a) ? a : b;
  }
};
// TensorFlow's FloorMod: the remainder takes the divisor's sign (its
// google_floor_fmod and google_floor_mod). A zero integer divisor is reported
// before the loop runs; MIN % -1 is 0.
struct FloorModOp {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == -1)
        return T(0);
      const T r = a % b;
      return r != 0 && ((b < 0) != (r < 0)) ? T(r + b) : r;
    } else {
      const T r = std::fmod(a, b);
      return r != 0 && ((b < 0) != (r < 0)) ? r + b : r;
    }
  }
};
struct PowOp {
  template <typename T> T operator()(T a, T b) const { return std::pow(a, b); }
};

template <typename T, typename R, typename Op>
inline void binarySegment(const T *__restrict a, int64_t sa,
                          const T *__restrict b, int64_t sb, R *__restrict out,
                          int64_t n, Op op) {
  if (sa && sb) {
    for (int64_t i = 0; i < n; ++i)
      out[i] = op(a[i], b[i]);
  } else if (sa) {
    const T bv = *b;
    for (int64_t i = 0; i < n; ++i)
      out[i] = op(a[i], bv);
  } else if (sb) {
    const T av = *a;
    for (int64_t i = 0; i < n; ++i)
      out[i] = op(av, b[i]);
  } else {
    const R v = op(*a, *b);
    for (int64_t i = 0; i < n; ++i)
      out[i] = v;
  }
}

// Broadcasts inputs 0 and 1 and writes op(a, b) as an R tensor to output 0.
template <typename T, typename R, typename Op>
Status runBinary(KernelContext &ctx, const char *name, Op op, int64_t grain) {
  const Tensor &a = ctx.input(0), &b = ctx.input(1);
  BroadcastPlan plan;
  DTF_RETURN_IF_ERROR(BroadcastPlan::make(name, {&a, &b}, &plan));
  Tensor *out;
  DTF_RETURN_IF_ERROR(
      ctx.allocateOutput(0, dtypeOf<R>(), plan.outShape(), &out));
  const T *pa = a.data<T>(), *pb = b.data<T>();
  R *po = out->data<R>();
  if (plan.allSameShape()) {
    parallelFor(ctx.threadPool(), plan.numElements(), grain,
                [&](int64_t lo, int64_t hi) {
                  binarySegment(pa + lo, 1, pb + lo, 1, po + lo, hi - lo, op);
                });
    return Status::ok();
  }
  const int64_t sa = plan.innerStride(0), sb = plan.innerStride(1);
  parallelFor(ctx.threadPool(), plan.numElements(), grain,
              [&](int64_t lo, int64_t hi) {
                plan.forEachSegment(
                    lo, hi, [&](int64_t o, const int64_t *offs, int64_t len) {
                      binarySegment(pa + offs[0], sa, pb + offs[1], sb, po + o,
                                    len, op);
                    });
              });
  return Status::ok();
}

template <typename Op>
Status arithmetic(KernelContext &ctx, const char *name,
                  int64_t grain = kCheapGrain) {
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 2));
  DTF_RETURN_IF_ERROR(requireSameDType(name, ctx.input(0), ctx.input(1)));
  return dispatchNumeric(name, ctx.input(0).dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    constexpr bool divides =
        std::is_same_v<Op, DivOp> || std::is_same_v<Op, FloorModOp>;
    if constexpr (divides && std::is_integral_v<T>) {
      const Tensor &b = ctx.input(1);
      const T *pb = b.data<T>();
      for (int64_t i = 0; i < b.numElements(); ++i)
        if (pb[i] == 0)
          return errorStatus(name, ": integer division by zero (element ", i,
                             " of the divisor ", b.describe(), ")");
    }
    return runBinary<T, T>(ctx, name, Op{}, grain);
  });
}

Status addKernel(KernelContext &ctx) {
  return arithmetic<AddOp>(ctx, dtf::ops::kAdd);
}
Status subKernel(KernelContext &ctx) {
  return arithmetic<SubOp>(ctx, dtf::ops::kSub);
}
Status mulKernel(KernelContext &ctx) {
  return arithmetic<MulOp>(ctx, dtf::ops::kMul);
}
Status divKernel(KernelContext &ctx) {
  return arithmetic<DivOp>(ctx, dtf::ops::kDiv);
}
Status maximumKernel(KernelContext &ctx) {
  return arithmetic<MaximumOp>(ctx, dtf::ops::kMaximum);
}
Status minimumKernel(KernelContext &ctx) {
  return arithmetic<MinimumOp>(ctx, dtf::ops::kMinimum);
}

Status floorModKernel(KernelContext &ctx) {
  return arithmetic<FloorModOp>(ctx, dtf::ops::kFloorMod, kExpensiveGrain);
}

Status powKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kPow;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 2));
  DTF_RETURN_IF_ERROR(requireSameDType(name, ctx.input(0), ctx.input(1)));
  DTF_RETURN_IF_ERROR(requireFloat(name, "operands", ctx.input(0)));
  return dispatchFloat(name, ctx.input(0).dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return runBinary<T, T>(ctx, name, PowOp{}, kExpensiveGrain);
  });
}

template <typename Pred> struct CompareOp {
  template <typename T> bool operator()(T a, T b) const { return Pred{}(a, b); }
};

Status compareKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kCompare;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 2));
  DTF_RETURN_IF_ERROR(requireSameDType(name, ctx.input(0), ctx.input(1)));
  std::string pred = ctx.getString("predicate");
  return dispatchAny(name, ctx.input(0).dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if (pred == "eq")
      return runBinary<T, bool>(ctx, name, std::equal_to<T>{}, kCheapGrain);
    if (pred == "ne")
      return runBinary<T, bool>(ctx, name, std::not_equal_to<T>{}, kCheapGrain);
    if (pred == "lt")
      return runBinary<T, bool>(ctx, name, std::less<T>{}, kCheapGrain);
    if (pred == "le")
      return runBinary<T, bool>(ctx, name, std::less_equal<T>{}, kCheapGrain);
    if (pred == "gt")
      return runBinary<T, bool>(ctx, name, std::greater<T>{}, kCheapGrain);
    if (pred == "ge")
      return runBinary<T, bool>(ctx, name, std::greater_equal<T>{},
                                kCheapGrain);
    return errorStatus(
        name, ": predicate must be one of eq, ne, lt, le, gt, ge; got '", pred,
        "'");
  });
}

Status selectKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kSelect;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 3));
  const Tensor &c = ctx.input(0), &t = ctx.input(1), &f = ctx.input(2);
  if (c.dtype() != DType::Bool)
    return errorStatus(name, " expects a bool condition, got ", c.describe());
  DTF_RETURN_IF_ERROR(requireSameDType(name, t, f));
  BroadcastPlan plan;
  DTF_RETURN_IF_ERROR(BroadcastPlan::make(name, {&c, &t, &f}, &plan));
  return dispatchAny(name, t.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    Tensor *out;
    DTF_RETURN_IF_ERROR(
        ctx.allocateOutput(0, t.dtype(), plan.outShape(), &out));
    const bool *pc = c.data<bool>();
    const T *pt = t.data<T>(), *pf = f.data<T>();
    T *po = out->data<T>();
    const int64_t sc = plan.innerStride(0), st = plan.innerStride(1),
                  sf = plan.innerStride(2);
    parallelFor(ctx.threadPool(), plan.numElements(), kCheapGrain,
                [&](int64_t lo, int64_t hi) {
                  if (plan.allSameShape()) {
                    for (int64_t i = lo; i < hi; ++i)
                      po[i] = pc[i] ? pt[i] : pf[i];
                    return;
                  }
                  plan.forEachSegment(
                      lo, hi, [&](int64_t o, const int64_t *offs, int64_t len) {
                        const bool *cc = pc + offs[0];
                        const T *tt = pt + offs[1], *ff = pf + offs[2];
                        T *oo = po + o;
                        for (int64_t i = 0; i < len; ++i)
                          oo[i] = cc[i * sc] ? tt[i * st] : ff[i * sf];
                      });
                });
    return Status::ok();
  });
}

// Unary ops write f(x) with x's dtype and shape.
template <typename T, typename F>
Status runUnary(KernelContext &ctx, F f, int64_t grain) {
  const Tensor &x = ctx.input(0);
  Tensor *out;
  DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, x.dtype(), x.shape(), &out));
  const T *px = x.data<T>();
  T *po = out->data<T>();
  parallelFor(ctx.threadPool(), x.numElements(), grain,
              [&](int64_t lo, int64_t hi) {
                for (int64_t i = lo; i < hi; ++i)
                  po[i] = f(px[i]);
              });
  return Status::ok();
}

Status negKernel(KernelContext &ctx) {
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, dtf::ops::kNeg, 1));
  return dispatchNumeric(dtf::ops::kNeg, ctx.input(0).dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return runUnary<T>(
        ctx,
        [](T v) {
          if constexpr (std::is_integral_v<T>)
            return T(Unsigned<T>(0) - Unsigned<T>(v));
          else
            return -v;
        },
        kCheapGrain);
  });
}

Status reluKernel(KernelContext &ctx) {
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, dtf::ops::kRelu, 1));
  return dispatchNumeric(dtf::ops::kRelu, ctx.input(0).dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    // relu(NaN) = NaN, as TensorFlow's.
    return runUnary<T>(
        ctx, [](T v) { return v < T(0) ? T(0) : v; }, kCheapGrain);
  });
}

// `f` is a generic lambda, instantiated for float and double.
template <typename F>
Status floatUnary(KernelContext &ctx, const char *name, F f,
                  int64_t grain = kExpensiveGrain) {
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 1));
  DTF_RETURN_IF_ERROR(requireFloat(name, "an operand", ctx.input(0)));
  return dispatchFloat(name, ctx.input(0).dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return runUnary<T>(
        ctx, [&](T v) -> T { return f(v); }, grain);
  });
}

Status expKernel(KernelContext &ctx) {
  return floatUnary(ctx, dtf::ops::kExp, [](auto v) { return std::exp(v); });
}
Status logKernel(KernelContext &ctx) {
  return floatUnary(ctx, dtf::ops::kLog, [](auto v) { return std::log(v); });
}
Status sqrtKernel(KernelContext &ctx) {
  return floatUnary(
      ctx, dtf::ops::kSqrt, [](auto v) { return std::sqrt(v); }, kCheapGrain);
}
Status rsqrtKernel(KernelContext &ctx) {
  return floatUnary(
      ctx, dtf::ops::kRsqrt, [](auto v) { return decltype(v)(1) / std::sqrt(v); },
      kCheapGrain);
}
Status sigmoidKernel(KernelContext &ctx) {
  return floatUnary(ctx, dtf::ops::kSigmoid, [](auto v) {
    using T = decltype(v);
    return T(1) / (T(1) + std::exp(-v));
  });
}
Status tanhKernel(KernelContext &ctx) {
  return floatUnary(ctx, dtf::ops::kTanh, [](auto v) { return std::tanh(v); });
}

Status erfKernel(KernelContext &ctx) {
  return floatUnary(ctx, dtf::ops::kErf, [](auto v) { return std::erf(v); });
}
Status floorKernel(KernelContext &ctx) {
  return floatUnary(
      ctx, dtf::ops::kFloor, [](auto v) { return std::floor(v); }, kCheapGrain);
}
Status ceilKernel(KernelContext &ctx) {
  return floatUnary(
      ctx, dtf::ops::kCeil, [](auto v) { return std::ceil(v); }, kCheapGrain);
}
// Halves to even (TensorFlow's round, Eigen's rint): nearbyint in the default
// rounding mode, which nothing in dtf changes.
Status roundKernel(KernelContext &ctx) {
  return floatUnary(
      ctx, dtf::ops::kRound, [](auto v) { return std::nearbyint(v); },
      kCheapGrain);
}
Status absKernel(KernelContext &ctx) {
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, dtf::ops::kAbs, 1));
  return dispatchNumeric(dtf::ops::kAbs, ctx.input(0).dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return runUnary<T>(
        ctx,
        [](T v) {
          if constexpr (std::is_integral_v<T>)
            return v < 0 ? T(Unsigned<T>(0) - Unsigned<T>(v)) : v;
          else
            return std::fabs(v);
        },
        kCheapGrain);
  });
}

// TensorFlow's Bucketize: the number of boundaries not greater than x
// (std::upper_bound; NaN goes past every boundary). Floats compare in their
// own precision, integers as double.
Status bucketizeKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kBucketize;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 1));
  const std::vector<double> bounds = ctx.getFloats("boundaries");
  if (!std::is_sorted(bounds.begin(), bounds.end()))
    return errorStatus(name, ": boundaries must be sorted ascending");
  const Tensor &x = ctx.input(0);
  return dispatchNumeric(name, x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using C = std::conditional_t<std::is_floating_point_v<T>, T, double>;
    const std::vector<C> b(bounds.begin(), bounds.end());
    Tensor *out;
    DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, DType::I32, x.shape(), &out));
    const T *px = x.data<T>();
    int32_t *po = out->data<int32_t>();
    parallelFor(ctx.threadPool(), x.numElements(), kCheapGrain,
                [&](int64_t lo, int64_t hi) {
                  for (int64_t i = lo; i < hi; ++i)
                    po[i] =
                        int32_t(std::upper_bound(b.begin(), b.end(), C(px[i])) -
                                b.begin());
                });
    return Status::ok();
  });
}

// Float to integer conversion saturates and maps NaN to 0 (C++ leaves both
// undefined); integer narrowing wraps; anything to bool is x != 0.
template <typename From, typename To> inline To convert(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> &&
                       std::is_integral_v<To>) {
    constexpr From lo = static_cast<From>(std::numeric_limits<To>::min());
    constexpr From hi = -lo; // 2^31 or 2^63, exactly representable
    if (!(v == v))
      return 0;
    if (v >= hi)
      return std::numeric_limits<To>::max();
    if (v < lo)
      return std::numeric_limits<To>::min();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

// Casts to and from bfloat16: f32 <-> bf16 (round to nearest even, the
// rounding of runtime/core/Bf16.h) and bf16 to bf16; other pairs go through
// f32 in the model.
Status castBf16(KernelContext &ctx, const Tensor &x, DType outType) {
  const char *name = dtf::ops::kCast;
  const DType from = x.dtype();
  if ((from != DType::F32 && from != DType::BF16) ||
      (outType != DType::F32 && outType != DType::BF16))
    return errorStatus(name, " from ", dtypeName(from), " to ",
                       dtypeName(outType),
                       ": bf16 casts to and from f32 only; cast through f32");
  Tensor *out;
  DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, outType, x.shape(), &out));
  if (from == outType) {
    std::memcpy(out->rawData(), x.rawData(), x.byteSize());
    return Status::ok();
  }
  parallelFor(ctx.threadPool(), x.numElements(), kCheapGrain,
              [&](int64_t lo, int64_t hi) {
                if (from == DType::F32)
                  narrowToBf16(x.data<float>() + lo, hi - lo,
                               static_cast<uint16_t *>(out->rawData()) + lo);
                else
                  widenFromBf16(static_cast<const uint16_t *>(x.rawData()) + lo,
                                hi - lo, out->data<float>() + lo);
              });
  return Status::ok();
}

Status castKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kCast;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 1));
  const Tensor &x = ctx.input(0);
  DType outType = DType::F32;
  DTF_RETURN_IF_ERROR(resolveOutDType(ctx, name, 0, std::nullopt, &outType));
  if (x.dtype() == DType::BF16 || outType == DType::BF16)
    return castBf16(ctx, x, outType);
  return dispatchAny(name, x.dtype(), [&](auto fromTag) -> Status {
    using From = typename decltype(fromTag)::type;
    return dispatchAny(name, outType, [&](auto toTag) -> Status {
      using To = typename decltype(toTag)::type;
      Tensor *out;
      DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, outType, x.shape(), &out));
      const From *px = x.data<From>();
      To *po = out->data<To>();
      parallelFor(ctx.threadPool(), x.numElements(), kCheapGrain,
                  [&](int64_t lo, int64_t hi) {
                    for (int64_t i = lo; i < hi; ++i)
                      po[i] = convert<From, To>(px[i]);
                  });
      return Status::ok();
    });
  });
}

// Gradients of activations: out = f(dy, v) with dy and v of one shape; `f`
// is a generic lambda, instantiated for float and double.
template <typename F>
Status activationGrad(KernelContext &ctx, const char *name, const char *vName,
                      F f) {
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 2));
  const Tensor &dy = ctx.input(0), &v = ctx.input(1);
  DTF_RETURN_IF_ERROR(requireFloat(name, "dy", dy));
  DTF_RETURN_IF_ERROR(requireSameDType(name, dy, v));
  DTF_RETURN_IF_ERROR(requireSameShape(name, "dy", dy, vName, v));
  return dispatchFloat(name, dy.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    Tensor *out;
    DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, dy.dtype(), dy.shape(), &out));
    const T *pdy = dy.data<T>(), *pv = v.data<T>();
    T *po = out->data<T>();
    parallelFor(ctx.threadPool(), dy.numElements(), kCheapGrain,
                [&](int64_t lo, int64_t hi) {
                  for (int64_t i = lo; i < hi; ++i)
                    po[i] = f(pdy[i], pv[i]);
                });
    return Status::ok();
  });
}

// d relu / dx is 1 for x > 0 and 0 elsewhere (0 at x = 0, as TensorFlow).
Status reluGradKernel(KernelContext &ctx) {
  return activationGrad(ctx, dtf::ops::kReluGrad, "x", [](auto dy, auto x) {
    return x > decltype(x)(0) ? dy : decltype(dy)(0);
  });
}
// In terms of the forward result y: sigmoid' = y (1 - y), tanh' = 1 - y^2.
Status sigmoidGradKernel(KernelContext &ctx) {
  return activationGrad(ctx, dtf::ops::kSigmoidGrad, "y", [](auto dy, auto y) {
    return dy * y * (decltype(y)(1) - y);
  });
}
Status tanhGradKernel(KernelContext &ctx) {
  return activationGrad(ctx, dtf::ops::kTanhGrad, "y", [](auto dy, auto y) {
    return dy * (decltype(y)(1) - y * y);
  });
}

} // namespace

void registerElementwiseKernels(KernelRegistry &registry) {
  registry.add(dtf::ops::kAdd, addKernel);
  registry.add(dtf::ops::kSub, subKernel);
  registry.add(dtf::ops::kMul, mulKernel);
  registry.add(dtf::ops::kDiv, divKernel);
  registry.add(dtf::ops::kMaximum, maximumKernel);
  registry.add(dtf::ops::kMinimum, minimumKernel);
  registry.add(dtf::ops::kPow, powKernel);
  registry.add(dtf::ops::kCompare, compareKernel);
  registry.add(dtf::ops::kSelect, selectKernel);
  registry.add(dtf::ops::kNeg, negKernel);
  registry.add(dtf::ops::kRelu, reluKernel);
  registry.add(dtf::ops::kExp, expKernel);
  registry.add(dtf::ops::kLog, logKernel);
  registry.add(dtf::ops::kSqrt, sqrtKernel);
  registry.add(dtf::ops::kRsqrt, rsqrtKernel);
  registry.add(dtf::ops::kSigmoid, sigmoidKernel);
  registry.add(dtf::ops::kTanh, tanhKernel);
  registry.add(dtf::ops::kCast, castKernel);
  registry.add(dtf::ops::kReluGrad, reluGradKernel);
  registry.add(dtf::ops::kFloorMod, floorModKernel);
  registry.add(dtf::ops::kErf, erfKernel);
  registry.add(dtf::ops::kFloor, floorKernel);
  registry.add(dtf::ops::kCeil, ceilKernel);
  registry.add(dtf::ops::kRound, roundKernel);
  registry.add(dtf::ops::kAbs, absKernel);
  registry.add(dtf::ops::kBucketize, bucketizeKernel);
  registry.add(dtf::ops::kSigmoidGrad, sigmoidGradKernel);
  registry.add(dtf::ops::kTanhGrad, tanhGradKernel);
}

} // namespace dtf::cpu
