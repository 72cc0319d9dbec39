// Launcher: starts every task of a cluster that lives on this machine as a
// child dtf-run and supervises them (output, restarts, stopping).
#pragma once

#include "schema/ClusterSpec.h"

#include <chrono>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace dtf::cluster {

/// What a task is to the job, which decides what its exit means.
enum class TaskRole {
  kChief,  // chief:0, or worker:0 when there is no chief job
  kWorker, // the other workers
  kPs,
};
TaskRole roleOf(const ClusterSpec &cluster, const TaskId &task);
const char *roleName(TaskRole role);

/// What the launcher does when a task fails (exits non-zero or is killed by
/// a signal) while the job runs.
enum class FailureAction {
  kRestartTask, // start it again, alone, with the same arguments
  kStopJob,     // stop every task; the launcher fails
  kRestartJob,  // stop every task, then start them all again
};

struct RolePolicy {
  /// The job is done when every awaited task has exited 0; the others (the
  /// ps, which serve until told to stop) are then stopped.
  bool awaited = true;
  FailureAction onFailure = FailureAction::kStopJob;
};

/// The restart policy, one row per role. Restarts count per task (a
/// kRestartJob counts one restart of the job); past maxRestarts the job is
/// stopped and the launcher fails. A restarted task gets DTF_RESTART_COUNT=n
/// (n >= 1) in its environment; a first start gets DTF_RESTART_COUNT=0.
struct RestartPolicy {
  RolePolicy chief{true, FailureAction::kStopJob};
  RolePolicy worker{true, FailureAction::kRestartTask};
  RolePolicy ps{false, FailureAction::kRestartTask};
  int maxRestarts = 3;
  /// Pause before a restart, so that a task that fails at once does not
  /// spin (and its port is free again).
  std::chrono::milliseconds restartDelay{1000};
  /// Exit codes that a restart does not fix, which stop the job at once:
  /// dtf-run's usage error (2), not available in this build (3) and I/O
  /// error (4: the plan, the cluster file or a data source).
  std::set<int> permanentExitCodes{2, 3, 4};

  const RolePolicy &forRole(TaskRole role) const;
};

/// The environment variables a task started by the launcher finds.
inline constexpr const char *kRestartCountEnv = "DTF_RESTART_COUNT";
inline constexpr const char *kTaskEnv = "DTF_TASK"; // "worker.1"

struct LaunchOptions {
  /// The program every task runs: dtf-run itself (tests substitute a fake).
  std::string program;
  /// Arguments after the program name: the plan and the user's options,
  /// without --cluster, --job, --task and --max-restarts. Each task gets
  /// them followed by --cluster FILE --job J --task I.
  std::vector<std::string> passThroughArgs;
  std::string clusterFile;
  RestartPolicy policy;
  /// How many worker tasks to start (the chief counted, in the order of
  /// scalableTasks); 0: all. `dtf-run ctl ... scale worker=N` changes it
  /// while the job runs (docs/elastic.md). dtf-run --workers N.
  int workers = 0;
  /// How many ps tasks to start (the first N of the ps job); 0: all.
  /// `dtf-run ctl ... scale ps=N` re-shards the job over N ps while it runs:
  /// the workers but the chief stop after their step, the chief saves the
  /// current step and stops the ps tasks, and every task starts again with
  /// --ps N (docs/elastic.md). dtf-run --ps N; every task gets --ps.
  int ps = 0;
  /// Why the job's ps tasks cannot be re-sharded at all ("" when they can):
  /// the plan's replication, no model dir.
  std::string psRefusal;
  /// Why the job cannot run over N ps tasks ("" when it can): a plan bound
  /// to another ps count, a variable pinned to a ps task past N. Unset: any.
  std::function<std::string(int)> psCountRefusal;
  /// When the chief fails, move the chief role to the next worker (every
  /// task restarts with --chief NEXT) instead of restarting it
  /// (dtf-run --chief-failover).
  bool chiefFailover = false;
  /// The tasks share this machine's cores: every task gets --threads
  /// max(1, cores / the worker tasks started here), so that two workers on
  /// 2 cores do not each run 2 threads. dtf-run sets it when neither the
  /// user (--threads) nor the plan (intra_op_threads) chose a count.
  bool shareCores = false;
  /// The cores shareCores divides; 0: this machine's
  /// (std::thread::hardware_concurrency).
  int cores = 0;
  /// SIGTERM to a task, then SIGKILL after this: the ps at the end, every
  /// task when the job stops on a failure.
  std::chrono::milliseconds stopGrace{10000};
  /// After Ctrl-C (or SIGTERM to the launcher) the tasks get SIGINT, finish
  /// their step and stop; SIGKILL after this. A second Ctrl-C kills at once.
  std::chrono::milliseconds interruptGrace{60000};
  /// Where the tasks' stdout lines go, and their stderr lines with the
  /// launcher's own "[launcher] ..." lines. May be the same stream.
  std::FILE *out = stdout;
  std::FILE *err = stderr;
};

/// Exit codes of runLauncher besides 0 and a failed task's own code.
inline constexpr int kLauncherUsageError = 2; // nothing local, port clash
inline constexpr int kLauncherCannotStart = 127;
inline constexpr int kLauncherInterrupted = 130;

/// Starts the tasks of `cluster` whose host is this machine and supervises
/// them until the job ends. Returns 0 when every awaited task finished with
/// exit code 0; 130 after Ctrl-C (128 + the signal for SIGTERM); else the
/// exit code of the task that ended the job (128 + signal when killed), or
/// one of the codes above. Installs handlers for SIGINT, SIGTERM and SIGCHLD
/// while it runs and restores the previous ones. No task outlives it: each
/// runs in its own process group with PR_SET_PDEATHSIG=SIGKILL.
int runLauncher(const ClusterSpec &cluster, const LaunchOptions &options);

/// Splits dtf-run's arguments (without argv[0]) for the launcher: the
/// cluster options (--cluster, --job, --task, in both --x v and --x=v form)
/// are dropped, --max-restarts N sets options->policy.maxRestarts,
/// --workers N options->workers, --ps N options->ps,
/// --chief-failover sets options->chiefFailover, the rest becomes
/// options->passThroughArgs.
Status parseLauncherArguments(const std::vector<std::string> &args,
                              LaunchOptions *options);

} // namespace dtf::cluster
