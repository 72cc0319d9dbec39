// Why dtf-run takes SIGINT and SIGTERM in one waiting thread: oneDNN's f32
// GEMM kernel (2.6, Debian 12's; fixed upstream in 3.11.1, oneDNN PR #4855)
// points the stack pointer at a malloc'ed workspace when K is large, so a
// signal handled on a thread inside it has its frame, the vector registers
// with it, written below that workspace: over the heap. Each test runs in a
// child process, since signals and their masks are the process's.
#include "runtime/task/Process.h"

#include <gtest/gtest.h>

#include <dnnl.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <sys/wait.h>
#include <thread>
#include <ucontext.h>
#include <unistd.h>
#include <vector>

namespace {

// The seed MLP's first product: a batch of 100 images of 784 pixels by a
// [784, 256] kernel (K = 784 is past the kernel's stack capacity).
constexpr long kM = 100, kK = 784, kN = 256;

// Runs `body` in a child process and returns its exit status, or 128 + the
// signal that ended it. With `storm`, this process sends the child that
// signal over and over, from when the body says it is ready (the argument it
// is given) until it ends: a signal from outside goes to whichever of its
// threads does not block it, the main thread first.
template <typename Body> int inChild(Body body, int storm = 0) {
  int ready[2];
  if (pipe(ready) != 0)
    return -1;
  pid_t pid = fork();
  if (pid == 0) {
    alarm(60); // a hang ends the child
    close(ready[0]);
    _exit(body([fd = ready[1]] { (void)!write(fd, "r", 1); }));
  }
  close(ready[1]);
  char byte;
  int status = 0;
  if (storm != 0 && read(ready[0], &byte, 1) == 1)
    while (waitpid(pid, &status, WNOHANG) == 0) {
      kill(pid, storm);
      usleep(20);
    }
  else
    waitpid(pid, &status, 0);
  close(ready[0]);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

char *gStackLow = nullptr, *gStackHigh = nullptr;

// Exits at once (before oneDNN frees its workspace over the damaged heap) when
// the interrupted stack pointer is outside the thread's stack.
extern "C" void exitIfOffStack(int, siginfo_t *, void *context) {
  auto *uc = static_cast<ucontext_t *>(context);
  char *sp = reinterpret_cast<char *>(uc->uc_mcontext.gregs[REG_RSP]);
  if (sp < gStackLow || sp > gStackHigh)
    _exit(0);
}

void multiplyMany(int times) {
  std::vector<float> a(kM * kK, 212.0f / 255), b(kK * kN, 0.01f), c(kM * kN);
  for (int i = 0; i < times; ++i)
    dnnl_sgemm('N', 'N', kM, kN, kK, 1.0f, a.data(), kK, b.data(), kN, 0.0f,
               c.data(), kN);
}

// The hazard itself. If this fails, the installed oneDNN no longer moves the
// stack pointer off the stack, and docs/security.md's account should say so.
TEST(Signals, OneDnnSgemmRunsWithTheStackPointerInTheHeap) {
  int code = inChild([](auto) {
    pthread_attr_t attr;
    pthread_getattr_np(pthread_self(), &attr);
    void *low = nullptr;
    size_t size = 0;
    pthread_attr_getstack(&attr, &low, &size);
    gStackLow = static_cast<char *>(low);
    gStackHigh = gStackLow + size;
    struct sigaction action = {};
    action.sa_sigaction = exitIfOffStack;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGUSR1, &action, nullptr);
    pthread_t self = pthread_self();
    std::atomic<bool> done{false};
    std::thread storm([&] {
      while (!done.load())
        pthread_kill(self, SIGUSR1);
    });
    multiplyMany(3000);
    done.store(true);
    storm.join();
    return 1; // every signal found the stack pointer on the stack
  });
  EXPECT_EQ(code, 0) << "no signal interrupted oneDNN's sgemm with the stack "
                        "pointer outside the thread's stack (exit "
                     << code << ")";
}

// dtf-run's handling: a storm of SIGTERMs from another process while the
// main thread multiplies leaves the heap whole and sets the stop flag. Under
// the handling before (a handler on whichever thread the kernel picks), the
// same storm aborted the child with "corrupted size vs. prev_size".
TEST(Signals, SigtermsDuringSgemmReachOnlyTheWaitingThread) {
  int code = inChild(
      [](auto ready) {
        const std::atomic<bool> *stop = dtf::task::watchInterrupts();
        ready();
        sigset_t mask;
        pthread_sigmask(SIG_BLOCK, nullptr, &mask);
        if (!sigismember(&mask, SIGTERM) || !sigismember(&mask, SIGINT))
          return 2; // the calling thread must not take them
        multiplyMany(300);
        std::vector<char> probe(1 << 20); // the heap still allocates and frees
        return stop->load() ? 0 : 3;
      },
      SIGTERM);
  EXPECT_EQ(code, 0) << "2: SIGTERM not blocked in the calling thread; "
                        "3: the stop flag was never set; 134: heap corruption";
}

} // namespace
