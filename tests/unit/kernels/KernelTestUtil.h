// Test harness of the CPU kernels: running one kernel, random tensors, and
// float64 reference helpers (broadcasting, finite differences).
#pragma once

#include "runtime/core/ThreadPool.h"
#include "runtime/kernels/CpuKernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace dtf::test {

/// A float's bit pattern, and the float of a pattern (the rounding tests).
inline uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

using Shape = std::vector<int64_t>;
using Values = std::vector<double>;

/// The registry with every CPU kernel, built once.
const KernelRegistry &cpuRegistry();
/// A two-thread pool shared by the tests that exercise the parallel paths.
ThreadPool *testPool();

/// One kernel call: inputs (owned here), attributes, then exec().
class KernelRun {
public:
  explicit KernelRun(std::string op) : op_(std::move(op)) {
    ctx_.setOpName(op_);
  }
  KernelRun &in(Tensor t) {
    inputs_.push_back(std::move(t));
    return *this;
  }
  KernelRun &attr(std::string name, AttrValue value) {
    ctx_.setAttr(std::move(name), std::move(value));
    return *this;
  }
  KernelRun &pool(ThreadPool *pool = testPool()) {
    ctx_.setThreadPool(pool);
    return *this;
  }
  KernelRun &step(uint64_t step, uint64_t seed = 0) {
    ctx_.setStep(step, seed);
    return *this;
  }
  KernelRun &outputs(int n) {
    ctx_.setNumOutputs(n);
    return *this;
  }
  /// Runs the kernel; an unknown op is an error status too.
  Status exec();
  Tensor &out(int i = 0) { return ctx_.output(i); }
  Tensor &input(int i) { return inputs_[i]; }
  KernelContext &ctx() { return ctx_; }

private:
  std::string op_;
  std::vector<Tensor> inputs_;
  KernelContext ctx_;
};

/// Runs and returns the error message, or "" when it succeeded.
std::string errorOf(KernelRun &run);

/// A tensor of `dtype` holding `values` (converted with static_cast).
Tensor tensorOf(DType dtype, const Shape &shape, const Values &values);
inline Tensor f32(const Shape &shape, const Values &values) {
  return tensorOf(DType::F32, shape, values);
}
inline Tensor f64(const Shape &shape, const Values &values) {
  return tensorOf(DType::F64, shape, values);
}
/// Every element as a double.
Values valuesOf(const Tensor &t);

/// A deterministic generator per test.
struct Rng {
  explicit Rng(uint64_t seed = 42) : engine(seed) {}
  Values uniform(int64_t n, double lo = -1.0, double hi = 1.0);
  /// Integers in [lo, hi].
  Values integers(int64_t n, int64_t lo, int64_t hi);
  /// Values rounded to f32, so the reference sees exactly what the kernel sees.
  Tensor f32(const Shape &shape, double lo = -1.0, double hi = 1.0);
  std::mt19937_64 engine;
};

/// Row-major index helpers.
Shape unravel(int64_t flat, const Shape &shape);
int64_t ravel(const Shape &index, const Shape &shape);
/// NumPy's broadcast of two shapes (the test's own, independent of the
/// kernels').
Shape broadcastShapes(const Shape &a, const Shape &b);
/// The flat index into `shape` of the element that output index `outIndex`
/// (of a shape `shape` broadcasts to) reads.
int64_t broadcastSource(const Shape &outIndex, const Shape &shape);

/// Checks shape and every element within atol + rtol * |want|.
::testing::AssertionResult near(const Tensor &got, const Shape &shape,
                                const Values &want, double atol = 1e-5,
                                double rtol = 1e-5);
/// Exact equality of shape and values.
::testing::AssertionResult equal(const Tensor &got, const Shape &shape,
                                 const Values &want);

/// d/dx of sum(f(x) * w) by central differences of a float64 function.
Values numericGrad(const std::function<Values(const Values &)> &f,
                   const Values &x, const Values &w, double eps = 1e-4);

} // namespace dtf::test
