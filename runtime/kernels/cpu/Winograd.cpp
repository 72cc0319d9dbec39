// Winograd's F(2x2, 5x5) for f32 convolutions on AVX-512 (Winograd.h).
//
// With the interpolation points 0, 1, -1, 2, -2 and infinity, and rows
// rescaled so that the input transform has small integer and quarter
// coefficients (the scales moved into G):
//   B^T = [4  0 -5  0  1 0]   G = [1/4    0    0    0    0]   A^T = [1 1  1 1
//   1 0]
//         [0  1  1 -¼ -¼ 0]       [2/3  2/3  2/3  2/3  2/3]         [0 1 -1 2
//         -2 1] [0 -1  1  ¼ -¼ 0]       [2/3 -2/3  2/3 -2/3  2/3] [0 -2 -1  2
//         1 0]       [1/24 1/12 1/6  1/3  2/3] [0  2 -1 -2  1 0]       [1/24
//         -1/12 1/6 -1/3 2/3] [0  4  0 -5  0 1]       [0     0    0    0    1]
// A 2x2 block of outputs is Y = A^T [(G g G^T) . (B^T d B)] A for the 6x6
// block of inputs d under it; the products over the input channels, one
// matrix product for each of the 36 points, are the bulk of the work.
// Tiles go in blocks of kTiles, whose transformed inputs and products stay
// in the core's L2 cache between the three stages.
#include "runtime/kernels/cpu/Winograd.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

namespace dtf::cpu {
namespace {

constexpr int kPoints = 36;
constexpr int64_t kTiles = 18; // a multiple of kRows; 12-36 ran alike here
constexpr int64_t kGradTiles =
    48; // the filter's gradient: fewer passes over its sums
// The largest layers that go to Winograd: every block of tiles reads the
// whole transformed filter (36 c oc floats, 9.4 MB at 256 x 256), which
// stops fitting the caches; a one-off check here (one thread, 14 x 14
// images; not a benchmark of bench/) still had each pass faster than
// oneDNN's at 256 x 256. Larger layers stay on oneDNN's direct kernels.
constexpr int64_t kMaxChannelProduct = 256 * 256;
constexpr int kRows = 6; // rows of the matrix products' micro kernel

#define DTF_AVX512 __attribute__((target("avx512f")))

// 64-byte aligned floats, per thread, grown as needed.
struct Scratch {
  std::unique_ptr<float, void (*)(void *)> data{nullptr, std::free};
  size_t size = 0;
  float *get(size_t floats) {
    if (floats > size) {
      void *p = nullptr;
      if (posix_memalign(&p, 64, floats * sizeof(float)) != 0)
        throw std::bad_alloc();
      data.reset(static_cast<float *>(p));
      size = floats;
    }
    return data.get();
  }
};

// The 1-D input transform t = B^T d of six vectors.
DTF_AVX512 inline void inputTransform(const __m512 d[6], __m512 t[6]) {
  const __m512 four = _mm512_set1_ps(4), five = _mm512_set1_ps(5),
               quarter = _mm512_set1_ps(0.25f), two = _mm512_set1_ps(2);
  t[0] = _mm512_add_ps(_mm512_fnmadd_ps(five, d[2], _mm512_mul_ps(four, d[0])),
                       d[4]);
  const __m512 d12 = _mm512_add_ps(d[1], d[2]), d34 = _mm512_add_ps(d[3], d[4]);
  t[1] = _mm512_fnmadd_ps(quarter, d34, d12);
  const __m512 e21 = _mm512_sub_ps(d[2], d[1]), e34 = _mm512_sub_ps(d[3], d[4]);
  t[2] = _mm512_fmadd_ps(quarter, e34, e21);
  const __m512 e42 = _mm512_sub_ps(d[4], d[2]), e31 = _mm512_sub_ps(d[3], d[1]);
  t[3] = _mm512_fmadd_ps(two, e31, e42);
  t[4] = _mm512_fnmadd_ps(two, e31, e42);
  t[5] = _mm512_add_ps(_mm512_fnmadd_ps(five, d[3], _mm512_mul_ps(four, d[1])),
                       d[5]);
}

// The 1-D output transform y = A^T m of six vectors.
DTF_AVX512 inline void outputTransform(const __m512 m[6], __m512 y[2]) {
  const __m512 two = _mm512_set1_ps(2);
  y[0] = _mm512_add_ps(
      _mm512_add_ps(_mm512_add_ps(m[0], m[1]), _mm512_add_ps(m[2], m[3])),
      m[4]);
  y[1] = _mm512_add_ps(_mm512_fmadd_ps(two, _mm512_sub_ps(m[3], m[4]),
                                       _mm512_sub_ps(m[1], m[2])),
                       m[5]);
}

// The geometry of the tiles: 2x2 blocks of outputs, numbered image by image,
// row by row.
struct Tiles {
  int64_t rows, cols, perImage, total;
  explicit Tiles(const WinogradShape &s)
      : rows((s.oh + 1) / 2), cols((s.ow + 1) / 2), perImage(rows * cols),
        total(s.n * perImage) {}
  // Tile t's image and its first output row and column.
  void origin(int64_t t, int64_t *img, int64_t *oy, int64_t *ox) const {
    *img = t / perImage;
    const int64_t r = t % perImage;
    *oy = (r / cols) * 2;
    *ox = (r % cols) * 2;
  }
};

// v[p][t][c] for the tiles [t0, t0 + count) of x: B^T d B of each tile's 6x6
// inputs, 16 channels at a time; rows of tiles past `count` up to `padded`
// are zeros.
DTF_AVX512 void transformInputs(const WinogradShape &s, const Tiles &g,
                                const float *x, int64_t t0, int64_t count,
                                int64_t padded, float *v) {
  const int64_t c = s.c, pointStride = padded * c;
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t k = 0; k < padded; ++k) {
    if (k >= count) {
      for (int p = 0; p < kPoints; ++p)
        std::memset(v + p * pointStride + k * c, 0, size_t(c) * sizeof(float));
      continue;
    }
    int64_t img, iy0, ix0;
    g.origin(t0 + k, &img, &iy0, &ix0);
    iy0 -= s.padTop;
    ix0 -= s.padLeft;
    const float *base = x + img * s.ih * s.iw * c;
    bool inside[6][6];
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i)
#pragma GCC unroll 6
      for (int j = 0; j < 6; ++j)
        inside[i][j] =
            iy0 + i >= 0 && iy0 + i < s.ih && ix0 + j >= 0 && ix0 + j < s.iw;
    for (int64_t ch = 0; ch < c; ch += 16) {
      __m512 tmp[6][6];
#pragma GCC unroll 6
      for (int j = 0; j < 6; ++j) {
        __m512 d[6];
#pragma GCC unroll 6
        for (int i = 0; i < 6; ++i)
          d[i] = inside[i][j]
                     ? _mm512_loadu_ps(base + ((iy0 + i) * s.iw + ix0 + j) * c +
                                       ch)
                     : zero;
        __m512 t[6];
        inputTransform(d, t);
#pragma GCC unroll 6
        for (int i = 0; i < 6; ++i)
          tmp[i][j] = t[i];
      }
#pragma GCC unroll 6
      for (int i = 0; i < 6; ++i) {
        __m512 t[6];
        inputTransform(tmp[i], t);
#pragma GCC unroll 6
        for (int j = 0; j < 6; ++j)
          _mm512_storeu_ps(v + (i * 6 + j) * pointStride + k * c + ch, t[j]);
      }
    }
  }
}

// c[r][0 : 16 NV] (+)= sum over k < K of a[r * ars + k * aks] * b[k * ldb :],
// for R rows.
template <int R, int NV>
DTF_AVX512 void microKernel(const float *a, int64_t ars, int64_t aks,
                            const float *b, int64_t ldb, float *c, int64_t ldc,
                            int64_t kk, bool accumulate) {
  __m512 acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int q = 0; q < NV; ++q)
      acc[r][q] = accumulate ? _mm512_loadu_ps(c + r * ldc + 16 * q)
                             : _mm512_setzero_ps();
  for (int64_t k = 0; k < kk; ++k) {
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int q = 0; q < NV; ++q)
      bv[q] = _mm512_loadu_ps(b + k * ldb + 16 * q);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * ars + k * aks]);
#pragma GCC unroll 4
      for (int q = 0; q < NV; ++q)
        acc[r][q] = _mm512_fmadd_ps(av, bv[q], acc[r][q]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int q = 0; q < NV; ++q)
      _mm512_storeu_ps(c + r * ldc + 16 * q, acc[r][q]);
}

template <int R>
DTF_AVX512 void microKernelRows(int nv, const float *a, int64_t ars,
                                int64_t aks, const float *b, int64_t ldb,
                                float *c, int64_t ldc, int64_t kk,
                                bool accumulate) {
  switch (nv) {
  case 1:
    return microKernel<R, 1>(a, ars, aks, b, ldb, c, ldc, kk, accumulate);
  case 2:
    return microKernel<R, 2>(a, ars, aks, b, ldb, c, ldc, kk, accumulate);
  case 3:
    return microKernel<R, 3>(a, ars, aks, b, ldb, c, ldc, kk, accumulate);
  default:
    return microKernel<R, 4>(a, ars, aks, b, ldb, c, ldc, kk, accumulate);
  }
}

// C[m][n] (+)= sum over k of A(r, k) B[k][n], A(r, k) = a[r * ars + k * aks],
// n a multiple of 16, in blocks of up to 6 rows and 64 columns.
DTF_AVX512 void matmul(int64_t m, int64_t n, int64_t kk, const float *a,
                       int64_t ars, int64_t aks, const float *b, int64_t ldb,
                       float *c, int64_t ldc, bool accumulate) {
  for (int64_t col = 0; col < n; col += 64) {
    const int nv = int(std::min<int64_t>(64, n - col) / 16);
    int64_t row = 0;
    for (; row + kRows <= m; row += kRows)
      microKernelRows<kRows>(nv, a + row * ars, ars, aks, b + col, ldb,
                             c + row * ldc + col, ldc, kk, accumulate);
    const float *ar = a + row * ars;
    float *cr = c + row * ldc + col;
    switch (m - row) { // the last rows, in one block
    case 5:
      microKernelRows<5>(nv, ar, ars, aks, b + col, ldb, cr, ldc, kk,
                         accumulate);
      break;
    case 4:
      microKernelRows<4>(nv, ar, ars, aks, b + col, ldb, cr, ldc, kk,
                         accumulate);
      break;
    case 3:
      microKernelRows<3>(nv, ar, ars, aks, b + col, ldb, cr, ldc, kk,
                         accumulate);
      break;
    case 2:
      microKernelRows<2>(nv, ar, ars, aks, b + col, ldb, cr, ldc, kk,
                         accumulate);
      break;
    case 1:
      microKernelRows<1>(nv, ar, ars, aks, b + col, ldb, cr, ldc, kk,
                         accumulate);
      break;
    default:
      break;
    }
  }
}

// The outputs of the tiles [t0, t0 + count) from their products
// m[p][t][oc]: A^T M A, plus the bias, then relu.
DTF_AVX512 void transformOutputs(const WinogradShape &s, const Tiles &g,
                                 const float *m, int64_t t0, int64_t count,
                                 int64_t padded, const float *bias, bool relu,
                                 float *y) {
  const int64_t oc = s.oc, pointStride = padded * oc;
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t k = 0; k < count; ++k) {
    int64_t img, oy0, ox0;
    g.origin(t0 + k, &img, &oy0, &ox0);
    float *base = y + img * s.oh * s.ow * oc;
    for (int64_t ch = 0; ch < oc; ch += 16) {
      __m512 tmp[2][6];
#pragma GCC unroll 6
      for (int j = 0; j < 6; ++j) {
        __m512 col[6];
#pragma GCC unroll 6
        for (int i = 0; i < 6; ++i)
          col[i] = _mm512_loadu_ps(m + (i * 6 + j) * pointStride + k * oc + ch);
        __m512 o[2];
        outputTransform(col, o);
        tmp[0][j] = o[0];
        tmp[1][j] = o[1];
      }
      const __m512 b = bias ? _mm512_loadu_ps(bias + ch) : zero;
#pragma GCC unroll 6
      for (int i = 0; i < 2; ++i) {
        if (oy0 + i >= s.oh)
          continue;
        __m512 o[2];
        outputTransform(tmp[i], o);
#pragma GCC unroll 6
        for (int j = 0; j < 2; ++j) {
          if (ox0 + j >= s.ow)
            continue;
          __m512 out = _mm512_add_ps(o[j], b);
          if (relu)
            out = _mm512_maskz_max_ps(0xFFFF, out, zero); // no undefined lanes
          _mm512_storeu_ps(base + ((oy0 + i) * s.ow + ox0 + j) * oc + ch, out);
        }
      }
    }
  }
}

// The rescaled G (6x5), as in the table at the top.
constexpr double kG[6][5] = {
    {0.25, 0, 0, 0, 0},
    {2.0 / 3, 2.0 / 3, 2.0 / 3, 2.0 / 3, 2.0 / 3},
    {2.0 / 3, -2.0 / 3, 2.0 / 3, -2.0 / 3, 2.0 / 3},
    {1.0 / 24, 2.0 / 24, 4.0 / 24, 8.0 / 24, 16.0 / 24},
    {1.0 / 24, -2.0 / 24, 4.0 / 24, -8.0 / 24, 16.0 / 24},
    {0, 0, 0, 0, 1}};

// G's entry (a, x), or with `T` G^T's (G^T is 5x6).
template <bool T> constexpr float gAt(int a, int x) {
  return float(T ? kG[x][a] : kG[a][x]);
}

// out[a][y] = sum over x of M[a][x] in[x][y], M = G (T false: 6x5) or G^T
// (T true: 5x6), 16 filters to a vector.
template <bool T, int A, int X, int Y>
DTF_AVX512 inline void timesG(const __m512 (&in)[X][Y], __m512 (&out)[A][Y]) {
#pragma GCC unroll 6
  for (int a = 0; a < A; ++a)
#pragma GCC unroll 6
    for (int y = 0; y < Y; ++y) {
      __m512 acc = _mm512_setzero_ps();
#pragma GCC unroll 6
      for (int x = 0; x < X; ++x)
        if (gAt<T>(a, x) != 0)
          acc = _mm512_fmadd_ps(_mm512_set1_ps(gAt<T>(a, x)), in[x][y], acc);
      out[a][y] = acc;
    }
}

// out[y][b] = sum over x of in[y][x] M[b][x]: the product with M^T on the
// right.
template <bool T, int B, int X, int Y>
DTF_AVX512 inline void timesGRight(const __m512 (&in)[Y][X],
                                   __m512 (&out)[Y][B]) {
#pragma GCC unroll 6
  for (int y = 0; y < Y; ++y)
#pragma GCC unroll 6
    for (int b = 0; b < B; ++b) {
      __m512 acc = _mm512_setzero_ps();
#pragma GCC unroll 6
      for (int x = 0; x < X; ++x)
        if (gAt<T>(b, x) != 0)
          acc = _mm512_fmadd_ps(_mm512_set1_ps(gAt<T>(b, x)), in[y][x], acc);
      out[y][b] = acc;
    }
}

// The tile blocks [lo, hi) of winogradConv.
DTF_AVX512 void convBlocks(const WinogradShape &s, const Tiles &g,
                           const float *x, const float *u, const float *bias,
                           bool relu, float *y, int64_t lo, int64_t hi) {
  thread_local Scratch vs, ms;
  float *v = vs.get(size_t(kPoints * kTiles * s.c));
  float *m = ms.get(size_t(kPoints * kTiles * s.oc));
  for (int64_t blk = lo; blk < hi; ++blk) {
    const int64_t t0 = blk * kTiles,
                  count = std::min<int64_t>(kTiles, g.total - t0);
    const int64_t padded = (count + kRows - 1) / kRows * kRows;
    transformInputs(s, g, x, t0, count, padded, v);
    for (int p = 0; p < kPoints; ++p)
      matmul(padded, s.oc, s.c, v + p * padded * s.c, s.c, 1,
             u + p * s.c * s.oc, s.oc, m + p * padded * s.oc, s.oc,
             /*accumulate=*/false);
    transformOutputs(s, g, m, t0, count, padded, bias, relu, y);
  }
}

// out = A (e0, e1): e0, e0 + e1, e0 - e1, e0 + 2 e1, e0 - 2 e1, e1.
DTF_AVX512 inline void gradientTransform(__m512 e0, __m512 e1, __m512 out[6]) {
  const __m512 two = _mm512_set1_ps(2);
  out[0] = e0;
  out[1] = _mm512_add_ps(e0, e1);
  out[2] = _mm512_sub_ps(e0, e1);
  out[3] = _mm512_fmadd_ps(two, e1, e0);
  out[4] = _mm512_fnmadd_ps(two, e1, e0);
  out[5] = e1;
}

// w[p][t][oc] = A dY A^T of the 2x2 gradients of the tiles [t0, t0 + count)
// (0 past the output's edge).
DTF_AVX512 void transformGradients(const WinogradShape &s, const Tiles &g,
                                   const float *dy, int64_t t0, int64_t count,
                                   float *w) {
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t k = 0; k < count; ++k) {
    int64_t img, oy0, ox0;
    g.origin(t0 + k, &img, &oy0, &ox0);
    const float *base = dy + img * s.oh * s.ow * s.oc;
    for (int64_t ch = 0; ch < s.oc; ch += 16) {
      __m512 e[2][2];
#pragma GCC unroll 6
      for (int i = 0; i < 2; ++i)
#pragma GCC unroll 6
        for (int j = 0; j < 2; ++j)
          e[i][j] = oy0 + i < s.oh && ox0 + j < s.ow
                        ? _mm512_loadu_ps(
                              base + ((oy0 + i) * s.ow + ox0 + j) * s.oc + ch)
                        : zero;
      __m512 left[2][6]; // A e, column by column
#pragma GCC unroll 2
      for (int j = 0; j < 2; ++j)
        gradientTransform(e[0][j], e[1][j], left[j]);
#pragma GCC unroll 6
      for (int i = 0; i < 6; ++i) {
        __m512 row[6]; // (A e A^T)[i]
        gradientTransform(left[0][i], left[1][i], row);
#pragma GCC unroll 6
        for (int j = 0; j < 6; ++j)
          _mm512_storeu_ps(w + (i * 6 + j) * count * s.oc + k * s.oc + ch,
                           row[j]);
      }
    }
  }
}

// The sum over the tile blocks [lo, hi) of v[p]^T w[p] into du (rows: input
// channels): winogradFilterGrad's part.
DTF_AVX512 void gradBlocks(const WinogradShape &s, const Tiles &g,
                           const float *x, const float *dy, float *du,
                           int64_t lo, int64_t hi) {
  thread_local Scratch vs, ws;
  float *v = vs.get(size_t(kPoints * kGradTiles * s.c));
  float *w = ws.get(size_t(kPoints * kGradTiles * s.oc));
  for (int64_t blk = lo; blk < hi; ++blk) {
    const int64_t t0 = blk * kGradTiles,
                  count = std::min<int64_t>(kGradTiles, g.total - t0);
    transformInputs(s, g, x, t0, count, count, v);
    transformGradients(s, g, dy, t0, count, w);
    for (int p = 0; p < kPoints; ++p)
      matmul(s.c, s.oc, count, v + p * count * s.c, 1, s.c,
             w + p * count * s.oc, s.oc, du + p * s.c * s.oc, s.oc,
             /*accumulate=*/true);
  }
}

// df[ky][kx][ci][o0 : o0 + 16] = (G^T du G)[ky][kx] for the 16 filters of
// input channel ci and output channels o0 ..., du the sum of `parts` partial
// sums `stride` floats apart.
DTF_AVX512 void untransformFilters(const float *du, int parts, size_t stride,
                                   int64_t c, int64_t oc, int64_t ci,
                                   int64_t o0, float *df) {
  __m512 d[6][6];
#pragma GCC unroll 6
  for (int p = 0; p < 6; ++p)
#pragma GCC unroll 6
    for (int q = 0; q < 6; ++q) {
      const float *at = du + ((p * 6 + q) * c + ci) * oc + o0;
      d[p][q] = _mm512_loadu_ps(at);
      for (int part = 1; part < parts; ++part)
        d[p][q] = _mm512_add_ps(d[p][q], _mm512_loadu_ps(at + part * stride));
    }
  __m512 gd[5][6], out[5][5]; // G^T d, then G^T d G
  timesG<true>(d, gd);
  timesGRight<true>(gd, out);
#pragma GCC unroll 5
  for (int ky = 0; ky < 5; ++ky)
#pragma GCC unroll 5
    for (int kx = 0; kx < 5; ++kx)
      _mm512_storeu_ps(df + ((ky * 5 + kx) * c + ci) * oc + o0, out[ky][kx]);
}

} // namespace

bool winogradAvailable() {
  static const bool ok = [] {
    const char *e = std::getenv("DTF_CONV_WINOGRAD");
    if (e && std::string(e) == "0")
      return false;
    return bool(__builtin_cpu_supports("avx512f"));
  }();
  return ok;
}

bool winogradSuits(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh,
                   int64_t dw, int64_t c, int64_t oc, int64_t outputs) {
  return kh == 5 && kw == 5 && sh == 1 && sw == 1 && dh == 1 && dw == 1 &&
         c >= 16 && c % 16 == 0 && oc >= 16 && oc % 16 == 0 &&
         c * oc <= kMaxChannelProduct && outputs > 0 && winogradAvailable();
}

namespace {
// u[p][i][o0 : o0 + 16] = (G g G^T)[p] for 16 filters g (HWIO, of input
// channel i and output channels o0 ...), or with `rotated`, those of the
// input's gradient.
DTF_AVX512 void transformFilters(const float *hwio, int64_t c, int64_t oc,
                                 bool rotated, int64_t i, int64_t o0,
                                 int64_t in, int64_t out_, float *u) {
  __m512 g[5][5];
#pragma GCC unroll 5
  for (int ky = 0; ky < 5; ++ky)
#pragma GCC unroll 5
    for (int kx = 0; kx < 5; ++kx) {
      if (!rotated) {
        g[ky][kx] = _mm512_loadu_ps(hwio + ((ky * 5 + kx) * c + i) * oc + o0);
      } else { // 16 input channels o0 ... of output channel i, gathered
        const float *at = hwio + ((4 - ky) * 5 + (4 - kx)) * c * oc + i;
        const __m512i idx =
            _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                                                 10, 11, 12, 13, 14, 15),
                               _mm512_set1_epi32(int(oc)));
        g[ky][kx] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), 0xFFFF, idx,
                                             at + o0 * oc, 4);
      }
    }
  __m512 gg[6][5], out[6][6]; // G g, then G g G^T
  timesG<false>(g, gg);
  timesGRight<false>(gg, out);
#pragma GCC unroll 6
  for (int p = 0; p < 6; ++p)
#pragma GCC unroll 6
    for (int q = 0; q < 6; ++q)
      _mm512_storeu_ps(u + ((p * 6 + q) * in + i) * out_ + o0, out[p][q]);
}

// The filter transformed into the calling thread's scratch, u[36][in][out]
// = G g G^T from an HWIO filter [5, 5, c, oc]; with `backwardData`, the
// filter of the input's gradient: rotated by 180 degrees, its input and
// output channels swapped (u[36][oc][c]). The pool's threads read it while
// this thread waits for them.
const float *transformedFilter(const float *hwio, int64_t c, int64_t oc,
                               bool backwardData) {
  thread_local Scratch scratch;
  float *u = scratch.get(size_t(kPoints * c * oc));
  const int64_t in = backwardData ? oc : c, out = backwardData ? c : oc;
  for (int64_t i = 0; i < in; ++i)
    for (int64_t o = 0; o < out; o += 16)
      transformFilters(hwio, c, oc, backwardData, i, o, in, out, u);
  return u;
}

void winogradConv(const WinogradShape &s, const float *x, const float *u,
                  const float *bias, bool relu, float *y, ThreadPool *pool) {
  const Tiles g(s);
  const int64_t blocks = (g.total + kTiles - 1) / kTiles;
  parallelFor(pool, blocks, 1, [&](int64_t lo, int64_t hi) {
    convBlocks(s, g, x, u, bias, relu, y, lo, hi);
  });
}

} // namespace

void winogradForward(const WinogradShape &s, const float *x, const float *hwio,
                     const float *bias, bool relu, float *y, ThreadPool *pool) {
  winogradConv(s, x, transformedFilter(hwio, s.c, s.oc, false), bias, relu, y,
               pool);
}

void winogradInputGrad(const WinogradShape &s, const float *dy,
                       const float *hwio, float *dx, ThreadPool *pool) {
  // The convolution of dy with the rotated filter, over the other padding.
  WinogradShape t = s;
  std::swap(t.ih, t.oh);
  std::swap(t.iw, t.ow);
  std::swap(t.c, t.oc);
  t.padTop = 4 - s.padTop;
  t.padLeft = 4 - s.padLeft;
  winogradConv(t, dy, transformedFilter(hwio, s.c, s.oc, true), nullptr, false,
               dx, pool);
}

void winogradFilterGrad(const WinogradShape &s, const float *x, const float *dy,
                        float *df, ThreadPool *pool) {
  const Tiles g(s);
  const int64_t blocks = (g.total + kGradTiles - 1) / kGradTiles;
  const int parts =
      int(std::min<int64_t>(pool ? pool->numThreads() : 1, blocks));
  // Each part's sum of the transformed gradients, du[part][p][c][oc].
  const size_t uSize = size_t(kPoints * s.c * s.oc);
  thread_local Scratch scratch;
  float *du = scratch.get(size_t(parts) * uSize);
  std::memset(du, 0, size_t(parts) * uSize * sizeof(float));
  parallelFor(pool, parts, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t part = lo; part < hi; ++part)
      gradBlocks(s, g, x, dy, du + size_t(part) * uSize, blocks * part / parts,
                 blocks * (part + 1) / parts);
  });
  // df = G^T du G for each (c, oc), the parts summed on the way.
  parallelFor(pool, s.c, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t ci = lo; ci < hi; ++ci)
      for (int64_t o = 0; o < s.oc; o += 16)
        untransformFilters(du, parts, uSize, s.c, s.oc, ci, o, df);
  });
}

} // namespace dtf::cpu
