// Checkpoints in the single-machine loop: saved on the plan's schedule and at
// the end, restored at start, and a restored run ends exactly where an
// uninterrupted one does.
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/train/Trainer.h"
#include "tests/unit/exec/TestPlans.h"

#include <gtest/gtest.h>

// Asserts an ok Status, printing its message otherwise.
#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    ::dtf::Status s_ = (expr);                                                 \
    ASSERT_TRUE(s_.isOk()) << s_.message();                                    \
  } while (false)
#define EXPECT_OK(expr)                                                        \
  do {                                                                         \
    ::dtf::Status s_ = (expr);                                                 \
    EXPECT_TRUE(s_.isOk()) << s_.message();                                    \
  } while (false)

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdlib.h>
#include <unistd.h>

namespace dtf::testing {
namespace {

using train::FailureKind;
using train::TrainOptions;
using train::TrainReport;

class TrainerCheckpointTest : public ::testing::Test {
protected:
  void SetUp() override {
    const char *tmp = std::getenv("TMPDIR");
    std::string base =
        std::string(tmp && *tmp ? tmp : "/tmp") + "/dtf-trainer-ckpt-XXXXXX";
    ASSERT_NE(::mkdtemp(base.data()), nullptr);
    dir_ = base;
    LogisticRegressionOptions lo;
    lo.steps = 200;
    lo.withEval = false;
    plan_ = logisticRegressionPlan(lo);
    plan_.mutable_training()->set_checkpoint_every(50);
    plan_.mutable_training()->set_checkpoint_unit("steps");
    plan_.mutable_training()->set_checkpoint_keep(2);
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }

  // Trains `steps` steps (with the model dir when `withDir`); the output
  // goes to `out`, the final W and b to `w` and `b` when given.
  Status run(int64_t steps, bool withDir, TrainReport *report,
             std::string *out = nullptr, Tensor *w = nullptr,
             Tensor *b = nullptr, FailureKind *kind = nullptr,
             bool fresh = false) {
    std::FILE *f = std::tmpfile();
    TrainOptions o;
    o.out = f;
    o.steps = steps;
    o.threads = 1;
    o.logEvery = 1000;
    o.interactive = 0;
    o.fresh = fresh;
    o.restore = restore_;
    if (withDir)
      o.modelDir = dir_;
    std::unique_ptr<train::Trainer> trainer;
    Status s = train::Trainer::create(plan_, o, &trainer, kind);
    if (s.isOk())
      s = trainer->run(report, kind);
    if (s.isOk() && w)
      *w = copy(*trainer->variables().find("W"));
    if (s.isOk() && b)
      *b = copy(*trainer->variables().find("b"));
    if (out) {
      std::fflush(f);
      std::rewind(f);
      char buf[4096];
      size_t n;
      out->clear();
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
        out->append(buf, n);
    }
    std::fclose(f);
    return s;
  }
  static Tensor copy(const Tensor &t) {
    Tensor c = Tensor::allocate(t.dtype(), t.shape());
    std::memcpy(c.rawData(), t.rawData(), t.byteSize());
    return c;
  }
  static bool sameBytes(const Tensor &a, const Tensor &b) {
    return a.shape() == b.shape() &&
           std::memcmp(a.rawData(), b.rawData(), a.byteSize()) == 0;
  }

  // Flips the last byte of tensor "b" in the data file of checkpoint
  // `step` (the file's last tensor: 'W' < 'b'); its size stays.
  void damageB(int64_t step) {
    const std::string path =
        dir_ + "/ckpt-" + std::to_string(step) + ".data-0-of-1";
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const std::streamoff at = f.tellg() - std::streamoff(20 + 4 + 1);
    f.seekg(at);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x01;
    f.seekp(at);
    f.write(&c, 1);
  }

  std::string dir_;
  plan::Plan plan_;
  checkpoint::RestorePolicy restore_ = checkpoint::RestorePolicy::kLatest;
};

TEST_F(TrainerCheckpointTest, RestoredRunEndsWhereAnUninterruptedOneDoes) {
  // 120 steps: saved at 50 and 100 by the plan's policy, at 120 at the end;
  // keep 2.
  TrainReport first;
  std::string out;
  Status s = run(120, true, &first, &out);
  ASSERT_OK(s);
  EXPECT_EQ(first.restoredStep, -1);
  EXPECT_EQ(first.checkpoints, (std::vector<int64_t>{50, 100, 120}));
  std::vector<int64_t> steps;
  ASSERT_OK(checkpoint::listCheckpoints(dir_, &steps));
  EXPECT_EQ(steps, (std::vector<int64_t>{100, 120}));

  // Again to 200: restored at 120, 80 more steps on the data an
  // uninterrupted run would have had (120 steps = 1 epoch and 57 batches).
  TrainReport second;
  Tensor w, b;
  s = run(200, true, &second, &out, &w, &b);
  ASSERT_OK(s);
  EXPECT_EQ(second.restoredStep, 120);
  EXPECT_EQ(second.steps, 200);
  EXPECT_EQ(second.checkpoints, (std::vector<int64_t>{150, 200}));
  EXPECT_NE(out.find("restored checkpoint ckpt-120 from " + dir_ +
                     "; continuing at step 120\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("final: steps=200 "), std::string::npos) << out;

  TrainReport straight;
  Tensor w2, b2;
  s = run(200, false, &straight, nullptr, &w2, &b2);
  ASSERT_OK(s);
  EXPECT_TRUE(sameBytes(w, w2)) << "W differs from an uninterrupted run";
  EXPECT_TRUE(sameBytes(b, b2)) << "b differs from an uninterrupted run";

  // A step count already reached trains nothing and saves nothing.
  TrainReport third;
  Tensor w3;
  s = run(200, true, &third, &out, &w3);
  ASSERT_OK(s);
  EXPECT_EQ(third.restoredStep, 200);
  EXPECT_EQ(third.steps, 200);
  EXPECT_TRUE(third.checkpoints.empty());
  EXPECT_TRUE(sameBytes(w3, w));
}

TEST_F(TrainerCheckpointTest, WithoutAPolicyOnlyTheEndIsSaved) {
  plan_.mutable_training()->set_checkpoint_every(0);
  plan_.mutable_training()->set_checkpoint_keep(0);
  TrainReport r;
  ASSERT_OK(run(60, true, &r));
  EXPECT_EQ(r.checkpoints, (std::vector<int64_t>{60}));
  // Keep defaults to 5.
  for (int64_t steps = 70; steps <= 120; steps += 10)
    ASSERT_OK(run(steps, true, &r));
  std::vector<int64_t> steps;
  ASSERT_OK(checkpoint::listCheckpoints(dir_, &steps));
  EXPECT_EQ(steps, (std::vector<int64_t>{80, 90, 100, 110, 120}));
}

TEST_F(TrainerCheckpointTest, DamagedCheckpointStopsTheRunNamingTheTensor) {
  TrainReport r;
  ASSERT_OK(run(100, true, &r));
  damageB(100);
  const std::string path = dir_ + "/ckpt-100.data-0-of-1";
  FailureKind kind = FailureKind::kNone;
  Status s = run(200, true, &r, nullptr, nullptr, nullptr, &kind);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(kind, FailureKind::kData);
  EXPECT_NE(s.message().find("tensor 'b'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("pass --restore=latest-valid to restore ckpt-50"),
            std::string::npos)
      << s.message();
  // Nothing was trained or saved over it.
  std::vector<int64_t> steps;
  ASSERT_OK(checkpoint::listCheckpoints(dir_, &steps));
  EXPECT_EQ(steps, (std::vector<int64_t>{50, 100}));
}

TEST_F(TrainerCheckpointTest, LatestValidTakesTheNewestWholeOne) {
  TrainReport r;
  ASSERT_OK(run(100, true, &r));
  damageB(100);
  restore_ = checkpoint::RestorePolicy::kLatestValid;
  std::string out;
  ASSERT_OK(run(120, true, &r, &out));
  EXPECT_EQ(r.restoredStep, 50);
  EXPECT_NE(out.find("restored checkpoint ckpt-50 from " + dir_ +
                     "; continuing at step 50"),
            std::string::npos)
      << out;
}

TEST_F(TrainerCheckpointTest, OnlyCheckpointDamagedIsRefusedNotAFreshStart) {
  TrainReport r;
  ASSERT_OK(run(50, true, &r));
  damageB(50);
  for (auto policy : {checkpoint::RestorePolicy::kLatest,
                      checkpoint::RestorePolicy::kLatestValid}) {
    restore_ = policy;
    FailureKind kind = FailureKind::kNone;
    Status s = run(100, true, &r, nullptr, nullptr, nullptr, &kind);
    ASSERT_FALSE(s.isOk()) << "trained from the initializers over a damaged "
                              "checkpoint";
    EXPECT_EQ(kind, FailureKind::kData);
    EXPECT_NE(s.message().find("none is whole"), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("pass --fresh to start over"), std::string::npos)
        << s.message();
  }
  std::vector<int64_t> steps;
  std::vector<std::string> skipped;
  ASSERT_OK(checkpoint::listCheckpoints(dir_, &steps, &skipped));
  EXPECT_EQ(steps, (std::vector<int64_t>{50})); // its size is still right
  EXPECT_FALSE(::access((dir_ + "/ckpt-100.index").c_str(), F_OK) == 0);
}

TEST_F(TrainerCheckpointTest, CheckpointOfAnotherModelIsRefused) {
  Tensor other = Tensor::zeros(DType::F32, {3});
  ASSERT_OK(checkpoint::saveCheckpoint(
      dir_, 10, {checkpoint::SavedTensor::whole("other", other)}, 0));
  TrainReport r;
  FailureKind kind = FailureKind::kNone;
  Status s = run(20, true, &r, nullptr, nullptr, nullptr, &kind);
  EXPECT_EQ(kind, FailureKind::kData);
  EXPECT_NE(s.message().find("has no variable 'W'"), std::string::npos)
      << s.message();
  // --fresh sets it aside and starts over.
  std::string out;
  s = run(20, true, &r, &out, nullptr, nullptr, &kind, /*fresh=*/true);
  ASSERT_OK(s);
  EXPECT_EQ(r.restoredStep, -1);
  EXPECT_NE(out.find("moved the checkpoints of the previous run to " + dir_ +
                     "/previous-run-1"),
            std::string::npos)
      << out;
  int64_t latest = 0;
  ASSERT_OK(checkpoint::findLatest(dir_ + "/previous-run-1", &latest));
  EXPECT_EQ(latest, 10);
  ASSERT_OK(checkpoint::findLatest(dir_, &latest));
  EXPECT_EQ(latest, 20);
}

} // namespace
} // namespace dtf::testing
