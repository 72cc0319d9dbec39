// 2-D convolution (NHWC input, HWIO filter) and its two gradients: f32 on
// oneDNN, bf16 operands with f32 accumulation on oneDNN (compute_dtype, from
// dtf-mixed-precision), f64 with reference loops (oneDNN has no f64
// convolution on CPU).
#include "runtime/kernels/cpu/OneDnn.h"
#include "runtime/kernels/cpu/Winograd.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace dtf::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// Which descriptors say `any`, so that oneDNN picks their formats.
enum class Formats { User, Weights, All };
Formats formats() {
  static Formats f = [] {
    const char *e = std::getenv("DTF_CONV_FORMATS");
    std::string s = e ? e : "";
    return s == "user"  ? Formats::User
           : s == "all" ? Formats::All
                        : Formats::Weights;
  }();
  return f;
}

struct ConvDescs {
  memory::desc src, weights, dst;          // the caller's formats
  memory::desc srcAny, weightsAny, dstAny; // what the primitive is built with
  memory::dims strides, dilates, padL, padR;
};

// The internal descriptors take the types the primitive computes in: all f32,
// or for compute_dtype bf16 the operands in bf16 and the result (dst,
// diff_src, diff_weights) in f32. PlannedPrimitive's reorders from the
// caller's f32 round to bf16 on the way in (to nearest even).
ConvDescs convDescs(const Window2D &w,
                    memory::data_type srcType = memory::data_type::f32,
                    memory::data_type weightsType = memory::data_type::f32,
                    memory::data_type dstType = memory::data_type::f32) {
  auto f32 = memory::data_type::f32;
  memory::dims src = {w.n, w.c, w.ih, w.iw}, weights = {w.oc, w.c, w.kh, w.kw},
               dst = {w.n, w.oc, w.oh, w.ow};
  ConvDescs d{memory::desc(src, f32, Tag::nhwc),
              memory::desc(weights, f32, Tag::hwio),
              memory::desc(dst, f32, Tag::nhwc),
              {},
              {},
              {},
              {w.sh, w.sw},
              {w.dh - 1, w.dw - 1},
              {w.padTop, w.padLeft},
              {w.padBottom, w.padRight}};
  Formats f = formats();
  d.srcAny = memory::desc(src, srcType, f == Formats::All ? Tag::any : Tag::nhwc);
  d.dstAny = memory::desc(dst, dstType, f == Formats::All ? Tag::any : Tag::nhwc);
  d.weightsAny = memory::desc(weights, weightsType,
                              f != Formats::User ? Tag::any : Tag::hwio);
  return d;
}

// The forward convolution's descriptors in bf16 (f32 result), and those the
// gradients compute with, whose f32 result is diff_src or diff_weights.
constexpr auto kBf16 = memory::data_type::bf16, kF32 = memory::data_type::f32;
ConvDescs forwardDescs(const Window2D &w, bool bf16) {
  return bf16 ? convDescs(w, kBf16, kBf16, kF32) : convDescs(w);
}

// oneDNN's first choice for a forward convolution on AVX-512 is its brgemm
// kernel, which is slow with few input channels: for the seed CNN's first
// layer (1 channel) the direct JIT kernel takes two thirds of its time, and
// with 3 or 4 channels it is as fast or faster, while from 16 channels on
// brgemm wins (bench/results/kernels.md, "Notes (eighth session)"). So for
// up to 4 input channels the next implementation in oneDNN's order of
// preference that is not brgemm is taken, when it is a JIT kernel. The
// choice depends only on the shape and the CPU, never on a timing, so a run
// stays as reproducible as before.
constexpr int64_t kMaxChannelsForDirectConv = 4;

// `make` creates the primitive descriptor; a descriptor is a shared handle
// that next_impl() advances, so falling back means making a fresh one.
// next_impl() reads the operation descriptor the primitive descriptor was
// made from (oneDNN 2.x's iterator keeps a pointer to it, not a copy), so
// that descriptor must outlive this call: `make` may not build it inside.
// (It once did: forwardPd's local desc was gone when next_impl() ran, and
// about 1 process in 5 crashed inside dnnl_primitive_desc_iterator_next once
// other oneDNN primitives had been made.)
template <typename Make>
auto preferDirectForFewChannels(const Window2D &w, Make &&make) {
  auto pd = make();
  if (w.c > kMaxChannelsForDirectConv)
    return pd;
  while (std::string(pd.impl_info_str()).rfind("brgconv", 0) == 0)
    if (!pd.next_impl())
      return make();
  // Only a JIT kernel: never the reference loops or an im2col + gemm.
  return std::string(pd.impl_info_str()).rfind("jit:", 0) == 0 ? pd : make();
}

dnnl::convolution_forward::desc forwardDesc(const ConvDescs &d,
                                            dnnl::prop_kind kind) {
  return {kind,      dnnl::algorithm::convolution_direct,
          d.srcAny,  d.weightsAny,
          d.dstAny,  d.strides,
          d.dilates, d.padL,
          d.padR};
}

// A forward descriptor made from `desc`, which must outlive any next_impl()
// on it (preferDirectForFewChannels).
dnnl::convolution_forward::primitive_desc
forwardPd(const dnnl::convolution_forward::desc &desc) {
  return {desc, userScratchpad(), cpuEngine()};
}

enum ConvKind : int64_t {
  kForward = 1,
  kBackwardData = 2,
  kBackwardWeights = 3,
  kForwardBias = 4,     // conv2d_bias
  kForwardBiasRelu = 5, // conv2d_bias with relu
  kBf16Offset = 100,    // plus the kind: its bf16 primitive
};

// The filter [KH, KW, C, OC] of conv2d and its gradients.
Status checkFilter(const char *op, const std::vector<int64_t> &filter) {
  if (filter.size() != 4)
    return errorStatus(op,
                       " expects a filter [height, width, in_channels, "
                       "out_channels] of rank 4, got ",
                       shapeString(filter));
  return Status::ok();
}

Status convGeometry(const KernelContext &ctx, const char *op,
                    const std::vector<int64_t> &input,
                    const std::vector<int64_t> &filter, Window2D *w) {
  DTF_RETURN_IF_ERROR(checkFilter(op, filter));
  DTF_RETURN_IF_ERROR(
      makeWindow2D(ctx, op, input, filter[0], filter[1], true, w));
  if (filter[2] != w->c)
    return errorStatus(
        op, " expects the filter's input channels (dimension 2, ", filter[2],
        ") to match the input's channels (dimension 3, ", w->c, "), got input ",
        shapeString(input), " and filter ", shapeString(filter));
  w->oc = filter[3];
  return Status::ok();
}

Status checkDy(const char *op, const Window2D &w, const Tensor &dy) {
  std::vector<int64_t> expected = {w.n, w.oh, w.ow, w.oc};
  if (dy.shape() != expected)
    return errorStatus(op, " expects dy of shape ", shapeString(expected),
                       " (the convolution's output), got ", dy.describe());
  return Status::ok();
}

// f32 5x5 convolutions of stride 1 with channels in multiples of 16 go to
// Winograd's F(2x2, 5x5) (Winograd.h) on AVX-512, where `t` (an operand) is
// f32 and the op computes in f32 (`lowPrecision` false): 1.4x to 1.8x
// oneDNN's direct kernels on the seed CNN's second layer
// (bench/results/winograd.md); DTF_CONV_WINOGRAD=0 keeps oneDNN's.
bool useWinograd(const Window2D &w, const Tensor &t, bool lowPrecision) {
  return !lowPrecision && t.dtype() == DType::F32 &&
         winogradSuits(w.kh, w.kw, w.sh, w.sw, w.dh, w.dw, w.c, w.oc,
                       w.oh * w.ow);
}

WinogradShape winogradShape(const Window2D &w) {
  WinogradShape s;
  s.n = w.n;
  s.ih = w.ih;
  s.iw = w.iw;
  s.c = w.c;
  s.oh = w.oh;
  s.ow = w.ow;
  s.oc = w.oc;
  s.padTop = w.padTop;
  s.padLeft = w.padLeft;
  return s;
}

// Runs a convolution's primitive on `ptrs` (in its arguments' order) for
// the kernel of `ctx`. A bf16 primitive is given the versions of its first
// two inputs (then the kernel's inputs 0 and 1 themselves), so that an
// activation or a weight read by two convolutions of a step is narrowed to
// bf16 once, and the pool, which narrows the large ones
// (PlannedPrimitive::execute); an f32 primitive needs neither.
void runConv(const PlannedPrimitive &prim, const std::vector<void *> &ptrs,
             const KernelContext &ctx, bool bf16) {
  if (!bf16) {
    prim.execute(ptrs);
    return;
  }
  prim.execute(ptrs, {}, {ctx.inputVersion(0), ctx.inputVersion(1)},
               ctx.threadPool());
}

PrimitiveCache<PlannedPrimitive> &convCache() {
  static PrimitiveCache<PlannedPrimitive> cache;
  return cache;
}

// The f64 reference loops, over the same geometry as the oneDNN primitives:
// input row iy = oy * sh - padTop + ky * dh (likewise for columns). Speed
// does not matter much here; each loop splits work that writes disjoint
// outputs over the pool.
// Calls fn(tap, iy, ix) for each filter tap (ky * kw + kx) of output
// position (oy, ox) whose input position lies inside the image (taps on the
// padding contribute nothing).
template <typename F>
void forEachTap(const Window2D &w, int64_t oy, int64_t ox, F &&fn) {
  for (int64_t ky = 0; ky < w.kh; ++ky) {
    const int64_t iy = oy * w.sh - w.padTop + ky * w.dh;
    if (iy < 0 || iy >= w.ih)
      continue;
    for (int64_t kx = 0; kx < w.kw; ++kx) {
      const int64_t ix = ox * w.sw - w.padLeft + kx * w.dw;
      if (ix >= 0 && ix < w.iw)
        fn(ky * w.kw + kx, iy, ix);
    }
  }
}

template <typename T>
void refConvForward(const Window2D &w, const T *x, const T *f, T *y,
                    ThreadPool *pool) {
  const int64_t rows = w.n * w.oh;
  parallelFor(pool, rows, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t n = r / w.oh, oy = r % w.oh;
      for (int64_t ox = 0; ox < w.ow; ++ox) {
        T *out = y + ((n * w.oh + oy) * w.ow + ox) * w.oc;
        std::fill(out, out + w.oc, T(0));
        forEachTap(w, oy, ox, [&](int64_t tap, int64_t iy, int64_t ix) {
          const T *in = x + ((n * w.ih + iy) * w.iw + ix) * w.c;
          const T *fk = f + tap * w.c * w.oc;
          for (int64_t c = 0; c < w.c; ++c) {
            const T v = in[c];
            const T *fc = fk + c * w.oc;
            for (int64_t o = 0; o < w.oc; ++o)
              out[o] += v * fc[o];
          }
        });
      }
    }
  });
}

template <typename T>
void refConvBackpropInput(const Window2D &w, const T *dy, const T *f, T *dx,
                          ThreadPool *pool) {
  // Images are independent: each thread zeroes and fills its own.
  const int64_t image = w.ih * w.iw * w.c;
  parallelFor(pool, w.n, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n) {
      T *dxn = dx + n * image;
      std::fill(dxn, dxn + image, T(0));
      for (int64_t oy = 0; oy < w.oh; ++oy)
        for (int64_t ox = 0; ox < w.ow; ++ox) {
          const T *g = dy + ((n * w.oh + oy) * w.ow + ox) * w.oc;
          forEachTap(w, oy, ox, [&](int64_t tap, int64_t iy, int64_t ix) {
            T *d = dxn + (iy * w.iw + ix) * w.c;
            const T *fk = f + tap * w.c * w.oc;
            for (int64_t c = 0; c < w.c; ++c) {
              const T *fc = fk + c * w.oc;
              T acc = 0;
              for (int64_t o = 0; o < w.oc; ++o)
                acc += g[o] * fc[o];
              d[c] += acc;
            }
          });
        }
    }
  });
}

template <typename T>
void refConvBackpropFilter(const Window2D &w, const T *x, const T *dy, T *df,
                           ThreadPool *pool) {
  // Each (ky, kx) tap owns its [C, OC] block of the filter gradient.
  parallelFor(pool, w.kh * w.kw, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t tap = lo; tap < hi; ++tap) {
      const int64_t ky = tap / w.kw, kx = tap % w.kw;
      T *dk = df + tap * w.c * w.oc;
      std::fill(dk, dk + w.c * w.oc, T(0));
      for (int64_t n = 0; n < w.n; ++n)
        for (int64_t oy = 0; oy < w.oh; ++oy) {
          const int64_t iy = oy * w.sh - w.padTop + ky * w.dh;
          if (iy < 0 || iy >= w.ih)
            continue;
          for (int64_t ox = 0; ox < w.ow; ++ox) {
            const int64_t ix = ox * w.sw - w.padLeft + kx * w.dw;
            if (ix < 0 || ix >= w.iw)
              continue;
            const T *in = x + ((n * w.ih + iy) * w.iw + ix) * w.c;
            const T *g = dy + ((n * w.oh + oy) * w.ow + ox) * w.oc;
            for (int64_t c = 0; c < w.c; ++c) {
              const T v = in[c];
              T *dc = dk + c * w.oc;
              for (int64_t o = 0; o < w.oc; ++o)
                dc[o] += v * g[o];
            }
          }
        }
    }
  });
}

/// conv2d's f32 forward primitive for these shapes (cached): also what
/// conv2d_bias runs, before its bias pass, where oneDNN's bias would round
/// otherwise.
std::shared_ptr<PlannedPrimitive> plainConv(const Window2D &w, bool bf16) {
  return convCache().get(w.key(kForward + (bf16 ? int64_t(kBf16Offset) : int64_t(0))), [&] {
    ConvDescs d = forwardDescs(w, bf16);
    const auto desc = forwardDesc(d, dnnl::prop_kind::forward_inference);
    auto pd = preferDirectForFewChannels(w, [&] { return forwardPd(desc); });
    return PlannedPrimitive(pd, dnnl::convolution_forward(pd),
                            {{DNNL_ARG_SRC, d.src, false},
                             {DNNL_ARG_WEIGHTS, d.weights, false},
                             {DNNL_ARG_DST, d.dst, true}});
  });
}

Status conv2dKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kConv2d;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 2));
  const Tensor &x = ctx.input(0), &f = ctx.input(1);
  DTF_RETURN_IF_ERROR(requireFloat(name, "an input", x));
  DTF_RETURN_IF_ERROR(requireSameDType(name, x, f));
  bool bf16, f16;
  DTF_RETURN_IF_ERROR(lowPrecisionCompute(ctx, name, x, &bf16, &f16));
  Window2D w;
  DTF_RETURN_IF_ERROR(convGeometry(ctx, name, x.shape(), f.shape(), &w));
  Tensor *out;
  DTF_RETURN_IF_ERROR(
      ctx.allocateOutput(0, x.dtype(), {w.n, w.oh, w.ow, w.oc}, &out));
  if (out->numElements() == 0)
    return Status::ok();
  if (x.numElements() == 0 || f.numElements() == 0) {
    std::memset(out->rawData(), 0, out->byteSize());
    return Status::ok();
  }
  if (x.dtype() == DType::F64) {
    refConvForward(w, x.data<double>(), f.data<double>(), out->data<double>(),
                   ctx.threadPool());
    return Status::ok();
  }
  return guardDnnl(name, [&] {
    if (f16) {
      Tensor xr = roundedThroughF16(x, ctx.threadPool()),
             fr = roundedThroughF16(f, ctx.threadPool());
      plainConv(w, false)->execute({ptr(xr), ptr(fr), out->rawData()});
    } else if (bf16 && !bf16Native()) {
      Tensor xr = roundedThroughBf16(x, ctx.threadPool()),
             fr = roundedThroughBf16(f, ctx.threadPool());
      plainConv(w, false)->execute({ptr(xr), ptr(fr), out->rawData()});
    } else if (useWinograd(w, x, bf16)) {
      winogradForward(winogradShape(w), x.data<float>(), f.data<float>(),
                      nullptr, false, out->data<float>(), ctx.threadPool());
    } else {
      runConv(*plainConv(w, bf16), {ptr(x), ptr(f), out->rawData()}, ctx,
              bf16);
    }
    return Status::ok();
  });
}

// conv2d_bias promises conv2d's result plus the bias (then relu) bit for
// bit, as the separate ops give it. oneDNN's AVX-512 kernels (brgemm, and
// the direct JIT kernel) add the bias to the finished sum; its AVX2 JIT
// kernel starts the sum from the bias, which rounds otherwise
// (kernels.Conv2D.BiasAndReluPostOpsEqualTheSeparateOpsBitForBit failed on
// an AVX2-only EPYC). Anywhere but those kernels the bias and relu are a
// pass after conv2d's own primitive.
bool addsBiasAfterTheSum(const dnnl::primitive_desc &pd) {
  const std::string impl = pd.impl_info_str();
  return impl.rfind("brgconv", 0) == 0 || impl.rfind("jit:avx512", 0) == 0;
}

/// The convolution with its bias (and relu) post-ops where oneDNN adds the
/// bias after the sum; empty where it would not (conv2d's plainConv, then a
/// pass).
struct BiasConv {
  std::optional<PlannedPrimitive> fused;
};

PrimitiveCache<BiasConv> &biasConvCache() {
  static PrimitiveCache<BiasConv> cache;
  return cache;
}

// y += bias per channel (the last dim), then y = max(y, 0) with relu: the
// f64 path, empty inputs, and kernels that would round otherwise.
template <typename T>
void addBiasRelu(Tensor &y, const Tensor &bias, bool relu, ThreadPool *pool) {
  const int64_t c = bias.numElements();
  const T *b = bias.data<T>();
  T *p = y.data<T>();
  parallelFor(pool, c ? y.numElements() / c : 0, 64,
              [&](int64_t lo, int64_t hi) {
                for (int64_t r = lo; r < hi; ++r)
                  for (int64_t k = 0; k < c; ++k) {
                    T v = p[r * c + k] + b[k];
                    p[r * c + k] = relu && v < T(0) ? T(0) : v;
                  }
              });
}

// conv2d(x, f) + bias, then relu with the `relu` attribute: one oneDNN
// convolution with a bias and an eltwise_relu post-op (dtf-fuse-library).
Status conv2dBiasKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kConv2dBias;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 3));
  const Tensor &x = ctx.input(0), &f = ctx.input(1), &bias = ctx.input(2);
  DTF_RETURN_IF_ERROR(requireFloat(name, "an input", x));
  DTF_RETURN_IF_ERROR(requireSameDType(name, x, f));
  DTF_RETURN_IF_ERROR(requireSameDType(name, x, bias));
  bool bf16, f16;
  DTF_RETURN_IF_ERROR(lowPrecisionCompute(ctx, name, x, &bf16, &f16));
  Window2D w;
  DTF_RETURN_IF_ERROR(convGeometry(ctx, name, x.shape(), f.shape(), &w));
  if (bias.shape() != std::vector<int64_t>{w.oc})
    return errorStatus(name, " expects a bias of shape [", w.oc,
                       "] (the filter's output channels), got ",
                       bias.describe());
  const bool relu = ctx.getBool("relu");
  Tensor *out;
  DTF_RETURN_IF_ERROR(
      ctx.allocateOutput(0, x.dtype(), {w.n, w.oh, w.ow, w.oc}, &out));
  if (out->numElements() == 0)
    return Status::ok();
  if (x.numElements() == 0 || f.numElements() == 0 || x.dtype() == DType::F64) {
    if (x.numElements() == 0 || f.numElements() == 0)
      std::memset(out->rawData(), 0, out->byteSize());
    else
      refConvForward(w, x.data<double>(), f.data<double>(), out->data<double>(),
                     ctx.threadPool());
    if (x.dtype() == DType::F64)
      addBiasRelu<double>(*out, bias, relu, ctx.threadPool());
    else
      addBiasRelu<float>(*out, bias, relu, ctx.threadPool());
    return Status::ok();
  }
  // Without bf16 instructions: the f32 primitives on rounded operands.
  Tensor xr, fr;
  const Tensor *xs = &x, *fs = &f;
  if (f16) { // no f16 primitive here: f32 on f16-rounded operands
    xr = roundedThroughF16(x, ctx.threadPool());
    fr = roundedThroughF16(f, ctx.threadPool());
    xs = &xr;
    fs = &fr;
  } else if (bf16 && !bf16Native()) {
    xr = roundedThroughBf16(x, ctx.threadPool());
    fr = roundedThroughBf16(f, ctx.threadPool());
    xs = &xr;
    fs = &fr;
    bf16 = false;
  }
  return guardDnnl(name, [&] {
    if (useWinograd(w, x, bf16 || f16)) {
      // The bias added to the finished sum, as conv2d then bias_add do.
      winogradForward(winogradShape(w), x.data<float>(), f.data<float>(),
                      bias.data<float>(), relu, out->data<float>(),
                      ctx.threadPool());
      return Status::ok();
    }
    const int64_t kind = (relu ? kForwardBiasRelu : kForwardBias) +
                         (bf16 ? int64_t(kBf16Offset) : int64_t(0));
    auto prim = biasConvCache().get(
        w.key(kind), [&]() -> BiasConv {
          ConvDescs d = forwardDescs(w, bf16);
          memory::desc b({w.oc}, memory::data_type::f32, Tag::x);
          dnnl::convolution_forward::desc desc(
              dnnl::prop_kind::forward_inference,
              dnnl::algorithm::convolution_direct, d.srcAny, d.weightsAny, b,
              d.dstAny, d.strides, d.dilates, d.padL, d.padR);
          dnnl::primitive_attr attr = userScratchpad();
          if (relu) {
            dnnl::post_ops ops;
            ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
            attr.set_post_ops(ops);
          }
          auto pd = preferDirectForFewChannels(w, [&] {
            return dnnl::convolution_forward::primitive_desc(desc, attr,
                                                             cpuEngine());
          });
          if (!addsBiasAfterTheSum(pd))
            return {std::nullopt};
          return {PlannedPrimitive(pd, dnnl::convolution_forward(pd),
                                   {{DNNL_ARG_SRC, d.src, false},
                                    {DNNL_ARG_WEIGHTS, d.weights, false},
                                    {DNNL_ARG_BIAS, b, false},
                                    {DNNL_ARG_DST, d.dst, true}})};
        });
    if (prim->fused) {
      runConv(*prim->fused, {ptr(*xs), ptr(*fs), ptr(bias), out->rawData()},
              ctx, bf16);
    } else {
      runConv(*plainConv(w, bf16), {ptr(*xs), ptr(*fs), out->rawData()}, ctx,
              bf16);
      addBiasRelu<float>(*out, bias, relu, ctx.threadPool());
    }
    return Status::ok();
  });
}

// dx = conv2d_backprop_input(dy, filter): the gradient of conv2d for its input.
Status conv2dBackpropInputKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kConv2dBackpropInput;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 2));
  const Tensor &dy = ctx.input(0), &f = ctx.input(1);
  DTF_RETURN_IF_ERROR(requireFloat(name, "dy", dy));
  DTF_RETURN_IF_ERROR(requireSameDType(name, dy, f));
  bool bf16, f16;
  DTF_RETURN_IF_ERROR(lowPrecisionCompute(ctx, name, dy, &bf16, &f16));
  if (dy.rank() != 4)
    return errorStatus(name, " expects dy of rank 4, got ", dy.describe());
  std::vector<int64_t> inputShape;
  DTF_RETURN_IF_ERROR(
      shapeAttr(ctx, name, "input_shape", dy.shape(), &inputShape));
  Window2D w;
  DTF_RETURN_IF_ERROR(convGeometry(ctx, name, inputShape, f.shape(), &w));
  DTF_RETURN_IF_ERROR(checkDy(name, w, dy));
  Tensor *dx;
  DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, dy.dtype(), inputShape, &dx));
  if (dx->numElements() == 0)
    return Status::ok();
  if (dy.numElements() == 0 || f.numElements() == 0) {
    std::memset(dx->rawData(), 0, dx->byteSize());
    return Status::ok();
  }
  if (dy.dtype() == DType::F64) {
    refConvBackpropInput(w, dy.data<double>(), f.data<double>(),
                         dx->data<double>(), ctx.threadPool());
    return Status::ok();
  }
  Tensor dyr, fr;
  const Tensor *dys = &dy, *fs = &f;
  if (f16) { // no f16 primitive here: f32 on f16-rounded operands
    dyr = roundedThroughF16(dy, ctx.threadPool());
    fr = roundedThroughF16(f, ctx.threadPool());
    dys = &dyr;
    fs = &fr;
  } else if (bf16 && !bf16Native()) {
    dyr = roundedThroughBf16(dy, ctx.threadPool());
    fr = roundedThroughBf16(f, ctx.threadPool());
    dys = &dyr;
    fs = &fr;
    bf16 = false;
  }
  return guardDnnl(name, [&] {
    if (useWinograd(w, dy, bf16 || f16)) {
      winogradInputGrad(winogradShape(w), dy.data<float>(), f.data<float>(),
                        dx->data<float>(), ctx.threadPool());
      return Status::ok();
    }
    auto prim = convCache().get(w.key(kBackwardData + (bf16 ? int64_t(kBf16Offset) : int64_t(0))), [&] {
      ConvDescs d = bf16 ? convDescs(w, kF32, kBf16, kBf16) : convDescs(w);
      dnnl::convolution_backward_data::desc desc(
          dnnl::algorithm::convolution_direct, d.srcAny, d.weightsAny, d.dstAny,
          d.strides, d.dilates, d.padL, d.padR);
      dnnl::convolution_backward_data::primitive_desc pd(
          desc, userScratchpad(), cpuEngine(),
          forwardPd(forwardDesc(forwardDescs(w, bf16),
                                dnnl::prop_kind::forward_training)));
      return PlannedPrimitive(pd, dnnl::convolution_backward_data(pd),
                              {{DNNL_ARG_DIFF_DST, d.dst, false},
                               {DNNL_ARG_WEIGHTS, d.weights, false},
                               {DNNL_ARG_DIFF_SRC, d.src, true}});
    });
    runConv(*prim, {ptr(*dys), ptr(*fs), dx->rawData()}, ctx, bf16);
    return Status::ok();
  });
}

// dfilter = conv2d_backprop_filter(x, dy): the gradient of conv2d for its
// filter.
Status conv2dBackpropFilterKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kConv2dBackpropFilter;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 2));
  const Tensor &x = ctx.input(0), &dy = ctx.input(1);
  DTF_RETURN_IF_ERROR(requireFloat(name, "an input", x));
  DTF_RETURN_IF_ERROR(requireSameDType(name, x, dy));
  bool bf16, f16;
  DTF_RETURN_IF_ERROR(lowPrecisionCompute(ctx, name, x, &bf16, &f16));
  if (!ctx.hasAttr("filter_shape"))
    return errorStatus(name, " needs the filter_shape attribute");
  std::vector<int64_t> filterShape = ctx.getInts("filter_shape");
  DTF_RETURN_IF_ERROR(checkFilter(name, filterShape));
  for (int64_t d : filterShape)
    if (d < 0)
      return errorStatus(name, ": filter_shape ", shapeString(filterShape),
                         " has a negative dimension");
  Window2D w;
  DTF_RETURN_IF_ERROR(convGeometry(ctx, name, x.shape(), filterShape, &w));
  DTF_RETURN_IF_ERROR(checkDy(name, w, dy));
  Tensor *df;
  DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, x.dtype(), filterShape, &df));
  if (df->numElements() == 0)
    return Status::ok();
  if (dy.numElements() == 0 || x.numElements() == 0) {
    std::memset(df->rawData(), 0, df->byteSize());
    return Status::ok();
  }
  if (x.dtype() == DType::F64) {
    refConvBackpropFilter(w, x.data<double>(), dy.data<double>(),
                          df->data<double>(), ctx.threadPool());
    return Status::ok();
  }
  Tensor xr, dyr;
  const Tensor *xs = &x, *dys = &dy;
  if (f16) { // no f16 primitive here: f32 on f16-rounded operands
    xr = roundedThroughF16(x, ctx.threadPool());
    dyr = roundedThroughF16(dy, ctx.threadPool());
    xs = &xr;
    dys = &dyr;
  } else if (bf16 && !bf16Native()) {
    xr = roundedThroughBf16(x, ctx.threadPool());
    dyr = roundedThroughBf16(dy, ctx.threadPool());
    xs = &xr;
    dys = &dyr;
    bf16 = false;
  }
  return guardDnnl(name, [&] {
    if (useWinograd(w, x, bf16 || f16)) {
      winogradFilterGrad(winogradShape(w), x.data<float>(), dy.data<float>(),
                         df->data<float>(), ctx.threadPool());
      return Status::ok();
    }
    auto prim = convCache().get(w.key(kBackwardWeights + (bf16 ? int64_t(kBf16Offset) : int64_t(0))), [&] {
      ConvDescs d = bf16 ? convDescs(w, kBf16, kF32, kBf16) : convDescs(w);
      dnnl::convolution_backward_weights::desc desc(
          dnnl::algorithm::convolution_direct, d.srcAny, d.weightsAny, d.dstAny,
          d.strides, d.dilates, d.padL, d.padR);
      dnnl::convolution_backward_weights::primitive_desc pd(
          desc, userScratchpad(), cpuEngine(),
          forwardPd(forwardDesc(forwardDescs(w, bf16),
                                dnnl::prop_kind::forward_training)));
      return PlannedPrimitive(pd, dnnl::convolution_backward_weights(pd),
                              {{DNNL_ARG_SRC, d.src, false},
                               {DNNL_ARG_DIFF_DST, d.dst, false},
                               {DNNL_ARG_DIFF_WEIGHTS, d.weights, true}});
    });
    runConv(*prim, {ptr(*xs), ptr(*dys), df->rawData()}, ctx, bf16);
    return Status::ok();
  });
}

} // namespace

void registerConvKernels(KernelRegistry &registry) {
  registry.add(dtf::ops::kConv2d, conv2dKernel);
  registry.add(dtf::ops::kConv2dBias, conv2dBiasKernel);
  registry.add(dtf::ops::kConv2dBackpropInput, conv2dBackpropInputKernel);
  registry.add(dtf::ops::kConv2dBackpropFilter, conv2dBackpropFilterKernel);
}

} // namespace dtf::cpu
