// Max and average pooling over NHWC windows and their gradients: oneDNN
// for f32 except for max_pool_grad (see there); f64 with reference loops
// (oneDNN has no f64 pooling on CPU).
#include "runtime/kernels/cpu/OneDnn.h"

#include <algorithm>
#include <atomic>
#if defined(__AVX2__)
#include <immintrin.h>
#endif
#include <cstring>
#include <limits>

namespace dtf::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

enum PoolKind : int64_t {
  kMaxForward = 11,
  kAvgForward = 12,
  kAvgBackward = 13
};

Status poolGeometry(const KernelContext &ctx, const char *op, const Tensor &x,
                    Window2D *w) {
  DTF_RETURN_IF_ERROR(requireFloat(op, "an input", x));
  int64_t kh = 1, kw = 1;
  DTF_RETURN_IF_ERROR(getPair(ctx, op, "window", 1, &kh, &kw));
  DTF_RETURN_IF_ERROR(makeWindow2D(ctx, op, x.shape(), kh, kw, false, w));
  w->oc = w->c;
  return Status::ok();
}

struct PoolDescs {
  memory::desc src, dst;
  memory::dims strides, kernel, padL, padR;
};

PoolDescs poolDescs(const Window2D &w) {
  auto f32 = memory::data_type::f32;
  return {memory::desc({w.n, w.c, w.ih, w.iw}, f32, Tag::nhwc),
          memory::desc({w.n, w.c, w.oh, w.ow}, f32, Tag::nhwc),
          {w.sh, w.sw},
          {w.kh, w.kw},
          {w.padTop, w.padLeft},
          {w.padBottom, w.padRight}};
}

// Average pooling divides by the number of input elements in the window,
// padding excluded, as TensorFlow's does.
dnnl::algorithm algorithmOf(bool isMax) {
  return isMax ? dnnl::algorithm::pooling_max
               : dnnl::algorithm::pooling_avg_exclude_padding;
}

dnnl::pooling_forward::primitive_desc forwardPd(const PoolDescs &d, bool isMax,
                                                dnnl::prop_kind kind) {
  dnnl::pooling_forward::desc desc(kind, algorithmOf(isMax), d.src, d.dst,
                                   d.strides, d.kernel, d.padL, d.padR);
  return {desc, cpuEngine()};
}

Status checkPoolDy(const char *name, const Window2D &w, const Tensor &x,
                   const Tensor &dy) {
  DTF_RETURN_IF_ERROR(requireSameDType(name, x, dy));
  std::vector<int64_t> expected = {w.n, w.oh, w.ow, w.c};
  if (dy.shape() != expected)
    return errorStatus(name, " expects dy of shape ", shapeString(expected),
                       " (the pooling's output), got ", dy.describe());
  return Status::ok();
}

// Calls fn(pos, j) for the input offsets (in elements, channel 0) of output
// (oy, ox)'s window that fall inside the image, in row-major window order,
// with their window positions j = ky * kw + kx.
template <typename F>
void forWindowAt(const Window2D &w, int64_t oy, int64_t ox, F &&fn) {
  for (int64_t ky = 0; ky < w.kh; ++ky) {
    const int64_t iy = oy * w.sh - w.padTop + ky;
    if (iy < 0 || iy >= w.ih)
      continue;
    for (int64_t kx = 0; kx < w.kw; ++kx) {
      const int64_t ix = ox * w.sw - w.padLeft + kx;
      if (ix < 0 || ix >= w.iw)
        continue;
      fn((iy * w.iw + ix) * w.c, int32_t(ky * w.kw + kx));
    }
  }
}

// forWindowAt without the window positions.
template <typename F>
void forWindow(const Window2D &w, int64_t oy, int64_t ox, F &&fn) {
  forWindowAt(w, oy, ox, [&](int64_t pos, int32_t) { fn(pos); });
}

// The f64 reference forward pass: the window's maximum, or its mean over
// the positions inside the image (padding excluded, as oneDNN's
// pooling_avg_exclude_padding and TensorFlow).
template <typename T>
void refPoolForward(const Window2D &w, bool isMax, const T *x, T *y,
                    ThreadPool *pool) {
  const int64_t c = w.c, image = w.ih * w.iw * c;
  parallelFor(pool, w.n * w.oh, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t n = r / w.oh, oy = r % w.oh;
      const T *xn = x + n * image;
      for (int64_t ox = 0; ox < w.ow; ++ox) {
        T *out = y + ((n * w.oh + oy) * w.ow + ox) * c;
        int64_t count = 0;
        forWindow(w, oy, ox, [&](int64_t pos) {
          const T *v = xn + pos;
          for (int64_t q = 0; q < c; ++q) {
            if (count == 0)
              out[q] = v[q];
            else if (isMax)
              out[q] = v[q] > out[q] || v[q] != v[q] ? v[q] : out[q];
            else
              out[q] += v[q];
          }
          ++count;
        });
        if (count == 0)
          std::fill(out, out + c, T(0));
        else if (!isMax)
          for (int64_t q = 0; q < c; ++q)
            out[q] /= T(count);
      }
    }
  });
}

// The f64 avg_pool_grad: each dy spreads evenly over its window's positions
// inside the image.
template <typename T>
void refAvgPoolGrad(const Window2D &w, const T *dy, T *dx, ThreadPool *pool) {
  const int64_t c = w.c, image = w.ih * w.iw * c;
  parallelFor(pool, w.n, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n) {
      T *dxn = dx + n * image;
      std::fill(dxn, dxn + image, T(0));
      for (int64_t oy = 0; oy < w.oh; ++oy)
        for (int64_t ox = 0; ox < w.ow; ++ox) {
          int64_t count = 0;
          forWindow(w, oy, ox, [&](int64_t) { ++count; });
          if (count == 0)
            continue;
          const T *g = dy + ((n * w.oh + oy) * w.ow + ox) * c;
          forWindow(w, oy, ox, [&](int64_t pos) {
            for (int64_t q = 0; q < c; ++q)
              dxn[pos + q] += g[q] / T(count);
          });
        }
    }
  });
}

Status poolForward(KernelContext &ctx, const char *name, bool isMax) {
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 1));
  const Tensor &x = ctx.input(0);
  Window2D w;
  DTF_RETURN_IF_ERROR(poolGeometry(ctx, name, x, &w));
  Tensor *out;
  DTF_RETURN_IF_ERROR(
      ctx.allocateOutput(0, x.dtype(), {w.n, w.oh, w.ow, w.c}, &out));
  if (out->numElements() == 0)
    return Status::ok();
  if (x.dtype() == DType::F64) {
    refPoolForward(w, isMax, x.data<double>(), out->data<double>(),
                   ctx.threadPool());
    return Status::ok();
  }
  static PrimitiveCache<dnnl::pooling_forward> cache;
  return guardDnnl(name, [&] {
    PoolDescs d = poolDescs(w);
    auto prim = cache.get(w.key(isMax ? kMaxForward : kAvgForward), [&] {
      return dnnl::pooling_forward(
          forwardPd(d, isMax, dnnl::prop_kind::forward_inference));
    });
    dnnl::stream stream(cpuEngine());
    prim->execute(
        stream, {{DNNL_ARG_SRC,
                  memory(d.src, cpuEngine(), const_cast<void *>(x.rawData()))},
                 {DNNL_ARG_DST, memory(d.dst, cpuEngine(), out->rawData())}});
    stream.wait();
    return Status::ok();
  });
}

Status maxPoolKernel(KernelContext &ctx) {
  return poolForward(ctx, dtf::ops::kMaxPool, true);
}
Status avgPoolKernel(KernelContext &ctx) {
  return poolForward(ctx, dtf::ops::kAvgPool, false);
}

// dx = avg_pool_grad(x, dy): each dy spreads evenly over the input
// positions of its window (padding excluded), through oneDNN.
Status avgPoolGradKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kAvgPoolGrad;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 2));
  const Tensor &x = ctx.input(0), &dy = ctx.input(1);
  Window2D w;
  DTF_RETURN_IF_ERROR(poolGeometry(ctx, name, x, &w));
  DTF_RETURN_IF_ERROR(checkPoolDy(name, w, x, dy));
  Tensor *dx;
  DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, x.dtype(), x.shape(), &dx));
  if (dx->numElements() == 0)
    return Status::ok();
  if (dy.numElements() == 0) {
    std::memset(dx->rawData(), 0, dx->byteSize());
    return Status::ok();
  }
  if (x.dtype() == DType::F64) {
    refAvgPoolGrad(w, dy.data<double>(), dx->data<double>(), ctx.threadPool());
    return Status::ok();
  }
  static PrimitiveCache<dnnl::pooling_backward> cache;
  return guardDnnl(name, [&] {
    PoolDescs d = poolDescs(w);
    auto bwd = cache.get(w.key(kAvgBackward), [&] {
      auto fwd = forwardPd(d, false, dnnl::prop_kind::forward_training);
      dnnl::pooling_backward::desc desc(algorithmOf(false), d.src, d.dst,
                                        d.strides, d.kernel, d.padL, d.padR);
      return dnnl::pooling_backward(
          dnnl::pooling_backward::primitive_desc(desc, cpuEngine(), fwd));
    });
    dnnl::stream stream(cpuEngine());
    bwd->execute(
        stream,
        {{DNNL_ARG_DIFF_DST,
          memory(d.dst, cpuEngine(), const_cast<void *>(dy.rawData()))},
         {DNNL_ARG_DIFF_SRC, memory(d.src, cpuEngine(), dx->rawData())}});
    stream.wait();
    return Status::ok();
  });
}

// dx = max_pool_grad(x, dy): each dy goes to the position of its window's
// maximum, the first in row-major window order among equal values (as
// TensorFlow's CPU kernel and oneDNN pick it). Written here rather than with
// oneDNN: oneDNN 2.6 needs a forward pass with a workspace for this, and in
// NHWC that pass alone costs four times an inference forward pass, while
// finding the maximum again vectorizes over the channels. With `relu`
// (dtf-fuse-library's fold of the relu_grad after it), a dy is dropped where
// its window's maximum is not positive: relu_grad's mask at the position the
// dy goes to, in the same pass.
template <typename T>
void maxPoolGrad(const Window2D &w, const T *px, const T *pdy, T *pdx,
                 bool relu, ThreadPool *pool);

// Windows that tile the input without overlap or padding before them (the
// usual 2x2 stride-2 pool): each dx element belongs to at most one window.
bool windowsTile(const Window2D &w) {
  return w.sh == w.kh && w.sw == w.kw && w.padTop == 0 && w.padLeft == 0 &&
         w.oh * w.kh <= w.ih && w.ow * w.kw <= w.iw;
}

// Windows that tile (windowsTile), the row of windows at output row oy
// (dxn: its first input row of image n): zeroes the dx elements no window
// covers, the columns right of the last window and, after the last row of
// windows, the rows below it.
template <typename T>
void zeroUncovered(const Window2D &w, int64_t oy, T *dxn) {
  const int64_t row = w.iw * w.c, covered = w.ow * w.kw * w.c;
  for (int64_t ky = 0; ky < w.kh; ++ky)
    std::memset(dxn + ky * row + covered, 0,
                size_t(row - covered) * sizeof(T));
  if (oy + 1 == w.oh)
    std::memset(dxn + w.kh * row, 0,
                size_t((w.ih - oy * w.kh - w.kh) * row) * sizeof(T));
}

// maxPoolGrad for windows that tile: every dx element is written once (dy,
// or zero), with no memset before and no scatter, and the rows of windows
// are split over the pool (so batch 1 uses every thread). The same rule as
// maxPoolGrad, bit for bit: the first maximum in window order (a NaN first
// stays, a later NaN never wins), and `T(0) + dy` as maxPoolGrad's zeroed
// dx plus dy (-0 becomes +0).
template <typename T>
void maxPoolGradTiled(const Window2D &w, const T *px, const T *pdy, T *pdx,
                      bool relu, ThreadPool *pool);

Status maxPoolGradKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kMaxPoolGrad;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 2));
  const Tensor &x = ctx.input(0), &dy = ctx.input(1);
  Window2D w;
  DTF_RETURN_IF_ERROR(poolGeometry(ctx, name, x, &w));
  DTF_RETURN_IF_ERROR(checkPoolDy(name, w, x, dy));
  Tensor *dx;
  DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, x.dtype(), x.shape(), &dx));
  return dispatchFloat(name, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (windowsTile(w))
      maxPoolGradTiled(w, x.data<T>(), dy.data<T>(), dx->data<T>(),
                       ctx.getBool("relu"), ctx.threadPool());
    else
      maxPoolGrad(w, x.data<T>(), dy.data<T>(), dx->data<T>(),
                  ctx.getBool("relu"), ctx.threadPool());
    return Status::ok();
  });
}

template <typename T>
void maxPoolGrad(const Window2D &w, const T *px, const T *pdy, T *pdx,
                 bool relu, ThreadPool *pool) {
  const int64_t c = w.c, image = w.ih * w.iw * c;
  // Images are independent: each thread zeroes and fills its own.
  parallelFor(pool, w.n, 1, [&](int64_t lo, int64_t hi) {
    std::vector<T> best(c);
    std::vector<int32_t> at(c);
    for (int64_t n = lo; n < hi; ++n) {
      const T *xn = px + n * image;
      T *dxn = pdx + n * image;
      std::memset(dxn, 0, size_t(image) * sizeof(T));
      for (int64_t oy = 0; oy < w.oh; ++oy)
        for (int64_t ox = 0; ox < w.ow; ++ox) {
          std::fill(best.begin(), best.end(),
                    -std::numeric_limits<T>::infinity());
          std::fill(at.begin(), at.end(), -1);
          for (int64_t ky = 0; ky < w.kh; ++ky) {
            const int64_t iy = oy * w.sh - w.padTop + ky;
            if (iy < 0 || iy >= w.ih)
              continue;
            for (int64_t kx = 0; kx < w.kw; ++kx) {
              const int64_t ix = ox * w.sw - w.padLeft + kx;
              if (ix < 0 || ix >= w.iw)
                continue;
              const int32_t pos = int32_t((iy * w.iw + ix) * c);
              const T *v = xn + pos;
              T *b = best.data();
              int32_t *a = at.data();
              for (int64_t q = 0; q < c; ++q) {
                const bool more = v[q] > b[q] || a[q] < 0;
                b[q] = more ? v[q] : b[q];
                a[q] = more ? pos : a[q];
              }
            }
          }
          const T *g = pdy + ((n * w.oh + oy) * w.ow + ox) * c;
          for (int64_t q = 0; q < c; ++q)
            if (at[q] >= 0 && (!relu || best[q] > T(0)))
              dxn[at[q] + q] += g[q];
        }
    }
  });
}

template <typename T>
void maxPoolGradTiled(const Window2D &w, const T *px, const T *pdy, T *pdx,
                      bool relu, ThreadPool *pool) {
  const int64_t c = w.c, row = w.iw * c, image = w.ih * row;
  parallelFor(pool, w.n * w.oh, 1, [&](int64_t lo, int64_t hi) {
    std::vector<T> best(c);
    std::vector<int32_t> at(c); // the maximum's position in window order
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t n = r / w.oh, oy = r % w.oh, y0 = oy * w.kh;
      const T *xn = px + n * image + y0 * row;
      T *dxn = pdx + n * image + y0 * row;
      zeroUncovered(w, oy, dxn);
      for (int64_t ox = 0; ox < w.ow; ++ox) {
        const int64_t x0 = ox * w.kw * c;
        T *b = best.data();
        int32_t *a = at.data();
        std::memcpy(b, xn + x0, size_t(c) * sizeof(T));
        std::fill(at.begin(), at.end(), 0);
        int32_t j = 0;
        for (int64_t ky = 0; ky < w.kh; ++ky)
          for (int64_t kx = 0; kx < w.kw; ++kx, ++j) {
            if (j == 0)
              continue;
            const T *v = xn + ky * row + x0 + kx * c;
            for (int64_t q = 0; q < c; ++q) {
              const bool more = v[q] > b[q];
              b[q] = more ? v[q] : b[q];
              a[q] = more ? j : a[q];
            }
          }
        const T *g = pdy + ((n * w.oh + oy) * w.ow + ox) * c;
        j = 0;
        for (int64_t ky = 0; ky < w.kh; ++ky)
          for (int64_t kx = 0; kx < w.kw; ++kx, ++j) {
            T *d = dxn + ky * row + x0 + kx * c;
            // Branch-free, the relu test outside: the loops vectorize
            // (with -fno-trapping-math, runtime/kernels/CMakeLists.txt).
            if (relu)
              for (int64_t q = 0; q < c; ++q) {
                const T dy = T(0) + g[q];
                d[q] = (a[q] == j) & (b[q] > T(0)) ? dy : T(0);
              }
            else
              for (int64_t q = 0; q < c; ++q) {
                const T dy = T(0) + g[q];
                d[q] = a[q] == j ? dy : T(0);
              }
          }
      }
    }
  });
}

// max_pool_with_argmax and max_pool_grad_with_argmax (dtf-fuse-library's
// pair for a CPU-placed max pool and its gradient): the forward pass keeps,
// per output element, one byte saying where its window's maximum is, so the
// gradient reads those bytes and dy (a quarter of dy's size plus dy) instead
// of x. The bytes of one output pixel's channels are packed four to an i32:
// the argmax tensor is [N, OH, OW, ceil(C / 4)] i32, byte q of pixel p at
// p * 4 * ceil(C / 4) + q (the bytes past C are zero).
//
// A byte's low seven bits are the window position ky * KW + kx of the
// first maximum in row-major window order, max_pool_grad's rule (a NaN
// first stays, a later NaN never wins), or kNoPosition when no position of
// the window lies inside the input; its high bit (kNotPositive) is set when
// that maximum is not positive: the relu mask of max_pool_grad relu.
constexpr uint8_t kNoPosition = 127, kNotPositive = 0x80;

int64_t argmaxStride(int64_t c) { return 4 * ((c + 3) / 4); }

std::vector<int64_t> argmaxShape(const Window2D &w) {
  return {w.n, w.oh, w.ow, argmaxStride(w.c) / 4};
}

// The forward pass: y as max_pool's, bit for bit (f64: refPoolForward's
// maximum, where a NaN anywhere in the window gives NaN; f32: oneDNN's,
// which passes over NaNs: the largest of the other values and the lowest
// finite float, so -inf and NaNs alone give -FLT_MAX), and
// the argmax bytes. One pass over x, rows of output pixels split over the
// pool.
template <typename T>
void maxPoolWithArgmax(const Window2D &w, const T *px, T *py, uint8_t *pidx,
                       ThreadPool *pool) {
  const int64_t c = w.c, image = w.ih * w.iw * c, stride = argmaxStride(c);
  constexpr T kLowest = std::numeric_limits<T>::lowest();
  parallelFor(pool, w.n * w.oh, 1, [&](int64_t lo, int64_t hi) {
    std::vector<T> best(c), top(c);
    std::vector<int32_t> at(c);
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t n = r / w.oh, oy = r % w.oh;
      const T *xn = px + n * image;
      for (int64_t ox = 0; ox < w.ow; ++ox) {
        const int64_t p = r * w.ow + ox;
        T *b = best.data(), *m = top.data();
        int32_t *a = at.data();
        bool any = false;
        forWindowAt(w, oy, ox, [&](int64_t pos, int32_t j) {
          const T *v = xn + pos;
          if (!any) {
            std::memcpy(b, v, size_t(c) * sizeof(T));
            std::fill(at.begin(), at.end(), j);
            if constexpr (std::is_same_v<T, float>)
              for (int64_t q = 0; q < c; ++q)
                m[q] = v[q] > kLowest ? v[q] : kLowest;
            else
              std::memcpy(m, v, size_t(c) * sizeof(T));
            any = true;
            return;
          }
          for (int64_t q = 0; q < c; ++q) {
            const bool more = v[q] > b[q];
            b[q] = more ? v[q] : b[q];
            a[q] = more ? j : a[q];
            if constexpr (std::is_same_v<T, float>)
              m[q] = v[q] > m[q] ? v[q] : m[q];
            else
              m[q] = (v[q] > m[q]) | (v[q] != v[q]) ? v[q] : m[q];
          }
        });
        T *y = py + p * c;
        uint8_t *idx = pidx + p * stride;
        if (!any) {
          std::fill(y, y + c, T(0));
          std::memset(idx, kNoPosition | kNotPositive, size_t(c));
        } else {
          std::memcpy(y, m, size_t(c) * sizeof(T));
          for (int64_t q = 0; q < c; ++q)
            idx[q] = uint8_t(a[q] | (b[q] > T(0) ? 0 : kNotPositive));
        }
        std::memset(idx + c, 0, size_t(stride - c));
      }
    }
  });
}

#if defined(__AVX2__)
// maxPoolWithArgmaxTiled's step for 8 f32 channels, in AVX2 registers
// (GCC's vectorizer keeps the maxima and positions in memory): x0 is the
// window's first position, off[j] position j's offset from it.
// kPositions > 0 fixes the window's positions (the 2x2 pool's 4: the loop
// over them unrolls).
template <int32_t kPositions>
void argmaxBlock8(const float *x0, const int64_t *off, int32_t positions,
                  float *y, uint8_t *idx) {
  if constexpr (kPositions > 0)
    positions = kPositions;
  const __m256 lowest = _mm256_set1_ps(std::numeric_limits<float>::lowest());
  __m256 b = _mm256_loadu_ps(x0);
  __m256 m = _mm256_blendv_ps(lowest, b, _mm256_cmp_ps(b, lowest, _CMP_GT_OQ));
  __m256i a = _mm256_setzero_si256();
  for (int32_t j = 1; j < positions; ++j) {
    const __m256 v = _mm256_loadu_ps(x0 + off[j]);
    const __m256 more = _mm256_cmp_ps(v, b, _CMP_GT_OQ);
    b = _mm256_blendv_ps(b, v, more);
    a = _mm256_blendv_epi8(a, _mm256_set1_epi32(j), _mm256_castps_si256(more));
    m = _mm256_blendv_ps(m, v, _mm256_cmp_ps(v, m, _CMP_GT_OQ));
  }
  _mm256_storeu_ps(y, m);
  const __m256 positive = _mm256_cmp_ps(b, _mm256_setzero_ps(), _CMP_GT_OQ);
  const __m256i bytes =
      _mm256_or_si256(a, _mm256_andnot_si256(_mm256_castps_si256(positive),
                                             _mm256_set1_epi32(kNotPositive)));
  const __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(bytes),
                                         _mm256_extracti128_si256(bytes, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i *>(idx),
                   _mm_packus_epi16(words, words));
}
#endif

// maxPoolWithArgmax for windows that tile (windowsTile), the same values:
// channels in blocks of kBlock whose maxima, positions and bytes stay in
// registers (the loops vectorize), the rest of the channels as in
// maxPoolWithArgmax.
template <typename T>
void maxPoolWithArgmaxTiled(const Window2D &w, const T *px, T *py,
                            uint8_t *pidx, ThreadPool *pool) {
  constexpr int64_t kBlock = 64 / sizeof(T);
  constexpr T kLowest = std::numeric_limits<T>::lowest();
  constexpr bool kF32 = std::is_same_v<T, float>;
  const int64_t c = w.c, row = w.iw * c, image = w.ih * row;
  const int64_t stride = argmaxStride(c), positions = w.kh * w.kw;
  // Keeps max_pool's value m (see maxPoolWithArgmax) and the first
  // maximum b at a, over v.
  auto step = [](T v, T &b, T &m, int32_t &a, int32_t j) {
    const bool more = v > b;
    b = more ? v : b;
    a = more ? j : a;
    if constexpr (kF32)
      m = v > m ? v : m;
    else
      m = (v > m) | (v != v) ? v : m;
  };
  std::vector<int64_t> off(positions); // position j's offset in x
  for (int64_t j = 0; j < positions; ++j)
    off[j] = (j / w.kw) * row + (j % w.kw) * c;
  parallelFor(pool, w.n * w.oh, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t n = r / w.oh, oy = r % w.oh;
      const T *xr = px + n * image + oy * w.kh * row;
      for (int64_t ox = 0; ox < w.ow; ++ox) {
        const int64_t p = r * w.ow + ox;
        const T *x0 = xr + ox * w.kw * c;
        T *y = py + p * c;
        uint8_t *idx = pidx + p * stride;
        int64_t q0 = 0;
#if defined(__AVX2__)
        if constexpr (kF32) {
          for (; q0 + 8 <= c; q0 += 8) {
            if (positions == 4)
              argmaxBlock8<4>(x0 + q0, off.data(), 4, y + q0, idx + q0);
            else
              argmaxBlock8<0>(x0 + q0, off.data(), int32_t(positions),
                              y + q0, idx + q0);
          }
        }
#endif
        for (; q0 + kBlock <= c; q0 += kBlock) {
          T b[kBlock], m[kBlock];
          int32_t a[kBlock];
          for (int64_t q = 0; q < kBlock; ++q) {
            b[q] = x0[q0 + q];
            m[q] = kF32 ? (b[q] > kLowest ? b[q] : kLowest) : b[q];
            a[q] = 0;
          }
          for (int32_t j = 1; j < positions; ++j) {
            const T *v = x0 + off[j] + q0;
            for (int64_t q = 0; q < kBlock; ++q)
              step(v[q], b[q], m[q], a[q], j);
          }
          for (int64_t q = 0; q < kBlock; ++q) {
            y[q0 + q] = m[q];
            idx[q0 + q] = uint8_t(a[q] | (b[q] > T(0) ? 0 : kNotPositive));
          }
        }
        for (int64_t q = q0; q < c; ++q) {
          T b = x0[q], m = kF32 ? (b > kLowest ? b : kLowest) : b;
          int32_t a = 0;
          for (int32_t j = 1; j < positions; ++j)
            step(x0[off[j] + q], b, m, a, j);
          y[q] = m;
          idx[q] = uint8_t(a | (b > T(0) ? 0 : kNotPositive));
        }
        std::memset(idx + c, 0, size_t(stride - c));
      }
    }
  });
}

// The gradient for windows that tile (windowsTile): as maxPoolGradTiled,
// every dx element written once. A byte naming no position of its window
// sets `bad` (the caller then finds and reports it); kNoPosition sends
// nothing, as in maxPoolGradArgmax.
template <typename T>
void maxPoolGradArgmaxTiled(const Window2D &w, const uint8_t *pidx,
                            const T *pdy, T *pdx, bool relu,
                            std::atomic<bool> *bad, ThreadPool *pool) {
  const int64_t c = w.c, row = w.iw * c, image = w.ih * row;
  const int64_t stride = argmaxStride(c);
  const int32_t positions = int32_t(w.kh * w.kw);
  parallelFor(pool, w.n * w.oh, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t n = r / w.oh, oy = r % w.oh, y0 = oy * w.kh;
      T *dxn = pdx + n * image + y0 * row;
      zeroUncovered(w, oy, dxn);
      int32_t misses = 0;
      for (int64_t ox = 0; ox < w.ow; ++ox) {
        const int64_t p = r * w.ow + ox, x0 = ox * w.kw * c;
        const uint8_t *idx = pidx + p * stride;
        for (int64_t q = 0; q < c; ++q) {
          const int32_t j = idx[q] & kNoPosition;
          misses |= (j >= positions) & (j != kNoPosition);
        }
        const T *g = pdy + p * c;
        int32_t j = 0;
        for (int64_t ky = 0; ky < w.kh; ++ky)
          for (int64_t kx = 0; kx < w.kw; ++kx, ++j) {
            T *d = dxn + ky * row + x0 + kx * c;
            if (relu)
              for (int64_t q = 0; q < c; ++q) {
                const T dy = T(0) + g[q];
                d[q] = idx[q] == j ? dy : T(0);
              }
            else
              for (int64_t q = 0; q < c; ++q) {
                const T dy = T(0) + g[q];
                d[q] = (idx[q] & kNoPosition) == j ? dy : T(0);
              }
          }
      }
      if (misses)
        bad->store(true, std::memory_order_relaxed);
    }
  });
}

// The gradient for any geometry: as maxPoolGrad, each image's dx zeroed and
// every dy added at its maximum's position in output order (overlapping
// windows sum in the same order).
template <typename T>
void maxPoolGradArgmax(const Window2D &w, const uint8_t *pidx, const T *pdy,
                       T *pdx, bool relu, std::atomic<bool> *bad,
                       ThreadPool *pool) {
  const int64_t c = w.c, image = w.ih * w.iw * c, stride = argmaxStride(c);
  const int64_t positions = w.kh * w.kw;
  parallelFor(pool, w.n, 1, [&](int64_t lo, int64_t hi) {
    // Per window position: its input offset, or -1 outside the input.
    std::vector<int64_t> offset(kNoPosition + 1, -1);
    for (int64_t n = lo; n < hi; ++n) {
      T *dxn = pdx + n * image;
      std::memset(dxn, 0, size_t(image) * sizeof(T));
      for (int64_t oy = 0; oy < w.oh; ++oy)
        for (int64_t ox = 0; ox < w.ow; ++ox) {
          for (int64_t j = 0; j < positions; ++j) {
            const int64_t iy = oy * w.sh - w.padTop + j / w.kw;
            const int64_t ix = ox * w.sw - w.padLeft + j % w.kw;
            offset[j] = iy < 0 || iy >= w.ih || ix < 0 || ix >= w.iw
                            ? -1
                            : (iy * w.iw + ix) * c;
          }
          const int64_t p = (n * w.oh + oy) * w.ow + ox;
          const uint8_t *idx = pidx + p * stride;
          const T *g = pdy + p * c;
          for (int64_t q = 0; q < c; ++q) {
            const int j = idx[q] & kNoPosition;
            if (j == kNoPosition || (relu && (idx[q] & kNotPositive)))
              continue;
            if (offset[j] < 0) {
              bad->store(true, std::memory_order_relaxed);
              continue;
            }
            dxn[offset[j] + q] += g[q];
          }
        }
    }
  });
}

// The first argmax byte that names no position of its window inside the
// input, as an error (kNoPosition is allowed: no gradient).
Status findBadArgmax(const char *name, const Window2D &w, const uint8_t *pidx) {
  const int64_t stride = argmaxStride(w.c);
  for (int64_t n = 0; n < w.n; ++n)
    for (int64_t oy = 0; oy < w.oh; ++oy)
      for (int64_t ox = 0; ox < w.ow; ++ox)
        for (int64_t q = 0; q < w.c; ++q) {
          const uint8_t byte = pidx[((n * w.oh + oy) * w.ow + ox) * stride + q];
          const int j = byte & kNoPosition;
          const int64_t iy = oy * w.sh - w.padTop + j / w.kw;
          const int64_t ix = ox * w.sw - w.padLeft + j % w.kw;
          if (j == kNoPosition ||
              (j < w.kh * w.kw && iy >= 0 && iy < w.ih && ix >= 0 && ix < w.iw))
            continue;
          return errorStatus(
              name, ": argmax byte ", int(byte), " of output [", n, ", ", oy,
              ", ", ox, ", ", q, "] names window position ", j,
              ", which is not in its ", w.kh, "x", w.kw,
              " window inside the input (the argmax of another pool, or "
              "edited?)");
        }
  return errorStatus(name, ": an argmax byte names no position of its window");
}

Status maxPoolWithArgmaxKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kMaxPoolWithArgmax;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 1));
  const Tensor &x = ctx.input(0);
  Window2D w;
  DTF_RETURN_IF_ERROR(poolGeometry(ctx, name, x, &w));
  if (w.kh * w.kw > kNoPosition)
    return errorStatus(name,
                       " keeps a window position in seven bits, so its "
                       "window has at most 127 positions, got ",
                       w.kh, "x", w.kw);
  Tensor *y, *idx;
  DTF_RETURN_IF_ERROR(
      ctx.allocateOutput(0, x.dtype(), {w.n, w.oh, w.ow, w.c}, &y));
  DTF_RETURN_IF_ERROR(ctx.allocateOutput(1, DType::I32, argmaxShape(w), &idx));
  if (y->numElements() == 0)
    return Status::ok();
  return dispatchFloat(name, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto *bytes = static_cast<uint8_t *>(idx->rawData());
    if (windowsTile(w))
      maxPoolWithArgmaxTiled(w, x.data<T>(), y->data<T>(), bytes,
                             ctx.threadPool());
    else
      maxPoolWithArgmax(w, x.data<T>(), y->data<T>(), bytes, ctx.threadPool());
    return Status::ok();
  });
}

// dx = max_pool_grad_with_argmax(argmax, dy): max_pool_grad(x, dy) (with
// `relu`, max_pool_grad relu) bit for bit, x's shape from `input_shape`.
Status maxPoolGradWithArgmaxKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kMaxPoolGradWithArgmax;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 2));
  const Tensor &idx = ctx.input(0), &dy = ctx.input(1);
  DTF_RETURN_IF_ERROR(requireFloat(name, "dy", dy));
  if (dy.rank() != 4)
    return errorStatus(name, " expects dy of rank 4, got ", dy.describe());
  // The pooled input's shape; a -1 batch is dy's.
  std::vector<int64_t> inputShape;
  DTF_RETURN_IF_ERROR(
      shapeAttr(ctx, name, "input_shape", {dy.dim(0)}, &inputShape));
  const Tensor shapeOnly = Tensor::view(dy.dtype(), inputShape, nullptr);
  Window2D w;
  DTF_RETURN_IF_ERROR(poolGeometry(ctx, name, shapeOnly, &w));
  DTF_RETURN_IF_ERROR(checkPoolDy(name, w, shapeOnly, dy));
  if (idx.dtype() != DType::I32 || idx.shape() != argmaxShape(w))
    return errorStatus(name, " expects the argmax of type i32",
                       shapeString(argmaxShape(w)),
                       " (max_pool_with_argmax's of input ",
                       shapeString(inputShape), "), got ", idx.describe());
  if (w.kh * w.kw > kNoPosition)
    return errorStatus(name,
                       " reads window positions of seven bits, so its "
                       "window has at most 127 positions, got ",
                       w.kh, "x", w.kw);
  Tensor *dx;
  DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, dy.dtype(), inputShape, &dx));
  if (dx->numElements() == 0)
    return Status::ok();
  const auto *bytes = static_cast<const uint8_t *>(idx.rawData());
  std::atomic<bool> bad{false};
  DTF_RETURN_IF_ERROR(dispatchFloat(name, dy.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (windowsTile(w))
      maxPoolGradArgmaxTiled(w, bytes, dy.data<T>(), dx->data<T>(),
                             ctx.getBool("relu"), &bad, ctx.threadPool());
    else
      maxPoolGradArgmax(w, bytes, dy.data<T>(), dx->data<T>(),
                        ctx.getBool("relu"), &bad, ctx.threadPool());
    return Status::ok();
  }));
  return bad.load() ? findBadArgmax(name, w, bytes) : Status::ok();
}

} // namespace

void registerPoolKernels(KernelRegistry &registry) {
  registry.add(dtf::ops::kMaxPool, maxPoolKernel);
  registry.add(dtf::ops::kAvgPool, avgPoolKernel);
  registry.add(dtf::ops::kMaxPoolGrad, maxPoolGradKernel);
  registry.add(dtf::ops::kAvgPoolGrad, avgPoolGradKernel);
  registry.add(dtf::ops::kMaxPoolWithArgmax, maxPoolWithArgmaxKernel);
  registry.add(dtf::ops::kMaxPoolGradWithArgmax, maxPoolGradWithArgmaxKernel);
}

} // namespace dtf::cpu
