// What the emulated driver's entry points (CudaEmu.cpp) share with the
// queue of stream work (EmuQueue.cpp) and the captures and graphs
// (EmuGraphs.cpp).
#pragma once

#include "runtime/gpu/emu/EmuState.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace dtf::gpu::emu {

/// A capture in progress: the nodes recorded so far on its streams (each
/// with the nodes it follows), the streams that joined it.
struct Capture {
  uint64_t id = 0;
  Stream *origin = nullptr;
  struct Node {
    Work work;
    std::vector<size_t> deps;
    uint64_t stream = 0; // the id of the stream it was captured on
  };
  std::vector<Node> nodes;
  std::vector<Stream *> members;
  bool invalidated = false; // a call the capture does not allow was made
};

/// The captures this thread is making (thread-local capture mode, the one
/// dtf uses): while there is one, the driver refuses the calls that could
/// synchronize with the device, and the capture is invalidated.
std::vector<Capture *> &capturingHere();
/// Captures not yet ended, by id (an event recorded in one names it).
std::map<uint64_t, Capture *> &activeCaptures();
/// A refusal of `what` inside a capture, as the real driver's: the call
/// fails and so will the capture's end.
int refuseInCapture(int code, const std::string &what);

/// Whether `s` (null: the legacy stream) ran its first `seq` items.
bool done(const Stream *s, uint64_t seq);
/// Makes `s` run its first `seq` items, and whatever they wait for.
void force(Stream *s, uint64_t seq);
/// Runs everything queued on every stream (an implicit synchronization of
/// the device, as cuMemFree's), in the hostile order.
void drainAll();
/// Work on the legacy stream waits for the blocking streams.
void finishBlockingStreams();
/// Queues `p` on `s`.
void enqueue(Stream *s, Pending p);

/// Where an event was last recorded: nowhere, after a stream's first `seq`
/// items, or in a capture after its nodes `nodes`.
struct Event {
  bool timing = false; // made without CU_EVENT_DISABLE_TIMING
  bool recorded = false;
  Stream *stream = nullptr;
  uint64_t seq = 0;
  uint64_t capture = 0;
  std::vector<size_t> nodes;
};
struct Graph {
  std::vector<Capture::Node> nodes;
};

inline bool initialized() { return machine().initialized; }

#define EMU_ENTRY                                                              \
  std::lock_guard<std::recursive_mutex> lock(machine().mutex);                 \
  if (!initialized())                                                          \
    return refuse(CUDA_ERROR_NOT_INITIALIZED, "cuInit was not called");

#define EMU_NEEDS_CONTEXT                                                      \
  if (currentDevice() < 0)                                                     \
    return refuse(CUDA_ERROR_INVALID_CONTEXT,                                  \
                  "no current context (cuCtxSetCurrent)");

// Capture and graphs (EmuGraphs.cpp).
CUresult beginCapture(CUstream stream, int mode);
CUresult endCapture(CUstream stream, CUgraph *graph);
CUresult graphInstantiate(CUgraphExec *exec, CUgraph graph, unsigned long long flags);
CUresult graphLaunch(CUgraphExec exec, CUstream stream);
CUresult graphExecDestroy(CUgraphExec exec);
CUresult graphDestroy(CUgraph graph);

} // namespace dtf::gpu::emu
