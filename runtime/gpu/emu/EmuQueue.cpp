// Queued work on the emulated streams: each stream's items run when the host
// or another stream needs them, in the hostile order DTF_EMU_STREAM_ORDER
// names; work on a capturing stream becomes the capture's nodes.
#include "runtime/gpu/emu/EmuQueue.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>

namespace dtf::gpu::emu {

// The captures this thread is making (thread-local capture mode, the one
// dtf uses): while there is one, the driver refuses the calls that could
// synchronize with the device, and the capture is invalidated.
std::vector<Capture *> &capturingHere() {
  thread_local std::vector<Capture *> captures;
  return captures;
}

// Captures not yet ended, by id (an event recorded in one names it).
std::map<uint64_t, Capture *> &activeCaptures() {
  static auto *m = new std::map<uint64_t, Capture *>();
  return *m;
}

// A refusal of `what` inside a capture, as the real driver's: the call fails
// and so will the capture's end.
int refuseInCapture(int code, const std::string &what) {
  for (Capture *c : capturingHere())
    c->invalidated = true;
  return refuse(code, what + " while this thread captures a stream (a CUDA "
                             "graph may hold only asynchronous stream work)");
}

// --- Queued work: run when the host or another stream needs it -------------

bool done(const Stream *s, uint64_t seq) { return !s || s->completed >= seq; }

bool deviceIdle(int device) {
  for (const Stream *s : machine().streams)
    if (s->device == device && !s->pending.empty())
      return false;
  return true;
}

bool headMayRun(const Stream *s) {
  if (s->pending.empty())
    return false;
  const Pending &p = s->pending.front();
  return done(p.waitOn, p.waitSeq);
}

// Runs the head of `s`, whose wait (if any) is over.
void runHead(Stream *s) {
  Pending p = std::move(s->pending.front());
  s->pending.pop_front();
  if (p.work.run) {
    if (p.work.counted)
      ++machine().counters.workPerDevice[s->device];
    const auto start = std::chrono::steady_clock::now();
    if (int r = p.work.run(); r != CUDA_SUCCESS && s->error == CUDA_SUCCESS)
      s->error = r;
    s->clock += std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                              start)
                    .count();
  }
  ++s->completed;
  if (auto t = s->stamps.find(s->completed); t != s->stamps.end())
    t->second = s->clock;
}

// Interleaved order: one item of every other stream that may run.
void runOthersOnce(const Stream *s) {
  for (Stream *t : std::vector<Stream *>(machine().streams))
    if (t != s && headMayRun(t))
      runHead(t);
}

// Makes `s` run its first `seq` items, and whatever they wait for.
void force(Stream *s, uint64_t seq) {
  bool othersRan = false;
  while (s && s->completed < seq) {
    const Pending &p = s->pending.front();
    if (!done(p.waitOn, p.waitSeq)) {
      force(p.waitOn, p.waitSeq);
      continue;
    }
    if (machine().order == StreamOrder::kInterleaved && !othersRan) {
      // Another stream's item may run this one's (an NCCL collective):
      // look at the head again.
      runOthersOnce(s);
      othersRan = true;
      continue;
    }
    othersRan = false;
    runHead(s);
  }
}

// Runs everything queued on every stream (an implicit synchronization of
// the device, as cuMemFree's), in the hostile order.
void drainAll() {
  Machine &m = machine();
  size_t turn = 0;
  for (;;) {
    Stream *pick = nullptr;
    size_t at = 0;
    for (size_t i = 0; i < m.streams.size(); ++i) {
      Stream *s = m.streams[(turn + i) % m.streams.size()];
      if (!headMayRun(s))
        continue;
      if (m.order == StreamOrder::kInterleaved) {
        pick = s;
        at = (turn + i) % m.streams.size();
        break;
      }
      const bool later =
          !pick || s->pending.front().order > pick->pending.front().order;
      if (m.order == StreamOrder::kReversed ? later : !later)
        pick = s;
    }
    if (!pick)
      return; // waits only ever name work queued before them: nothing left
    runHead(pick);
    turn = at + 1;
  }
}

// Work on the legacy stream waits for the blocking streams (dtf makes
// non-blocking ones).
void finishBlockingStreams() {
  for (Stream *s : std::vector<Stream *>(machine().streams))
    if (s->blocking)
      force(s, s->submitted);
}

void enqueue(Stream *s, Pending p) {
  p.order = machine().nextOrder++;
  s->pending.push_back(std::move(p));
  ++s->submitted;
}

bool unsafeInCapture(const char *what, int *code) {
  if (capturingHere().empty())
    return false;
  *code = refuseInCapture(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, what);
  return true;
}

int submit(CUstream stream, Work work) {
  auto *s = reinterpret_cast<Stream *>(stream);
  if (!s && !capturingHere().empty())
    return refuseInCapture(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
                           work.what + " on the legacy default stream");
  if (s && s->capture) {
    Capture &c = *s->capture;
    c.nodes.push_back({std::move(work), s->tail, s->id});
    s->tail = {c.nodes.size() - 1};
    return CUDA_SUCCESS;
  }
  if (!s) {
    finishBlockingStreams();
    if (work.counted)
      ++machine().counters.workPerDevice[currentDevice()];
    return work.run();
  }
  enqueue(s, {std::move(work), nullptr, 0, 0});
  if (machine().order == StreamOrder::kSubmission) {
    runHead(s);
    const int r = s->error;
    s->error = CUDA_SUCCESS;
    return r;
  }
  return CUDA_SUCCESS;
}

void submitCollective(const std::vector<CUstream> &streams,
                      std::function<void()> run) {
  std::vector<Stream *> ranks;
  for (CUstream c : streams)
    ranks.push_back(reinterpret_cast<Stream *>(c));
  const bool now =
      machine().order == StreamOrder::kSubmission ||
      std::find(ranks.begin(), ranks.end(), nullptr) != ranks.end();
  if (now) {
    for (Stream *s : ranks)
      force(s, s ? s->submitted : 0);
    run();
    return;
  }
  // Each rank's item: the first one run brings the other ranks' streams up
  // to their items (a collective waits for every rank), runs it once, and
  // the other items find it done.
  struct Collective {
    std::function<void()> run;
    std::vector<std::pair<Stream *, uint64_t>> items; // stream, its seq
    bool done = false;
  };
  auto c = std::make_shared<Collective>();
  c->run = std::move(run);
  for (Stream *s : ranks)
    c->items.emplace_back(s, s->submitted + 1);
  for (Stream *s : ranks) {
    Work w{"an NCCL collective",
           [c] {
             if (!c->done) {
               c->done = true;
               for (const auto &[t, seq] : c->items)
                 force(t, seq - 1);
               c->run();
             }
             return CUDA_SUCCESS;
           },
           {},
           false};
    enqueue(s, {std::move(w), nullptr, 0, 0});
  }
}

int finishStream(CUstream stream) {
  auto *s = reinterpret_cast<Stream *>(stream);
  if (!s)
    return CUDA_SUCCESS;
  force(s, s->submitted);
  const int r = s->error;
  s->error = CUDA_SUCCESS;
  return r;
}

} // namespace dtf::gpu::emu
