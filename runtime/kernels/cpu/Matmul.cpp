// Matrix products: f32 through oneDNN's matmul primitive, from bf16-rounded
// operands with compute_dtype (mixed precision); f64 (oneDNN has no dgemm on
// CPU), i32 and i64 with plain loops.
#include "runtime/kernels/cpu/KernelUtil.h"
#include "runtime/kernels/cpu/F32Matmul.h"
#include "runtime/kernels/cpu/OneDnn.h"
#include "runtime/core/Bf16.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

namespace dtf::cpu {
namespace {

// Integers accumulate unsigned, so overflow wraps; doubles as they are.
template <typename T> struct GemmAcc { using type = std::make_unsigned_t<T>; };
template <> struct GemmAcc<double> { using type = double; };

// C[M,N] = op(A) op(B) for integers (wrapping on overflow) and doubles: the
// reference loop, for the dtypes oneDNN has no gemm for. Rows of C are
// independent, so they are split over the pool.
template <typename T>
void loopGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T *a,
              int64_t lda, const T *b, int64_t ldb, T *c, ThreadPool *pool) {
  using U = typename GemmAcc<T>::type;
  parallelFor(pool, m,
              std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(1, n * k)),
              [&](int64_t lo, int64_t hi) {
                for (int64_t i = lo; i < hi; ++i) {
                  U *row = reinterpret_cast<U *>(c + i * n);
                  for (int64_t j = 0; j < n; ++j)
                    row[j] = 0;
                  for (int64_t p = 0; p < k; ++p) {
                    U av = U(ta ? a[p * lda + i] : a[i * lda + p]);
                    if (!tb) {
                      const T *brow = b + p * ldb;
                      for (int64_t j = 0; j < n; ++j)
                        row[j] += av * U(brow[j]);
                    } else {
                      for (int64_t j = 0; j < n; ++j)
                        row[j] += av * U(b[j * ldb + p]);
                    }
                  }
                }
              });
}

// Input `i` (f32) of a bf16 product as the product reads it: bf16 values
// where the CPU has bf16 instructions (`native`), else f32 values rounded
// through bf16. A versioned input (a weight, or a value made once per step)
// has one copy per version, which the products that read it share (the
// forward and input-gradient products of a dense layer): `copy` holds it
// while the product runs. Any other input is rounded into `low` (and
// `rounded`), per-thread scratch: with vcvtneps2bf16 (narrowToBf16Native,
// over the pool only when large), else by Bf16.h over the pool.
const void *bf16Operand(const KernelContext &ctx, int i, bool native,
                        std::shared_ptr<const VariableBf16Copy> &copy,
                        std::vector<uint16_t> &low,
                        std::vector<float> &rounded) {
  copy = variableBf16Copy(ctx, i, ctx.threadPool());
  if (copy)
    return native ? static_cast<const void *>(copy->low.data())
                  : static_cast<const void *>(copy->rounded.data());
  const float *src = ctx.input(i).data<float>();
  const int64_t count = ctx.input(i).numElements();
  low.resize(size_t(count));
  if (native) {
    narrowToBf16Native(src, count, low.data(), ctx.threadPool());
    return low.data();
  }
  parallelFor(ctx.threadPool(), count, kCheapGrain,
              [&](int64_t lo, int64_t hi) {
                narrowToBf16(src + lo, hi - lo, low.data() + lo);
              });
  rounded.resize(size_t(count));
  widenFromBf16(low.data(), count, rounded.data());
  return rounded.data();
}

Status matmulKernel(KernelContext &ctx) {
  const char *name = dtf::ops::kMatmul;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 2));
  const Tensor &a = ctx.input(0), &b = ctx.input(1);
  DTF_RETURN_IF_ERROR(requireSameDType(name, a, b));
  bool bf16, f16;
  DTF_RETURN_IF_ERROR(lowPrecisionCompute(ctx, name, a, &bf16, &f16));
  if (a.rank() < 2 || b.rank() < 2)
    return errorStatus(name, " expects operands of rank 2 or more, got ",
                       a.describe(), " and ", b.describe());
  const bool ta = ctx.getBool("transpose_a"), tb = ctx.getBool("transpose_b");
  const int64_t m = ta ? a.dim(-1) : a.dim(-2), k = ta ? a.dim(-2) : a.dim(-1);
  const int64_t kb = tb ? b.dim(-1) : b.dim(-2), n = tb ? b.dim(-2) : b.dim(-1);
  if (k != kb)
    return errorStatus(name, " expects inner dimensions to match, got ",
                       a.describe(), ta ? " (transposed)" : "", " and ",
                       b.describe(), tb ? " (transposed)" : "");
  // Batch dimensions (all but the last two) broadcast as NumPy's matmul:
  // aligned at the right, a missing or size-1 dimension shared.
  std::vector<int64_t> aBatch(a.shape().begin(), a.shape().end() - 2);
  std::vector<int64_t> bBatch(b.shape().begin(), b.shape().end() - 2);
  const size_t batchRank = std::max(aBatch.size(), bBatch.size());
  std::vector<int64_t> outShape(batchRank);
  for (size_t i = 0; i < batchRank; ++i) {
    const size_t pa = batchRank - aBatch.size(), pb = batchRank - bBatch.size();
    const int64_t da = i < pa ? 1 : aBatch[i - pa];
    const int64_t db = i < pb ? 1 : bBatch[i - pb];
    if (da != db && da != 1 && db != 1)
      return errorStatus(name, " expects batch dimensions that broadcast, got ",
                         a.describe(), " and ", b.describe());
    outShape[i] = da == 1 ? db : da;
  }
  const int64_t batch = numElementsOf(outShape);
  // Each output matrix's operands: the offsets (in matrices) into a and b,
  // for the loops of the other dtypes (f32 hands oneDNN the batch strides).
  std::vector<int64_t> aAt, bAt;
  auto matrixOffsets = [&] {
    aAt.assign(size_t(batch), 0);
    bAt.assign(size_t(batch), 0);
    for (int64_t i = 0; i < batch; ++i) {
      int64_t rest = i, strideA = 1, strideB = 1;
      for (size_t d = batchRank; d-- > 0;) {
        const int64_t idx = rest % outShape[d];
        rest /= outShape[d];
        const size_t pa = batchRank - aBatch.size(),
                     pb = batchRank - bBatch.size();
        if (d >= pa) {
          const int64_t da = aBatch[d - pa];
          aAt[size_t(i)] += (da == 1 ? 0 : idx) * strideA;
          strideA *= da;
        }
        if (d >= pb) {
          const int64_t db = bBatch[d - pb];
          bAt[size_t(i)] += (db == 1 ? 0 : idx) * strideB;
          strideB *= db;
        }
      }
    }
  };
  const bool bShared = numElementsOf(bBatch) == 1;
  const bool aWhole = numElementsOf(aBatch) == batch;
  outShape.push_back(m);
  outShape.push_back(n);
  const int64_t lda = a.dim(-1), ldb = b.dim(-1);

  return dispatchNumeric(name, a.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    Tensor *out;
    DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, a.dtype(), outShape, &out));
    T *pc = out->data<T>();
    const T *pa = a.data<T>(), *pb = b.data<T>();
    if (m == 0 || n == 0)
      return Status::ok();
    if (k == 0) {
      std::memset(pc, 0, out->byteSize());
      return Status::ok();
    }
    // [B, M, K] x [K, N] is one [B*M, K] x [K, N] product.
    int64_t gemmBatch = batch, gemmM = m;
    if (bShared && aWhole && !ta) {
      gemmM = batch * m;
      gemmBatch = 1;
    }
    // f32: the whole batch in one oneDNN call.
    if constexpr (std::is_same_v<T, float>) {
      // compute_dtype bf16: the operands as bf16Operand gives them (a
      // shared copy per version, or per-thread scratch).
      thread_local std::vector<uint16_t> aLow, bLow;
      thread_local std::vector<float> aRounded, bRounded;
      const void *ia = pa, *ib = pb;
      const bool native = bf16 && bf16Native();
      std::shared_ptr<const VariableBf16Copy> aCopy, bCopy;
      try {
        if (bf16) {
          ia = bf16Operand(ctx, 0, native, aCopy, aLow, aRounded);
          ib = bf16Operand(ctx, 1, native, bCopy, bLow, bRounded);
        }
        // compute_dtype f16: the f32 product of f16-rounded operands.
        Tensor aF16, bF16;
        if (f16) {
          aF16 = roundedThroughF16(a, ctx.threadPool());
          bF16 = roundedThroughF16(b, ctx.threadPool());
          ia = aF16.data<float>();
          ib = bF16.data<float>();
        }
        if (gemmBatch == 1) {
          f32Matmul(ta, tb, gemmM, n, k, ia, lda, ib, ldb, pc, n, native);
        } else {
          std::vector<int64_t> aPadded(batchRank, 1), bPadded(batchRank, 1);
          std::copy(aBatch.begin(), aBatch.end(),
                    aPadded.end() - aBatch.size());
          std::copy(bBatch.begin(), bBatch.end(),
                    bPadded.end() - bBatch.size());
          f32BatchedMatmul(ta, tb, aPadded, bPadded, m, n, k, ia, ib, pc,
                           native);
        }
      } catch (const dnnl::error &e) {
        return errorStatus(name, ": oneDNN failed on ", a.describe(), " x ",
                           b.describe(), ": ", e.what());
      }
    } else {
      matrixOffsets();
      for (int64_t i = 0; i < gemmBatch; ++i) {
        const T *ai = pa + aAt[size_t(i)] * m * k,
                *bi = pb + bAt[size_t(i)] * k * n;
        loopGemm(ta, tb, gemmM, n, k, ai, lda, bi, ldb, pc + i * m * n,
                 ctx.threadPool());
      }
    }
    return Status::ok();
  });
}

} // namespace

void registerMatmulKernels(KernelRegistry &registry) {
  registry.add(dtf::ops::kMatmul, matmulKernel);
}

} // namespace dtf::cpu
