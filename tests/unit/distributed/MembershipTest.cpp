// Membership (which workers a ps counts live) and the sync rule that follows
// it: min(replicas_to_aggregate, live workers), averaged over the gradients
// an update has.
#include "runtime/distributed/Membership.h"
#include "runtime/distributed/SyncAggregator.h"

#include <gtest/gtest.h>

namespace dtf::dist::ps {
namespace {

using Clock = Membership::Clock;
using std::chrono::seconds;

TEST(Membership, WorkersJoinByCallingAndGoByLeavingFinishingOrSilence) {
  Membership m(/*timeoutSeconds=*/2);
  const Clock::time_point t0 = Clock::now();
  m.expect({"worker.0", "worker.1"}, t0);
  EXPECT_EQ(m.live(t0).size(), 2u);
  m.seen("worker.2", t0 + seconds(1));
  EXPECT_EQ(m.live(t0 + seconds(1)),
            (std::vector<std::string>{"worker.0", "worker.1", "worker.2"}));
  m.seen("worker.0", t0 + seconds(2));
  m.left("worker.2");
  // worker.1 never called: gone after the timeout; worker.0 called at 2.
  EXPECT_EQ(m.live(t0 + seconds(3)), (std::vector<std::string>{"worker.0"}));
  const std::vector<std::string> changes = m.takeChanges();
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0], "worker.2 joined: 3 live workers");
  EXPECT_EQ(changes[1], "worker.2 left: 2 live workers");
  EXPECT_EQ(changes[2], "worker.1 went silent (no call within the lease "
                        "timeout): 1 live worker");
  EXPECT_TRUE(m.takeChanges().empty());
  // A worker that left rejoins by calling; a finished one stays finished.
  m.seen("worker.2", t0 + seconds(4));
  m.finished("worker.0");
  m.seen("worker.0", t0 + seconds(4));
  EXPECT_EQ(m.live(t0 + seconds(4)), (std::vector<std::string>{"worker.2"}));
  EXPECT_EQ(m.finishedCount(), 1);
}

TEST(Membership, SyncUpdatesAverageTheConfiguredOrTheLiveWorkersIfFewer) {
  Membership m(60);
  const Clock::time_point t0 = Clock::now();
  EXPECT_EQ(m.replicasToAggregate(3, t0), 1); // nobody yet: at least 1
  m.expect({"worker.0", "worker.1"}, t0);
  EXPECT_EQ(m.replicasToAggregate(3, t0), 2);
  m.seen("worker.2", t0);
  m.seen("worker.3", t0);
  EXPECT_EQ(m.replicasToAggregate(3, t0), 3); // never more than configured
  m.left("worker.3");
  m.left("worker.2");
  m.left("worker.1");
  EXPECT_EQ(m.replicasToAggregate(3, t0), 1);
}

TEST(SyncAggregator, AnUpdateIsCompleteAtWhatTheMembershipNeedsAndAveragesIt) {
  SyncAggregator a(/*replicas=*/3, "");
  EXPECT_FALSE(a.complete(1)); // nothing joined
  std::vector<Tensor> g1 = {Tensor::allocate(DType::F32, {2})};
  g1[0].data<float>()[0] = 2;
  g1[0].data<float>()[1] = 4;
  std::vector<Tensor> g2 = {Tensor::allocate(DType::F32, {2})};
  g2[0].data<float>()[0] = 4;
  g2[0].data<float>()[1] = 8;
  a.add(g1, "worker.0", {false});
  a.add(g2, "worker.1", {false});
  EXPECT_FALSE(a.complete(3));
  EXPECT_TRUE(a.complete(2)); // a worker left: 2 are enough
  std::vector<Tensor> &avg = a.average();
  EXPECT_FLOAT_EQ(avg[0].data<float>()[0], 3); // over the 2 it has
  EXPECT_FLOAT_EQ(avg[0].data<float>()[1], 6);
  a.applied(0);
  EXPECT_EQ(a.shortUpdates(), 1);
  EXPECT_FALSE(a.complete(1));
}

} // namespace
} // namespace dtf::dist::ps
