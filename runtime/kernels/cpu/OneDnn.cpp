// oneDNN plumbing: the engine, reordering primitives, window geometry.
#include "runtime/kernels/cpu/OneDnn.h"
#include "runtime/kernels/cpu/F32Matmul.h"
#include "runtime/core/Bf16.h"
#include "runtime/core/F16.h"

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <atomic>
#include <optional>
#include <cstring>
#include <immintrin.h>

namespace dtf::cpu {

dnnl::engine &cpuEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

Status lowPrecisionCompute(const KernelContext &ctx, const char *op,
                           const Tensor &x, bool *bf16, bool *f16) {
  *bf16 = *f16 = false;
  if (!ctx.hasAttr("compute_dtype"))
    return Status::ok();
  const std::string dtype = ctx.getString("compute_dtype");
  if (dtype != "bf16" && dtype != "f16")
    return errorStatus(op,
                       ": compute_dtype is \"bf16\", \"f16\" or absent, not \"",
                       dtype, "\"");
  if (x.dtype() != DType::F32)
    return errorStatus(op, ": compute_dtype \"", dtype,
                       "\" applies to f32 operands, got ", x.describe());
  *bf16 = dtype == "bf16";
  *f16 = dtype == "f16";
  return Status::ok();
}

const char *bf16FallbackReason() {
  static const char *const reason = []() -> const char * {
    const char *e = std::getenv("DTF_BF16_NATIVE");
    if (e && std::strcmp(e, "0") == 0)
      return "DTF_BF16_NATIVE=0";
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    if (isa == dnnl::cpu_isa::avx512_core_bf16 ||
        isa == dnnl::cpu_isa::avx512_core_amx)
      return nullptr;
    return "this CPU has neither AVX512-BF16 nor AMX";
  }();
  return reason;
}

bool bf16Native() {
  static const bool native = [] {
    if (const char *why = bf16FallbackReason())
      std::fprintf(stderr,
                   "dtf: %s: bf16 matmuls and convolutions run as f32 "
                   "products of bf16-rounded operands (same rounding, no "
                   "speedup)\n",
                   why);
    return bf16FallbackReason() == nullptr;
  }();
  return native;
}

Tensor roundedThroughBf16(const Tensor &t, ThreadPool *pool) {
  Tensor out = Tensor::allocate(DType::F32, t.shape());
  const float *src = t.data<float>();
  float *dst = out.data<float>();
  parallelFor(pool, t.numElements(), kCheapGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      dst[i] = f32FromBf16(bf16FromF32(src[i]));
  });
  return out;
}

namespace {
// 8 floats at a time through F16C's vcvtps2ph (round to nearest even; in
// the x86-64-v3 baseline this builds for) and back through vcvtph2ps: the
// rounding of F16.h, which takes the tail (the unit tests compare the two
// bit for bit). An f32 subnormal is below f16's half-ulp at 0 either way.
void roundF16F16c(const float *src, int64_t n, float *dst) {
  constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm256_cvtps_ph(
                                  _mm256_loadu_ps(src + i), kNearest)));
  for (; i < n; ++i)
    dst[i] = roundToF16(src[i]);
}
} // namespace

Tensor roundedThroughF16(const Tensor &t, ThreadPool *pool) {
  static const bool said = [] {
    std::fprintf(stderr, "dtf: f16 matmuls and convolutions run as f32 "
                         "products of f16-rounded operands on every CPU (dtf "
                         "does not use f16 instructions yet; same rounding, "
                         "no speedup)\n");
    return true;
  }();
  (void)said;
  Tensor out = Tensor::allocate(DType::F32, t.shape());
  const float *src = t.data<float>();
  float *dst = out.data<float>();
  parallelFor(pool, t.numElements(), kCheapGrain, [&](int64_t lo, int64_t hi) {
    roundF16F16c(src + lo, hi - lo, dst + lo);
  });
  return out;
}

namespace {
// 16 floats at a time through AVX512-BF16's vcvtneps2bf16; the tail masked,
// so every element rounds alike. Only called where bf16Native() holds (a CPU
// with AVX512-BF16, which also has AVX512BW and VL).
#define DTF_AVX512_BF16 __attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl")))
DTF_AVX512_BF16 void store(uint16_t *to, __m256bh v, __mmask16 mask) {
  __m256i bits;
  std::memcpy(&bits, &v, sizeof bits);
  _mm256_mask_storeu_epi16(to, mask, bits);
}

DTF_AVX512_BF16 void narrowAvx512Bf16(const float *src, int64_t n,
                                      uint16_t *dst) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    store(dst + i, _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i)), 0xffff);
  if (i < n) {
    const auto mask = __mmask16((1u << (n - i)) - 1);
    store(dst + i, _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, src + i)),
          mask);
  }
}
} // namespace

void narrowToBf16Native(const float *src, int64_t n, uint16_t *dst,
                        ThreadPool *pool) {
  if (!pool || n < 2 * kNarrowGrain) {
    narrowAvx512Bf16(src, n, dst);
    return;
  }
  parallelFor(pool, n, kNarrowGrain, [&](int64_t lo, int64_t hi) {
    narrowAvx512Bf16(src + lo, hi - lo, dst + lo);
  });
}

namespace {
struct VariableBf16Cache {
  std::mutex mutex;
  std::unordered_map<uint64_t, std::shared_ptr<VariableBf16Copy>> byId;
  std::atomic<uint64_t> made{0}, reused{0};
};
VariableBf16Cache &variableBf16Cache() {
  static VariableBf16Cache cache;
  return cache;
}
} // namespace

std::shared_ptr<const VariableBf16Copy>
variableBf16Copy(const KernelContext &ctx, int i, ThreadPool *pool) {
  const Tensor &t = ctx.input(i);
  if (t.dtype() != DType::F32)
    return nullptr;
  return bf16CopyOf(ctx.inputVersion(i), t.data<float>(), t.numElements(),
                    pool);
}

std::shared_ptr<const VariableBf16Copy>
bf16CopyOf(const VariableVersion *v, const float *src, int64_t n,
           ThreadPool *pool) {
  // DTF_BF16_VARIABLE_COPIES=0: every product casts its operands itself,
  // as before the copies (for measuring what they save).
  static const bool off = [] {
    const char *e = std::getenv("DTF_BF16_VARIABLE_COPIES");
    return e && std::strcmp(e, "0") == 0;
  }();
  if (!v || off)
    return nullptr;
  VariableBf16Cache &cache = variableBf16Cache();
  std::shared_ptr<VariableBf16Copy> copy;
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    // Executors made and dropped one after another (tests, a restarted
    // worker) leave their variables' copies behind: start over past a bound
    // (a copy in use lives on with its holder).
    if (cache.byId.size() >= 4096 && !cache.byId.count(v->id))
      cache.byId.clear();
    auto &slot = cache.byId[v->id];
    if (!slot)
      slot = std::make_shared<VariableBf16Copy>();
    copy = slot;
  }
  const uint64_t version = v->version.load(std::memory_order_acquire);
  std::lock_guard<std::mutex> lock(copy->mutex);
  if (copy->version == version && copy->source == src && copy->count == n) {
    cache.reused.fetch_add(1, std::memory_order_relaxed);
    return copy;
  }
  copy->low.resize(size_t(n));
  if (bf16Native()) {
    narrowToBf16Native(src, n, copy->low.data(), pool);
    copy->rounded.clear();
  } else {
    uint16_t *low = copy->low.data();
    parallelFor(pool, n, kCheapGrain, [&](int64_t lo, int64_t hi) {
      narrowToBf16(src + lo, hi - lo, low + lo);
    });
    copy->rounded.resize(size_t(n));
    widenFromBf16(low, n, copy->rounded.data());
  }
  copy->version = version;
  copy->source = src;
  copy->count = n;
  cache.made.fetch_add(1, std::memory_order_relaxed);
  return copy;
}

VariableBf16Counts variableBf16Counts() {
  VariableBf16Cache &cache = variableBf16Cache();
  return {cache.made.load(), cache.reused.load()};
}

PlannedPrimitive::PlannedPrimitive(const dnnl::primitive_desc &pd,
                                   dnnl::primitive prim, std::vector<Arg> args)
    : prim_(std::move(prim)) {
  if (pd.get_primitive_attr().get_scratchpad_mode() ==
      dnnl::scratchpad_mode::user)
    scratchpad_ = pd.scratchpad_desc();
  for (Arg &a : args) {
    dnnl::memory::desc internal = pd.query_md(dnnl::query::exec_arg_md, a.id);
    Planned p{a, internal, internal != a.user, {}, {}};
    if (p.reorder && !a.output &&
        a.user.data_type() == dnnl::memory::data_type::f32 &&
        internal.data_type() == dnnl::memory::data_type::bf16) {
      dnnl_memory_desc_t asBf16 = a.user.data;
      asBf16.data_type = dnnl_bf16;
      int64_t n = 1;
      for (int64_t d : a.user.dims())
        n *= d;
      p.narrowOnly = dnnl::memory::desc(asBf16) == internal &&
                     internal.get_size() == size_t(n) * 2 &&
                     a.user.get_size() == size_t(n) * 4;
      p.elements = n;
    }
    if (p.reorder) {
      if (a.output)
        p.toUser = dnnl::reorder(dnnl::reorder::primitive_desc(
            cpuEngine(), internal, cpuEngine(), a.user));
      else
        p.toInternal = dnnl::reorder(dnnl::reorder::primitive_desc(
            cpuEngine(), a.user, cpuEngine(), internal));
    }
    args_.push_back(std::move(p));
  }
}

namespace {
// A reorder of at most this many bytes (a convolution's filter, 205 KB for
// the seed CNN's conv2 in f32) runs on the calling thread: a parallel region
// waits for both threads to be scheduled, which on a loaded machine costs
// more than the copy (0.02-0.07 ms alone, up to 0.6 ms in a busy step).
constexpr size_t kOneThreadReorderBytes = size_t(256) << 10;

void runReorder(const dnnl::reorder &r, dnnl::stream &stream,
                dnnl::memory &from, dnnl::memory &to) {
  std::optional<OneDnnOnThisThreadOnly> alone;
  if (std::max(from.get_desc().get_size(), to.get_desc().get_size()) <=
      kOneThreadReorderBytes)
    alone.emplace();
  r.execute(stream, from, to);
}
} // namespace

void PlannedPrimitive::execute(
    const std::vector<void *> &ptrs,
    const std::unordered_map<int, dnnl::memory> &extra,
    const std::vector<const VariableVersion *> &versions,
    ThreadPool *pool) const {
  // Inputs narrowed to bf16 once per version, held until the primitive ran.
  std::shared_ptr<const VariableBf16Copy> copies[4];
  int numCopies = 0;
  const bool native = bf16Native();
  // Scratch for reordered arguments, one slot per argument position, kept
  // per thread so that steady-state steps allocate nothing.
  thread_local std::vector<Tensor> scratch;
  if (scratch.size() < args_.size() + 1)
    scratch.resize(args_.size() + 1);
  dnnl::stream stream(cpuEngine());
  std::unordered_map<int, dnnl::memory> mems = extra;
  std::vector<dnnl::memory> users(args_.size());
  for (size_t i = 0; i < args_.size(); ++i) {
    const Planned &p = args_[i];
    users[i] = dnnl::memory(p.arg.user, cpuEngine(), ptrs[i]);
    if (!p.reorder) {
      mems[p.arg.id] = users[i];
      continue;
    }
    if (p.narrowOnly && native) {
      const float *src = static_cast<const float *>(ptrs[i]);
      std::shared_ptr<const VariableBf16Copy> copy;
      if (i < versions.size() && numCopies < 4)
        copy = bf16CopyOf(versions[i], src, p.elements, pool);
      if (copy) {
        mems[p.arg.id] = dnnl::memory(
            p.internal, cpuEngine(),
            const_cast<uint16_t *>(copy->low.data()));
        copies[numCopies++] = std::move(copy);
        continue;
      }
    }
    std::vector<int64_t> bytes = {int64_t(p.internal.get_size())};
    if (!scratch[i].canHold(DType::Bool, bytes) ||
        scratch[i].bufferUseCount() != 1)
      scratch[i] = Tensor::allocate(DType::Bool, bytes);
    dnnl::memory internal(p.internal, cpuEngine(), scratch[i].rawData());
    mems[p.arg.id] = internal;
    if (p.narrowOnly && native)
      narrowToBf16Native(static_cast<const float *>(ptrs[i]), p.elements,
                         static_cast<uint16_t *>(scratch[i].rawData()), pool);
    else if (!p.arg.output)
      runReorder(p.toInternal, stream, users[i], internal);
  }
  if (const size_t size = scratchpad_.get_size()) {
    Tensor &buffer = scratch[args_.size()];
    if (!buffer.canHold(DType::Bool, {int64_t(size)}) ||
        buffer.bufferUseCount() != 1)
      buffer = Tensor::allocate(DType::Bool, {int64_t(size)});
    mems[DNNL_ARG_SCRATCHPAD] =
        dnnl::memory(scratchpad_, cpuEngine(), buffer.rawData());
  }
  prim_.execute(stream, mems);
  for (size_t i = 0; i < args_.size(); ++i) {
    const Planned &p = args_[i];
    if (p.reorder && p.arg.output)
      runReorder(p.toUser, stream, mems[p.arg.id], users[i]);
  }
  stream.wait();
}

Status shapeAttr(const KernelContext &ctx, const char *op, const char *attr,
                 const std::vector<int64_t> &like, std::vector<int64_t> *out) {
  if (!ctx.hasAttr(attr))
    return errorStatus(op, " needs the ", attr,
                       " attribute (4 dimensions: the forward op's input "
                       "shape)");
  *out = ctx.getInts(attr);
  if (out->size() != 4)
    return errorStatus(op, " expects ", attr, " of 4 dimensions, got ",
                       shapeString(*out));
  for (size_t i = 0; i < 4; ++i) {
    if ((*out)[i] == -1 && i < like.size())
      (*out)[i] = like[i];
    if ((*out)[i] < 0)
      return errorStatus(op, ": ", attr, " ", shapeString(ctx.getInts(attr)),
                         " has a negative dimension");
  }
  return Status::ok();
}

Status getPair(const KernelContext &ctx, const char *op, const char *attr,
               int64_t dflt, int64_t *first, int64_t *second) {
  std::vector<int64_t> v = ctx.getInts(attr, {dflt, dflt});
  if (v.size() != 2 || v[0] < 1 || v[1] < 1)
    return errorStatus(op, " expects ", attr,
                       " to be two positive integers, got ", shapeString(v));
  *first = v[0];
  *second = v[1];
  return Status::ok();
}

namespace {

Status spatialSize(const char *op, const char *axis, int64_t in, int64_t k,
                   int64_t stride, int64_t dilation, bool same, int64_t *out,
                   int64_t *padBefore, int64_t *padAfter) {
  const int64_t effective = (k - 1) * dilation + 1;
  if (same) {
    *out = (in + stride - 1) / stride;
    int64_t total = std::max<int64_t>((*out - 1) * stride + effective - in, 0);
    *padBefore = total / 2;
    *padAfter = total - total / 2;
    return Status::ok();
  }
  if (in < effective)
    return errorStatus(op, " with valid padding needs an input ", axis,
                       " of at least ", effective,
                       " (the dilated window), got ", in);
  *out = (in - effective) / stride + 1;
  *padBefore = *padAfter = 0;
  return Status::ok();
}

} // namespace

Status makeWindow2D(const KernelContext &ctx, const char *op,
                    const std::vector<int64_t> &inputShape, int64_t kh,
                    int64_t kw, bool useDilations, Window2D *w) {
  if (inputShape.size() != 4)
    return errorStatus(op, " expects an NHWC input of rank 4, got ",
                       shapeString(inputShape));
  w->n = inputShape[0];
  w->ih = inputShape[1];
  w->iw = inputShape[2];
  w->c = inputShape[3];
  w->kh = kh;
  w->kw = kw;
  DTF_RETURN_IF_ERROR(getPair(ctx, op, "strides", 1, &w->sh, &w->sw));
  if (useDilations)
    DTF_RETURN_IF_ERROR(getPair(ctx, op, "dilations", 1, &w->dh, &w->dw));
  bool same = false;
  DTF_RETURN_IF_ERROR(parsePadding(ctx, op, &same));
  DTF_RETURN_IF_ERROR(spatialSize(op, "height", w->ih, kh, w->sh, w->dh, same,
                                  &w->oh, &w->padTop, &w->padBottom));
  DTF_RETURN_IF_ERROR(spatialSize(op, "width", w->iw, kw, w->sw, w->dw, same,
                                  &w->ow, &w->padLeft, &w->padRight));
  return Status::ok();
}

} // namespace dtf::cpu
