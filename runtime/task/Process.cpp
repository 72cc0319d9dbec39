// Ctrl-C handling, OpenMP's wait policy, gRPC's lifetime and emulated GPUs
// for a dtf-run process.
#include "runtime/task/Process.h"

#include "runtime/gpu/GpuDevice.h"

#include <grpc/grpc.h>
#include <openssl/crypto.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <pthread.h>
#include <string>
#include <thread>
#include <unistd.h>

namespace dtf::task {
namespace {

// Signals are the process's: so is the flag they set.
std::atomic<bool> gStop{false};

extern "C" void onInterrupt(int) { gStop.store(true); }

} // namespace

// Ctrl-C and SIGTERM are taken by one thread that waits for them: they are
// blocked in every other thread (threads started later inherit the mask), so
// that no signal handler runs on a thread in the middle of a kernel. oneDNN
// 2.6's f32 GEMM kernels run with the stack pointer in a malloc'ed workspace:
// a handler's frame there is written over the heap (docs/security.md). The
// first sets the stop flag; a second Ctrl-C ends the process at once. (The
// handler stays as the disposition, so that a signal reaching a thread that
// a library started unblocked still only sets the flag.)
const std::atomic<bool> *watchInterrupts(std::atomic<bool> *leaveFlag) {
  std::signal(SIGINT, onInterrupt);
  std::signal(SIGTERM, onInterrupt);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  // SIGUSR1 gets no handler (no asynchronous signal has one: see above);
  // blocked everywhere, only the waiting thread takes it.
  if (leaveFlag)
    sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set, leaveFlag] {
    int sig = 0;
    bool first = true;
    while (sigwait(&set, &sig) == 0) {
      if (sig == SIGUSR1) {
        // Leave after this step: not an interruption, no second signal.
        leaveFlag->store(true);
        gStop.store(true);
        continue;
      }
      gStop.store(true);
      if (!first && sig == SIGINT) {
        std::signal(SIGINT, SIG_DFL);
        sigset_t interrupt;
        sigemptyset(&interrupt);
        sigaddset(&interrupt, SIGINT);
        pthread_sigmask(SIG_UNBLOCK, &interrupt, nullptr);
        raise(SIGINT);
      }
      first = false;
    }
  }).detach();
  return &gStop;
}

// oneDNN's primitives and the intra-op pool's jobs run on OpenMP's threads.
// libgomp's default wait policy spins for a long while (300,000 rounds) after
// each parallel region, taking the cores that the data prefetch thread, the
// inter-op threads and other processes need: on 2 cores a small model once ran
// 20 times slower. Passive waits cost a wake-up per region instead.
// - Training alone on this machine: a short spin (GOMP_SPINCOUNT=10000), so
//   that the next region of the step finds the threads awake: 1.09x (the
//   seed CNN) to 2.2x (the transformer) the speed with passive waits
//   (bench/omp_waits.sh, bench/results/omp_waits.md).
// - As a task of a cluster: passive, since the tasks a launcher starts share
//   this machine's cores.
// libgomp reads these once, when it loads, so dtf-run sets them and starts
// itself again. A policy or spin count the user set is kept.
void chooseOpenMpWaits(char **argv, bool alone) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT") ||
      std::getenv("DTF_RUN_REEXECED"))
    return;
  const char *name = alone ? "GOMP_SPINCOUNT" : "OMP_WAIT_POLICY";
  setenv(name, alone ? "10000" : "passive", 1);
  setenv("DTF_RUN_REEXECED", "1", 1);
  execv("/proc/self/exe", argv);
  // Exec failed: go on with the default policy.
  unsetenv(name);
}

// One grpc_init that no grpc_shutdown matches: gRPC's reference count never
// falls to 0, so grpc_shutdown never runs (see the header for why). gRPC's
// threads then live until exit_group; OpenSSL's atexit cleanup would free
// what one of them may be using at that moment, so OpenSSL registers none
// (the first init of OpenSSL decides, hence before gRPC's).
void keepGrpcUntilExit() {
  (void)OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr);
  grpc_init();
}

void useEmulatedGpus(int gpus) {
  gpu::CudaLibraries libs;
  libs.driver = gpu::emulationLibraryPath();
  libs.emulatedGpus = gpus;
  gpu::configureProcessGpus(libs);
  // What the emulation ran, so that a test can tell it ran at all.
  std::atexit([] {
    const std::string stats = gpu::processEmulationStats();
    if (!stats.empty())
      std::fprintf(stderr, "%s\n", stats.c_str());
  });
}

} // namespace dtf::task
