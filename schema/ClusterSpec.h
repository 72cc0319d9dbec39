// ClusterSpec: the jobs and task addresses of a ps/worker cluster, read from a
// cluster.json file or the TF_CONFIG environment variable.
#pragma once

#include "schema/Status.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dtf::cluster {

/// The jobs a cluster may hold. `evaluator` (TensorFlow's side-car job, at
/// most one task) is not part of training: it evaluates the checkpoints the
/// job writes. Kubeflow's `master` is read as `chief`.
inline constexpr const char *kChiefJob = "chief";
inline constexpr const char *kPsJob = "ps";
inline constexpr const char *kWorkerJob = "worker";
inline constexpr const char *kEvaluatorJob = "evaluator";

/// One task of a cluster: a job name and an index within it.
struct TaskId {
  std::string job;
  int index = 0;

  /// "worker.1": how the launcher and log lines name a task.
  std::string str() const;
  /// "/job:worker/task:1": the task's device-name prefix.
  std::string deviceName() const;

  bool operator==(const TaskId &o) const {
    return job == o.job && index == o.index;
  }
  bool operator!=(const TaskId &o) const { return !(*this == o); }
  bool operator<(const TaskId &o) const {
    return job != o.job ? job < o.job : index < o.index;
  }
};

/// What this machine answers to: its host name and its interface addresses.
/// Captured once (LocalHost::current()) and passed in, so that isLocalHost can
/// be tested with any machine's identity.
struct LocalHost {
  std::string hostname;               // gethostname(), lower case
  std::vector<std::string> addresses; // numeric, e.g. "10.0.0.7", "fe80::1"

  static const LocalHost &current();
};

/// True when `host` (a name or numeric address, IPv6 with or without
/// brackets) names this machine: localhost, 127.0.0.0/8, ::1, 0.0.0.0, the
/// host name (or its fully qualified form when the host name is short), or
/// one of the interface addresses. Names are not resolved through DNS.
bool isLocalHost(const std::string &host, const LocalHost &self);

/// A host:port split. IPv6 hosts are written in brackets: "[::1]:2222".
struct HostPort {
  std::string host; // without brackets
  int port = 0;
};

/// Splits and checks "host:port"; `where` names the address in messages
/// (e.g. "cluster.json: worker[1]").
Status parseHostPort(const std::string &address, const std::string &where,
                     HostPort *out);

/// The cluster: every job's task addresses, in task order.
class ClusterSpec {
public:
  /// Reads a cluster file: either a ClusterSpec object ({"ps": [...],
  /// "worker": [...], "chief": [...]}) or TF_CONFIG's full form ({"cluster":
  /// {...}, "task": {"type": "worker", "index": 1}}). When the file has a
  /// task and `task` is given, it is stored there; else `task` is reset.
  static Status parseFile(const std::string &path, ClusterSpec *out,
                          std::optional<TaskId> *task = nullptr);
  /// The same from text; `sourceName` prefixes every message.
  static Status parseJson(const std::string &text,
                          const std::string &sourceName, ClusterSpec *out,
                          std::optional<TaskId> *task = nullptr);
  /// Reads the TF_CONFIG environment variable. `*found` is false (and the
  /// status ok) when it is unset or blank, as in TensorFlow.
  static Status fromEnvironment(ClusterSpec *out, std::optional<TaskId> *task,
                                bool *found);

  /// Where the spec came from ("cluster.json", "TF_CONFIG"), for messages.
  const std::string &source() const { return source_; }
  /// TF_CONFIG's "environment" ("cloud" as Kubeflow writes it); "" when
  /// absent.
  const std::string &environment() const { return environment_; }

  bool hasJob(const std::string &job) const { return jobs_.count(job) != 0; }
  /// 0 for a job the cluster does not have.
  int numTasks(const std::string &job) const;
  int numPs() const { return numTasks(kPsJob); }
  /// Workers only, not the chief job.
  int numWorkers() const { return numTasks(kWorkerJob); }
  /// "host:port" of a task; empty when the cluster has no such task.
  std::string address(const TaskId &task) const;
  /// The task that initializes variables and writes checkpoints: chief:0
  /// when there is a chief job, else worker:0.
  TaskId chief() const;
  bool isChief(const TaskId &task) const { return task == chief(); }
  /// Moves the chief role to `task` (dtf-run --chief), a task of the chief
  /// or worker job; an error naming it otherwise.
  Status setChief(const TaskId &task);
  /// Keeps the first `n` tasks of the ps job and drops the rest (dtf-run
  /// --ps N: the job runs over those, the others are slots a later re-shard
  /// may use, docs/elastic.md). An error naming the range otherwise.
  Status keepFirstPs(int n);
  /// Every task, chief first, then ps, then workers, then the evaluator, each
  /// in index order.
  std::vector<TaskId> allTasks() const;
  /// True when the task's host is this machine (see isLocalHost).
  bool isLocal(const TaskId &task) const;
  bool isLocal(const TaskId &task, const LocalHost &self) const;

  /// Checks that `task` is a task of this cluster; the message names the
  /// flag or variable it came from (`origin`, e.g. "--job worker --task 3").
  Status checkTask(const TaskId &task, const std::string &origin) const;

  /// Checks that the cluster has at least `needed` tasks in `job` for
  /// `what` (e.g. "plan.bin places variables on 3 ps tasks"), with one
  /// message shape for every such mismatch.
  Status checkJobSize(const std::string &job, int needed,
                      const std::string &what) const;

  /// Builds a spec in code (tests, the embedded default); addresses are
  /// checked as in a file.
  static Status
  fromJobs(const std::map<std::string, std::vector<std::string>> &jobs,
           const std::string &sourceName, ClusterSpec *out);

private:
  std::string source_;
  std::string environment_;
  std::map<std::string, std::vector<std::string>> jobs_;
  std::optional<TaskId> chief_;
};

} // namespace dtf::cluster
