// The NCCL half of libdtf-cuda-emu.so: communicators over the emulated GPUs
// of one process (ncclCommInitAll), and the sum all-reduce that dtf's towers
// issue inside ncclGroupStart/ncclGroupEnd, run when the group ends over every
// rank's buffers.
#include "runtime/gpu/emu/EmuState.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <vector>

namespace dtf::gpu::emu {
namespace {

struct Comm {
  uint64_t clique = 0;
  int rank = 0, ranks = 0, device = 0;
};

// An ncclAllReduce (root -1: float32 sum) or an ncclBroadcast (bytes from
// rank `root`) waiting for its group's end.
struct PendingReduce {
  Comm *comm;
  const float *send;
  float *recv;
  size_t count;
  CUstream stream;
  int root = -1;
  size_t bytes = 0; // a broadcast's
};

thread_local int groupDepth = 0;
thread_local std::vector<PendingReduce> pending;
uint64_t nextClique = 1;

// The ranks' streams, in rank order.
std::vector<CUstream> streamsOf(const std::vector<const PendingReduce *> &r) {
  std::vector<CUstream> out;
  for (const PendingReduce *p : r)
    out.push_back(p->stream);
  return out;
}

// Runs the all-reduces collected in one group: every rank of a clique must
// have called, with the same count.
// Runs the collectives collected in one group: per communicator clique, the
// n-th call of every rank forms one collective (NCCL pairs them in issue
// order), so every rank must have made as many calls, each with the same
// count (and a broadcast's root).
int runPending() {
  std::vector<PendingReduce> calls = std::move(pending);
  pending.clear();
  std::set<uint64_t> cliques;
  for (const PendingReduce &p : calls)
    cliques.insert(p.comm->clique);
  for (uint64_t clique : cliques) {
    int want = 0;
    std::vector<std::vector<const PendingReduce *>> byRank;
    for (const PendingReduce &p : calls)
      if (p.comm->clique == clique) {
        want = p.comm->ranks;
        byRank.resize(size_t(want));
        byRank[size_t(p.comm->rank)].push_back(&p);
      }
    size_t most = 0;
    for (const auto &r : byRank)
      most = std::max(most, r.size());
    for (size_t n = 0; n < most; ++n) {
      std::vector<const PendingReduce *> ranks;
      for (const auto &r : byRank)
        if (n < r.size())
          ranks.push_back(r[n]);
      if (int(ranks.size()) != want)
        return refuse(ncclInvalidUsage,
                      "ncclAllReduce: " + std::to_string(ranks.size()) +
                          " of " + std::to_string(want) +
                          " ranks called in the group: the real NCCL would "
                          "wait forever for the others");
      for (const PendingReduce *p : ranks) {
        if ((p->root >= 0) != (ranks.front()->root >= 0))
          return refuse(ncclInvalidUsage,
                        "an ncclAllReduce and an ncclBroadcast paired over "
                        "one communicator in one group (the ranks called "
                        "them in different orders)");
        if (p->count != ranks.front()->count)
          return refuse(ncclInvalidUsage,
                        "ncclAllReduce: the ranks of one communicator gave "
                        "different counts (" +
                            std::to_string(p->count) + " and " +
                            std::to_string(ranks.front()->count) + ")");
      }
      if (ranks.front()->root >= 0) {
        // A broadcast: every rank names the same root and size.
        const PendingReduce *root = ranks[size_t(ranks.front()->root)];
        for (const PendingReduce *p : ranks)
          if (p->root != ranks.front()->root ||
              p->bytes != ranks.front()->bytes)
            return refuse(ncclInvalidUsage,
                          "ncclBroadcast: the ranks of one communicator gave "
                          "different roots or sizes");
        std::vector<PendingReduce> all;
        for (const PendingReduce *p : ranks)
          all.push_back(*p);
        const PendingReduce from = *root;
        submitCollective(streamsOf(ranks), [all, from] {
          for (const PendingReduce &p : all) {
            // The root's receive buffer too, unless in place (as NCCL).
            if (p.recv != from.send)
              std::memmove(p.recv, from.send, p.bytes);
            ++machine().counters.workPerDevice[p.comm->device];
          }
          ++machine().counters.ncclBroadcasts;
        });
        continue;
      }
      std::vector<PendingReduce> all;
      for (const PendingReduce *p : ranks)
        all.push_back(*p);
      submitCollective(streamsOf(ranks), [all] {
        const size_t count = all.front().count;
        std::vector<float> sum(count, 0.0f);
        // In rank order, so the sum does not depend on the call order.
        for (const PendingReduce &p : all)
          for (size_t i = 0; i < count; ++i)
            sum[i] += p.send[i];
        for (const PendingReduce &p : all) {
          std::memcpy(p.recv, sum.data(), count * sizeof(float));
          ++machine().counters.workPerDevice[p.comm->device];
        }
        ++machine().counters.ncclAllReduces;
      });
    }
  }
  return ncclSuccess;
}

// A collective's stream must be on its communicator's GPU and not capturing.
int checkStream(const std::string &call, const Comm *c, CUstream stream) {
  auto *s = reinterpret_cast<Stream *>(stream);
  if (s && s->device != c->device)
    return refuse(ncclInvalidUsage,
                  call + ": the stream is on GPU " + std::to_string(s->device) +
                      ", the communicator on GPU " + std::to_string(c->device));
  if (s && s->capture)
    return refuse(ncclInvalidUsage,
                  call + ": the emulation does not capture NCCL calls");
  return ncclSuccess;
}

// A buffer (in a live allocation, checkDevice) must be on the
// communicator's GPU: NCCL refuses one allocated on another device.
int checkOnCommDevice(const std::string &what, const Comm *c, const void *p) {
  auto it = machine().live.upper_bound(uintptr_t(p));
  if (it != machine().live.begin() && (--it)->second.device != c->device)
    return refuse(ncclInvalidArgument, what + ": the buffer is on GPU " +
                                           std::to_string(it->second.device) +
                                           ", the communicator on GPU " +
                                           std::to_string(c->device));
  return ncclSuccess;
}

// Queues `p` for its group's end; outside a group, only a communicator of
// one rank can run (the others' ranks would never call).
int queue(const std::string &call, PendingReduce p) {
  if (groupDepth > 0) {
    pending.push_back(p);
    return ncclSuccess;
  }
  if (p.comm->ranks > 1)
    return refuse(ncclInvalidUsage,
                  call + " over " + std::to_string(p.comm->ranks) +
                      " GPUs of one process outside ncclGroupStart/"
                      "ncclGroupEnd: the real NCCL would wait forever for "
                      "the other ranks");
  pending.push_back(p);
  return runPending();
}

} // namespace
} // namespace dtf::gpu::emu

using namespace dtf::gpu::emu;

extern "C" {

ncclResult_t ncclGetVersion(int *version) {
  *version = 22805; // reports NCCL 2.28.5
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r) {
  switch (r) {
  case ncclSuccess:
    return "no error";
  case ncclInvalidArgument:
    return "invalid argument";
  case ncclInvalidUsage:
    return "invalid usage";
  default:
    return "unknown NCCL error";
  }
}

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devices) {
  std::lock_guard<std::recursive_mutex> lock(machine().mutex);
  if (!machine().initialized)
    return refuse(ncclInvalidUsage, "ncclCommInitAll before cuInit");
  if (ndev < 1)
    return refuse(ncclInvalidArgument, "ncclCommInitAll: no devices");
  std::set<int> seen;
  for (int i = 0; i < ndev; ++i) {
    const int d = devices ? devices[i] : i;
    if (d < 0 || d >= machine().numDevices || !seen.insert(d).second)
      return refuse(ncclInvalidArgument,
                    "ncclCommInitAll: device " + std::to_string(d) +
                        " is not a distinct GPU of this machine (" +
                        std::to_string(machine().numDevices) + ")");
  }
  const uint64_t clique = nextClique++;
  for (int i = 0; i < ndev; ++i)
    comms[i] = reinterpret_cast<ncclComm_t>(
        new Comm{clique, i, ndev, devices ? devices[i] : i});
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete reinterpret_cast<Comm *>(comm);
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  ++groupDepth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  std::lock_guard<std::recursive_mutex> lock(machine().mutex);
  if (groupDepth == 0)
    return refuse(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--groupDepth > 0)
    return ncclSuccess;
  return runPending();
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count,
                           int dataType, int op, ncclComm_t comm,
                           CUstream stream) {
  std::lock_guard<std::recursive_mutex> lock(machine().mutex);
  auto *c = reinterpret_cast<Comm *>(comm);
  if (!c)
    return refuse(ncclInvalidArgument, "ncclAllReduce: no communicator");
  if (dataType != ncclFloat32 || op != ncclSum)
    return refuse(ncclInvalidArgument,
                  "ncclAllReduce: the emulation sums float32 only");
  if (int r = checkStream("ncclAllReduce", c, stream))
    return r;
  const std::string what =
      "ncclAllReduce(rank " + std::to_string(c->rank) + ")";
  if (count > 0) {
    if (checkDevice(uintptr_t(send), count * sizeof(float), what + " send",
                    nullptr) != CUDA_SUCCESS ||
        checkDevice(uintptr_t(recv), count * sizeof(float), what + " recv",
                    nullptr) != CUDA_SUCCESS)
      return ncclInvalidArgument; // checkDevice said why
    if (int r = checkOnCommDevice(what + " send", c, send))
      return r;
    if (int r = checkOnCommDevice(what + " recv", c, recv))
      return r;
  }
  return queue("ncclAllReduce", {c, static_cast<const float *>(send),
                                 static_cast<float *>(recv), count, stream});
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count,
                           int dataType, int root, ncclComm_t comm,
                           CUstream stream) {
  std::lock_guard<std::recursive_mutex> lock(machine().mutex);
  auto *c = reinterpret_cast<Comm *>(comm);
  if (!c)
    return refuse(ncclInvalidArgument, "ncclBroadcast: no communicator");
  if (dataType != ncclFloat32 && dataType != ncclUint8)
    return refuse(ncclInvalidArgument,
                  "ncclBroadcast: the emulation copies float32 or uint8 only");
  if (root < 0 || root >= c->ranks)
    return refuse(ncclInvalidArgument,
                  "ncclBroadcast: root " + std::to_string(root) +
                      " is not a rank of the communicator");
  if (int r = checkStream("ncclBroadcast", c, stream))
    return r;
  const size_t bytes = count * (dataType == ncclFloat32 ? sizeof(float) : 1);
  const std::string what =
      "ncclBroadcast(rank " + std::to_string(c->rank) + ")";
  if (bytes > 0) {
    if ((c->rank == root && checkDevice(uintptr_t(send), bytes, what + " send",
                                        nullptr) != CUDA_SUCCESS) ||
        checkDevice(uintptr_t(recv), bytes, what + " recv", nullptr) !=
            CUDA_SUCCESS)
      return ncclInvalidArgument; // checkDevice said why
    if (c->rank == root)
      if (int r = checkOnCommDevice(what + " send", c, send))
        return r;
    if (int r = checkOnCommDevice(what + " recv", c, recv))
      return r;
  }
  return queue("ncclBroadcast",
               {c, static_cast<const float *>(send), static_cast<float *>(recv),
                count, stream, root, bytes});
}

} // extern "C"
