// A stand-in for dtf-run in the launcher tests: behaves as its --behave
// options say for the --job/--task it is started as.
//
//   fake-task [--behave TASK=WHAT]... [--mark DIR] [other args] --job J --task
//   I
//
// WHAT:
//   ok                  print a line on stdout and one on stderr, exit 0
//                       (the default for chief and workers)
//   serve               run 10 ms steps until a signal (the default for ps)
//   exit=N              exit with code N
//   crash               say its arguments and die of SIGSEGV
//   crash-once          crash when DTF_RESTART_COUNT is 0, else the default
//   partial             split writes and carriage-return redraws, then exit 0
//   interrupt-parent=N  once N tasks serve (they mark DIR/TASK.serving, with
//                       --mark DIR), send SIGINT to the launcher; serve
//   terminate-parent=N  the same with SIGTERM
//   ignore-term         serve, ignoring SIGTERM
//   slow                serve for 300 ms, then ok
//   pidfile=DIR         write DIR/TASK.pid, then serve
//   leave               serve until SIGUSR1, then say "left the job" and exit
//                       0, like a dtf-run worker asked to leave; started
//                       with --ps (after a re-shard): ok
//   reshard=N           (the chief) once 3 tasks serve (--mark DIR), ask
//                       the launcher for `scale ps=N` (the request file
//                       beside --cluster, and SIGUSR1); serve until SIGUSR1,
//                       then ask again (until the launcher took it), say
//                       "paused at global step 42", stop the ps
//                       (DIR/ps.stop) and exit 130, like dtf-run's chief
//                       (not asked within 4 s: ok); started again after its
//                       request (DIR/reshard.asked): say it restored
//                       ckpt-42, then slow
// Serving tasks stop after their current step on SIGINT and exit 130, like
// dtf-run. A serving ps exits 0 once DIR/ps.stop exists (removing it).
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <string>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

volatile std::sig_atomic_t gInterrupted = 0;
extern "C" void onInterrupt(int) { gInterrupted = 1; }
volatile std::sig_atomic_t gUsr1 = 0;
extern "C" void onUsr1(int) { gUsr1 = 1; }

void say(const std::string &line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

int ok(const std::string &task, const std::string &args) {
  const char *restart = std::getenv("DTF_RESTART_COUNT");
  const char *name = std::getenv("DTF_TASK");
  say("hello from " + task + " restart=" + (restart ? restart : "unset") +
      " DTF_TASK=" + (name ? name : "unset") + " args=" + args);
  std::fputs(("note from " + task + "\n").c_str(), stderr);
  return 0;
}

std::string gMarkDir; // --mark DIR: serving tasks create DIR/TASK.serving

// Steps of 10 ms until interrupted (or for `ms`, when positive; or until
// SIGUSR1 when `untilUsr1`: then -1).
int serve(int ms, const std::string &name, bool untilUsr1 = false) {
  say("serving");
  if (!gMarkDir.empty())
    std::ofstream(gMarkDir + "/" + name + ".serving") << "\n";
  const std::string psStop = gMarkDir + "/ps.stop";
  for (int waited = 0; ms <= 0 || waited < ms; waited += 10) {
    if (gInterrupted) {
      say("stopping after step");
      return 130;
    }
    if (untilUsr1 && gUsr1)
      return -1;
    if (name.rfind("ps.", 0) == 0 && !gMarkDir.empty() &&
        unlink(psStop.c_str()) == 0) {
      say("shutting down (the chief paused the job)");
      return 0;
    }
    usleep(10000);
  }
  return 0;
}

// How many tasks serve (with --mark DIR).
int servingTasks() {
  int serving = 0;
  if (DIR *d = opendir(gMarkDir.c_str())) {
    while (struct dirent *e = readdir(d))
      serving += std::strstr(e->d_name, ".serving") != nullptr;
    closedir(d);
  }
  return serving;
}

} // namespace

int main(int argc, char **argv) {
  std::signal(SIGINT, onInterrupt);
  // The launcher starts it with SIGUSR1 blocked (dtf-run takes it on a
  // signal thread); a handler needs it unblocked.
  std::signal(SIGUSR1, onUsr1);
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  sigprocmask(SIG_UNBLOCK, &usr1, nullptr);
  std::string job, task, args, cluster, ps;
  std::vector<std::string> behaviors;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--behave" && i + 1 < argc) {
      behaviors.push_back(argv[++i]);
      continue;
    }
    if (a == "--mark" && i + 1 < argc) {
      gMarkDir = argv[++i];
      continue;
    }
    if (a == "--job" && i + 1 < argc)
      job = argv[i + 1];
    if (a == "--task" && i + 1 < argc)
      task = argv[i + 1];
    if (a == "--cluster" && i + 1 < argc)
      cluster = argv[i + 1];
    if (a == "--ps" && i + 1 < argc)
      ps = argv[i + 1];
    args += (args.empty() ? "" : " ") + a;
  }
  const std::string name = job + "." + task;
  std::string what = job == "ps" ? "serve" : "ok";
  for (const std::string &b : behaviors) {
    if (b.rfind(name + "=", 0) == 0)
      what = b.substr(name.size() + 1);
  }

  const char *restart = std::getenv("DTF_RESTART_COUNT");
  if (what == "crash" ||
      (what == "crash-once" && restart && std::string(restart) == "0")) {
    say("about to crash, args=" + args);
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    std::raise(SIGSEGV);
  }
  if (what == "crash-once")
    what = job == "ps" ? "serve" : "ok";
  if (what.rfind("exit=", 0) == 0) {
    say("failing");
    usleep(50000);
    return std::atoi(what.c_str() + 5);
  }
  if (what == "serve")
    return serve(0, name);
  if (what == "leave") {
    if (!ps.empty() && ps != "1")
      return ok(name, args);
    if (serve(0, name, /*untilUsr1=*/true) != -1)
      return 130;
    say("left the job (asked to: SIGUSR1)");
    return 0;
  }
  if (what.rfind("reshard=", 0) == 0) {
    const std::string asked = gMarkDir + "/reshard.asked";
    if (access(asked.c_str(), F_OK) == 0) { // started again by the re-shard
      say("restored checkpoint ckpt-42 from DIR onto " + ps +
          " ps tasks; continuing at step 42");
      serve(300, name);
      return ok(name, args);
    }
    const std::string request = what.substr(8);
    std::thread([request, cluster, asked] {
      for (int tries = 0; tries < 1000 && servingTasks() < 3; ++tries)
        usleep(10000);
      std::ofstream(cluster + ".scale") << "ps=" << request << "\n";
      std::ofstream(asked) << "\n";
      kill(getppid(), SIGUSR1);
    }).detach();
    // Not asked to pause within 4 s (a refused request): done.
    const int served = serve(4000, name, /*untilUsr1=*/true);
    if (served == 0)
      return ok(name, args);
    if (served != -1)
      return 130;
    // A request while the re-shard is under way (the launcher refuses it),
    // taken before this task exits.
    std::ofstream(cluster + ".scale") << "ps=" << request << "\n";
    kill(getppid(), SIGUSR1);
    for (int tries = 0;
         tries < 500 && access((cluster + ".scale").c_str(), F_OK) == 0;
         ++tries)
      usleep(10000);
    say("paused at global step 42 (asked to: SIGUSR1)");
    std::ofstream(gMarkDir + "/ps.stop") << "\n";
    return 130;
  }
  if (what == "slow") {
    serve(300, name);
    return ok(name, args);
  }
  if (what == "ignore-term") {
    std::signal(SIGTERM, SIG_IGN);
    return serve(0, name);
  }
  if (what.rfind("interrupt-parent=", 0) == 0 ||
      what.rfind("terminate-parent=", 0) == 0) {
    // Once N tasks (this one too) serve, with their SIGINT handlers set.
    const int n = std::atoi(what.c_str() + 17);
    const int signal = what[0] == 'i' ? SIGINT : SIGTERM;
    std::thread([n, signal] {
      for (int tries = 0; tries < 1000 && servingTasks() < n; ++tries)
        usleep(10000);
      kill(getppid(), signal);
    }).detach();
    return serve(0, name);
  }
  if (what.rfind("pidfile=", 0) == 0) {
    std::ofstream(what.substr(8) + "/" + name + ".pid") << getpid() << "\n";
    return serve(0, name);
  }
  if (what == "partial") {
    std::fputs("par", stdout);
    std::fflush(stdout);
    usleep(100000);
    std::fputs("tial line\n\rstep 1\x1b[K", stdout);
    std::fflush(stdout);
    usleep(50000);
    std::fputs("\rstep 2\x1b[K\nwindows line\r\nno newline at the end", stdout);
    std::fflush(stdout);
    return 0;
  }
  return ok(name, args);
}
