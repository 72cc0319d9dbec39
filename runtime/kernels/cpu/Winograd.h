// f32 5x5 convolutions of stride 1 by Winograd's minimal filtering F(2x2, 5x5)
// on AVX-512 (Lavin and Gray, "Fast Algorithms for Convolutional Neural
// Networks", 2016): each 2x2 block of outputs from a 6x6 block of inputs
// with 36 products per input and output channel where the direct
// convolution takes 100, the 36 products done as 36 matrix products over the
// channels. oneDNN has Winograd kernels only for 3x3 filters; the seed CNN's
// second convolution (5x5, 32 -> 64 channels) is most of its compute
// (docs/kernels.md, "Winograd convolutions").
#pragma once

#include "runtime/core/ThreadPool.h"

#include <cstdint>

namespace dtf::cpu {

/// A convolution in NHWC with a filter of 5x5, stride 1 and dilation 1:
/// y[n, oy, ox, oc] = sum over ky, kx, c of
/// x[n, oy - padTop + ky, ox - padLeft + kx, c] * f(ky, kx, c, oc), input
/// positions outside the image reading 0.
struct WinogradShape {
  int64_t n = 0, ih = 0, iw = 0, c = 0; // the input
  int64_t oh = 0, ow = 0, oc = 0;       // the output
  int64_t padTop = 0, padLeft = 0;
};

/// Whether the Winograd kernels run here: an AVX-512 CPU, and the
/// environment does not say DTF_CONV_WINOGRAD=0.
bool winogradAvailable();

/// Whether a convolution of this geometry goes to Winograd: 5x5, stride 1,
/// no dilation, input and output channels multiples of 16 (from 16 in and
/// out) whose product is at most 256 x 256, and some output.
bool winogradSuits(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh,
                   int64_t dw, int64_t c, int64_t oc, int64_t outputs);

/// y = conv(x, f) (+ bias) (then relu) for the HWIO filter f [5, 5, s.c,
/// s.oc].
void winogradForward(const WinogradShape &s, const float *x, const float *hwio,
                     const float *bias, bool relu, float *y, ThreadPool *pool);

/// The input's gradient dx [s.n, s.ih, s.iw, s.c] of the convolution of s
/// with the HWIO filter f, from dy [s.n, s.oh, s.ow, s.oc]: the convolution of
/// dy with f rotated by 180 degrees, its channels swapped.
void winogradInputGrad(const WinogradShape &s, const float *dy,
                       const float *hwio, float *dx, ThreadPool *pool);

/// The filter's gradient df [5, 5, c, oc] of the convolution of s:
/// df[ky, kx, c, oc] = sum over n, oy, ox of
/// x[n, oy - padTop + ky, ox - padLeft + kx, c] * dy[n, oy, ox, oc].
void winogradFilterGrad(const WinogradShape &s, const float *x, const float *dy,
                        float *df, ThreadPool *pool);

} // namespace dtf::cpu
