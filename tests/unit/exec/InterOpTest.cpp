// Inter-op parallelism and the session's placement options in the executor:
// concurrent steps compute what sequential ones do, bit for bit; updates and
// reads of a variable keep their order; an error stops the step; steady
// state allocates nothing; log_device_placement and soft placement.
#include "runtime/core/ThreadPool.h"
#include "runtime/exec/Executor.h"
#include "runtime/train/Initializers.h"
#include "runtime/train/Trainer.h"
#include "tests/unit/exec/AllocationCounter.h"
#include "tests/unit/exec/TestPlans.h"
#include "schema/PlanSeal.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace dtf::testing {
namespace {

using exec::Executor;
using exec::ExecutorOptions;
using exec::VariableStore;

struct Loaded {
  VariableStore variables;
  std::unique_ptr<Executor> executor;
};

Status load(const plan::Plan &p, Loaded *out, ExecutorOptions o = {}) {
  DTF_RETURN_IF_ERROR(train::initializeVariables(p, 1, &out->variables));
  o.programName = "train_step";
  return Executor::create(p.train_step(), out->variables,
                          train::cpuKernelRegistry(), o, &out->executor);
}

ExecutorOptions withPool(ThreadPool *pool) {
  ExecutorOptions o;
  o.interOpPool = pool;
  return o;
}

// Fills every f32 feed with values in [-1, 1) and every integer feed with
// labels below `classes`, the same for the same seed.
void feedAll(Executor &e, int64_t batch, int classes, uint32_t seed) {
  std::mt19937 rng(seed);
  for (int i = 0; i < e.numFeeds(); ++i) {
    Tensor *t = nullptr;
    ASSERT_TRUE(e.prepareFeed(i, batch, &t).isOk());
    for (int64_t k = 0; k < t->numElements(); ++k) {
      if (t->dtype() == DType::F32)
        t->data<float>()[k] = float(rng() % 2001) / 1000.0f - 1.0f;
      else if (t->dtype() == DType::I32)
        t->data<int32_t>()[k] = int32_t(rng() % uint32_t(classes));
      else if (t->dtype() == DType::I64)
        t->data<int64_t>()[k] = int64_t(rng() % uint32_t(classes));
    }
  }
}

bool sameBits(const Tensor &a, const Tensor &b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.rawData(), b.rawData(),
                     size_t(a.numElements()) * dtypeSize(a.dtype())) == 0;
}

// Runs `steps` steps of `p` sequentially and with a 2-thread (or `threads`)
// inter-op pool on the same feeds, and expects every fetch of every step and
// every variable at the end to be bit-identical.
// With `intraOp`, both use it too: a kernel on an inter-op worker thread runs
// its parallel-for inline, in one chunk, and must compute the same bits.
void expectSameAsSequential(const plan::Plan &p, int64_t batch, int classes,
                            int steps, int threads = 2,
                            ThreadPool *intraOp = nullptr) {
  ThreadPool pool(threads);
  Loaded seq, par;
  ExecutorOptions so, po = withPool(&pool);
  so.intraOpPool = po.intraOpPool = intraOp;
  Status s = load(p, &seq, so);
  ASSERT_TRUE(s.isOk()) << s.message();
  s = load(p, &par, po);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_FALSE(seq.executor->runsConcurrently());
  ASSERT_TRUE(par.executor->runsConcurrently());
  for (int step = 0; step < steps; ++step) {
    feedAll(*seq.executor, batch, classes, 100 + step);
    feedAll(*par.executor, batch, classes, 100 + step);
    s = seq.executor->run(step);
    ASSERT_TRUE(s.isOk()) << s.message();
    s = par.executor->run(step);
    ASSERT_TRUE(s.isOk()) << s.message();
    for (int f = 0; f < seq.executor->numFetches(); ++f)
      ASSERT_TRUE(
          sameBits(seq.executor->fetch(f), par.executor->fetch(f)))
          << "fetch " << seq.executor->fetchInfo(f).name << " at step "
          << step;
  }
  for (const std::string &name : seq.variables.names())
    EXPECT_TRUE(sameBits(*seq.variables.find(name), *par.variables.find(name)))
        << "variable " << name;
}

// Four independent branches, each a chain of matmuls and tanh over its own
// variable, summed at the end: plenty to overlap.
plan::Plan branchesPlan(int branches, int64_t width) {
  plan::Plan p;
  p.set_format_version(2);
  for (int b = 0; b < branches; ++b)
    addVariable(&p, "W" + std::to_string(b), plan::F32, {width, width},
                "glorot_uniform");
  ProgramBuilder g(p.mutable_train_step());
  int x = g.input("x", plan::F32, {-1, width});
  int total = -1;
  for (int b = 0; b < branches; ++b) {
    int W = g.readVariable("W" + std::to_string(b), plan::F32, {width, width});
    int h = x;
    for (int layer = 0; layer < 3; ++layer) {
      int m = g.compute("dtf.matmul", {h, W}, plan::F32, {-1, width});
      h = g.compute("dtf.tanh", {m}, plan::F32, {-1, width});
    }
    int s = g.compute("dtf.sum", {h}, plan::F32, {});
    g.fetch("branch" + std::to_string(b), s);
    total = total < 0 ? s : g.compute("dtf.add", {total, s}, plan::F32, {});
  }
  g.fetch("total", total);
  return p;
}

// A two-layer perceptron's full train_step: forward, metrics, backward,
// momentum on the second layer (with its slot) and SGD on the first, and the
// global step. The updates of layer 2 come before layer 1's backward pass in
// program order, so `dh = dlogits W2^T` must read W2 before its update.
plan::Plan mlpPlan(int64_t features, int64_t hidden, int64_t classes) {
  plan::Plan p;
  p.set_format_version(2);
  p.set_model("mlp");
  addVariable(&p, "global_step", plan::I64, {}, "zeros", "global_step");
  addVariable(&p, "W1", plan::F32, {features, hidden}, "glorot_uniform");
  addVariable(&p, "b1", plan::F32, {hidden});
  addVariable(&p, "W2", plan::F32, {hidden, classes}, "glorot_uniform");
  addVariable(&p, "b2", plan::F32, {classes});
  addVariable(&p, "W2/momentum", plan::F32, {hidden, classes}, "zeros",
              "slot");
  ProgramBuilder g(p.mutable_train_step());
  p.mutable_train_step()->set_name("train_step");
  int x = g.input("x", plan::F32, {-1, features});
  int y = g.input("y", plan::I32, {-1});
  int W1 = g.readVariable("W1", plan::F32, {features, hidden});
  int b1 = g.readVariable("b1", plan::F32, {hidden});
  int W2 = g.readVariable("W2", plan::F32, {hidden, classes});
  int b2 = g.readVariable("b2", plan::F32, {classes});
  int mW2 = g.readVariable("W2/momentum", plan::F32, {hidden, classes});
  int step = g.readVariable("global_step", plan::I64, {});
  int z1 = g.compute("dtf.matmul", {x, W1}, plan::F32, {-1, hidden});
  int a1 = g.compute("dtf.add", {z1, b1}, plan::F32, {-1, hidden});
  int h = g.compute("dtf.relu", {a1}, plan::F32, {-1, hidden});
  int z2 = g.compute("dtf.matmul", {h, W2}, plan::F32, {-1, classes});
  int logits = g.compute("dtf.add", {z2, b2}, plan::F32, {-1, classes});
  int xent = g.compute("dtf.sparse_softmax_cross_entropy", {logits, y},
                       plan::F32, {-1});
  int loss = g.compute("dtf.mean", {xent}, plan::F32, {});
  int pred = g.value(plan::I32, {-1});
  setAttr(g.op("dtf.argmax", {logits}, {pred}), "axis", int64_t(1));
  int eq = g.value(plan::BOOL, {-1});
  setAttr(g.op("dtf.compare", {pred, y}, {eq}), "predicate", "eq");
  int eqf = g.compute("dtf.cast", {eq}, plan::F32, {-1});
  int accuracy = g.compute("dtf.mean", {eqf}, plan::F32, {});

  int one = g.constantF32({}, {1.0f});
  int dxent = g.value(plan::F32, {-1});
  setAttr(g.op("dtf.reduce_grad", {one, xent}, {dxent}), "mean", true);
  int dlogits = g.compute("dtf.sparse_softmax_cross_entropy_grad",
                          {dxent, logits, y}, plan::F32, {-1, classes});
  int dW2 = g.value(plan::F32, {hidden, classes});
  setAttr(g.op("dtf.matmul", {h, dlogits}, {dW2}), "transpose_a", true);
  int db2 = g.compute("dtf.sum_to_shape", {dlogits, b2}, plan::F32, {classes});
  int dh = g.value(plan::F32, {-1, hidden});
  setAttr(g.op("dtf.matmul", {dlogits, W2}, {dh}), "transpose_b", true);
  int lr = g.constantF32({}, {0.1f});
  setAttr(g.op("dtf.apply_momentum", {W2, mW2, dW2, lr}, {}), "momentum", 0.9);
  g.op("dtf.apply_sgd", {b2, db2, lr}, {});
  int da1 = g.compute("dtf.relu_grad", {dh, a1}, plan::F32, {-1, hidden});
  int dW1 = g.value(plan::F32, {features, hidden});
  setAttr(g.op("dtf.matmul", {x, da1}, {dW1}), "transpose_a", true);
  int db1 = g.compute("dtf.sum_to_shape", {da1, b1}, plan::F32, {hidden});
  g.op("dtf.apply_sgd", {W1, dW1, lr}, {});
  g.op("dtf.apply_sgd", {b1, db1, lr}, {});
  int inc = g.constantI64({}, {1});
  g.op("dtf.assign_add", {step, inc}, {});
  g.fetch("loss", loss);
  g.fetch("accuracy", accuracy);
  g.fetch("global_step", step);
  return p;
}

// The index among the run ops (kernels and assign_add) of the op at
// `location`, or -1.
int runOpAt(const plan::Program &program, const std::string &location) {
  int k = 0;
  for (const plan::Op &op : program.ops()) {
    const std::string &n = op.name();
    if (n == "dtf.input" || n == "dtf.constant" || n == "dtf.read_variable")
      continue;
    if (op.location() == location)
      return k;
    ++k;
  }
  return -1;
}

bool dependsOn(const Executor &e, int op, int on) {
  std::vector<int> d = e.dependencies(op);
  return std::find(d.begin(), d.end(), on) != d.end();
}

// --- scheduling ----------------------------------------------------------

TEST(InterOp, IndependentBranchesGiveTheSequentialResultBitForBit) {
  plan::Plan p = branchesPlan(4, 48);
  // The first op of branch 1 waits for nothing of branch 0.
  ThreadPool pool(2);
  Loaded l;
  ASSERT_TRUE(load(p, &l, withPool(&pool)).isOk());
  const int branch1 = 7; // 3 x (matmul, tanh) + sum in branch 0
  EXPECT_TRUE(l.executor->dependencies(branch1).empty());
  EXPECT_EQ(l.executor->dependencies(branch1 + 1), std::vector<int>{branch1});
  expectSameAsSequential(p, 64, 1, 20);
  expectSameAsSequential(p, 64, 1, 10, /*threads=*/3);
}

TEST(InterOp, TrainStepsOfSmallModelsGiveTheSequentialResultBitForBit) {
  LogisticRegressionOptions lo;
  lo.features = 32;
  lo.classes = 10;
  expectSameAsSequential(logisticRegressionPlan(lo), 64, 10, 30);
  expectSameAsSequential(mlpPlan(32, 64, 10), 64, 10, 30);
  ThreadPool intraOp(2);
  expectSameAsSequential(mlpPlan(64, 256, 10), 256, 10, 20, 2, &intraOp);
}

TEST(InterOp, UpdatesWaitForEarlierReadersOfTheirVariable) {
  plan::Plan p = mlpPlan(8, 16, 4);
  ThreadPool pool(2);
  Loaded l;
  ASSERT_TRUE(load(p, &l, withPool(&pool)).isOk());
  const Executor &e = *l.executor;
  // h W2 (forward), dlogits W2^T (backward), the update of W2, and layer
  // 1's relu_grad, by their default locations (op index + 1).
  const plan::Program &prog = p.train_step();
  const int zW2 = runOpAt(prog, "test.dtf:12:1");
  const int dh = runOpAt(prog, "test.dtf:25:1");
  const int applyW2 = runOpAt(prog, "test.dtf:27:1");
  const int reluGrad = runOpAt(prog, "test.dtf:29:1");
  ASSERT_EQ(prog.ops(11).name(), "dtf.matmul");
  ASSERT_EQ(prog.ops(24).name(), "dtf.matmul");
  ASSERT_EQ(prog.ops(26).name(), "dtf.apply_momentum");
  ASSERT_EQ(prog.ops(28).name(), "dtf.relu_grad");
  EXPECT_TRUE(dependsOn(e, applyW2, zW2)) << "forward read of W2";
  EXPECT_TRUE(dependsOn(e, applyW2, dh)) << "backward read of W2";
  EXPECT_FALSE(dependsOn(e, reluGrad, applyW2))
      << "layer 1's backward pass may overlap the update of W2";
}

// Reads of a variable before its update in program order see the old value,
// reads after it the new one, also through a reshape (an alias of the
// variable's buffer) made before the update. Large tensors give a reordered
// schedule every chance to show.
TEST(InterOp, ReadsAndUpdatesOfAVariableKeepProgramOrder) {
  const int64_t n = 1 << 16;
  plan::Plan p;
  p.set_format_version(2);
  addVariable(&p, "acc", plan::F32, {n}, "ones");
  ProgramBuilder g(p.mutable_train_step());
  int x = g.input("x", plan::F32, {n});
  int acc = g.readVariable("acc", plan::F32, {n});
  int two = g.constantF32({}, {2.0f});
  int view = g.compute("dtf.reshape", {acc}, plan::F32, {n / 4, 4});
  int before = g.compute("dtf.mul", {acc, two}, plan::F32, {n});
  int before2 = g.compute("dtf.mul", {before, two}, plan::F32, {n});
  g.op("dtf.assign_add", {acc, x}, {}, "test.dtf:50:1");
  int after = g.compute("dtf.mul", {acc, two}, plan::F32, {n});
  int viewSum = g.compute("dtf.sum", {view}, plan::F32, {});
  int lr = g.constantF32({}, {0.5f});
  g.op("dtf.apply_sgd", {acc, x, lr}, {}, "test.dtf:60:1"); // acc -= x / 2
  int last = g.compute("dtf.sum", {acc}, plan::F32, {});
  g.fetch("before", before2);
  g.fetch("after", after);
  g.fetch("view_sum", viewSum);
  g.fetch("last", last);

  ThreadPool pool(2);
  Loaded l;
  Status s = load(p, &l, withPool(&pool));
  ASSERT_TRUE(s.isOk()) << s.message();
  Executor &e = *l.executor;
  ASSERT_TRUE(e.runsConcurrently());
  const int assign = runOpAt(p.train_step(), "test.dtf:50:1");
  const int sgd = runOpAt(p.train_step(), "test.dtf:60:1");
  // Run ops: 0 reshape, 1 mul (before), 2 mul, 3 assign_add, 4 mul (after),
  // 5 sum of the reshape, 6 apply_sgd, 7 sum.
  ASSERT_EQ(assign, 3);
  ASSERT_EQ(sgd, 6);
  EXPECT_TRUE(dependsOn(e, assign, 0)) << "the reshape (a read) first";
  EXPECT_TRUE(dependsOn(e, assign, 1)) << "the read before (mul) first";
  EXPECT_FALSE(dependsOn(e, assign, 2)) << "a mul of a mul reads no variable";
  EXPECT_TRUE(dependsOn(e, 4, assign)) << "the read after (mul) follows";
  EXPECT_TRUE(dependsOn(e, 5, assign)) << "the reshape's reader follows";
  EXPECT_TRUE(dependsOn(e, sgd, assign)) << "updates keep their order";
  EXPECT_TRUE(dependsOn(e, sgd, 4)) << "and wait for the readers between";
  EXPECT_TRUE(dependsOn(e, sgd, 5));

  // x = 1 everywhere: each step adds 1 then subtracts 0.5.
  Tensor *t = nullptr;
  ASSERT_TRUE(e.prepareFeed(0, 0, &t).isOk());
  std::fill(t->data<float>(), t->data<float>() + n, 1.0f);
  for (int step = 0; step < 40; ++step) {
    const float old = 1.0f + 0.5f * float(step);
    ASSERT_TRUE(e.run(step).isOk());
    ASSERT_EQ(e.fetch(0).data<float>()[n - 1], 4 * old) << "step " << step;
    ASSERT_EQ(e.fetch(1).data<float>()[n - 1], 2 * (old + 1)) << step;
    ASSERT_FLOAT_EQ(e.fetch(2).data<float>()[0], float(n) * (old + 1)) << step;
    ASSERT_FLOAT_EQ(e.fetch(3).data<float>()[0], float(n) * (old + 0.5f))
        << step;
  }
}

// Two branches; the second fails in its cross-entropy when a label is out
// of range. The step stops with the op's message, and the op after the
// failing one (an update) does not run.
TEST(InterOp, AnErrorInOneBranchStopsTheStepAndNamesTheOp) {
  plan::Plan p;
  p.set_format_version(2);
  addVariable(&p, "count", plan::F32, {}, "zeros");
  addVariable(&p, "W", plan::F32, {8, 3}, "glorot_uniform");
  ProgramBuilder g(p.mutable_train_step());
  int x = g.input("x", plan::F32, {-1, 8});
  int y = g.input("y", plan::I32, {-1});
  int W = g.readVariable("W", plan::F32, {8, 3});
  int count = g.readVariable("count", plan::F32, {});
  int t = g.compute("dtf.tanh", {x}, plan::F32, {-1, 8});
  int sa = g.compute("dtf.sum", {t}, plan::F32, {});
  int logits = g.compute("dtf.matmul", {x, W}, plan::F32, {-1, 3});
  int xent = g.value(plan::F32, {-1});
  g.op("dtf.sparse_softmax_cross_entropy", {logits, y}, {xent},
       "err.dtf:9:3");
  int loss = g.compute("dtf.mean", {xent}, plan::F32, {});
  g.op("dtf.assign_add", {count, loss}, {});
  g.fetch("a", sa);
  g.fetch("loss", loss);

  ThreadPool pool(2);
  Loaded l;
  ASSERT_TRUE(load(p, &l, withPool(&pool)).isOk());
  Executor &e = *l.executor;
  ASSERT_TRUE(e.runsConcurrently());
  for (int step = 0; step < 3; ++step) {
    feedAll(e, 16, 3, step);
    ASSERT_TRUE(e.run(step).isOk());
  }
  const float countBefore = l.variables.find("count")->data<float>()[0];
  EXPECT_GT(countBefore, 0.0f);
  for (int attempt = 0; attempt < 20; ++attempt) {
    feedAll(e, 16, 3, 50 + attempt);
    Tensor *yt = nullptr;
    ASSERT_TRUE(e.prepareFeed(1, 16, &yt).isOk());
    yt->data<int32_t>()[5] = 7; // only 3 classes
    Status s = e.run(3 + attempt);
    ASSERT_FALSE(s.isOk());
    EXPECT_EQ(s.message().rfind("err.dtf:9:3: dtf.sparse_softmax_cross_entropy",
                                0),
              0u)
        << s.message();
    ASSERT_EQ(l.variables.find("count")->data<float>()[0], countBefore)
        << "the update after the failed op ran";
  }
  // The executor is whole again for the next step.
  feedAll(e, 16, 3, 99);
  Status s = e.run(30);
  EXPECT_TRUE(s.isOk()) << s.message();
  EXPECT_GT(l.variables.find("count")->data<float>()[0], countBefore);
}

// Both branches fail: one error is reported (whichever came first), and the
// step neither hangs nor crashes.
TEST(InterOp, TheFirstOfTwoErrorsWins) {
  plan::Plan p;
  p.set_format_version(2);
  ProgramBuilder g(p.mutable_train_step());
  int a = g.input("a", plan::F32, {-1, 3});
  int b = g.input("b", plan::F32, {-1, 3});
  int y = g.input("y", plan::I32, {-1});
  for (int branch = 0; branch < 2; ++branch) {
    int t = g.compute("dtf.relu", {branch == 0 ? a : b}, plan::F32, {-1, 3});
    int xent = g.value(plan::F32, {-1});
    g.op("dtf.sparse_softmax_cross_entropy", {t, y}, {xent},
         branch == 0 ? "two.dtf:1:1" : "two.dtf:2:1");
    g.fetch("loss" + std::to_string(branch),
            g.compute("dtf.mean", {xent}, plan::F32, {}));
  }
  ThreadPool pool(2);
  Loaded l;
  ASSERT_TRUE(load(p, &l, withPool(&pool)).isOk());
  Executor &e = *l.executor;
  ASSERT_TRUE(e.runsConcurrently());
  feedAll(e, 4, 3, 1);
  ASSERT_TRUE(e.run(0).isOk());
  for (int step = 1; step < 20; ++step) {
    Tensor *yt = nullptr;
    ASSERT_TRUE(e.prepareFeed(2, 4, &yt).isOk());
    yt->data<int32_t>()[0] = -1;
    Status s = e.run(step);
    ASSERT_FALSE(s.isOk());
    const bool first = s.message().rfind("two.dtf:1:1: ", 0) == 0;
    const bool second = s.message().rfind("two.dtf:2:1: ", 0) == 0;
    EXPECT_TRUE(first || second) << s.message();
  }
}

// A chain (every op needs the one before) gains nothing from threads and
// takes the sequential path.
TEST(InterOp, AChainRunsSequentially) {
  plan::Plan p;
  p.set_format_version(2);
  ProgramBuilder g(p.mutable_train_step());
  int x = g.input("x", plan::F32, {-1, 3});
  int r = g.compute("dtf.relu", {x}, plan::F32, {-1, 3});
  int s = g.compute("dtf.sum", {r}, plan::F32, {});
  g.fetch("s", s);
  ThreadPool pool(2), one(1);
  Loaded l, m;
  ASSERT_TRUE(load(p, &l, withPool(&pool)).isOk());
  EXPECT_FALSE(l.executor->runsConcurrently());
  ASSERT_TRUE(load(branchesPlan(2, 4), &m, withPool(&one)).isOk());
  EXPECT_FALSE(m.executor->runsConcurrently()) << "a pool of one thread";
}

// The allocation test of ExecutorTest with a 2-thread inter-op pool (and an
// intra-op pool besides): no tensor buffer after the first steps.
TEST(InterOp, SteadyStateStepsAllocateNoTensors) {
  ThreadPool interOp(2), intraOp(2);
  ExecutorOptions o = withPool(&interOp);
  o.intraOpPool = &intraOp;
  o.profile = true; // the profile must work (and not allocate) here too
  for (const plan::Plan &p : {logisticRegressionPlan(), mlpPlan(16, 32, 5)}) {
    Loaded l;
    Status s = load(p, &l, o);
    ASSERT_TRUE(s.isOk()) << s.message();
    Executor &e = *l.executor;
    ASSERT_TRUE(e.runsConcurrently());
    for (int step = 0; step < 3; ++step) {
      feedAll(e, 32, 3, step);
      ASSERT_TRUE(e.run(step).isOk());
    }
    const uint64_t tensors = alignedAllocCount();
    for (int step = 3; step < 11; ++step) {
      feedAll(e, 32, 3, step);
      s = e.run(step);
      ASSERT_TRUE(s.isOk()) << s.message();
    }
    EXPECT_EQ(alignedAllocCount() - tensors, 0u)
        << "tensor buffers allocated in steady state";
    for (const exec::OpProfile &op : e.profile())
      EXPECT_EQ(op.calls, 11u) << op.where;
  }
}

// The executor's own ops on two variables are independent: they run
// concurrently, and the scheduling itself allocates nothing at all.
TEST(InterOp, TheSchedulerAllocatesNothing) {
  plan::Plan p;
  p.set_format_version(2);
  addVariable(&p, "a", plan::F32, {3}, "ones");
  addVariable(&p, "b", plan::F32, {3}, "zeros");
  ProgramBuilder g(p.mutable_train_step());
  int x = g.input("x", plan::F32, {3});
  int a = g.readVariable("a", plan::F32, {3});
  int b = g.readVariable("b", plan::F32, {3});
  g.op("dtf.assign_add", {a, x}, {});
  g.op("dtf.assign_add", {b, x}, {});
  g.fetch("a", a);
  g.fetch("b", b);
  ThreadPool pool(2);
  Loaded l;
  ASSERT_TRUE(load(p, &l, withPool(&pool)).isOk());
  Executor &e = *l.executor;
  ASSERT_TRUE(e.runsConcurrently());
  Tensor *t = nullptr;
  ASSERT_TRUE(e.prepareFeed(0, 0, &t).isOk());
  std::fill(t->data<float>(), t->data<float>() + 3, 2.0f);
  ASSERT_TRUE(e.run(0).isOk());
  ASSERT_TRUE(e.run(1).isOk());
  const uint64_t news = operatorNewCount(), tensors = alignedAllocCount();
  for (int i = 2; i < 12; ++i)
    ASSERT_TRUE(e.run(i).isOk());
  EXPECT_EQ(operatorNewCount() - news, 0u);
  EXPECT_EQ(alignedAllocCount() - tensors, 0u);
  EXPECT_FLOAT_EQ(e.fetch(0).data<float>()[1], 1 + 12 * 2.0f);
  EXPECT_FLOAT_EQ(e.fetch(1).data<float>()[2], 12 * 2.0f);
}

// --- placement -----------------------------------------------------------

using testing::Capture;

TEST(Placement, LogDevicePlacementPrintsEveryOpOnceAtLoad) {
  plan::Plan p = logisticRegressionPlan();
  p.mutable_session()->set_log_device_placement(true);
  Capture log;
  ExecutorOptions o;
  exec::applySessionOptions(p, &o);
  o.log = log.file();
  Loaded l;
  Status s = load(p, &l, o);
  ASSERT_TRUE(s.isOk()) << s.message();
  feedAll(*l.executor, 8, 3, 1);
  ASSERT_TRUE(l.executor->run(0).isOk());
  ASSERT_TRUE(l.executor->run(1).isOk());
  const std::string text = log.text();
  std::istringstream in(text);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  const int ops = p.train_step().ops_size();
  ASSERT_EQ(int(lines.size()), 1 + ops) << text;
  EXPECT_EQ(lines[0], "train_step: device placement (" + std::to_string(ops) +
                          " ops):");
  const std::string cpu = "/job:localhost/replica:0/task:0/device:CPU:0";
  EXPECT_EQ(lines[1], "dtf.input (test.dtf:1:1): " + cpu);
  EXPECT_NE(text.find("\ndtf.matmul (test.dtf:5:1): " + cpu + "\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("dtf.sparse_softmax_cross_entropy (lr.dtf:7:10): " + cpu),
            std::string::npos)
      << text;
  for (size_t i = 1; i < lines.size(); ++i)
    EXPECT_NE(lines[i].find("): " + cpu), std::string::npos) << lines[i];

  // Off (the default): nothing.
  Capture quiet;
  ExecutorOptions off;
  off.log = quiet.file();
  Loaded m;
  ASSERT_TRUE(load(logisticRegressionPlan(), &m, off).isOk());
  EXPECT_EQ(quiet.text(), "");
}

// The logistic regression with its forward matmul placed on a GPU.
plan::Plan gpuPlan() {
  plan::Plan p = logisticRegressionPlan();
  for (plan::Op &op : *p.mutable_train_step()->mutable_ops())
    if (op.location() == "test.dtf:5:1") // x @ W
      op.set_device("/job:worker/gpu:0");
  return p;
}

TEST(Placement, AnOpOnAMissingGpuFailsAtLoadWithoutSoftPlacement) {
  plan::Plan p = gpuPlan();
  ASSERT_EQ(p.train_step().ops(4).name(), "dtf.matmul");
  ExecutorOptions o;
  exec::applySessionOptions(p, &o);
  Loaded l;
  Status s = load(p, &l, o);
  ASSERT_FALSE(s.isOk());
  // Why there is no GPU depends on the machine (no libcuda.so.1 here).
  EXPECT_EQ(s.message().rfind("train_step: test.dtf:5:1: dtf.matmul is placed "
                              "on /job:worker/gpu:0, a device this process "
                              "does not have (",
                              0),
            0u)
      << s.message();
  EXPECT_NE(s.message().find(
                "this dtf-run runs every op on "
                "/job:localhost/replica:0/task:0/device:CPU:0); to run such "
                "ops on the CPU instead, add `session = session(soft_placement "
                "= true)` to the model's train block"),
            std::string::npos)
      << s.message();
}

TEST(Placement, SoftPlacementRunsAGpuOpOnTheCpuWithANote) {
  plan::Plan p = gpuPlan();
  p.mutable_session()->set_soft_placement(true);
  p.mutable_session()->set_log_device_placement(true);
  Capture log;
  ExecutorOptions o;
  exec::applySessionOptions(p, &o);
  o.log = log.file();
  Loaded l, plain;
  Status s = load(p, &l, o);
  ASSERT_TRUE(s.isOk()) << s.message();
  const std::string text = log.text();
  EXPECT_EQ(text.rfind("train_step: soft placement: 1 op placed on a device "
                       "this process lacks run on "
                       "/job:localhost/replica:0/task:0/device:CPU:0 (first: "
                       "test.dtf:5:1: dtf.matmul on /job:worker/gpu:0)\n",
                       0),
            0u)
      << text;
  EXPECT_NE(text.find("dtf.matmul (test.dtf:5:1): "
                      "/job:localhost/replica:0/task:0/device:CPU:0 (placed "
                      "on /job:worker/gpu:0: soft placement)\n"),
            std::string::npos)
      << text;
  // And it computes what the unplaced plan does.
  ASSERT_TRUE(load(logisticRegressionPlan(), &plain).isOk());
  for (int step = 0; step < 3; ++step) {
    feedAll(*l.executor, 8, 3, step);
    feedAll(*plain.executor, 8, 3, step);
    ASSERT_TRUE(l.executor->run(step).isOk());
    ASSERT_TRUE(plain.executor->run(step).isOk());
    EXPECT_TRUE(sameBits(l.executor->fetch(0), plain.executor->fetch(0)));
  }
}

TEST(Placement, AVariableOnAGpuCountsForTheOpsThatReadIt) {
  plan::Plan p = logisticRegressionPlan();
  p.mutable_variables(0)->set_device("/device:GPU:0"); // W
  ExecutorOptions o;
  exec::applySessionOptions(p, &o);
  Loaded l;
  Status s = load(p, &l, o);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message().rfind("train_step: test.dtf:3:1: dtf.read_variable is "
                              "placed on /device:GPU:0 (its variable 'W' is), "
                              "a device this process does not have",
                              0),
            0u)
      << s.message();
  EXPECT_NE(s.message().find("session = session(soft_placement = true)"),
            std::string::npos);

  p.mutable_session()->set_soft_placement(true);
  exec::applySessionOptions(p, &o);
  Capture log;
  o.log = log.file();
  Loaded m;
  s = load(p, &m, o);
  EXPECT_TRUE(s.isOk()) << s.message();
  EXPECT_NE(log.text().find("soft placement: 1 op"), std::string::npos);
}

TEST(Placement, TasksAndTheCpuAreNotMissingDevices) {
  for (const char *device :
       {"/job:ps/task:0", "/cpu:0", "/job:worker/task:1/device:CPU:0", ""}) {
    plan::Plan p = logisticRegressionPlan();
    for (plan::Op &op : *p.mutable_train_step()->mutable_ops())
      op.set_device(device);
    p.mutable_variables(0)->set_device(device);
    ExecutorOptions o;
    exec::applySessionOptions(p, &o);
    Loaded l;
    Status s = load(p, &l, o);
    EXPECT_TRUE(s.isOk()) << device << ": " << s.message();
  }
  plan::Plan p = logisticRegressionPlan();
  p.mutable_train_step()->mutable_ops(4)->set_device("/cpu:1");
  Loaded l;
  Status s = load(p, &l);
  EXPECT_FALSE(s.isOk()) << "CPU 1 is missing";
}

// --- the trainer and dtf-run ---------------------------------------------

TEST(InterOp, TrainerWithInterOpThreadsTrainsExactlyAsWithout) {
  LogisticRegressionOptions lo;
  lo.steps = 60;
  lo.evalEvery = 30;
  plan::Plan p = logisticRegressionPlan(lo);
  std::vector<train::TrainReport> reports(2);
  for (int k = 0; k < 2; ++k) {
    train::TrainOptions o;
    o.quiet = true;
    o.threads = 1;
    o.interOpThreads = k == 0 ? 1 : 2;
    Capture out;
    o.out = out.file();
    Status s = train::train(p, o, &reports[k]);
    ASSERT_TRUE(s.isOk()) << s.message();
  }
  ASSERT_EQ(reports[0].finalMetrics.size(), reports[1].finalMetrics.size());
  for (size_t i = 0; i < reports[0].finalMetrics.size(); ++i)
    EXPECT_EQ(reports[0].finalMetrics[i].value,
              reports[1].finalMetrics[i].value)
        << reports[0].finalMetrics[i].name;

  // The plan's session asks for 2 when the option leaves it to the plan.
  p.mutable_session()->set_inter_op_threads(2);
  train::TrainOptions o;
  o.threads = 1;
  Capture out;
  o.out = out.file();
  std::unique_ptr<train::Trainer> t;
  ASSERT_TRUE(train::Trainer::create(p, o, &t).isOk());
  EXPECT_TRUE(t->trainExecutor().runsConcurrently());
  EXPECT_NE(t->describe().find("1 thread (2 inter-op)"), std::string::npos)
      << t->describe();
  o.interOpThreads = 1; // the option wins
  ASSERT_TRUE(train::Trainer::create(p, o, &t).isOk());
  EXPECT_FALSE(t->trainExecutor().runsConcurrently());
}

struct RunResult {
  int exitCode = -1;
  std::string out, err;
};

RunResult runDtfRun(const std::string &args, const std::string &dir) {
  const std::string out = dir + "/out", err = dir + "/err";
  const std::string cmd = std::string(DTF_RUN_PATH) + " " + args + " >" +
                          out + " 2>" + err;
  int status = std::system(cmd.c_str());
  RunResult r;
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream o(out), e(err);
  std::stringstream so, se;
  so << o.rdbuf();
  se << e.rdbuf();
  r.out = so.str();
  r.err = se.str();
  return r;
}

TEST(InterOp, DtfRunTakesInterOpThreads) {
  const std::string dir =
      (std::filesystem::temp_directory_path() /
       ("dtf-interop-test-" + std::to_string(::getpid())))
          .string();
  std::filesystem::create_directories(dir);
  LogisticRegressionOptions lo;
  lo.steps = 40;
  lo.withEval = false;
  plan::Plan p = logisticRegressionPlan(lo);
  p.mutable_session()->set_log_device_placement(true);
  const std::string plan = dir + "/plan.bin";
  {
    std::ofstream f(plan, std::ios::binary);
    f << plan::sealPlan(p); // as dtfc writes it
  }
  RunResult one = runDtfRun(plan + " --quiet --threads 1 --inter-op-threads 1", dir);
  ASSERT_EQ(one.exitCode, 0) << one.err;
  RunResult two = runDtfRun(plan + " --quiet --threads 1 --inter-op-threads=2", dir);
  ASSERT_EQ(two.exitCode, 0) << two.err;
  // The same training, to the bit: the loss printed is the same.
  auto lossOf = [](const std::string &out) {
    auto at = out.find("loss=");
    return at == std::string::npos ? std::string("?")
                                   : out.substr(at, out.find(' ', at) - at);
  };
  EXPECT_EQ(lossOf(one.out), lossOf(two.out)) << one.out << two.out;
  EXPECT_NE(two.err.find("train_step: device placement ("), std::string::npos)
      << two.err;
  EXPECT_NE(two.err.find("dtf.matmul (test.dtf:5:1): /job:localhost/replica:0/"
                         "task:0/device:CPU:0"),
            std::string::npos)
      << two.err;

  RunResult bad = runDtfRun(plan + " --inter-op-threads 0", dir);
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_NE(bad.err.find("--inter-op-threads expects a positive integer, got "
                         "'0'"),
            std::string::npos)
      << bad.err;
  RunResult help = runDtfRun("--help", dir);
  EXPECT_NE(help.out.find("--inter-op-threads N"), std::string::npos);
  std::filesystem::remove_all(dir);
}

} // namespace
} // namespace dtf::testing
