// The executor: feeds, fetches, aliasing of variables, steady-state
// allocations, and errors at load and at run time.
#include "runtime/exec/Executor.h"
#include "runtime/train/Initializers.h"
#include "runtime/train/Trainer.h"
#include "tests/unit/exec/AllocationCounter.h"
#include "tests/unit/exec/TestPlans.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

namespace dtf::testing {
namespace {

using exec::Executor;
using exec::ExecutorOptions;
using exec::VariableStore;

// A plan's variables, and an executor for one of its programs.
struct Loaded {
  VariableStore variables;
  std::unique_ptr<Executor> executor;
};

Status load(const plan::Plan &p, const plan::Program &program, Loaded *out,
            ThreadPool *pool = nullptr) {
  DTF_RETURN_IF_ERROR(train::initializeVariables(p, 1, &out->variables));
  ExecutorOptions o;
  o.programName = "train_step";
  o.intraOpPool = pool;
  return Executor::create(program, out->variables, train::cpuKernelRegistry(),
                          o, &out->executor);
}

// Fills x with uniform features and y with labels < classes.
void feedBatch(Executor &e, int64_t batch, int64_t features, int classes,
               uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor *x = nullptr, *y = nullptr;
  ASSERT_TRUE(e.prepareFeed(e.findFeed("x"), batch, &x).isOk());
  ASSERT_TRUE(e.prepareFeed(e.findFeed("y"), batch, &y).isOk());
  for (int64_t i = 0; i < batch * features; ++i)
    x->data<float>()[i] = float(rng() % 2001) / 1000.0f - 1.0f;
  for (int64_t i = 0; i < batch; ++i)
    y->data<int32_t>()[i] = int32_t(rng() % uint32_t(classes));
}

TEST(Executor, RunsTheLogisticRegressionStep) {
  plan::Plan p = logisticRegressionPlan();
  Loaded l;
  Status s = load(p, p.train_step(), &l);
  ASSERT_TRUE(s.isOk()) << s.message();
  Executor &e = *l.executor;
  EXPECT_EQ(e.numFeeds(), 2);
  EXPECT_EQ(e.feedInfo(0).name, "x");
  EXPECT_EQ(e.feedInfo(0).dims, (std::vector<int64_t>{-1, 4}));
  ASSERT_EQ(e.numFetches(), 2);
  EXPECT_EQ(e.fetchInfo(0).name, "loss");
  EXPECT_EQ(e.findFetch("accuracy"), 1);
  EXPECT_EQ(e.findFetch("nope"), -1);

  feedBatch(e, 16, 4, 3, 1);
  s = e.run(0);
  ASSERT_TRUE(s.isOk()) << s.message();
  // Zero weights: every class equally likely.
  EXPECT_NEAR(e.fetch(0).data<float>()[0], std::log(3.0f), 1e-5);
  // The update went to the variables, in place.
  const Tensor *W = l.variables.find("W");
  ASSERT_NE(W, nullptr);
  double norm = 0;
  for (int i = 0; i < 12; ++i)
    norm += std::fabs(W->data<float>()[i]);
  EXPECT_GT(norm, 0.0);
  EXPECT_EQ(W->bufferUseCount(), 1) << "read_variable must not copy";
}

// The kernels reuse their output buffers and the executor's own work
// allocates nothing: after the first steps, a step makes no tensor buffer.
TEST(Executor, SteadyStateStepsAllocateNoTensors) {
  plan::Plan p = logisticRegressionPlan();
  Loaded l;
  ASSERT_TRUE(load(p, p.train_step(), &l).isOk());
  Executor &e = *l.executor;
  feedBatch(e, 32, 4, 3, 2);
  for (int step = 0; step < 2; ++step)
    ASSERT_TRUE(e.run(step).isOk());
  const uint64_t tensorsBefore = alignedAllocCount();
  const uint64_t newsBefore = operatorNewCount();
  for (int step = 2; step < 10; ++step) {
    feedBatch(e, 32, 4, 3, 3 + step);
    Status s = e.run(step);
    ASSERT_TRUE(s.isOk()) << s.message();
  }
  EXPECT_EQ(alignedAllocCount() - tensorsBefore, 0u)
      << "tensor buffers allocated in steady state";
  // Kernels build small shape vectors; this is informational.
  std::printf("[ info ] %.1f operator new per step (kernels' shape vectors)\n",
              double(operatorNewCount() - newsBefore) / 8);
}

// x [-1, 6] -> relu -> reshape [-1, 2, 3]: with `parts`, each of the three
// fetched; else the reshape's sum.
plan::Plan reluReshapePlan(bool parts) {
  plan::Plan p;
  p.set_format_version(1);
  ProgramBuilder g(p.mutable_train_step());
  int x = g.input("x", plan::F32, {-1, 6});
  int r = g.compute("dtf.relu", {x}, plan::F32, {-1, 6});
  int v = g.compute("dtf.reshape", {r}, plan::F32, {-1, 2, 3});
  if (parts) {
    g.fetch("relu", r);
    g.fetch("reshape", v);
    g.fetch("x", x);
  } else {
    g.fetch("sum", g.compute("dtf.sum", {v}, plan::F32, {}));
  }
  return p;
}

// Feeds 4 rows of reluReshapePlan's x: value i is i % 5 - 1.
void feedCycles(Executor &e) {
  Tensor *t = nullptr;
  ASSERT_TRUE(e.prepareFeed(0, 4, &t).isOk());
  for (int i = 0; i < 24; ++i)
    t->data<float>()[i] = float(i % 5) - 1.0f;
}

// A reshape aliases its input's buffer; the executor lets the alias go
// before the next step so the producer can reuse its buffer.
TEST(Executor, AliasingOutputsDoNotForceNewBuffers) {
  plan::Plan p = reluReshapePlan(false);
  Loaded l;
  Status st = load(p, p.train_step(), &l);
  ASSERT_TRUE(st.isOk()) << st.message();
  Executor &e = *l.executor;
  feedCycles(e);
  for (int step = 0; step < 3; ++step)
    ASSERT_TRUE(e.run(step).isOk());
  const uint64_t before = alignedAllocCount();
  for (int step = 3; step < 10; ++step)
    ASSERT_TRUE(e.run(step).isOk());
  EXPECT_EQ(alignedAllocCount() - before, 0u);
  // i % 5 - 1 for i < 24: four cycles summing to 6 after relu, then 0+1+2.
  EXPECT_FLOAT_EQ(e.fetch(0).data<float>()[0], 27.0f);
}

// A fetch that a CPU kernel makes can be given a buffer (a worker's push
// region): the kernel writes it there from the next step on. One that an
// input, or an op that shares its input's buffer, holds cannot.
TEST(Executor, AFetchMadeByAKernelIsMadeWhereItIsPlaced) {
  plan::Plan p = reluReshapePlan(true);
  Loaded l;
  Status st = load(p, p.train_step(), &l);
  ASSERT_TRUE(st.isOk()) << st.message();
  Executor &e = *l.executor;
  feedCycles(e);
  ASSERT_TRUE(e.run(0).isOk());
  const int relu = e.findFetch("relu");
  const void *before = e.fetch(relu).rawData();
  // Not its shape, or a view (no buffer of its own): refused.
  EXPECT_FALSE(e.placeFetch(relu, Tensor::allocate(DType::F32, {4, 5})));
  float outside[24];
  EXPECT_FALSE(e.placeFetch(relu, Tensor::view(DType::F32, {4, 6}, outside)));
  EXPECT_FALSE(e.placeFetch(e.findFetch("x"),
                            Tensor::allocate(DType::F32, {4, 6})));
  EXPECT_FALSE(e.placeFetch(e.findFetch("reshape"),
                            Tensor::allocate(DType::F32, {4, 2, 3})));
  EXPECT_FALSE(e.placeFetch(e.numFetches(), Tensor::allocate(DType::F32, {})));
  EXPECT_EQ(e.fetch(relu).rawData(), before);

  Tensor buffer = Tensor::allocate(DType::F32, {4, 6});
  std::memset(buffer.rawData(), 0xff, buffer.byteSize()); // NaN
  const void *placed = buffer.rawData();
  ASSERT_TRUE(e.placeFetch(relu, std::move(buffer)));
  for (int step = 1; step < 3; ++step) {
    ASSERT_TRUE(e.run(step).isOk());
    ASSERT_EQ(e.fetch(relu).rawData(), placed) << "step " << step;
    for (int i = 0; i < 24; ++i)
      ASSERT_EQ(e.fetch(relu).data<float>()[i],
                std::max(0.0f, float(i % 5) - 1.0f))
          << i;
  }
}

// Inputs, constants, variable reads and assign_add are the executor's own:
// a step of only those allocates nothing at all.
TEST(Executor, OwnOpsAllocateNothing) {
  plan::Plan p;
  p.set_format_version(1);
  addVariable(&p, "global_step", plan::I64, {}, "zeros", "global_step");
  addVariable(&p, "acc", plan::F32, {3}, "ones");
  ProgramBuilder g(p.mutable_train_step());
  int x = g.input("x", plan::F32, {3});
  int step = g.readVariable("global_step", plan::I64, {});
  int acc = g.readVariable("acc", plan::F32, {3});
  int one = g.constantI64({}, {1});
  g.op("dtf.assign_add", {step, one}, {});
  g.op("dtf.assign_add", {acc, x}, {});
  g.fetch("step", step);
  g.fetch("acc", acc);
  Loaded l;
  Status s = load(p, p.train_step(), &l);
  ASSERT_TRUE(s.isOk()) << s.message();
  Executor &e = *l.executor;
  EXPECT_EQ(e.numRunOps(), 2);
  Tensor *t = nullptr;
  ASSERT_TRUE(e.prepareFeed(0, 0, &t).isOk());
  t->data<float>()[0] = 1;
  t->data<float>()[1] = 2;
  t->data<float>()[2] = 3;
  ASSERT_TRUE(e.run(0).isOk());
  const uint64_t news = operatorNewCount(), tensors = alignedAllocCount();
  for (int i = 1; i < 10; ++i) {
    ASSERT_TRUE(e.prepareFeed(0, 0, &t).isOk());
    ASSERT_TRUE(e.run(i).isOk());
  }
  EXPECT_EQ(operatorNewCount() - news, 0u);
  EXPECT_EQ(alignedAllocCount() - tensors, 0u);
  EXPECT_EQ(e.fetch(0).data<int64_t>()[0], 10);
  EXPECT_FLOAT_EQ(e.fetch(1).data<float>()[2], 1 + 10 * 3.0f);
  EXPECT_EQ(l.variables.find("global_step")->data<int64_t>()[0], 10);
}

TEST(Executor, FeedOfTheWrongShapeIsAnError) {
  plan::Plan p = logisticRegressionPlan();
  Loaded l;
  ASSERT_TRUE(load(p, p.train_step(), &l).isOk());
  Executor &e = *l.executor;
  Status s = e.setFeed(e.findFeed("x"), Tensor::zeros(DType::F32, {8, 5}));
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("feed 'x' expects f32[B,4]"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("got f32[8,5]"), std::string::npos);
  s = e.setFeed(e.findFeed("y"), Tensor::zeros(DType::F32, {8}));
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("expects i32[B]"), std::string::npos)
      << s.message();
  // Any batch size is fine.
  EXPECT_TRUE(
      e.setFeed(e.findFeed("x"), Tensor::zeros(DType::F32, {3, 4})).isOk());
}

TEST(Executor, MissingFeedIsAnError) {
  plan::Plan p = logisticRegressionPlan();
  Loaded l;
  ASSERT_TRUE(load(p, p.train_step(), &l).isOk());
  ASSERT_TRUE(l.executor->setFeed(0, Tensor::zeros(DType::F32, {2, 4})).isOk());
  Status s = l.executor->run(0);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("feed 'y' was not given"), std::string::npos)
      << s.message();
}

TEST(Executor, KernelErrorsNameTheOpAndItsLocation) {
  plan::Plan p = logisticRegressionPlan();
  Loaded l;
  ASSERT_TRUE(load(p, p.train_step(), &l).isOk());
  Executor &e = *l.executor;
  feedBatch(e, 4, 4, 3, 1);
  Tensor *y = nullptr;
  ASSERT_TRUE(e.prepareFeed(e.findFeed("y"), 4, &y).isOk());
  y->data<int32_t>()[2] = 7; // only 3 classes
  Status s = e.run(0);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message().rfind(std::string(kXentLocation) + ": ", 0), 0u)
      << s.message();
  EXPECT_NE(s.message().find("dtf.sparse_softmax_cross_entropy"),
            std::string::npos)
      << s.message();
}

TEST(Executor, MismatchedBatchesAcrossFeedsReachTheKernel) {
  plan::Plan p = logisticRegressionPlan();
  Loaded l;
  ASSERT_TRUE(load(p, p.train_step(), &l).isOk());
  Executor &e = *l.executor;
  ASSERT_TRUE(e.setFeed(0, Tensor::zeros(DType::F32, {4, 4})).isOk());
  ASSERT_TRUE(e.setFeed(1, Tensor::zeros(DType::I32, {5})).isOk());
  Status s = e.run(0);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message().rfind(kXentLocation, 0), 0u) << s.message();
}

TEST(Executor, OpWithoutKernelFailsAtLoadWithItsLocation) {
  plan::Plan p = logisticRegressionPlan();
  plan::Program *t = p.mutable_train_step();
  // Make the loss's mean an op of the dialect that no CPU kernel implements
  // (dtf-autodiff replaces every dtf.if_training before a plan is written).
  for (plan::Op &op : *t->mutable_ops())
    if (op.name() == "dtf.mean") {
      op.set_name("dtf.if_training");
      op.add_inputs(op.inputs(0));
      op.set_location("lr.dtf:8:12");
      break;
    }
  Loaded l;
  Status s = load(p, p.train_step(), &l);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("no CPU kernel"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("lr.dtf:8:12: dtf.if_training"), std::string::npos)
      << s.message();
}

TEST(Executor, ReadOfAMissingOrMistypedVariableFailsAtLoad) {
  plan::Plan p = logisticRegressionPlan();
  VariableStore vars;
  ASSERT_TRUE(vars.add("W", Tensor::zeros(DType::F32, {4, 3})).isOk());
  std::unique_ptr<Executor> e;
  Status s = Executor::create(p.train_step(), vars, train::cpuKernelRegistry(),
                              {}, &e);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("variable 'b' does not exist"), std::string::npos)
      << s.message();
  ASSERT_TRUE(vars.add("b", Tensor::zeros(DType::F32, {4})).isOk());
  s = Executor::create(p.train_step(), vars, train::cpuKernelRegistry(), {},
                       &e);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("variable 'b' is f32[4], but the plan reads it "
                             "as f32[3]"),
            std::string::npos)
      << s.message();
}

TEST(Executor, KernelResultThatContradictsThePlanIsAnError) {
  plan::Plan p;
  p.set_format_version(1);
  ProgramBuilder g(p.mutable_train_step());
  int x = g.input("x", plan::F32, {-1, 4});
  // The plan claims the sum keeps two dims; the kernel reduces to a scalar.
  int s = g.compute("dtf.sum", {x}, plan::F32, {-1, 1});
  g.fetch("s", s);
  Loaded l;
  ASSERT_TRUE(load(p, p.train_step(), &l).isOk());
  ASSERT_TRUE(l.executor->setFeed(0, Tensor::zeros(DType::F32, {2, 4})).isOk());
  Status st = l.executor->run(0);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("test.dtf:2:1: dtf.sum: the kernel made f32[]"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("declares as f32[B,1]"), std::string::npos);
}

TEST(Executor, AttributesAreConvertedAndDerived) {
  plan::AttrValue a;
  AttrValue out;
  a.set_i(7);
  ASSERT_TRUE(exec::toKernelAttr(a, &out).isOk());
  EXPECT_EQ(std::get<int64_t>(out), 7);
  a.set_f(0.5);
  ASSERT_TRUE(exec::toKernelAttr(a, &out).isOk());
  EXPECT_EQ(std::get<double>(out), 0.5);
  a.set_b(true);
  ASSERT_TRUE(exec::toKernelAttr(a, &out).isOk());
  EXPECT_EQ(std::get<bool>(out), true);
  a.set_s("same");
  ASSERT_TRUE(exec::toKernelAttr(a, &out).isOk());
  EXPECT_EQ(std::get<std::string>(out), "same");
  a.mutable_ints()->add_values(2);
  a.mutable_ints()->add_values(3);
  ASSERT_TRUE(exec::toKernelAttr(a, &out).isOk());
  EXPECT_EQ(std::get<std::vector<int64_t>>(out), (std::vector<int64_t>{2, 3}));
  a.mutable_floats()->add_values(0.25);
  ASSERT_TRUE(exec::toKernelAttr(a, &out).isOk());
  EXPECT_EQ(std::get<std::vector<double>>(out), (std::vector<double>{0.25}));
  a.mutable_tensor();
  EXPECT_FALSE(exec::toKernelAttr(a, &out).isOk());

  // reshape without out_shape and cast without out_dtype take them from the
  // declared result type.
  plan::Plan p;
  p.set_format_version(1);
  ProgramBuilder g(p.mutable_train_step());
  int x = g.input("x", plan::F32, {-1, 6});
  int r = g.compute("dtf.reshape", {x}, plan::F32, {-1, 3, 2});
  int c = g.compute("dtf.cast", {r}, plan::I32, {-1, 3, 2});
  g.fetch("c", c);
  Loaded l;
  Status s = load(p, p.train_step(), &l);
  ASSERT_TRUE(s.isOk()) << s.message();
  Tensor in = Tensor::zeros(DType::F32, {2, 6});
  in.data<float>()[5] = 3.7f;
  ASSERT_TRUE(l.executor->setFeed(0, in).isOk());
  s = l.executor->run(0);
  ASSERT_TRUE(s.isOk()) << s.message();
  const Tensor &out2 = l.executor->fetch(0);
  EXPECT_EQ(out2.describe(), "i32[2,3,2]");
  EXPECT_EQ(out2.data<int32_t>()[5], 3);
}

TEST(Executor, ProfileTimesEveryOp) {
  plan::Plan p = logisticRegressionPlan();
  VariableStore vars;
  ASSERT_TRUE(train::initializeVariables(p, 1, &vars).isOk());
  ExecutorOptions o;
  o.profile = true;
  std::unique_ptr<Executor> e;
  ASSERT_TRUE(
      Executor::create(p.train_step(), vars, train::cpuKernelRegistry(), o, &e)
          .isOk());
  feedBatch(*e, 8, 4, 3, 1);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(e->run(i).isOk());
  std::vector<exec::OpProfile> prof = e->profile();
  ASSERT_EQ(int(prof.size()), e->numRunOps());
  for (const exec::OpProfile &op : prof) {
    EXPECT_EQ(op.calls, 3u);
    EXPECT_GE(op.seconds, 0.0);
  }
  EXPECT_EQ(prof[0].where, "test.dtf:5:1: dtf.matmul");
  std::string report = train::profileReport(prof, 3);
  EXPECT_NE(report.find("profile: train_step, 3 steps"), std::string::npos)
      << report;
  EXPECT_NE(report.find("dtf.apply_sgd"), std::string::npos);
}

TEST(Executor, WorksWithAnIntraOpPool) {
  ThreadPool pool(2);
  LogisticRegressionOptions o;
  o.features = 64;
  o.classes = 10;
  plan::Plan p = logisticRegressionPlan(o);
  Loaded l;
  Status s = load(p, p.train_step(), &l, &pool);
  ASSERT_TRUE(s.isOk()) << s.message();
  feedBatch(*l.executor, 128, 64, 10, 5);
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(l.executor->run(i).isOk());
  EXPECT_TRUE(std::isfinite(l.executor->fetch(0).data<float>()[0]));
}

} // namespace
} // namespace dtf::testing
