// dtf-run: trains a plan, alone on this machine or as tasks of a ps/worker cluster.
#include "dtf/Version.h"

#include <cstdio>
#include <cstring>
#include <string>

namespace {

constexpr const char *kUsage = R"(usage: dtf-run PLAN [options]

Trains the model in PLAN (a plan.bin written by dtfc).

  dtf-run plan.bin                          train on this machine (embedded default)
  dtf-run plan.bin --cluster cluster.json   start and supervise the local tasks
  dtf-run plan.bin --cluster cluster.json --job worker --task 1   run one task

options:
  --cluster FILE   cluster spec: {"ps": ["host:port", ...], "worker": [...]}
  --job NAME       the job of the task to run (ps, worker or chief)
  --task N         the index of the task to run within its job
  --help           print this help and exit
  --version        print the version and exit
)";

// Exit codes, distinct per kind of failure.
enum ExitCode { kOk = 0, kUsageError = 2, kNotAvailable = 3 };

} // namespace

int main(int argc, char **argv) {
  std::string plan;
  for (int i = 1; i < argc; ++i) {
    const char *arg = argv[i];
    if (!std::strcmp(arg, "--help") || !std::strcmp(arg, "-h")) {
      std::fputs(kUsage, stdout);
      return kOk;
    }
    if (!std::strcmp(arg, "--version")) {
      std::printf("dtf-run %s\n", DTF_VERSION_STRING);
      return kOk;
    }
    if (!std::strcmp(arg, "--cluster") || !std::strcmp(arg, "--job") ||
        !std::strcmp(arg, "--task")) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "dtf-run: error: %s needs a value\n", arg);
        return kUsageError;
      }
      ++i;
      continue;
    }
    if (arg[0] == '-') {
      std::fprintf(stderr,
                   "dtf-run: error: unknown option '%s' (see dtf-run --help)\n",
                   arg);
      return kUsageError;
    }
    if (!plan.empty()) {
      std::fprintf(stderr,
                   "dtf-run: error: more than one plan given ('%s' and '%s')\n",
                   plan.c_str(), arg);
      return kUsageError;
    }
    plan = arg;
  }
  if (plan.empty()) {
    std::fprintf(stderr, "dtf-run: error: no plan given\n%s", kUsage);
    return kUsageError;
  }
  std::fprintf(stderr,
               "dtf-run: error: cannot run '%s': this build of dtf-run does "
               "not execute plans yet (the executor is not built)\n",
               plan.c_str());
  return kNotAvailable;
}
