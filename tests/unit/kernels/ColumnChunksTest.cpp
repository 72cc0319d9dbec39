// Column reductions cut into chunks of rows (runtime/kernels/ColumnChunks.h):
// the rule depends on the shape alone, and the op-by-op kernel's sums follow
// the documented order on any number of threads.
#include "runtime/kernels/ColumnChunks.h"
#include "runtime/core/ThreadPool.h"
#include "runtime/kernels/cpu/KernelUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace dtf {
namespace {

TEST(ColumnChunks, RowsPerChunkFollowTheDocumentedRule) {
  // The residual CNN's batch statistics at batch 64: [64 * 28 * 28, 16].
  EXPECT_EQ(columnChunkRows(1, 50176, 16), 1024);
  EXPECT_EQ(columnChunkCount(50176, 1024), 49);
  // The seed CNN's conv1 bias gradient at batch 50: [39,200, 32].
  EXPECT_EQ(columnChunkRows(1, 39200, 32), 613);
  EXPECT_EQ(columnChunkCount(39200, 613), 64);
  // conv2's: [9,800, 64]: 38 chunks of 258 rows.
  EXPECT_EQ(columnChunkRows(1, 9800, 64), 258);
  // A dense layer's bias gradient at batch 50 ([50, 500]): too small.
  EXPECT_EQ(columnChunkRows(1, 50, 500), 50);
  // Many outputs already give the pool enough tasks: not cut.
  EXPECT_EQ(columnChunkRows(1, 1000, 4096), 1000);
  // Enough kept rows (O) before the reduced run: not cut.
  EXPECT_EQ(columnChunkRows(64, 4096, 16), 4096);
  // Few O: cut so that O times the chunks make about 64 tasks.
  EXPECT_EQ(columnChunkRows(4, 8192, 16), 1024);
  // Rows (N = 1) and short columns are never cut.
  EXPECT_EQ(columnChunkRows(1, 1 << 20, 1), 1 << 20);
  EXPECT_EQ(columnChunkRows(1, 127, 1024), 127);
  // Huge shapes do not overflow.
  EXPECT_EQ(columnChunkRows(1, int64_t(1) << 40, 1 << 20), int64_t(1) << 40);
}

// The documented order: partial rows from the identity, rows in order, then
// each output from the identity combining the partials in chunk order.
template <typename T>
std::vector<T> chunkedReference(const std::vector<T> &x, int64_t outer,
                                int64_t rows, int64_t cols, bool max) {
  const T identity = max ? -std::numeric_limits<T>::infinity() : T(0);
  auto combine = [&](T a, T b) {
    return max ? ((b > a || b != b) ? b : a) : a + b;
  };
  const int64_t per = columnChunkRows(outer, rows, cols);
  const int64_t chunks = columnChunkCount(rows, per);
  std::vector<T> out(size_t(outer * cols), identity);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < chunks; ++c) {
      std::vector<T> partial(size_t(cols), identity);
      for (int64_t r = c * per; r < std::min(rows, (c + 1) * per); ++r)
        for (int64_t j = 0; j < cols; ++j)
          partial[size_t(j)] =
              combine(partial[size_t(j)], x[size_t((o * rows + r) * cols + j)]);
      for (int64_t j = 0; j < cols; ++j)
        out[size_t(o * cols + j)] =
            combine(out[size_t(o * cols + j)], partial[size_t(j)]);
    }
  return out;
}

template <typename T> void expectChunkedOrder(bool max) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> value(-4.0, 4.0);
  // [R, N] (a bias gradient), [O, R, N] (a kept leading axis), and a shape
  // whose last chunk is short.
  struct Case {
    int64_t outer, rows, cols;
  };
  for (Case c : {Case{1, 5000, 16}, Case{3, 3000, 8}, Case{1, 39200, 32},
                 Case{2, 4099, 24}}) {
    ASSERT_LT(columnChunkRows(c.outer, c.rows, c.cols), c.rows)
        << "the case is meant to be cut into chunks";
    std::vector<T> x(size_t(c.outer * c.rows * c.cols));
    for (T &v : x)
      v = T(value(rng));
    x[5] = std::numeric_limits<T>::quiet_NaN(); // a max keeps it
    const std::vector<T> want =
        chunkedReference(x, c.outer, c.rows, c.cols, max);
    std::vector<int64_t> shape = {c.outer, c.rows, c.cols};
    std::vector<bool> reduced = {false, true, false};
    if (c.outer == 1) {
      shape = {c.rows, c.cols};
      reduced = {true, false};
    }
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      std::vector<T> got(want.size());
      cpu::reduceInto<T>(x.data(), shape, reduced, got.data(),
                         max ? cpu::ReduceKind::Max : cpu::ReduceKind::Sum,
                         threads == 1 ? nullptr : &pool);
      ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(T)),
                0)
          << (max ? "max" : "sum") << " over [" << c.outer << ", " << c.rows
          << ", " << c.cols << "] on " << threads << " threads";
    }
  }
}

TEST(ColumnChunks, OpByOpSumsFollowTheChunkOrderOnAnyThreadCount) {
  expectChunkedOrder<float>(false);
  expectChunkedOrder<double>(false);
}

TEST(ColumnChunks, OpByOpMaximaFollowTheChunkOrderOnAnyThreadCount) {
  expectChunkedOrder<float>(true);
  expectChunkedOrder<double>(true);
}

} // namespace
} // namespace dtf
