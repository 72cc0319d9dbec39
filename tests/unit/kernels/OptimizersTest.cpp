// Optimizer updates over three steps against TensorFlow's formulas computed
// by hand in float64, plus clipping by global norm and moving averages.
#include "KernelTestUtil.h"

namespace dtf::test {
namespace {

const Shape kShape = {3, 5};
constexpr int64_t kN = 15;
constexpr double kAtol = 2e-6, kRtol = 2e-5;

// A variable and its slots, both as tensors (updated in place by the
// kernels) and as float64 references.
struct State {
  std::vector<Tensor> tensors;
  std::vector<Values> ref;
  State(Rng &rng, int count, std::vector<double> init) {
    for (int k = 0; k < count; ++k) {
      Values v = k == 0 ? rng.uniform(kN) : Values(kN, init[k - 1]);
      tensors.push_back(f32(kShape, v));
      ref.push_back(v);
    }
  }
  ::testing::AssertionResult matches() const {
    for (size_t k = 0; k < tensors.size(); ++k) {
      auto r = near(tensors[k], kShape, ref[k], kAtol, kRtol);
      if (!r)
        return r << " (tensor " << k << ")";
    }
    return ::testing::AssertionSuccess();
  }
};

// Runs `op` on the state and grad with `attrs`; extra inputs follow the grad.
void step(const char *op, State &s, const Values &g, const AttrMap &attrs,
          std::vector<Tensor> extra = {}, uint64_t ctxStep = 0) {
  KernelRun run(op);
  for (Tensor &t : s.tensors)
    run.in(t);
  run.in(f32(kShape, g));
  for (Tensor &t : extra)
    run.in(t);
  for (const auto &[k, v] : attrs)
    run.attr(k, v);
  run.step(ctxStep);
  ASSERT_EQ(errorOf(run), "");
}

TEST(Optimizers, GradientDescent) {
  Rng rng;
  State s(rng, 1, {});
  for (int t = 0; t < 3; ++t) {
    Values g = rng.uniform(kN);
    for (int64_t i = 0; i < kN; ++i)
      s.ref[0][i] -= 0.1 * g[i];
    step("dtf.apply_sgd", s, g, {{"learning_rate", 0.1}});
    ASSERT_TRUE(s.matches()) << "step " << t;
  }
  // The learning rate as a scalar input overrides the attribute.
  Values g = rng.uniform(kN);
  for (int64_t i = 0; i < kN; ++i)
    s.ref[0][i] -= 0.25 * g[i];
  step("dtf.apply_sgd", s, g, {{"learning_rate", 0.1}}, {f32({}, {0.25})});
  EXPECT_TRUE(s.matches());
}

TEST(Optimizers, MomentumPlainAndNesterov) {
  for (bool nesterov : {false, true}) {
    Rng rng;
    State s(rng, 2, {0.0});
    const double lr = 0.05, mu = 0.9;
    for (int t = 0; t < 3; ++t) {
      Values g = rng.uniform(kN);
      for (int64_t i = 0; i < kN; ++i) {
        double &var = s.ref[0][i], &accum = s.ref[1][i];
        accum = accum * mu + g[i];
        var -= nesterov ? lr * g[i] + lr * mu * accum : lr * accum;
      }
      step("dtf.apply_momentum", s, g,
           {{"learning_rate", lr},
            {"momentum", mu},
            {"use_nesterov", nesterov}});
      ASSERT_TRUE(s.matches()) << "nesterov " << nesterov << " step " << t;
    }
  }
}

void adamRef(State &s, const Values &g, double lr, double b1, double b2,
             double eps, int t, bool nesterov) {
  double lrT = lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
  for (int64_t i = 0; i < kN; ++i) {
    double &var = s.ref[0][i], &m = s.ref[1][i], &v = s.ref[2][i];
    m += (g[i] - m) * (1 - b1);
    v += (g[i] * g[i] - v) * (1 - b2);
    double num = nesterov ? m * b1 + (1 - b1) * g[i] : m;
    var -= lrT * num / (std::sqrt(v) + eps);
  }
}

TEST(Optimizers, AdamWithTheStepFromTheContextAnAttributeOrAnInput) {
  for (int source = 0; source < 3; ++source)
    for (bool nesterov : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << "source " << source << " nesterov " << nesterov);
      Rng rng;
      State s(rng, 3, {0.0, 0.0});
      const double lr = 0.01, b1 = 0.8, b2 = 0.95, eps = 1e-7;
      for (int t = 0; t < 3; ++t) {
        Values g = rng.uniform(kN);
        adamRef(s, g, lr, b1, b2, eps, t + 1, nesterov);
        AttrMap attrs = {{"learning_rate", lr},
                         {"beta1", b1},
                         {"beta2", b2},
                         {"epsilon", eps},
                         {"use_nesterov", nesterov}};
        std::vector<Tensor> extra;
        if (source == 1)
          attrs["step"] = int64_t(t);
        if (source == 2)
          extra = {f32({}, {lr}), tensorOf(DType::I64, {}, {double(t)})};
        step("dtf.apply_adam", s, g, attrs, extra, source == 0 ? t : 1000);
        ASSERT_TRUE(s.matches()) << "step " << t;
      }
    }
}

TEST(Optimizers, AdamDefaultsAreTensorFlows) {
  Rng rng;
  State s(rng, 3, {0.0, 0.0});
  for (int t = 0; t < 3; ++t) {
    Values g = rng.uniform(kN);
    adamRef(s, g, 1e-3, 0.9, 0.999, 1e-8, t + 1, false);
    step("dtf.apply_adam", s, g, {{"learning_rate", 1e-3}}, {}, t);
    ASSERT_TRUE(s.matches()) << "step " << t;
  }
}

// Keras 3's AdamW (and any optimizer's weight_decay): var - var * wd * lr
// first, with the learning rate of the step (here an input overriding the
// attribute), then the update, in f32 against float64.
TEST(Optimizers, AdamWDecaysTheVariableBeforeTheUpdate) {
  Rng rng;
  State s(rng, 3, {0.0, 0.0});
  const double lr = 0.02, wd = 0.004 * 50, eps = 1e-7;
  for (int t = 0; t < 3; ++t) {
    Values g = rng.uniform(kN);
    for (double &v : s.ref[0])
      v -= v * wd * lr;
    adamRef(s, g, lr, 0.9, 0.999, eps, t + 1, false);
    step("dtf.apply_adam", s, g,
         {{"learning_rate", 1.0}, {"epsilon", eps}, {"weight_decay", wd}},
         {f32({}, {lr}), tensorOf(DType::I64, {}, {double(t)})});
    ASSERT_TRUE(s.matches()) << "step " << t;
  }
  // A negative decay is an error, not a growth.
  KernelRun run("dtf.apply_sgd");
  run.in(s.tensors[0]).in(f32(kShape, rng.uniform(kN)));
  run.attr("learning_rate", 0.1);
  run.attr("weight_decay", -0.1);
  EXPECT_NE(errorOf(run).find("expects weight_decay >= 0, got -0.1"),
            std::string::npos)
      << errorOf(run);
}

TEST(Optimizers, AdagradWithAndWithoutEpsilon) {
  for (double eps : {0.0, 1e-7}) {
    Rng rng;
    State s(rng, 2, {0.1}); // TF1's initial_accumulator_value
    for (int t = 0; t < 3; ++t) {
      Values g = rng.uniform(kN);
      for (int64_t i = 0; i < kN; ++i) {
        double &var = s.ref[0][i], &accum = s.ref[1][i];
        accum += g[i] * g[i];
        var -= 0.1 * g[i] / (std::sqrt(accum) + eps);
      }
      AttrMap attrs = {{"learning_rate", 0.1}};
      if (eps > 0)
        attrs["epsilon"] = eps;
      step("dtf.apply_adagrad", s, g, attrs);
      ASSERT_TRUE(s.matches()) << "eps " << eps << " step " << t;
    }
  }
}

TEST(Optimizers, RmspropPlainAndCentered) {
  for (bool centered : {false, true}) {
    Rng rng;
    State s(rng, centered ? 4 : 3, {1.0, 0.0, 0.0});
    const double lr = 0.01, rho = 0.8, mu = 0.5, eps = 1e-6;
    for (int t = 0; t < 3; ++t) {
      Values g = rng.uniform(kN);
      for (int64_t i = 0; i < kN; ++i) {
        double &var = s.ref[0][i], &ms = s.ref[1][i], &mom = s.ref[2][i];
        ms += (g[i] * g[i] - ms) * (1 - rho);
        double denom = ms + eps;
        if (centered) {
          double &mg = s.ref[3][i];
          mg += (g[i] - mg) * (1 - rho);
          denom = ms - mg * mg + eps;
        }
        mom = mom * mu + lr * g[i] / std::sqrt(denom);
        var -= mom;
      }
      step("dtf.apply_rmsprop", s, g,
           {{"learning_rate", lr},
            {"rho", rho},
            {"momentum", mu},
            {"epsilon", eps},
            {"centered", centered}});
      ASSERT_TRUE(s.matches()) << "centered " << centered << " step " << t;
    }
  }
}

TEST(Optimizers, UpdatesAliasTheVariableInOutputZero) {
  Tensor var = f32({2}, {1, 2});
  KernelRun run("dtf.apply_sgd");
  run.outputs(1).attr("learning_rate", 1.0).in(var).in(f32({2}, {0.5, 0.5}));
  ASSERT_EQ(errorOf(run), "");
  EXPECT_EQ(run.out().rawData(), var.rawData());
  EXPECT_TRUE(equal(var, {2}, {0.5, 1.5}));
}

TEST(Optimizers, MismatchesAndMissingHyperparametersAreErrors) {
  KernelRun shape("dtf.apply_adam");
  shape.attr("learning_rate", 0.1);
  shape.in(f32({3, 5}, Values(15)))
      .in(f32({5, 3}, Values(15)))
      .in(f32({3, 5}, Values(15)));
  shape.in(f32({3, 5}, Values(15)));
  EXPECT_EQ(
      errorOf(shape),
      "dtf.apply_adam expects m of the variable's type f32[3,5], got f32[5,3]");
  KernelRun lr("dtf.apply_sgd");
  lr.in(f32({2}, {1, 2})).in(f32({2}, {1, 2}));
  EXPECT_EQ(errorOf(lr), "dtf.apply_sgd needs learning_rate (an attribute, or "
                         "input 2 as a scalar tensor)");
  KernelRun momentum("dtf.apply_momentum");
  momentum.attr("learning_rate", 0.1)
      .in(f32({2}, {1, 2}))
      .in(f32({2}, {0, 0}))
      .in(f32({2}, {1, 2}));
  EXPECT_EQ(errorOf(momentum),
            "dtf.apply_momentum needs the momentum attribute");
  KernelRun few("dtf.apply_rmsprop");
  few.attr("learning_rate", 0.1).attr("centered", true);
  few.in(f32({2}, {1, 2}))
      .in(f32({2}, {1, 2}))
      .in(f32({2}, {1, 2}))
      .in(f32({2}, {1, 2}));
  EXPECT_EQ(errorOf(few), "dtf.apply_rmsprop expects at least 5 inputs, got 4");
}

TEST(Optimizers, GlobalNormClipScalesOnlyAboveTheNorm) {
  Rng rng;
  Values a = rng.uniform(15), b = rng.uniform(4);
  double sq = 0;
  for (double v : a)
    sq += v * v;
  for (double v : b)
    sq += v * v;
  const double norm = std::sqrt(sq);
  for (double clip : {norm / 2, norm * 2}) {
    SCOPED_TRACE(clip);
    const double scale = clip / std::max(norm, clip);
    KernelRun run("dtf.global_norm_clip");
    run.attr("clip_norm", clip).in(f32({3, 5}, a)).in(f32({4}, b));
    ASSERT_EQ(errorOf(run), "");
    Values wa = a, wb = b;
    for (double &v : wa)
      v *= scale;
    for (double &v : wb)
      v *= scale;
    EXPECT_TRUE(near(run.out(0), {3, 5}, wa, 1e-6, 1e-6));
    EXPECT_TRUE(near(run.out(1), {4}, wb, 1e-6, 1e-6));
    EXPECT_TRUE(near(run.out(2), {}, {norm}, 1e-6, 1e-6));
  }
  KernelRun inf("dtf.global_norm_clip");
  inf.attr("clip_norm", 1.0).in(f32({2}, {INFINITY, 1}));
  ASSERT_EQ(errorOf(inf), "");
  EXPECT_TRUE(std::isnan(valuesOf(inf.out(0))[1]));
  KernelRun bad("dtf.global_norm_clip");
  bad.attr("clip_norm", 0.0).in(f32({1}, {1}));
  EXPECT_EQ(errorOf(bad), "dtf.global_norm_clip expects clip_norm > 0, got 0");
}

TEST(Optimizers, MovingAverageUpdate) {
  Rng rng;
  Values avg = rng.uniform(kN);
  Tensor avgT = f32(kShape, avg);
  for (int t = 0; t < 3; ++t) {
    Values v = rng.uniform(kN);
    for (int64_t i = 0; i < kN; ++i)
      avg[i] -= (avg[i] - v[i]) * (1 - 0.99);
    KernelRun run("dtf.moving_average_update");
    run.attr("decay", 0.99).in(avgT).in(f32(kShape, v));
    ASSERT_EQ(errorOf(run), "");
    ASSERT_TRUE(near(avgT, kShape, avg, kAtol, kRtol)) << "step " << t;
  }
}

} // namespace
} // namespace dtf::test
