// The launcher's state, shared by its poll loop (Launcher.cpp) and its
// scaling of a running job (LauncherScaling.cpp): the local tasks, why the
// job stops, a ps re-shard under way, and the Launcher that acts on them.
#pragma once

#include "runtime/cluster/Launcher.h"
#include "runtime/cluster/LineBuffer.h"

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace dtf::cluster::launcher {

using Clock = std::chrono::steady_clock;

/// "10 s", or "500 ms" when not whole seconds.
std::string seconds(std::chrono::milliseconds d);

struct Task {
  TaskId id;
  TaskRole role = TaskRole::kWorker;
  std::string prefix; // "worker.1 | "
  enum class State {
    kWaiting, // to be started at startAt
    kRunning,
    kSucceeded, // exited 0
    kDone,      // ended while the job stopped, or failed past restarting
    kParked,    // a worker slot outside the job's scale (docs/elastic.md)
  } state = State::kWaiting;
  bool leaving = false; // asked to leave (SIGUSR1): its exit parks it
  bool rejoin = false;  // scaled up again while leaving: start it again
  pid_t pid = -1;
  int fds[2] = {-1, -1}; // the read ends of its stdout and stderr
  LineBuffer lines[2];
  int restarts = 0; // DTF_RESTART_COUNT of its next start
  Clock::time_point startAt;
};

enum class StopReason {
  kNone,
  kCompleted,   // every awaited task exited 0: stop the ps
  kFailed,      // a failure the policy does not restart
  kRestartJob,  // a failure that restarts every task
  kInterrupted, // Ctrl-C or SIGTERM to the launcher
  kReshard,     // a ps re-shard: stop in order, start again over new ps
};

// A ps re-shard (docs/elastic.md): its ordered stop, then the restart.
struct Reshard {
  enum class Phase {
    kNone,
    kWorkers, // the workers but the chief finish their step and exit
    kChief,   // the chief saves the current step and stops the ps tasks
    kPs,      // the ps tasks exit
    kRestore, // every task started again; until the chief restores the step
  } phase = Phase::kNone;
  int from = 0, to = 0;
  Clock::time_point asked;      // the request
  Clock::time_point chiefAsked; // the global step stops moving after this
  Clock::time_point deadline;   // of the phase
  bool termSent = false;        // kPs: SIGTERM sent, SIGKILL next
  long long step = -1;          // the global step the chief saved
};

class Launcher {
public:
  Launcher(const ClusterSpec &cluster, const LaunchOptions &options)
      : cluster_(cluster), options_(options) {}

  int run();

private:
  void say(const std::string &line) const {
    std::fprintf(options_.err, "[launcher] %s\n", line.c_str());
    std::fflush(options_.err);
  }
  void printLine(Task &task, int stream, std::string_view line) {
    std::FILE *to = stream == 0 ? options_.out : options_.err;
    std::fwrite(task.prefix.data(), 1, task.prefix.size(), to);
    std::fwrite(line.data(), 1, line.size(), to);
    std::fputc('\n', to);
    std::fflush(to);
    if (reshard_.phase == Reshard::Phase::kChief ||
        reshard_.phase == Reshard::Phase::kRestore)
      watchReshard(task, line);
  }

  bool start(Task &task);
  void readOutput(Task &task, int stream, bool untilEnd);
  void closeOutput(Task &task);
  void reap();
  void onExit(Task &task, int status);
  void onFailure(Task &task, int status);
  void stopJob(StopReason reason, int signal, std::chrono::milliseconds grace,
               int exitCode);
  void onSignal(int signal);
  void killAll();
  bool anyRunning() const;
  void afterStopped();
  int pollTimeoutMs() const;
  // SIGUSR1: `dtf-run ctl` left a scale request beside the cluster file.
  void scale(int workers);
  void takeScaleRequest();
  // `dtf-run ctl ... scale ps=N`: re-shards the job over N ps tasks.
  void reshard(int ps);
  void advanceReshard();
  void restartResharded();
  static int reshardGroup(const Task &task);
  void watchReshard(const Task &task, std::string_view line);
  // Why a ps re-shard to `ps` tasks is refused ("" when it is not).
  std::string reshardRefusal(int ps) const;
  // The job's scale at its start (--workers, --ps: the other slots parked)
  // and the pid file `dtf-run ctl` signals, with the ps re-shards it
  // refuses (`local`: every task of the cluster is on this machine). False
  // after saying why the scale cannot be.
  bool startScale(bool local);
  // options_.shareCores: threads_ from the worker tasks the job starts here.
  void shareCores();

  ClusterSpec cluster_; // a copy: failover moves its chief
  const LaunchOptions &options_;
  std::string chiefArg_; // --chief for every task after a failover
  int workers_ = 0;      // the scale: worker tasks that run (0: all)
  int ps_ = 0;           // the ps tasks the job runs over (0: all)
  std::string psRefusal_; // why no ps re-shard is taken ("" : they are)
  Reshard reshard_;
  bool jobStarted_ = false; // --fresh only at the job's first start
  int threads_ = 0; // --threads for every task (shareCores); 0: none given
  std::vector<Task> tasks_;
  StopReason stopping_ = StopReason::kNone;
  Clock::time_point stopDeadline_;
  bool killed_ = false;
  int exitCode_ = 0;
  int jobRestarts_ = 0;
  bool finished_ = false;
};

} // namespace dtf::cluster::launcher
