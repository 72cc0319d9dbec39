// SplitLedger (exactly-once data): leases, consumption, re-sends by reason,
// and the checkpointed form.
#include "runtime/distributed/SplitLedger.h"

#include <gtest/gtest.h>

namespace dtf::dist::ps {
namespace {

using Clock = SplitLedger::Clock;

// 10 examples in batches of 4: 3 batches per epoch; 2 epochs.
SplitLedger shaped() {
  SplitLedger l;
  EXPECT_EQ(l.configure({10, 4, 3, 6}), "");
  return l;
}

TEST(SplitLedger, HandsOutEachBatchOnceAndIsDoneWhenAllAreConsumed) {
  SplitLedger l = shaped();
  std::vector<int64_t> a, b, none;
  l.lease("worker.0", 1, 4, Clock::now(), &a);
  l.lease("worker.1", 2, 4, Clock::now(), &b);
  EXPECT_EQ(a, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(b, (std::vector<int64_t>{4, 5}));
  l.lease("worker.1", 2, 4, Clock::now(), &none);
  EXPECT_TRUE(none.empty());
  EXPECT_FALSE(l.done());
  EXPECT_TRUE(l.holds("worker.0", 1, {0, 3}));
  EXPECT_FALSE(l.holds("worker.1", 2, {0}));
  l.consume({0, 1, 2, 3, 4, 5});
  EXPECT_TRUE(l.done());
  const std::vector<std::string> lines = l.takeEpochLines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("data epoch 0 done: 10 examples"), std::string::npos)
      << lines[0];
}

TEST(SplitLedger, ARestartedWorkerADroppedGradientAndALostUpdateGoOutAgain) {
  SplitLedger l = shaped();
  std::vector<int64_t> got;
  l.lease("worker.1", 1, 2, Clock::now(), &got); // 0, 1
  // worker.1 restarted (a new run): its dead self's batches come first.
  l.lease("worker.1", 9, 1, Clock::now(), &got);
  EXPECT_EQ(got, (std::vector<int64_t>{0}));
  EXPECT_FALSE(l.holds("worker.1", 1, {1})); // the old run holds nothing
  // A dropped gradient of another run's batch leaves that lease alone.
  l.release("worker.0", 3, {0}, SplitLedger::kDroppedGradient);
  EXPECT_TRUE(l.holds("worker.1", 9, {0}));
  l.release("worker.1", 9, {0}, SplitLedger::kDroppedGradient);
  // Sync: joined, then the update is lost with a restore of the ps.
  l.lease("worker.1", 9, 1, Clock::now(), &got);
  EXPECT_EQ(got, (std::vector<int64_t>{0}));
  l.join(got);
  EXPECT_FALSE(l.holds("worker.1", 9, {0})); // the update's, not the worker's
  l.loseUpdate();
  EXPECT_EQ(l.resent(SplitLedger::kDeadWorker), 2);
  EXPECT_EQ(l.resent(SplitLedger::kDroppedGradient), 1);
  EXPECT_EQ(l.resent(SplitLedger::kLostUpdate), 1);
}

TEST(SplitLedger, AnExpiredLeaseGoesToAnotherWorker) {
  SplitLedger l = shaped();
  std::vector<int64_t> got;
  const auto t0 = Clock::now();
  l.lease("worker.0", 1, 1, t0, &got);
  l.expire(t0 + std::chrono::seconds(61), 60);
  l.lease("worker.1", 2, 1, t0 + std::chrono::seconds(61), &got);
  EXPECT_EQ(got, (std::vector<int64_t>{0}));
  EXPECT_FALSE(l.holds("worker.0", 1, {0}));
}

TEST(SplitLedger, ARestoreKeepsWhatTheCheckpointSawAndHandsOutTheRest) {
  SplitLedger l = shaped();
  std::vector<int64_t> got;
  l.lease("worker.0", 1, 4, Clock::now(), &got); // 0..3
  l.consume({0, 2});
  const std::vector<int64_t> saved = l.save();
  l.consume({1, 3}); // applied after the checkpoint: lost with the ps
  SplitLedger fresh;
  EXPECT_EQ(fresh.restore(saved), "");
  EXPECT_EQ(fresh.consumed(), 2);
  EXPECT_EQ(l.restore(saved), "");
  EXPECT_EQ(l.consumed(), 2);
  l.lease("worker.0", 1, 3, Clock::now(), &got);
  EXPECT_EQ(got, (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(l.resent(SplitLedger::kLostUpdate), 2);
  // Another cut of the data is refused, naming both.
  EXPECT_NE(l.configure({12, 4, 3, 6}).find("the caller 12 into 3 of 4"),
            std::string::npos);
  std::vector<int64_t> bad = saved;
  bad[0] = 7;
  EXPECT_NE(fresh.restore(bad).find("malformed"), std::string::npos);
}

TEST(SplitLedger, TheReSendCountsSurviveARestartedPs0) {
  SplitLedger l = shaped();
  std::vector<int64_t> got;
  l.lease("worker.0", 1, 2, Clock::now(), &got); // 0, 1
  l.lease("worker.0", 2, 1, Clock::now(), &got); // run 1 died: 0, 1 back
  ASSERT_EQ(l.resent(SplitLedger::kDeadWorker), 2);
  const std::vector<int64_t> saved = l.save();
  EXPECT_EQ(saved[0], 2); // the layout with counts
  SplitLedger restarted;  // a new ps 0 process
  ASSERT_EQ(restarted.restore(saved), "");
  EXPECT_EQ(restarted.resent(SplitLedger::kDeadWorker), 2);
  // This process handed nothing out: nothing counts as lost with the ps.
  EXPECT_EQ(restarted.resent(SplitLedger::kLostUpdate), 0);
  // Layout 1 (no counts) is still read; counts then start at 0.
  std::vector<int64_t> v1(saved.begin(), saved.begin() + 7 + saved[6]);
  v1[0] = 1;
  SplitLedger old;
  ASSERT_EQ(old.restore(v1), "");
  EXPECT_EQ(old.resent(SplitLedger::kDeadWorker), 0);
  // Counts that do not add up are refused.
  std::vector<int64_t> bad = saved;
  bad.pop_back();
  EXPECT_NE(old.restore(bad).find("malformed"), std::string::npos);
}

} // namespace
} // namespace dtf::dist::ps
