// FTRL (dtf.apply_ftrl, dtf.sparse_apply_ftrl): three steps against Keras'
// own Ftrl (values it computed, bench/peers/keras_ftrl_steps.py), against
// TensorFlow's ApplyFtrlV2 / SparseApplyFtrlV2 formulas in float64, and
// what its sparse form does and does not share with the dense update.
#include "KernelTestUtil.h"

#include <cmath>
#include <set>

namespace dtf::test {
namespace {

// The variable before the steps and each step's gradient, as in
// bench/peers/keras_ftrl_steps.py.
const Values kVar = {0.5, -0.3, 0.0, 1.2, -2.0, 0.05};
const std::vector<Values> kGrads = {{0.2, -0.1, 0.4, 0.0, -0.8, 0.3},
                                    {-0.5, 0.25, 0.0, 0.1, 0.6, -0.3},
                                    {0.05, 0.0, -0.7, 0.9, -0.2, 0.3}};

struct KerasCase {
  const char *name;
  double lr, lrPower, accum0, l1, l2, shrinkage, beta;
  // The variable after each step, printed by keras.optimizers.Ftrl 3.15.1
  // (TensorFlow 2.21 backend), in f32 and in f64.
  std::vector<Values> f32, f64;
};

const std::vector<KerasCase> &kerasCases() {
  static const std::vector<KerasCase> all = {
      {"half_power", 0.1, -0.5, 0.1, 0.01, 0.02, 0.03, 0.5,
       {{0.0056583737023174763, 0.0073828692547976971, -0.038465257734060287,
         -0.0075588761828839779, -0.72935479879379272, -0.024808110669255257},
        {0.049934901297092438, -0.017683502286672592, -0.038237631320953369,
         -0.019471157342195511, -0.76517617702484131, 0.002437536371871829},
        {0.045247048139572144, -0.017568092793226242, 0.011563947424292564,
         -0.080901756882667542, -0.7495301365852356, -0.022749215364456177}},
       {{0.0056583689840997821, 0.0073828685934433742, -0.03846525837174191,
         -0.007558876120757973, -0.72935478142988663, -0.024808112256834321},
        {0.049934894759537059, -0.017683503221517776, -0.03823763127918732,
         -0.01947115783003129, -0.76517623632322174, 0.0024375363990664805},
        {0.045247041721396729, -0.01756809212540001, 0.011563946538339365,
         -0.08090175123187579, -0.74953016179321441, -0.022749215118087439}}},
      {"other_power", 0.3, -0.7, 0.2, 0, 0, 0, 0,
       {{-0.1030225083231926, 0.079374484717845917, -0.24534064531326294, 0,
         -0.99643391370773315, -0.20262293517589569},
        {0.14412373304367065, -0.10696493089199066, -0.24534064531326294,
         -0.08944740891456604, -1.1548669338226318, -0.025451375171542168},
        {0.11949700862169266, -0.10696493089199066, -0.010038399137556553,
         -0.3557305634021759, -1.1032543182373047, -0.17812852561473846}},
       {{-0.10302253109150353, 0.079374464229168287, -0.24534064926651536, 0,
         -0.99643408577884784, -0.20262293729383732},
        {0.14412371505881238, -0.10696494861628106, -0.24534064926651536,
         -0.089447408250187016, -1.1548670870648674, -0.025451378306556801},
        {0.11949697592071293, -0.10696494861628106, -0.010038408514013835,
         -0.35573054261049686, -1.1032544454744466, -0.1781285211936148}}},
  };
  return all;
}

AttrMap ftrlAttrs(double lrPower, double l1, double l2, double shrinkage,
                  double beta) {
  return {{"lr_power", lrPower},
          {"l1", l1},
          {"l2", l2},
          {"l2_shrinkage", shrinkage},
          {"beta", beta}};
}

// One dense step on (var, accum, linear) with the learning rate an input.
void denseStep(std::vector<Tensor> &state, const Tensor &grad, DType dtype,
               double lr, const AttrMap &attrs) {
  KernelRun run("dtf.apply_ftrl");
  for (Tensor &t : state)
    run.in(t);
  run.in(grad).in(tensorOf(dtype, {}, {lr}));
  for (const auto &[k, v] : attrs)
    run.attr(k, v);
  ASSERT_EQ(errorOf(run), "");
}

TEST(Ftrl, MatchesKerasFtrl) {
  for (const KerasCase &c : kerasCases())
    for (DType dtype : {DType::F32, DType::F64}) {
      SCOPED_TRACE(std::string(c.name) + " " + dtypeName(dtype));
      // Keras keeps the learning rate in an f32 variable and makes the
      // accumulators from an f32 constant, both cast to the variable's
      // dtype: an f64 variable sees float(0.1) for 0.1.
      const double lr = double(float(c.lr)), accum0 = double(float(c.accum0));
      const Shape shape = {int64_t(kVar.size())};
      std::vector<Tensor> state = {
          tensorOf(dtype, shape, kVar),
          tensorOf(dtype, shape, Values(kVar.size(), accum0)),
          tensorOf(dtype, shape, Values(kVar.size(), 0.0))};
      const auto &want = dtype == DType::F32 ? c.f32 : c.f64;
      // Keras computes accum^-p with pow, TensorFlow's kernel (and this one)
      // with sqrt at p = -0.5: a few ulps apart.
      const double tol = dtype == DType::F32 ? 2e-6 : 1e-13;
      for (size_t t = 0; t < kGrads.size(); ++t) {
        denseStep(state, tensorOf(dtype, shape, kGrads[t]), dtype, lr,
                  ftrlAttrs(c.lrPower, c.l1, c.l2, c.shrinkage, c.beta));
        ASSERT_TRUE(near(state[0], shape, want[t], tol, tol)) << "step " << t;
      }
    }
}

// TensorFlow's ApplyFtrlV2 in float64 (training_ops.cc), with Keras' beta
// folded into l2; `present` limits it to some rows (SparseApplyFtrlV2).
struct Reference {
  Values var, accum, linear;
  void step(const Values &g, double lr, double p, double l1, double l2,
            double shrinkage, double beta, int64_t width,
            const std::set<int64_t> *present = nullptr) {
    const double l2b = l2 + beta / (2 * lr);
    for (size_t i = 0; i < var.size(); ++i) {
      if (present && !present->count(int64_t(i) / width))
        continue;
      const double gs = g[i] + 2 * shrinkage * var[i];
      const double newAccum = accum[i] + g[i] * g[i];
      linear[i] += gs - (std::pow(newAccum, -p) - std::pow(accum[i], -p)) /
                            lr * var[i];
      const double quadratic = std::pow(newAccum, -p) / lr + 2 * l2b;
      const double sign = linear[i] > 0 ? 1 : linear[i] < 0 ? -1 : 0;
      var[i] = std::abs(linear[i]) > l1 ? (sign * l1 - linear[i]) / quadratic
                                         : 0.0;
      accum[i] = newAccum;
    }
  }
};

TEST(Ftrl, DenseAndSparseFollowTensorFlowsFormulas) {
  const Shape shape = {5, 3};
  struct Config {
    double lr, p, l1, l2, shrinkage, beta, wd;
  };
  for (const Config &c : {Config{0.1, -0.5, 0.05, 0.1, 0.02, 0.3, 0.0},
                          Config{0.05, -0.6, 0.0, 0.0, 0.0, 0.0, 0.0},
                          Config{0.2, 0.0, 0.01, 0.0, 0.1, 0.0, 0.0},
                          Config{0.1, -0.5, 0.0, 0.0, 0.0, 0.0, 0.2}})
    for (bool sparse : {false, true}) {
      SCOPED_TRACE(testing::Message() << "lr_power " << c.p << " l1 " << c.l1
                                      << " wd " << c.wd << " sparse "
                                      << sparse);
      Rng rng;
      Reference ref{rng.uniform(15), rng.uniform(15, 0.0, 0.5),
                    rng.uniform(15)};
      std::vector<Tensor> state = {f64(shape, ref.var), f64(shape, ref.accum),
                                   f64(shape, ref.linear)};
      // Rows 1 and 3, row 3 twice (summed first).
      const Values ids = {3, 1, 3};
      const std::set<int64_t> present = {1, 3};
      for (int t = 0; t < 3; ++t) {
        Values rows = rng.uniform(9);
        Values g(15, 0.0);
        for (size_t k = 0; k < ids.size(); ++k)
          for (int j = 0; j < 3; ++j)
            g[size_t(ids[k]) * 3 + j] += rows[k * 3 + size_t(j)];
        if (!sparse) // the dense step takes a gradient on every row
          for (int64_t r : {0, 2, 4})
            for (int j = 0; j < 3; ++j)
              g[size_t(r) * 3 + j] = rng.uniform(1)[0];
        // Keras' decoupled weight decay first, on the elements visited.
        for (size_t i = 0; i < 15; ++i)
          if (!sparse || present.count(int64_t(i) / 3))
            ref.var[i] -= ref.var[i] * c.wd * c.lr;
        ref.step(g, c.lr, c.p, c.l1, c.l2, c.shrinkage, c.beta, 3,
                 sparse ? &present : nullptr);
        KernelRun run(sparse ? "dtf.sparse_apply_ftrl" : "dtf.apply_ftrl");
        for (Tensor &s : state)
          run.in(s);
        if (sparse)
          run.in(f64({}, {c.lr})).in(tensorOf(DType::I64, {3}, ids)).in(
              f64({3, 3}, rows));
        else
          run.in(f64(shape, g)).in(f64({}, {c.lr}));
        for (const auto &[k, v] :
             ftrlAttrs(c.p, c.l1, c.l2, c.shrinkage, c.beta))
          run.attr(k, v);
        if (c.wd > 0)
          run.attr("weight_decay", c.wd);
        run.pool();
        ASSERT_EQ(errorOf(run), "");
        ASSERT_TRUE(near(state[0], shape, ref.var, 1e-12, 1e-12)) << t;
        ASSERT_TRUE(near(state[1], shape, ref.accum, 1e-12, 1e-12)) << t;
        ASSERT_TRUE(near(state[2], shape, ref.linear, 1e-12, 1e-12)) << t;
      }
    }
}

// The sparse update against the dense one on the same gradient (the rows
// of ids, scattered), over three steps of a 6 x 2 table: what the issue's
// "the sparse update gives the dense update's checkpoint bytes" holds for.
struct TableRun {
  std::vector<Tensor> dense, sparse, lazy;
};

TableRun trainTable(const Values &init, double shrinkage) {
  const Shape shape = {6, 2};
  auto fresh = [&] {
    return std::vector<Tensor>{f32(shape, init), f32(shape, Values(12, 0.1)),
                               f32(shape, Values(12, 0.0))};
  };
  TableRun out{fresh(), fresh(), fresh()};
  const std::vector<Values> idsPerStep = {{1, 4, 1}, {4, 5}, {1}};
  Rng rng;
  const AttrMap attrs = ftrlAttrs(-0.5, 0.01, 0.1, shrinkage, 0.0);
  for (const Values &ids : idsPerStep) {
    const int64_t n = int64_t(ids.size());
    Tensor rows = rng.f32({n, 2});
    KernelRun scatter("dtf.gather_grad");
    scatter.in(rows).in(tensorOf(DType::I64, {n}, ids));
    scatter.attr("params_shape", std::vector<int64_t>(shape));
    EXPECT_EQ(errorOf(scatter), "");
    for (int form = 0; form < 3; ++form) {
      std::vector<Tensor> &s =
          form == 0 ? out.dense : form == 1 ? out.sparse : out.lazy;
      KernelRun run(form == 1 ? "dtf.sparse_apply_ftrl" : "dtf.apply_ftrl");
      for (Tensor &t : s)
        run.in(t);
      if (form == 1)
        run.in(f32({}, {0.2})).in(tensorOf(DType::I64, {n}, ids)).in(rows);
      else
        run.in(scatter.out()).in(f32({}, {0.2}));
      for (const auto &[k, v] : attrs)
        run.attr(k, v);
      if (form == 2)
        run.attr("lazy", true); // the ps form of the sparse update
      EXPECT_EQ(errorOf(run), "");
    }
  }
  return out;
}

bool sameBits(const std::vector<Tensor> &a, const std::vector<Tensor> &b) {
  for (size_t k = 0; k < a.size(); ++k)
    if (valuesOf(a[k]) != valuesOf(b[k]))
      return false;
  return true;
}

TEST(Ftrl, SparseGivesTheDenseBitsOnlyForAZeroTableWithoutShrinkage) {
  // A table that starts at zero (a linear model's weights), l2_shrinkage 0:
  // a row no step has looked up is re-derived by the dense update as 0 from
  // its untouched slots, and a row looked up before is re-derived as what it
  // is, so the sparse update (rows 1, 4, 5 only; 0, 2, 3 never) leaves the
  // very same bits in the variable and both slots. The ps form (lazy) too.
  TableRun zero = trainTable(Values(12, 0.0), 0.0);
  EXPECT_TRUE(sameBits(zero.dense, zero.sparse));
  EXPECT_TRUE(sameBits(zero.lazy, zero.sparse));
  EXPECT_NE(valuesOf(zero.sparse[0])[2], 0.0) << "row 1 was trained";

  // A random start: the dense update's first step sets every row whose
  // gradient is zero to 0 (TensorFlow's dense ApplyFtrl does the same); the
  // sparse one leaves rows 0, 2 and 3 at their initial values.
  Rng rng;
  const Values init = rng.uniform(12);
  TableRun random = trainTable(init, 0.0);
  const Values dense = valuesOf(random.dense[0]),
               sparse = valuesOf(random.sparse[0]);
  for (int64_t r : {0, 2, 3})
    for (int j = 0; j < 2; ++j) {
      const size_t i = size_t(r * 2 + j);
      EXPECT_EQ(dense[i], 0.0) << "row " << r;
      EXPECT_EQ(sparse[i], float(init[i])) << "row " << r;
    }
  // Rows 1 and 4, looked up in the first step, agree; row 5, first looked
  // up in step 2, does not: the dense step 1 had set it to 0, and its own
  // update starts from that value.
  for (int64_t r : {1, 4})
    for (int j = 0; j < 2; ++j)
      EXPECT_EQ(dense[size_t(r * 2 + j)], sparse[size_t(r * 2 + j)]);
  EXPECT_NE(dense[10], sparse[10]);
  EXPECT_TRUE(sameBits(random.lazy, random.sparse));

  // l2_shrinkage adds 2 * l2_shrinkage * var to every row's gradient: the
  // dense update moves the linear slot of a row with no gradient (row 1 in
  // step 2) even from a zero start.
  TableRun shrink = trainTable(Values(12, 0.0), 0.05);
  EXPECT_NE(valuesOf(shrink.dense[2])[2], valuesOf(shrink.sparse[2])[2]);
  EXPECT_TRUE(sameBits(shrink.lazy, shrink.sparse));
}

TEST(Ftrl, RefusesHyperparametersOutsideKerasRanges) {
  for (const auto &[attr, value] :
       std::vector<std::pair<const char *, double>>{
           {"lr_power", 0.5}, {"l1", -1.0}, {"l2_shrinkage", -0.1}}) {
    KernelRun run("dtf.apply_ftrl");
    run.in(f32({2}, {1, 2})).in(f32({2}, {0.1, 0.1})).in(f32({2}, {0, 0}));
    run.in(f32({2}, {1, 1})).in(f32({}, {0.1}));
    run.attr(attr, value);
    EXPECT_NE(errorOf(run).find("dtf.apply_ftrl expects lr_power <= 0 and "
                                "l1, l2, l2_shrinkage, beta >= 0"),
              std::string::npos)
        << attr << ": " << errorOf(run);
  }
  KernelRun few("dtf.sparse_apply_ftrl");
  few.in(f32({2, 1}, {1, 2})).in(f32({2, 1}, {0.1, 0.1}));
  EXPECT_EQ(errorOf(few),
            "dtf.sparse_apply_ftrl expects at least 3 inputs, got 2");
}

} // namespace
} // namespace dtf::test
