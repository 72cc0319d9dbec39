// Scaling a running job: the scale request's checks, the order of the
// worker slots a scale counts, the ps re-shards the pid file refuses, and
// the launcher's --workers and --ps.
#include "runtime/cluster/Launcher.h"
#include "runtime/cluster/Scaling.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dtf::cluster {
namespace {

using ::testing::HasSubstr;

constexpr const char *kFourSlots =
    R"({"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223",
        "127.0.0.1:2224", "127.0.0.1:2225", "127.0.0.1:2226"]})";

ClusterSpec fourSlots() {
  ClusterSpec c;
  EXPECT_TRUE(ClusterSpec::parseJson(kFourSlots, "c.json", &c).isOk());
  return c;
}

TEST(Scaling, TheChiefComesFirstThenTheWorkersInClusterOrder) {
  ClusterSpec c = fourSlots();
  std::vector<TaskId> order = scalableTasks(c);
  ASSERT_EQ(order.size(), 4u);
  EXPECT_EQ(order[0].str(), "worker.0");
  EXPECT_EQ(order[3].str(), "worker.3");
  ASSERT_TRUE(c.setChief({"worker", 2}).isOk());
  order = scalableTasks(c);
  ASSERT_EQ(order.size(), 4u);
  EXPECT_EQ(order[0].str(), "worker.2");
  EXPECT_EQ(order[1].str(), "worker.0");
}

TEST(Scaling, ARequestNamesWorkersFromOneToTheSlots) {
  const ClusterSpec c = fourSlots();
  ScaleRequest r;
  ASSERT_TRUE(parseScaleRequest("worker=4\n", c, &r).isOk());
  EXPECT_EQ(r.job, "worker");
  EXPECT_EQ(r.count, 4);
  ASSERT_TRUE(parseScaleRequest("worker=1", c, &r).isOk());
  EXPECT_EQ(r.count, 1);
  r.count = 7;
  EXPECT_THAT(parseScaleRequest("worker=5", c, &r).message(),
              HasSubstr("N must be from 1 to 4 (the worker slots of c.json "
                        "on this machine, the chief counted), got '5'"));
  EXPECT_THAT(parseScaleRequest("worker=0", c, &r).message(),
              HasSubstr("got '0'"));
  EXPECT_THAT(parseScaleRequest("worker=two", c, &r).message(),
              HasSubstr("got 'two'"));
  EXPECT_THAT(parseScaleRequest("workers=2", c, &r).message(),
              HasSubstr("scale expects worker=N with N from 1 to 4"));
  EXPECT_EQ(r.count, 7); // a refused request changes nothing
}

TEST(Scaling, APsRequestNamesPsTasksFromOneToThePsOfTheFile) {
  ClusterSpec c;
  ASSERT_TRUE(ClusterSpec::parseJson(
                  R"({"ps": ["127.0.0.1:2222", "127.0.0.1:2227"],
                      "worker": ["127.0.0.1:2223", "127.0.0.1:2224"]})",
                  "c.json", &c)
                  .isOk());
  ScaleRequest r;
  ASSERT_TRUE(parseScaleRequest("ps=2\n", c, &r).isOk());
  EXPECT_EQ(r.job, "ps");
  EXPECT_EQ(r.count, 2);
  EXPECT_THAT(parseScaleRequest("ps=3", c, &r).message(),
              HasSubstr("scale ps=N: N must be from 1 to 2 (the ps tasks of "
                        "c.json), got '3'"));
  EXPECT_THAT(parseScaleRequest("ps=0", c, &r).message(), HasSubstr("got '0'"));
  EXPECT_THAT(parseScaleRequest("chief=1", c, &r).message(),
              HasSubstr("or ps=N with N from 1 to 2 (the ps tasks of c.json)"));
  EXPECT_EQ(r.count, 2);
}

TEST(Scaling, ThePidFileCarriesTheRefusedPsCounts) {
  const std::vector<std::string> lines = {"ps=3: pinned to ps.2",
                                          "ps=1: one ps only"};
  EXPECT_EQ(refusalFor(lines, {"ps", 3}), "pinned to ps.2");
  EXPECT_EQ(refusalFor(lines, {"ps", 1}), "one ps only");
  EXPECT_EQ(refusalFor(lines, {"ps", 2}), "");
  EXPECT_EQ(refusalFor(lines, {"worker", 3}), "");
  EXPECT_EQ(refusalFor({"ps: no --model-dir"}, {"ps", 2}), "no --model-dir");
}

TEST(Scaling, TheFilesLieBesideTheClusterFile) {
  EXPECT_EQ(launcherPidPath("/j/c.json"), "/j/c.json.launcher");
  EXPECT_EQ(scaleRequestPath("/j/c.json"), "/j/c.json.scale");
}

TEST(ParseLauncherArguments, WorkersSaysHowManySlotsStart) {
  LaunchOptions o;
  ASSERT_TRUE(
      parseLauncherArguments({"plan.bin", "--workers", "2", "--quiet"}, &o)
          .isOk());
  EXPECT_EQ(o.workers, 2);
  EXPECT_EQ(o.passThroughArgs,
            (std::vector<std::string>{"plan.bin", "--quiet"}));
  ASSERT_TRUE(parseLauncherArguments({"plan.bin", "--workers=3"}, &o).isOk());
  EXPECT_EQ(o.workers, 3);
  EXPECT_THAT(parseLauncherArguments({"p", "--workers", "0"}, &o).message(),
              HasSubstr("--workers expects how many worker tasks to start (1 "
                        "or more, the chief counted), got '0'"));
  EXPECT_THAT(parseLauncherArguments({"p", "--workers"}, &o).message(),
              HasSubstr("--workers needs a value"));
}

TEST(ParseLauncherArguments, PsSaysHowManyPsTasksStart) {
  LaunchOptions o;
  ASSERT_TRUE(
      parseLauncherArguments({"plan.bin", "--ps", "1", "--quiet"}, &o).isOk());
  EXPECT_EQ(o.ps, 1);
  EXPECT_EQ(o.passThroughArgs,
            (std::vector<std::string>{"plan.bin", "--quiet"}));
  ASSERT_TRUE(parseLauncherArguments({"plan.bin", "--ps=2"}, &o).isOk());
  EXPECT_EQ(o.ps, 2);
  EXPECT_THAT(parseLauncherArguments({"p", "--ps", "x"}, &o).message(),
              HasSubstr("--ps expects how many ps tasks to start (1 or "
                        "more), got 'x'"));
}

} // namespace
} // namespace dtf::cluster
