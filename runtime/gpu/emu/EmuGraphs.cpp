// Stream capture and CUDA graphs on the emulation: a capture records its
// streams' work as nodes (with the nodes each follows), and a launch replays
// them in the hostile order, refusing what the real driver refuses.
#include "runtime/gpu/emu/EmuQueue.h"

#include <algorithm>
#include <memory>
#include <set>

namespace dtf::gpu::emu {
namespace {
uint64_t nextCaptureId = 1;
} // namespace

CUresult beginCapture(CUstream stream, int) {
  EMU_ENTRY
  auto *s = reinterpret_cast<Stream *>(stream);
  if (!s)
    return refuse(CUDA_ERROR_NOT_SUPPORTED,
                  "the legacy default stream cannot be captured");
  if (s->capture)
    return refuse(CUDA_ERROR_INVALID_VALUE, "the stream is already capturing");
  auto *c = new Capture();
  c->id = nextCaptureId++;
  c->origin = s;
  c->members = {s};
  activeCaptures()[c->id] = c;
  s->capture = c;
  s->tail.clear();
  capturingHere().push_back(c);
  return CUDA_SUCCESS;
}

// The capture's first node that the origin stream's last nodes do not
// follow (work forked onto another stream and not joined back), or -1.
long unjoinedNode(const Capture &c) {
  std::vector<bool> joined(c.nodes.size(), false);
  std::vector<size_t> todo = c.origin->tail;
  while (!todo.empty()) {
    const size_t n = todo.back();
    todo.pop_back();
    if (joined[n])
      continue;
    joined[n] = true;
    for (size_t d : c.nodes[n].deps)
      todo.push_back(d);
  }
  for (size_t n = 0; n < c.nodes.size(); ++n)
    if (!joined[n])
      return long(n);
  return -1;
}

CUresult endCapture(CUstream stream, CUgraph *graph) {
  EMU_ENTRY
  auto *s = reinterpret_cast<Stream *>(stream);
  *graph = nullptr;
  if (!s || !s->capture)
    return refuse(CUDA_ERROR_INVALID_VALUE, "the stream is not capturing");
  if (s->capture->origin != s)
    return refuse(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED,
                  "cuStreamEndCapture on a stream that joined the capture; "
                  "it began on another stream");
  std::unique_ptr<Capture> c(s->capture);
  const long unjoined = unjoinedNode(*c);
  // Every stream of the capture leaves it.
  for (Stream *m : c->members) {
    m->capture = nullptr;
    m->tail.clear();
  }
  activeCaptures().erase(c->id);
  capturingHere().erase(
      std::remove(capturingHere().begin(), capturingHere().end(), c.get()),
      capturingHere().end());
  if (c->invalidated)
    return refuse(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                  "cuStreamEndCapture: a call during the capture invalidated "
                  "it");
  if (const long n = unjoined; n >= 0)
    return refuse(CUDA_ERROR_STREAM_CAPTURE_UNJOINED,
                  "cuStreamEndCapture: node " + std::to_string(n) + " (" +
                      c->nodes[size_t(n)].work.what +
                      "), captured on another stream, was not joined back "
                      "to the origin stream (record an event after it and "
                      "make the origin stream wait for it)");
  auto *g = new Graph();
  g->nodes = std::move(c->nodes);
  ++machine().counters.graphsCaptured;
  *graph = reinterpret_cast<CUgraph>(g);
  return CUDA_SUCCESS;
}
CUresult graphInstantiate(CUgraphExec *exec, CUgraph graph,
                          unsigned long long) {
  EMU_ENTRY
  auto *copy = new std::shared_ptr<Graph>(
      std::make_shared<Graph>(*reinterpret_cast<Graph *>(graph)));
  *exec = reinterpret_cast<CUgraphExec>(copy);
  return CUDA_SUCCESS;
}

// Runs a graph's nodes, each after the nodes it follows, in the hostile
// order: the last-captured node that may run first (reversed), or nodes of
// the capture's streams in turn (interleaved), or in capture order.
int replay(const Graph &g, int device) {
  Machine &m = machine();
  const size_t n = g.nodes.size();
  std::vector<size_t> waiting(n);
  std::vector<std::vector<size_t>> next(n);
  for (size_t i = 0; i < n; ++i) {
    waiting[i] = g.nodes[i].deps.size();
    for (size_t d : g.nodes[i].deps) {
      next[d].push_back(i);
      if (g.nodes[d].stream != g.nodes[i].stream)
        ++m.counters.replayedCrossStreamEdges;
    }
  }
  std::set<size_t> ready;
  for (size_t i = 0; i < n; ++i)
    if (waiting[i] == 0)
      ready.insert(i);
  uint64_t lastStream = 0;
  while (!ready.empty()) {
    auto pick = ready.begin();
    if (m.order == StreamOrder::kReversed) {
      pick = std::prev(ready.end());
    } else if (m.order == StreamOrder::kInterleaved) {
      for (auto it = ready.begin(); it != ready.end(); ++it)
        if (g.nodes[*it].stream != lastStream) {
          pick = it;
          break;
        }
    }
    const size_t i = *pick;
    ready.erase(pick);
    lastStream = g.nodes[i].stream;
    ++m.counters.replayedWork;
    ++m.counters.workPerDevice[device];
    if (int r = g.nodes[i].work.run())
      return r;
    for (size_t c : next[i])
      if (--waiting[c] == 0)
        ready.insert(c);
  }
  return CUDA_SUCCESS;
}

CUresult graphLaunch(CUgraphExec exec, CUstream stream) {
  EMU_ENTRY
  Machine &m = machine();
  const std::shared_ptr<Graph> g =
      *reinterpret_cast<std::shared_ptr<Graph> *>(exec);
  // A node's pointers were baked in at capture: every allocation it used
  // must still be the one it was.
  for (size_t i = 0; i < g->nodes.size(); ++i)
    for (const auto &[id, base] : g->nodes[i].work.touched) {
      auto it = m.live.find(base);
      if (it == m.live.end() || it->second.id != id)
        return refuse(CUDA_ERROR_ILLEGAL_ADDRESS,
                      "cuGraphLaunch: node " + std::to_string(i) + " (" +
                          g->nodes[i].work.what +
                          ") uses a device buffer that was freed or moved "
                          "after the capture");
    }
  ++m.counters.graphLaunches;
  const auto *s = reinterpret_cast<Stream *>(stream);
  const int device = s ? s->device : currentDevice();
  // One item of the stream: the graph runs after the stream's earlier work
  // and before its later work (the executable may be destroyed meanwhile).
  Work w{
      "cuGraphLaunch", [g, device] { return replay(*g, device); }, {}, false};
  slowDown(w);
  return submit(stream, std::move(w));
}
CUresult graphExecDestroy(CUgraphExec exec) {
  EMU_ENTRY
  delete reinterpret_cast<std::shared_ptr<Graph> *>(exec);
  return CUDA_SUCCESS;
}
CUresult graphDestroy(CUgraph graph) {
  EMU_ENTRY
  delete reinterpret_cast<Graph *>(graph);
  return CUDA_SUCCESS;
}

} // namespace dtf::gpu::emu
