// The launcher's scaling of a running job (docs/elastic.md): `dtf-run ctl`'s
// requests, workers that join and leave, and the ps re-shard through a
// checkpoint of the current step (its ordered stop, the restart over
// --ps N, the lines it waits for).
#include "runtime/cluster/LauncherLoop.h"
#include "runtime/cluster/Scaling.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <unistd.h>

namespace dtf::cluster::launcher {
namespace {

// "2.4 s": a pause, as the launcher says it.
std::string pauseSeconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", s);
  return text;
}

} // namespace

bool Launcher::startScale(bool local) {
  if (options_.ps > cluster_.numPs()) {
    say(strCat("error: --ps ", options_.ps, ": ", cluster_.source(), " has ",
               cluster_.numPs(), " ps task", cluster_.numPs() == 1 ? "" : "s",
               "; give N from 1 to ", cluster_.numPs()));
    return false;
  }
  if (options_.workers > 0)
    scale(options_.workers);
  ps_ = options_.ps;
  for (Task &task : tasks_)
    if (task.role == TaskRole::kPs && ps_ > 0 && task.id.index >= ps_)
      task.state = Task::State::kParked; // a slot a re-shard may use
  // A re-shard stops and starts every task of the job: this launcher's.
  psRefusal_ = options_.psRefusal;
  if (psRefusal_.empty() && !local)
    psRefusal_ = "re-sharding the ps tasks starts every task of the job "
                 "again, and this launcher runs only the tasks of " +
                 cluster_.source() + " on this machine; run them all here";
  std::vector<std::string> refusals;
  if (!psRefusal_.empty())
    refusals.push_back("ps: " + psRefusal_);
  for (int n = 1; psRefusal_.empty() && n <= cluster_.numPs(); ++n)
    if (std::string why = reshardRefusal(n); !why.empty())
      refusals.push_back(strCat("ps=", n, ": ", why));
  if (options_.clusterFile.empty())
    return true;
  if (Status p = writeLauncherPid(options_.clusterFile, refusals); !p.isOk())
    say(strCat("warning: ", p.message(), "; dtf-run ctl cannot reach this "
               "launcher"));
  return true;
}

void Launcher::takeScaleRequest() {
  const std::string path = scaleRequestPath(options_.clusterFile);
  std::ifstream in(path);
  std::string text;
  ScaleRequest request;
  Status s = in && std::getline(in, text)
                 ? parseScaleRequest(text, cluster_, &request)
                 : errorStatus("no request in ", path);
  unlink(path.c_str()); // taken (or refused): a later signal needs a new one
  if (!s.isOk()) {
    say(strCat("scale: ", s.message()));
    return;
  }
  if (stopping_ == StopReason::kReshard) {
    say(strCat("scale: the ps tasks are being re-sharded (", reshard_.from,
               " -> ", reshard_.to, "); ask again once the job runs"));
    return;
  }
  if (stopping_ != StopReason::kNone) {
    say("scale: the job is stopping; the request is not taken");
    return;
  }
  if (request.job == kPsJob)
    reshard(request.count);
  else
    scale(request.count);
}

// The first `workers` scalable tasks run (or are to start), the others are
// parked: the running ones beyond leave after their step.
void Launcher::scale(int workers) {
  workers_ = workers;
  const std::vector<TaskId> order = scalableTasks(cluster_);
  std::string started, leaving;
  for (size_t k = 0; k < order.size(); ++k) {
    auto it = std::find_if(tasks_.begin(), tasks_.end(),
                           [&](const Task &t) { return t.id == order[k]; });
    if (it == tasks_.end())
      continue;
    Task &t = *it;
    const bool wanted = int(k) < workers;
    if (wanted && (t.state == Task::State::kParked || t.leaving)) {
      // Back in the job: parked slots start now; one still leaving starts
      // again once it has gone.
      if (t.state == Task::State::kParked) {
        t.state = Task::State::kWaiting;
        t.startAt = Clock::now();
      }
      t.rejoin = t.leaving;
      started += (started.empty() ? "" : ", ") + t.id.str();
    } else if (!wanted && t.state == Task::State::kRunning && !t.leaving &&
               t.role != TaskRole::kChief) {
      t.leaving = true;
      t.rejoin = false;
      kill(t.pid, SIGUSR1);
      leaving += (leaving.empty() ? "" : ", ") + t.id.str();
    } else if (!wanted && t.state == Task::State::kWaiting &&
               t.role != TaskRole::kChief) {
      t.state = Task::State::kParked;
    }
  }
  say(strCat("scale: ", workers, " worker", workers == 1 ? "" : "s",
             started.empty() ? "" : "; starting " + started,
             leaving.empty() ? ""
                             : "; asking " + leaving +
                                   " to leave after the current step"));
}

std::string Launcher::reshardRefusal(int ps) const {
  if (!psRefusal_.empty())
    return psRefusal_;
  return options_.psCountRefusal ? options_.psCountRefusal(ps) : "";
}

// The ps tasks cannot move while the workers push to them, and a checkpoint
// holds what the ps tasks applied when it was saved: the workers but the
// chief stop first (SIGUSR1: each finishes its step, tells the ps tasks it
// leaves and exits), then the chief saves the step the ps tasks reached and
// stops them (SIGUSR1 to the chief), so that no update lands after the save;
// then every task starts again over `ps` ps tasks and the chief restores
// that checkpoint onto them (advanceReshard, restartResharded).
void Launcher::reshard(int ps) {
  const int from = ps_ > 0 ? ps_ : cluster_.numPs();
  if (ps == from) {
    say(strCat("scale: the job runs over ", from, " ps task",
               from == 1 ? "" : "s", " already; nothing to do"));
    return;
  }
  if (std::string why = reshardRefusal(ps); !why.empty()) {
    say(strCat("scale ps=", ps, ": ", why));
    return;
  }
  reshard_ = Reshard();
  reshard_.phase = Reshard::Phase::kWorkers;
  reshard_.from = from;
  reshard_.to = ps;
  reshard_.asked = Clock::now();
  reshard_.deadline = reshard_.asked + options_.interruptGrace;
  stopping_ = StopReason::kReshard;
  stopDeadline_ = reshard_.deadline;
  std::string asked;
  for (Task &t : tasks_)
    if (reshardGroup(t) == 0 && t.pid > 0) {
      kill(t.pid, SIGUSR1);
      asked += (asked.empty() ? "" : ", ") + t.id.str();
    }
  say(strCat("scale: re-sharding the ps tasks ", from, " -> ", ps,
             " through a checkpoint of the current step: ",
             asked.empty() ? "" : "asking " + asked + " to stop after the "
                                  "current step, then ",
             "the chief to save the step and stop the ps tasks; then every "
             "task starts again"));
  advanceReshard();
}

// The order a re-shard stops the tasks in: 0 the workers but the chief,
// 1 the chief, 2 the rest (the ps tasks, which the chief stops, and an
// evaluator, which follows the checkpoints and starts again with the job).
int Launcher::reshardGroup(const Task &task) {
  if (task.role == TaskRole::kChief)
    return 1;
  return task.role == TaskRole::kPs || task.id.job == kEvaluatorJob ? 2 : 0;
}

void Launcher::advanceReshard() {
  const auto now = Clock::now();
  auto runningOf = [&](int group) {
    std::string names;
    for (Task &t : tasks_)
      if (reshardGroup(t) == group && t.pid > 0)
        names += (names.empty() ? "" : ", ") + t.id.str();
    return names;
  };
  auto killGroup = [&](int group, int signal) {
    for (Task &t : tasks_)
      if (reshardGroup(t) == group && t.pid > 0 && kill(-t.pid, signal) != 0)
        kill(t.pid, signal);
  };
  auto nextPhase = [&](Reshard::Phase phase, std::chrono::milliseconds grace) {
    reshard_.phase = phase;
    reshard_.deadline = now + grace;
    stopDeadline_ = reshard_.deadline;
  };
  if (reshard_.phase == Reshard::Phase::kWorkers) {
    const std::string workers = runningOf(0);
    if (!workers.empty()) {
      if (now < reshard_.deadline)
        return;
      // A worker stopped by force before the save loses only its own
      // unpushed step.
      say(strCat(workers, " did not stop within ",
                 seconds(options_.interruptGrace), "; killing"));
      killGroup(0, SIGKILL);
      return;
    }
    reshard_.chiefAsked = now;
    nextPhase(Reshard::Phase::kChief, options_.interruptGrace);
    for (Task &t : tasks_)
      if (t.role == TaskRole::kChief && t.pid > 0)
        kill(t.pid, SIGUSR1);
  }
  if (reshard_.phase == Reshard::Phase::kChief) {
    const std::string chief = runningOf(1);
    if (!chief.empty()) {
      if (now < reshard_.deadline)
        return;
      say(strCat("the chief (", chief, ") did not save within ",
                 seconds(options_.interruptGrace),
                 "; killing it: the job goes on from its last checkpoint"));
      killGroup(1, SIGKILL);
      return;
    }
    // The chief stops the ps tasks once it has saved; without its save they
    // are stopped here. An evaluator stops (SIGTERM: after its evaluation).
    nextPhase(Reshard::Phase::kPs, options_.stopGrace);
    for (Task &t : tasks_)
      if (reshardGroup(t) == 2 && t.pid > 0 &&
          (reshard_.step < 0 || t.role != TaskRole::kPs))
        kill(t.pid, SIGTERM);
  }
  if (reshard_.phase == Reshard::Phase::kPs) {
    const std::string ps = runningOf(2);
    if (ps.empty() || now < reshard_.deadline)
      return;
    say(strCat(ps, " did not stop within ", seconds(options_.stopGrace), "; ",
               reshard_.termSent ? "killing" : "terminating"));
    killGroup(2, reshard_.termSent ? SIGKILL : SIGTERM);
    reshard_.termSent = true;
    nextPhase(Reshard::Phase::kPs, options_.stopGrace);
  }
}

// Every task has stopped: the first `to` ps tasks and every task of the
// job's scale start again.
void Launcher::restartResharded() {
  stopping_ = StopReason::kNone;
  killed_ = false;
  ps_ = reshard_.to;
  for (Task &task : tasks_) {
    if (task.role == TaskRole::kPs)
      task.state = task.id.index < ps_ ? Task::State::kWaiting
                                       : Task::State::kParked;
    else if (task.state != Task::State::kParked)
      task.state = Task::State::kWaiting;
    task.startAt = Clock::now();
  }
  reshard_.phase = Reshard::Phase::kRestore;
  const double stopped =
      std::chrono::duration<double>(Clock::now() - reshard_.asked).count();
  say(strCat("scale: every task stopped ", pauseSeconds(stopped),
             " after the request",
             reshard_.step >= 0
                 ? strCat(" (the chief saved global step ", reshard_.step, ")")
                 : std::string(" (the chief saved no checkpoint: the job goes "
                               "on from its last one)"),
             "; starting them again over ", ps_, " ps task",
             ps_ == 1 ? "" : "s"));
}

// The lines a re-shard waits for (runtime/distributed writes them): the
// chief's "paused at global step N" once it has saved (or, finishing its job
// when asked, "saved checkpoint ckpt-N"), and the restarted chief's
// "restored checkpoint ckpt-N ... onto K ps tasks; continuing at step N"
// once every ps holds the step again.
void Launcher::watchReshard(const Task &task, std::string_view line) {
  if (task.role != TaskRole::kChief)
    return;
  auto number = [&](std::string_view after) {
    return std::atoll(std::string(line.substr(after.size())).c_str());
  };
  if (reshard_.phase == Reshard::Phase::kChief) {
    for (std::string_view said :
         {"paused at global step ", "saved checkpoint ckpt-"})
      if (line.substr(0, said.size()) == said)
        reshard_.step = std::max(reshard_.step, number(said));
    return;
  }
  constexpr std::string_view kRestored = "restored checkpoint ckpt-";
  constexpr std::string_view kContinuing = "; continuing at step ";
  const size_t at = line.rfind(kContinuing);
  if (line.substr(0, kRestored.size()) != kRestored ||
      at == std::string_view::npos)
    return;
  const long long name = number(kRestored);
  const long long step = std::atoll(
      std::string(line.substr(at + kContinuing.size())).c_str());
  const auto now = Clock::now();
  const double paused =
      std::chrono::duration<double>(now - reshard_.chiefAsked).count();
  const double total =
      std::chrono::duration<double>(now - reshard_.asked).count();
  reshard_.phase = Reshard::Phase::kNone;
  say(strCat("ps scaled ", reshard_.from, " -> ", reshard_.to,
             ": the job paused ", pauseSeconds(paused), " at global step ",
             step, " (checkpoint ckpt-", name, ", re-sharded over ",
             reshard_.to, " ps; ", pauseSeconds(total),
             " from the request, the other workers stopping first)"));
}

} // namespace dtf::cluster::launcher
