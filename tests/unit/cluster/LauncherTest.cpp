// Tests of the launcher with a fake task program (FakeTask.cpp) in place of
// dtf-run: output prefixing, stopping the ps, failures, restarts, Ctrl-C.
#include "runtime/cluster/Launcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#ifndef DTF_FAKE_TASK
#error "DTF_FAKE_TASK must name the fake task program"
#endif

namespace dtf::cluster {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1))
    ++n;
  return n;
}

// Position of `what` in `text`, failing the test when it is missing.
size_t positionOf(const std::string &text, const std::string &what) {
  size_t at = text.find(what);
  EXPECT_NE(at, std::string::npos) << "missing '" << what << "' in:\n" << text;
  return at;
}

struct Result {
  int code = -1;
  std::string output;
};

class LauncherTest : public ::testing::Test {
protected:
  void SetUp() override {
    char dir[] = "/tmp/dtf-launcher-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    std::string command = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(std::system(command.c_str()), 0);
  }

  LaunchOptions optionsFor(const std::vector<std::string> &behaviors) {
    LaunchOptions options;
    options.program = DTF_FAKE_TASK;
    options.passThroughArgs = {"plan.bin", "--steps", "7"};
    for (const std::string &b : behaviors) {
      options.passThroughArgs.push_back("--behave");
      options.passThroughArgs.push_back(b);
    }
    options.clusterFile = dir_ + "/c.json";
    options.policy.restartDelay = std::chrono::milliseconds(10);
    options.stopGrace = std::chrono::milliseconds(3000);
    options.interruptGrace = std::chrono::milliseconds(5000);
    return options;
  }

  Result run(const std::string &json, const std::vector<std::string> &behaviors,
             const std::function<void(LaunchOptions &)> &tweak = {}) {
    Result result;
    ClusterSpec cluster;
    Status s = ClusterSpec::parseJson(json, dir_ + "/c.json", &cluster);
    EXPECT_TRUE(s.isOk()) << s.message();
    if (!s.isOk())
      return result;
    LaunchOptions options = optionsFor(behaviors);
    std::FILE *out = std::tmpfile();
    options.out = options.err = out;
    if (tweak)
      tweak(options);
    result.code = runLauncher(cluster, options);
    std::fflush(out);
    std::rewind(out);
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, out)) > 0)
      result.output.append(buffer, n);
    std::fclose(out);
    return result;
  }

  std::string dir_;
};

constexpr const char *kPsTwoWorkers =
    R"({"ps": ["localhost:2222"], "worker": ["localhost:2223",
        "localhost:2224"]})";

TEST_F(LauncherTest, PrefixesEveryLineAndStopsThePsWhenWorkersFinish) {
  // The workers serve 300 ms before they finish: workers that finished at
  // once could have the ps stopped before it said "serving" (seen once in a
  // full suite run).
  Result r = run(kPsTwoWorkers, {"worker.0=slow", "worker.1=slow"});
  EXPECT_EQ(r.code, 0) << r.output;
  // Names padded to the longest ("worker.0").
  EXPECT_THAT(r.output, HasSubstr("ps.0     | serving\n"));
  EXPECT_THAT(r.output, HasSubstr("worker.0 | hello from worker.0 restart=0 "
                                  "DTF_TASK=worker.0 args=plan.bin --steps 7"));
  EXPECT_THAT(r.output, HasSubstr("worker.1 | note from worker.1\n"));
  // The pass-through arguments, then the task's cluster options.
  EXPECT_THAT(r.output, HasSubstr("args=plan.bin --steps 7 --cluster " + dir_ +
                                  "/c.json --job worker --task 1\n"));
  // Every line is a task's or the launcher's.
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_TRUE(line.rfind("[launcher] ", 0) == 0 ||
                line.rfind("ps.0     | ", 0) == 0 ||
                line.rfind("worker.0 | ", 0) == 0 ||
                line.rfind("worker.1 | ", 0) == 0)
        << line;
  }
  // The ps is stopped (SIGTERM) only after both workers have exited.
  const size_t stop = positionOf(r.output, "[launcher] every worker finished; "
                                           "stopping ps.0\n");
  EXPECT_LT(positionOf(r.output, "[launcher] worker.0 exited (code 0)"), stop);
  EXPECT_LT(positionOf(r.output, "[launcher] worker.1 exited (code 0)"), stop);
  EXPECT_GT(positionOf(r.output, "[launcher] ps.0 killed by signal 15 "
                                 "(SIGTERM)"),
            stop);
  EXPECT_THAT(r.output, HasSubstr("[launcher] the job finished\n"));
  EXPECT_THAT(r.output, Not(HasSubstr("restarting")));
}

TEST_F(LauncherTest, PartialLinesAndRedrawsBecomeWholeLines) {
  Result r = run(kPsTwoWorkers, {"worker.0=partial", "worker.1=partial"});
  EXPECT_EQ(r.code, 0) << r.output;
  for (const char *name : {"worker.0", "worker.1"}) {
    const std::string p = std::string(name) + " | ";
    EXPECT_THAT(r.output, HasSubstr(p + "partial line\n" + "")) << r.output;
    EXPECT_THAT(r.output, HasSubstr(p + "step 1\n"));
    EXPECT_THAT(r.output, HasSubstr(p + "step 2\n"));
    EXPECT_THAT(r.output, HasSubstr(p + "windows line\n"));
    EXPECT_THAT(r.output, HasSubstr(p + "no newline at the end\n"));
  }
  EXPECT_EQ(r.output.find('\r'), std::string::npos);
  EXPECT_EQ(r.output.find('\x1b'), std::string::npos);
}

TEST_F(LauncherTest, ChiefFailureStopsEverything) {
  Result r = run(R"({"chief": ["localhost:1"], "ps": ["localhost:2"],
                     "worker": ["localhost:3"]})",
                 {"chief.0=exit=4", "worker.0=serve"});
  EXPECT_EQ(r.code, 4) << r.output;
  const size_t failed = positionOf(
      r.output, "[launcher] the chief (chief.0) failed; stopping the job\n");
  EXPECT_LT(positionOf(r.output, "chief.0  | failing\n"), failed);
  EXPECT_GT(positionOf(r.output, "[launcher] worker.0 killed by signal 15"),
            failed);
  EXPECT_GT(positionOf(r.output, "[launcher] ps.0 killed by signal 15"),
            failed);
  EXPECT_THAT(r.output, HasSubstr("[launcher] the job failed (exit code 4)"));
  EXPECT_THAT(r.output, Not(HasSubstr("restarting")));
}

TEST_F(LauncherTest, WorkerZeroIsTheChiefWithoutAChiefJob) {
  Result r = run(kPsTwoWorkers, {"worker.0=crash", "worker.1=serve"});
  EXPECT_EQ(r.code, 128 + SIGSEGV) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[launcher] worker.0 killed by signal 11 "
                                  "(SIGSEGV)\n"));
  EXPECT_THAT(r.output, HasSubstr("[launcher] the chief (worker.0) failed; "
                                  "stopping the job\n"));
  EXPECT_THAT(r.output, Not(HasSubstr("restarting")));
}

TEST_F(LauncherTest, CrashedWorkerIsRestartedOnceAndTheJobSucceeds) {
  Result r = run(kPsTwoWorkers, {"worker.1=crash-once"});
  EXPECT_EQ(r.code, 0) << r.output;
  const size_t crash = positionOf(
      r.output, "[launcher] worker.1 killed by signal 11 (SIGSEGV)\n");
  const size_t restart =
      positionOf(r.output, "[launcher] restarting worker.1 (restart 1 of 3)\n");
  EXPECT_LT(crash, restart);
  EXPECT_GT(positionOf(r.output, "worker.1 | hello from worker.1 restart=1 "),
            restart);
  EXPECT_THAT(r.output, HasSubstr(", restart 1)\n"));
  EXPECT_EQ(count(r.output, "restarting"), 1u);
  EXPECT_THAT(r.output, HasSubstr("stopping ps.0"));
}

TEST_F(LauncherTest, PastTheRestartLimitTheJobFails) {
  Result r = run(kPsTwoWorkers, {"worker.0=serve", "worker.1=crash"},
                 [](LaunchOptions &o) { o.policy.maxRestarts = 2; });
  EXPECT_EQ(r.code, 128 + SIGSEGV) << r.output;
  EXPECT_EQ(count(r.output, "[launcher] worker.1 killed by signal 11"), 3u);
  EXPECT_THAT(r.output, HasSubstr("restarting worker.1 (restart 1 of 2)"));
  EXPECT_THAT(r.output, HasSubstr("restarting worker.1 (restart 2 of 2)"));
  EXPECT_THAT(r.output, Not(HasSubstr("(restart 3 of")));
  EXPECT_THAT(r.output, HasSubstr("[launcher] worker.1 failed after 2 "
                                  "restarts (the limit, --max-restarts 2); "
                                  "stopping the job\n"));
  // The others are stopped, not left running.
  EXPECT_THAT(r.output, HasSubstr("[launcher] worker.0 killed by signal 15"));
  EXPECT_THAT(r.output, HasSubstr("[launcher] ps.0 killed by signal 15"));
}

TEST_F(LauncherTest, AnExitCodeThatRestartsDoNotFixStopsTheJob) {
  // dtf-run's I/O error (4): a missing plan stays missing.
  Result r = run(kPsTwoWorkers, {"worker.0=serve", "worker.1=exit=4"});
  EXPECT_EQ(r.code, 4) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[launcher] worker.1 failed with exit code "
                                  "4, which a restart does not fix; stopping "
                                  "the job\n"));
  EXPECT_THAT(r.output, Not(HasSubstr("restarting")));
}

TEST_F(LauncherTest, NoRestartsWhenTheLimitIsZero) {
  Result r = run(kPsTwoWorkers, {"worker.0=serve", "worker.1=exit=7"},
                 [](LaunchOptions &o) { o.policy.maxRestarts = 0; });
  EXPECT_EQ(r.code, 7) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[launcher] worker.1 failed and restarts "
                                  "are off (--max-restarts 0); stopping the "
                                  "job\n"));
}

TEST_F(LauncherTest, AFailedPsIsRestarted) {
  Result r =
      run(kPsTwoWorkers, {"ps.0=crash-once", "worker.0=slow", "worker.1=slow"});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("restarting ps.0 (restart 1 of 3)"));
  EXPECT_THAT(r.output, HasSubstr("every worker finished; stopping ps.0"));
}

TEST_F(LauncherTest, ChiefFailureCanRestartTheWholeJob) {
  Result r = run(kPsTwoWorkers, {"worker.0=crash-once", "worker.1=slow"},
                 [](LaunchOptions &o) {
                   o.policy.chief.onFailure = FailureAction::kRestartJob;
                 });
  EXPECT_EQ(r.code, 0) << r.output;
  const size_t restart = positionOf(
      r.output, "[launcher] the chief (worker.0) failed; restarting the job "
                "(restart 1 of 3)\n");
  // Every task starts again, with DTF_RESTART_COUNT=1.
  EXPECT_EQ(count(r.output, "[launcher] ps.0 started"), 2u);
  EXPECT_EQ(count(r.output, "[launcher] worker.1 started"), 2u);
  EXPECT_GT(positionOf(r.output, "worker.0 | hello from worker.0 restart=1"),
            restart);
  EXPECT_GT(positionOf(r.output, "worker.1 | hello from worker.1 restart=1"),
            restart);
}

// --fresh moves the checkpoints aside: only the job's first start gets it,
// so that a job started again goes on from its checkpoints.
TEST_F(LauncherTest, AJobStartedAgainGoesOnWithoutFresh) {
  Result r = run(kPsTwoWorkers, {"worker.0=crash-once", "worker.1=slow"},
                 [](LaunchOptions &o) {
                   o.policy.chief.onFailure = FailureAction::kRestartJob;
                   o.passThroughArgs.push_back("--fresh");
                 });
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("worker.0 | about to crash, args=plan.bin "
                                  "--steps 7 --fresh --cluster"));
  EXPECT_THAT(r.output, HasSubstr("worker.1 | hello from worker.1 restart=1 "
                                  "DTF_TASK=worker.1 args=plan.bin --steps 7 "
                                  "--cluster"));
  EXPECT_THAT(r.output, HasSubstr("worker.0 | hello from worker.0 restart=1 "
                                  "DTF_TASK=worker.0 args=plan.bin --steps 7 "
                                  "--cluster"));
}

// Workers that share this machine's cores get a share each (--threads;
// the ps tasks too, whose fake prints no arguments); one worker alone keeps
// every core.
TEST_F(LauncherTest, SharedCoresAreDividedAmongTheWorkers) {
  Result r = run(kPsTwoWorkers, {"worker.0=slow", "worker.1=slow"},
                 [](LaunchOptions &o) {
                   o.shareCores = true;
                   o.cores = 5;
                 });
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[launcher] 2 worker tasks share this "
                                  "machine's 5 cores: every task runs 2 "
                                  "threads within each op (--threads 2; pass "
                                  "--threads to choose)\n"));
  for (const char *task : {"worker.0 | hello from worker.0",
                           "worker.1 | hello from worker.1"}) {
    const size_t at = positionOf(r.output, task);
    const std::string line =
        r.output.substr(at, r.output.find('\n', at) - at);
    // The user's arguments, --threads, then the task's cluster options.
    EXPECT_THAT(line, HasSubstr(" args=plan.bin --steps 7 --threads 2 "
                                "--cluster "));
  }

  r = run(R"({"ps": ["localhost:2222"], "worker": ["localhost:2223"]})",
          {"worker.0=slow"}, [](LaunchOptions &o) {
            o.shareCores = true;
            o.cores = 2;
          });
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, Not(HasSubstr("--threads")));
  EXPECT_THAT(r.output, Not(HasSubstr("share this machine's")));

  r = run(kPsTwoWorkers, {"worker.0=slow", "worker.1=slow"},
          [](LaunchOptions &o) {
            o.shareCores = true;
            o.cores = 1;
          });
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("every task runs 1 thread within each op "
                                  "(--threads 1;"));
  EXPECT_EQ(count(r.output, " --threads 1 --cluster "), 2u) << r.output;
}

TEST_F(LauncherTest, ChiefFailoverMovesTheChiefRoleToTheNextWorker) {
  Result r = run(kPsTwoWorkers, {"worker.0=crash-once", "worker.1=slow"},
                 [](LaunchOptions &o) {
                   o.policy.chief.onFailure = FailureAction::kRestartJob;
                   o.chiefFailover = true;
                 });
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("[launcher] the chief (worker.0) failed; moving the "
                        "chief role to worker.1 and restarting the job "
                        "(restart 1 of 3)\n"));
  // Every task of the restarted job is told who the chief is.
  EXPECT_THAT(r.output, HasSubstr("hello from worker.0 restart=1"));
  EXPECT_GE(count(r.output, "--chief worker.1"), 2u) << r.output;
}

TEST(ClusterSpecChief, SetChiefTakesAWorkerOnly) {
  ClusterSpec spec;
  ASSERT_TRUE(ClusterSpec::parseJson(
                  R"({"ps": ["h:1"], "worker": ["h:2", "h:3"]})", "c.json", &spec)
                  .isOk());
  EXPECT_EQ(spec.chief().str(), "worker.0");
  ASSERT_TRUE(spec.setChief({"worker", 1}).isOk());
  EXPECT_EQ(spec.chief().str(), "worker.1");
  EXPECT_TRUE(spec.isChief({"worker", 1}));
  Status s = spec.setChief({"ps", 0});
  ASSERT_FALSE(s.isOk());
  EXPECT_THAT(s.message(), HasSubstr("--chief ps.0: c.json has no such worker"));
  EXPECT_FALSE(spec.setChief({"worker", 2}).isOk());
}

TEST_F(LauncherTest, CtrlCIsForwardedAndExits130) {
  Result r =
      run(kPsTwoWorkers, {"worker.0=interrupt-parent=3", "worker.1=serve"},
          [&](LaunchOptions &o) {
            o.passThroughArgs.push_back("--mark");
            o.passThroughArgs.push_back(dir_);
          });
  EXPECT_EQ(r.code, 130) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[launcher] interrupted; stopping every "
                                  "task after its current step"));
  // Each task got SIGINT (not SIGTERM or SIGKILL) and stopped on its own.
  EXPECT_THAT(r.output, HasSubstr("ps.0     | stopping after step\n"));
  EXPECT_THAT(r.output, HasSubstr("worker.0 | stopping after step\n"));
  EXPECT_THAT(r.output, HasSubstr("worker.1 | stopping after step\n"));
  EXPECT_EQ(count(r.output, "exited (code 130)"), 3u);
  EXPECT_THAT(r.output, Not(HasSubstr("restarting")));
  EXPECT_THAT(r.output, HasSubstr("[launcher] stopped (exit code 130)"));
}

constexpr const char *kTwoPsTwoWorkers =
    R"({"ps": ["localhost:2222", "localhost:2225"],
        "worker": ["localhost:2223", "localhost:2224"]})";
constexpr const char *kTwoPsThreeWorkers =
    R"({"ps": ["localhost:2222", "localhost:2225"],
        "worker": ["localhost:2223", "localhost:2224", "localhost:2226"]})";

// The fake tasks mark DIR/TASK.serving, and the job starts over ps.0 alone.
std::function<void(LaunchOptions &)>
reshardOptions(const std::string &dir, const std::string &refusal) {
  return [dir, refusal](LaunchOptions &o) {
    o.passThroughArgs.push_back("--mark");
    o.passThroughArgs.push_back(dir);
    o.ps = 1;
    o.psRefusal = refusal;
  };
}

// `scale ps=2` (docs/elastic.md): the other workers stop first, then the
// chief saves the step and stops the ps, then every task of the job's scale
// (2 of the 3 worker slots) starts again with --ps 2, ps.1 among them; a
// request meanwhile is refused.
TEST_F(LauncherTest, APsReshardStopsInOrderAndStartsEveryTaskOverTheNewPs) {
  auto options = reshardOptions(dir_, "");
  Result r = run(kTwoPsThreeWorkers, {"worker.0=reshard=2", "worker.1=leave"},
                 [&](LaunchOptions &o) {
                   options(o);
                   o.workers = 2;
                 });
  EXPECT_EQ(r.code, 0) << r.output;
  const size_t request =
      positionOf(r.output, "[launcher] scale: re-sharding the ps tasks 1 -> 2 "
                           "through a checkpoint of the current step: asking "
                           "worker.1 to stop after the current step, then the "
                           "chief to save the step and stop the ps tasks");
  const size_t left =
      positionOf(r.output, "worker.1 | left the job (asked to: SIGUSR1)");
  const size_t paused =
      positionOf(r.output, "worker.0 | paused at global step 42");
  const size_t psStopped =
      positionOf(r.output, "[launcher] ps.0 exited (code 0)");
  const size_t stopped =
      positionOf(r.output, "[launcher] scale: every task stopped ");
  const size_t ps1 = positionOf(r.output, "[launcher] ps.1 started");
  const size_t scaled =
      positionOf(r.output, "[launcher] ps scaled 1 -> 2: the job paused ");
  EXPECT_LT(request, left);
  EXPECT_LT(left, paused);
  EXPECT_LT(paused, psStopped);
  EXPECT_LT(psStopped, stopped);
  EXPECT_LT(stopped, ps1);
  EXPECT_LT(ps1, scaled);
  // Said once the restarted chief restored the step.
  EXPECT_LT(positionOf(r.output, "worker.0 | restored checkpoint ckpt-42"),
            scaled);
  EXPECT_THAT(r.output, HasSubstr("(the chief saved global step 42); starting "
                                  "them again over 2 ps tasks"));
  EXPECT_THAT(r.output, HasSubstr(" at global step 42 (checkpoint ckpt-42, "
                                  "re-sharded over 2 ps; "));
  // Every task of the restarted job has --ps 2.
  EXPECT_THAT(r.output, HasSubstr("--ps 2 --job worker --task 0\n"));
  EXPECT_THAT(r.output, HasSubstr("--ps 2 --job worker --task 1\n"));
  EXPECT_EQ(count(r.output, "[launcher] ps.1 started"), 1u);
  EXPECT_THAT(r.output, Not(HasSubstr("worker.2 started")));
  EXPECT_LT(positionOf(r.output, "[launcher] scale: the ps tasks are being "
                                 "re-sharded (1 -> 2); ask again once the "
                                 "job runs"),
            stopped);
  EXPECT_THAT(r.output, Not(HasSubstr("restarting")));
  EXPECT_THAT(r.output, HasSubstr("[launcher] the job finished\n"));
}

TEST_F(LauncherTest, APsReshardTheJobCannotTakeIsRefusedAndNothingStops) {
  Result r = run(kTwoPsTwoWorkers, {"worker.0=reshard=2", "worker.1=slow"},
                 reshardOptions(dir_, "this job has no --model-dir"));
  // The chief is never asked to pause (it finishes after 4 s), and the job
  // is not re-sharded.
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[launcher] scale ps=2: this job has no "
                                  "--model-dir\n"));
  EXPECT_THAT(r.output, Not(HasSubstr("ps.1 started")));
  EXPECT_THAT(r.output, Not(HasSubstr("paused at global step")));
}

TEST_F(LauncherTest, APsRequestForTheCountTheJobRunsOverDoesNothing) {
  Result r = run(kTwoPsTwoWorkers, {"worker.0=reshard=1", "worker.1=slow"},
                 reshardOptions(dir_, ""));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[launcher] scale: the job runs over 1 ps "
                                  "task already; nothing to do\n"));
  EXPECT_THAT(r.output, Not(HasSubstr("ps.1 started")));
  EXPECT_THAT(r.output, Not(HasSubstr("re-sharding")));
}

TEST_F(LauncherTest, SigtermStopsTheTasksLikeCtrlCAndExits143) {
  Result r =
      run(kPsTwoWorkers, {"worker.0=terminate-parent=3", "worker.1=serve"},
          [&](LaunchOptions &o) {
            o.passThroughArgs.push_back("--mark");
            o.passThroughArgs.push_back(dir_);
          });
  EXPECT_EQ(r.code, 128 + SIGTERM) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[launcher] terminated; stopping every "
                                  "task after its current step"));
  // dtf-run stops after its step on SIGINT, so that is what the tasks get.
  EXPECT_EQ(count(r.output, "| stopping after step\n"), 3u);
}

TEST_F(LauncherTest, ATaskThatIgnoresSigtermIsKilledAfterTheGrace) {
  // The workers take 300 ms, so that the ps has set SIGTERM aside before the
  // launcher stops it (at once, on a loaded machine, it could still be
  // starting and die of SIGTERM).
  Result r = run(kPsTwoWorkers,
                 {"ps.0=ignore-term", "worker.0=slow", "worker.1=slow"},
                 [](LaunchOptions &o) {
                   o.stopGrace = std::chrono::milliseconds(300);
                 });
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[launcher] ps.0 did not stop within 300 "
                                  "ms; killing\n"));
  EXPECT_THAT(r.output, HasSubstr("[launcher] ps.0 killed by signal 9 "
                                  "(SIGKILL)\n"));
}

TEST_F(LauncherTest, AProgramThatCannotStart) {
  Result r = run(kPsTwoWorkers, {},
                 [](LaunchOptions &o) { o.program = "/nonexistent/dtf-run"; });
  EXPECT_EQ(r.code, kLauncherCannotStart) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[launcher] cannot start ps.0: "
                                  "/nonexistent/dtf-run: No such file or "
                                  "directory\n"));
  EXPECT_THAT(r.output, Not(HasSubstr("restarting")));
}

TEST_F(LauncherTest, NoTaskOnThisMachine) {
  Result r = run(R"({"worker": ["far-away.invalid:1"]})", {});
  EXPECT_EQ(r.code, kLauncherUsageError);
  EXPECT_THAT(r.output, HasSubstr("c.json: no task of the cluster is on this "
                                  "machine; on each machine of the cluster "
                                  "run dtf-run with --job and --task"));
}

TEST_F(LauncherTest, OnlyTheLocalTasksStart) {
  Result r = run(R"({"ps": ["far-away.invalid:1"], "worker": ["localhost:2",
                     "far-away.invalid:3"]})",
                 {});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("[launcher] starting 1 of the 3 tasks of " + dir_ +
                        "/c.json; start the others (ps.0, "
                        "worker.1) on their machines"));
  EXPECT_THAT(r.output, HasSubstr("worker.0 | hello from worker.0"));
  EXPECT_THAT(r.output, Not(HasSubstr("ps.0 started")));
}

TEST_F(LauncherTest, TwoLocalTasksOnOnePort) {
  Result r =
      run(R"({"ps": ["127.0.0.2:2222"], "worker": ["localhost:2222"]})", {});
  EXPECT_EQ(r.code, kLauncherUsageError);
  EXPECT_THAT(r.output, HasSubstr("ps.0 and worker.0 would both listen on "
                                  "port 2222 of this machine"));
}

// The launcher killed by SIGKILL: its tasks die with it (PDEATHSIG).
TEST_F(LauncherTest, NoTaskOutlivesTheLauncher) {
  ClusterSpec cluster;
  ASSERT_TRUE(ClusterSpec::parseJson(kPsTwoWorkers, "c.json", &cluster).isOk());
  LaunchOptions options =
      optionsFor({"ps.0=pidfile=" + dir_, "worker.0=pidfile=" + dir_,
                  "worker.1=pidfile=" + dir_});
  std::FILE *sink = std::fopen("/dev/null", "w");
  ASSERT_NE(sink, nullptr);
  options.out = options.err = sink;
  const pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0)
    _exit(runLauncher(cluster, options));

  std::vector<pid_t> tasks;
  for (int tries = 0; tries < 500 && tasks.size() < 3; ++tries) {
    tasks.clear();
    for (const char *name : {"ps.0", "worker.0", "worker.1"}) {
      std::ifstream in(dir_ + "/" + name + ".pid");
      pid_t pid = 0;
      if (in >> pid && pid > 0)
        tasks.push_back(pid);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(tasks.size(), 3u) << "the tasks did not start";
  kill(launcher, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(launcher, &status, 0), launcher);
  std::fclose(sink);

  // Dead, or a zombie that only waits for its new parent to reap it.
  auto alive = [](pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line))
      return false;
    size_t paren = line.rfind(')');
    return paren != std::string::npos && paren + 2 < line.size() &&
           line[paren + 2] != 'Z' && line[paren + 2] != 'X';
  };
  for (pid_t pid : tasks) {
    bool gone = false;
    for (int tries = 0; tries < 200 && !gone; ++tries) {
      gone = !alive(pid);
      if (!gone)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(gone) << "task pid " << pid << " outlived the launcher";
    if (!gone)
      kill(pid, SIGKILL);
  }
}

TEST(ParseLauncherArguments, DropsTheClusterOptions) {
  LaunchOptions o;
  Status s = parseLauncherArguments({"plan.bin", "--cluster", "c.json",
                                     "--steps", "5", "--job=worker", "--task",
                                     "1", "--max-restarts=7", "--quiet"},
                                    &o);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(o.passThroughArgs,
            (std::vector<std::string>{"plan.bin", "--steps", "5", "--quiet"}));
  EXPECT_EQ(o.policy.maxRestarts, 7);
  EXPECT_EQ(RestartPolicy().maxRestarts, 3);

  EXPECT_THAT(
      parseLauncherArguments({"p", "--max-restarts", "x"}, &o).message(),
      HasSubstr("--max-restarts expects a number of restarts per task "
                "(0 to 9999), got 'x'"));
  EXPECT_THAT(parseLauncherArguments({"p", "--cluster"}, &o).message(),
              HasSubstr("--cluster needs a value"));
}

TEST(RestartPolicy, DefaultsFollowTheFaultToleranceRules) {
  RestartPolicy p;
  EXPECT_EQ(p.forRole(TaskRole::kWorker).onFailure,
            FailureAction::kRestartTask);
  EXPECT_EQ(p.forRole(TaskRole::kPs).onFailure, FailureAction::kRestartTask);
  EXPECT_EQ(p.forRole(TaskRole::kChief).onFailure, FailureAction::kStopJob);
  EXPECT_TRUE(p.forRole(TaskRole::kChief).awaited);
  EXPECT_TRUE(p.forRole(TaskRole::kWorker).awaited);
  EXPECT_FALSE(p.forRole(TaskRole::kPs).awaited);

  ClusterSpec c;
  ASSERT_TRUE(ClusterSpec::parseJson(kPsTwoWorkers, "c.json", &c).isOk());
  EXPECT_EQ(roleOf(c, {"worker", 0}), TaskRole::kChief);
  EXPECT_EQ(roleOf(c, {"worker", 1}), TaskRole::kWorker);
  EXPECT_EQ(roleOf(c, {"ps", 0}), TaskRole::kPs);
  EXPECT_STREQ(roleName(TaskRole::kPs), "ps");
}

} // namespace
} // namespace dtf::cluster
