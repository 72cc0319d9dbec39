// oneDNN plumbing shared by the convolution and pooling kernels: the CPU
// engine, a cache of primitives keyed by their geometry, and error mapping.
#pragma once

#include "runtime/kernels/cpu/KernelUtil.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <map>
#include <new>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace dtf::cpu {

/// The process-wide oneDNN CPU engine.
dnnl::engine &cpuEngine();

/// Runs `f`, turning a dnnl::error, or a failed allocation of a library
/// kernel's own buffers (oneDNN's scratchpads, Winograd's), into an error
/// status of `op`.
template <typename F> Status guardDnnl(const char *op, F &&f) {
  try {
    return f();
  } catch (const dnnl::error &e) {
    return errorStatus(op, ": oneDNN failed: ", e.what());
  } catch (const std::bad_alloc &) {
    return errorStatus(op, ": out of memory for the kernel's buffers");
  }
}

/// Primitives (and what goes with them) by geometry: creating a oneDNN
/// primitive descriptor costs far more than running a small convolution, so
/// every distinct shape pays it once per process.
template <typename V> class PrimitiveCache {
public:
  template <typename Create>
  std::shared_ptr<V> get(const std::vector<int64_t> &key, Create &&create) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = map_.find(key);
      if (it != map_.end())
        return it->second;
    }
    auto value = std::make_shared<V>(create());
    std::lock_guard<std::mutex> lock(mutex_);
    if (map_.size() >= kCapacity)
      map_.clear(); // shapes churn only in unusual plans; start over
    return map_.emplace(key, std::move(value)).first->second;
  }

private:
  static constexpr size_t kCapacity = 512;
  std::mutex mutex_;
  std::map<std::vector<int64_t>, std::shared_ptr<V>> map_;
};

/// A tensor's data as oneDNN's memory objects take it (a handle to memory
/// the primitive may write). One definition for every kernel file: a unity
/// build joins them into one translation unit.
inline void *ptr(const Tensor &t) { return const_cast<void *>(t.rawData()); }

/// `attr` with the primitive's scratchpad left to the caller, which
/// PlannedPrimitive keeps per thread. By default oneDNN keeps one scratchpad
/// per primitive, so two threads running one cached primitive at once (the
/// same shape in two inter-op branches) would write each other's.
inline dnnl::primitive_attr userScratchpad(dnnl::primitive_attr attr = {}) {
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

/// A oneDNN primitive with reorders between the caller's memory formats
/// (NHWC activations, HWIO filters) and the formats the primitive runs
/// fastest with, which oneDNN picks when a descriptor says `any`. Inputs in
/// another format are reordered into per-thread scratch memory before the
/// primitive runs, outputs from it afterwards. A primitive made with
/// userScratchpad() gets a per-thread scratchpad too.
class PlannedPrimitive {
public:
  struct Arg {
    int id;                  // DNNL_ARG_*
    dnnl::memory::desc user; // the caller's format
    bool output;
  };

  PlannedPrimitive(const dnnl::primitive_desc &pd, dnnl::primitive prim,
                   std::vector<Arg> args);

  /// Runs with `ptrs[i]` holding argument i (in the order of the args) in the
  /// caller's format; `extra` adds arguments that need no reorder.
  /// `versions[i]`, where given, is input i's VariableVersion (the kernel
  /// context's inputVersion, for an argument that is that input's own
  /// data): an input that only changes from f32 to bf16 in the same layout
  /// is then narrowed once per version and shared (variableBf16Copy).
  /// `pool`, where given, narrows large inputs (narrowToBf16Native).
  void execute(const std::vector<void *> &ptrs,
               const std::unordered_map<int, dnnl::memory> &extra = {},
               const std::vector<const VariableVersion *> &versions = {},
               ThreadPool *pool = nullptr) const;

private:
  struct Planned {
    Arg arg;
    dnnl::memory::desc internal;
    bool reorder;
    dnnl::reorder toInternal, toUser;
    // An input whose reorder is f32 to bf16 in the same dense layout:
    // narrowed by narrowToBf16Native (oneDNN's rounding, vcvtneps2bf16),
    // when bf16Native().
    bool narrowOnly = false;
    int64_t elements = 0;
  };
  dnnl::primitive prim_;
  std::vector<Planned> args_;
  dnnl::memory::desc scratchpad_; // empty unless the caller provides it
};

/// The geometry of a 2-D convolution or pooling window over NHWC data, with
/// TensorFlow's padding: for `same`, out = ceil(in / stride) and
/// pad_total = max((out - 1) * stride + (k - 1) * dilation + 1 - in, 0), of
/// which pad_total / 2 goes before; for `valid`,
/// out = (in - (k - 1) * dilation - 1) / stride + 1 and no padding.
struct Window2D {
  int64_t n = 0, ih = 0, iw = 0, c = 0;   // input [N, H, W, C]
  int64_t kh = 0, kw = 0, oc = 0;         // window (filter [KH, KW, C, OC])
  int64_t sh = 1, sw = 1, dh = 1, dw = 1; // strides and dilations
  int64_t oh = 0, ow = 0;                 // output [N, OH, OW, OC]
  int64_t padTop = 0, padBottom = 0, padLeft = 0, padRight = 0;

  std::vector<int64_t> key(int64_t kind) const {
    return {kind, n,  ih, iw, c,  kh,     kw,        oc,      sh,
            sw,   dh, dw, oh, ow, padTop, padBottom, padLeft, padRight};
  }
};

/// Fills `w` from an NHWC input shape, a window, and the `strides`,
/// `dilations` (when `useDilations`) and `padding` attributes.
Status makeWindow2D(const KernelContext &ctx, const char *op,
                    const std::vector<int64_t> &inputShape, int64_t kh,
                    int64_t kw, bool useDilations, Window2D *w);

/// Reads a 4-D shape attribute (conv2d_backprop_input's and the pool
/// gradients' `input_shape`) whose -1 entries are taken from `like` (as far
/// as it goes); a missing attribute, another rank or a negative dimension is
/// an error naming the op and the attribute.
Status shapeAttr(const KernelContext &ctx, const char *op, const char *attr,
                 const std::vector<int64_t> &like, std::vector<int64_t> *out);

/// Whether op computes in bf16 or f16: its `compute_dtype` attribute
/// ("bf16" or "f16", set by dtf-mixed-precision) on f32 operands `x`.
/// Another value, or either on another dtype, is an error naming the op.
Status lowPrecisionCompute(const KernelContext &ctx, const char *op,
                           const Tensor &x, bool *bf16, bool *f16);

/// An f32 copy of `t` (f32) with every element rounded to f16 (to nearest
/// even, overflow to inf, subnormals kept: runtime/core/F16.h), for the
/// products of compute_dtype "f16". oneDNN 2.6 has f16 convolutions and
/// matmuls only on AVX512-FP16 CPUs, which dtf-run does not use: an f16
/// product is the f32 product of f16-rounded operands, with f32
/// accumulation. The first call says so once on stderr.
Tensor roundedThroughF16(const Tensor &t, ThreadPool *pool);

/// Whether this CPU runs oneDNN's bf16 kernels natively (AVX512-BF16 or
/// AMX); DTF_BF16_NATIVE=0 says no. Without them a bf16 product runs as the
/// f32 product of operands rounded to bf16 (roundedThroughBf16): the same
/// numbers up to the order of the f32 sums, at f32 speed. The first call on
/// such a CPU says so once on stderr.
bool bf16Native();
/// Why bf16 products are not native here ("DTF_BF16_NATIVE=0", or the CPU
/// lacks the instructions), for a kernel's own once-only message; nullptr
/// where they are. Says nothing itself.
const char *bf16FallbackReason();

/// An f32 copy of `t` (f32) with every element rounded to bf16 (to nearest
/// even, runtime/core/Bf16.h).
Tensor roundedThroughBf16(const Tensor &t, ThreadPool *pool);

/// `n` floats to bfloat16 with AVX512-BF16's vcvtneps2bf16, 5x the speed of
/// narrowToBf16's loop (0.11 ms against 0.53 on one thread for the seed
/// CNN's 1.57M-element dense kernel). On the calling thread, unless `pool`
/// is given and `n` is at least two kNarrowGrain: then in chunks over the
/// pool (a parallel region waits for every thread to be scheduled, dear for
/// a small cast on a loaded machine; the seed CNN's large casts, its dense
/// kernel and its gradients at the convolutions, had the other core wait:
/// 4.7% of a mixed_bfloat16 step's samples, docs/kernels.md). Round to nearest even as narrowToBf16,
/// except that a subnormal f32 becomes a zero of its sign (the
/// instruction's DAZ), as in oneDNN's bf16 convolutions' own reorders; the
/// same bits however the range is cut. Only where bf16Native() holds.
void narrowToBf16Native(const float *src, int64_t n, uint16_t *dst,
                        ThreadPool *pool = nullptr);
/// Elements a chunk of narrowToBf16Native over a pool has at least (512 KB
/// of f32: about 40 microseconds on one core here).
constexpr int64_t kNarrowGrain = int64_t(1) << 17;

/// The bf16 copy of an f32 variable that a product reads in place, made once
/// per VariableVersion (KernelContext::inputVersion) and reused by every
/// product that reads the same version: the forward and the input-gradient
/// products of a weight cast it once per step, not once per use. `low`
/// holds the bf16 bits (narrowToBf16Native where bf16Native(), else
/// Bf16.h's narrowToBf16, which keeps subnormals), and without bf16
/// instructions `rounded` holds them widened back to f32 for the fallback's
/// f32 product.
struct VariableBf16Copy {
  std::mutex mutex; // held while the copy is (re)made
  uint64_t version = 0;
  const float *source = nullptr;
  int64_t count = 0;
  std::vector<uint16_t> low;
  std::vector<float> rounded;
};

/// Input `i` of `ctx` (f32) as a bf16 copy, made now if the input's
/// version has none yet; null when the executor gives the input no version
/// (then the caller rounds it itself). A version names a variable's
/// contents between updates, or a value made once per step that nothing
/// changes after (Executor's wireVersions), so the copy stays valid while
/// the caller holds it: the version changes only after every reader of the
/// old one is done.
std::shared_ptr<const VariableBf16Copy>
variableBf16Copy(const KernelContext &ctx, int i, ThreadPool *pool);
/// The same for `n` floats at `src` under version `v` (null: none).
std::shared_ptr<const VariableBf16Copy>
bf16CopyOf(const VariableVersion *v, const float *src, int64_t n,
           ThreadPool *pool);

/// How many bf16 copies of variables variableBf16Copy made and how many
/// times it handed out one made before, since the process started (the
/// unit tests and `dtf-run --profile` read them).
struct VariableBf16Counts {
  uint64_t made = 0, reused = 0;
};
VariableBf16Counts variableBf16Counts();

/// Reads a pair attribute (`strides`, `window`, ...) of positive values.
Status getPair(const KernelContext &ctx, const char *op, const char *attr,
               int64_t dflt, int64_t *first, int64_t *second);

} // namespace dtf::cpu
