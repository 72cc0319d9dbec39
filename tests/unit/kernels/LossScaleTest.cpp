// mixed_float16's dynamic loss scale (TensorFlow's LossScaleOptimizer): the
// schedule step by step (overflow: skip and halve, never below 1; N finite
// steps: double, unless the double overflows; the count restarting), and
// the gradients' unscaling and finiteness check, f32 and f64.
#include "KernelTestUtil.h"

#include <cmath>
#include <limits>

namespace dtf::test {
namespace {

// The scale and count variables, updated in place by adjust_loss_scale
// the way the executor hands them over (inputs 0 and 1, written in place).
struct Schedule {
  float scale;
  int64_t count = 0;
  int64_t growth;

  // One step with `finite`; returns the kernel's error ("" when none).
  std::string step(bool finite) {
    KernelRun run("dtf.adjust_loss_scale");
    run.attr("growth_steps", growth)
        .in(f32({}, {scale}))
        .in(tensorOf(DType::I64, {}, {double(count)}))
        .in(tensorOf(DType::Bool, {}, {finite ? 1.0 : 0.0}));
    const std::string error = errorOf(run);
    scale = run.input(0).data<float>()[0];
    count = run.input(1).data<int64_t>()[0];
    return error;
  }
};

TEST(LossScale, OverflowHalvesAndRestartsTheCount) {
  Schedule s{32768.0f, 0, 2000};
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(s.step(true), "");
  EXPECT_EQ(s.count, 5);
  ASSERT_EQ(s.step(false), "");
  EXPECT_EQ(s.scale, 16384.0f);
  EXPECT_EQ(s.count, 0);
  ASSERT_EQ(s.step(false), "");
  EXPECT_EQ(s.scale, 8192.0f);
}

TEST(LossScale, HalvingStopsAtOne) {
  Schedule s{3.0f, 0, 2000};
  ASSERT_EQ(s.step(false), "");
  EXPECT_EQ(s.scale, 1.5f);
  ASSERT_EQ(s.step(false), "");
  EXPECT_EQ(s.scale, 1.0f);
  ASSERT_EQ(s.step(false), "");
  EXPECT_EQ(s.scale, 1.0f);
}

TEST(LossScale, GrowthStepsFiniteStepsInARowDoubleIt) {
  // TensorFlow's default interval, 2000 steps, and a short one.
  for (int64_t growth : {int64_t(2000), int64_t(3)}) {
    SCOPED_TRACE(growth);
    Schedule s{32768.0f, 0, growth};
    for (int64_t i = 1; i < growth; ++i)
      ASSERT_EQ(s.step(true), "");
    EXPECT_EQ(s.scale, 32768.0f);
    EXPECT_EQ(s.count, growth - 1);
    ASSERT_EQ(s.step(true), "");
    EXPECT_EQ(s.scale, 65536.0f);
    EXPECT_EQ(s.count, 0);
    // An overflow in the middle of the next run starts the count again.
    for (int64_t i = 1; i < growth; ++i)
      ASSERT_EQ(s.step(true), "");
    ASSERT_EQ(s.step(false), "");
    EXPECT_EQ(s.scale, 32768.0f);
    for (int64_t i = 1; i < growth; ++i)
      ASSERT_EQ(s.step(true), "");
    EXPECT_EQ(s.scale, 32768.0f);
    ASSERT_EQ(s.step(true), "");
    EXPECT_EQ(s.scale, 65536.0f);
  }
}

TEST(LossScale, ADoubleThatOverflowsKeepsTheScale) {
  Schedule s{std::numeric_limits<float>::max(), 0, 1};
  ASSERT_EQ(s.step(true), "");
  EXPECT_EQ(s.scale, std::numeric_limits<float>::max());
  EXPECT_EQ(s.count, 0);
}

TEST(LossScale, AdjustRefusesBadOperands) {
  Schedule zero{1.0f, 0, 0};
  EXPECT_EQ(zero.step(true),
            "dtf.adjust_loss_scale expects growth_steps >= 1, got 0");
  KernelRun f64Scale("dtf.adjust_loss_scale");
  f64Scale.attr("growth_steps", int64_t(5))
      .in(f64({}, {2.0}))
      .in(tensorOf(DType::I64, {}, {0}))
      .in(tensorOf(DType::Bool, {}, {1}));
  EXPECT_NE(errorOf(f64Scale).find("expects the scale as a f32 scalar"),
            std::string::npos)
      << errorOf(f64Scale);
}

TEST(LossScale, UnscaleDividesAndSaysWhetherAllAreFinite) {
  KernelRun run("dtf.unscale_gradients");
  run.in(f32({2, 2}, {1024, -2048, 0.5, 0}))
      .in(f64({3}, {4096, 1e-3, -8}))
      .in(f32({}, {1024}));
  ASSERT_EQ(errorOf(run), "");
  EXPECT_EQ(run.out(0).data<bool>()[0], true);
  EXPECT_TRUE(equal(run.out(1), {2, 2}, {1, -2, 0.5 / 1024, 0}));
  EXPECT_TRUE(near(run.out(2), {3}, {4, 1e-3 / 1024, -8.0 / 1024}, 0, 1e-15));
  // Any inf or NaN, in any gradient, anywhere (the parallel tail too).
  for (double bad : {double(INFINITY), -double(INFINITY), double(NAN)}) {
    Values big(100001, 1.0);
    big[100000] = bad;
    KernelRun r("dtf.unscale_gradients");
    r.pool().in(f32({2}, {1, 2})).in(f32({100001}, big)).in(f32({}, {2}));
    ASSERT_EQ(errorOf(r), "");
    EXPECT_EQ(r.out(0).data<bool>()[0], false) << bad;
  }
  KernelRun zero("dtf.unscale_gradients");
  zero.in(f32({1}, {1})).in(f32({}, {0}));
  EXPECT_NE(errorOf(zero).find("expects a positive finite scale, got 0"),
            std::string::npos);
}

} // namespace
} // namespace dtf::test
