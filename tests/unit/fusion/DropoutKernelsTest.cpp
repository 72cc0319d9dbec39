// Generated dropout kernels (dtf.dropout and dtf.dropout_grad alone in a
// dtf.fused region, a per-step "dropout-key" word): their masks against the
// op-by-op kernel's (runtime/kernels/cpu/Random.cpp) bit for bit over run
// seeds, op seeds, steps, tower offsets, shapes and rates (0 too), f32 and
// f64; dtfc's --fuse-dropout; and the plan reader's refusals of broken
// dropout kernels. DropoutGpuTest.cpp runs them on the emulated GPU.
#include "runtime/core/ThreadPool.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/PlanKernels.h"
#include "runtime/kernels/CpuKernels.h"
#include "runtime/kernels/GeneratedKernels.h"
#include "runtime/plan/FusedKernels.h"
#include "runtime/plan/PlanReader.h"
#include "runtime/plan/PlanTypes.h"
#include "tests/unit/fusion/KernelInputs.h"
#include "tests/unit/fusion/SkipReasons.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

/// Compiles tests/unit/fusion/dropout/<name>.dtf with dtfc into `plan`.
void compileDropoutModel(const std::string &name, dtf::plan::Plan *plan,
                         const std::string &extra = "") {
  const std::string source =
      (fs::path(DTF_SOURCE_DIR) / "tests/unit/fusion/dropout" / name).string() +
      ".dtf";
  const std::string out =
      (fs::temp_directory_path() /
       ("dtf-dropout-test-" + std::to_string(::getpid()) + ".bin"))
          .string();
  const std::string cmd = std::string(DTF_DTFC_PATH) + " '" + source +
                          "' --no-data-check " + extra + " -o '" + out + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  dtf::Status s = dtf::plan::readPlanFile(out, plan);
  fs::remove(out);
  ASSERT_TRUE(s.isOk()) << s.message();
}

bool isDropoutKernel(const dtf::plan::Kernel &kernel) {
  for (const auto &p : kernel.params())
    if (p.kind() == "buffer" && p.meaning() == "dropout-key")
      return true;
  return false;
}

int countOps(const dtf::plan::Program &p, const std::string &name) {
  int n = 0;
  for (const auto &op : p.ops())
    n += op.name() == name;
  return n;
}

double rateOf(const dtf::plan::Kernel &kernel) {
  return kernel.body(0).attrs().at("rate").f();
}

/// Random values in [-4, 4] with exact zeros and a NaN mixed in (a dropped
/// NaN is 0, as the op-by-op kernel's select gives it).
dtf::Tensor randomInput(dtf::DType dtype, std::vector<int64_t> shape,
                        std::mt19937 &rng) {
  dtf::Tensor t = dtf::Tensor::allocate(dtype, std::move(shape));
  std::uniform_real_distribution<double> real(-4.0, 4.0);
  for (int64_t i = 0; i < t.numElements(); ++i) {
    double v = i % 17 == 3 ? 0.0 : real(rng);
    if (i == 5)
      v = std::nan("");
    if (dtype == dtf::DType::F32)
      t.data<float>()[i] = float(v);
    else
      t.data<double>()[i] = v;
  }
  return t;
}

TEST(DropoutKernels, MasksMatchTheOpByOpKernelOverSeedsStepsOffsetsAndRates) {
  struct Case {
    uint64_t runSeed, step;
    int64_t first, rows, batch; // a tower's rows from `first` on
  };
  const Case cases[] = {
      {0, 0, 0, 0, 1},                      // no towers, the first step
      {1, 1, 0, 0, 7},                      // a partial batch
      {20261124, 123456789, 3, 7, 7},       // a tower from example 3
      {~0ull, 2, 100, 50, 50},              // the largest seed
      {42, 4, 0, 0, 333},                   // past the pool's chunk
      {7, (1ull << 40) + 9, 666, 333, 333}, // a late tower, a late step
      {9, 3, 5, 4, 8},                      // rows not dividing the batch
  };
  // The model's op seeds, then others (the op-by-op kernel reads the same
  // attribute from the kernel's body).
  const int64_t opSeeds[] = {-1, 0, 12345, int64_t(1ull << 63) + 7};
  dtf::ThreadPool pool(2);
  std::mt19937 rng(99);
  int checked = 0;
  std::set<double> rates;
  for (const char *model : {"dropout_f32", "dropout_f64"}) {
    dtf::plan::Plan plan;
    ASSERT_NO_FATAL_FAILURE(compileDropoutModel(model, &plan));
    // Skips only on a CPU without x86-64-v3, where dtf-run runs dropout op
    // by op (the message names the test that checks that).
    if (std::string why = dtf::test::cannotRunGeneratedKernels(plan);
        !why.empty())
      GTEST_SKIP() << why;
    for (int64_t opSeed : opSeeds) {
      if (opSeed >= 0 || opSeed < -1)
        for (auto &k : *plan.mutable_kernels())
          if (isDropoutKernel(k))
            (*k.mutable_body(0)->mutable_attrs())["seed"].set_i(opSeed);
      auto kernels = dtf::exec::planKernelsOf(plan);
      ASSERT_TRUE(kernels && kernels->loaded) << kernels->fallbackReason;
      dtf::KernelRegistry registry;
      dtf::registerCpuKernels(registry);
      for (int k = 0; k < plan.kernels_size(); ++k) {
        const dtf::plan::Kernel &kernel = plan.kernels(k);
        if (!isDropoutKernel(kernel))
          continue;
        rates.insert(rateOf(kernel));
        dtf::plan::Program body = dtf::plan::kernelBodyProgram(kernel);
        for (auto &op : *body.mutable_ops())
          op.clear_device();
        for (const Case &c : cases) {
          dtf::exec::VariableStore variables;
          dtf::exec::ExecutorOptions options;
          options.intraOpPool = &pool;
          options.seed = c.runSeed;
          std::unique_ptr<dtf::exec::Executor> opByOp;
          dtf::Status s = dtf::exec::Executor::create(body, variables, registry,
                                                      options, &opByOp);
          ASSERT_TRUE(s.isOk()) << s.message();
          dtf::Tensor zeros = dtf::test::kernelInputZeros(kernel, 0, c.batch);
          dtf::Tensor x = randomInput(zeros.dtype(), zeros.shape(), rng);

          dtf::FusedKernelContext fused(kernels->loaded, k);
          fused.setInputs({&x});
          fused.setNumOutputs(1);
          fused.setThreadPool(&pool);
          fused.setStep(c.step, c.runSeed);
          fused.setBatchOffset(c.first, c.rows);
          s = dtf::callKernel(dtf::fusedKernel, fused);
          ASSERT_TRUE(s.isOk()) << s.message();
          ASSERT_TRUE(opByOp->setFeed(0, x).isOk());
          opByOp->setBatchOffset(c.first, c.rows);
          s = opByOp->run(c.step);
          ASSERT_TRUE(s.isOk()) << s.message();
          const dtf::Tensor &got = fused.output(0), &want = opByOp->fetch(0);
          ASSERT_EQ(got.shape(), want.shape());
          ASSERT_EQ(got.byteSize(), want.byteSize());
          EXPECT_EQ(std::memcmp(got.rawData(), want.rawData(), got.byteSize()),
                    0)
              << model << " " << kernel.name() << " (" << kernel.body(0).name()
              << ", rate " << rateOf(kernel) << ", op seed " << opSeed
              << ") differs from the op-by-op kernel at run seed " << c.runSeed
              << ", step " << c.step << ", rows " << c.first << "+" << c.rows
              << ", batch " << c.batch;
          // And the mask is a mask: the share of nonzero inputs kept is
          // about 1 - rate.
          if (x.numElements() >= 10000) {
            int64_t kept = 0, nonzero = 0;
            auto at = [](const dtf::Tensor &t, int64_t i) {
              return t.dtype() == dtf::DType::F32 ? double(t.data<float>()[i])
                                                  : t.data<double>()[i];
            };
            for (int64_t i = 0; i < x.numElements(); ++i)
              if (at(x, i) != 0.0 && !std::isnan(at(x, i))) {
                ++nonzero;
                kept += at(got, i) != 0.0;
              }
            const double share = double(kept) / double(nonzero);
            EXPECT_NEAR(share, 1.0 - rateOf(kernel), 0.03)
                << kernel.name() << " keeps " << share;
          }
          ++checked;
        }
      }
    }
  }
  // Rates 0.1, 0.5, 0.9, 0.3 and 0.
  EXPECT_EQ(rates, (std::set<double>{0.0, 0.1, 0.3, 0.5, 0.9}));
  EXPECT_GT(checked, 0);
  std::printf("[ dropout  ] %d generated dropout runs equal the op-by-op "
              "kernel's bit for bit\n",
              checked);
}

TEST(DropoutKernels, EveryDropoutIsAKernelAndFuseDropoutOffKeepsTheOps) {
  dtf::plan::Plan on, off;
  ASSERT_NO_FATAL_FAILURE(compileDropoutModel("dropout_f32", &on));
  ASSERT_NO_FATAL_FAILURE(
      compileDropoutModel("dropout_f32", &off, "--fuse-dropout=off"));
  int kernels = 0;
  for (const auto &k : on.kernels())
    kernels += isDropoutKernel(k);
  // 5 dropouts (rate 0 too) and their 5 gradients.
  EXPECT_EQ(kernels, 10);
  EXPECT_EQ(countOps(on.train_step(), "dtf.dropout") +
                countOps(on.train_step(), "dtf.dropout_grad"),
            0);
  for (const auto &k : off.kernels())
    EXPECT_FALSE(isDropoutKernel(k)) << k.name();
  EXPECT_EQ(countOps(off.train_step(), "dtf.dropout"), 5);
  EXPECT_EQ(countOps(off.train_step(), "dtf.dropout_grad"), 5);
}

/// The first dropout kernel of `plan` (after compileDropoutModel).
int firstDropoutKernel(const dtf::plan::Plan &plan) {
  for (int k = 0; k < plan.kernels_size(); ++k)
    if (isDropoutKernel(plan.kernels(k)))
      return k;
  return -1;
}

void expectRefused(const dtf::plan::Plan &plan, const std::string &text) {
  dtf::Status s = dtf::plan::validatePlan(plan, "p.bin");
  ASSERT_FALSE(s.isOk()) << "accepted; expected: " << text;
  EXPECT_NE(s.message().find(text), std::string::npos) << s.message();
}

TEST(PlanReader, RejectsADropoutKernelWithoutItsKeyOrOfTheWrongTypes) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileDropoutModel("dropout_f32", &plan));
  const int k = firstDropoutKernel(plan);
  ASSERT_GE(k, 0);
  ASSERT_TRUE(dtf::plan::validatePlan(plan, "p.bin").isOk());
  {
    // No key word: a plan older than its reader, or a broken one.
    dtf::plan::Plan p = plan;
    auto *params = p.mutable_kernels(k)->mutable_params();
    for (int i = 0; i < params->size(); ++i)
      if (params->Get(i).meaning() == "dropout-key")
        params->DeleteSubrange(i--, 1);
    expectRefused(p, "holds a dropout and has 0 dropout-key parameters");
  }
  {
    // Integers: the key draws a float mask over f32 or f64 values.
    dtf::plan::Plan p = plan;
    for (auto &v : *p.mutable_kernels(k)->mutable_values())
      v.mutable_type()->set_dtype(dtf::plan::I32);
    // (The kernel's body is read against the ops' ODS types first.)
    expectRefused(p, "dtf.dropout input 'x' (input 0) of type i32");
  }
  {
    // The key word on a kernel that holds no dropout.
    dtf::plan::Plan p = plan;
    int other = -1;
    for (int j = 0; j < p.kernels_size() && other < 0; ++j)
      if (!isDropoutKernel(p.kernels(j)) && p.kernels(j).outputs_size() > 0)
        other = j;
    ASSERT_GE(other, 0);
    auto *key = p.mutable_kernels(other)->add_params();
    key->set_kind("buffer");
    key->set_meaning("dropout-key");
    expectRefused(p, "has a dropout-key parameter but holds no dtf.dropout");
  }
  {
    // The buffers out of order: the code would read x as the key.
    dtf::plan::Plan p = plan;
    auto *params = p.mutable_kernels(k)->mutable_params();
    for (auto &param : *params)
      if (param.meaning() == "dropout-key")
        param.set_meaning("same");
      else if (param.meaning() == "same")
        param.set_meaning("dropout-key");
    expectRefused(p, "is a dropout kernel: its parameters are the buffers "
                     "same (x), output and dropout-key");
  }
}

} // namespace
