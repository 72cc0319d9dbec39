// Test harness of the CPU kernels.
#include "KernelTestUtil.h"

#include <sstream>

namespace dtf::test {

const KernelRegistry &cpuRegistry() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    registerCpuKernels(r);
    return r;
  }();
  return registry;
}

ThreadPool *testPool() {
  static ThreadPool pool(2);
  return &pool;
}

Status KernelRun::exec() {
  KernelFn fn = cpuRegistry().lookup(op_);
  if (!fn)
    return errorStatus("no kernel for ", op_);
  std::vector<Tensor *> ptrs;
  for (Tensor &t : inputs_)
    ptrs.push_back(&t);
  ctx_.setInputs(std::move(ptrs));
  return callKernel(fn, ctx_);
}

std::string errorOf(KernelRun &run) {
  Status s = run.exec();
  return s.isOk() ? "" : s.message();
}

Tensor tensorOf(DType dtype, const Shape &shape, const Values &values) {
  Tensor t = Tensor::allocate(dtype, shape);
  EXPECT_EQ(int64_t(values.size()), t.numElements())
      << "values for " << t.describe();
  for (int64_t i = 0; i < t.numElements() && i < int64_t(values.size()); ++i) {
    switch (dtype) {
    case DType::F32:
      t.data<float>()[i] = float(values[i]);
      break;
    case DType::F64:
      t.data<double>()[i] = values[i];
      break;
    case DType::I32:
      t.data<int32_t>()[i] = int32_t(values[i]);
      break;
    case DType::I64:
      t.data<int64_t>()[i] = int64_t(values[i]);
      break;
    case DType::Bool:
      t.data<bool>()[i] = values[i] != 0;
      break;
    default:
      ADD_FAILURE() << "tensorOf: no test values for " << dtypeName(dtype);
    }
  }
  return t;
}

Values valuesOf(const Tensor &t) {
  Values v(t.numElements());
  for (int64_t i = 0; i < t.numElements(); ++i) {
    switch (t.dtype()) {
    case DType::F32:
      v[i] = t.data<float>()[i];
      break;
    case DType::F64:
      v[i] = t.data<double>()[i];
      break;
    case DType::I32:
      v[i] = t.data<int32_t>()[i];
      break;
    case DType::I64:
      v[i] = double(t.data<int64_t>()[i]);
      break;
    case DType::Bool:
      v[i] = t.data<bool>()[i];
      break;
    default:
      ADD_FAILURE() << "valuesOf: " << t.describe();
    }
  }
  return v;
}

Values Rng::uniform(int64_t n, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  Values v(n);
  for (double &x : v)
    x = double(float(d(engine)));
  return v;
}

Values Rng::integers(int64_t n, int64_t lo, int64_t hi) {
  std::uniform_int_distribution<int64_t> d(lo, hi);
  Values v(n);
  for (double &x : v)
    x = double(d(engine));
  return v;
}

Tensor Rng::f32(const Shape &shape, double lo, double hi) {
  return test::f32(shape, uniform(numElementsOf(shape), lo, hi));
}

Shape unravel(int64_t flat, const Shape &shape) {
  Shape index(shape.size());
  for (int d = int(shape.size()) - 1; d >= 0; --d) {
    index[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return index;
}

int64_t ravel(const Shape &index, const Shape &shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    flat = flat * shape[d] + index[d];
  return flat;
}

Shape broadcastShapes(const Shape &a, const Shape &b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t broadcastSource(const Shape &outIndex, const Shape &shape) {
  size_t pad = outIndex.size() - shape.size();
  Shape index(shape.size());
  for (size_t d = 0; d < shape.size(); ++d)
    index[d] = shape[d] == 1 ? 0 : outIndex[d + pad];
  return ravel(index, shape);
}

static std::string show(const Shape &s) { return shapeString(s); }

::testing::AssertionResult near(const Tensor &got, const Shape &shape,
                                const Values &want, double atol, double rtol) {
  if (got.shape() != shape)
    return ::testing::AssertionFailure()
           << "shape " << show(got.shape()) << ", expected " << show(shape);
  Values v = valuesOf(got);
  if (v.size() != want.size())
    return ::testing::AssertionFailure()
           << "reference has " << want.size() << " values";
  int bad = 0;
  std::ostringstream os;
  double worst = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    double err = std::abs(v[i] - want[i]);
    bool ok = err <= atol + rtol * std::abs(want[i]) ||
              (std::isnan(want[i]) && std::isnan(v[i])) ||
              (std::isinf(want[i]) && v[i] == want[i]);
    if (!ok) {
      if (bad++ < 5)
        os << "\n  at " << show(unravel(int64_t(i), shape)) << ": got " << v[i]
           << ", expected " << want[i];
      worst = std::max(worst, err);
    }
  }
  if (bad)
    return ::testing::AssertionFailure()
           << bad << " of " << v.size() << " elements differ (worst " << worst
           << ")" << os.str();
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult equal(const Tensor &got, const Shape &shape,
                                 const Values &want) {
  return near(got, shape, want, 0.0, 0.0);
}

Values numericGrad(const std::function<Values(const Values &)> &f,
                   const Values &x, const Values &w, double eps) {
  Values g(x.size());
  Values xp = x;
  for (size_t i = 0; i < x.size(); ++i) {
    xp[i] = x[i] + eps;
    Values hi = f(xp);
    xp[i] = x[i] - eps;
    Values lo = f(xp);
    xp[i] = x[i];
    double s = 0;
    for (size_t j = 0; j < hi.size(); ++j)
      s += (hi[j] - lo[j]) * w[j];
    g[i] = s / (2 * eps);
  }
  return g;
}

} // namespace dtf::test
