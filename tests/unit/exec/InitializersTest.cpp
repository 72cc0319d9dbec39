// Variable initializers: bounds and moments of each distribution, fans, and
// determinism from the seed and the variable's name.
#include "runtime/train/Initializers.h"
#include "tests/unit/exec/TestPlans.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace dtf::testing {
namespace {

plan::Variable variable(const std::string &name, std::vector<int64_t> dims,
                        const std::string &kind,
                        std::vector<std::pair<std::string, double>> params = {},
                        plan::DType dtype = plan::F32) {
  plan::Variable v;
  v.set_name(name);
  v.mutable_type()->set_dtype(dtype);
  for (int64_t d : dims)
    v.mutable_type()->mutable_shape()->add_dims(d);
  v.mutable_initializer()->set_kind(kind);
  for (auto &[k, x] : params)
    (*v.mutable_initializer()->mutable_params())[k] = x;
  return v;
}

Tensor init(const plan::Variable &v, uint64_t seed = 42) {
  Tensor t;
  Status s = train::initializeVariable(v, seed, &t);
  EXPECT_TRUE(s.isOk()) << s.message();
  return t;
}

struct Moments {
  double mean = 0, stddev = 0, min = 0, max = 0;
};

Moments moments(const Tensor &t) {
  const float *p = t.data<float>();
  const int64_t n = t.numElements();
  Moments m;
  m.min = m.max = p[0];
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += p[i];
    sq += double(p[i]) * p[i];
    m.min = std::min(m.min, double(p[i]));
    m.max = std::max(m.max, double(p[i]));
  }
  m.mean = sum / n;
  m.stddev = std::sqrt(sq / n - m.mean * m.mean);
  return m;
}

TEST(Initializers, FansFollowTensorFlow) {
  double in = 0, out = 0;
  train::computeFans({}, &in, &out);
  EXPECT_EQ(in, 1);
  EXPECT_EQ(out, 1);
  train::computeFans({7}, &in, &out);
  EXPECT_EQ(in, 7);
  EXPECT_EQ(out, 7);
  train::computeFans({784, 500}, &in, &out);
  EXPECT_EQ(in, 784);
  EXPECT_EQ(out, 500);
  train::computeFans({5, 5, 32, 64}, &in, &out); // HWIO
  EXPECT_EQ(in, 5 * 5 * 32);
  EXPECT_EQ(out, 5 * 5 * 64);
}

TEST(Initializers, ZerosOnesAndConstant) {
  Tensor z = init(variable("z", {3, 2}, "zeros"));
  Tensor e = init(variable("e", {3, 2}, ""));
  Tensor o = init(variable("o", {5}, "ones"));
  Tensor c = init(variable("c", {4}, "constant", {{"value", 0.1}}));
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(z.data<float>()[i], 0.0f);
    EXPECT_EQ(e.data<float>()[i], 0.0f);
  }
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(o.data<float>()[i], 1.0f);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(c.data<float>()[i], 0.1f);
  Tensor step = init(variable("global_step", {}, "zeros", {}, plan::I64));
  EXPECT_EQ(step.describe(), "i64[]");
  EXPECT_EQ(step.data<int64_t>()[0], 0);
  Tensor seven =
      init(variable("n", {2}, "constant", {{"value", 7}}, plan::I32));
  EXPECT_EQ(seven.data<int32_t>()[1], 7);
}

TEST(Initializers, ConstantNeedsAValueAndRandomNeedsFloats) {
  Tensor t;
  Status s = train::initializeVariable(variable("c", {2}, "constant"), 1, &t);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("variable 'c'"), std::string::npos);
  s = train::initializeVariable(variable("ids", {2}, "uniform", {}, plan::I32),
                                1, &t);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("random initializers need f32"), std::string::npos)
      << s.message();
}

// f64 variables draw from the same stream as f32 ones and round once, to
// double: each value is its f32 twin's before that twin's rounding.
TEST(Initializers, F64DrawsTheSameNumbersUnrounded) {
  for (const char *kind : {"truncated_normal", "glorot_uniform", "he_normal",
                           "uniform", "normal"}) {
    SCOPED_TRACE(kind);
    Tensor a = init(variable("w", {40, 30}, kind));
    Tensor b = init(variable("w", {40, 30}, kind, {}, plan::F64));
    ASSERT_EQ(b.describe(), "f64[40,30]");
    bool someDiffer = false;
    for (int64_t i = 0; i < a.numElements(); ++i) {
      const double d = b.data<double>()[i];
      EXPECT_EQ(float(d), a.data<float>()[i]) << i;
      someDiffer = someDiffer || double(float(d)) != d;
    }
    EXPECT_TRUE(someDiffer) << "the f64 values are all f32 numbers";
  }
  Tensor c = init(variable("c", {3}, "constant", {{"value", 0.1}}, plan::F64));
  EXPECT_EQ(c.data<double>()[2], 0.1);
}

TEST(Initializers, UniformStaysInItsInterval) {
  Tensor t = init(
      variable("u", {100000}, "uniform", {{"minval", -3.0}, {"maxval", 5.0}}));
  Moments m = moments(t);
  EXPECT_GE(m.min, -3.0);
  EXPECT_LT(m.max, 5.0);
  EXPECT_NEAR(m.mean, 1.0, 0.05);
  EXPECT_NEAR(m.stddev, 8.0 / std::sqrt(12.0), 0.03);
  Tensor d = init(variable("u01", {10000}, "uniform"));
  EXPECT_GE(moments(d).min, 0.0);
  EXPECT_LT(moments(d).max, 1.0);
}

TEST(Initializers, GlorotUniformLimits) {
  // Matrix: limit sqrt(6 / (fan_in + fan_out)).
  Tensor t = init(variable("dense/kernel", {256, 128}, "glorot_uniform"));
  const double limit = std::sqrt(6.0 / (256 + 128));
  Moments m = moments(t);
  EXPECT_GE(m.min, -limit);
  EXPECT_LE(m.max, limit);
  EXPECT_GT(m.max, 0.99 * limit);
  EXPECT_LT(m.min, -0.99 * limit);
  EXPECT_NEAR(m.mean, 0.0, 0.01 * limit);
  EXPECT_NEAR(m.stddev, limit / std::sqrt(3.0), 0.01 * limit);
  // Conv kernel HWIO: the receptive field multiplies both fans.
  Tensor k = init(variable("conv/kernel", {5, 5, 16, 32}, "glorot_uniform"));
  const double convLimit = std::sqrt(6.0 / (5 * 5 * 16 + 5 * 5 * 32));
  Moments mk = moments(k);
  EXPECT_LE(mk.max, convLimit);
  EXPECT_GT(mk.max, 0.98 * convLimit);
  EXPECT_GE(mk.min, -convLimit);
}

TEST(Initializers, NormalMoments) {
  Tensor t =
      init(variable("n", {200000}, "normal", {{"mean", 2.0}, {"stddev", 0.5}}));
  Moments m = moments(t);
  EXPECT_NEAR(m.mean, 2.0, 0.005);
  EXPECT_NEAR(m.stddev, 0.5, 0.005);
  // A normal reaches well past 2 stddev.
  EXPECT_GT(m.max, 2.0 + 4 * 0.5);
}

TEST(Initializers, TruncatedNormalStaysWithinTwoStddev) {
  Tensor t = init(variable("t", {200000}, "truncated_normal",
                           {{"mean", -1.0}, {"stddev", 0.1}}));
  Moments m = moments(t);
  EXPECT_GE(m.min, -1.0 - 0.2 - 1e-6);
  EXPECT_LE(m.max, -1.0 + 0.2 + 1e-6);
  EXPECT_NEAR(m.mean, -1.0, 0.001);
  // The stddev of a unit normal cut at 2: .8796.
  EXPECT_NEAR(m.stddev, 0.1 * 0.87962566, 0.001);
}

TEST(Initializers, HeNormalHasStddevSqrtTwoOverFanIn) {
  Tensor t = init(variable("he", {400, 250}, "he_normal"));
  const double stddev = std::sqrt(2.0 / 400);
  Moments m = moments(t);
  EXPECT_NEAR(m.stddev, stddev, 0.02 * stddev);
  EXPECT_NEAR(m.mean, 0.0, 0.02 * stddev);
  // Truncated at 2 of the pre-truncation stddev.
  EXPECT_LE(std::max(-m.min, m.max), 2 * stddev / 0.87962566 + 1e-6);
}

TEST(Initializers, DeterministicFromSeedAndName) {
  auto same = [](const Tensor &a, const Tensor &b) {
    return a.byteSize() == b.byteSize() &&
           std::equal(a.data<float>(), a.data<float>() + a.numElements(),
                      b.data<float>());
  };
  plan::Variable w = variable("W", {64, 32}, "glorot_uniform");
  plan::Variable v = variable("V", {64, 32}, "glorot_uniform");
  EXPECT_TRUE(same(init(w, 1), init(w, 1)));
  EXPECT_FALSE(same(init(w, 1), init(w, 2)));
  EXPECT_FALSE(same(init(w, 1), init(v, 1)));
  // An initializer's own seed fixes it whatever the run's seed and name.
  w.mutable_initializer()->set_seed(99);
  v.mutable_initializer()->set_seed(99);
  EXPECT_TRUE(same(init(w, 1), init(w, 2)));
  EXPECT_TRUE(same(init(w, 1), init(v, 3)));
  EXPECT_EQ(train::variableSeed(5, w), train::variableSeed(6, w));
}

// A ps makes its shard of a table without the whole: the rows must be the
// whole variable's rows, for every kind (the truncated ones redraw).
TEST(Initializers, RowsOfAShardAreTheWholeVariablesRows) {
  for (const char *kind :
       {"uniform", "normal", "truncated_normal", "he_normal", "glorot_uniform",
        "orthogonal", "constant", "zeros"}) {
    plan::Variable v = variable("emb", {101, 7}, kind, {{"value", 0.5}});
    const Tensor whole = init(v);
    for (auto [begin, rows] : {std::pair<int64_t, int64_t>{0, 34},
                               {34, 33}, {67, 34}, {100, 1}, {5, 0}}) {
      Tensor part;
      Status s = train::initializeRows(v, 42, begin, rows, &part);
      ASSERT_TRUE(s.isOk()) << kind << ": " << s.message();
      ASSERT_EQ(part.shape(), (std::vector<int64_t>{rows, 7})) << kind;
      for (int64_t i = 0; i < rows * 7; ++i)
        ASSERT_EQ(part.data<float>()[i], whole.data<float>()[begin * 7 + i])
            << kind << " rows " << begin << ".." << begin + rows << " at " << i;
    }
  }
  Tensor part;
  Status s = train::initializeRows(variable("emb", {10, 2}, "normal"), 1, 8, 3,
                                   &part);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("has 10 rows, not rows 8 to 11"),
            std::string::npos)
      << s.message();
}

// Keras' Orthogonal: the shape as [product of the leading dims, last dim]
// has orthonormal columns (more rows than columns) or orthonormal rows
// (fewer), times gain, in f64 to the rounding of double.
TEST(Initializers, OrthogonalHasOrthonormalRowsOrColumnsTimesGain) {
  struct Shape {
    std::vector<int64_t> dims;
    int64_t rows, cols;
  };
  for (const Shape &shape : {Shape{{16, 64}, 16, 64}, Shape{{64, 16}, 64, 16},
                             Shape{{3, 4, 5}, 12, 5}, Shape{{7, 7}, 7, 7}})
    for (double gain : {1.0, 2.5}) {
      plan::Variable v =
          variable("rk", shape.dims, "orthogonal", {{"gain", gain}}, plan::F64);
      const Tensor t = init(v);
      const double *q = t.data<double>();
      const bool byColumn = shape.rows >= shape.cols;
      const int64_t k = std::min(shape.rows, shape.cols);
      const int64_t len = std::max(shape.rows, shape.cols);
      auto at = [&](int64_t vec, int64_t i) {
        return byColumn ? q[i * shape.cols + vec] : q[vec * shape.cols + i];
      };
      int positive = 0;
      for (int64_t a = 0; a < k; ++a)
        for (int64_t b = 0; b < k; ++b) {
          double dot = 0;
          for (int64_t i = 0; i < len; ++i)
            dot += at(a, i) * at(b, i);
          ASSERT_NEAR(dot, a == b ? gain * gain : 0.0, 1e-12)
              << shape.rows << "x" << shape.cols << " vectors " << a << ", "
              << b;
        }
      for (int64_t i = 0; i < t.numElements(); ++i)
        positive += q[i] > 0;
      // Random signs, not a fixed basis.
      EXPECT_GT(positive, t.numElements() / 4);
      EXPECT_LT(positive, t.numElements() * 3 / 4);
    }
  // Seeded like the others, and f32 is the f64 matrix rounded.
  plan::Variable f64 = variable("rk", {8, 32}, "orthogonal", {}, plan::F64);
  plan::Variable f32 = variable("rk", {8, 32}, "orthogonal");
  const Tensor a = init(f64), b = init(f32), c = init(f64, 43);
  for (int64_t i = 0; i < a.numElements(); ++i)
    ASSERT_EQ(b.data<float>()[i], float(a.data<double>()[i])) << i;
  EXPECT_NE(a.data<double>()[0], c.data<double>()[0]);
  Tensor t;
  Status s = train::initializeVariable(variable("v", {8}, "orthogonal"), 1, &t);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("orthogonal initializer needs rank 2 or more"),
            std::string::npos)
      << s.message();
}

TEST(Initializers, InitializeVariablesFillsTheStore) {
  plan::Plan p = logisticRegressionPlan();
  addVariable(&p, "W/Adam", plan::F32, {4, 3}, "", "slot");
  addVariable(&p, "global_step", plan::I64, {}, "", "global_step");
  exec::VariableStore store;
  ASSERT_TRUE(train::initializeVariables(p, 3, &store).isOk());
  EXPECT_EQ(store.size(), 4u);
  EXPECT_EQ(store.names(),
            (std::vector<std::string>{"W", "W/Adam", "b", "global_step"}));
  EXPECT_EQ(store.find("global_step")->describe(), "i64[]");
  EXPECT_EQ(store.byteSize(), 4u * (12 + 12 + 3) + 8);
  // Twice the same name is an error.
  Status s = train::initializeVariables(p, 3, &store);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("variable 'W' is defined twice"),
            std::string::npos);
}

TEST(Initializers, MovingAveragesStartAtTheirVariablesValue) {
  plan::Plan p = logisticRegressionPlan();
  // Declared before its variable, with an initializer of its own: still a
  // copy of W's first value.
  plan::Variable *avg = p.add_variables();
  *avg = p.variables(0);
  avg->set_name("W/ExponentialMovingAverage");
  avg->set_role("moving_average");
  avg->set_slot_of("W");
  p.mutable_variables()->SwapElements(0, 2);
  p.mutable_variables(2)->mutable_initializer()->set_kind("glorot_uniform");
  avg->mutable_initializer()->set_kind("glorot_uniform");
  exec::VariableStore store;
  Status s = train::initializeVariables(p, 5, &store);
  ASSERT_TRUE(s.isOk()) << s.message();
  const Tensor *w = store.find("W"),
               *a = store.find("W/ExponentialMovingAverage");
  ASSERT_TRUE(w && a);
  EXPECT_TRUE(
      std::equal(w->data<float>(), w->data<float>() + 12, a->data<float>()));
  EXPECT_NE(w->data<float>()[0], 0.0f);

  p.mutable_variables(0)->set_slot_of("nothing");
  exec::VariableStore other;
  s = train::initializeVariables(p, 5, &other);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("moving average of 'nothing'"), std::string::npos)
      << s.message();
}

} // namespace
} // namespace dtf::testing
