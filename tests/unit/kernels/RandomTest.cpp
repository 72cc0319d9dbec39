// dropout and dropout_grad: the rate, the scale, reproducible masks.
#include "KernelTestUtil.h"

#include <algorithm>

namespace dtf::test {
namespace {

const Shape kShape = {200, 500};

Tensor runDropout(const char *op, const Tensor &x, double rate, uint64_t step,
                  uint64_t seed, std::optional<int64_t> opSeed,
                  bool pool = false) {
  KernelRun run(op);
  run.attr("rate", rate).step(step, seed).in(x);
  if (opSeed)
    run.attr("seed", *opSeed);
  if (pool)
    run.pool();
  EXPECT_EQ(errorOf(run), "");
  return run.out();
}

TEST(Dropout, DropsAtTheRateAndScalesTheRest) {
  Tensor ones = f32(kShape, Values(numElementsOf(kShape), 1.0));
  for (double rate : {0.1, 0.3, 0.5, 0.9}) {
    Values y = valuesOf(runDropout("dtf.dropout", ones, rate, 3, 11, 5));
    int64_t dropped = 0, bothKept = 0;
    const float scale = float(1.0 / (1.0 - rate));
    for (size_t i = 0; i < y.size(); ++i) {
      if (y[i] == 0)
        ++dropped;
      else
        ASSERT_EQ(y[i], scale) << "rate " << rate << " at " << i;
      if (i + 1 < y.size() && y[i] != 0 && y[i + 1] != 0)
        ++bothKept;
    }
    const double n = double(y.size());
    EXPECT_NEAR(dropped / n, rate, 0.01) << "rate " << rate;
    // Neighbouring elements are independent.
    EXPECT_NEAR(bothKept / (n - 1), (1 - rate) * (1 - rate), 0.01)
        << "rate " << rate;
  }
}

TEST(Dropout, MasksDependOnSeedsAndStepOnly) {
  Rng rng;
  Tensor x = rng.f32(kShape, 0.5, 1.5);
  Values base = valuesOf(runDropout("dtf.dropout", x, 0.5, 7, 1, 3));
  EXPECT_EQ(valuesOf(runDropout("dtf.dropout", x, 0.5, 7, 1, 3, /*pool=*/true)),
            base)
      << "threads must not change the mask";
  auto differences = [&](const Values &other) {
    int64_t d = 0;
    for (size_t i = 0; i < base.size(); ++i)
      d += (base[i] == 0) != (other[i] == 0);
    return d;
  };
  const int64_t n = numElementsOf(kShape);
  // Another step, op seed or run seed: a different mask (half the elements
  // differ).
  for (Values other :
       {valuesOf(runDropout("dtf.dropout", x, 0.5, 8, 1, 3)),
        valuesOf(runDropout("dtf.dropout", x, 0.5, 7, 1, 4)),
        valuesOf(runDropout("dtf.dropout", x, 0.5, 7, 2, 3)),
        valuesOf(runDropout("dtf.dropout", x, 0.5, 7, 1, std::nullopt))})
    EXPECT_NEAR(double(differences(other)) / n, 0.5, 0.02);
}

TEST(Dropout, GradRecomputesTheForwardMask) {
  Rng rng;
  Tensor x = rng.f32(kShape, 0.5, 1.5), dy = rng.f32(kShape);
  Values y = valuesOf(runDropout("dtf.dropout", x, 0.4, 12, 99, 6));
  Values dx = valuesOf(runDropout("dtf.dropout_grad", dy, 0.4, 12, 99, 6));
  Values dyv = valuesOf(dy);
  const double scale = double(float(1.0 / 0.6));
  for (size_t i = 0; i < y.size(); ++i) {
    if (y[i] == 0)
      ASSERT_EQ(dx[i], 0.0) << i;
    else
      ASSERT_NEAR(dx[i], dyv[i] * scale, 1e-6) << i;
  }
}

TEST(Dropout, RateZeroIsIdentityAndRateOneIsAnError) {
  Rng rng;
  Tensor x = rng.f32({3, 5, 7});
  EXPECT_EQ(valuesOf(runDropout("dtf.dropout", x, 0.0, 0, 0, std::nullopt)),
            valuesOf(x));
  KernelRun one("dtf.dropout");
  one.attr("rate", 1.0).in(x);
  EXPECT_EQ(errorOf(one), "dtf.dropout expects a rate in [0, 1), got 1");
  KernelRun none("dtf.dropout_grad");
  none.in(x);
  EXPECT_EQ(errorOf(none), "dtf.dropout_grad needs the rate attribute");
}

// Towers: each tower's share of a batch draws the masks its examples get in
// one step of the whole batch, also for a tensor with several rows per
// example (an attention's [B * H, T, T]) and for an uneven split.
TEST(Dropout, ATowersShareDrawsItsExamplesMasksOfTheWholeBatch) {
  Rng rng;
  for (const Shape &perExample : {Shape{6}, Shape{3, 4, 4}}) {
    const int64_t batch = 7, rowsPer = perExample[0];
    int64_t inner = 1;
    for (size_t d = 1; d < perExample.size(); ++d)
      inner *= perExample[d];
    Shape whole = perExample;
    whole[0] = batch * rowsPer;
    Values xv = rng.uniform(numElementsOf(whole), 0.5, 1.5);
    KernelRun all("dtf.dropout");
    all.attr("rate", 0.5).step(3, 11).in(test::f32(whole, xv));
    ASSERT_EQ(errorOf(all), "");
    const Values want = valuesOf(all.out());
    Values got;
    for (auto [first, rows] : {std::pair<int64_t, int64_t>{0, 3}, {3, 4}}) {
      Shape part = whole;
      part[0] = rows * rowsPer;
      const int64_t from = first * rowsPer * inner, n = rows * rowsPer * inner;
      KernelRun tower("dtf.dropout");
      tower.attr("rate", 0.5)
          .step(3, 11)
          .in(test::f32(part,
                        Values(xv.begin() + from, xv.begin() + from + n)));
      tower.ctx().setBatchOffset(first, rows);
      ASSERT_EQ(errorOf(tower), "");
      const Values v = valuesOf(tower.out());
      got.insert(got.end(), v.begin(), v.end());
    }
    EXPECT_EQ(got, want) << ::testing::PrintToString(perExample);
    // Not vacuous: the mask dropped some elements and kept some.
    EXPECT_GT(std::count(want.begin(), want.end(), 0.0), 0);
    EXPECT_LT(std::count(want.begin(), want.end(), 0.0), int64_t(want.size()));
  }
}

} // namespace
} // namespace dtf::test
