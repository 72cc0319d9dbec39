// The cuDNN convolutions of libdtf-cuda-emu.so: forward, backward data and
// backward filter (im2col and oneDNN's sgemm), their two algorithms, the
// heuristic ranking (cudnnGet*_v7), the timed one (cudnnFind*Ex) and the
// fault DTF_EMU_CONV_ALGO_FAILS.
#include "runtime/gpu/emu/EmuDnn.h"
#include "runtime/gpu/emu/EmuQueue.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace dtf::gpu::emu {
namespace {

// The convolution's geometry, NHWC input, KRSC (NHWC) filter, NHWC output.
struct Geometry {
  int n, c, ih, iw, k, kh, kw, oh, ow, ph, pw, sh, sw;
};
bool geometry(const TensorDesc &x, const FilterDesc &f, const ConvDesc &cd,
              const TensorDesc &y, Geometry *g) {
  // One element type for x, w and y (f32, or bf16 or f16 with f32
  // compute: cuDNN's PSEUDO_BFLOAT16 and PSEUDO_HALF configurations).
  if (!supported(x) || !supported(f) || !supported(y) || x.dtype != f.dtype ||
      x.dtype != y.dtype || cd.mode != CUDNN_CROSS_CORRELATION ||
      cd.dilH != 1 || cd.dilW != 1 || x.c != f.c || y.c != f.k || x.n != y.n)
    return false;
  *g = {x.n, x.c, x.h,     x.w,     f.k,        f.h,       f.w,
        y.h, y.w, cd.padH, cd.padW, cd.strideH, cd.strideW};
  return (x.h + 2 * cd.padH - f.h) / cd.strideH + 1 == y.h &&
         (x.w + 2 * cd.padW - f.w) / cd.strideW + 1 == y.w;
}

// The emulated convolution algorithms, the same in every direction:
// algorithm 1 works in an im2col buffer that the caller provides as its
// workspace (N*OH*OW x KH*KW*C floats), algorithm 0 needs none (it makes its
// own). cudnnGetConvolution*Algorithm_v7 ranks 1 first, as the real
// heuristics often rank a workspace-hungry algorithm first.
bool algoSupported(int algo) { return algo == 0 || algo == 1; }
size_t algoWorkspace(const Geometry &g, int algo) {
  return algo == 1
             ? size_t(g.n) * g.oh * g.ow * g.kh * g.kw * g.c * sizeof(float)
             : 0;
}
bool convGeometry(cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t f,
                  cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t y,
                  Geometry *g) {
  return geometry(*reinterpret_cast<const TensorDesc *>(x),
                  *reinterpret_cast<const FilterDesc *>(f),
                  *reinterpret_cast<const ConvDesc *>(c),
                  *reinterpret_cast<const TensorDesc *>(y), g);
}
cudnnStatus_t workspaceSize(cudnnTensorDescriptor_t x,
                            cudnnFilterDescriptor_t f,
                            cudnnConvolutionDescriptor_t c,
                            cudnnTensorDescriptor_t y, int algo, size_t *bytes,
                            const char *name) {
  std::lock_guard<std::recursive_mutex> lock(machine().mutex);
  Geometry g;
  if (!convGeometry(x, f, c, y, &g))
    return refuse(CUDNN_STATUS_NOT_SUPPORTED,
                  std::string(name) + ": descriptors that do not fit");
  if (!algoSupported(algo))
    return refuse(CUDNN_STATUS_NOT_SUPPORTED,
                  std::string(name) + ": algorithm " + std::to_string(algo) +
                      " is not one the emulation has (0 or 1)");
  *bytes = algoWorkspace(g, algo);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t rankAlgorithms(cudnnTensorDescriptor_t x,
                             cudnnFilterDescriptor_t f,
                             cudnnConvolutionDescriptor_t c,
                             cudnnTensorDescriptor_t y, int requested,
                             int *returned, cudnnConvolutionAlgoPerf_t *perf,
                             const char *name) {
  std::lock_guard<std::recursive_mutex> lock(machine().mutex);
  Geometry g;
  if (!convGeometry(x, f, c, y, &g))
    return refuse(CUDNN_STATUS_NOT_SUPPORTED,
                  std::string(name) + ": descriptors that do not fit");
  if (requested < 1 || !returned || !perf)
    return refuse(CUDNN_STATUS_BAD_PARAM,
                  std::string(name) + ": no room for a result");
  *returned = 0;
  for (int algo : {1, 0}) {
    if (*returned == requested)
      break;
    cudnnConvolutionAlgoPerf_t p{};
    p.algo = algo;
    p.status = CUDNN_STATUS_SUCCESS;
    p.time = -1; // a heuristic: nothing was timed
    p.memory = algoWorkspace(g, algo);
    perf[(*returned)++] = p;
  }
  ++machine().counters.algorithmChoices;
  return CUDNN_STATUS_SUCCESS;
}

// col[N*OH*OW, KH*KW*C] from x, zeros in the padding.
void im2col(const Geometry &g, const float *x, float *col) {
  const int64_t row = int64_t(g.kh) * g.kw * g.c;
  for (int n = 0; n < g.n; ++n)
    for (int oy = 0; oy < g.oh; ++oy)
      for (int ox = 0; ox < g.ow; ++ox) {
        float *out = col + ((int64_t(n) * g.oh + oy) * g.ow + ox) * row;
        for (int ky = 0; ky < g.kh; ++ky)
          for (int kx = 0; kx < g.kw; ++kx, out += g.c) {
            const int iy = oy * g.sh - g.ph + ky, ix = ox * g.sw - g.pw + kx;
            if (iy < 0 || iy >= g.ih || ix < 0 || ix >= g.iw)
              std::fill(out, out + g.c, 0.0f);
            else
              std::memcpy(out, x + ((int64_t(n) * g.ih + iy) * g.iw + ix) * g.c,
                          sizeof(float) * g.c);
          }
      }
}
void col2im(const Geometry &g, const float *col, float *dx) {
  const int64_t row = int64_t(g.kh) * g.kw * g.c;
  std::fill(dx, dx + int64_t(g.n) * g.ih * g.iw * g.c, 0.0f);
  for (int n = 0; n < g.n; ++n)
    for (int oy = 0; oy < g.oh; ++oy)
      for (int ox = 0; ox < g.ow; ++ox) {
        const float *in = col + ((int64_t(n) * g.oh + oy) * g.ow + ox) * row;
        for (int ky = 0; ky < g.kh; ++ky)
          for (int kx = 0; kx < g.kw; ++kx, in += g.c) {
            const int iy = oy * g.sh - g.ph + ky, ix = ox * g.sw - g.pw + kx;
            if (iy < 0 || iy >= g.ih || ix < 0 || ix >= g.iw)
              continue;
            float *o = dx + ((int64_t(n) * g.ih + iy) * g.iw + ix) * g.c;
            for (int q = 0; q < g.c; ++q)
              o[q] += in[q];
          }
      }
}

// DTF_EMU_CONV_ALGO_FAILS: the algorithm whose launches fail, -1 for none
// (read at each call, so that a test may set it).
int failingAlgorithm() {
  const char *v = std::getenv("DTF_EMU_CONV_ALGO_FAILS");
  if (!v || !*v)
    return -1;
  char *end = nullptr;
  const long a = std::strtol(v, &end, 10);
  return *end == '\0' && algoSupported(int(a)) ? int(a) : -1;
}

// The emulation's timing of its algorithms, in milliseconds: a plausible
// figure for an H100 (its f32 rate on the product, its memory bandwidth on
// algorithm 1's im2col buffer, written and read once), so that the timed
// ranking puts algorithm 0 first where the heuristic puts 1 first.
float algoMilliseconds(const Geometry &g, int algo) {
  const double flops = 2.0 * g.n * g.oh * g.ow * g.k * g.kh * g.kw * g.c;
  const double ms = flops / 60e12 * 1e3;
  return float(algo == 1 ? ms + 2.0 * double(algoWorkspace(g, 1)) / 3e12 * 1e3
                         : ms);
}

// cudnnFindConvolution*AlgorithmEx: as the real one, it synchronizes (its
// stream's queued work runs first, so it may not run in a capture), runs
// each algorithm on the caller's buffers within the caller's workspace and
// ranks them by time; an algorithm whose workspace does not fit is listed
// with CUDNN_STATUS_NOT_SUPPORTED after the others. The math type reported
// is the descriptor's.
cudnnStatus_t findAlgorithms(cudnnHandle_t handle, cudnnTensorDescriptor_t x,
                             cudnnFilterDescriptor_t f,
                             cudnnConvolutionDescriptor_t c,
                             cudnnTensorDescriptor_t y,
                             const void *const buffers[3], int requested,
                             int *returned, cudnnConvolutionAlgoPerf_t *perf,
                             void *ws, size_t wsBytes, const char *name) {
  std::lock_guard<std::recursive_mutex> lock(machine().mutex);
  if (int code = 0; unsafeInCapture(name, &code))
    return CUDNN_STATUS_EXECUTION_FAILED;
  Geometry g;
  if (!convGeometry(x, f, c, y, &g))
    return refuse(CUDNN_STATUS_NOT_SUPPORTED,
                  std::string(name) + ": descriptors that do not fit");
  if (requested < 1 || !returned || !perf)
    return refuse(CUDNN_STATUS_BAD_PARAM,
                  std::string(name) + ": no room for a result");
  const size_t bytes[3] = {td(x).bytes(), fdesc(f).bytes(), td(y).bytes()};
  const char *what[3] = {"x", "w", "y"};
  for (int i = 0; i < 3; ++i)
    if (int r = dnnCheck(buffers[i], bytes[i], std::string(name) + " " + what[i],
                         nullptr))
      return r;
  if (int r = dnnCheck(ws, wsBytes, std::string(name) + " workspace", nullptr))
    return r;
  if (finishStream(reinterpret_cast<DnnHandle *>(handle)->stream) !=
      CUDA_SUCCESS)
    return CUDNN_STATUS_EXECUTION_FAILED;
  std::vector<cudnnConvolutionAlgoPerf_t> all;
  for (int algo : {0, 1}) {
    cudnnConvolutionAlgoPerf_t p{};
    p.algo = algo;
    p.memory = algoWorkspace(g, algo);
    p.status = p.memory <= wsBytes ? CUDNN_STATUS_SUCCESS
                                   : CUDNN_STATUS_NOT_SUPPORTED;
    p.time = p.status == CUDNN_STATUS_SUCCESS ? algoMilliseconds(g, algo) : -1;
    p.mathType = cdesc(c).mathType;
    all.push_back(p);
  }
  std::stable_sort(all.begin(), all.end(), [](const auto &a, const auto &b) {
    const bool okA = a.status == CUDNN_STATUS_SUCCESS,
               okB = b.status == CUDNN_STATUS_SUCCESS;
    return okA != okB ? okA : okA && a.time < b.time;
  });
  *returned = std::min(requested, int(all.size()));
  std::copy(all.begin(), all.begin() + *returned, perf);
  ++machine().counters.algorithmSearches;
  return CUDNN_STATUS_SUCCESS;
}

} // namespace
} // namespace dtf::gpu::emu

using namespace dtf::gpu::emu;

extern "C" {

// Workspace sizes per algorithm (algoWorkspace), and the heuristic ranking.
cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(
    cudnnHandle_t, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
    cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t y, int algo,
    size_t *bytes) {
  return workspaceSize(x, w, c, y, algo, bytes,
                       "cudnnGetConvolutionForwardWorkspaceSize");
}
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t, cudnnFilterDescriptor_t w, cudnnTensorDescriptor_t dy,
    cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t dx, int algo,
    size_t *bytes) {
  return workspaceSize(dx, w, c, dy, algo, bytes,
                       "cudnnGetConvolutionBackwardDataWorkspaceSize");
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t dy,
    cudnnConvolutionDescriptor_t c, cudnnFilterDescriptor_t dw, int algo,
    size_t *bytes) {
  return workspaceSize(x, dw, c, dy, algo, bytes,
                       "cudnnGetConvolutionBackwardFilterWorkspaceSize");
}
cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
    cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t y, int requested,
    int *returned, cudnnConvolutionAlgoPerf_t *perf) {
  return rankAlgorithms(x, w, c, y, requested, returned, perf,
                        "cudnnGetConvolutionForwardAlgorithm_v7");
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t, cudnnFilterDescriptor_t w, cudnnTensorDescriptor_t dy,
    cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t dx, int requested,
    int *returned, cudnnConvolutionAlgoPerf_t *perf) {
  return rankAlgorithms(dx, w, c, dy, requested, returned, perf,
                        "cudnnGetConvolutionBackwardDataAlgorithm_v7");
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t dy,
    cudnnConvolutionDescriptor_t c, cudnnFilterDescriptor_t dw, int requested,
    int *returned, cudnnConvolutionAlgoPerf_t *perf) {
  return rankAlgorithms(x, dw, c, dy, requested, returned, perf,
                        "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
}

extern "C++" {
namespace {
enum class ConvKind { Forward, BackwardData, BackwardFilter };

// bf16 and f16 operands are widened to f32 exactly, the product computed as
// an f32 one (f32 sums of the low-precision values, the tensor cores' maths
// up to the order of the sums), and the result rounded to the output's type
// (to nearest even). Each call is counted with its type and math.
cudnnStatus_t convolution(ConvKind kind, cudnnHandle_t handle, float alpha,
                          float beta, const TensorDesc &xd, const void *x,
                          const FilterDesc &fd, const void *f,
                          const ConvDesc &cd, const TensorDesc &yd,
                          const void *y, void *out, int algo, void *ws,
                          size_t wsBytes, const char *name) {
  std::lock_guard<std::recursive_mutex> lock(machine().mutex);
  Geometry g;
  if (!geometry(xd, fd, cd, yd, &g))
    return refuse(CUDNN_STATUS_NOT_SUPPORTED,
                  std::string(name) +
                      ": descriptors that do not fit (the emulation takes "
                      "NHWC tensors and filters of one type, f32, bf16 or "
                      "f16, with f32 compute, cross-correlation, no "
                      "dilation)");
  if (!algoSupported(algo))
    return refuse(CUDNN_STATUS_NOT_SUPPORTED,
                  std::string(name) + ": algorithm " + std::to_string(algo) +
                      " is not one the emulation has (0 or 1)");
  // A fault for the tests: this algorithm's launches fail, as one that
  // cuDNN offers but cannot run on this device would
  // (DTF_EMU_CONV_ALGO_FAILS=<algo>).
  if (algo == failingAlgorithm()) {
    ++machine().counters.failedAlgorithmLaunches;
    return fault(CUDNN_STATUS_EXECUTION_FAILED,
                 std::string(name) + ": algorithm " + std::to_string(algo) +
                     " fails (DTF_EMU_CONV_ALGO_FAILS=" +
                     std::to_string(algo) + ")");
  }
  const size_t need = algoWorkspace(g, algo);
  if (wsBytes < need)
    return refuse(CUDNN_STATUS_BAD_PARAM,
                  std::string(name) + ": algorithm " + std::to_string(algo) +
                      " needs a workspace of " + std::to_string(need) +
                      " bytes, got " + std::to_string(wsBytes));
  Work w{name, nullptr, {}};
  if (int r = dnnCheck(ws, need, "workspace", &w))
    return r;
  float *wsCol = need ? static_cast<float *>(ws) : nullptr;
  if (int r =
          dnnCheck(kind == ConvKind::BackwardData ? nullptr : x,
                   kind == ConvKind::BackwardData ? 0 : xd.bytes(), "x", &w))
    return r;
  if (int r =
          dnnCheck(kind == ConvKind::BackwardFilter ? nullptr : f,
                   kind == ConvKind::BackwardFilter ? 0 : fd.bytes(), "w", &w))
    return r;
  if (int r = dnnCheck(kind == ConvKind::Forward ? nullptr : y,
                       kind == ConvKind::Forward ? 0 : yd.bytes(), "dy", &w))
    return r;
  const size_t outBytes = kind == ConvKind::Forward        ? yd.bytes()
                          : kind == ConvKind::BackwardData ? xd.bytes()
                                                           : fd.bytes();
  if (int r = dnnCheck(out, outBytes, "output", &w))
    return r;
  const int dtype = xd.dtype;
  const bool low = dtype != CUDNN_DATA_FLOAT;
  const bool tf32 = !low && cd.mathType != CUDNN_FMA_MATH;
  // f32: TF32 under cuDNN's default math, FMA under FMA math; bf16 and f16:
  // tensor ops under either tensor-op math, FMA under FMA math (which the
  // real cuDNN may refuse; dtf never asks it).
  const char *math = cd.mathType == CUDNN_FMA_MATH       ? "fma"
                     : !low                              ? "tf32-tensor-op"
                     : cd.mathType == CUDNN_DEFAULT_MATH ? "default"
                                                         : "tensor-op";
  const size_t xn = xd.elements(), fn = fd.elements(), yn = yd.elements();
  w.run = [=] {
    if (tf32)
      ++machine().counters.tf32Calls;
    countTypedCall(name, dnnTypeName(dtype), math);
    std::vector<float> xw, fw, yw;
    if (x)
      xw = widened(x, xn, dtype);
    if (f)
      fw = widened(f, fn, dtype);
    if (y)
      yw = widened(y, yn, dtype);
    const int64_t rows = int64_t(g.n) * g.oh * g.ow;
    const int64_t row = int64_t(g.kh) * g.kw * g.c;
    // Algorithm 1 works in the caller's workspace, algorithm 0 in its own.
    std::vector<float> own(wsCol ? 0 : size_t(rows * row));
    float *colp = wsCol ? wsCol : own.data();
    std::vector<float> result(outBytes / dnnElementSize(dtype));
    if (kind == ConvKind::Forward) {
      im2col(g, xw.data(), colp);
      // y[rows, K] = col[rows, row] x f[K, row]^T (row-major)
      dnnl_sgemm('N', 'T', rows, g.k, row, 1.0f, colp, row, fw.data(), row,
                 0.0f, result.data(), g.k);
    } else if (kind == ConvKind::BackwardData) {
      // dcol[rows, row] = dy[rows, K] x f[K, row]
      dnnl_sgemm('N', 'N', rows, row, g.k, 1.0f, yw.data(), g.k, fw.data(), row,
                 0.0f, colp, row);
      col2im(g, colp, result.data());
    } else {
      im2col(g, xw.data(), colp);
      // df[K, row] = dy[rows, K]^T x col[rows, row]
      dnnl_sgemm('T', 'N', g.k, row, rows, 1.0f, yw.data(), g.k, colp, row,
                 0.0f, result.data(), row);
    }
    blendInto(out, dtype, result.data(), int64_t(result.size()), alpha, beta);
    ++machine().counters.dnnCalls;
    return CUDA_SUCCESS;
  };
  int r = submit(reinterpret_cast<DnnHandle *>(handle)->stream, std::move(w));
  return r == CUDA_SUCCESS ? CUDNN_STATUS_SUCCESS
                           : CUDNN_STATUS_EXECUTION_FAILED;
}

} // namespace
} // extern "C++"

cudnnStatus_t cudnnConvolutionForward(
    cudnnHandle_t handle, const void *alpha, cudnnTensorDescriptor_t xDesc,
    const void *x, cudnnFilterDescriptor_t wDesc, const void *w,
    cudnnConvolutionDescriptor_t conv, int algo, void *ws, size_t wsBytes,
    const void *beta, cudnnTensorDescriptor_t yDesc, void *y) {
  return convolution(ConvKind::Forward, handle, scalar(alpha), scalar(beta),
                     td(xDesc), x, fdesc(wDesc), w, cdesc(conv), td(yDesc),
                     nullptr, y, algo, ws, wsBytes, "cudnnConvolutionForward");
}
cudnnStatus_t cudnnConvolutionBackwardData(
    cudnnHandle_t handle, const void *alpha, cudnnFilterDescriptor_t wDesc,
    const void *w, cudnnTensorDescriptor_t dyDesc, const void *dy,
    cudnnConvolutionDescriptor_t conv, int algo, void *ws, size_t wsBytes,
    const void *beta, cudnnTensorDescriptor_t dxDesc, void *dx) {
  return convolution(ConvKind::BackwardData, handle, scalar(alpha),
                     scalar(beta), td(dxDesc), nullptr, fdesc(wDesc), w,
                     cdesc(conv), td(dyDesc), dy, dx, algo, ws, wsBytes,
                     "cudnnConvolutionBackwardData");
}
cudnnStatus_t cudnnConvolutionBackwardFilter(
    cudnnHandle_t handle, const void *alpha, cudnnTensorDescriptor_t xDesc,
    const void *x, cudnnTensorDescriptor_t dyDesc, const void *dy,
    cudnnConvolutionDescriptor_t conv, int algo, void *ws, size_t wsBytes,
    const void *beta, cudnnFilterDescriptor_t dwDesc, void *dw) {
  return convolution(ConvKind::BackwardFilter, handle, scalar(alpha),
                     scalar(beta), td(xDesc), x, fdesc(dwDesc), nullptr,
                     cdesc(conv), td(dyDesc), dy, dw, algo, ws, wsBytes,
                     "cudnnConvolutionBackwardFilter");
}

cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(
    cudnnHandle_t handle, cudnnTensorDescriptor_t xDesc, const void *x,
    cudnnFilterDescriptor_t wDesc, const void *w,
    cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t yDesc, void *y,
    int requested, int *returned, cudnnConvolutionAlgoPerf_t *perf, void *ws,
    size_t wsBytes) {
  const void *const buffers[3] = {x, w, y};
  return findAlgorithms(handle, xDesc, wDesc, conv, yDesc, buffers, requested,
                        returned, perf, ws, wsBytes,
                        "cudnnFindConvolutionForwardAlgorithmEx");
}
cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(
    cudnnHandle_t handle, cudnnFilterDescriptor_t wDesc, const void *w,
    cudnnTensorDescriptor_t dyDesc, const void *dy,
    cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t dxDesc,
    void *dx, int requested, int *returned, cudnnConvolutionAlgoPerf_t *perf,
    void *ws, size_t wsBytes) {
  const void *const buffers[3] = {dx, w, dy};
  return findAlgorithms(handle, dxDesc, wDesc, conv, dyDesc, buffers,
                        requested, returned, perf, ws, wsBytes,
                        "cudnnFindConvolutionBackwardDataAlgorithmEx");
}
cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(
    cudnnHandle_t handle, cudnnTensorDescriptor_t xDesc, const void *x,
    cudnnTensorDescriptor_t dyDesc, const void *dy,
    cudnnConvolutionDescriptor_t conv, cudnnFilterDescriptor_t dwDesc,
    void *dw, int requested, int *returned, cudnnConvolutionAlgoPerf_t *perf,
    void *ws, size_t wsBytes) {
  const void *const buffers[3] = {x, dw, dy};
  return findAlgorithms(handle, xDesc, dwDesc, conv, dyDesc, buffers,
                        requested, returned, perf, ws, wsBytes,
                        "cudnnFindConvolutionBackwardFilterAlgorithmEx");
}

} // extern "C"
