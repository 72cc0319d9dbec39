// The state of dtf's host emulation of a CUDA machine: device memory (host
// memory, every allocation tracked), streams that queue, run or record work,
// and the counters that show what ran.
#pragma once

#include "runtime/gpu/CudaApi.h"

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace dtf::gpu::emu {

using namespace dtf::gpu::cuda;

struct Allocation {
  uint64_t id = 0;
  size_t bytes = 0;
  int device = 0;
};

/// One piece of work on a stream: queued and run later (or at once), or
/// recorded by a capture and run at each launch of the graph. `touched` are
/// the ids and bases of the device allocations it uses, checked again before
/// each replay. `counted`: it is stream work of its own (a graph launch is
/// not: its nodes are).
struct Work {
  std::string what;
  std::function<int()> run;
  std::vector<std::pair<uint64_t, uintptr_t>> touched;
  bool counted = true;
};

struct Stream;
struct Capture;

/// An item of a stream's queue: work, or a wait for another stream to have
/// run its first `seq` items (cuStreamWaitEvent).
struct Pending {
  Work work;
  Stream *waitOn = nullptr;
  uint64_t waitSeq = 0;
  uint64_t order = 0; // submission order over the whole machine
};

/// When queued work runs, among streams that no event orders
/// (DTF_EMU_STREAM_ORDER).
enum class StreamOrder {
  kSubmission,  // at submission, as if each stream ran at once
  kReversed,    // only when the host or another stream needs it; the latest
                // submitted first where several may run
  kInterleaved, // as late, but one item of every other stream that may run
                // before each item run
};

struct Stream {
  int device = 0;
  uint64_t id = 0;
  bool blocking = false; // created without CU_STREAM_NON_BLOCKING
  std::deque<Pending> pending;
  uint64_t submitted = 0, completed = 0; // items queued, items run
  int error = 0; // the first failure of queued work, for its synchronization
  Capture *capture = nullptr; // the capture it records into, if any
  std::vector<size_t> tail;   // capture: the nodes its next node follows
  /// The emulated device's clock for this stream: the host seconds its
  /// items took to run, summed (what cuEventElapsedTime reads), and when
  /// it stood there after each item an event waits for (by item count).
  double clock = 0;
  std::map<uint64_t, double> stamps;
};

struct Counters {
  uint64_t kernelLaunches = 0, blasCalls = 0, dnnCalls = 0, memcpys = 0,
           deviceAllocs = 0, hostAllocs = 0, graphsCaptured = 0,
           graphLaunches = 0, replayedWork = 0, refusals = 0,
           ncclAllReduces = 0, algorithmChoices = 0;
  /// Blocks of the kernel launches run (grid.x * grid.y * grid.z each):
  /// what a real GPU would spread over its multiprocessors.
  uint64_t kernelBlocks = 0;
  /// cuBLAS and cuDNN calls whose math mode let f32 compute in TF32.
  uint64_t tf32Calls = 0;
  /// The copies split by what they cross: host memory and a device (bytes
  /// too), or two device buffers (one GPU's, or a peer's).
  uint64_t hostDeviceCopies = 0, hostDeviceBytes = 0, deviceCopies = 0;
  uint64_t ncclBroadcasts = 0;
  /// cudnnFindConvolution*AlgorithmEx calls (timed choices), and the
  /// convolution launches DTF_EMU_CONV_ALGO_FAILS made fail.
  uint64_t algorithmSearches = 0, failedAlgorithmLaunches = 0;
  /// cuStreamSynchronize and cuEventSynchronize calls on a stream (the
  /// host waiting for the device), and the time they blocked.
  uint64_t hostWaits = 0, hostWaitMicros = 0;
  /// Those that had queued work to wait for and left every stream of the
  /// GPU empty: the host waited for the last work it had queued, so the GPU
  /// idles until the host queues more (a wait within a step; a wait for
  /// step N while step N+1 is queued behind it is not one), and their time.
  uint64_t idleWaits = 0, idleWaitMicros = 0;
  /// cuStreamWaitEvent calls that ordered a stream after another's work
  /// (eager), and edges between nodes captured on different streams
  /// (per graph replay).
  uint64_t crossStreamWaits = 0, replayedCrossStreamEdges = 0;
  /// Stream work run per device (eagerly or as a replayed graph node).
  std::map<int, uint64_t> workPerDevice;
  /// cuBLAS and cuDNN calls run, by call, element type and math
  /// ("cublasGemmEx bf16 tensor-op": mixed precision on the tensor cores;
  /// "cudnnPoolingForward f32 fma": what the policy keeps in f32).
  std::map<std::string, uint64_t> typedCalls;
};

/// The one emulated machine of the process (all members under `mutex`).
struct Machine {
  std::recursive_mutex mutex;
  int numDevices = 1;
  bool initialized = false;
  uint64_t nextId = 1;
  std::map<uintptr_t, Allocation> live;  // device allocations by base
  std::map<uintptr_t, Allocation> freed; // kept (never reused) to tell
                                         // use after free from a bad pointer
  std::map<uintptr_t, size_t> pinned;    // cuMemHostAlloc
  std::map<uintptr_t, size_t> mapped;    // those with DEVICEMAP: kernels
                                         // may read and write them
  Counters counters;
  StreamOrder order = StreamOrder::kReversed;
  std::vector<Stream *> streams; // live, in creation order
  uint64_t nextStreamId = 1, nextOrder = 1;
};

Machine &machine();
/// The current thread's device (cuCtxSetCurrent), -1 for none.
int &currentDevice();

/// Records `message` as what the emulation last refused and returns `code`.
int refuse(int code, const std::string &message);

/// Whether no stream of GPU `device` has queued work.
bool deviceIdle(int device);

/// Counts a host wait for a stream (one per object) and the time it took;
/// `queued`: the wait has work of GPU `device` to wait for, so that it
/// counts as a wait that leaves the GPU idle when no work of that GPU is
/// queued after it.
struct HostWait {
  std::chrono::steady_clock::time_point start =
      std::chrono::steady_clock::now();
  int device = -1;
  bool queued = false;
  HostWait(int device, bool queued) : device(device), queued(queued) {
    ++machine().counters.hostWaits;
  }
  ~HostWait() {
    Counters &c = machine().counters;
    const uint64_t us =
        uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(
                     std::chrono::steady_clock::now() - start)
                     .count());
    c.hostWaitMicros += us;
    if (queued && deviceIdle(device)) {
      ++c.idleWaits;
      c.idleWaitMicros += us;
    }
  }
};

/// DTF_EMU_SLOW_MS: makes `w` sleep that long before it runs (a slow device).
void slowDown(Work &w);

/// Records `message` as what the emulation last did wrong on purpose (a
/// fault a DTF_EMU_* variable asked for; not a refusal) and returns `code`.
int fault(int code, const std::string &message);

/// Checks that [p, p + bytes) lies in one live device allocation; adds it to
/// `work`'s touched list. `what` names the argument in a refusal. Returns
/// CUDA_SUCCESS or the refusal's code (`code`).
int checkDevice(uintptr_t p, size_t bytes, const std::string &what, Work *work,
                int code = CUDA_ERROR_INVALID_VALUE);

/// True when this thread is capturing a stream, so `what` (a call that may
/// synchronize: allocation, free, synchronization) is refused; `code` is
/// then the refusal's result.
bool unsafeInCapture(const char *what, int *code);

/// Queues `work` on `stream` (runs it at once in submission order or on
/// the legacy stream), or records it when `stream` is capturing.
int submit(CUstream stream, Work work);

/// An NCCL collective over the ranks' `streams`: one item of each, run once
/// (`run`) when one of them is reached, after each stream's work before it
/// (at once in submission order, or when a stream is the legacy one).
void submitCollective(const std::vector<CUstream> &streams,
                      std::function<void()> run);

/// Runs every item queued on `stream` (and what it waits for); the first
/// failure of its queued work, if any.
int finishStream(CUstream stream);

} // namespace dtf::gpu::emu
