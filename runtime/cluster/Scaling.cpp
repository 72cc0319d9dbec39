// Scaling: the request file, the launcher's pid file and `dtf-run ctl`.
#include "runtime/cluster/Scaling.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace dtf::cluster {
namespace {

constexpr const char *kCtlUsage =
    R"(usage: dtf-run ctl --cluster FILE scale worker=N|ps=N

Scales the running job that `dtf-run PLAN --cluster FILE` launched on this
machine (docs/elastic.md). The launcher takes the request at once and says
what it does.

worker=N: N worker tasks of FILE run, the chief counted among them (it never
stops). Scaling up starts the first slots of FILE that do not run, which
join at their next step; scaling down asks the last ones to leave after
their step (SIGUSR1: each tells the ps tasks and exits 0). A request while
one is under way replaces it.

ps=N: the job runs over the first N ps tasks of FILE, its variables
re-sharded over them through a checkpoint of the current step: the workers
but the chief stop after their step, the chief saves the step the ps tasks
reached and stops them, and every task starts again over N ps, the chief
restoring that checkpoint. The global step goes on from where it was; the
job pauses for the stop and the restart. Needs --model-dir, between-graph
replication, and every task of FILE on this machine.

  --cluster FILE   the cluster file the launcher was started with
  worker=N         1 to the number of worker slots of FILE on this machine
  ps=N             1 to the number of ps tasks of FILE
)";

// Writes `text` to `path` through a file beside it and a rename: a reader
// sees the whole request or the previous one.
Status writeWhole(const std::string &path, const std::string &text) {
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                      0600);
  if (fd < 0)
    return errorStatus("cannot write ", tmp, ": ", std::strerror(errno));
  const bool ok = write(fd, text.data(), text.size()) == ssize_t(text.size());
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0)
    return errorStatus("cannot write ", path, ": ", std::strerror(errno));
  return Status::ok();
}

// When process `pid` started (field 22 of /proc/PID/stat, in clock ticks
// since boot), or "" when it does not run: with the pid it names one process
// for good, where a pid alone may have been reused since it was written.
std::string startTimeOf(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat))
    return "";
  const size_t paren = stat.rfind(')'); // the name may hold spaces
  if (paren == std::string::npos)
    return "";
  std::istringstream fields(stat.substr(paren + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i)
    if (i == 22)
      return field;
  return "";
}

} // namespace

std::string launcherPidPath(const std::string &clusterFile) {
  return clusterFile + ".launcher";
}
std::string scaleRequestPath(const std::string &clusterFile) {
  return clusterFile + ".scale";
}

std::vector<TaskId> scalableTasks(const ClusterSpec &cluster) {
  std::vector<TaskId> tasks;
  const TaskId chief = cluster.chief();
  if (cluster.numTasks(chief.job) > chief.index && cluster.isLocal(chief))
    tasks.push_back(chief);
  for (const char *job : {kChiefJob, kWorkerJob})
    for (int i = 0; i < cluster.numTasks(job); ++i) {
      const TaskId t{job, i};
      if (t != chief && cluster.isLocal(t))
        tasks.push_back(t);
    }
  return tasks;
}

Status parseScaleRequest(const std::string &text, const ClusterSpec &cluster,
                         ScaleRequest *out) {
  std::string s = text;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  const size_t eq = s.find('=');
  const std::string job = s.substr(0, eq);
  const std::string count =
      eq == std::string::npos ? std::string() : s.substr(eq + 1);
  const int workerSlots = int(scalableTasks(cluster).size());
  const std::string workerRange =
      strCat("1 to ", workerSlots, " (the worker slots of ", cluster.source(),
             " on this machine, the chief counted)");
  const std::string psRange = strCat(
      "1 to ", cluster.numPs(), " (the ps tasks of ", cluster.source(), ")");
  if ((job != kWorkerJob && job != kPsJob) || eq == std::string::npos)
    return errorStatus("scale expects worker=N with N from ", workerRange,
                       ", or ps=N with N from ", psRange, ", got '", s, "'");
  const bool digits = !count.empty() && count.size() <= 6 &&
                      count.find_first_not_of("0123456789") ==
                          std::string::npos;
  const int n = digits ? std::stoi(count) : -1;
  const int slots = job == kPsJob ? cluster.numPs() : workerSlots;
  if (n < 1 || n > slots)
    return errorStatus("scale ", job, "=N: N must be from ",
                       job == kPsJob ? psRange : workerRange, ", got '", count,
                       "'");
  *out = {job, n};
  return Status::ok();
}

Status writeLauncherPid(const std::string &clusterFile,
                        const std::vector<std::string> &psRefusals) {
  std::string text = strCat(getpid(), " ", startTimeOf(getpid()), "\n");
  for (std::string line : psRefusals) {
    std::replace(line.begin(), line.end(), '\n', ' ');
    text += line + "\n";
  }
  return writeWhole(launcherPidPath(clusterFile), text);
}

std::string refusalFor(const std::vector<std::string> &lines,
                       const ScaleRequest &request) {
  if (request.job != kPsJob)
    return "";
  const std::string any = "ps: ";
  const std::string one = strCat("ps=", request.count, ": ");
  for (const std::string &line : lines) {
    if (line.rfind(any, 0) == 0)
      return line.substr(any.size());
    if (line.rfind(one, 0) == 0)
      return line.substr(one.size());
  }
  return "";
}

void removeLauncherPid(const std::string &clusterFile) {
  const std::string path = launcherPidPath(clusterFile);
  std::ifstream in(path);
  long pid = 0;
  if (in >> pid && pid == long(getpid()))
    unlink(path.c_str());
}

int runControlCommand(int argc, char **argv) {
  std::string clusterFile, verb, request;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", kCtlUsage);
      return 0;
    }
    if (arg == "--cluster" && i + 1 < argc) {
      clusterFile = argv[++i];
    } else if (arg.rfind("--cluster=", 0) == 0) {
      clusterFile = arg.substr(10);
    } else if (verb.empty() && arg.rfind("--", 0) != 0) {
      verb = arg;
    } else if (!verb.empty() && request.empty() && arg.rfind("--", 0) != 0) {
      request = arg;
    } else {
      std::fprintf(stderr,
                   "dtf-run: error: ctl: unexpected '%s' (see dtf-run ctl "
                   "--help)\n",
                   arg.c_str());
      return 2;
    }
  }
  if (clusterFile.empty() || verb != "scale" || request.empty()) {
    std::fprintf(stderr,
                 "dtf-run: error: ctl needs --cluster FILE and scale "
                 "worker=N or ps=N%s (see dtf-run ctl --help)\n",
                 verb.empty() || verb == "scale"
                     ? ""
                     : (", not '" + verb + "'").c_str());
    return 2;
  }
  ClusterSpec cluster;
  Status s = ClusterSpec::parseFile(clusterFile, &cluster);
  ScaleRequest scale;
  if (s.isOk())
    s = parseScaleRequest(request, cluster, &scale);
  if (!s.isOk()) {
    std::fprintf(stderr, "dtf-run: error: ctl: %s\n", s.message().c_str());
    return 2;
  }
  std::ifstream in(launcherPidPath(clusterFile));
  long pid = 0;
  std::string started;
  // The pid and its start time: a stale file (a launcher killed with
  // kill -9) never sends SIGUSR1 to a process that reused the pid.
  if (!(in >> pid >> started) || pid <= 1 || started.empty() ||
      startTimeOf(pid) != started || kill(pid_t(pid), 0) != 0) {
    std::fprintf(stderr,
                 "dtf-run: error: ctl: no launcher of %s runs on this "
                 "machine (%s names none that runs); start the job with "
                 "dtf-run PLAN --cluster %s\n",
                 clusterFile.c_str(), launcherPidPath(clusterFile).c_str(),
                 clusterFile.c_str());
    return 6;
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty())
      lines.push_back(line);
  if (std::string why = refusalFor(lines, scale); !why.empty()) {
    std::fprintf(stderr, "dtf-run: error: ctl: scale ps=%d: %s\n", scale.count,
                 why.c_str());
    return 2;
  }
  s = writeWhole(scaleRequestPath(clusterFile),
                 strCat(scale.job, "=", scale.count, "\n"));
  if (!s.isOk() || kill(pid_t(pid), SIGUSR1) != 0) {
    std::fprintf(stderr, "dtf-run: error: ctl: %s\n",
                 s.isOk() ? std::strerror(errno) : s.message().c_str());
    return 4;
  }
  if (scale.job == kPsJob)
    std::printf("asked the launcher of %s (pid %ld) to re-shard the job over "
                "%d ps task%s\n",
                clusterFile.c_str(), pid, scale.count,
                scale.count == 1 ? "" : "s");
  else
    std::printf("asked the launcher of %s (pid %ld) to run %d worker%s\n",
                clusterFile.c_str(), pid, scale.count,
                scale.count == 1 ? "" : "s");
  return 0;
}

} // namespace dtf::cluster
