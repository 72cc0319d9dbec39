// The state of dtf's host emulation of a CUDA machine: device memory (host
// memory, every allocation tracked), streams that run or record work, and
// the counters that show what ran.
#pragma once

#include "runtime/gpu/CudaApi.h"

#include <cstdint>
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

/// One piece of work on a stream: run at once, or recorded by a capture and
/// run at each launch of the graph. `touched` are the ids and bases of the
/// device allocations it uses, checked again before each replay.
struct Work {
  std::string what;
  std::function<int()> run;
  std::vector<std::pair<uint64_t, uintptr_t>> touched;
};

struct Stream {
  int device = 0;
  bool capturing = false;
  bool invalidated = false; // a call the capture does not allow was made
  std::vector<Work> recorded;
};

struct Counters {
  uint64_t kernelLaunches = 0, blasCalls = 0, dnnCalls = 0, memcpys = 0,
           deviceAllocs = 0, hostAllocs = 0, graphsCaptured = 0,
           graphLaunches = 0, replayedWork = 0, refusals = 0,
           ncclAllReduces = 0, algorithmChoices = 0;
  /// The copies split by what they cross: host memory and a device (bytes
  /// too), or two device buffers (one GPU's, or a peer's).
  uint64_t hostDeviceCopies = 0, hostDeviceBytes = 0, deviceCopies = 0;
  uint64_t ncclBroadcasts = 0;
  /// Stream work run per device (eagerly or as a replayed graph node).
  std::map<int, uint64_t> workPerDevice;
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
};

Machine &machine();
/// The current thread's device (cuCtxSetCurrent), -1 for none.
int &currentDevice();

/// Records `message` as what the emulation last refused and returns `code`.
int refuse(int code, const std::string &message);

/// Checks that [p, p + bytes) lies in one live device allocation; adds it to
/// `work`'s touched list. `what` names the argument in a refusal. Returns
/// CUDA_SUCCESS or the refusal's code (`code`).
int checkDevice(uintptr_t p, size_t bytes, const std::string &what, Work *work,
                int code = CUDA_ERROR_INVALID_VALUE);

/// True when this thread is capturing a stream, so `what` (a call that may
/// synchronize: allocation, free, synchronization) is refused; `code` is
/// then the refusal's result.
bool unsafeInCapture(const char *what, int *code);

/// Runs `work` now, or records it when `stream` is capturing.
int submit(CUstream stream, Work work);

} // namespace dtf::gpu::emu
