// The convolution algorithms: the heuristic's candidates, timed once per
// GPU, direction and shape by cudnnFindConvolution*AlgorithmEx, ranked and
// cached, and the retry with the next one when a launch fails.
#include "runtime/gpu/ConvAlgo.h"
#include "runtime/gpu/GpuDevice.h"
#include "runtime/gpu/GpuKernels.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>

namespace dtf::gpu {

using namespace cuda;

namespace {

struct ConvAlgo {
  int algo = 0;
  size_t workspace = 0;
  int mathType = CUDNN_FMA_MATH;
};

/// A shape's ranking, best first, and the one its launches use now.
struct ConvChoice {
  std::vector<ConvAlgo> ranked;
  size_t current = 0;
};

// The choices of this process: per GPU, direction and convolution shape.
struct ConvAlgoCache {
  std::mutex mutex;
  std::map<std::vector<int64_t>, ConvChoice> chosen;
  uint64_t queries = 0, searches = 0;
};
ConvAlgoCache &convAlgoCache() {
  static ConvAlgoCache *c = new ConvAlgoCache();
  return *c;
}

constexpr int kRequested = 8;

Status dnnError(GpuKernelContext &ctx, const char *call, cudnnStatus_t s) {
  CudaDriver &d = ctx.device().driver();
  return errorStatus(
      ctx.opName(), ": ", call, " failed: ", d.cudnnGetErrorString(s),
      d.emulated() ? " (" + d.errorText(call, 0) + ")" : std::string());
}

// The math type an algorithm runs with: the one cuDNN ranked it with, but
// never one that lets f32 compute in TF32 unless the plan allows it; bf16
// and f16 convolutions (mixed precision) always on the tensor cores.
int mathTypeOf(const GpuDevice &dev, const ConvOperands &op, int ranked) {
  if (op.lowPrecision)
    return CUDNN_TENSOR_OP_MATH;
  return dev.allowTf32() ? ranked : CUDNN_FMA_MATH;
}

// cuDNN's heuristic: its algorithms that work within kMaxConvWorkspace, in
// its order, each with its exact workspace.
Status heuristic(GpuKernelContext &ctx, ConvDirection dir,
                 const ConvOperands &op, std::vector<ConvAlgo> *out) {
  GpuDevice &dev = ctx.device();
  CudaDriver &d = dev.driver();
  cudnnConvolutionAlgoPerf_t perf[kRequested] = {};
  int returned = 0;
  const char *query = dir == ConvDirection::kForward
                          ? "cudnnGetConvolutionForwardAlgorithm_v7"
                      : dir == ConvDirection::kBackwardData
                          ? "cudnnGetConvolutionBackwardDataAlgorithm_v7"
                          : "cudnnGetConvolutionBackwardFilterAlgorithm_v7";
  cudnnStatus_t st =
      dir == ConvDirection::kForward
          ? d.cudnnGetConvolutionForwardAlgorithm_v7(
                dev.dnn(), op.xDesc, op.wDesc, op.convDesc, op.yDesc,
                kRequested, &returned, perf)
      : dir == ConvDirection::kBackwardData
          ? d.cudnnGetConvolutionBackwardDataAlgorithm_v7(
                dev.dnn(), op.wDesc, op.yDesc, op.convDesc, op.xDesc,
                kRequested, &returned, perf)
          : d.cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                dev.dnn(), op.xDesc, op.yDesc, op.convDesc, op.wDesc,
                kRequested, &returned, perf);
  if (st != CUDNN_STATUS_SUCCESS)
    return dnnError(ctx, query, st);
  for (int i = 0; i < returned; ++i) {
    const cudnnConvolutionAlgoPerf_t &p = perf[i];
    if (p.status != CUDNN_STATUS_SUCCESS || p.memory > kMaxConvWorkspace)
      continue;
    ConvAlgo a{p.algo, 0, mathTypeOf(dev, op, CUDNN_DEFAULT_MATH)};
    st = dir == ConvDirection::kForward
             ? d.cudnnGetConvolutionForwardWorkspaceSize(
                   dev.dnn(), op.xDesc, op.wDesc, op.convDesc, op.yDesc,
                   a.algo, &a.workspace)
         : dir == ConvDirection::kBackwardData
             ? d.cudnnGetConvolutionBackwardDataWorkspaceSize(
                   dev.dnn(), op.wDesc, op.yDesc, op.convDesc, op.xDesc,
                   a.algo, &a.workspace)
             : d.cudnnGetConvolutionBackwardFilterWorkspaceSize(
                   dev.dnn(), op.xDesc, op.yDesc, op.convDesc, op.wDesc,
                   a.algo, &a.workspace);
    if (st == CUDNN_STATUS_SUCCESS && a.workspace <= kMaxConvWorkspace)
      out->push_back(a);
  }
  if (out->empty())
    return errorStatus(ctx.opName(), ": ", query, " offers no algorithm for ",
                       "this shape within a workspace of ", kMaxConvWorkspace,
                       " bytes");
  return Status::ok();
}

// cuDNN's timing of its algorithms on the op's buffers, within a workspace
// as large as the largest candidate of the heuristic needs: those that ran,
// fastest first. Empty when cuDNN timed none (the heuristic's order stays).
Status timed(GpuKernelContext &ctx, ConvDirection dir, const ConvOperands &op,
             const std::vector<ConvAlgo> &candidates,
             std::vector<ConvAlgo> *out) {
  GpuDevice &dev = ctx.device();
  CudaDriver &d = dev.driver();
  size_t wsBytes = 0;
  for (const ConvAlgo &a : candidates)
    wsBytes = std::max(wsBytes, a.workspace);
  void *ws;
  DTF_RETURN_IF_ERROR(dev.workspace(wsBytes, &ws));
  cudnnConvolutionAlgoPerf_t perf[kRequested] = {};
  int returned = 0;
  const char *find = dir == ConvDirection::kForward
                         ? "cudnnFindConvolutionForwardAlgorithmEx"
                     : dir == ConvDirection::kBackwardData
                         ? "cudnnFindConvolutionBackwardDataAlgorithmEx"
                         : "cudnnFindConvolutionBackwardFilterAlgorithmEx";
  const cudnnStatus_t st =
      dir == ConvDirection::kForward
          ? d.cudnnFindConvolutionForwardAlgorithmEx(
                dev.dnn(), op.xDesc, op.x, op.wDesc, op.w, op.convDesc,
                op.yDesc, op.y, kRequested, &returned, perf, ws, wsBytes)
      : dir == ConvDirection::kBackwardData
          ? d.cudnnFindConvolutionBackwardDataAlgorithmEx(
                dev.dnn(), op.wDesc, op.w, op.yDesc, op.y, op.convDesc,
                op.xDesc, op.x, kRequested, &returned, perf, ws, wsBytes)
          : d.cudnnFindConvolutionBackwardFilterAlgorithmEx(
                dev.dnn(), op.xDesc, op.x, op.yDesc, op.y, op.convDesc,
                op.wDesc, op.w, kRequested, &returned, perf, ws, wsBytes);
  if (st != CUDNN_STATUS_SUCCESS)
    return dnnError(ctx, find, st);
  for (int i = 0; i < returned; ++i) {
    const cudnnConvolutionAlgoPerf_t &p = perf[i];
    // Converting f32 to f16 inside is never what an f32 model asked for.
    if (p.status == CUDNN_STATUS_SUCCESS && p.memory <= wsBytes &&
        p.mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
      out->push_back({p.algo, p.memory, mathTypeOf(dev, op, p.mathType)});
  }
  return Status::ok();
}

cudnnStatus_t launch(GpuKernelContext &ctx, ConvDirection dir,
                     const ConvOperands &op, const ConvAlgo &a, void *ws) {
  GpuDevice &dev = ctx.device();
  CudaDriver &d = dev.driver();
  cudnnStatus_t st = d.cudnnSetConvolutionMathType(op.convDesc, a.mathType);
  if (st != CUDNN_STATUS_SUCCESS)
    return st;
  const float one = 1, zero = 0;
  switch (dir) {
  case ConvDirection::kForward:
    return d.cudnnConvolutionForward(dev.dnn(), &one, op.xDesc, op.x, op.wDesc,
                                     op.w, op.convDesc, a.algo, ws,
                                     a.workspace, &zero, op.yDesc, op.y);
  case ConvDirection::kBackwardData:
    return d.cudnnConvolutionBackwardData(
        dev.dnn(), &one, op.wDesc, op.w, op.yDesc, op.y, op.convDesc, a.algo,
        ws, a.workspace, &zero, op.xDesc, op.x);
  case ConvDirection::kBackwardFilter:
    return d.cudnnConvolutionBackwardFilter(
        dev.dnn(), &one, op.xDesc, op.x, op.yDesc, op.y, op.convDesc, a.algo,
        ws, a.workspace, &zero, op.wDesc, op.w);
  }
  return CUDNN_STATUS_BAD_PARAM;
}

const char *launchName(ConvDirection dir) {
  return dir == ConvDirection::kForward        ? "cudnnConvolutionForward"
         : dir == ConvDirection::kBackwardData ? "cudnnConvolutionBackwardData"
                                               : "cudnnConvolutionBackwardFilter";
}

} // namespace

Status runConvolution(GpuKernelContext &ctx, ConvDirection direction,
                      const std::vector<int64_t> &shape,
                      const ConvOperands &op) {
  GpuDevice &dev = ctx.device();
  std::vector<int64_t> key = {dev.index(), int64_t(direction)};
  key.insert(key.end(), shape.begin(), shape.end());
  ConvAlgoCache &cache = convAlgoCache();
  ConvChoice choice;
  bool known = false;
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.chosen.find(key);
    if (it != cache.chosen.end()) {
      choice = it->second;
      known = true;
    }
  }
  if (!known) {
    std::vector<ConvAlgo> candidates, ranked;
    DTF_RETURN_IF_ERROR(heuristic(ctx, direction, op, &candidates));
    // Timing synchronizes and may allocate: never inside a capture (a
    // shape's first step is eager, GraphReplay.h, so this is a safeguard).
    const bool search = !dev.capturing();
    if (search)
      DTF_RETURN_IF_ERROR(timed(ctx, direction, op, candidates, &ranked));
    choice.ranked = ranked.empty() ? candidates : ranked;
    std::lock_guard<std::mutex> lock(cache.mutex);
    ++cache.queries;
    cache.searches += search ? 1 : 0;
    cache.chosen[key] = choice;
  }
  for (size_t i = choice.current;; ++i) {
    const ConvAlgo &a = choice.ranked[i];
    void *ws;
    DTF_RETURN_IF_ERROR(dev.workspace(a.workspace, &ws));
    const cudnnStatus_t st = launch(ctx, direction, op, a, ws);
    if (st == CUDNN_STATUS_SUCCESS)
      return Status::ok();
    if (i + 1 == choice.ranked.size())
      return dnnError(ctx, launchName(direction), st);
    // The next algorithm of the ranking, for this shape from now on.
    const int next = choice.ranked[i + 1].algo;
    bool say = false;
    {
      std::lock_guard<std::mutex> lock(cache.mutex);
      ConvChoice &kept = cache.chosen[key];
      if (kept.current == i) {
        kept.current = i + 1;
        say = true;
      }
    }
    if (say)
      std::fprintf(stderr,
                   "dtf-run: warning: %s: %s: cuDNN algorithm %d failed (%s); "
                   "using algorithm %d for this shape from now on\n",
                   dev.name().c_str(), ctx.opName().c_str(), a.algo,
                   dev.driver().cudnnGetErrorString(st), next);
  }
}

uint64_t convAlgorithmQueries() {
  ConvAlgoCache &cache = convAlgoCache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  return cache.queries;
}

uint64_t convAlgorithmSearches() {
  ConvAlgoCache &cache = convAlgoCache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  return cache.searches;
}

} // namespace dtf::gpu
