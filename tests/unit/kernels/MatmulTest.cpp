// matmul against a float64 reference: transposes, batches, integer dtypes.
#include "KernelTestUtil.h"

#include "runtime/kernels/cpu/F32Matmul.h"

#include <dlfcn.h>

namespace dtf::test {
namespace {

// C[b] = op(A[b]) op(B[b]); a batch-less operand is shared by every batch.
Values refMatmul(const Shape &as, const Values &a, const Shape &bs,
                 const Values &b, bool ta, bool tb, Shape *outShape) {
  const int64_t m = ta ? as.back() : as[as.size() - 2],
                k = ta ? as[as.size() - 2] : as.back();
  const int64_t n = tb ? bs[bs.size() - 2] : bs.back();
  Shape batch(as.begin(), as.end() - 2);
  if (batch.empty())
    batch.assign(bs.begin(), bs.end() - 2);
  const int64_t batches = numElementsOf(batch);
  const int64_t aStride = as.size() > 2 ? m * k : 0,
                bStride = bs.size() > 2 ? k * n : 0;
  *outShape = batch;
  outShape->push_back(m);
  outShape->push_back(n);
  Values c(batches * m * n, 0.0);
  for (int64_t p = 0; p < batches; ++p)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t q = 0; q < k; ++q) {
          double av = a[p * aStride + (ta ? q * m + i : i * k + q)];
          double bv = b[p * bStride + (tb ? j * k + q : q * n + j)];
          s += av * bv;
        }
        c[(p * m + i) * n + j] = s;
      }
  return c;
}

Shape stored(int64_t rows, int64_t cols, bool transposed, Shape batch = {}) {
  batch.push_back(transposed ? cols : rows);
  batch.push_back(transposed ? rows : cols);
  return batch;
}

TEST(Matmul, EveryTransposeCombinationAndOddShape) {
  Rng rng;
  for (auto [m, k, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {13, 7, 5}, {1, 9, 1}, {3, 1, 4}, {64, 33, 17},
           // Over kOneThreadMatmulFlops: a primitive on every OpenMP thread.
           {130, 257, 70}}) {
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        SCOPED_TRACE(::testing::Message() << m << "x" << k << "x" << n
                                          << " ta=" << ta << " tb=" << tb);
        Shape as = stored(m, k, ta), bs = stored(k, n, tb);
        Values a = rng.uniform(numElementsOf(as)),
               b = rng.uniform(numElementsOf(bs));
        Shape outShape;
        Values want = refMatmul(as, a, bs, b, ta, tb, &outShape);
        KernelRun run("dtf.matmul");
        run.attr("transpose_a", ta)
            .attr("transpose_b", tb)
            .in(f32(as, a))
            .in(f32(bs, b));
        ASSERT_EQ(errorOf(run), "");
        EXPECT_TRUE(near(run.out(), outShape, want, 1e-5, 1e-5));
      }
  }
}

// A small product runs on the calling thread alone, and the thread's OpenMP
// thread count is back as it was afterwards (else every later oneDNN call on
// it would run on one thread).
TEST(Matmul, SmallProductsLimitOpenMpOnlyWhileTheyRun) {
  using SetFn = void (*)(int);
  using GetFn = int (*)();
  auto set = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  auto get = reinterpret_cast<GetFn>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  ASSERT_TRUE(set && get) << "oneDNN's OpenMP is not in the process";
  const int before = get();
  set(3);
  {
    cpu::OneDnnOnThisThreadOnly limit;
    EXPECT_EQ(get(), 1);
  }
  EXPECT_EQ(get(), 3);
  Rng rng;
  Values a = rng.uniform(6), b = rng.uniform(6);
  Shape outShape;
  Values want = refMatmul({2, 3}, a, {3, 2}, b, false, false, &outShape);
  KernelRun run("dtf.matmul");
  run.in(f32({2, 3}, a)).in(f32({3, 2}, b));
  ASSERT_EQ(errorOf(run), "");
  EXPECT_TRUE(near(run.out(), outShape, want, 1e-6, 1e-6));
  EXPECT_EQ(get(), 3);
  set(before);
}

TEST(Matmul, BatchedRankThreeAndSharedOperands) {
  Rng rng;
  struct Case {
    Shape as, bs;
    bool ta, tb;
  };
  for (const Case &c :
       std::vector<Case>{{{3, 5, 7}, {3, 7, 4}, false, false},
                         {{3, 7, 5}, {3, 4, 7}, true, true},
                         {{13, 5, 7}, {7, 4}, false, false},
                         {{2, 7, 5}, {7, 4}, true, false},
                         {{5, 7}, {3, 7, 4}, false, false},
                         {{2, 3, 5, 7}, {2, 3, 7, 2}, false, false},
                         // Over kOneThreadMatmulFlops, transposed: one
                         // batched primitive on every OpenMP thread.
                         {{3, 130, 70}, {3, 90, 130}, true, true},
                         {{2, 130, 70}, {130, 90}, true, false}}) {
    SCOPED_TRACE(shapeString(c.as) + " x " + shapeString(c.bs));
    Values a = rng.uniform(numElementsOf(c.as)),
           b = rng.uniform(numElementsOf(c.bs));
    Shape outShape;
    Values want = refMatmul(c.as, a, c.bs, b, c.ta, c.tb, &outShape);
    KernelRun run("dtf.matmul");
    run.attr("transpose_a", c.ta)
        .attr("transpose_b", c.tb)
        .in(f32(c.as, a))
        .in(f32(c.bs, b));
    ASSERT_EQ(errorOf(run), "");
    EXPECT_TRUE(near(run.out(), outShape, want, 1e-5, 1e-5));
  }
}

// Batch dimensions broadcast as NumPy's matmul: [2, 1, 3, 4] x [3, 4, 5]
// is [2, 3, 3, 5], each output matrix the product of the matrices its batch
// index picks (size 1 and missing dimensions shared).
TEST(Matmul, BatchDimensionsBroadcast) {
  Rng rng;
  const Shape as = {2, 1, 3, 4}, bs = {3, 4, 5};
  Values a = rng.uniform(2 * 3 * 4), b = rng.uniform(3 * 4 * 5);
  for (bool pooled : {false, true}) {
    KernelRun run("dtf.matmul");
    run.in(f32(as, a)).in(f32(bs, b));
    if (pooled)
      run.pool();
    ASSERT_EQ(errorOf(run), "");
    Values expected(2 * 3 * 3 * 5);
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t r = 0; r < 3; ++r)
          for (int64_t c = 0; c < 5; ++c) {
            double sum = 0;
            for (int64_t q = 0; q < 4; ++q)
              sum += a[size_t((i * 3 + r) * 4 + q)] * b[size_t((j * 4 + q) * 5 + c)];
            expected[size_t(((i * 3 + j) * 3 + r) * 5 + c)] = sum;
          }
    EXPECT_TRUE(near(run.out(), {2, 3, 3, 5}, expected, 1e-5, 1e-5));
  }
}

TEST(Matmul, IntegersExactly) {
  Rng rng;
  for (DType dtype : {DType::I32, DType::I64})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        Shape as = stored(6, 5, ta, {2}), bs = stored(5, 3, tb, {2});
        Values a = rng.integers(numElementsOf(as), -9, 9),
               b = rng.integers(numElementsOf(bs), -9, 9);
        Shape outShape;
        Values want = refMatmul(as, a, bs, b, ta, tb, &outShape);
        KernelRun run("dtf.matmul");
        run.pool().attr("transpose_a", ta).attr("transpose_b", tb);
        run.in(tensorOf(dtype, as, a)).in(tensorOf(dtype, bs, b));
        ASSERT_EQ(errorOf(run), "");
        EXPECT_EQ(run.out().dtype(), dtype);
        EXPECT_TRUE(equal(run.out(), outShape, want));
      }
}

TEST(Matmul, EmptyInnerDimensionGivesZeros) {
  KernelRun run("dtf.matmul");
  run.in(f32({3, 0}, {})).in(f32({0, 2}, {}));
  ASSERT_EQ(errorOf(run), "");
  EXPECT_TRUE(equal(run.out(), {3, 2}, Values(6, 0.0)));
}

TEST(Matmul, MismatchesAreErrors) {
  KernelRun inner("dtf.matmul");
  inner.in(f32({3, 5}, Values(15))).in(f32({4, 7}, Values(28)));
  EXPECT_EQ(errorOf(inner), "dtf.matmul expects inner dimensions to match, got "
                            "f32[3,5] and f32[4,7]");
  KernelRun transposed("dtf.matmul");
  transposed.attr("transpose_a", true)
      .in(f32({3, 5}, Values(15)))
      .in(f32({5, 7}, Values(35)));
  EXPECT_EQ(errorOf(transposed),
            "dtf.matmul expects inner dimensions to match, got "
            "f32[3,5] (transposed) and f32[5,7]");
  KernelRun batch("dtf.matmul");
  batch.in(f32({2, 3, 5}, Values(30))).in(f32({3, 5, 2}, Values(30)));
  EXPECT_EQ(errorOf(batch),
            "dtf.matmul expects batch dimensions that broadcast, got "
            "f32[2,3,5] and f32[3,5,2]");
  KernelRun rank("dtf.matmul");
  rank.in(f32({5}, Values(5))).in(f32({5, 2}, Values(10)));
  EXPECT_EQ(
      errorOf(rank),
      "dtf.matmul expects operands of rank 2 or more, got f32[5] and f32[5,2]");
}

} // namespace
} // namespace dtf::test
