// Learning-rate schedules and optimizer updates through the whole compiler
// (dtfc's front end and passes) and the runtime's executor, against a
// float64 reference written from Keras 3's formulas: CosineDecay with its
// warmup (keras/src/optimizers/schedules), and the decoupled weight decay
// every Keras 3 optimizer applies before its update (BaseOptimizer.
// _apply_weight_decay: variable - variable * weight_decay * learning_rate),
// AdamW's included, on dense variables and on an embedding table's rows;
// and an optimizer per group of variables, FTRL (TensorFlow's ApplyFtrlV2
// with Keras' beta) with a schedule for some, Adagrad for the others.
#include "CompileCase.h"
#include "compiler/Registration.h"
#include "compiler/frontend/MLIRGen.h"
#include "compiler/frontend/Parser.h"
#include "compiler/kernels/KernelGen.h"
#include "compiler/plan/PlanEmitter.h"
#include "dialects/Dtf/Transforms/Passes.h"
#include "runtime/exec/Executor.h"
#include "runtime/kernels/CpuKernels.h"
#include "runtime/train/Initializers.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <optional>

namespace {

using dtf::testing::compileCase;

/// A compiled model with its variables, run step by step.
struct Session {
  dtf::plan::Plan plan;
  dtf::exec::VariableStore variables;
  dtf::KernelRegistry kernels;
  std::unique_ptr<dtf::exec::Executor> train;

  /// Compiles and initializes; false (with `error`) on any failure.
  bool open(const std::string &source, bool fuse, std::string &error) {
    if (!compileCase(source, plan, error, fuse))
      return false;
    auto status = dtf::train::initializeVariables(plan, 7, &variables);
    if (!status.isOk()) {
      error = status.message();
      return false;
    }
    dtf::registerCpuKernels(kernels);
    dtf::exec::ExecutorOptions options;
    dtf::exec::applySessionOptions(plan, &options);
    if (fuse && plan.kernels_size() > 0 &&
        !(options.planKernels && options.planKernels->loaded)) {
      error = "the generated kernels did not load";
      return false;
    }
    status = dtf::exec::Executor::create(plan.train_step(), variables, kernels,
                                         options, &train);
    error = status.message();
    return status.isOk();
  }
  std::vector<double> values(const std::string &name) {
    const dtf::Tensor *t = variables.find(name);
    EXPECT_NE(t, nullptr) << name;
    std::vector<double> out;
    for (int64_t i = 0; t && i < t->numElements(); ++i)
      out.push_back(t->dtype() == dtf::DType::F64 ? t->data<double>()[i]
                    : t->dtype() == dtf::DType::I64
                        ? double(t->data<int64_t>()[i])
                        : double(t->data<float>()[i]));
    return out;
  }
  void set(const std::string &name, const std::vector<double> &v) {
    dtf::Tensor *t = variables.find(name);
    ASSERT_NE(t, nullptr) << name;
    ASSERT_EQ(t->numElements(), int64_t(v.size())) << name;
    for (size_t i = 0; i < v.size(); ++i)
      if (t->dtype() == dtf::DType::F64)
        t->data<double>()[i] = v[i];
      else
        t->data<float>()[i] = float(v[i]);
  }
  /// One training step; the feed `ids` (if the step has it) gets `ids`.
  void step(const std::vector<int64_t> &ids = {}) {
    for (int i = 0; i < train->numFeeds(); ++i) {
      dtf::Tensor *t = nullptr;
      ASSERT_TRUE(train->prepareFeed(i, int64_t(ids.size()), &t).isOk());
      ASSERT_EQ(t->dtype(), dtf::DType::I64);
      std::copy(ids.begin(), ids.end(), t->data<int64_t>());
    }
    auto s = train->run(0);
    ASSERT_TRUE(s.isOk()) << s.message();
  }
};

/// Keras 3's CosineDecay.__call__, in float64.
double kerasCosineDecay(double initial, double decaySteps, double alpha,
                        std::optional<double> warmupTarget, double warmupSteps,
                        double step) {
  auto decayFunction = [&](double s, double from) {
    const double completed = s / decaySteps;
    const double cosineDecayed = 0.5 * (1.0 + std::cos(M_PI * completed));
    return from * ((1 - alpha) * cosineDecayed + alpha);
  };
  if (!warmupTarget)
    return decayFunction(std::min(step, decaySteps), initial);
  const double s = std::min(step, decaySteps + warmupSteps);
  if (s < warmupSteps)
    return (*warmupTarget - initial) * (s / warmupSteps) + initial;
  return decayFunction(s - warmupSteps, *warmupTarget);
}

struct ScheduleCase {
  const char *schedule;
  double initial, decaySteps, alpha;
  std::optional<double> warmupTarget;
  double warmupSteps;
  /// Values at given steps, worked out by hand from Keras' formula.
  std::vector<std::pair<int, double>> pinned;
};

// SGD with gradient 1 (loss = sum(w), w one element): each step moves w by
// minus that step's learning rate, which the graph computes from the
// global step.
void checkSchedule(const ScheduleCase &c, const char *dtype, double tolerance) {
  const std::string source = std::string("model s {\n  var w: ") + dtype +
                             "[1] = zeros\n  graph { loss = sum(w) }\n"
                             "  train { optimizer = sgd(learning_rate = " +
                             c.schedule + ") }\n}\n";
  Session s;
  std::string error;
  ASSERT_TRUE(s.open(source, false, error)) << error << "\n" << source;
  // The pinned values are Keras' formula: the reference is, too.
  for (auto [step, value] : c.pinned)
    ASSERT_NEAR(kerasCosineDecay(c.initial, c.decaySteps, c.alpha,
                                 c.warmupTarget, c.warmupSteps, step),
                value, 1e-15)
        << "step " << step;
  std::map<int, double> seen;
  for (int step = 0; step < int(c.decaySteps + c.warmupSteps) + 5; ++step) {
    const double before = s.values("w")[0];
    s.step();
    ASSERT_EQ(s.values("global_step")[0], step + 1);
    const double lr = before - s.values("w")[0];
    seen[step] = lr;
    const double keras = kerasCosineDecay(c.initial, c.decaySteps, c.alpha,
                                          c.warmupTarget, c.warmupSteps, step);
    EXPECT_NEAR(lr, keras, tolerance * std::max(1.0, std::abs(before)))
        << dtype << " " << c.schedule << " at step " << step;
  }
  for (auto [step, value] : c.pinned)
    EXPECT_NEAR(seen[step], value, tolerance * 10) << "step " << step;
}

const std::vector<ScheduleCase> &scheduleCases() {
  static const std::vector<ScheduleCase> cases = {
      // 0.1 * 0.5 * (1 + cos(pi * s / 10)), s held at 10.
      {"cosine_decay(0.1, decay_steps = 10)",
       0.1,
       10,
       0.0,
       std::nullopt,
       0,
       {{0, 0.1}, {5, 0.05}, {10, 0.0}, {14, 0.0}}},
      // alpha 0.2: 0.1 * (0.8 * cosine + 0.2); at s = 2.5 of 10, cosine is
      // (1 + sqrt(2)/2) / 2.
      {"cosine_decay(0.1, 10, alpha = 0.2)",
       0.1,
       10,
       0.2,
       std::nullopt,
       0,
       {{0, 0.1}, {5, 0.06}, {10, 0.02}, {12, 0.02}}},
      // From 0 up to 0.5 over 4 steps, then 0.5 * (0.9 * cosine + 0.1) over
      // 8 steps, held at 0.05.
      {"cosine_decay(0.0, decay_steps = 8, alpha = 0.1, warmup_target = 0.5, "
       "warmup_steps = 4)",
       0.0,
       8,
       0.1,
       0.5,
       4,
       {{0, 0.0},
        {1, 0.125},
        {3, 0.375},
        {4, 0.5},
        {8, 0.275},
        {12, 0.05},
        {15, 0.05}}},
      // A warmup_target and no warmup_steps: the cosine starts at the target.
      {"cosine_decay(0.01, 4, warmup_target = 0.2)",
       0.01,
       4,
       0.0,
       0.2,
       0,
       {{0, 0.2}, {2, 0.1}, {4, 0.0}}},
  };
  return cases;
}

TEST(Schedules, CosineDecayInTheGraphIsKerasFormulaInF64) {
  for (const ScheduleCase &c : scheduleCases())
    checkSchedule(c, "f64", 1e-14);
}

TEST(Schedules, CosineDecayInTheGraphIsKerasFormulaInF32) {
  for (const ScheduleCase &c : scheduleCases())
    checkSchedule(c, "f32", 3e-7);
}

/// One optimizer as dtf computes it (TensorFlow 1's update rules), after
/// Keras 3's decoupled weight decay, in float64: `state` holds the variable
/// then its slots, `g` the gradient, `t` the steps before this one.
using Reference =
    std::function<void(std::vector<std::vector<double>> &state,
                       const std::vector<double> &g, double lr, double t)>;

struct UpdateCase {
  const char *optimizer; // the dtf call
  std::vector<std::string> slots;
  std::vector<double> slotStart; // each slot's initial value
  double lr, weightDecay;
  Reference update; // without the decay
};

const std::vector<UpdateCase> &updateCases() {
  using State = std::vector<std::vector<double>>;
  using G = const std::vector<double>;
  static const std::vector<UpdateCase> cases = {
      {"sgd(learning_rate = 0.1, weight_decay = 0.05)",
       {},
       {},
       0.1,
       0.05,
       [](State &s, G &g, double lr, double) {
         for (size_t i = 0; i < g.size(); ++i)
           s[0][i] -= lr * g[i];
       }},
      {"momentum(learning_rate = 0.1, momentum = 0.8, weight_decay = 0.05)",
       {"Momentum"},
       {0.0},
       0.1,
       0.05,
       [](State &s, G &g, double lr, double) {
         for (size_t i = 0; i < g.size(); ++i) {
           s[1][i] = s[1][i] * 0.8 + g[i];
           s[0][i] -= lr * s[1][i];
         }
       }},
      // Keras' AdamW: weight_decay 0.004 and epsilon 1e-7 by default.
      {"adamw(learning_rate = 0.05)",
       {"Adam", "Adam_1"},
       {0.0, 0.0},
       0.05,
       0.004,
       [](State &s, G &g, double lr, double t) {
         const double alpha = lr * std::sqrt(1 - std::pow(0.999, t + 1)) /
                              (1 - std::pow(0.9, t + 1));
         for (size_t i = 0; i < g.size(); ++i) {
           s[1][i] += (g[i] - s[1][i]) * (1 - 0.9);
           s[2][i] += (g[i] * g[i] - s[2][i]) * (1 - 0.999);
           s[0][i] -= s[1][i] * alpha / (std::sqrt(s[2][i]) + 1e-7);
         }
       }},
      {"adam(learning_rate = 0.05, beta1 = 0.8, weight_decay = 0.3)",
       {"Adam", "Adam_1"},
       {0.0, 0.0},
       0.05,
       0.3,
       [](State &s, G &g, double lr, double t) {
         const double alpha = lr * std::sqrt(1 - std::pow(0.999, t + 1)) /
                              (1 - std::pow(0.8, t + 1));
         for (size_t i = 0; i < g.size(); ++i) {
           s[1][i] += (g[i] - s[1][i]) * (1 - 0.8);
           s[2][i] += (g[i] * g[i] - s[2][i]) * (1 - 0.999);
           s[0][i] -= s[1][i] * alpha / (std::sqrt(s[2][i]) + 1e-8);
         }
       }},
      {"adagrad(learning_rate = 0.1, weight_decay = 0.05)",
       {"Adagrad"},
       {0.1},
       0.1,
       0.05,
       [](State &s, G &g, double lr, double) {
         for (size_t i = 0; i < g.size(); ++i) {
           s[1][i] += g[i] * g[i];
           s[0][i] -= lr * g[i] / std::sqrt(s[1][i]);
         }
       }},
      {"rmsprop(learning_rate = 0.01, momentum = 0.5, weight_decay = 0.05)",
       {"RMSProp", "RMSProp_1"},
       {1.0, 0.0},
       0.01,
       0.05,
       [](State &s, G &g, double lr, double) {
         for (size_t i = 0; i < g.size(); ++i) {
           s[1][i] += (g[i] * g[i] - s[1][i]) * (1 - 0.9);
           s[2][i] = s[2][i] * 0.5 + lr * g[i] / std::sqrt(s[1][i] + 1e-10);
           s[0][i] -= s[2][i];
         }
       }},
  };
  return cases;
}

/// Keras 3's decay of one element: variable - variable * wd * lr.
double decayed(double v, double wd, double lr) { return v - v * wd * lr; }

// A dense variable with gradient w (loss = sum(w * w) / 2), five steps, in
// f64, op by op and as generated kernels.
TEST(WeightDecay, DenseUpdatesAreKerasDecayThenTheUpdate) {
  const std::vector<double> start = {0.5, -1.5, 2.0, -0.25, 1.0};
  for (bool fuse : {false, true})
    for (const UpdateCase &c : updateCases()) {
      SCOPED_TRACE(std::string(c.optimizer) + (fuse ? " fused" : ""));
      const std::string source =
          std::string("model o {\n  var w: f64[5] = zeros\n"
                      "  graph { loss = sum(w * w) / 2.0 }\n"
                      "  train { optimizer = ") +
          c.optimizer + " }\n}\n";
      Session s;
      std::string error;
      ASSERT_TRUE(s.open(source, fuse, error)) << error << "\n" << source;
      if (fuse) {
        EXPECT_GT(s.plan.kernels_size(), 0) << "no generated update";
      }
      s.set("w", start);
      std::vector<std::vector<double>> state = {start};
      for (size_t k = 0; k < c.slots.size(); ++k) {
        state.push_back(std::vector<double>(start.size(), c.slotStart[k]));
        EXPECT_EQ(s.values("w/" + c.slots[k]), state.back()) << c.slots[k];
      }
      for (int t = 0; t < 5; ++t) {
        s.step();
        const std::vector<double> g = state[0]; // the gradient: w before
        for (double &v : state[0])
          v = decayed(v, c.weightDecay, c.lr);
        c.update(state, g, c.lr, t);
        for (size_t k = 0; k < state.size(); ++k) {
          const std::vector<double> got =
              s.values(k ? "w/" + c.slots[k - 1] : std::string("w"));
          for (size_t i = 0; i < start.size(); ++i)
            ASSERT_NEAR(got[i], state[k][i],
                        1e-13 * std::max(1.0, std::abs(state[k][i])))
                << "step " << t << ", tensor " << k << ", element " << i;
        }
      }
      // Not vacuous: without the decay the variable would be elsewhere.
      std::vector<std::vector<double>> plain = {start};
      for (size_t k = 0; k < c.slots.size(); ++k)
        plain.push_back(std::vector<double>(start.size(), c.slotStart[k]));
      for (int t = 0; t < 5; ++t) {
        const std::vector<double> g = plain[0];
        c.update(plain, g, c.lr, t);
      }
      EXPECT_GT(std::abs(plain[0][2] - s.values("w")[2]), 1e-6);
    }
}

// An embedding table (only gathered): the sparse update decays and updates
// the rows looked up in the step, and leaves the others as they are; with
// lazy = false the update is dense and every row decays each step, as
// Keras' (whose decay covers the whole variable).
TEST(WeightDecay, TableRowsDecayWhenLookedUpOrEveryStepWhenNotLazy) {
  const std::vector<int64_t> ids = {1, 3, 1};
  for (bool lazy : {true, false}) {
    SCOPED_TRACE(lazy ? "lazy" : "lazy = false");
    const std::string source =
        std::string("model o {\n  input ids: i64[B]\n"
                    "  var t: f64[5, 2] = zeros\n"
                    "  graph { e = gather(t, ids)\n loss = sum(e * e) / 2.0 }\n"
                    "  train { optimizer = sgd(learning_rate = 0.1, "
                    "weight_decay = 0.5") +
        (lazy ? "" : ", lazy = false") + ") }\n}\n";
    Session s;
    std::string error;
    ASSERT_TRUE(s.open(source, false, error)) << error << "\n" << source;
    bool sparse = false;
    for (const auto &op : s.plan.train_step().ops())
      sparse |= op.name() == "dtf.sparse_apply_sgd";
    EXPECT_EQ(sparse, lazy);
    std::vector<double> w = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    s.set("t", w);
    for (int step = 0; step < 3; ++step) {
      s.step(ids);
      // Row 1 is looked up twice: its gradient is twice the row.
      std::vector<double> g(w.size(), 0.0);
      for (int64_t id : ids)
        for (int j = 0; j < 2; ++j)
          g[size_t(id * 2 + j)] += w[size_t(id * 2 + j)];
      for (size_t i = 0; i < w.size(); ++i) {
        const bool present = g[i] != 0.0;
        if (!present && lazy)
          continue;
        w[i] = decayed(w[i], 0.5, 0.1) - 0.1 * g[i];
      }
      const std::vector<double> got = s.values("t");
      for (size_t i = 0; i < w.size(); ++i)
        ASSERT_NEAR(got[i], w[i], 1e-14 * std::abs(w[i]))
            << "step " << step << ", element " << i;
    }
    // Row 0 is never looked up: it decays only when not lazy.
    EXPECT_EQ(s.values("t")[0] == 1.0, lazy);
  }
}

/// TensorFlow's ApplyFtrlV2 with Keras' beta on element i, in float64.
void ftrlReference(double &var, double &accum, double &linear, double g,
                   double lr) {
  const double p = -0.6, l1 = 0.01, l2 = 0.1 + 0.3 / (2 * lr), shrink = 0.05;
  const double newAccum = accum + g * g;
  linear += g + 2 * shrink * var -
            (std::pow(newAccum, -p) - std::pow(accum, -p)) / lr * var;
  const double sign = linear > 0 ? 1 : linear < 0 ? -1 : 0;
  var = std::abs(linear) > l1
            ? (sign * l1 - linear) / (std::pow(newAccum, -p) / lr + 2 * l2)
            : 0.0;
  accum = newAccum;
}

// `optimizer for w, t = ftrl(...)` beside the model's adagrad: w (dense)
// and the table t (sparse: the rows looked up) take FTRL with its own
// decaying learning rate, v takes Adagrad at the model's; each has its own
// optimizer's slots. Op by op and with generated kernels (Adagrad's).
TEST(OptimizerGroups, EachVariableTakesItsGroupsOptimizerAndSchedule) {
  const std::string source =
      "model o {\n  input ids: i64[B]\n  var w: f64[3] = zeros\n"
      "  var v: f64[3] = zeros\n  var t: f64[4, 2] = zeros\n"
      "  graph { e = gather(t, ids)\n"
      "    loss = sum(w * w) / 2.0 + sum(v * v) / 2.0 + sum(e * e) / 2.0 }\n"
      "  train {\n    optimizer = adagrad(learning_rate = 0.1)\n"
      "    optimizer for w, t = ftrl(learning_rate = exponential_decay(0.2, "
      "decay_steps = 2, decay_rate = 0.5), learning_rate_power = -0.6, "
      "l1 = 0.01, l2 = 0.1, l2_shrinkage = 0.05, beta = 0.3)\n  }\n}\n";
  const std::vector<int64_t> ids = {2, 0, 2};
  for (bool fuse : {false, true}) {
    SCOPED_TRACE(fuse ? "fused" : "op by op");
    Session s;
    std::string error;
    ASSERT_TRUE(s.open(source, fuse, error)) << error << "\n" << source;
    std::map<std::string, std::string> updates; // variable -> optimizer
    for (const auto &v : s.plan.variables())
      if (v.role() == "model")
        updates[v.name()] = v.optimizer();
    EXPECT_EQ(updates["w"], "ftrl (optimizer for w, t)");
    EXPECT_EQ(updates["t"], "ftrl (optimizer for w, t)");
    EXPECT_EQ(updates["v"], "adagrad");
    // The global step, w v t, Ftrl and Ftrl_1 of w and t, v/Adagrad.
    EXPECT_EQ(s.plan.variables_size(), 1 + 3 + 2 + 2 + 1);
    std::vector<double> w = {0.5, -1.5, 2.0}, v = w;
    std::vector<double> t = {1, -2, 3, -4, 5, -6, 7, -8};
    s.set("w", w);
    s.set("v", v);
    s.set("t", t);
    std::vector<double> wAccum(3, 0.1), wLinear(3, 0.0), vAccum(3, 0.1);
    std::vector<double> tAccum(8, 0.1), tLinear(8, 0.0);
    for (int step = 0; step < 4; ++step) {
      s.step(ids);
      const double lr = 0.2 * std::pow(0.5, step / 2.0);
      for (size_t i = 0; i < 3; ++i) {
        ftrlReference(w[i], wAccum[i], wLinear[i], w[i], lr);
        const double g = v[i];
        vAccum[i] += g * g;
        v[i] -= 0.1 * g / std::sqrt(vAccum[i]);
      }
      std::vector<double> g(8, 0.0); // row 2 twice, row 0 once
      for (int64_t id : ids)
        for (int j = 0; j < 2; ++j)
          g[size_t(id * 2 + j)] += t[size_t(id * 2 + j)];
      for (int64_t row : {0, 2})
        for (int j = 0; j < 2; ++j) {
          const size_t i = size_t(row * 2 + j);
          ftrlReference(t[i], tAccum[i], tLinear[i], g[i], lr);
        }
      for (auto [name, want] :
           {std::pair{"w", &w}, {"v", &v}, {"t", &t}, {"w/Ftrl", &wAccum},
            {"w/Ftrl_1", &wLinear}, {"t/Ftrl_1", &tLinear},
            {"v/Adagrad", &vAccum}}) {
        const std::vector<double> got = s.values(name);
        ASSERT_EQ(got.size(), want->size()) << name;
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], (*want)[i], 1e-13 * std::max(1.0, std::abs((*want)[i])))
              << name << " step " << step << " element " << i;
      }
    }
    // Rows 1 and 3 were never looked up: the sparse update left them.
    EXPECT_EQ(s.values("t")[2], 3.0); // row 1 is 3, -4
    EXPECT_EQ(s.values("t")[6], 7.0);
  }
}

} // namespace
