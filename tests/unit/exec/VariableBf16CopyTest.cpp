// Mixed precision through the executor: a weight (or a value) read by
// several bf16 products in one step is cast to bf16 once per version (once
// per step, and again after each in-place update), and every product sees
// the rounding of the weight's current value, never a stale copy.
#include "runtime/core/Bf16.h"
#include "runtime/exec/Executor.h"
#include "runtime/kernels/cpu/OneDnn.h"
#include "runtime/train/Initializers.h"
#include "runtime/train/Trainer.h"
#include "tests/unit/exec/TestPlans.h"

#include <gtest/gtest.h>

#include <cmath>

namespace dtf::testing {
namespace {

constexpr int64_t kBatch = 3, kIn = 4, kOut = 5;

// x [B, 4] times W [4, 5] as the float64 sum of the bf16-rounded operands.
double roundedProduct(const float *x, const float *w, int64_t row,
                      int64_t col) {
  double acc = 0;
  for (int64_t k = 0; k < kIn; ++k)
    acc += double(f32FromBf16(bf16FromF32(x[row * kIn + k]))) *
           double(f32FromBf16(bf16FromF32(w[k * kOut + col])));
  return acc;
}

// Per step: y1 = x W and y2 = (x W) W^T read W as the forward and the input
// gradient of a dense layer do; apply_sgd then updates W in place; y3 = x W
// reads the updated W. Every product computes in bf16.
TEST(VariableBf16Copy, OneCastPerVersionSharedByTheProductsOfAStep) {
  plan::Plan p;
  p.set_format_version(1);
  addVariable(&p, "W", plan::F32, {kIn, kOut}, "glorot_uniform");
  ProgramBuilder g(p.mutable_train_step());
  const int x = g.input("x", plan::F32, {-1, kIn});
  const int w = g.readVariable("W", plan::F32, {kIn, kOut});
  const int y1 = g.value(plan::F32, {-1, kOut});
  setAttr(g.op("dtf.matmul", {x, w}, {y1}), "compute_dtype", "bf16");
  const int y2 = g.value(plan::F32, {-1, kIn});
  plan::Op *back = g.op("dtf.matmul", {y1, w}, {y2});
  setAttr(back, "compute_dtype", "bf16");
  setAttr(back, "transpose_b", true);
  const int grad = g.constantF32({kIn, kOut}, std::vector<float>(kIn * kOut, 0.37f));
  const int lr = g.constantF32({}, {1.0f});
  g.op("dtf.apply_sgd", {w, grad, lr}, {});
  const int y3 = g.value(plan::F32, {-1, kOut});
  setAttr(g.op("dtf.matmul", {x, w}, {y3}), "compute_dtype", "bf16");
  g.fetch("y1", y1);
  g.fetch("y2", y2);
  g.fetch("y3", y3);

  exec::VariableStore variables;
  ASSERT_TRUE(train::initializeVariables(p, 1, &variables).isOk());
  std::unique_ptr<exec::Executor> e;
  exec::ExecutorOptions o;
  o.programName = "train_step";
  Status s = exec::Executor::create(p.train_step(), variables,
                                    train::cpuKernelRegistry(), o, &e);
  ASSERT_TRUE(s.isOk()) << s.message();
  Tensor *xt = nullptr;
  ASSERT_TRUE(e->prepareFeed(0, kBatch, &xt).isOk());
  for (int64_t i = 0; i < kBatch * kIn; ++i)
    xt->data<float>()[i] = 0.1f * float(i % 7) - 0.3f;
  const Tensor *wt = variables.find("W");
  ASSERT_NE(wt, nullptr);

  for (int step = 0; step < 3; ++step) {
    std::vector<float> before(wt->data<float>(),
                              wt->data<float>() + kIn * kOut);
    const cpu::VariableBf16Counts c0 = cpu::variableBf16Counts();
    s = e->run(uint64_t(step));
    ASSERT_TRUE(s.isOk()) << s.message();
    const cpu::VariableBf16Counts c1 = cpu::variableBf16Counts();
    // y1 casts W, y2 reuses that copy (and casts y1, a value made this
    // step), the update makes a new version of W and y3 casts it: three
    // casts and one reuse, where each of the four uses of W cast before.
    // (The feed x has none: only values that ops make have one.)
    EXPECT_EQ(c1.made - c0.made, 3u) << "step " << step;
    EXPECT_EQ(c1.reused - c0.reused, 1u) << "step " << step;
    const float *after = wt->data<float>();
    EXPECT_FLOAT_EQ(after[0], before[0] - 0.37f);
    const float *xs = xt->data<float>();
    for (int64_t r = 0; r < kBatch; ++r)
      for (int64_t c = 0; c < kOut; ++c) {
        EXPECT_NEAR(e->fetch(0).data<float>()[r * kOut + c],
                    roundedProduct(xs, before.data(), r, c), 1e-5)
            << "y1 step " << step;
        // A stale copy (W before the update) would be off by about 0.37 per
        // unit of the row's sum.
        EXPECT_NEAR(e->fetch(2).data<float>()[r * kOut + c],
                    roundedProduct(xs, after, r, c), 1e-5)
            << "y3 step " << step;
      }
  }
}

} // namespace
} // namespace dtf::testing
