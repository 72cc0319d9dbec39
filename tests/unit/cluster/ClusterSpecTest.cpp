// Tests of ClusterSpec: every parse error's message, TF_CONFIG, chief
// selection, isLocal, and the choice of run mode.
#include "schema/ClusterSpec.h"
#include "runtime/cluster/RunMode.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <unistd.h>
#include <string>
#include <vector>

namespace dtf::cluster {
namespace {

using ::testing::HasSubstr;

// The error message of parsing `text` as "c.json"; "" when it parses.
std::string errorOf(const std::string &text) {
  ClusterSpec spec;
  Status s = ClusterSpec::parseJson(text, "c.json", &spec);
  return s.isOk() ? "" : s.message();
}

TEST(ClusterSpec, ParsesJobsInOrder) {
  ClusterSpec spec;
  Status s = ClusterSpec::parseJson(
      R"({"worker": ["w0:2223", "w1:2224"], "ps": ["p0:2222"],
          "chief": ["c:2221"]})",
      "c.json", &spec);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(spec.source(), "c.json");
  EXPECT_EQ(spec.numPs(), 1);
  EXPECT_EQ(spec.numWorkers(), 2);
  EXPECT_EQ(spec.numTasks("chief"), 1);
  EXPECT_EQ(spec.numTasks("evaluator"), 0);
  EXPECT_EQ(spec.address({"worker", 1}), "w1:2224");
  EXPECT_EQ(spec.address({"worker", 2}), "");
  std::vector<std::string> names;
  for (const TaskId &t : spec.allTasks())
    names.push_back(t.str());
  EXPECT_EQ(names, (std::vector<std::string>{"chief.0", "ps.0", "worker.0",
                                             "worker.1"}));
  EXPECT_EQ(TaskId({"worker", 1}).deviceName(), "/job:worker/task:1");
}

TEST(ClusterSpec, ChiefIsTheChiefJobElseWorkerZero) {
  ClusterSpec withChief, without;
  ASSERT_TRUE(ClusterSpec::parseJson(R"({"chief": ["c:1"], "worker": ["w:2"]})",
                                     "a", &withChief)
                  .isOk());
  ASSERT_TRUE(ClusterSpec::parseJson(R"({"ps": ["p:1"], "worker": ["w:2",
                  "w:3"]})",
                                     "b", &without)
                  .isOk());
  EXPECT_EQ(withChief.chief().str(), "chief.0");
  EXPECT_FALSE(withChief.isChief({"worker", 0}));
  EXPECT_EQ(without.chief().str(), "worker.0");
  EXPECT_TRUE(without.isChief({"worker", 0}));
  EXPECT_FALSE(without.isChief({"worker", 1}));
}

TEST(ClusterSpec, SyntaxErrorHasLineAndColumn) {
  // The stray comma is on line 3, column 20.
  std::string m =
      errorOf("{\n  \"ps\": [\"a:1\"],\n  \"worker\": [\"b:2\",]\n}");
  EXPECT_THAT(m, HasSubstr("c.json:3:20: invalid JSON: "));
  EXPECT_THAT(m, HasSubstr("syntax error"));
  EXPECT_EQ(m.find("json.exception"), std::string::npos) << m;
}

TEST(ClusterSpec, SyntaxErrorColumnCountsCharactersNotBytes) {
  // "é" is two bytes; the error (the missing ':') is in column 6.
  std::string m = errorOf("{\"é\" 1}");
  EXPECT_THAT(m, HasSubstr("c.json:1:6: invalid JSON"));
}

TEST(ClusterSpec, SyntaxErrorAtTheEnd) {
  std::string m = errorOf("{\"worker\": [\"a:1\"]\n");
  EXPECT_THAT(m, HasSubstr("c.json:2:1: invalid JSON"));
  EXPECT_THAT(m, HasSubstr("end of input"));
}

TEST(ClusterSpec, EmptyFile) {
  EXPECT_THAT(errorOf("  \n"),
              HasSubstr("c.json: is empty; expected a cluster"));
}

TEST(ClusterSpec, NotAnObject) {
  std::string m = errorOf(R"(["a:1"])");
  EXPECT_THAT(m, HasSubstr("c.json: expected a JSON object mapping job names"));
  EXPECT_THAT(m, HasSubstr("got an array"));
}

TEST(ClusterSpec, NoWorkerJob) {
  EXPECT_THAT(errorOf(R"({"ps": ["a:1"]})"),
              HasSubstr("c.json: the cluster has no 'worker' job"));
  EXPECT_THAT(errorOf(R"({})"), HasSubstr("no 'worker' job"));
}

TEST(ClusterSpec, EmptyJob) {
  EXPECT_THAT(errorOf(R"({"ps": [], "worker": ["a:1"]})"),
              HasSubstr("c.json: job 'ps' has no tasks"));
}

TEST(ClusterSpec, UnknownJobSuggestsTheKnownOne) {
  std::string m = errorOf(R"({"wroker": ["a:1"]})");
  EXPECT_THAT(m, HasSubstr("c.json: unknown job 'wroker' (did you mean "
                           "'worker'?); the jobs are chief (or master), ps, "
                           "worker and evaluator"));
  m = errorOf(R"({"worker": ["a:1"], "mastr": ["b:1"]})");
  EXPECT_THAT(m, HasSubstr("unknown job 'mastr'; the jobs are"));
}

TEST(ClusterSpec, EvaluatorIsAJobOutsideTraining) {
  ClusterSpec spec;
  Status s = ClusterSpec::parseJson(
      R"({"worker": ["a:1"], "ps": ["p:1"], "evaluator": ["e:1"]})", "c.json",
      &spec);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(spec.numTasks("evaluator"), 1);
  EXPECT_EQ(spec.allTasks().back(), (TaskId{"evaluator", 0}));
  EXPECT_EQ(spec.chief(), (TaskId{"worker", 0}));
  EXPECT_THAT(
      errorOf(R"({"worker": ["a:1"], "evaluator": ["b:1", "c:1"]})"),
      HasSubstr("c.json: job 'evaluator' has 2 tasks; a cluster has at most "
                "one evaluator"));
}

// TF_CONFIG as Kubeflow's training operator writes it for a TFJob with a
// Master (older TFJobs), ps, workers and an evaluator.
TEST(ClusterSpec, ReadsKubeflowTfConfig) {
  const std::string tfConfig = R"({"cluster":{
      "master":["mnist-master-0.default.svc:2222"],
      "ps":["mnist-ps-0.default.svc:2222"],
      "worker":["mnist-worker-0.default.svc:2222",
                "mnist-worker-1.default.svc:2222"],
      "evaluator":["mnist-evaluator-0.default.svc:2222"]},
    "task":{"type":"master","index":0},"environment":"cloud"})";
  ClusterSpec spec;
  std::optional<TaskId> task;
  Status s = ClusterSpec::parseJson(tfConfig, "TF_CONFIG", &spec, &task);
  ASSERT_TRUE(s.isOk()) << s.message();
  ASSERT_TRUE(task.has_value());
  EXPECT_EQ(*task, (TaskId{"chief", 0}));
  EXPECT_EQ(spec.chief(), (TaskId{"chief", 0}));
  EXPECT_EQ(spec.address({"chief", 0}), "mnist-master-0.default.svc:2222");
  EXPECT_EQ(spec.environment(), "cloud");
  EXPECT_EQ(spec.numWorkers(), 2);
  EXPECT_THAT(errorOf(R"({"cluster": {"worker": ["a:1"], "master": ["b:1"],
                                      "chief": ["c:1"]}})"),
              HasSubstr("has both 'master' and 'chief'"));
  EXPECT_THAT(errorOf(R"({"cluster": {"worker": ["a:1"]},
                          "environment": 3})"),
              HasSubstr("'environment' must be a string"));
}

TEST(ClusterSpec, JobMustBeAListOfStrings) {
  EXPECT_THAT(errorOf(R"({"worker": "a:1"})"),
              HasSubstr("job 'worker' must be a list of \"host:port\" "
                        "strings, got a string"));
  EXPECT_THAT(errorOf(R"({"worker": ["a:1", 2222]})"),
              HasSubstr("c.json: worker[1] must be a \"host:port\" string, "
                        "got 2222"));
}

TEST(ClusterSpec, AddressWithoutPort) {
  EXPECT_THAT(errorOf(R"({"worker": ["a:1", "localhost"]})"),
              HasSubstr("c.json: worker[1]: address 'localhost' has no port; "
                        "write it as host:port, e.g. 'localhost:2222'"));
  EXPECT_THAT(errorOf(R"({"worker": ["a:"]})"),
              HasSubstr("address 'a:' has no port after ':'"));
  EXPECT_THAT(errorOf(R"({"worker": ["[::1]"]})"),
              HasSubstr("address '[::1]' has no port"));
}

TEST(ClusterSpec, AddressWithoutHost) {
  EXPECT_THAT(errorOf(R"({"worker": [":2222"]})"),
              HasSubstr("worker[0]: address ':2222' has no host"));
}

// One validator for every reader of addresses (cluster files, TF_CONFIG,
// Slurm, dtfc --cluster, dtf-run certs): RFC 1123 names or IP literals.
TEST(ClusterSpec, HostsAreNamesOrIpAddresses) {
  for (const char *ok :
       {"localhost:1", "ps-0.train.svc.cluster.local:2222", "a:1", "10.0.0.7:80",
        "[::1]:2", "[fe80::1%eth0]:3", "node17.:4", "x1-y2:5"})
    EXPECT_EQ(errorOf(std::string(R"({"worker": [")") + ok + "\"]}"), "")
        << ok;
  struct Bad {
    std::string address; // as JSON text
    const char *says;
  };
  const std::vector<Bad> bad = {
      {"evil.com\\u0000.good.com:1",
       "address 'evil.com\\x00.good.com:1' is not host:port"},
      {"a\\rb:1", "address 'a\\x0db:1' is not host:port"},
      {"a\\nb:1", "address 'a\\x0ab:1' is not host:port"},
      {"a\\u0007:1", "is not host:port"},
      {"-rf:1", "invalid host '-rf': a label starts or ends with '-'"},
      {"a,b:1", "invalid host 'a,b': it holds ','"},
      {"a_b:1", "invalid host 'a_b': it holds '_'"},
      {"a..b:1", "it has an empty label"},
      {std::string(64, 'x') + ".com:1", "a label has more than 63 characters"},
      {std::string(300, 'x') + ":1", "(302 bytes) is not host:port"},
      {std::string(1 << 20, 'x') + ":1", "(1048578 bytes) is not host:port"},
      {"1.2.3.999:1", "it is all digits and dots but not an IPv4 address"},
      {"[fe80::1%e/0]:1", "its IPv6 zone is not an interface name"},
      {"caf\\u00e9:1", "is not host:port"},
  };
  for (const Bad &b : bad) {
    const std::string e = errorOf(R"({"worker": [")" + b.address + "\"]}");
    EXPECT_THAT(e, HasSubstr("c.json: worker[0]: address '"))
        << b.address.substr(0, 40);
    EXPECT_THAT(e, HasSubstr(b.says)) << b.address.substr(0, 40);
    EXPECT_LT(e.size(), 400u) << "a message quotes at most 80 bytes";
    EXPECT_EQ(e.find('\0'), std::string::npos);
  }
  // TF_CONFIG goes through the same check.
  ClusterSpec spec;
  Status s = ClusterSpec::parseJson(
      R"({"cluster": {"worker": ["bad host:1"]}, "task": {"type": "worker", "index": 0}})",
      "TF_CONFIG", &spec);
  ASSERT_FALSE(s.isOk());
  EXPECT_THAT(s.message(), HasSubstr("TF_CONFIG: worker[0]: address 'bad host:1' "
                                     "has an invalid host 'bad host'"));
}

// A number beyond a double made nlohmann::json throw out_of_range past the
// parse_error handler, and dtf-run abort (found by dtf-fuzz-readers).
TEST(ClusterSpec, ANumberBeyondADoubleIsAnErrorNotACrash) {
  EXPECT_THAT(errorOf(R"({"worker": ["a:1"], "x": 7e999})"),
              HasSubstr("c.json: invalid JSON: "));
}

// nlohmann stops at a NUL byte as at the end: what follows would be ignored.
TEST(ClusterSpec, ANulByteIsRefusedNotTakenForTheEnd) {
  std::string text = R"({"worker": ["a:1"]})";
  text += std::string("\0garbage", 8);
  EXPECT_THAT(errorOf(text), HasSubstr("c.json:1:20: a NUL byte (offset 19)"));
}

TEST(ClusterSpec, UnbracketedIpv6) {
  EXPECT_THAT(errorOf(R"({"worker": ["::1:2222"]})"),
              HasSubstr("looks like an IPv6 address; put the host in "
                        "brackets, e.g. '[::1]:2222'"));
}

TEST(ClusterSpec, BadPorts) {
  EXPECT_THAT(errorOf(R"({"worker": ["a:http"]})"),
              HasSubstr("c.json: worker[0]: port 'http' of 'a:http' is not a "
                        "number"));
  EXPECT_THAT(errorOf(R"({"worker": ["a:-1"]})"), HasSubstr("is not a number"));
  EXPECT_THAT(errorOf(R"({"worker": ["a:0"]})"),
              HasSubstr("port 0 of 'a:0' is out of range; ports are 1 to "
                        "65535"));
  EXPECT_THAT(errorOf(R"({"worker": ["a:65536"]})"),
              HasSubstr("port 65536 of 'a:65536' is out of range"));
  EXPECT_THAT(errorOf(R"({"worker": ["a:99999999999999999999"]})"),
              HasSubstr("is out of range"));
  EXPECT_EQ(errorOf(R"({"worker": ["a:65535", "[::1]:1"]})"), "");
}

TEST(ClusterSpec, DuplicateAddress) {
  EXPECT_THAT(errorOf(R"({"ps": ["h:2222"], "worker": ["h:2223", "h:2222"]})"),
              HasSubstr("c.json: ps[0] and worker[1] have the same address "
                        "'h:2222'; every task needs its own host:port"));
  // Loopback spellings are one machine.
  EXPECT_THAT(errorOf(R"({"worker": ["localhost:5", "127.0.0.1:5"]})"),
              HasSubstr("worker[0] ('localhost:5') and worker[1] "
                        "('127.0.0.1:5') are the same address"));
  EXPECT_THAT(errorOf(R"({"worker": ["H:5", "h:5"]})"),
              HasSubstr("have the same address"));
}

TEST(ClusterSpec, DuplicateJobKey) {
  EXPECT_THAT(errorOf(R"({"worker": ["a:1"], "worker": ["b:1"]})"),
              HasSubstr("c.json: key 'worker' is given twice"));
}

TEST(ClusterSpec, MoreThanOneChief) {
  EXPECT_THAT(errorOf(R"({"chief": ["a:1", "b:1"], "worker": ["c:1"]})"),
              HasSubstr("c.json: job 'chief' has 2 tasks; a cluster has at "
                        "most one chief"));
}

TEST(ClusterSpec, TfConfigFullFormInAFile) {
  char path[] = "/tmp/dtf-cluster-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << R"({"cluster": {"ps": ["p:1"], "worker": ["w:1",
      "w:2"]}, "task": {"type": "worker", "index": 1}, "environment": "cloud"})";
  ClusterSpec spec;
  std::optional<TaskId> task;
  Status s = ClusterSpec::parseFile(path, &spec, &task);
  std::remove(path);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(spec.source(), path);
  EXPECT_EQ(spec.numWorkers(), 2);
  ASSERT_TRUE(task.has_value());
  EXPECT_EQ(task->str(), "worker.1");
}

TEST(ClusterSpec, MissingFile) {
  ClusterSpec spec;
  Status s = ClusterSpec::parseFile("/nonexistent/c.json", &spec);
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent/c.json: cannot open the "
                                     "cluster file: No such file"));
}

TEST(ClusterSpec, TfConfigTaskErrors) {
  EXPECT_THAT(errorOf(R"({"cluster": {"worker": ["w:1"]}, "task": {"type":
                  "ps", "index": 0}})"),
              HasSubstr("c.json: task type 'ps' is not a job of the cluster"));
  EXPECT_THAT(errorOf(R"({"cluster": {"worker": ["w:1"]}, "task": {"type":
                  "worker", "index": 1}})"),
              HasSubstr("c.json: task index 1 is out of range: job 'worker' "
                        "has 1 task (indices 0 to 0)"));
  EXPECT_THAT(errorOf(R"({"cluster": {"worker": ["w:1"]}, "task": {"type":
                  "worker", "index": -1}})"),
              HasSubstr("'task' index must be a non-negative integer, got -1"));
  EXPECT_THAT(errorOf(R"({"cluster": {"worker": ["w:1"]}, "task": {"index":
                  0}})"),
              HasSubstr("'task' needs a string 'type'"));
  EXPECT_THAT(errorOf(R"({"task": {"type": "worker"}})"),
              HasSubstr("c.json: has a 'task' but no 'cluster'"));
  EXPECT_THAT(errorOf(R"({"cluster": {"worker": ["w:1"]}, "tsak": {}})"),
              HasSubstr("c.json: unknown key 'tsak'"));
  EXPECT_THAT(errorOf(R"({"cluster": {"wroker": ["w:1"]}})"),
              HasSubstr("unknown job 'wroker'"));
}

TEST(ClusterSpec, FromEnvironment) {
  const char *saved = std::getenv("TF_CONFIG");
  std::string keep = saved ? saved : "";
  ClusterSpec spec;
  std::optional<TaskId> task;
  bool found = true;

  unsetenv("TF_CONFIG");
  ASSERT_TRUE(ClusterSpec::fromEnvironment(&spec, &task, &found).isOk());
  EXPECT_FALSE(found);

  setenv("TF_CONFIG", "  ", 1);
  ASSERT_TRUE(ClusterSpec::fromEnvironment(&spec, &task, &found).isOk());
  EXPECT_FALSE(found);

  setenv("TF_CONFIG",
         R"({"cluster": {"chief": ["c:1"], "worker": ["w:1"]}, "task":
             {"type": "chief", "index": 0}})",
         1);
  Status s = ClusterSpec::fromEnvironment(&spec, &task, &found);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_TRUE(found);
  EXPECT_EQ(spec.source(), "TF_CONFIG");
  ASSERT_TRUE(task.has_value());
  EXPECT_EQ(task->str(), "chief.0");

  setenv("TF_CONFIG", "{\"cluster\": {", 1);
  s = ClusterSpec::fromEnvironment(&spec, &task, &found);
  EXPECT_THAT(s.message(), HasSubstr("TF_CONFIG:1:14: invalid JSON"));

  if (saved)
    setenv("TF_CONFIG", keep.c_str(), 1);
  else
    unsetenv("TF_CONFIG");
}

TEST(ClusterSpec, CheckTask) {
  ClusterSpec spec;
  ASSERT_TRUE(
      ClusterSpec::parseJson(R"({"worker": ["a:1", "a:2"]})", "c.json", &spec)
          .isOk());
  EXPECT_TRUE(spec.checkTask({"worker", 1}, "--job worker --task 1").isOk());
  EXPECT_THAT(spec.checkTask({"worker", 2}, "--job worker --task 2").message(),
              HasSubstr("--job worker --task 2: task 2 is out of range: job "
                        "'worker' of c.json has 2 tasks (indices 0 to 1)"));
  EXPECT_THAT(spec.checkTask({"ps", 0}, "--job ps --task 0").message(),
              HasSubstr("--job ps --task 0: c.json has no job 'ps' (its jobs: "
                        "worker)"));
  EXPECT_THAT(spec.checkTask({"wrker", 0}, "--job wrker --task 0").message(),
              HasSubstr("unknown job 'wrker' (did you mean 'worker'?)"));
}

TEST(ClusterSpec, CheckJobSize) {
  ClusterSpec spec;
  ASSERT_TRUE(ClusterSpec::parseJson(R"({"ps": ["a:1"], "worker": ["a:2"]})",
                                     "c.json", &spec)
                  .isOk());
  EXPECT_TRUE(spec.checkJobSize("ps", 1, "plan.bin needs 1 ps").isOk());
  EXPECT_EQ(spec.checkJobSize("ps", 3,
                              "plan.bin places variables on 3 ps "
                              "tasks")
                .message(),
            "plan.bin places variables on 3 ps tasks but c.json has 1 'ps' "
            "task; add 2 more to its 'ps' list or compile the plan for 1");
}

TEST(ClusterSpec, KeepFirstPsDropsTheOtherPsSlots) {
  ClusterSpec spec;
  ASSERT_TRUE(ClusterSpec::parseJson(
                  R"({"ps": ["a:1", "a:3", "a:4"], "worker": ["a:2"]})",
                  "c.json", &spec)
                  .isOk());
  ClusterSpec kept = spec;
  ASSERT_TRUE(kept.keepFirstPs(2).isOk());
  EXPECT_EQ(kept.numPs(), 2);
  EXPECT_EQ(kept.address({"ps", 1}), "a:3");
  EXPECT_EQ(kept.address({"ps", 2}), "");
  EXPECT_EQ(kept.allTasks().size(), 3u);
  EXPECT_EQ(spec.keepFirstPs(4).message(),
            "--ps 4: c.json has 3 ps tasks; the job runs over the first N of "
            "them, N from 1 to 3 (add ps addresses to the file for more)");
  EXPECT_THAT(spec.keepFirstPs(0).message(), HasSubstr("N from 1 to 3"));
  EXPECT_EQ(spec.numPs(), 3); // a refused count changes nothing
}

TEST(ClusterSpec, FromJobs) {
  ClusterSpec spec;
  EXPECT_TRUE(
      ClusterSpec::fromJobs({{"worker", {"localhost:1"}}}, "default", &spec)
          .isOk());
  EXPECT_THAT(
      ClusterSpec::fromJobs({{"worker", {"localhost"}}}, "default", &spec)
          .message(),
      HasSubstr("default: worker[0]: address 'localhost' has no port"));
}

TEST(IsLocalHost, LoopbackAndThisMachine) {
  LocalHost me{"node1", {"10.1.2.3", "fe80::1"}};
  EXPECT_TRUE(isLocalHost("localhost", me));
  EXPECT_TRUE(isLocalHost("LocalHost", me));
  EXPECT_TRUE(isLocalHost("127.0.0.1", me));
  EXPECT_TRUE(isLocalHost("127.4.5.6", me));
  EXPECT_TRUE(isLocalHost("::1", me));
  EXPECT_TRUE(isLocalHost("[::1]", me));
  EXPECT_TRUE(isLocalHost("0.0.0.0", me));
  EXPECT_TRUE(isLocalHost("node1", me));
  EXPECT_TRUE(isLocalHost("NODE1", me));
  EXPECT_TRUE(isLocalHost("node1.cluster.local", me));
  EXPECT_TRUE(isLocalHost("10.1.2.3", me));
  EXPECT_TRUE(isLocalHost("FE80:0::1", me));
  EXPECT_FALSE(isLocalHost("node2", me));
  EXPECT_FALSE(isLocalHost("node10", me));
  EXPECT_FALSE(isLocalHost("10.1.2.4", me));
  EXPECT_FALSE(isLocalHost("128.0.0.1", me));
  EXPECT_FALSE(isLocalHost("", me));

  LocalHost qualified{"node1.cluster.local", {}};
  EXPECT_TRUE(isLocalHost("node1", qualified));
  EXPECT_TRUE(isLocalHost("node1.cluster.local", qualified));
  EXPECT_FALSE(isLocalHost("node1.other.org", qualified));
}

TEST(IsLocalHost, TheRealMachine) {
  const LocalHost &me = LocalHost::current();
  ASSERT_FALSE(me.hostname.empty());
  EXPECT_TRUE(isLocalHost(me.hostname, me));
  ClusterSpec spec;
  ASSERT_TRUE(
      ClusterSpec::parseJson("{\"worker\": [\"" + me.hostname +
                                 ":1\", \"localhost:2\", \"far.invalid:3\"]}",
                             "c.json", &spec)
          .isOk());
  EXPECT_TRUE(spec.isLocal({"worker", 0}));
  EXPECT_TRUE(spec.isLocal({"worker", 1}));
  EXPECT_FALSE(spec.isLocal({"worker", 2}));
  EXPECT_FALSE(spec.isLocal({"worker", 3}));
}

// chooseRunMode ------------------------------------------------------------

class RunModeTest : public ::testing::Test {
protected:
  void SetUp() override {
    char dir[] = "/tmp/dtf-runmode-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    file_ = dir_ + "/c.json";
    std::ofstream(file_) << R"({"ps": ["localhost:1"], "worker": ["localhost:2",
        "localhost:3"]})";
    fullForm_ = dir_ + "/tf.json";
    std::ofstream(fullForm_) << R"({"cluster": {"worker": ["localhost:2"]},
        "task": {"type": "worker", "index": 0}})";
  }
  void TearDown() override {
    std::remove(file_.c_str());
    std::remove(fullForm_.c_str());
    rmdir(dir_.c_str());
  }
  std::string dir_, file_, fullForm_;
};

TEST_F(RunModeTest, NothingIsLocal) {
  RunChoice c;
  ASSERT_TRUE(chooseRunMode({}, nullptr, &c).isOk());
  EXPECT_EQ(c.mode, RunMode::kLocal);
  ASSERT_TRUE(chooseRunMode({}, " ", &c).isOk());
  EXPECT_EQ(c.mode, RunMode::kLocal);
}

TEST_F(RunModeTest, ClusterAloneLaunches) {
  RunChoice c;
  ClusterFlags f;
  f.cluster = file_;
  // TF_CONFIG does not count when --cluster is given.
  Status s = chooseRunMode(f, "{broken", &c);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(c.mode, RunMode::kLauncher);
  EXPECT_EQ(c.clusterFile, file_);
  EXPECT_EQ(c.cluster.numWorkers(), 2);
}

TEST_F(RunModeTest, ClusterJobTaskRunsOneTask) {
  RunChoice c;
  ClusterFlags f;
  f.cluster = file_;
  f.job = "worker";
  f.task = "1";
  ASSERT_TRUE(chooseRunMode(f, nullptr, &c).isOk());
  EXPECT_EQ(c.mode, RunMode::kTask);
  EXPECT_EQ(c.task.str(), "worker.1");
  EXPECT_EQ(c.taskOrigin, "--job worker --task 1");

  f.task = "2";
  EXPECT_THAT(chooseRunMode(f, nullptr, &c).message(),
              HasSubstr("--job worker --task 2: task 2 is out of range: job "
                        "'worker' of " +
                        file_ + " has 2 tasks"));
  f.job = "chief";
  f.task = "0";
  EXPECT_THAT(chooseRunMode(f, nullptr, &c).message(),
              HasSubstr("--job chief --task 0: " + file_ +
                        " has no job 'chief' (its jobs: ps, worker)"));
  f.task = "x";
  EXPECT_THAT(chooseRunMode(f, nullptr, &c).message(),
              HasSubstr("--task expects a task index (0, 1, ...), got 'x'"));
}

TEST_F(RunModeTest, JobAndTaskGoTogether) {
  RunChoice c;
  ClusterFlags f;
  f.cluster = file_;
  f.job = "worker";
  EXPECT_THAT(chooseRunMode(f, nullptr, &c).message(),
              HasSubstr("--job worker needs --task N"));
  f.job.reset();
  f.task = "1";
  EXPECT_THAT(chooseRunMode(f, nullptr, &c).message(),
              HasSubstr("--task 1 needs --job NAME"));
}

TEST_F(RunModeTest, TaskWithoutCluster) {
  RunChoice c;
  ClusterFlags f;
  f.job = "worker";
  f.task = "0";
  EXPECT_THAT(chooseRunMode(f, nullptr, &c).message(),
              HasSubstr("--job worker --task 0: no cluster to run the task "
                        "in; give --cluster FILE or set the TF_CONFIG"));
}

TEST_F(RunModeTest, FullFormFileGivesTheTask) {
  RunChoice c;
  ClusterFlags f;
  f.cluster = fullForm_;
  ASSERT_TRUE(chooseRunMode(f, nullptr, &c).isOk());
  EXPECT_EQ(c.mode, RunMode::kTask);
  EXPECT_EQ(c.task.str(), "worker.0");
  EXPECT_EQ(c.taskOrigin, fullForm_ + "'s task");
}

TEST_F(RunModeTest, TfConfig) {
  const char *config = R"({"cluster": {"ps": ["p:1"], "worker": ["w:1",
      "w:2"]}, "task": {"type": "worker", "index": 1}})";
  RunChoice c;
  ASSERT_TRUE(chooseRunMode({}, config, &c).isOk());
  EXPECT_EQ(c.mode, RunMode::kTask);
  EXPECT_EQ(c.task.str(), "worker.1");
  EXPECT_EQ(c.taskOrigin, "TF_CONFIG");
  EXPECT_EQ(c.clusterFile, "");

  // --job/--task override TF_CONFIG's task.
  ClusterFlags f;
  f.job = "ps";
  f.task = "0";
  ASSERT_TRUE(chooseRunMode(f, config, &c).isOk());
  EXPECT_EQ(c.task.str(), "ps.0");

  EXPECT_THAT(chooseRunMode({}, R"({"worker": ["w:1"]})", &c).message(),
              HasSubstr("TF_CONFIG has a cluster but no task"));
  EXPECT_THAT(
      chooseRunMode({}, R"({"worker": ["w:1"], "ps": []})", &c).message(),
      HasSubstr("TF_CONFIG: job 'ps' has no tasks"));
}

} // namespace
} // namespace dtf::cluster
