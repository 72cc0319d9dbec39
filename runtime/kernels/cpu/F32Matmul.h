// f32 matrix products through oneDNN's matmul primitive (also from bf16
// operands, accumulating in f32: mixed precision). Header-only so that
// the CPU matmul kernel and the CUDA emulation's cuBLAS (a shared library of
// its own, linking only oneDNN) compute a product in exactly the same way:
// a model on an emulated GPU then follows its CPU run bit for bit through its
// dense layers, and the e2e tests that compare the two stay sharp.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

namespace dtf::cpu {

/// While alive, oneDNN primitives made or run on this thread use this thread
/// alone. oneDNN runs on OpenMP threads that may be asleep (a task of a
/// cluster waits passively), and waking one costs tens of microseconds on a
/// virtual machine: more than a small product takes on one core. OpenMP is
/// looked up at run time (oneDNN brings it; this header does not link it);
/// without it this does nothing.
class OneDnnOnThisThreadOnly {
public:
  OneDnnOnThisThreadOnly() {
    const OpenMp &omp = openMp();
    if (!omp.setNumThreads)
      return;
    saved_ = omp.getMaxThreads();
    if (saved_ > 1)
      omp.setNumThreads(1);
  }
  ~OneDnnOnThisThreadOnly() {
    if (saved_ > 1)
      openMp().setNumThreads(saved_);
  }
  OneDnnOnThisThreadOnly(const OneDnnOnThisThreadOnly &) = delete;
  OneDnnOnThisThreadOnly &operator=(const OneDnnOnThisThreadOnly &) = delete;

private:
  struct OpenMp {
    void (*setNumThreads)(int) = nullptr;
    int (*getMaxThreads)() = nullptr;
  };
  static const OpenMp &openMp() {
    static const OpenMp omp = [] {
      OpenMp o;
      o.setNumThreads = reinterpret_cast<void (*)(int)>(
          dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
      o.getMaxThreads = reinterpret_cast<int (*)()>(
          dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
      if (!o.setNumThreads || !o.getMaxThreads)
        o = OpenMp{};
      return o;
    }();
    return omp;
  }
  int saved_ = 0;
};

/// Products of at most this many flops (2 M N K) run on the calling thread
/// alone: waking oneDNN's second thread costs more than it saves.
constexpr double kOneThreadMatmulFlops = 4e6;

namespace detail {
// Runs the primitive for (a, b, c) descriptors, made once per `key`; `flops`
// decides whether it runs on this thread alone.
inline void runMatmul(std::vector<int64_t> key, double flops,
                      const dnnl::memory::desc &ad,
                      const dnnl::memory::desc &bd,
                      const dnnl::memory::desc &cd, const void *a,
                      const void *b, float *c) {
  struct Prim {
    dnnl::matmul prim;
    dnnl::memory::desc a, b, c, scratchpad;
  };
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, std::shared_ptr<Prim>> cache;
  // A primitive keeps the thread count it was made with, so the one-thread
  // ones are made (and run) under the same limit, and keyed apart.
  const bool oneThread = flops <= kOneThreadMatmulFlops;
  std::unique_ptr<OneDnnOnThisThreadOnly> limit;
  if (oneThread)
    limit = std::make_unique<OneDnnOnThisThreadOnly>();
  key.push_back(oneThread);
  std::shared_ptr<Prim> p;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end())
      p = it->second;
  }
  if (!p) {
    // The scratchpad (brgemm's packed copies) is the caller's: a primitive
    // keeps a library one per primitive, which two threads running the same
    // shape at once (inter-op branches) would share.
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), attr,
                                    engine);
    p = std::make_shared<Prim>(
        Prim{dnnl::matmul(pd), ad, bd, cd, pd.scratchpad_desc()});
    std::lock_guard<std::mutex> lock(mutex);
    if (cache.size() >= 512)
      cache.clear(); // shapes churn only in unusual plans; start over
    cache.emplace(key, p);
  }
  // Per thread, 64-byte aligned, grown as needed.
  struct Scratch {
    std::unique_ptr<char, void (*)(void *)> data{nullptr, std::free};
    size_t size = 0;
  };
  thread_local Scratch scratch;
  if (scratch.size < p->scratchpad.get_size()) {
    void *data = nullptr;
    if (posix_memalign(&data, 64, p->scratchpad.get_size()) != 0)
      throw std::bad_alloc();
    scratch.data.reset(static_cast<char *>(data));
    scratch.size = p->scratchpad.get_size();
  }
  dnnl::stream stream(engine);
  dnnl::memory am(p->a, engine, const_cast<void *>(a));
  dnnl::memory bm(p->b, engine, const_cast<void *>(b));
  dnnl::memory cm(p->c, engine, c);
  dnnl::memory sm(p->scratchpad, engine, scratch.data.get());
  p->prim.execute(stream, {{DNNL_ARG_SRC, am},
                           {DNNL_ARG_WEIGHTS, bm},
                           {DNNL_ARG_DST, cm},
                           {DNNL_ARG_SCRATCHPAD, sm}});
  stream.wait();
}
} // namespace detail

/// C[M,N] = op(A) op(B), row-major, with leading dimensions lda, ldb and ldc.
/// A cached oneDNN matmul primitive per shape; its brgemm kernels read the
/// operands where they are, where oneDNN's sgemm (used before) packed B on
/// every call and ran small products several times slower in the middle of a
/// training step than alone (bench/results/kernels.md, "Notes (eighth
/// session)"). With `bf16`, A and B hold bfloat16 (uint16_t) values and the
/// products accumulate in f32. Throws dnnl::error when oneDNN fails.
inline void f32Matmul(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                      const void *a, int64_t lda, const void *b, int64_t ldb,
                      float *c, int64_t ldc, bool bf16 = false) {
  using dims = dnnl::memory::dims;
  const auto f32 = dnnl::memory::data_type::f32;
  const auto in = bf16 ? dnnl::memory::data_type::bf16 : f32;
  detail::runMatmul(
      {/*2-D*/ 0, ta, tb, m, n, k, lda, ldb, ldc, bf16},
      2.0 * double(m) * double(n) * double(k),
      dnnl::memory::desc({m, k}, in, ta ? dims{1, lda} : dims{lda, 1}),
      dnnl::memory::desc({k, n}, in, tb ? dims{1, ldb} : dims{ldb, 1}),
      dnnl::memory::desc({m, n}, f32, dims{ldc, 1}), a, b, c);
}

/// The batched product C[batch..., M, N] = op(A) op(B) of dense row-major
/// operands A [aBatch..., M, K] (or [..., K, M] with ta) and B [bBatch...,
/// K, N] (or [..., N, K] with tb), whose batch dimensions (of one rank)
/// broadcast as NumPy's: one primitive call for every matrix of the batch,
/// where a call per matrix cost more in overhead than the small products of
/// attention took. With `bf16`, A and B hold bfloat16 values.
inline void f32BatchedMatmul(bool ta, bool tb,
                             const std::vector<int64_t> &aBatch,
                             const std::vector<int64_t> &bBatch, int64_t m,
                             int64_t n, int64_t k, const void *a,
                             const void *b, float *c, bool bf16 = false) {
  using dims = dnnl::memory::dims;
  const auto f32 = dnnl::memory::data_type::f32;
  const auto in = bf16 ? dnnl::memory::data_type::bf16 : f32;
  const size_t rank = aBatch.size();
  // Logical dims and the strides of the stored (maybe transposed) matrices.
  auto desc = [&](const std::vector<int64_t> &batch, int64_t rows,
                  int64_t cols, bool transposed, dnnl::memory::data_type t) {
    dims d(batch.begin(), batch.end()), strides(rank + 2);
    d.push_back(rows);
    d.push_back(cols);
    strides[rank] = transposed ? 1 : cols;
    strides[rank + 1] = transposed ? rows : 1;
    int64_t s = rows * cols;
    for (size_t i = rank; i-- > 0;) {
      strides[i] = s;
      s *= batch[i];
    }
    return dnnl::memory::desc(d, t, strides);
  };
  std::vector<int64_t> outBatch(rank),
      key = {/*batched, of rank*/ 1 + int64_t(rank), ta, tb, m, n, k, bf16};
  double matrices = 1;
  for (size_t i = 0; i < rank; ++i) {
    outBatch[i] = std::max(aBatch[i], bBatch[i]);
    matrices *= double(outBatch[i]);
    key.push_back(aBatch[i]);
    key.push_back(bBatch[i]);
  }
  detail::runMatmul(key, 2.0 * matrices * double(m) * double(n) * double(k),
                    desc(aBatch, m, k, ta, in), desc(bBatch, k, n, tb, in),
                    desc(outBatch, m, n, false, f32), a, b, c);
}

} // namespace dtf::cpu
