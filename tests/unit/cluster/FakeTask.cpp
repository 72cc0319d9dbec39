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
//   crash               die of SIGSEGV
//   crash-once          crash when DTF_RESTART_COUNT is 0, else the default
//   partial             split writes and carriage-return redraws, then exit 0
//   interrupt-parent=N  once N tasks serve (they mark DIR/TASK.serving, with
//                       --mark DIR), send SIGINT to the launcher; serve
//   terminate-parent=N  the same with SIGTERM
//   ignore-term         serve, ignoring SIGTERM
//   slow                serve for 300 ms, then ok
//   pidfile=DIR         write DIR/TASK.pid, then serve
// Serving tasks stop after their current step on SIGINT and exit 130, like
// dtf-run.
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

// Steps of 10 ms until interrupted (or for `ms`, when positive).
int serve(int ms, const std::string &name) {
  say("serving");
  if (!gMarkDir.empty())
    std::ofstream(gMarkDir + "/" + name + ".serving") << "\n";
  for (int waited = 0; ms <= 0 || waited < ms; waited += 10) {
    if (gInterrupted) {
      say("stopping after step");
      return 130;
    }
    usleep(10000);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::signal(SIGINT, onInterrupt);
  std::string job, task, args;
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
    say("about to crash");
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
      for (int tries = 0; tries < 1000; ++tries) {
        int serving = 0;
        if (DIR *d = opendir(gMarkDir.c_str())) {
          while (struct dirent *e = readdir(d))
            serving += std::strstr(e->d_name, ".serving") != nullptr;
          closedir(d);
        }
        if (serving >= n)
          break;
        usleep(10000);
      }
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
