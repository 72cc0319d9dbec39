// The training loop: the hand-built logistic regression learns synthetic
// data; progress, evaluation and final lines; data and plan errors;
// interruption; and dtf-run end to end.
#include "runtime/train/Trainer.h"
#include "runtime/data/CsvDataset.h"
#include "runtime/data/SyntheticDataset.h"
#include "runtime/plan/PlanReader.h"
#include "tests/unit/exec/TestPlans.h"
#include "schema/PlanSchema.h"
#include "schema/PlanSeal.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace dtf::testing {
namespace {

using train::FailureKind;
using train::Metric;
using train::TrainOptions;
using train::TrainReport;

using testing::Capture;

std::vector<std::string> lines(const std::string &text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l))
    out.push_back(l);
  return out;
}

double metric(const std::vector<Metric> &metrics, const std::string &name) {
  for (const Metric &m : metrics)
    if (m.name == name)
      return m.value;
  ADD_FAILURE() << "no metric " << name;
  return 0;
}

TEST(Progress, LinesHaveTheDocumentedFormat) {
  EXPECT_EQ(train::formatDuration(121), "2m01s");
  EXPECT_EQ(train::formatDuration(45), "45s");
  EXPECT_EQ(train::formatDuration(3720), "1h02m");
  EXPECT_EQ(train::formatDuration(-1), "?");
  EXPECT_EQ(train::formatValue(0.43121), "0.4312");
  EXPECT_EQ(train::formatValue(2.113e-5), "2.113e-05");
  EXPECT_EQ(train::formatValue(0), "0.0000");
  EXPECT_EQ(train::progressLine(1200, 5000,
                                {{"loss", 0.4312}, {"accuracy", 0.86}}, 1873.4,
                                121),
            "step 1200/5000  loss 0.4312  accuracy 0.8600  1873 img/s  ETA "
            "2m01s");
  EXPECT_EQ(train::evalLine(5000, {{"loss", 0.312}, {"accuracy", 0.8874}}),
            "eval  step 5000  loss 0.3120  accuracy 0.8874");
  EXPECT_EQ(train::finalLine(5000, {{"loss", 0.312}, {"top 5", 0.8874}},
                             1873.24, 133.46),
            "final: steps=5000 loss=0.3120 top_5=0.8874 "
            "examples_per_sec=1873.2 seconds=133.5");
}

TEST(Progress, TerminalRedrawsInPlace) {
  Capture out;
  train::ProgressWriter w(out.file(), 1);
  w.progress("step 1/2");
  w.progress("step 2/2");
  w.line("final: steps=2");
  EXPECT_EQ(out.text(), "\rstep 1/2\x1b[K\rstep 2/2\x1b[K\nfinal: steps=2\n");
  Capture plain;
  train::ProgressWriter p(plain.file(), 0);
  p.progress("step 1/2");
  p.line("final: steps=2");
  EXPECT_EQ(plain.text(), "step 1/2\nfinal: steps=2\n");
}

TEST(Schedule, LearningRateSchedules) {
  plan::Schedule s;
  s.set_kind("constant");
  s.set_learning_rate(0.1);
  EXPECT_DOUBLE_EQ(train::scheduledLearningRate(s, 1000), 0.1);
  s.set_kind("exponential_decay");
  s.set_decay_steps(100);
  s.set_decay_rate(0.5);
  EXPECT_DOUBLE_EQ(train::scheduledLearningRate(s, 150),
                   0.1 * std::pow(0.5, 1.5));
  s.set_staircase(true);
  EXPECT_DOUBLE_EQ(train::scheduledLearningRate(s, 150), 0.05);
  plan::Schedule p;
  p.set_kind("piecewise_constant");
  p.add_boundaries(100);
  p.add_boundaries(200);
  p.add_values(1.0);
  p.add_values(0.5);
  p.add_values(0.25);
  EXPECT_EQ(train::scheduledLearningRate(p, 0), 1.0);
  EXPECT_EQ(train::scheduledLearningRate(p, 99), 1.0);
  EXPECT_EQ(train::scheduledLearningRate(p, 100), 0.5);
  EXPECT_EQ(train::scheduledLearningRate(p, 250), 0.25);
}

// Keras 3's CosineDecay, by hand: 0.1 * ((1 - 0.2) * 0.5 * (1 + cos(pi * s /
// 10)) + 0.2) with s held at 10; with a warmup from 0 to 0.5 over 4 steps,
// then the decay from 0.5 over 8 steps.
TEST(Schedule, CosineDecayAndItsWarmupAreKeras) {
  plan::Schedule c;
  c.set_kind("cosine_decay");
  c.set_learning_rate(0.1);
  c.set_decay_steps(10);
  c.set_alpha(0.2);
  EXPECT_DOUBLE_EQ(train::scheduledLearningRate(c, 0), 0.1);
  EXPECT_DOUBLE_EQ(train::scheduledLearningRate(c, 5), 0.06);
  // cos(pi / 5) = (1 + sqrt(5)) / 4.
  EXPECT_DOUBLE_EQ(train::scheduledLearningRate(c, 2),
                   0.1 * (0.8 * 0.5 * (1 + (1 + std::sqrt(5.0)) / 4) + 0.2));
  EXPECT_DOUBLE_EQ(train::scheduledLearningRate(c, 10), 0.02);
  EXPECT_DOUBLE_EQ(train::scheduledLearningRate(c, 1000), 0.02);
  c.set_learning_rate(0.0);
  c.set_decay_steps(8);
  c.set_alpha(0.1);
  c.set_warmup_target(0.5);
  c.set_warmup_steps(4);
  EXPECT_EQ(train::scheduledLearningRate(c, 0), 0.0);
  EXPECT_DOUBLE_EQ(train::scheduledLearningRate(c, 1), 0.125);
  EXPECT_DOUBLE_EQ(train::scheduledLearningRate(c, 4), 0.5);
  EXPECT_DOUBLE_EQ(train::scheduledLearningRate(c, 8), 0.275);
  EXPECT_DOUBLE_EQ(train::scheduledLearningRate(c, 12), 0.05);
  EXPECT_DOUBLE_EQ(train::scheduledLearningRate(c, 99), 0.05);
}

// The acceptance test of the loop: 200 steps of SGD on synthetic data.
TEST(Trainer, LogisticRegressionLearnsSyntheticData) {
  plan::Plan p = logisticRegressionPlan();
  Capture out;
  TrainOptions o;
  o.out = out.file();
  o.logEvery = 20;
  o.threads = 1;
  TrainReport r;
  FailureKind kind;
  const auto t0 = std::chrono::steady_clock::now();
  Status s = train::train(p, o, &r, &kind);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(kind, FailureKind::kNone);
  EXPECT_EQ(r.steps, 200);
  ASSERT_EQ(r.progress.size(), 10u);
  const double firstLoss = metric(r.progress.front().second, "loss");
  const double lastLoss = metric(r.progress.back().second, "loss");
  EXPECT_LT(lastLoss, 0.5 * firstLoss)
      << "loss " << firstLoss << " -> " << lastLoss;
  EXPECT_GT(metric(r.progress.back().second, "accuracy"), 0.75)
      << "chance is 1/3";
  // Evaluated at 100 and at the end, on held-out examples.
  ASSERT_EQ(r.evals.size(), 2u);
  EXPECT_EQ(r.evals[0].first, 100);
  EXPECT_EQ(r.evals[1].first, 200);
  EXPECT_TRUE(r.finalFromEval);
  EXPECT_GT(metric(r.finalMetrics, "accuracy"), 0.75);
  EXPECT_LT(metric(r.finalMetrics, "loss"), 0.6);
  EXPECT_GT(r.examplesPerSec, 0);
  std::printf("[ info ] 200 steps of batch 32 in %.3f s: %.0f steps/s, "
              "%.0f examples/s (eval included: %.3f s)\n",
              r.seconds, 200 / seconds, r.examplesPerSec, seconds);

  std::vector<std::string> ls = lines(out.text());
  ASSERT_GE(ls.size(), 3u);
  EXPECT_EQ(ls[0].rfind("training logistic_regression: 200 steps, batch 32", 0),
            0u)
      << ls[0];
  EXPECT_EQ(ls.back(), r.finalLine);
  EXPECT_EQ(r.finalLine.rfind("final: steps=200 loss=", 0), 0u) << r.finalLine;
  EXPECT_NE(r.finalLine.find(" accuracy="), std::string::npos);
  EXPECT_NE(r.finalLine.find(" examples_per_sec="), std::string::npos);
  int progressLines = 0, evalLines = 0;
  for (const std::string &l : ls) {
    progressLines += l.rfind("step ", 0) == 0;
    evalLines += l.rfind("eval  step ", 0) == 0;
  }
  EXPECT_EQ(progressLines, 10);
  EXPECT_EQ(evalLines, 2);
}

// Not a benchmark with a bound (the machine is shared), but the figure the
// executor's overhead shows in: steps per second of the test model.
TEST(Trainer, StepRateOfTheTestModel) {
  LogisticRegressionOptions lo;
  lo.steps = 5000;
  lo.withEval = false;
  plan::Plan p = logisticRegressionPlan(lo);
  TrainOptions o;
  o.quiet = true;
  o.threads = 1;
  Capture out;
  o.out = out.file();
  TrainReport r;
  ASSERT_TRUE(train::train(p, o, &r).isOk());
  std::printf("[ info ] logistic regression (batch 32, 4 -> 3), 1 thread: "
              "%.0f steps/s, %.1f us per step\n",
              r.examplesPerSec / 32, 32e6 / r.examplesPerSec);
  EXPECT_GT(r.examplesPerSec, 0);

  // The same steps without the data pipeline: the executor and kernels.
  std::unique_ptr<train::Trainer> t;
  ASSERT_TRUE(train::Trainer::create(p, o, &t).isOk());
  exec::Executor &e = t->trainExecutor();
  Tensor *x = nullptr, *y = nullptr;
  ASSERT_TRUE(e.prepareFeed(e.findFeed("x"), 32, &x).isOk());
  ASSERT_TRUE(e.prepareFeed(e.findFeed("y"), 32, &y).isOk());
  for (int i = 0; i < 32 * 4; ++i)
    x->data<float>()[i] = float(i % 7) / 7.0f;
  for (int i = 0; i < 32; ++i)
    y->data<int32_t>()[i] = i % 3;
  const int kSteps = 20000;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kSteps; ++i)
    ASSERT_TRUE(e.run(uint64_t(i)).isOk());
  const double us = std::chrono::duration<double, std::micro>(
                        std::chrono::steady_clock::now() - t0)
                        .count() /
                    kSteps;
  std::printf("[ info ] executor alone: %.1f us per step of %d ops (%.2f us "
              "per op)\n",
              us, e.numRunOps(), us / e.numRunOps());
}

TEST(Trainer, SameSeedSameRun) {
  LogisticRegressionOptions lo;
  lo.steps = 30;
  lo.withEval = false;
  plan::Plan p = logisticRegressionPlan(lo);
  TrainOptions o;
  o.quiet = true;
  Capture a, b;
  TrainReport ra, rb;
  o.out = a.file();
  ASSERT_TRUE(train::train(p, o, &ra).isOk());
  o.out = b.file();
  ASSERT_TRUE(train::train(p, o, &rb).isOk());
  EXPECT_EQ(metric(ra.finalMetrics, "loss"), metric(rb.finalMetrics, "loss"));
  EXPECT_FALSE(ra.finalFromEval);
  // Quiet: only the final line.
  EXPECT_EQ(lines(a.text()).size(), 1u);
}

TEST(Trainer, LearningRateFeedFollowsTheSchedule) {
  LogisticRegressionOptions lo;
  lo.steps = 40;
  lo.withEval = false;
  lo.learningRateFeed = true;
  plan::Plan p = logisticRegressionPlan(lo);
  // A zero learning rate from step 0 on: nothing may change.
  plan::Schedule *s =
      p.mutable_training()->mutable_optimizer()->mutable_learning_rate();
  s->set_kind("piecewise_constant");
  s->add_boundaries(1000);
  s->add_values(0.0);
  s->add_values(1.0);
  TrainOptions o;
  o.quiet = true;
  Capture out;
  o.out = out.file();
  std::unique_ptr<train::Trainer> t;
  ASSERT_TRUE(train::Trainer::create(p, o, &t).isOk());
  TrainReport r;
  Status st = t->run(&r);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_NEAR(metric(r.finalMetrics, "loss"), std::log(3.0), 1e-5);
  const Tensor *W = t->variables().find("W");
  for (int i = 0; i < W->numElements(); ++i)
    EXPECT_EQ(W->data<float>()[i], 0.0f);
}

TEST(Trainer, StopFlagEndsAfterTheCurrentStep) {
  plan::Plan p = logisticRegressionPlan();
  std::atomic<bool> stop{true};
  TrainOptions o;
  o.stop = &stop;
  Capture out;
  o.out = out.file();
  TrainReport r;
  ASSERT_TRUE(train::train(p, o, &r).isOk());
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.steps, 0);
  EXPECT_EQ(lines(out.text()).back().rfind("final: steps=0 ", 0), 0u);
}

TEST(Trainer, DataThatDoesNotFitTheInputsIsADataError) {
  plan::Plan p = logisticRegressionPlan();
  data::SyntheticOptions so;
  so.exampleShape = {5};
  so.numClasses = 3;
  auto d = data::SyntheticDataset::create(so);
  ASSERT_TRUE(d.ok());
  TrainOptions o;
  o.trainData = std::make_shared<data::SyntheticDataset>(std::move(d).value());
  Capture out;
  o.out = out.file();
  TrainReport r;
  FailureKind kind;
  Status s = train::train(p, o, &r, &kind);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(kind, FailureKind::kData);
  EXPECT_NE(s.message().find("input 'x' of type f32[B,4] holds 4 values per "
                             "example, but synthetic"),
            std::string::npos)
      << s.message();
}

TEST(Trainer, MissingIdxDirectoryIsADataError) {
  plan::Plan p = logisticRegressionPlan();
  plan::DataSource *d = p.mutable_training()->mutable_data();
  d->set_kind("idx");
  d->set_path("/nonexistent/fashion-mnist");
  TrainOptions o;
  Capture out;
  o.out = out.file();
  TrainReport r;
  FailureKind kind;
  Status s = train::train(p, o, &r, &kind);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(kind, FailureKind::kData);
  EXPECT_NE(s.message().find("/nonexistent/fashion-mnist"), std::string::npos)
      << s.message();
}

TEST(Trainer, KernelErrorDuringAStepIsARuntimeError) {
  // Labels up to 9 into a model of 3 classes.
  plan::Plan p = logisticRegressionPlan();
  data::SyntheticOptions so;
  so.exampleShape = {4};
  so.numClasses = 10;
  auto d = data::SyntheticDataset::create(so);
  ASSERT_TRUE(d.ok());
  TrainOptions o;
  o.trainData = std::make_shared<data::SyntheticDataset>(std::move(d).value());
  Capture out;
  o.out = out.file();
  TrainReport r;
  FailureKind kind;
  Status s = train::train(p, o, &r, &kind);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(kind, FailureKind::kRuntime);
  EXPECT_EQ(s.message().rfind(std::string("step 1: ") + kXentLocation, 0), 0u)
      << s.message();
}

TEST(Trainer, CsvColumnsFeedTheInputsInOrder) {
  // The label column goes to the last input (y), the 4 others to x.
  plan::Plan p = logisticRegressionPlan();
  std::string path = (std::filesystem::temp_directory_path() /
                      ("dtf-exec-" + std::to_string(::getpid()) + ".csv"))
                         .string();
  {
    std::ofstream f(path);
    f << "f0,f1,f2,f3,label\n";
    for (int i = 0; i < 90; ++i)
      f << (i % 3 == 0) << "," << (i % 3 == 1) << "," << (i % 3 == 2) << ",0.5,"
        << i % 3 << "\n";
  }
  plan::DataSource *d = p.mutable_training()->mutable_data();
  d->Clear();
  d->set_kind("csv");
  d->set_path(path);
  d->set_header(true);
  d->set_label("label");
  p.mutable_training()->clear_eval();
  p.mutable_training()->set_steps(60);
  TrainOptions o;
  o.quiet = true;
  Capture out;
  o.out = out.file();
  TrainReport r;
  Status s = train::train(p, o, &r);
  std::filesystem::remove(path);
  ASSERT_TRUE(s.isOk()) << s.message();
  // One-hot features: trivially learnable.
  EXPECT_GT(metric(r.finalMetrics, "accuracy"), 0.95);
}

// Integer ids into an embedding table: synthetic data draws random ids below
// the table's rows (an id outside it would be a kernel error).
TEST(Trainer, SyntheticIdsStayInsideTheirTable) {
  plan::Plan p;
  p.set_format_version(1);
  p.set_model("bag_of_ids");
  addVariable(&p, "table", plan::F32, {50, 8}, "uniform");
  addVariable(&p, "W", plan::F32, {8, 3}, "glorot_uniform");
  ProgramBuilder g(p.mutable_train_step());
  int ids = g.input("ids", plan::I64, {-1, 5});
  int y = g.input("y", plan::I32, {-1});
  int table = g.readVariable("table", plan::F32, {50, 8});
  int W = g.readVariable("W", plan::F32, {8, 3});
  int rows = g.compute("dtf.gather", {table, ids}, plan::F32, {-1, 5, 8});
  int bag = g.value(plan::F32, {-1, 8});
  setAttr(g.op("dtf.mean", {rows}, {bag}), "axes", {1});
  int logits = g.compute("dtf.matmul", {bag, W}, plan::F32, {-1, 3});
  int xent = g.compute("dtf.sparse_softmax_cross_entropy", {logits, y},
                       plan::F32, {-1});
  g.fetch("loss", g.compute("dtf.mean", {xent}, plan::F32, {}));
  plan::Training *t = p.mutable_training();
  t->set_batch(16);
  t->set_steps(20);
  t->mutable_data()->set_kind("synthetic");
  t->mutable_data()->set_examples(100);
  TrainOptions o;
  Capture out;
  o.out = out.file();
  TrainReport r;
  Status s = train::train(p, o, &r);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(r.steps, 20);
  EXPECT_NE(out.text().find("ids below 50, y below 3"), std::string::npos)
      << out.text();
  EXPECT_NE(out.text().find("ids <- features, y <- labels"), std::string::npos)
      << out.text();
}

TEST(Trainer, PlanWithoutStepsNeedsSteps) {
  plan::Plan p = logisticRegressionPlan();
  p.mutable_training()->set_steps(0);
  TrainOptions o;
  std::unique_ptr<train::Trainer> t;
  FailureKind kind;
  Status s = train::Trainer::create(p, o, &t, &kind);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(kind, FailureKind::kUsage);
  EXPECT_NE(s.message().find("--steps"), std::string::npos);
  o.steps = 0; // evaluate only
  Capture out;
  o.out = out.file();
  TrainReport r;
  s = train::train(p, o, &r, &kind);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(r.evals.size(), 1u);
  EXPECT_NEAR(metric(r.finalMetrics, "loss"), std::log(3.0), 1e-5);
}

// --- dtf-run, the binary ------------------------------------------------

struct RunResult {
  int exitCode = -1;
  std::string out, err;
};

std::string slurp(const std::string &path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class DtfRun : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("dtf-run-test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string writePlan(const plan::Plan &p) {
    std::string path = dir_ + "/plan.bin";
    std::ofstream f(path, std::ios::binary);
    f << plan::sealPlan(p); // as dtfc writes it
    return path;
  }

  // Runs dtf-run with `args`; with `interruptAfter` > 0, sends SIGINT that
  // many seconds after training has started.
  RunResult run(std::vector<std::string> args, double interruptAfter = 0) {
    std::string outPath = dir_ + "/stdout", errPath = dir_ + "/stderr";
    // Everything the child needs is made before fork: it only execs.
    std::string bin = DTF_RUN_PATH;
    std::vector<char *> argv;
    argv.push_back(bin.data());
    for (std::string &a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    int outFd = ::open(outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int errFd = ::open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = fork();
    if (pid == 0) {
      dup2(outFd, 1);
      dup2(errFd, 2);
      execv(bin.c_str(), argv.data());
      _exit(127);
    }
    ::close(outFd);
    ::close(errFd);
    if (interruptAfter > 0) {
      // Once training has started (its first line is out, so the handler is
      // in place), wait a little more and press Ctrl-C.
      for (int i = 0; i < 600 && std::filesystem::file_size(outPath) == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::this_thread::sleep_for(
          std::chrono::duration<double>(interruptAfter));
      kill(pid, SIGINT);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    RunResult r;
    r.exitCode =
        WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(outPath);
    r.err = slurp(errPath);
    return r;
  }

  std::string dir_;
};

TEST_F(DtfRun, TrainsAPlanAndEndsWithTheFinalLine) {
  std::string plan = writePlan(logisticRegressionPlan());
  RunResult r =
      run({plan, "--steps", "120", "--log-every", "40", "--threads", "1"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::vector<std::string> ls = lines(r.out);
  ASSERT_FALSE(ls.empty());
  EXPECT_EQ(ls.back().rfind("final: steps=120 loss=", 0), 0u) << r.out;
  int progress = 0;
  for (const std::string &l : ls)
    progress += l.rfind("step ", 0) == 0;
  EXPECT_EQ(progress, 3) << r.out;
  EXPECT_TRUE(r.err.empty()) << r.err;
  // --quiet: the final line only.
  r = run({plan, "--steps=10", "--quiet"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(lines(r.out).size(), 1u) << r.out;
}

TEST_F(DtfRun, ExitCodesSayWhatFailed) {
  RunResult r = run({"--bogus"});
  EXPECT_EQ(r.exitCode, 2);
  r = run({});
  EXPECT_EQ(r.exitCode, 2);
  std::string plan = writePlan(logisticRegressionPlan());
  // A cluster file that is not there: a usage error naming it.
  r = run({plan, "--cluster", dir_ + "/no-such-cluster.json"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("no-such-cluster.json: cannot open the cluster file"),
            std::string::npos)
      << r.err;
  r = run({dir_ + "/missing.bin"});
  EXPECT_EQ(r.exitCode, 4);
  EXPECT_NE(r.err.find("missing.bin"), std::string::npos);
  // A truncated plan.
  {
    std::string bytes = plan::sealPlan(logisticRegressionPlan());
    std::ofstream f(dir_ + "/cut.bin", std::ios::binary);
    f << bytes.substr(0, bytes.size() / 2);
  }
  r = run({dir_ + "/cut.bin"});
  EXPECT_EQ(r.exitCode, 4);
  EXPECT_NE(r.err.find("dtf-run: error: " + dir_ + "/cut.bin"),
            std::string::npos)
      << r.err;
  // Missing data.
  plan::Plan p = logisticRegressionPlan();
  p.mutable_training()->mutable_data()->set_kind("idx");
  p.mutable_training()->mutable_data()->set_path(dir_ + "/no-such-data");
  r = run({writePlan(p)});
  EXPECT_EQ(r.exitCode, 4);
  EXPECT_NE(r.err.find("no-such-data"), std::string::npos) << r.err;
  // An op of the dialect without a kernel (dtf.if_training never reaches a
  // plan from dtfc: dtf-autodiff replaces it).
  p = logisticRegressionPlan();
  p.mutable_train_step()->mutable_ops(5)->set_name("dtf.if_training");
  r = run({writePlan(p)});
  EXPECT_EQ(r.exitCode, 3);
  EXPECT_NE(r.err.find("test.dtf:6:1: dtf.if_training"), std::string::npos)
      << r.err;
  // A name the dialect lacks: the plan is refused as it is read.
  p = logisticRegressionPlan();
  p.mutable_train_step()->mutable_ops(5)->set_name("dtf.frobnicate");
  r = run({writePlan(p)});
  EXPECT_EQ(r.exitCode, 4);
  EXPECT_NE(r.err.find("test.dtf:6:1: dtf.frobnicate is not an op of the dtf "
                       "dialect"),
            std::string::npos)
      << r.err;
  // A newer format.
  p = logisticRegressionPlan();
  const uint32_t newer = plan::kPlanFormatVersion + 1;
  p.set_format_version(newer);
  r = run({writePlan(p)});
  EXPECT_EQ(r.exitCode, 4);
  EXPECT_NE(r.err.find("newer dtfc (format " + std::to_string(newer) + ")"),
            std::string::npos)
      << r.err;
}

TEST_F(DtfRun, CtrlCStopsAndPrintsTheFinalLine) {
  LogisticRegressionOptions lo;
  lo.steps = 100000000;
  lo.withEval = false;
  std::string plan = writePlan(logisticRegressionPlan(lo));
  RunResult r = run({plan, "--threads", "1"}, 0.5);
  EXPECT_EQ(r.exitCode, 130) << r.err;
  std::vector<std::string> ls = lines(r.out);
  ASSERT_FALSE(ls.empty());
  EXPECT_EQ(ls.back().rfind("final: steps=", 0), 0u) << r.out;
}

} // namespace
} // namespace dtf::testing
