// Launcher: fork/exec of the local tasks, one poll loop over their output,
// their exits, the signals and the deadlines (LauncherScaling.cpp scales a
// running job).
#include "runtime/cluster/Launcher.h"

#include "runtime/cluster/LauncherLoop.h"
#include "runtime/cluster/Scaling.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <thread>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace dtf::cluster {
namespace {

// The signal handler's only work: a byte with the signal number on a pipe
// that the poll loop reads.
int gSignalPipe[2] = {-1, -1};

extern "C" void onLauncherSignal(int signal) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(signal);
  ssize_t ignored = write(gSignalPipe[1], &byte, 1);
  (void)ignored;
  errno = saved;
}

// Installs the handlers for the launcher's lifetime and puts the previous
// ones back.
class SignalScope {
public:
  bool install() {
    if (pipe2(gSignalPipe, O_CLOEXEC | O_NONBLOCK) != 0)
      return false;
    struct sigaction action = {};
    action.sa_handler = onLauncherSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (int s : {SIGINT, SIGTERM, SIGUSR1})
      sigaction(s, &action, &previous_[s]);
    action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &action, &previous_[SIGCHLD]);
    installed_ = true;
    return true;
  }
  ~SignalScope() {
    if (!installed_)
      return;
    for (auto &[s, action] : previous_)
      sigaction(s, &action, nullptr);
    close(gSignalPipe[0]);
    close(gSignalPipe[1]);
    gSignalPipe[0] = gSignalPipe[1] = -1;
  }

private:
  bool installed_ = false;
  std::map<int, struct sigaction> previous_;
};

std::string signalName(int signal) {
  const char *name = sigabbrev_np(signal);
  const char *what = strsignal(signal);
  return strCat("signal ", signal, name ? strCat(" (SIG", name, ")") : "",
                what && !name ? strCat(" (", what, ")") : "");
}

std::string describeExit(int status) {
  if (WIFEXITED(status))
    return strCat("exited (code ", WEXITSTATUS(status), ")");
  if (WIFSIGNALED(status))
    return strCat("killed by ", signalName(WTERMSIG(status)),
                  WCOREDUMP(status) ? ", core dumped" : "");
  return "ended";
}

bool succeeded(int status) {
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The launcher's exit code for a task that ended the job: its own code, or
// the shell's 128 + signal.
int exitCodeOf(int status) {
  if (WIFEXITED(status))
    return WEXITSTATUS(status) == 0 ? 1 : WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return 1;
}

} // namespace

namespace launcher {

std::string seconds(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0)
    return strCat(d.count() / 1000, " s");
  return strCat(d.count(), " ms");
}

bool Launcher::start(Task &task) {
  // Everything the child needs is built before fork: between fork and exec
  // only async-signal-safe calls are allowed.
  std::vector<std::string> args;
  args.push_back(options_.program);
  for (const std::string &a : options_.passThroughArgs)
    // A job started again (a failed chief, a ps re-shard) goes on from its
    // checkpoints: --fresh would move them aside.
    if (a != "--fresh" || !jobStarted_)
      args.push_back(a);
  if (threads_ > 0) {
    args.push_back("--threads");
    args.push_back(std::to_string(threads_));
  }
  if (!options_.clusterFile.empty()) {
    args.push_back("--cluster");
    args.push_back(options_.clusterFile);
  }
  if (!chiefArg_.empty()) {
    args.push_back("--chief");
    args.push_back(chiefArg_);
  }
  if (workers_ > 0) { // the ps tasks count them live from the start
    args.push_back("--workers");
    args.push_back(std::to_string(workers_));
  }
  if (ps_ > 0) { // the first ps_ ps tasks hold the variables
    args.push_back("--ps");
    args.push_back(std::to_string(ps_));
  }
  args.push_back("--job");
  args.push_back(task.id.job);
  args.push_back("--task");
  args.push_back(std::to_string(task.id.index));
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);

  std::vector<std::string> env;
  const std::string restartKey = std::string(kRestartCountEnv) + "=";
  const std::string taskKey = std::string(kTaskEnv) + "=";
  for (char **e = environ; e && *e; ++e) {
    if (std::strncmp(*e, restartKey.c_str(), restartKey.size()) != 0 &&
        std::strncmp(*e, taskKey.c_str(), taskKey.size()) != 0)
      env.push_back(*e);
  }
  env.push_back(restartKey + std::to_string(task.restarts));
  env.push_back(taskKey + task.id.str());
  std::vector<char *> envp;
  for (std::string &e : env)
    envp.push_back(e.data());
  envp.push_back(nullptr);

  int out[2], err[2], execError[2];
  if (pipe2(out, O_CLOEXEC) != 0)
    return false;
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return false;
  }
  if (pipe2(execError, O_CLOEXEC) != 0) {
    for (int fd : {out[0], out[1], err[0], err[1]})
      close(fd);
    return false;
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    for (int fd : {out[0], out[1], err[0], err[1], execError[0], execError[1]})
      close(fd);
    say(strCat("cannot start ", task.id.str(), ": fork: ", std::strerror(e)));
    return false;
  }
  if (pid == 0) {
    // Its own process group: the terminal's Ctrl-C reaches only the
    // launcher, which forwards it once, and a stop reaches the task's own
    // children too. PDEATHSIG: the task dies with the launcher, even by
    // SIGKILL.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
      _exit(kLauncherCannotStart);
    int devNull = open("/dev/null", O_RDONLY);
    if (devNull >= 0)
      dup2(devNull, 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    struct sigaction byDefault = {};
    byDefault.sa_handler = SIG_DFL;
    sigemptyset(&byDefault.sa_mask);
    for (int s : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE})
      sigaction(s, &byDefault, nullptr);
    // SIGUSR1 (leave, or pause: docs/elastic.md) stays blocked across exec:
    // one sent before dtf-run's signal thread takes it waits for that
    // thread instead of ending the process by its default action.
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_SETMASK, &usr1, nullptr);
    execve(argv[0], argv.data(), envp.data());
    const int e = errno;
    ssize_t ignored = write(execError[1], &e, sizeof e);
    (void)ignored;
    _exit(kLauncherCannotStart);
  }
  setpgid(pid, pid); // also here, so that a stop right away finds the group
  close(out[1]);
  close(err[1]);
  close(execError[1]);
  int childErrno = 0;
  ssize_t n;
  do {
    n = read(execError[0], &childErrno, sizeof childErrno);
  } while (n < 0 && errno == EINTR);
  close(execError[0]);
  if (n == ssize_t(sizeof childErrno)) {
    waitpid(pid, nullptr, 0);
    close(out[0]);
    close(err[0]);
    say(strCat("cannot start ", task.id.str(), ": ", options_.program, ": ",
               std::strerror(childErrno)));
    return false;
  }
  task.pid = pid;
  task.fds[0] = out[0];
  task.fds[1] = err[0];
  for (int fd : task.fds)
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  task.state = Task::State::kRunning;
  say(strCat(task.id.str(), " started (pid ", pid,
             task.restarts ? strCat(", restart ", task.restarts) : "", ")"));
  return true;
}

void Launcher::readOutput(Task &task, int stream, bool untilEnd) {
  int &fd = task.fds[stream];
  char buffer[16384];
  auto emit = [&](std::string_view line) { printLine(task, stream, line); };
  while (fd >= 0) {
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n > 0) {
      task.lines[stream].append(buffer, size_t(n), emit);
      if (!untilEnd && size_t(n) < sizeof buffer)
        return;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN && !untilEnd)
      return;
    // End of output (or, once the task has exited, nothing more now: what a
    // leftover grandchild might still write is not the task's).
    task.lines[stream].finish(emit);
    close(fd);
    fd = -1;
  }
}

void Launcher::closeOutput(Task &task) {
  for (int stream = 0; stream < 2; ++stream)
    readOutput(task, stream, /*untilEnd=*/true);
}

void Launcher::reap() {
  for (Task &task : tasks_) {
    if (task.pid <= 0)
      continue;
    int status = 0;
    pid_t r = waitpid(task.pid, &status, WNOHANG);
    if (r != task.pid)
      continue;
    // Its last lines come before the news of its exit.
    closeOutput(task);
    // Whatever it left behind in its process group goes with it.
    kill(-task.pid, SIGKILL);
    task.pid = -1;
    onExit(task, status);
  }
}

void Launcher::onExit(Task &task, int status) {
  say(strCat(task.id.str(), " ", describeExit(status)));
  if (task.leaving) {
    // Scaled down: its exit is neither a failure nor the end of its work.
    task.leaving = false;
    task.state = task.rejoin ? Task::State::kWaiting : Task::State::kParked;
    task.startAt = Clock::now() + options_.policy.restartDelay;
    task.rejoin = false;
    say(strCat(task.id.str(), succeeded(status) ? " left the job" : " is gone",
               " (scaled down)"));
    if (stopping_ != StopReason::kNone)
      return;
  } else if (stopping_ != StopReason::kNone) {
    // Stopped on purpose: neither a failure nor a reason to restart.
    task.state = Task::State::kDone;
    return;
  } else if (!succeeded(status)) {
    onFailure(task, status);
    return;
  } else {
    task.state = Task::State::kSucceeded;
  }
  bool anyAwaited = false, allAwaitedDone = true, allDone = true;
  for (const Task &t : tasks_) {
    const bool done = t.state == Task::State::kSucceeded ||
                      t.state == Task::State::kParked;
    allDone = allDone && done;
    if (options_.policy.forRole(t.role).awaited) {
      anyAwaited = true;
      allAwaitedDone = allAwaitedDone && done;
    }
  }
  if (allDone) {
    finished_ = true;
    return;
  }
  if (anyAwaited && allAwaitedDone) {
    std::string rest;
    for (const Task &t : tasks_) {
      if (t.state != Task::State::kSucceeded &&
          t.state != Task::State::kParked)
        rest += (rest.empty() ? "" : ", ") + t.id.str();
    }
    say(strCat("every worker finished; stopping ", rest));
    stopJob(StopReason::kCompleted, SIGTERM, options_.stopGrace, 0);
  }
}

void Launcher::onFailure(Task &task, int status) {
  const RestartPolicy &policy = options_.policy;
  const RolePolicy &rule = policy.forRole(task.role);
  const std::string what = task.role == TaskRole::kChief
                               ? "the chief (" + task.id.str() + ")"
                               : task.id.str();
  if (rule.onFailure != FailureAction::kStopJob && WIFEXITED(status) &&
      policy.permanentExitCodes.count(WEXITSTATUS(status))) {
    task.state = Task::State::kDone;
    say(strCat(what, " failed with exit code ", WEXITSTATUS(status),
               ", which a restart does not fix; stopping the job"));
    stopJob(StopReason::kFailed, SIGTERM, options_.stopGrace,
            exitCodeOf(status));
    return;
  }
  if (rule.onFailure == FailureAction::kStopJob) {
    task.state = Task::State::kDone;
    say(strCat(what, " failed; stopping the job"));
    stopJob(StopReason::kFailed, SIGTERM, options_.stopGrace,
            exitCodeOf(status));
    return;
  }
  const bool job = rule.onFailure == FailureAction::kRestartJob;
  const int used = job ? jobRestarts_ : task.restarts;
  if (used >= policy.maxRestarts) {
    task.state = Task::State::kDone;
    say(policy.maxRestarts == 0
            ? strCat(what, " failed and restarts are off (--max-restarts 0); "
                           "stopping the job")
            : strCat(what, " failed after ", used, " restart",
                     used == 1 ? "" : "s", " (the limit, --max-restarts ",
                     policy.maxRestarts, "); stopping the job"));
    stopJob(StopReason::kFailed, SIGTERM, options_.stopGrace,
            exitCodeOf(status));
    return;
  }
  if (job && task.role == TaskRole::kChief && options_.chiefFailover) {
    // The next worker after the failed chief (in cluster order) takes over.
    std::vector<TaskId> workers;
    for (const TaskId &id : cluster_.allTasks())
      if (id.job == kWorkerJob || id.job == kChiefJob)
        workers.push_back(id);
    size_t at = 0;
    while (at < workers.size() && workers[at] != task.id)
      ++at;
    if (workers.size() > 1) {
      const TaskId next = workers[(at + 1) % workers.size()];
      if (cluster_.setChief(next).isOk()) {
        chiefArg_ = next.str();
        for (Task &t : tasks_)
          t.role = roleOf(cluster_, t.id);
        ++jobRestarts_;
        task.state = Task::State::kDone;
        say(strCat(what, " failed; moving the chief role to ", next.str(),
                   " and restarting the job (restart ", jobRestarts_, " of ",
                   policy.maxRestarts, ")"));
        stopJob(StopReason::kRestartJob, SIGTERM, options_.stopGrace, 0);
        return;
      }
    }
  }
  if (job) {
    ++jobRestarts_;
    task.state = Task::State::kDone;
    say(strCat(what, " failed; restarting the job (restart ", jobRestarts_,
               " of ", policy.maxRestarts, ")"));
    stopJob(StopReason::kRestartJob, SIGTERM, options_.stopGrace, 0);
    return;
  }
  ++task.restarts;
  task.state = Task::State::kWaiting;
  task.startAt = Clock::now() + policy.restartDelay;
  say(strCat("restarting ", task.id.str(), " (restart ", task.restarts, " of ",
             policy.maxRestarts, ")"));
}

void Launcher::stopJob(StopReason reason, int signal,
                       std::chrono::milliseconds grace, int exitCode) {
  stopping_ = reason;
  exitCode_ = exitCode;
  stopDeadline_ = Clock::now() + grace;
  for (Task &task : tasks_) {
    if (task.state == Task::State::kWaiting)
      task.state = Task::State::kDone;
    if (task.pid > 0 && kill(-task.pid, signal) != 0)
      kill(task.pid, signal);
  }
}

void Launcher::killAll() {
  for (Task &task : tasks_) {
    if (task.pid > 0 && kill(-task.pid, SIGKILL) != 0)
      kill(task.pid, SIGKILL);
  }
  killed_ = true;
}

void Launcher::onSignal(int signal) {
  if (signal == SIGCHLD)
    return; // reap() runs after every wake-up
  if (signal == SIGUSR1) {
    takeScaleRequest();
    return;
  }
  const int code = 128 + signal;
  if (stopping_ == StopReason::kNone || stopping_ == StopReason::kRestartJob ||
      stopping_ == StopReason::kReshard) {
    reshard_.phase = Reshard::Phase::kNone;
    say(strCat(signal == SIGINT ? "interrupted" : "terminated",
               "; stopping every task after its current step (Ctrl-C again "
               "to kill them at once)"));
    // dtf-run stops after its step on SIGINT, whatever the launcher got.
    stopJob(StopReason::kInterrupted, SIGINT, options_.interruptGrace, code);
    return;
  }
  if (!killed_) {
    say("killing every task");
    killAll();
  }
  if (stopping_ == StopReason::kInterrupted || exitCode_ == 0)
    exitCode_ = code;
}

bool Launcher::anyRunning() const {
  return std::any_of(tasks_.begin(), tasks_.end(),
                     [](const Task &t) { return t.pid > 0; });
}

// Every task has ended after a stop: the job is over, or starts again.
void Launcher::afterStopped() {
  if (stopping_ == StopReason::kReshard) {
    restartResharded();
    return;
  }
  if (stopping_ != StopReason::kRestartJob) {
    finished_ = true;
    return;
  }
  stopping_ = StopReason::kNone;
  killed_ = false;
  for (Task &task : tasks_) {
    if (task.state == Task::State::kParked)
      continue; // outside the job's scale
    task.restarts = std::max(task.restarts, jobRestarts_);
    task.state = Task::State::kWaiting;
    task.startAt = Clock::now() + options_.policy.restartDelay;
  }
}

int Launcher::pollTimeoutMs() const {
  // A wake-up at least this often covers a SIGCHLD lost to a full pipe.
  auto next = Clock::now() + std::chrono::milliseconds(250);
  if (stopping_ != StopReason::kNone && !killed_)
    next = std::min(next, stopDeadline_);
  for (const Task &t : tasks_) {
    if (t.state == Task::State::kWaiting)
      next = std::min(next, t.startAt);
  }
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now())
          .count();
  return int(std::max<long long>(0, ms + 1));
}

void Launcher::shareCores() {
  if (!options_.shareCores)
    return;
  int workers = 0;
  for (const Task &task : tasks_)
    if (task.role != TaskRole::kPs && task.state != Task::State::kParked)
      ++workers;
  if (workers < 2)
    return; // one worker: it may take every core, as alone
  const int cores = options_.cores > 0
                        ? options_.cores
                        : int(std::max(1u, std::thread::hardware_concurrency()));
  threads_ = std::max(1, cores / workers);
  say(strCat(workers, " worker tasks share this machine's ", cores,
             " cores: every task runs ", threads_, " thread",
             threads_ == 1 ? "" : "s",
             " within each op (--threads ", threads_,
             "; pass --threads to choose)"));
}

int Launcher::run() {
  // The tasks of this machine, and a check that no two of them would
  // listen on one port (localhost:2222 and myhost:2222).
  std::map<int, std::string> ports;
  size_t width = 0;
  for (const TaskId &id : cluster_.allTasks()) {
    if (!cluster_.isLocal(id))
      continue;
    HostPort hp;
    if (parseHostPort(cluster_.address(id), "", &hp).isOk()) {
      auto [prior, inserted] = ports.emplace(hp.port, id.str());
      if (!inserted) {
        say(strCat("error: ", cluster_.source(), ": ", prior->second, " and ",
                   id.str(), " would both listen on port ", hp.port,
                   " of this machine; give them different ports"));
        return kLauncherUsageError;
      }
    }
    Task task;
    task.id = id;
    task.role = roleOf(cluster_, id);
    width = std::max(width, id.str().size());
    tasks_.push_back(std::move(task));
  }
  const size_t total = cluster_.allTasks().size();
  if (tasks_.empty()) {
    say(strCat("error: ", cluster_.source(),
               ": no task of the cluster is on this machine; on each machine "
               "of the cluster run dtf-run with --job and --task instead"));
    return kLauncherUsageError;
  }
  for (Task &task : tasks_) {
    task.prefix = task.id.str();
    task.prefix.resize(width, ' ');
    task.prefix += " | ";
  }
  if (tasks_.size() < total) {
    std::string remote;
    for (const TaskId &id : cluster_.allTasks()) {
      if (!cluster_.isLocal(id))
        remote += (remote.empty() ? "" : ", ") + id.str();
    }
    say(strCat("starting ", tasks_.size(), " of the ", total, " tasks of ",
               cluster_.source(), "; start the others (", remote,
               ") on their machines with --job and --task"));
  }

  SignalScope signals;
  if (!signals.install()) {
    say(strCat("error: cannot create a pipe: ", std::strerror(errno)));
    return kLauncherCannotStart;
  }
  if (!startScale(tasks_.size() == total))
    return kLauncherUsageError;
  shareCores();
  for (Task &task : tasks_) {
    if (task.state == Task::State::kParked)
      continue;
    if (!start(task)) {
      task.state = Task::State::kDone;
      stopJob(StopReason::kFailed, SIGTERM, options_.stopGrace,
              kLauncherCannotStart);
      break;
    }
  }
  jobStarted_ = true;

  while (!finished_) {
    if (stopping_ != StopReason::kNone && !anyRunning()) {
      afterStopped();
      continue;
    }
    std::vector<pollfd> fds;
    std::vector<std::pair<Task *, int>> owners;
    fds.push_back({gSignalPipe[0], POLLIN, 0});
    owners.push_back({nullptr, 0});
    for (Task &task : tasks_) {
      for (int stream = 0; stream < 2; ++stream) {
        if (task.fds[stream] >= 0) {
          fds.push_back({task.fds[stream], POLLIN, 0});
          owners.push_back({&task, stream});
        }
      }
    }
    int ready = poll(fds.data(), fds.size(), pollTimeoutMs());
    if (ready < 0 && errno != EINTR) {
      say(strCat("error: poll: ", std::strerror(errno)));
      killAll();
      exitCode_ = 1;
      break;
    }
    for (size_t i = 1; ready > 0 && i < fds.size(); ++i) {
      if (fds[i].revents)
        readOutput(*owners[i].first, owners[i].second, /*untilEnd=*/false);
    }
    if (ready > 0 && fds[0].revents) {
      unsigned char byte;
      while (read(gSignalPipe[0], &byte, 1) == 1)
        onSignal(byte);
    }
    reap();
    const auto now = Clock::now();
    if (stopping_ == StopReason::kReshard)
      advanceReshard();
    else if (stopping_ != StopReason::kNone && !killed_ &&
             now >= stopDeadline_ && anyRunning()) {
      std::string late;
      for (const Task &t : tasks_) {
        if (t.pid > 0)
          late += (late.empty() ? "" : ", ") + t.id.str();
      }
      const auto grace = stopping_ == StopReason::kInterrupted
                             ? options_.interruptGrace
                             : options_.stopGrace;
      say(strCat(late, " did not stop within ", seconds(grace), "; killing"));
      killAll();
    }
    if (stopping_ == StopReason::kNone) {
      for (Task &task : tasks_) {
        if (task.state == Task::State::kWaiting && now >= task.startAt &&
            !start(task)) {
          task.state = Task::State::kDone;
          stopJob(StopReason::kFailed, SIGTERM, options_.stopGrace,
                  kLauncherCannotStart);
        }
      }
    }
  }
  if (!options_.clusterFile.empty())
    removeLauncherPid(options_.clusterFile);
  // Nothing is left running (the loop ends only then, or after SIGKILL).
  for (Task &task : tasks_) {
    if (task.pid > 0) {
      kill(-task.pid, SIGKILL);
      waitpid(task.pid, nullptr, 0);
      closeOutput(task);
    }
  }
  if (exitCode_ == 0)
    say("the job finished");
  else if (stopping_ == StopReason::kInterrupted)
    say(strCat("stopped (exit code ", exitCode_, ")"));
  else
    say(strCat("the job failed (exit code ", exitCode_, ")"));
  return exitCode_;
}

} // namespace launcher

int runLauncher(const ClusterSpec &cluster, const LaunchOptions &options) {
  launcher::Launcher launcher(cluster, options);
  return launcher.run();
}

} // namespace dtf::cluster
