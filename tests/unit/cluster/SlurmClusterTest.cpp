// Tests of --cluster slurm: host lists, tasks per node, ports, and the
// cluster a task derives from the variables srun sets.
#include "runtime/cluster/SlurmCluster.h"
#include "runtime/cluster/RunMode.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

namespace dtf::cluster {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> hosts(const std::string &list) {
  std::vector<std::string> out;
  Status s = expandHostList(list, &out);
  EXPECT_TRUE(s.isOk()) << s.message();
  return out;
}

std::string hostError(const std::string &list) {
  std::vector<std::string> out;
  Status s = expandHostList(list, &out);
  return s.isOk() ? "" : s.message();
}

TEST(SlurmHostList, ExpandsRangesInTheListsOrder) {
  EXPECT_THAT(hosts("n[1-2],m5"), ElementsAre("n1", "n2", "m5"));
  EXPECT_THAT(hosts("node7"), ElementsAre("node7"));
  // Slurm's order, not a sort of the names as strings (TensorFlow's
  // resolver put n10 before n9).
  EXPECT_THAT(hosts("n[9-11]"), ElementsAre("n9", "n10", "n11"));
  EXPECT_THAT(hosts("n[08-10]"), ElementsAre("n08", "n09", "n10"));
  EXPECT_THAT(hosts("n[1,3-4,7]"), ElementsAre("n1", "n3", "n4", "n7"));
  EXPECT_THAT(hosts("r[1-2]n[1-2]"),
              ElementsAre("r1n1", "r1n2", "r2n1", "r2n2"));
  EXPECT_THAT(hosts("a-[1-2].cl,b"), ElementsAre("a-1.cl", "a-2.cl", "b"));
}

TEST(SlurmHostList, BadListsAreNamed) {
  EXPECT_THAT(hostError(""), HasSubstr("the host list is empty"));
  EXPECT_THAT(hostError("n[1-2"), HasSubstr("'[' without ']'"));
  EXPECT_THAT(hostError("n1-2]"), HasSubstr("unbalanced brackets"));
  EXPECT_THAT(hostError("n[3-1]"),
              HasSubstr("range '3-1' ends before it starts"));
  EXPECT_THAT(hostError("n[a-b]"),
              HasSubstr("'a-b' is not a number or a range"));
  EXPECT_THAT(hostError("n1,,n2"), HasSubstr("empty host name"));
  EXPECT_THAT(hostError("n[1-99999999]"), HasSubstr("too long"));
}

TEST(SlurmTasksPerNode, ExpandsRepeats) {
  std::vector<int> counts;
  ASSERT_TRUE(expandTasksPerNode("3(x2),2,1", &counts).isOk());
  EXPECT_THAT(counts, ElementsAre(3, 3, 2, 1));
  ASSERT_TRUE(expandTasksPerNode("1", &counts).isOk());
  EXPECT_THAT(counts, ElementsAre(1));
  EXPECT_THAT(expandTasksPerNode("3(2)", &counts).message(),
              HasSubstr("'3(2)' is not N or N(xK)"));
  EXPECT_THAT(expandTasksPerNode("x", &counts).message(),
              HasSubstr("'x' is not N or N(xK)"));
}

TEST(SlurmPorts, ExpandsReservedPorts) {
  std::vector<int> ports;
  ASSERT_TRUE(expandPortList("12000-12002,12010", &ports).isOk());
  EXPECT_THAT(ports, ElementsAre(12000, 12001, 12002, 12010));
  EXPECT_THAT(expandPortList("70000", &ports).message(),
              HasSubstr("70000 is not a port"));
}

TEST(SlurmJobs, ParsesAndChecks) {
  SlurmJobs jobs;
  ASSERT_TRUE(SlurmJobs::parse("ps=2,chief=1", &jobs).isOk());
  ASSERT_EQ(jobs.counts.size(), 2u);
  EXPECT_EQ(jobs.counts[1], (std::pair<std::string, int>{"chief", 1}));
  EXPECT_THAT(SlurmJobs::parse("ps", &jobs).message(),
              HasSubstr("'ps' is not JOB=COUNT"));
  EXPECT_THAT(SlurmJobs::parse("pss=1", &jobs).message(),
              HasSubstr("unknown job 'pss'"));
  EXPECT_THAT(SlurmJobs::parse("ps=1,ps=2", &jobs).message(),
              HasSubstr("job 'ps' is given twice"));
}

// A task's environment as srun sets it.
struct Step {
  std::map<std::string, std::string> vars;
  EnvironmentReader reader() const {
    return [this](const char *name) -> const char * {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

Step step(const std::string &nodes, const std::string &perNode, int rank,
          const std::string &node, int localId) {
  Step s;
  s.vars = {{"SLURM_STEP_NODELIST", nodes},
            {"SLURM_STEP_TASKS_PER_NODE", perNode},
            {"SLURM_PROCID", std::to_string(rank)},
            {"SLURMD_NODENAME", node},
            {"SLURM_LOCALID", std::to_string(localId)},
            {"SLURM_JOB_ID", "42"},
            {"SLURM_STEP_ID", "0"}};
  return s;
}

TEST(SlurmCluster, BlockLayoutPsFirstThenWorkers) {
  // 5 tasks: 2 on n9, 2 on n10, 1 on m5; rank 3 is n10's second task.
  Step env = step("n[9-10],m5", "2(x2),1", 3, "n10", 1);
  ClusterSpec spec;
  TaskId task;
  SlurmOptions options;
  Status s = clusterFromSlurm(env.reader(), options, &spec, &task);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(spec.source(), "the Slurm step 42.0");
  EXPECT_EQ(spec.numPs(), 1);
  EXPECT_EQ(spec.address({"ps", 0}), "n9:2222");
  EXPECT_EQ(spec.numWorkers(), 4);
  EXPECT_EQ(spec.address({"worker", 0}), "n9:2223");
  EXPECT_EQ(spec.address({"worker", 1}), "n10:2222");
  EXPECT_EQ(spec.address({"worker", 2}), "n10:2223");
  EXPECT_EQ(spec.address({"worker", 3}), "m5:2222");
  EXPECT_EQ(task, (TaskId{"worker", 2}));
}

TEST(SlurmCluster, CyclicLayoutDealsRanksOverNodes) {
  Step env = step("n[1-2]", "2,1", 1, "n2", 0);
  env.vars["SLURM_DISTRIBUTION"] = "cyclic";
  ClusterSpec spec;
  TaskId task;
  SlurmOptions options;
  ASSERT_TRUE(SlurmJobs::parse("ps=1,chief=1", &options.jobs).isOk());
  Status s = clusterFromSlurm(env.reader(), options, &spec, &task);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(spec.address({"ps", 0}), "n1:2222");
  EXPECT_EQ(spec.address({"chief", 0}), "n2:2222");
  EXPECT_EQ(spec.address({"worker", 0}), "n1:2223");
  EXPECT_EQ(task, (TaskId{"chief", 0}));
}

TEST(SlurmCluster, ReservedPortsAndTheJobsVariables) {
  Step env = step("", "", 1, "a", 1);
  env.vars.erase("SLURM_STEP_NODELIST");
  env.vars.erase("SLURM_STEP_TASKS_PER_NODE");
  env.vars["SLURM_JOB_NODELIST"] = "a";
  env.vars["SLURM_TASKS_PER_NODE"] = "3";
  env.vars["SLURM_NTASKS"] = "3";
  env.vars["SLURM_STEP_RESV_PORTS"] = "13000-13002";
  ClusterSpec spec;
  TaskId task;
  Status s = clusterFromSlurm(env.reader(), SlurmOptions(), &spec, &task);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(spec.address({"worker", 1}), "a:13002");
  EXPECT_EQ(task, (TaskId{"worker", 0}));
  env.vars["SLURM_STEP_RESV_PORTS"] = "13000";
  EXPECT_THAT(
      clusterFromSlurm(env.reader(), SlurmOptions(), &spec, &task).message(),
      HasSubstr("has 1 port(s) but a node runs 3 tasks; reserve one "
                "per task (srun --resv-ports=3)"));
}

TEST(SlurmCluster, RefusesALayoutItCannotFollow) {
  // srun -m block would put rank 1 on n1; Slurm says it is on n2.
  Step env = step("n[1-2]", "2(x2)", 1, "n2", 0);
  ClusterSpec spec;
  TaskId task;
  EXPECT_THAT(
      clusterFromSlurm(env.reader(), SlurmOptions(), &spec, &task).message(),
      HasSubstr("Slurm put rank 1 on n2 as its task 0, but -m block over "
                "SLURM_STEP_NODELIST 'n[1-2]' with SLURM_STEP_TASKS_PER_NODE "
                "'2(x2)' puts it on n1 as task 1"));
  env.vars["SLURM_DISTRIBUTION"] = "plane=2";
  EXPECT_THAT(
      clusterFromSlurm(env.reader(), SlurmOptions(), &spec, &task).message(),
      HasSubstr("SLURM_DISTRIBUTION is 'plane=2'"));
  // block:cyclic distributes over the cores of a node, not over nodes.
  env = step("n[1-2]", "2(x2)", 1, "n1", 1);
  env.vars["SLURM_DISTRIBUTION"] = "block:cyclic";
  EXPECT_TRUE(
      clusterFromSlurm(env.reader(), SlurmOptions(), &spec, &task).isOk());
}

TEST(SlurmCluster, NamesWhatIsMissingOrInconsistent) {
  ClusterSpec spec;
  TaskId task;
  Step empty;
  EXPECT_THAT(
      clusterFromSlurm(empty.reader(), SlurmOptions(), &spec, &task).message(),
      HasSubstr("SLURM_PROCID is not set: --cluster slurm runs as a task of a "
                "Slurm job step; start every task with srun"));
  Step env = step("n[1-2]", "1", 0, "n1", 0);
  EXPECT_THAT(
      clusterFromSlurm(env.reader(), SlurmOptions(), &spec, &task).message(),
      HasSubstr("gives 1 node(s) but SLURM_STEP_NODELIST 'n[1-2]' has 2"));
  env = step("n1", "1", 0, "n1", 0);
  EXPECT_THAT(
      clusterFromSlurm(env.reader(), SlurmOptions(), &spec, &task).message(),
      HasSubstr("the cluster has no 'worker' job"));
  env = step("n1", "2", 0, "n1", 0);
  SlurmOptions options;
  ASSERT_TRUE(SlurmJobs::parse("ps=2,chief=1", &options.jobs).isOk());
  EXPECT_THAT(
      clusterFromSlurm(env.reader(), options, &spec, &task).message(),
      HasSubstr("--slurm-jobs asks for 3 tasks but the Slurm step has 2"));
}

TEST(SlurmCluster, ChooseRunModeTakesTheRank) {
  Step env = step("n[1-3]", "1(x3)", 2, "n3", 0);
  ClusterFlags flags;
  flags.cluster = "slurm";
  RunChoice choice;
  Status s = chooseRunMode(flags, nullptr, &choice, env.reader());
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(choice.mode, RunMode::kTask);
  EXPECT_EQ(choice.task, (TaskId{"worker", 1}));
  flags.job = "worker";
  flags.task = "0";
  EXPECT_THAT(chooseRunMode(flags, nullptr, &choice, env.reader()).message(),
              HasSubstr("--cluster slurm takes each task's job from its Slurm "
                        "rank"));
}

} // namespace
} // namespace dtf::cluster
