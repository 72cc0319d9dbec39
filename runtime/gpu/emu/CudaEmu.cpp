// The driver half of libdtf-cuda-emu.so: the CUDA driver entry points dtf
// uses, on host memory, refusing what the real driver refuses.
#include "runtime/gpu/emu/EmuModule.h"
#include "runtime/gpu/emu/EmuQueue.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <elf.h>
#include <memory>
#include <new>
#include <set>
#include <thread>

namespace dtf::gpu::emu {

Machine &machine() {
  static Machine *m = [] {
    auto *state = new Machine();
    if (const char *n = std::getenv("DTF_EMU_GPUS"))
      state->numDevices = std::max(1, std::atoi(n));
    return state;
  }();
  return *m;
}

int &currentDevice() {
  thread_local int device = -1;
  return device;
}

namespace {
thread_local std::string lastError;
} // namespace

int refuse(int code, const std::string &message) {
  lastError = message;
  ++machine().counters.refusals;
  return code;
}

int fault(int code, const std::string &message) {
  lastError = message;
  return code;
}

// DTF_EMU_SLOW_MS=<ms>: a slow device, each kernel launched outside a capture
// and each graph launch taking at least that long when its work runs (the
// emulation sleeps on the thread that runs the stream's work); 0 for none.
namespace {
// Read at each launch, so that a test may set it.
int slowMilliseconds() {
  const char *v = std::getenv("DTF_EMU_SLOW_MS");
  return v ? std::max(0, std::atoi(v)) : 0;
}
} // namespace

void slowDown(Work &w) {
  const int ms = slowMilliseconds();
  if (ms == 0)
    return;
  w.run = [run = std::move(w.run), ms] {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return run();
  };
}

int checkDevice(uintptr_t p, size_t bytes, const std::string &what, Work *work,
                int code) {
  Machine &m = machine();
  auto it = m.live.upper_bound(p);
  if (it != m.live.begin()) {
    --it;
    const uintptr_t base = it->first;
    if (p < base + it->second.bytes) {
      if (p + bytes > base + it->second.bytes)
        return refuse(code, what + ": " + std::to_string(bytes) +
                                " bytes at offset " + std::to_string(p - base) +
                                " run past the end of an allocation of " +
                                std::to_string(it->second.bytes) + " bytes");
      if (work)
        work->touched.emplace_back(it->second.id, base);
      return CUDA_SUCCESS;
    }
  }
  // Pinned host memory mapped into the device's address space
  // (cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP): its device pointer is
  // its host address, as under unified addressing.
  auto h = m.mapped.upper_bound(p);
  if (h != m.mapped.begin()) {
    --h;
    if (p < h->first + h->second) {
      if (p + bytes > h->first + h->second)
        return refuse(code, what + ": " + std::to_string(bytes) +
                                " bytes run past the end of mapped host memory "
                                "of " +
                                std::to_string(h->second) + " bytes");
      return CUDA_SUCCESS;
    }
  }
  auto f = m.freed.upper_bound(p);
  if (f != m.freed.begin()) {
    --f;
    if (p < f->first + f->second.bytes)
      return refuse(code, what + ": use after free (the allocation of " +
                              std::to_string(f->second.bytes) +
                              " bytes was freed)");
  }
  return refuse(code, what + ": not a device pointer");
}


namespace {
CUresult driverGetVersion(int *v) {
  *v = 13000;
  return CUDA_SUCCESS;
}
CUresult deviceGetCount(int *count) {
  EMU_ENTRY
  *count = machine().numDevices;
  return CUDA_SUCCESS;
}
CUresult deviceGet(CUdevice *dev, int ordinal) {
  EMU_ENTRY
  if (ordinal < 0 || ordinal >= machine().numDevices)
    return refuse(CUDA_ERROR_INVALID_DEVICE,
                  "device " + std::to_string(ordinal) + " of " +
                      std::to_string(machine().numDevices));
  *dev = ordinal;
  return CUDA_SUCCESS;
}
CUresult deviceGetName(char *name, int len, CUdevice dev) {
  EMU_ENTRY
  std::snprintf(name, size_t(len), "dtf emulated GPU %d", dev);
  return CUDA_SUCCESS;
}
CUresult deviceGetAttribute(int *value, int attr, CUdevice dev) {
  EMU_ENTRY
  if (dev < 0 || dev >= machine().numDevices)
    return refuse(CUDA_ERROR_INVALID_DEVICE, "no such device");
  // An H100's: sm_90, 132 multiprocessors.
  if (attr == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
    *value = 9;
  else if (attr == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
    *value = 0;
  else if (attr == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
    *value = 132;
  else
    *value = 0;
  return CUDA_SUCCESS;
}
CUresult primaryCtxRetain(CUcontext *ctx, CUdevice dev) {
  EMU_ENTRY
  if (dev < 0 || dev >= machine().numDevices)
    return refuse(CUDA_ERROR_INVALID_DEVICE, "no such device");
  *ctx = reinterpret_cast<CUcontext>(uintptr_t(dev) + 1);
  return CUDA_SUCCESS;
}
CUresult primaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
CUresult ctxSetCurrent(CUcontext ctx) {
  EMU_ENTRY
  currentDevice() = ctx ? int(reinterpret_cast<uintptr_t>(ctx)) - 1 : -1;
  return CUDA_SUCCESS;
}

CUresult memAlloc(CUdeviceptr *p, size_t bytes) {
  EMU_ENTRY
  if (int code = 0; unsafeInCapture("cuMemAlloc", &code))
    return code;
  EMU_NEEDS_CONTEXT
  if (bytes == 0)
    return refuse(CUDA_ERROR_INVALID_VALUE, "cuMemAlloc of 0 bytes");
  void *mem = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!mem)
    return refuse(CUDA_ERROR_OUT_OF_MEMORY, "out of host memory");
  Machine &m = machine();
  m.live[uintptr_t(mem)] = {m.nextId++, bytes, currentDevice()};
  ++m.counters.deviceAllocs;
  *p = CUdeviceptr(uintptr_t(mem));
  return CUDA_SUCCESS;
}
CUresult memFree(CUdeviceptr p) {
  EMU_ENTRY
  if (int code = 0; unsafeInCapture("cuMemFree", &code))
    return code;
  // As the real cuMemFree: queued work that may use the memory runs first.
  drainAll();
  Machine &m = machine();
  auto it = m.live.find(uintptr_t(p));
  if (it == m.live.end())
    return checkDevice(uintptr_t(p), 1, "cuMemFree", nullptr) == CUDA_SUCCESS
               ? refuse(CUDA_ERROR_INVALID_VALUE,
                        "cuMemFree: not the start of an allocation")
               : CUDA_ERROR_INVALID_VALUE;
  // The memory stays reserved, so that a later use is told apart.
  m.freed[it->first] = it->second;
  m.live.erase(it);
  return CUDA_SUCCESS;
}
CUresult memHostAlloc(void **pp, size_t bytes, unsigned flags) {
  EMU_ENTRY
  if (int code = 0; unsafeInCapture("cuMemHostAlloc", &code))
    return code;
  void *mem =
      std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
  if (!mem)
    return refuse(CUDA_ERROR_OUT_OF_MEMORY, "out of host memory");
  machine().pinned[uintptr_t(mem)] = bytes;
  if (flags & CU_MEMHOSTALLOC_DEVICEMAP)
    machine().mapped[uintptr_t(mem)] = bytes;
  ++machine().counters.hostAllocs;
  *pp = mem;
  return CUDA_SUCCESS;
}
CUresult memFreeHost(void *p) {
  EMU_ENTRY
  if (int code = 0; unsafeInCapture("cuMemFreeHost", &code))
    return code;
  drainAll();
  if (!machine().pinned.erase(uintptr_t(p)))
    return refuse(CUDA_ERROR_INVALID_VALUE,
                  "cuMemFreeHost: not from cuMemHostAlloc");
  machine().mapped.erase(uintptr_t(p));
  std::free(p);
  return CUDA_SUCCESS;
}
CUresult memHostGetDevicePointer(CUdeviceptr *dptr, void *p, unsigned flags) {
  EMU_ENTRY
  if (flags != 0)
    return refuse(CUDA_ERROR_INVALID_VALUE,
                  "cuMemHostGetDevicePointer: flags must be 0");
  if (!machine().mapped.count(uintptr_t(p)))
    return refuse(CUDA_ERROR_INVALID_VALUE,
                  "cuMemHostGetDevicePointer: not the start of memory from "
                  "cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP");
  *dptr = CUdeviceptr(uintptr_t(p));
  return CUDA_SUCCESS;
}

// A copy of `bytes` from src to dst whose device sides (named for the
// refusal) must lie in live allocations.
CUresult copy(const char *what, void *dst, const void *src, size_t bytes,
              CUstream stream, bool dstOnDevice, bool srcOnDevice) {
  Work w{what, nullptr, {}};
  if (srcOnDevice)
    if (int r = checkDevice(uintptr_t(src), bytes,
                            std::string(what) + " source", &w))
      return r;
  if (dstOnDevice)
    if (int r = checkDevice(uintptr_t(dst), bytes,
                            std::string(what) + " destination", &w))
      return r;
  w.run = [=] {
    std::memmove(dst, src, bytes);
    Counters &c = machine().counters;
    ++c.memcpys;
    if (dstOnDevice && srcOnDevice) {
      ++c.deviceCopies;
    } else {
      ++c.hostDeviceCopies;
      c.hostDeviceBytes += bytes;
    }
    return CUDA_SUCCESS;
  };
  return submit(stream, std::move(w));
}
void *devicePtr(CUdeviceptr p) {
  return reinterpret_cast<void *>(uintptr_t(p));
}

CUresult memcpyHtoD(CUdeviceptr dst, const void *src, size_t bytes,
                    CUstream stream) {
  EMU_ENTRY
  return copy("cuMemcpyHtoDAsync", devicePtr(dst), src, bytes, stream, true,
              false);
}
CUresult memcpyDtoH(void *dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  EMU_ENTRY
  return copy("cuMemcpyDtoHAsync", dst, devicePtr(src), bytes, stream, false,
              true);
}
CUresult memcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                    CUstream stream) {
  EMU_ENTRY
  return copy("cuMemcpyDtoDAsync", devicePtr(dst), devicePtr(src), bytes,
              stream, true, true);
}
CUresult memsetD8(CUdeviceptr dst, unsigned char value, size_t n,
                  CUstream stream) {
  EMU_ENTRY
  Work w{"cuMemsetD8Async", nullptr, {}};
  if (int r = checkDevice(uintptr_t(dst), n, "cuMemsetD8Async destination", &w))
    return r;
  w.run = [=] {
    std::memset(reinterpret_cast<void *>(uintptr_t(dst)), value, n);
    return CUDA_SUCCESS;
  };
  return submit(stream, std::move(w));
}

CUresult streamCreate(CUstream *stream, unsigned flags) {
  EMU_ENTRY
  EMU_NEEDS_CONTEXT
  Machine &m = machine();
  auto *s = new Stream();
  s->device = currentDevice();
  s->id = m.nextStreamId++;
  s->blocking = !(flags & CU_STREAM_NON_BLOCKING);
  m.streams.push_back(s);
  *stream = reinterpret_cast<CUstream>(s);
  return CUDA_SUCCESS;
}
CUresult streamDestroy(CUstream stream) {
  EMU_ENTRY
  auto *s = reinterpret_cast<Stream *>(stream);
  if (!s)
    return refuse(CUDA_ERROR_INVALID_HANDLE, "cuStreamDestroy of no stream");
  // Its queued work still runs (as the real driver's does, later); the
  // stream itself is kept, since events may still name it.
  force(s, s->submitted);
  auto &all = machine().streams;
  all.erase(std::remove(all.begin(), all.end(), s), all.end());
  return CUDA_SUCCESS;
}
CUresult streamSynchronize(CUstream stream) {
  EMU_ENTRY
  auto *s = reinterpret_cast<Stream *>(stream);
  if (s && s->capture) {
    s->capture->invalidated = true;
    return refuse(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                  "cuStreamSynchronize on a capturing stream");
  }
  if (int code = 0; unsafeInCapture("cuStreamSynchronize", &code))
    return code;
  if (!s) {
    finishBlockingStreams();
    return CUDA_SUCCESS;
  }
  HostWait wait(s->device, s->completed < s->submitted);
  if (int r = finishStream(stream))
    return refuse(r, "cuStreamSynchronize: queued work on the stream failed");
  return CUDA_SUCCESS;
}
CUresult streamWaitEvent(CUstream stream, CUevent event, unsigned flags) {
  EMU_ENTRY
  auto *s = reinterpret_cast<Stream *>(stream);
  auto *e = reinterpret_cast<Event *>(event);
  if (!e)
    return refuse(CUDA_ERROR_INVALID_HANDLE, "cuStreamWaitEvent of no event");
  if (flags != 0)
    return refuse(CUDA_ERROR_INVALID_VALUE,
                  "cuStreamWaitEvent: the emulation takes flags 0 only");
  if (!e->recorded)
    return CUDA_SUCCESS; // an empty set of work: nothing to wait for
  if (e->capture) {
    auto it = activeCaptures().find(e->capture);
    if (it == activeCaptures().end())
      return refuse(CUDA_ERROR_STREAM_CAPTURE_CAPTURED_EVENT,
                    "cuStreamWaitEvent on an event last recorded in a "
                    "capture that has ended");
    Capture *c = it->second;
    if (!s) {
      c->invalidated = true;
      return refuse(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
                    "cuStreamWaitEvent: the legacy default stream cannot "
                    "join a capture");
    }
    if (s->capture && s->capture != c) {
      s->capture->invalidated = c->invalidated = true;
      return refuse(CUDA_ERROR_STREAM_CAPTURE_MERGE,
                    "cuStreamWaitEvent would merge two captures");
    }
    if (!s->capture) {
      // The stream joins the capture: its next node follows the event's.
      s->capture = c;
      s->tail = e->nodes;
      c->members.push_back(s);
      return CUDA_SUCCESS;
    }
    for (size_t n : e->nodes)
      if (std::find(s->tail.begin(), s->tail.end(), n) == s->tail.end())
        s->tail.push_back(n);
    return CUDA_SUCCESS;
  }
  if (s && s->capture) {
    s->capture->invalidated = true;
    return refuse(CUDA_ERROR_STREAM_CAPTURE_ISOLATION,
                  "cuStreamWaitEvent in a capture on an event recorded "
                  "outside it (a dependency across the capture's boundary)");
  }
  if (!s) {
    force(e->stream, e->seq); // the legacy stream's work runs at once
    return CUDA_SUCCESS;
  }
  if (e->stream == s || done(e->stream, e->seq))
    return CUDA_SUCCESS; // ordered already
  ++machine().counters.crossStreamWaits;
  enqueue(
      s, {Work{"cuStreamWaitEvent", nullptr, {}, false}, e->stream, e->seq, 0});
  return CUDA_SUCCESS;
}

CUresult eventCreate(CUevent *event, unsigned flags) {
  EMU_ENTRY
  // The real driver makes an event in the current context, and refuses
  // without one.
  EMU_NEEDS_CONTEXT
  auto *e = new Event();
  e->timing = !(flags & CU_EVENT_DISABLE_TIMING);
  *event = reinterpret_cast<CUevent>(e);
  return CUDA_SUCCESS;
}
CUresult eventRecord(CUevent event, CUstream stream) {
  EMU_ENTRY
  auto *e = reinterpret_cast<Event *>(event);
  auto *s = reinterpret_cast<Stream *>(stream);
  if (!e)
    return refuse(CUDA_ERROR_INVALID_HANDLE, "cuEventRecord of no event");
  if (!s && !capturingHere().empty())
    return refuseInCapture(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
                           "cuEventRecord on the legacy default stream");
  const bool timing = e->timing;
  *e = Event();
  e->timing = timing;
  e->recorded = true;
  if (s && s->capture) {
    e->capture = s->capture->id;
    e->nodes = s->tail;
  } else if (s) {
    e->stream = s;
    e->seq = s->submitted;
    // Its time on the stream's clock, once the items before it have run
    // (runHead); the latest 4096 places are kept.
    s->stamps[e->seq] = s->clock;
    if (s->stamps.size() > 4096)
      s->stamps.erase(s->stamps.begin());
  } else {
    finishBlockingStreams();
  }
  return CUDA_SUCCESS;
}
CUresult eventSynchronize(CUevent event) {
  EMU_ENTRY
  if (int code = 0; unsafeInCapture("cuEventSynchronize", &code))
    return code;
  auto *e = reinterpret_cast<Event *>(event);
  if (!e)
    return refuse(CUDA_ERROR_INVALID_HANDLE, "cuEventSynchronize of no event");
  if (e->capture)
    return refuse(CUDA_ERROR_STREAM_CAPTURE_CAPTURED_EVENT,
                  "cuEventSynchronize on an event recorded in a capture");
  HostWait wait(e->stream ? e->stream->device : -1, !done(e->stream, e->seq));
  force(e->stream, e->seq);
  // As the real driver's, it reports a failure of the stream's queued work
  // (here: any so far, not only that before the event).
  if (e->stream && e->stream->error != CUDA_SUCCESS) {
    const int r = e->stream->error;
    e->stream->error = CUDA_SUCCESS;
    return refuse(r, "cuEventSynchronize: queued work on the stream failed");
  }
  return CUDA_SUCCESS;
}
CUresult eventElapsedTime(float *ms, CUevent start, CUevent end) {
  EMU_ENTRY
  const auto *a = reinterpret_cast<Event *>(start);
  const auto *b = reinterpret_cast<Event *>(end);
  if (!a || !b || !a->recorded || !b->recorded)
    return refuse(CUDA_ERROR_INVALID_HANDLE, "an event was never recorded");
  if (!a->timing || !b->timing)
    return refuse(CUDA_ERROR_INVALID_HANDLE,
                  "cuEventElapsedTime of an event made with "
                  "CU_EVENT_DISABLE_TIMING");
  // The emulated device's clock: the host time the work queued on one
  // stream took to run (EmuState.h), between the two events' places.
  if (!a->stream || a->stream != b->stream)
    return refuse(CUDA_ERROR_INVALID_HANDLE,
                  "cuEventElapsedTime: the emulation times two events of one "
                  "stream only");
  if (!done(a->stream, a->seq) || !done(b->stream, b->seq))
    return CUDA_ERROR_NOT_READY;
  const auto &stamps = a->stream->stamps;
  const auto ta = stamps.find(a->seq), tb = stamps.find(b->seq);
  if (ta == stamps.end() || tb == stamps.end())
    return refuse(CUDA_ERROR_INVALID_HANDLE,
                  "cuEventElapsedTime: an event recorded again since");
  *ms = float((tb->second - ta->second) * 1e3);
  return CUDA_SUCCESS;
}
CUresult eventDestroy(CUevent event) {
  EMU_ENTRY
  delete reinterpret_cast<Event *>(event);
  return CUDA_SUCCESS;
}

CUresult getErrorString(CUresult r, const char **text) {
  switch (r) {
  case CUDA_SUCCESS:
    *text = "no error";
    break;
  case CUDA_ERROR_INVALID_VALUE:
    *text = "invalid argument";
    break;
  case CUDA_ERROR_OUT_OF_MEMORY:
    *text = "out of memory";
    break;
  case CUDA_ERROR_INVALID_IMAGE:
    *text = "device kernel image is invalid";
    break;
  case CUDA_ERROR_NOT_FOUND:
    *text = "named symbol not found";
    break;
  case CUDA_ERROR_ILLEGAL_ADDRESS:
    *text = "an illegal memory access was encountered";
    break;
  default:
    *text = "CUDA error";
  }
  return CUDA_SUCCESS;
}

CUresult moduleLoadData(CUmodule *module, const void *image) {
  EMU_ENTRY
  EMU_NEEDS_CONTEXT
  // A fault for the tests: the driver refuses every cubin, as a driver
  // older than the plan's toolkit or a chip the cubin was not built for
  // would (dtf then loads the plan's PTX).
  if (std::getenv("DTF_EMU_REFUSE_CUBINS") &&
      std::memcmp(image, ELFMAG, SELFMAG) == 0)
    return refuse(CUDA_ERROR_INVALID_IMAGE,
                  "cuModuleLoadData: a cubin (DTF_EMU_REFUSE_CUBINS)");
  auto mod = std::make_unique<Module>();
  std::string why;
  if (!loadModuleImage(image, mod.get(), &why))
    return refuse(CUDA_ERROR_INVALID_IMAGE, "cuModuleLoadData: " + why);
  *module = reinterpret_cast<CUmodule>(mod.release());
  return CUDA_SUCCESS;
}
CUresult moduleUnload(CUmodule module) {
  EMU_ENTRY
  delete reinterpret_cast<Module *>(module);
  return CUDA_SUCCESS;
}
CUresult moduleGetFunction(CUfunction *fn, CUmodule module, const char *name) {
  EMU_ENTRY
  auto *mod = reinterpret_cast<Module *>(module);
  auto it = mod->kernels.find(name);
  if (it == mod->kernels.end())
    return refuse(CUDA_ERROR_NOT_FOUND,
                  std::string("cuModuleGetFunction: no kernel '") + name +
                      "' in the module");
  *fn = reinterpret_cast<CUfunction>(&it->second);
  return CUDA_SUCCESS;
}
CUresult launchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                      unsigned bx, unsigned by, unsigned bz, unsigned,
                      CUstream stream, void **params, void **extra) {
  EMU_ENTRY
  EMU_NEEDS_CONTEXT
  Work w;
  if (int r = prepareLaunch(*reinterpret_cast<ModuleKernel *>(f), {gx, gy, gz},
                            {bx, by, bz}, params, extra, &w))
    return r;
  // A graph's kernels do not sleep: its launch does, once.
  if (const auto *s = reinterpret_cast<const Stream *>(stream);
      !s || !s->capture)
    slowDown(w);
  return submit(stream, std::move(w));
}

struct ProcEntry {
  const char *name;
  void *fn;
};
const ProcEntry kProcs[] = {
    {"cuDriverGetVersion", reinterpret_cast<void *>(driverGetVersion)},
    {"cuDeviceGetCount", reinterpret_cast<void *>(deviceGetCount)},
    {"cuDeviceGet", reinterpret_cast<void *>(deviceGet)},
    {"cuDeviceGetName", reinterpret_cast<void *>(deviceGetName)},
    {"cuDeviceGetAttribute", reinterpret_cast<void *>(deviceGetAttribute)},
    {"cuDevicePrimaryCtxRetain", reinterpret_cast<void *>(primaryCtxRetain)},
    {"cuDevicePrimaryCtxRelease", reinterpret_cast<void *>(primaryCtxRelease)},
    {"cuCtxSetCurrent", reinterpret_cast<void *>(ctxSetCurrent)},
    {"cuMemAlloc", reinterpret_cast<void *>(memAlloc)},
    {"cuMemFree", reinterpret_cast<void *>(memFree)},
    {"cuMemHostAlloc", reinterpret_cast<void *>(memHostAlloc)},
    {"cuMemFreeHost", reinterpret_cast<void *>(memFreeHost)},
    {"cuMemHostGetDevicePointer",
     reinterpret_cast<void *>(memHostGetDevicePointer)},
    {"cuMemcpyHtoDAsync", reinterpret_cast<void *>(memcpyHtoD)},
    {"cuMemcpyDtoHAsync", reinterpret_cast<void *>(memcpyDtoH)},
    {"cuMemcpyDtoDAsync", reinterpret_cast<void *>(memcpyDtoD)},
    {"cuMemsetD8Async", reinterpret_cast<void *>(memsetD8)},
    {"cuStreamCreate", reinterpret_cast<void *>(streamCreate)},
    {"cuStreamDestroy", reinterpret_cast<void *>(streamDestroy)},
    {"cuStreamSynchronize", reinterpret_cast<void *>(streamSynchronize)},
    {"cuStreamWaitEvent", reinterpret_cast<void *>(streamWaitEvent)},
    {"cuEventCreate", reinterpret_cast<void *>(eventCreate)},
    {"cuEventRecord", reinterpret_cast<void *>(eventRecord)},
    {"cuEventSynchronize", reinterpret_cast<void *>(eventSynchronize)},
    {"cuEventElapsedTime", reinterpret_cast<void *>(eventElapsedTime)},
    {"cuEventDestroy", reinterpret_cast<void *>(eventDestroy)},
    {"cuModuleLoadData", reinterpret_cast<void *>(moduleLoadData)},
    {"cuModuleUnload", reinterpret_cast<void *>(moduleUnload)},
    {"cuModuleGetFunction", reinterpret_cast<void *>(moduleGetFunction)},
    {"cuLaunchKernel", reinterpret_cast<void *>(launchKernel)},
    {"cuStreamBeginCapture", reinterpret_cast<void *>(beginCapture)},
    {"cuStreamEndCapture", reinterpret_cast<void *>(endCapture)},
    {"cuGraphInstantiateWithFlags", reinterpret_cast<void *>(graphInstantiate)},
    {"cuGraphLaunch", reinterpret_cast<void *>(graphLaunch)},
    {"cuGraphExecDestroy", reinterpret_cast<void *>(graphExecDestroy)},
    {"cuGraphDestroy", reinterpret_cast<void *>(graphDestroy)},
    {"cuGetErrorString", reinterpret_cast<void *>(getErrorString)},
};

} // namespace
} // namespace dtf::gpu::emu

using namespace dtf::gpu::emu;

namespace {
// $DTF_EMU_STREAM_ORDER (default reversed) into the machine; false, with
// the reason, for a value that names no order.
bool setStreamOrder(const std::string &order) {
  if (order == "submission")
    machine().order = StreamOrder::kSubmission;
  else if (order == "reversed")
    machine().order = StreamOrder::kReversed;
  else if (order == "interleaved")
    machine().order = StreamOrder::kInterleaved;
  else {
    refuse(CUDA_ERROR_INVALID_VALUE,
           "DTF_EMU_STREAM_ORDER=" + order +
               " names no order: submission, reversed (the default) or "
               "interleaved");
    return false;
  }
  return true;
}
bool readStreamOrder() {
  const char *v = std::getenv("DTF_EMU_STREAM_ORDER");
  return setStreamOrder(v ? v : "reversed");
}
// The faults' variables that take a value, checked at start (they are read
// again at each use, so that a test may set them): a value they do not take
// is refused with the reason, not ignored. Empty is unset.
bool readFaults() {
  const char *slow = std::getenv("DTF_EMU_SLOW_MS");
  if (slow && *slow &&
      (std::strspn(slow, "0123456789") != std::strlen(slow) ||
       std::strlen(slow) > 6)) {
    refuse(CUDA_ERROR_INVALID_VALUE,
           std::string("DTF_EMU_SLOW_MS=") + slow +
               " is not a number of milliseconds (a whole number from 0 to "
               "999999)");
    return false;
  }
  const char *algo = std::getenv("DTF_EMU_CONV_ALGO_FAILS");
  if (algo && *algo && std::strcmp(algo, "0") != 0 &&
      std::strcmp(algo, "1") != 0) {
    refuse(CUDA_ERROR_INVALID_VALUE,
           std::string("DTF_EMU_CONV_ALGO_FAILS=") + algo +
               " names no convolution algorithm of the emulation: 0 or 1");
    return false;
  }
  return true;
}
} // namespace

extern "C" {

/// Emulation only (tests): the order of streams from now on, as
/// DTF_EMU_STREAM_ORDER names it; 2 for no order (dtfEmuLastError says why).
int dtfEmuSetStreamOrder(const char *order) {
  std::lock_guard<std::recursive_mutex> lock(machine().mutex);
  return setStreamOrder(order ? order : "") ? 0 : 2;
}

/// Emulation only: how many GPUs to emulate; before cuInit. 2 when
/// $DTF_EMU_STREAM_ORDER names no order, or a fault's variable has a value
/// it does not take (dtfEmuLastError says why).
int dtfEmuConfigure(int numDevices) {
  std::lock_guard<std::recursive_mutex> lock(machine().mutex);
  if (numDevices < 1 || numDevices > 64 || machine().initialized)
    return 1;
  machine().numDevices = numDevices;
  return readStreamOrder() && readFaults() ? 0 : 2;
}

/// Emulation only: why the last refused call was refused ("" if none).
const char *dtfEmuLastError() { return lastError.c_str(); }

/// Emulation only: the counters, as one line.
int dtfEmuStats(char *buf, size_t size) {
  std::lock_guard<std::recursive_mutex> lock(machine().mutex);
  const Counters &c = machine().counters;
  std::string perDevice;
  for (int d = 0; d < machine().numDevices; ++d) {
    auto it = c.workPerDevice.find(d);
    perDevice += " " + std::to_string(d) + "=" +
                 std::to_string(it == c.workPerDevice.end() ? 0 : it->second);
  }
  // "cublasGemmEx bf16 tensor-op=8, ...": what computed in which type.
  std::string typed;
  for (const auto &[call, n] : c.typedCalls)
    typed += (typed.empty() ? "" : ", ") + call + "=" + std::to_string(n);
  return std::snprintf(
      buf, size,
      "cuda emulation: %llu kernel launches, %llu cuBLAS calls, %llu cuDNN "
      "calls, %llu copies, %llu device allocations, %llu pinned host "
      "allocations, %llu graphs captured, %llu graph launches (%llu nodes "
      "replayed), %llu refusals, %llu NCCL all-reduces, %llu cuDNN "
      "algorithm choices, stream work per GPU:%s; copies between host and "
      "device: %llu (%llu bytes), between device buffers: %llu; NCCL "
      "broadcasts: %llu; cross-stream waits: %llu eager, %llu replayed; "
      "library calls that may compute in TF32: %llu; cuDNN algorithms timed: "
      "%llu; convolution launches failed by DTF_EMU_CONV_ALGO_FAILS: %llu; "
      "host waits for streams: %llu (%llu ms blocked); host waits that "
      "leave the GPU idle: %llu (%llu ms blocked); kernel blocks launched: "
      "%llu; cuBLAS and cuDNN calls by type and math: %s",
      (unsigned long long)c.kernelLaunches, (unsigned long long)c.blasCalls,
      (unsigned long long)c.dnnCalls, (unsigned long long)c.memcpys,
      (unsigned long long)c.deviceAllocs, (unsigned long long)c.hostAllocs,
      (unsigned long long)c.graphsCaptured, (unsigned long long)c.graphLaunches,
      (unsigned long long)c.replayedWork, (unsigned long long)c.refusals,
      (unsigned long long)c.ncclAllReduces,
      (unsigned long long)c.algorithmChoices, perDevice.c_str(),
      (unsigned long long)c.hostDeviceCopies,
      (unsigned long long)c.hostDeviceBytes, (unsigned long long)c.deviceCopies,
      (unsigned long long)c.ncclBroadcasts,
      (unsigned long long)c.crossStreamWaits,
      (unsigned long long)c.replayedCrossStreamEdges,
      (unsigned long long)c.tf32Calls, (unsigned long long)c.algorithmSearches,
      (unsigned long long)c.failedAlgorithmLaunches,
      (unsigned long long)c.hostWaits,
      (unsigned long long)(c.hostWaitMicros / 1000),
      (unsigned long long)c.idleWaits,
      (unsigned long long)(c.idleWaitMicros / 1000),
      (unsigned long long)c.kernelBlocks, typed.empty() ? "none" : typed.c_str());
}

CUresult cuInit(unsigned flags) {
  if (flags != 0)
    return refuse(CUDA_ERROR_INVALID_VALUE, "cuInit flags must be 0");
  std::lock_guard<std::recursive_mutex> lock(machine().mutex);
  if (!readStreamOrder() || !readFaults())
    return CUDA_ERROR_INVALID_VALUE;
  machine().initialized = true;
  return CUDA_SUCCESS;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                             uint64_t, int *status) {
  *pfn = nullptr;
  if (cudaVersion < 12000)
    return refuse(CUDA_ERROR_NOT_SUPPORTED, "cudaVersion below 12000");
  for (const ProcEntry &e : kProcs)
    if (std::strcmp(e.name, symbol) == 0) {
      *pfn = e.fn;
      if (status)
        *status = 0; // CU_GET_PROC_ADDRESS_SUCCESS
      return CUDA_SUCCESS;
    }
  if (status)
    *status = 1; // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
  return refuse(CUDA_ERROR_NOT_FOUND,
                std::string("cuGetProcAddress: the emulation has no ") +
                    symbol);
}

} // extern "C"
